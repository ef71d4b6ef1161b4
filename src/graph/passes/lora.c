/* lora.c — the LoRA pass (see lora.h). Each rewritten matmul gets its
 * adapters' nodes right after it, and every later reader of its output reads
 * the sum instead. A fused weight (q/k/v, gate/up) is a run of parameters
 * back to back: its output's columns are theirs in the same order, so each
 * adapted part's term adds to its own columns (add_scaled's parts), and the
 * parts left alone are read as they are. */
#include <stdlib.h>
#include <string.h>

#include "graph/passes/lora.h"

/* s (drop(x) A^T) of one site: (N, r), the scale on this narrow value rather than on the layer's output */
static tt_value *down(tt_graph *g, const tt_lora_pass_cfg *c, const tt_lora_site *s, tt_value *x)
{
    /* each adapter draws its own mask (PEFT's dropout is a module an adapter's) */
    tt_value *xd = c->dropout > 0 ? tt_dropout(g, x, c->rng, c->dropout, (uint64_t)s->adapter) : x;
    return tt_scale(g, tt_matmul(g, xd, s->A, 0, 1), c->scale); // (N, r)
}

/* The A's of the parts, back to back in one adapter unit (declared so): one (n r, in) view, so that the parts'
 * down projections are one matmul of x (without dropout, where every adapter reads the same x); NULL otherwise */
static tt_value *stacked_a(tt_graph *g, const tt_lora_site *const *hit, int n)
{
    tt_value *a0 = hit[0]->A;
    int64_t rows = 0;
    for (int k = 0; k < n; k++) {
        tt_value *a = hit[k]->A;
        if (tt_value_root(a) != tt_value_root(a0) || a->dtype != a0->dtype || a->shape[1] != a0->shape[1] ||
            tt_value_root_offset(a) != tt_value_root_offset(a0) + (size_t)rows * (size_t)a0->shape[1] * tt_dtype_size(a0->dtype))
            return NULL;
        rows += a->shape[0];
    }
    tt_value *v = tt_value_view(g, tt_value_root(hit[0]->A), tt_value_root_offset(a0), a0->dtype, 2,
                                (int64_t[]){rows, a0->shape[1]});
    if (v) snprintf(v->name, sizeof v->name, "%.80s+%d", a0->name, n - 1);
    return v;
}

/* The sites inside a weight's bytes, in order, with the rows (output columns) of every part between them.
 * Returns the number of adapted parts; -1 when a site straddles the weight's edge (a fused weight that
 * takes part of an adapted one: refused, never computed wrong). */
static int parts_of(const tt_lora_pass_cfg *c, int unit, size_t off, size_t bytes, const tt_lora_site **hit, int cap)
{
    int n = 0;
    for (int i = 0; i < c->n_sites; i++) {
        const tt_lora_site *s = &c->sites[i];
        if (s->unit != unit || s->offset + s->bytes <= off || s->offset >= off + bytes) continue;
        if (s->offset < off || s->offset + s->bytes > off + bytes || n == cap) return -1;
        hit[n++] = s;
    }
    /* in byte order */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && hit[j]->offset < hit[j - 1]->offset; j--) {
            const tt_lora_site *t = hit[j];
            hit[j] = hit[j - 1];
            hit[j - 1] = t;
        }
    return n;
}

/* b starts where a ends, in one root */
static int back_to_back(tt_value *a, tt_value *b)
{
    return tt_value_root(a) == tt_value_root(b) && tt_value_root_offset(a) + tt_value_bytes(a) == tt_value_root_offset(b);
}

/* The layer's output with every adapted part's term on its columns: y + (s x A_i^T) B_i^T (N, out). The parts of
 * one module (one A, their B's rows back to back) make one term. */
static tt_value *adapted(tt_graph *g, const tt_lora_pass_cfg *c, tt_node *mm, const tt_lora_site *const *hit, int n)
{
    tt_value *x = mm->in[0], *w = mm->in[1], *d[TT_ADD_SCALED_MAX_PARTS];
    const size_t row = (size_t)w->shape[1] * tt_dtype_size(w->dtype), off = tt_value_root_offset(w);
    int c0[TT_ADD_SCALED_MAX_PARTS], terms = 0;
    if (n > TT_ADD_SCALED_MAX_PARTS)
        return tt_graph_fail(g, "lora: '%s' joins %d adapted layers, more than %d", w->name, n, TT_ADD_SCALED_MAX_PARTS);
    /* a fused weight's parts: their A's stacked, one matmul and the r columns of each part taken from it */
    tt_value *a = n > 1 && c->dropout == 0 ? stacked_a(g, hit, n) : NULL;
    tt_value *u = a ? tt_scale(g, tt_matmul(g, x, a, 0, 1), c->scale) : NULL; // (N, n r)
    for (int k = 0, at = 0, j; k < n; at += (int)hit[k]->A->shape[0], k = j) {
        const int r = (int)hit[k]->A->shape[0];
        int64_t rows = hit[k]->B->shape[0];
        for (j = k + 1; j < n && hit[j]->A == hit[k]->A && back_to_back(hit[j - 1]->B, hit[j]->B); j++)
            rows += hit[j]->B->shape[0];
        tt_value *b = hit[k]->B;
        if (j > k + 1 && !(b = tt_value_view(g, tt_value_root(b), tt_value_root_offset(b), b->dtype, 2,
                                             (int64_t[]){rows, r})))
            return NULL;
        tt_value *uk = u ? tt_head_slice(g, u, 1, (int)u->shape[1], at, r, 0, 0) : down(g, c, hit[k], x); // (N, r)
        d[terms] = tt_matmul(g, uk, b, 0, 1); // (N, rows)
        c0[terms++] = (int)((hit[k]->offset - off) / row); /* the term's first output column */
    }
    return tt_add_scaled_cols(g, mm->out[0], terms, d, c0, 1.0);
}

tt_err tt_lora_pass(tt_graph *g, const tt_lora_pass_cfg *c, int *applied)
{
    if (g->failed) return -1;
    const int n0 = g->n_nodes;
    int *found = calloc((size_t)c->n_sites + 1, sizeof *found);
    int *first = malloc(((size_t)n0 + 1) * sizeof *first), *last = malloc(((size_t)n0 + 1) * sizeof *last);
    const tt_lora_site **hit = malloc(((size_t)c->n_sites + 1) * sizeof *hit);
    tt_node **order = NULL;
    tt_err rc = found && first && last && hit ? 0 : tt_errorf("out of memory in the LoRA pass");
    int done = 0;
    for (int i = 0; i < n0 && !rc; i++) {
        tt_node *mm = g->nodes[i];
        first[i] = last[i] = g->n_nodes;
        if (mm->op != TT_OP_MATMUL || TT_ATTRS(mm, tt_matmul_attrs)->ta || !TT_ATTRS(mm, tt_matmul_attrs)->tb ||
            mm->in[1]->role != TT_ROLE_FROZEN)
            continue;
        tt_value *w = mm->in[1];
        const int n = parts_of(c, tt_value_root(w)->unit, tt_value_root_offset(w), tt_value_bytes(w), hit, c->n_sites);
        if (n < 0) {
            rc = tt_errorf("lora: the weight '%s' takes only part of an adapted layer", w->name);
            break;
        }
        if (!n) continue;
        tt_graph_set_scope(g, "%s.lora", mm->scope);
        tt_graph_set_unit(g, mm->unit);
        tt_value *y = mm->out[0], *sum = adapted(g, c, mm, hit, n);
        if (!sum) {
            rc = -1;
            break;
        }
        last[i] = g->n_nodes;
        /* every other reader of y reads the sum (the new nodes read y itself) */
        for (int j = i + 1; j < g->n_nodes; j++) {
            if (j >= first[i] && j < last[i]) continue;
            tt_node *r = g->nodes[j];
            for (int k = 0; k < r->n_in; k++)
                if (r->in[k] == y) r->in[k] = sum;
        }
        if (y->is_output) tt_graph_fail(g, "lora: '%s' is a graph output", y->name);
        for (int k = 0; k < n; k++) found[hit[k] - c->sites]++;
        done++;
    }
    tt_graph_set_unit(g, -1);
    for (int s = 0; s < c->n_sites && !rc; s++)
        if (found[s] != 1)
            rc = tt_errorf("lora: '%s' is %s", c->sites[s].module,
                           found[s] ? "read by several linear layers" : "not read as a linear layer's weight (x W^T)");
    if (!rc && !(order = malloc(((size_t)g->n_nodes + 1) * sizeof *order))) rc = tt_errorf("out of memory");
    if (!rc && done) { /* each matmul's new nodes right after it */
        int k = 0;
        for (int i = 0; i < n0; i++) {
            order[k++] = g->nodes[i];
            for (int j = first[i]; j < last[i]; j++) order[k++] = g->nodes[j];
        }
        rc = tt_graph_set_order(g, order);
    }
    if (!rc && g->failed) rc = -1;
    free(found);
    free(first);
    free(last);
    free(hit);
    free(order);
    if (!rc && applied) *applied = done;
    return rc;
}

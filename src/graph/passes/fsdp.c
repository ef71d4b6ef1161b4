/* fsdp.c — the FSDP pass and its schedule (see fsdp.h). Inserted nodes are
 * appended and anchored before an original node; one reordering at the end
 * puts each before its anchor, in creation order. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "graph/passes/fsdp.h"

typedef struct {
    tt_graph *g;
    const tt_fsdp_cfg *c;
    int n0, n_fwd;          /* original nodes, and the forward's */
    int *anchor;            /* per appended node: the original node it goes before (n0: the end) */
    int cap_anchor;
    int *unit_bucket;       /* per unit */
    tt_value *const *units, *const *grads;
    int n_units;
} fsdp_ctx;

/* Every node appended since `first` goes before original node `at`. */
static tt_err anchor_new(fsdp_ctx *x, int first, int at)
{
    const int need = x->g->n_nodes - x->n0;
    if (need > x->cap_anchor) {
        int cap = need * 2 + 16;
        int *p = realloc(x->anchor, (size_t)cap * sizeof *p);
        if (!p) return tt_errorf("out of memory in the FSDP pass");
        x->anchor = p;
        x->cap_anchor = cap;
    }
    for (int i = first; i < x->g->n_nodes; i++) x->anchor[i - x->n0] = at;
    return 0;
}

/* The unit whose root (params or grads) a view's chain ends at, or -1. */
static int unit_of_view(const fsdp_ctx *x, const tt_value *v, tt_value *const *roots)
{
    if (!v->base || !roots) return -1;
    const tt_value *r = tt_value_root((tt_value *)v);
    for (int u = 0; u < x->n_units; u++)
        if (roots[u] == r) return u;
    return -1;
}

/* The element of the flat layout where view v of unit u's root starts. */
static int64_t flat_of(const fsdp_ctx *x, int u, const tt_value *v)
{
    return x->c->unit_offset[u] + (int64_t)(tt_value_root_offset((tt_value *)v) / sizeof(float));
}

/* The bucket of unit u that holds element `flat`, or -1 (under expert
 * parallelism, another rank's experts). */
static int bucket_at(const fsdp_ctx *x, int u, int64_t flat)
{
    for (int b = x->unit_bucket[u]; b >= 0 && b < x->c->n_buckets; b++) {
        const tt_fsdp_bucket *bk = &x->c->buckets[b];
        if (u < bk->first_unit || u >= bk->first_unit + bk->n_units) break;
        if (tt_fsdp_bucket_pos(bk, flat) >= 0) return b;
    }
    return -1;
}

static int bucket_of_view(const fsdp_ctx *x, const tt_value *v, tt_value *const *roots)
{
    const int u = unit_of_view(x, v, roots);
    return u < 0 ? -1 : bucket_at(x, u, flat_of(x, u, v));
}

/* The byte offset in bucket b's gathered buffer of view v of unit u, which
 * must lie in one piece of the bucket; -1 with an error when it does not. */
static int64_t view_pos(const fsdp_ctx *x, int b, int u, const tt_value *v)
{
    const tt_fsdp_bucket *bk = &x->c->buckets[b];
    const int64_t f = flat_of(x, u, v), n = (int64_t)(tt_value_bytes(v) / sizeof(float));
    const int64_t at = tt_fsdp_bucket_pos(bk, f);
    if (at < 0 || (n > 0 && tt_fsdp_bucket_pos(bk, f + n - 1) != at + n - 1)) {
        tt_errorf("'%s' (elements %lld..%lld of the layout) is not within one piece of its bucket", v->name,
                  (long long)f, (long long)(f + n));
        return -1;
    }
    return at * (int64_t)sizeof(float);
}

/* The size and id of the group that slices bucket b. */
static int group_size_of(const tt_fsdp_cfg *c, int b) { return c->buckets[b].expert ? c->expert_shards : c->shards; }
static int group_of(const tt_fsdp_cfg *c, int b) { return c->buckets[b].expert ? TT_GROUP_EXPERT_SHARD : TT_GROUP_SHARD; }

/* The name of bucket b's first unit that has a root (LoRA's adapters have none in some units). */
static const char *bucket_name(const fsdp_ctx *x, int b)
{
    const tt_fsdp_bucket *bk = &x->c->buckets[b];
    for (int u = bk->first_unit; u < bk->first_unit + bk->n_units && u < x->n_units; u++)
        if (x->units[u]) return x->units[u]->name;
    return "unit";
}

/* Every view takes its root's role again (after roots changed under chains). */
static void fix_roles(tt_graph *g)
{
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v]->base) g->values[v]->role = tt_value_root(g->values[v])->role;
}

/* Move the direct views of the unit roots (roots[u]) in bucket b onto `onto`,
 * at their places in the bucket's order; views of views follow their bases. */
static tt_err move_views(fsdp_ctx *x, int b, tt_value *const *roots, tt_value *onto)
{
    tt_graph *g = x->g;
    for (int v = 0; v < g->n_values; v++) {
        tt_value *p = g->values[v];
        const int u = p->base ? unit_of_view(x, p, roots) : -1;
        if (u < 0 || p->base != roots[u] || bucket_at(x, u, flat_of(x, u, p)) != b) continue;
        const int64_t at = view_pos(x, b, u, p);
        if (at < 0) return -1;
        p->offset = (size_t)at;
        p->base = onto;
    }
    return 0;
}

/* Output k of n writes the whole of `root` (a state buffer) instead of a new
 * value: the view it writes. */
static tt_value *redirect(tt_graph *g, tt_node *n, int k, tt_value *root)
{
    tt_value *old = n->out[k], *v = tt_value_view(g, root, 0, root->dtype, root->ndim, root->shape);
    if (!v) return NULL;
    old->producer = NULL;
    n->out[k] = v;
    v->producer = n;
    v->out_index = k;
    return v;
}

static void set_where(tt_graph *g, const tt_node *like, int unit)
{
    snprintf(g->scope, sizeof g->scope, "%s", like ? like->scope : "fsdp");
    g->unit = unit;
}

/* A gather of bucket b's parameters before node `at`: the fp32 shard, cast to
 * the parameter dtype, all-gathered over the bucket's group (the shard group,
 * or an expert bucket's expert shard group), waited for, cast back to fp32.
 * Returns the full bucket (fp32 [padded]) readers view. A frozen base's
 * words are gathered as they are. */
static tt_value *gather(fsdp_ctx *x, int b, tt_value *shard, int at, const char *what)
{
    tt_graph *g = x->g;
    const tt_fsdp_cfg *c = x->c;
    const int first = g->n_nodes;
    const int cast = c->param_dtype != TT_F32 && !c->frozen;
    tt_value *s = cast ? tt_cast(g, shard, c->param_dtype) : shard;
    tt_value *y = s ? tt_all_gather(g, s, NULL, group_of(c, b), group_size_of(c, b), what) : NULL;
    tt_value *w = y ? tt_comm_wait(g, y) : NULL;
    tt_value *full = w && cast ? tt_cast(g, w, TT_F32) : w;
    if (!full || anchor_new(x, first, at)) return NULL;
    return full;
}

static tt_err fail_oom(void) { return tt_errorf("out of memory in the FSDP pass"); }

static void move_up(tt_node **o, int p, int ns, int t, tt_node **tmp);

/* A working copy of a graph's order (o) and scratch of its size (tmp), for
 * the passes that move nodes; reorder_end sets the new order (when apply)
 * and frees both. */
typedef struct {
    tt_node **o, **tmp;
    int n;
} reorder;

static tt_err reorder_begin(reorder *r, const tt_graph *g)
{
    r->n = g->n_nodes;
    r->o = malloc(((size_t)r->n + 1) * sizeof *r->o);
    r->tmp = malloc(((size_t)r->n + 1) * sizeof *r->tmp);
    if (!r->o || !r->tmp) {
        free(r->o), free(r->tmp);
        return fail_oom();
    }
    memcpy(r->o, g->nodes, (size_t)r->n * sizeof *r->o);
    return 0;
}

static tt_err reorder_end(reorder *r, tt_graph *g, int apply)
{
    tt_err rc = apply ? tt_graph_set_order(g, r->o) : 0;
    free(r->o), free(r->tmp);
    return rc;
}

/* The accumulations of gradients the fold pass left where autodiff put them,
 * at the end of the graph (norm weights, biases), each moved up to right
 * after what it adds (never into the forward): a bucket's gradients are then
 * complete, and reduced, as soon as its backward ends. */
static tt_err hoist_accums(tt_graph *g, int n_fwd, tt_value *const *grads, int n_units)
{
    reorder r;
    if (reorder_begin(&r, g)) return -1;
    tt_node **o = r.o, **tmp = r.tmp;
    const int n = r.n;
    int moved = 0;
    for (int i = n_fwd; i < n; i++) {
        if (o[i]->op != TT_OP_ACCUM) continue;
        const tt_value *r = tt_value_root(o[i]->in[0]);
        int u = 0;
        while (u < n_units && grads[u] != r) u++;
        if (u == n_units) continue;
        tt_node *x = o[i];
        move_up(o, i, 1, n_fwd, tmp);
        moved += o[i] != x;
    }
    return reorder_end(&r, g, moved);
}

tt_err tt_fsdp(tt_graph *g, int n_fwd, tt_value *const *units, tt_value *const *grads, int n_units,
               const tt_fsdp_cfg *c, tt_fsdp_result *res)
{
    memset(res, 0, sizeof *res);
    if (g->failed) return -1;
    if (c->frozen && grads) return tt_errorf("FSDP pass: a frozen base has no gradients");
    const int nb = c->n_buckets, n0 = g->n_nodes;
    const tt_node *last_fwd = n_fwd > 0 ? g->nodes[n_fwd - 1] : NULL; /* (hoisting keeps it the forward's last) */
    fsdp_ctx x = {.g = g, .c = c, .n0 = n0, .n_fwd = n_fwd, .units = units, .grads = grads, .n_units = n_units};
    res->param_shard = calloc((size_t)nb + 1, sizeof *res->param_shard);
    res->grad_shard = calloc((size_t)nb + 1, sizeof *res->grad_shard);
    res->grad_full = calloc((size_t)nb + 1, sizeof *res->grad_full);
    x.unit_bucket = malloc(((size_t)n_units + 1) * sizeof *x.unit_bucket);
    /* per bucket: first forward and backward readers of its params, first and last touch of its grads */
    int *fwd_first = malloc(((size_t)nb + 1) * sizeof(int)), *bwd_first = malloc(((size_t)nb + 1) * sizeof(int));
    int *g_first = malloc(((size_t)nb + 1) * sizeof(int)), *g_last = malloc(((size_t)nb + 1) * sizeof(int));
    tt_node **order = NULL;
    tt_err rc = 0;
    if (!res->param_shard || !res->grad_shard || !res->grad_full || !x.unit_bucket || !fwd_first || !bwd_first ||
        !g_first || !g_last)
        rc = fail_oom();
    for (int u = 0; u < n_units && !rc; u++) x.unit_bucket[u] = -1;
    for (int b = 0; b < nb && !rc; b++) {
        fwd_first[b] = bwd_first[b] = g_first[b] = n0;
        g_last[b] = -1;
        for (int u = c->buckets[b].first_unit; u < c->buckets[b].first_unit + c->buckets[b].n_units; u++)
            if (u >= 0 && u < n_units && x.unit_bucket[u] < 0) x.unit_bucket[u] = b; /* its first */
    }
    for (int u = 0; u < n_units && !rc; u++)
        if (x.unit_bucket[u] < 0) rc = tt_errorf("FSDP: unit %d is in no bucket", u);
    if (!rc && grads) rc = hoist_accums(g, n_fwd, grads, n_units);
    for (int i = 0; i < n0 && !rc; i++) {
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            const tt_value *v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
            int b = bucket_of_view(&x, v, units);
            if (b >= 0 && k < n->n_in) {
                if (i < n_fwd && i < fwd_first[b]) fwd_first[b] = i;
                if (i >= n_fwd && i < bwd_first[b]) bwd_first[b] = i;
            }
            if ((b = bucket_of_view(&x, v, grads)) >= 0) {
                if (i < g_first[b]) g_first[b] = i;
                if (i > g_last[b]) g_last[b] = i;
            }
        }
    }
    char saved_scope[sizeof g->scope];
    snprintf(saved_scope, sizeof saved_scope, "%s", g->scope);
    const int saved_unit = g->unit;

    /* the parameters: gathered before their first use in the forward, and
     * again for the backward where the bucket reshards after the forward */
    int last_fwd_bucket = -1;
    for (int b = 0; b < nb; b++)
        if (fwd_first[b] < n0 && (last_fwd_bucket < 0 || fwd_first[b] > fwd_first[last_fwd_bucket])) last_fwd_bucket = b;
    for (int b = 0; b < nb && !rc && c->shards > 1; b++) {
        const tt_fsdp_bucket *bk = &c->buckets[b];
        if (fwd_first[b] == n0 && bwd_first[b] == n0) continue; /* never read: nothing to gather */
        const int64_t shard_n = bk->padded / group_size_of(c, b);
        tt_value *shard = tt_value_new(g, c->frozen ? TT_ROLE_FROZEN : TT_ROLE_PARAM, TT_F32, 1, &shard_n);
        if (!shard) {
            rc = -1;
            break;
        }
        shard->unit = bk->first_unit;
        snprintf(shard->name, sizeof shard->name, "%s.%.80s", bk->expert ? "expert_shard" : "shard",
                 bucket_name(&x, b));
        res->param_shard[b] = shard;
        if (group_size_of(c, b) == 1) { /* a group of one (a rank's own experts): read in place */
            rc = move_views(&x, b, units, shard);
            continue;
        }
        char what[48];
        snprintf(what, sizeof what, "%.30s %s", bucket_name(&x, b),
                 bk->expert ? "experts" : c->frozen ? "frozen" : "params");
        const int reshard = c->reshard_after_forward == 2 || (c->reshard_after_forward == 1 && b != last_fwd_bucket);
        tt_value *full_f = NULL, *full_b = NULL;
        if (fwd_first[b] < n0) {
            set_where(g, g->nodes[fwd_first[b]], bk->first_unit);
            if (!(full_f = gather(&x, b, shard, fwd_first[b], what))) rc = -1;
        }
        if (!rc && bwd_first[b] < n0 && (reshard || !full_f)) {
            set_where(g, g->nodes[bwd_first[b]], bk->first_unit);
            if (!(full_b = gather(&x, b, shard, bwd_first[b], what))) rc = -1;
        }
        res->gathers += (full_f != NULL) + (full_b != NULL);
        if (rc) break;
        /* the backward reads views of its own gather at the same place (the
         * forward's when not resharding); then the unit's views are moved
         * onto the forward's gather (a value only the backward reads, onto
         * the backward's), and views of views follow their bases */
        if (full_b) {
            const int nv = g->n_values;
            tt_value **made = calloc((size_t)nv + 1, sizeof *made);
            if (!made) rc = fail_oom();
            for (int i = n_fwd; i < n0 && !rc; i++)
                for (int k = 0; k < g->nodes[i]->n_in && !rc; k++) {
                    tt_value *p = g->nodes[i]->in[k];
                    const int u = unit_of_view(&x, p, units);
                    if (u < 0 || bucket_at(&x, u, flat_of(&x, u, p)) != b || p->id >= nv) continue;
                    if (!made[p->id]) {
                        const int64_t at = view_pos(&x, b, u, p);
                        made[p->id] = at < 0 ? NULL : tt_value_view(g, full_b, (size_t)at, p->dtype, p->ndim, p->shape);
                        if (!made[p->id]) rc = -1;
                        else snprintf(made[p->id]->name, sizeof made[p->id]->name, "%s", p->name);
                    }
                    g->nodes[i]->in[k] = made[p->id];
                }
            free(made);
        }
        if (!rc) rc = move_views(&x, b, units, full_f ? full_f : full_b);
    }

    /* the gradients: a bucket's gradients in one buffer of its padded
     * layout, reduced after their last contribution in the graph that ends
     * an optimizer step: reduced and scattered over the shard group, summed
     * over the replicas, into the rank's gradient shard (which the optimizer
     * zeroes). Under data parallelism (one shard) the buffer is the shard
     * itself, all-reduced in place. Else it is made at zero each micro-step,
     * or, when micro-steps accumulate (grads_persistent), a state buffer
     * that the reducing graph zeroes after its reduction: one reduction per
     * optimizer step, as the gradients of the whole global batch. */
    for (int b = 0; b < nb && !rc && grads; b++) {
        const tt_fsdp_bucket *bk = &c->buckets[b];
        if (g_last[b] < 0) continue;
        const int gs = group_size_of(c, b);
        const int64_t shard_n = bk->padded / gs;
        const int u0 = bk->first_unit, dp = gs == 1; /* a group of one: the gradients go to the shard itself */
        char what[48];
        snprintf(what, sizeof what, "%.30s %s", bucket_name(&x, b), bk->expert ? "expert grads" : "grads");
        tt_value *shard = tt_value_new(g, TT_ROLE_STATE, TT_F32, 1, &shard_n), *full = shard;
        if (!shard) {
            rc = -1;
            break;
        }
        shard->unit = u0;
        snprintf(shard->name, sizeof shard->name, "grad_shard.%.80s", bucket_name(&x, b));
        res->grad_shard[b] = shard;
        if (!dp && c->grads_persistent) {
            if ((full = tt_value_new(g, TT_ROLE_STATE, TT_F32, 1, &bk->padded))) {
                full->unit = u0;
                snprintf(full->name, sizeof full->name, "grad_full.%.80s", bucket_name(&x, b));
                res->grad_full[b] = full;
            }
        } else if (!dp) {
            const int first = g->n_nodes;
            set_where(g, g->nodes[g_first[b]], u0);
            if ((full = tt_zeros(g, TT_F32, 1, &bk->padded))) {
                snprintf(full->name, sizeof full->name, "grad_bucket.%.80s", bucket_name(&x, b));
                if (anchor_new(&x, first, g_first[b])) rc = -1;
            }
        }
        if (!full || rc) {
            rc = -1;
            break;
        }
        if (move_views(&x, b, grads, full)) { /* the gradient views now view it */
            rc = -1;
            break;
        }
        if (!c->reduce || (dp && c->replicas == 1)) continue; /* nothing to reduce: the shard is the sum */
        /* the reduction, after the last contribution */
        const int first = g->n_nodes;
        set_where(g, g->nodes[g_last[b]], u0);
        tt_value *t = c->reduce_dtype != TT_F32 ? tt_cast(g, full, c->reduce_dtype) : full;
        if (t && !dp) {
            tt_value *y = tt_reduce_scatter(g, t, NULL, group_of(c, b), gs, what);
            t = y ? tt_comm_wait(g, y) : NULL;
        }
        if (t && c->replicas > 1) { /* in place: the sum over the replicas */
            tt_value *y = tt_all_reduce(g, t, tt_value_root(t), TT_GROUP_REPLICATE, TT_REDUCE_SUM, what);
            t = y ? tt_comm_wait(g, y) : NULL;
        }
        if (t && !dp) tt_accum(g, shard, t);
        else if (t && t != full && tt_value_root(t) != shard) { /* a reduction in bf16: back into the shard */
            tt_value *f = tt_cast(g, t, TT_F32);
            if (f && !redirect(g, f->producer, 0, shard)) rc = -1;
        }
        if (!t || rc || g->failed || anchor_new(&x, first, g_last[b] + 1)) {
            rc = -1;
            break;
        }
        res->reductions++;
        if (res->grad_full[b]) { /* the accumulator starts the next optimizer step at zero */
            const int zf = g->n_nodes;
            tt_value *z = tt_zeros(g, TT_F32, 1, &bk->padded);
            if (!z || !redirect(g, z->producer, 0, full) || anchor_new(&x, zf, n0)) rc = -1;
        }
    }
    snprintf(g->scope, sizeof g->scope, "%s", saved_scope);
    g->unit = saved_unit;
    fix_roles(g);
    if (!rc && g->failed) rc = -1;

    /* the new order: each appended node before its anchor, in creation order */
    const int nn = g->n_nodes;
    if (!rc && !(order = malloc((size_t)nn * sizeof *order))) rc = fail_oom();
    if (!rc) {
        int k = 0;
        for (int i = 0; i <= n0; i++) {
            for (int j = n0; j < nn; j++)
                if (x.anchor[j - n0] == i) order[k++] = g->nodes[j];
            if (i < n0) order[k++] = g->nodes[i];
        }
        rc = tt_graph_set_order(g, order);
    }
    res->n_fwd = g->n_nodes;
    for (int i = 0; i < g->n_nodes && last_fwd; i++)
        if (g->nodes[i] == last_fwd) res->n_fwd = i + 1;
    free(order);
    free(x.anchor);
    free(x.unit_bucket);
    free(fwd_first), free(bwd_first), free(g_first), free(g_last);
    if (rc) tt_fsdp_result_free(res);
    return rc ? tt_error_prefix("FSDP pass: ") : 0;
}

void tt_fsdp_result_free(tt_fsdp_result *r)
{
    free(r->param_shard);
    free(r->grad_shard);
    free(r->grad_full);
    memset(r, 0, sizeof *r);
}

/* ---- the schedule pass ----------------------------------------------------
 * It finds the collectives from the graph's structure (no side tables): a
 * start node, the cast that feeds it alone (the issue), and its wait with the
 * nodes right after it that consume what the wait completes (the done). It
 * moves a gather's issue up to the previous gather's wait, and a reduction's
 * done down past the next reduction's issue, each only as far as the nodes it
 * passes allow: it never passes a node that writes what it reads, or reads
 * or writes what it writes. */

static int node_reads(const tt_node *n, const tt_value *root)
{
    for (int k = 0; k < n->n_in; k++)
        if (tt_value_root(n->in[k]) == root) return 1;
    return 0;
}

/* Input or output k of n: the bytes [lo, hi) of root it touches, and whether it writes them. */
typedef struct {
    const tt_value *root;
    size_t lo, hi;
    int write;
} access;

static access access_of(const tt_node *n, int k)
{
    tt_value *v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
    const size_t lo = tt_value_root_offset(v);
    const int write = k >= n->n_in || (k < 32 && (tt_ops[n->op]->writes_ins >> k & 1));
    return (access){tt_value_root(v), lo, lo + tt_value_bytes(v), write};
}

/* Whether a and b must keep their relative order: one writes bytes the other
 * reads or writes (disjoint views of one buffer, as a unit's gradients are,
 * may pass each other). */
static int ordered(const tt_node *a, const tt_node *b)
{
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const access x = access_of(a, i);
        for (int j = 0; j < b->n_in + b->n_out; j++) {
            const access y = access_of(b, j);
            if (x.root == y.root && (x.write || y.write) && x.lo < y.hi && y.lo < x.hi) return 1;
        }
    }
    return 0;
}

static int set_ordered(tt_node *const *set, int ns, const tt_node *y)
{
    for (int i = 0; i < ns; i++)
        if (ordered(set[i], y)) return 1;
    return 0;
}

static int is_start(const tt_node *n) { return (tt_ops[n->op]->flags & TT_OPF_COMM) && n->op != TT_OP_COMM_WAIT; }

/* Expert parallelism's exchanges (the token counts and rows of an MoE layer,
 * on the expert group) are the model's, not FSDP's. */
static int is_exchange(const tt_node *n) { return is_start(n) && TT_ATTRS(n, tt_comm_attrs)->group == TT_GROUP_EXPERT; }

/* Move o[p, p + ns) up to position t (< p), or as near to it as allowed. */
static void move_up(tt_node **o, int p, int ns, int t, tt_node **tmp)
{
    int j = p - 1;
    while (j >= t && !set_ordered(o + p, ns, o[j])) j--;
    t = j + 1;
    if (t >= p) return;
    memcpy(tmp, o + p, (size_t)ns * sizeof *tmp);
    memmove(o + t + ns, o + t, (size_t)(p - t) * sizeof *o);
    memcpy(o + t, tmp, (size_t)ns * sizeof *tmp);
}

/* Move o[p, p + ns) down to end just after position q, or as near as allowed. */
static void move_down(tt_node **o, int p, int ns, int q, tt_node **tmp)
{
    int j = p + ns;
    while (j <= q && !set_ordered(o + p, ns, o[j])) j++;
    q = j - 1;
    if (q < p + ns) return;
    memcpy(tmp, o + p, (size_t)ns * sizeof *tmp);
    memmove(o + p, o + p + ns, (size_t)(q - p - ns + 1) * sizeof *o);
    memcpy(o + q - ns + 1, tmp, (size_t)ns * sizeof *tmp);
}

static int pos_of(tt_node *const *o, int n, const tt_node *x)
{
    for (int i = 0; i < n; i++)
        if (o[i] == x) return i;
    return -1;
}

/* The issue of start o[s]: its first position (the cast before it when the
 * cast feeds only this collective). */
static int issue_first(tt_node *const *o, int n, int s)
{
    const tt_node *c = s > 0 ? o[s - 1] : NULL;
    if (!c || c->op != TT_OP_CAST || c->out[0] != o[s]->in[0]) return s;
    const tt_value *r = tt_value_root(c->out[0]);
    for (int i = 0; i < n; i++)
        if (i != s && node_reads(o[i], r) && !(o[i]->op == TT_OP_COMM_WAIT && o[i]->in[0]->producer == o[s]))
            return s;
    return s - 1;
}

/* The done of start o[s]: its wait at *first, and how many nodes follow it
 * that consume what the run so far writes. 0 when the wait is not found. */
static int done_span(tt_node *const *o, int n, int s, int *first)
{
    int w = s + 1;
    while (w < n && !(o[w]->op == TT_OP_COMM_WAIT && o[w]->in[0]->producer == o[s])) w++;
    if (w == n) return 0;
    int e = w + 1;
    for (; e < n; e++) {
        int reads = 0;
        for (int i = w; i < e && !reads; i++)
            for (int k = 0; k < o[i]->n_out && !reads; k++) reads = node_reads(o[e], tt_value_root(o[i]->out[k]));
        if (!reads) break;
    }
    *first = w;
    return e - w;
}

tt_err tt_fsdp_schedule(tt_graph *g)
{
    reorder ro;
    if (reorder_begin(&ro, g)) return -1;
    tt_node **o = ro.o, **tmp = ro.tmp, **red = malloc(((size_t)ro.n + 1) * sizeof *red);
    const int n = ro.n;
    if (!red) {
        reorder_end(&ro, g, 0);
        return fail_oom();
    }

    /* gathers: each issued right after the previous one's wait (the first at
     * the start), so a bucket's weights arrive while the one before computes */
    const tt_node *prev_wait = NULL;
    for (int i = 0; i < n; i++) {
        if (o[i]->op != TT_OP_ALL_GATHER || is_exchange(o[i])) continue;
        const int f = issue_first(o, n, i), ns = i - f + 1;
        const int t = prev_wait ? pos_of(o, n, prev_wait) + 1 : 0;
        int w = 0;
        const tt_node *start = o[i];
        if (done_span(o, n, i, &w) == 0) continue;
        const tt_node *wait = o[w];
        move_up(o, f, ns, t, tmp);
        prev_wait = wait;
        i = pos_of(o, n, start);
    }

    /* reductions: each completed after the next one is issued, so a bucket's
     * gradients travel while the backward of the one before computes */
    int nr = 0;
    for (int i = 0; i < n; i++) {
        if (!is_start(o[i]) || o[i]->op == TT_OP_ALL_GATHER || is_exchange(o[i])) continue;
        int w = 0, nd = done_span(o, n, i, &w);
        if (nd == 0) continue;
        red[nr++] = o[i];
        i = w + nd - 1; /* collectives inside the done (a replicate all-reduce) belong to it */
    }
    for (int r = 0; r + 1 < nr; r++) {
        const int s = pos_of(o, n, red[r]);
        int w = 0, nd = done_span(o, n, s, &w);
        move_down(o, w, nd, pos_of(o, n, red[r + 1]), tmp);
    }
    /* exchanges: each completed as late as what reads it allows, so the
     * tokens travel while independent work (an MoE layer's shared experts,
     * forward and backward) computes */
    for (int i = n - 1; i >= 0; i--) {
        if (!is_exchange(o[i])) continue;
        int w = 0, nd = done_span(o, n, i, &w);
        if (nd) move_down(o, w, nd, n - 1, tmp);
    }
    free(red);
    return reorder_end(&ro, g, 1) ? tt_error_prefix("FSDP schedule: ") : 0;
}

tt_err tt_fsdp_serialize(tt_graph *g)
{
    reorder r;
    if (reorder_begin(&r, g)) return -1;
    for (int i = 0; i < r.n; i++)
        if (r.o[i]->op == TT_OP_COMM_WAIT) move_up(r.o, i, 1, pos_of(r.o, r.n, r.o[i]->in[0]->producer) + 1, r.tmp);
    return reorder_end(&r, g, 1) ? tt_error_prefix("serializing the collectives: ") : 0;
}

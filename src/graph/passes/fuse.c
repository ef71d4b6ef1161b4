/* fuse.c — the fusion pass (see fuse.h). Each rule looks at one anchor node
 * (attention, swiglu, rmsnorm), checks the exact shape of what feeds it, and
 * then builds the fused nodes at the end of the graph, moves the anchor's
 * output values onto them and marks the replaced nodes dead; one reordering
 * at the end puts each new node where the first node it replaces was. */
#include <stdlib.h>
#include <string.h>

#include "graph/passes/fuse.h"

typedef struct {
    tt_graph *g;
    int *readers;      /* per value: how many node inputs read it (outputs the host reads count once more) */
    char *dead;        /* per node id (original nodes): replaced */
    int *slot;         /* per new node (by index past n0): the original node id it takes the place of */
    int n0;            /* nodes before the pass */
} fuse_ctx;

static tt_node *producer(const tt_value *v, int op) { return v && v->producer && v->producer->op == op ? v->producer : NULL; }
/* a weight: trained, or frozen (LoRA's base) */
static int weight(const tt_value *v) { return v->role == TT_ROLE_PARAM || v->role == TT_ROLE_FROZEN; }
static int only_reader(const fuse_ctx *c, const tt_value *v) { return c->readers[v->id] == 1; }

/* b starts where a ends: two parameter views of one unit, back to back */
static int adjacent(const tt_value *a, const tt_value *b)
{
    return weight(a) && a->role == b->role && a->dtype == b->dtype && a->base && a->base == b->base &&
           a->offset + tt_value_bytes(a) == b->offset;
}

/* A param view over rows of consecutive weights: (rows, cols) where the first one starts */
static tt_value *joined_param(tt_graph *g, tt_value *first, int64_t rows, int64_t cols, int ndim, const char *what)
{
    int64_t shape[2] = {rows, cols};
    tt_value *v = tt_value_view(g, first->base, first->offset, first->dtype, ndim, shape);
    if (!v) return NULL;
    const char *dot = strrchr(first->name, '.');
    int pre = (int)(dot ? dot - first->name : (long)strlen(first->name));
    const char *prev = pre > 0 ? memrchr(first->name, '.', (size_t)pre) : NULL;
    snprintf(v->name, sizeof v->name, "%.*s.%s", prev ? (int)(prev - first->name) : pre, first->name, what);
    return v;
}

/* x W^T with W a 2-D param: the matmul node (ta = 0, tb = 1) whose only reader is the caller */
static tt_node *linear_of(const fuse_ctx *c, const tt_value *y)
{
    tt_node *m = producer(y, TT_OP_MATMUL);
    if (!m || TT_ATTRS(m, tt_matmul_attrs)->ta != 0 || TT_ATTRS(m, tt_matmul_attrs)->tb != 1 ||
        !weight(m->in[1]) || !only_reader(c, y))
        return NULL;
    return m;
}

/* Remember that the new nodes [first, g->n_nodes) go where original node `at` is. */
static int place(fuse_ctx *c, int first, int at)
{
    int *s = realloc(c->slot, (size_t)(c->g->n_nodes - c->n0 + 1) * sizeof *s);
    if (!s) return tt_errorf("out of memory in the fusion pass");
    c->slot = s;
    for (int i = first; i < c->g->n_nodes; i++) c->slot[i - c->n0] = at;
    return 0;
}

/* Moves value v (an output of a dead node) to be output k of node n; the
 * value n was built with is left without a producer. */
static void take_output(tt_node *n, int k, tt_value *v)
{
    if (n->out[k]) n->out[k]->producer = NULL;
    n->out[k] = v;
    v->producer = n;
    v->out_index = k;
}

/* ---- q, k, v ------------------------------------------------------------------ */

typedef struct {
    tt_node *rope, *bias, *mm;
} proj;

/* Peels attention input x back to rope? (bias_add?) (matmul): each step the
 * only reader of its output. want_rope: q and k must be RoPE'd, v must not. */
static int peel(const fuse_ctx *c, tt_value *x, int want_rope, proj *p)
{
    memset(p, 0, sizeof *p);
    if (want_rope) {
        if (!(p->rope = producer(x, TT_OP_ROPE)) || TT_ATTRS(p->rope, tt_rope_attrs)->inverse || !only_reader(c, x))
            return 0;
        x = p->rope->in[0];
    }
    if ((p->bias = producer(x, TT_OP_BIAS_ADD))) {
        if (!only_reader(c, x) || !weight(p->bias->in[1])) return 0;
        x = p->bias->in[0];
    }
    return (p->mm = linear_of(c, x)) != NULL;
}

static tt_err fuse_qkv(fuse_ctx *c, tt_node *at, tt_fuse_stats *st)
{
    tt_graph *g = c->g;
    proj p[3];
    int rope = producer(at->in[0], TT_OP_ROPE) != NULL;
    if (!peel(c, at->in[0], rope, &p[0]) || !peel(c, at->in[1], rope, &p[1]) || !peel(c, at->in[2], 0, &p[2])) return 0;
    tt_value *h = p[0].mm->in[0], *w[3], *b[3];
    for (int i = 0; i < 3; i++) {
        w[i] = p[i].mm->in[1];
        b[i] = p[i].bias ? p[i].bias->in[1] : NULL;
        if (p[i].mm->in[0] != h || (!b[i]) != (!b[0])) return 0;
    }
    if (!adjacent(w[0], w[1]) || !adjacent(w[1], w[2]) || (b[0] && (!adjacent(b[0], b[1]) || !adjacent(b[1], b[2]))))
        return 0;
    const int64_t D = w[0]->shape[1], rows = w[0]->shape[0] + w[1]->shape[0] + w[2]->shape[0];
    const tt_attn_attrs *aa = TT_ATTRS(at, tt_attn_attrs);
    const int B = aa->B, T = aa->T, H = aa->H, Hk = aa->Hk, hd = aa->hd;
    /* attention_qkv: 1 / sqrt(hd), values as wide as keys, no cap, no sinks */
    if (aa->softmax_scale > 0 || aa->hdv || aa->softcap > 0 || at->n_in > 4) return 0;
    if (rope) { /* one rotation for q and k: same positions, frequencies and scale, the attention's heads */
        const tt_node *rq = p[0].rope, *rk = p[1].rope;
        const tt_rope_attrs *q = TT_ATTRS(rq, tt_rope_attrs), *k = TT_ATTRS(rk, tt_rope_attrs);
        if (rq->in[1] != rk->in[1] || rq->in[2] != rk->in[2] || q->scale != k->scale || q->H != H || k->H != Hk ||
            q->hd != hd || k->hd != hd || q->rot || k->rot) /* attention_qkv rotates whole heads */
            return 0;
    }
    if (rows != (int64_t)(H + 2 * Hk) * hd || w[1]->shape[1] != D || w[2]->shape[1] != D) return 0;
    const int first = g->n_nodes;
    snprintf(g->scope, sizeof g->scope, "%s", p[0].mm->scope); g->unit = p[0].mm->unit;
    tt_value *wqkv = joined_param(g, w[0], rows, D, 2, "wqkv.weight");
    tt_value *qkv = wqkv ? tt_matmul(g, h, wqkv, 0, 1) : NULL;
    if (qkv && b[0]) {
        tt_value *bqkv = joined_param(g, b[0], rows, 0, 1, "wqkv.bias");
        qkv = bqkv ? tt_bias_add(g, qkv, bqkv) : NULL;
    }
    snprintf(g->scope, sizeof g->scope, "%s", at->scope); g->unit = at->unit;
    tt_value *o = qkv ? tt_attention_qkv(g, qkv, at->in[3], rope ? p[0].rope->in[1] : NULL,
                                         rope ? p[0].rope->in[2] : NULL, rope ? TT_ATTRS(p[0].rope, tt_rope_attrs)->scale : 0,
                                         B, T, H, Hk, hd, aa->window)
                      : NULL;
    if (!o) return -1;
    /* the new attention node gives out the old one's output values */
    tt_node *na = g->nodes[g->n_nodes - 1];
    take_output(na, 0, at->out[0]);
    take_output(na, 1, at->out[1]);
    c->dead[at->id] = 1;
    for (int i = 0; i < 3; i++) {
        c->dead[p[i].mm->id] = 1;
        if (p[i].bias) c->dead[p[i].bias->id] = 1;
        if (p[i].rope) c->dead[p[i].rope->id] = 1;
    }
    /* the matmul goes where q's was; the attention where the old attention was */
    if (place(c, first, p[0].mm->id)) return -1;
    c->slot[g->n_nodes - 1 - c->n0] = at->id;
    st->qkv++;
    return 0;
}

/* ---- gate / up ------------------------------------------------------------------ */

static tt_err fuse_gate_up(fuse_ctx *c, tt_node *sw, tt_fuse_stats *st)
{
    tt_graph *g = c->g;
    tt_node *a = linear_of(c, sw->in[0]), *b = linear_of(c, sw->in[1]);
    if (!a || !b || a->in[0] != b->in[0] || !adjacent(a->in[1], b->in[1])) return 0;
    tt_value *w1 = a->in[1], *w3 = b->in[1];
    if (w1->shape[0] != w3->shape[0] || w1->shape[1] != w3->shape[1]) return 0;
    const int first = g->n_nodes;
    snprintf(g->scope, sizeof g->scope, "%s", a->scope); g->unit = a->unit;
    tt_value *w13 = joined_param(g, w1, 2 * w1->shape[0], w1->shape[1], 2, "w13.weight");
    tt_value *gu = w13 ? tt_matmul(g, a->in[0], w13, 0, 1) : NULL;
    snprintf(g->scope, sizeof g->scope, "%s", sw->scope); g->unit = sw->unit;
    if (!gu || !tt_swiglu_fused(g, gu)) return -1;
    take_output(g->nodes[g->n_nodes - 1], 0, sw->out[0]);
    c->dead[sw->id] = c->dead[a->id] = c->dead[b->id] = 1;
    if (place(c, first, a->id)) return -1;
    c->slot[g->n_nodes - 1 - c->n0] = sw->id;
    st->gate_up++;
    return 0;
}

/* ---- add + rmsnorm -------------------------------------------------------------- */

static tt_err fuse_add_norm(fuse_ctx *c, tt_node *nm, tt_fuse_stats *st)
{
    tt_graph *g = c->g;
    tt_node *ad = producer(nm->in[0], TT_OP_ADD);
    const tt_value *x = nm->in[0];
    if (!ad || c->dead[ad->id] || x->ndim != 2 || TT_ATTRS(nm, tt_norm_attrs)->group != x->shape[1])
        return 0; /* full rows only */
    /* the fused node takes the add's place: the norm's weight must exist by then (Gemma's 1 + w is computed) */
    const tt_node *wp = nm->in[1]->producer;
    if (wp && wp->id > ad->id) return 0;
    const int first = g->n_nodes;
    snprintf(g->scope, sizeof g->scope, "%s", ad->scope); g->unit = ad->unit;
    tt_value *y = NULL;
    if (!tt_add_rmsnorm(g, ad->in[0], ad->in[1], nm->in[1], TT_ATTRS(nm, tt_norm_attrs)->eps, &y)) return -1;
    tt_node *f = g->nodes[g->n_nodes - 1];
    take_output(f, 0, ad->out[0]);
    take_output(f, 1, nm->out[0]);
    take_output(f, 2, nm->out[1]);
    c->dead[ad->id] = c->dead[nm->id] = 1;
    if (place(c, first, ad->id)) return -1;
    st->add_norm++;
    return 0;
}

tt_err tt_fuse(tt_graph *g, tt_fuse_stats *stats)
{
    tt_fuse_stats st = {0};
    if (g->failed) return -1;
    fuse_ctx c = {.g = g, .n0 = g->n_nodes};
    c.readers = calloc((size_t)g->n_values + 1, sizeof *c.readers);
    c.dead = calloc((size_t)g->n_nodes + 1, 1);
    tt_node **order = NULL;
    tt_err rc = !c.readers || !c.dead ? tt_errorf("out of memory in the fusion pass") : 0;
    for (int i = 0; i < g->n_nodes && !rc; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) c.readers[g->nodes[i]->in[k]->id]++;
    for (int v = 0; v < g->n_values && !rc; v++)
        if (g->values[v]->is_output) c.readers[v]++;
    char saved[sizeof g->scope];
    snprintf(saved, sizeof saved, "%s", g->scope);
    const int saved_unit = g->unit;
    for (int i = 0; i < c.n0 && !rc; i++) {
        tt_node *n = g->nodes[i];
        if (c.dead[i]) continue;
        if (n->op == TT_OP_ATTENTION) rc = fuse_qkv(&c, n, &st);
        else if (n->op == TT_OP_SWIGLU && !tt_swiglu_is_fused(n)) rc = fuse_gate_up(&c, n, &st);
        else if (n->op == TT_OP_RMSNORM) rc = fuse_add_norm(&c, n, &st);
    }
    snprintf(g->scope, sizeof g->scope, "%s", saved);
    g->unit = saved_unit;
    if (!rc && g->failed) rc = -1;
    /* the new order: the live original nodes, each new node right before the one it stands in for */
    const int nn = g->n_nodes;
    if (!rc && !(order = malloc((size_t)nn * sizeof *order))) rc = tt_errorf("out of memory in the fusion pass");
    if (!rc) {
        int k = 0;
        for (int i = 0; i < c.n0; i++) {
            for (int j = c.n0; j < nn; j++)
                if (c.slot[j - c.n0] == i) order[k++] = g->nodes[j];
            if (!c.dead[i]) order[k++] = g->nodes[i];
        }
        rc = tt_graph_set_nodes(g, order, k);
    }
    free(order);
    free(c.readers);
    free(c.dead);
    free(c.slot);
    if (!rc && stats) *stats = st;
    return rc;
}

/* ep.c — the expert-parallel pass (see ep.h): each marked MoE layer's
 * dispatch and combine become exchanges over the expert group, and its
 * experts run on this rank's experts and the rows it receives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes/ep.h"
#include "models/moe.h"

/* One MoE layer as the model marked it: the dispatched rows xs (M, D) and
 * their offsets (E+1), the rows ys (M, D) the combine reads; the node that
 * makes xs, and the experts' nodes between (`in`: per node, 1 when ys
 * depends on it). */
typedef struct {
    tt_value *xs, *off, *ys;
    int at;      /* the position of xs's producer */
    int n;       /* the graph's nodes before the pass adds any */
    char *in;    /* per node of those */
} layer;

static int pos_of(const tt_graph *g, const tt_node *n)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == n) return i;
    return -1;
}

/* The value of unit u that `is` marks, made by a node of the graph; NULL
 * with an error unless there is exactly one. */
static tt_value *marked(tt_graph *g, int u, int (*is)(const tt_value *), const char *what)
{
    tt_value *found = NULL;
    for (int v = 0; v < g->n_values; v++) {
        tt_value *x = g->values[v];
        if (!is(x) || !x->producer || x->producer->unit != u) continue;
        if (found) return tt_errorf("EP pass: unit %d has more than one MoE %s", u, what), NULL;
        found = x;
    }
    if (!found) tt_errorf("EP pass: the MoE layer of unit %d has no %s", u, what);
    return found;
}

static int reads(const tt_node *n, const tt_value *v)
{
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] == v) return 1;
    return 0;
}

/* The experts' nodes: those after xs's producer that ys depends on. Each
 * must read only xs, the offsets, weights or values the experts made, and
 * make rows (M, .); no other node may read what they make but ys. */
static tt_err find_experts(tt_graph *g, layer *L)
{
    const int end = pos_of(g, L->ys->producer);
    if (end <= L->at) return tt_errorf("EP pass: %s: the combined rows come before the dispatch", g->nodes[L->at]->scope);
    L->in[end] = 1;
    for (int i = end; i > L->at; i--) {
        if (!L->in[i]) continue;
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            tt_value *v = n->in[k];
            if (v == L->xs || v == L->off || v->role == TT_ROLE_PARAM) continue;
            const int p = v->producer ? pos_of(g, v->producer) : -1;
            if (p <= L->at)
                return tt_errorf("EP pass: %s: the experts' %s reads a value from before the dispatch", n->scope,
                                 tt_op_name(n->op));
            L->in[p] = 1;
        }
    }
    for (int i = L->at + 1; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in && !L->in[i]; k++) {
            const tt_value *v = n->in[k];
            if (v != L->ys && v->producer && L->in[pos_of(g, v->producer)])
                return tt_errorf("EP pass: %s: %s reads the experts' rows before they are combined", n->scope,
                                 tt_op_name(n->op));
        }
        for (int k = 0; k < n->n_out && L->in[i]; k++)
            if (n->out[k]->ndim < 1 || n->out[k]->shape[0] != L->xs->shape[0])
                return tt_errorf("EP pass: %s: the experts' %s does not make rows", n->scope, tt_op_name(n->op));
    }
    return 0;
}

/* Run the experts on this rank's experts and on the R rows xe (R, D) it
 * receives, ordered by local expert with offsets loc: the experts' weight
 * stacks (E, r, c) become views of this rank's El of them, the offsets
 * loc's, and every row value R rows long. */
static tt_err retarget(tt_graph *g, const layer *L, const tt_ep_cfg *c, tt_value *xe, tt_value *loc, int64_t R)
{
    const int64_t E = tt_value_numel(L->off) - 1, El = E / c->ep;
    for (int i = L->at + 1; i < L->n; i++) {
        if (!L->in[i]) continue;
        tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++) {
            tt_value *v = n->in[k];
            if (v == L->xs) n->in[k] = xe;
            else if (v == L->off) n->in[k] = loc;
            else if (v->role == TT_ROLE_PARAM) {
                /* the weights' (E, r, c) and the biases' (E, c) stacks */
                if ((v->ndim == 3 || v->ndim == 2) && v->shape[0] == El) continue; /* narrowed already: read twice */
                if ((v->ndim != 3 && v->ndim != 2) || v->shape[0] != E)
                    return tt_errorf("EP pass: %s: the experts read a weight that is no stack of %lld experts",
                                     n->scope, (long long)E);
                for (int j = 0; j < L->n; j++)
                    if (!L->in[j] && reads(g->nodes[j], v))
                        return tt_errorf("EP pass: %s: the experts' weights are read elsewhere", n->scope);
                const int64_t each = tt_value_numel(v) / E; /* one expert's elements */
                v->offset += (size_t)(c->rank * El) * (size_t)each * tt_dtype_size(v->dtype);
                v->shape[0] = El;
            }
        }
        for (int k = 0; k < n->n_out; k++) n->out[k]->shape[0] = R;
    }
    return 0;
}

/* Rewrite one layer; the nodes it adds are appended, then put in place. */
static tt_err rewrite(tt_graph *g, layer *L, const tt_ep_cfg *c)
{
    const tt_node *at = g->nodes[L->at];
    const int64_t E = tt_value_numel(L->off) - 1, M = L->xs->shape[0], D = L->xs->shape[1];
    if (L->xs->ndim != 2 || E % c->ep)
        return tt_errorf("EP pass: %s: %lld experts over %d ranks", at->scope, (long long)E, c->ep);
    /* the receive buffer: the worst case (every rank's rows all for this rank's experts), or the bound */
    int64_t R = (int64_t)c->ep * M;
    if (c->recv_factor > 0 && (int64_t)ceil(c->recv_factor * (double)M) < R) R = (int64_t)ceil(c->recv_factor * (double)M);
    const int n0 = g->n_nodes;
    snprintf(g->scope, sizeof g->scope, "%s", at->scope);
    g->unit = at->unit;
    char what[48];
    snprintf(what, sizeof what, "%.36s counts", g->scope);
    tt_value *offs = tt_all_gather(g, L->off, NULL, c->group, c->ep, what);
    tt_value *offs_all = offs ? tt_comm_wait(g, offs) : NULL; // (ep*(E+1)) i32
    const tt_moe_ep_attrs pa = {(int)E, c->ep, c->rank, D, R};
    tt_value *cnt[4] = {0}, *loc = NULL, *to_src = NULL, *to_exp = NULL;
    if (!offs_all || tt_moe_ep_plan(g, offs_all, &pa, cnt, &loc, &to_src, &to_exp)) return -1;
    snprintf(what, sizeof what, "%.34s dispatch", g->scope);
    tt_value *sent = tt_all_to_allv(g, L->xs, cnt[0], cnt[1], cnt[2], cnt[3], R * D, c->group, what);
    const int n_start = g->n_nodes;                                  /* the exchange is on its way */
    tt_value *xr = sent ? tt_comm_wait(g, sent) : NULL;              // (R, D) by source rank
    tt_value *xe = xr ? tt_row_gather(g, xr, to_src, to_exp) : NULL; // (R, D) by local expert
    const int n_arrived = g->n_nodes;
    if (!xe || retarget(g, L, c, xe, loc, R)) return -1;
    tt_value *yr = tt_row_gather(g, L->ys, to_exp, to_src); // (R, D) by source rank again
    snprintf(what, sizeof what, "%.35s combine", g->scope);
    tt_value *back = yr ? tt_all_to_allv(g, yr, cnt[2], cnt[3], cnt[0], cnt[1], M * D, c->group, what) : NULL;
    tt_value *yb = back ? tt_comm_wait(g, back) : NULL; // (M, D) as xs
    if (!yb || g->failed) return -1;
    /* the combine reads the rows that came back; the order: xs's producer, the
     * exchange's start, the nodes that do not need the experts (the shared
     * experts), its wait, the experts, the way back, the combine */
    int first_reader = -1;
    for (int i = L->at + 1; i < n0; i++) {
        tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in && !L->in[i]; k++)
            if (n->in[k] == L->ys) n->in[k] = yb, first_reader = first_reader < 0 ? i : first_reader;
    }
    if (first_reader < 0) return tt_errorf("EP pass: %s: nothing combines the experts' rows", at->scope);
    tt_node **order = malloc((size_t)g->n_nodes * sizeof *order);
    if (!order) return tt_errorf("out of memory in the EP pass");
    int k = 0;
    for (int i = 0; i <= L->at; i++) order[k++] = g->nodes[i];
    for (int i = n0; i < n_start; i++) order[k++] = g->nodes[i];
    for (int i = L->at + 1; i < first_reader; i++)
        if (!L->in[i]) order[k++] = g->nodes[i];
    for (int i = n_start; i < n_arrived; i++) order[k++] = g->nodes[i];
    for (int i = L->at + 1; i < first_reader; i++)
        if (L->in[i]) order[k++] = g->nodes[i];
    for (int i = n_arrived; i < g->n_nodes; i++) order[k++] = g->nodes[i];
    for (int i = first_reader; i < n0; i++) order[k++] = g->nodes[i];
    tt_err rc = tt_graph_set_order(g, order);
    free(order);
    return rc;
}

tt_err tt_ep(tt_graph *g, const tt_ep_cfg *c)
{
    if (c->ep <= 1) return 0;
    char saved_scope[sizeof g->scope];
    memcpy(saved_scope, g->scope, sizeof g->scope);
    const int saved_unit = g->unit;
    tt_err rc = 0;
    /* layer by layer in graph order: each rewrite moves nodes, so positions are found again */
    for (int v = 0; v < g->n_values && !rc; v++) {
        tt_value *xs = g->values[v];
        if (!tt_moe_is_dispatch(xs) || !xs->producer) continue;
        const int u = xs->producer->unit;
        layer L = {xs, marked(g, u, tt_moe_is_offsets, "offsets"), marked(g, u, tt_moe_is_combine, "combine"),
                   pos_of(g, xs->producer), g->n_nodes, calloc((size_t)g->n_nodes + 1, 1)};
        if (!L.off || !L.ys) rc = -1;
        else if (!L.in) rc = tt_errorf("out of memory in the EP pass");
        else if (!(rc = find_experts(g, &L))) rc = rewrite(g, &L, c);
        free(L.in);
    }
    memcpy(g->scope, saved_scope, sizeof g->scope);
    g->unit = saved_unit;
    return rc;
}

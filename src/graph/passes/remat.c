/* remat.c — activation checkpointing: recompute each transformer block's
 * activations in the backward (clones of its forward nodes) instead of
 * keeping them alive from the forward. */
#include <stdlib.h>
#include <string.h>

#include "graph/passes/remat.h"

const char *tt_ac_mode_name(tt_ac_mode mode)
{
    return mode == TT_AC_SELECTIVE ? "selective" : mode == TT_AC_FULL ? "full" : "none";
}

/* The transformer block a node belongs to: its unit, when the model said
 * that unit is a block; -1 otherwise (embeddings, head, loss, optimizer). */
static int block_of(const tt_graph *g, const tt_node *n)
{
    return n->unit >= 0 && n->unit < g->n_units && g->units[n->unit].block ? n->unit : -1;
}

/* Whether a node of this op may be recomputed under the mode: the op table
 * says which ops are pure functions of their inputs, and which of those
 * selective checkpointing keeps (matmuls, attention). Anything that writes
 * state, the loss (whose forward also makes gradients) and ops not marked
 * pure stay saved. */
static int recomputable(int op, tt_ac_mode mode)
{
    const unsigned f = tt_ops[op]->flags;
    return (f & TT_OPF_PURE) && (mode == TT_AC_FULL || !(f & TT_OPF_KEEP_SELECTIVE));
}

/* A block boundary under full checkpointing: the fused add_rmsnorm that ends block b writes the
 * residual sum y and its norm h, and block b2 (the next) reads both, so both would be saved for
 * the backward. The norm is a function of y alone, computed as the two ops would (the rounded sum
 * normalised), so b2's recomputation rebuilds h with a plain rmsnorm of y instead: only y is saved,
 * one value of B x T x C a block less, and the numbers are the same bit for bit. Returns b2, or -1
 * when v is not such a norm (read by forward nodes of more than one other block, say). */
static int renorm_block(const tt_graph *g, int n_fwd, const int *blk, const char *exported, const tt_node *n, int i)
{
    if (n->op != TT_OP_ADD_RMSNORM || blk[i] < 0 || !exported[n->out[1]->id] || !exported[n->out[0]->id]) return -1;
    int b2 = -1;
    for (int j = i + 1; j < n_fwd; j++)
        for (int k = 0; k < g->nodes[j]->n_in; k++)
            if (g->nodes[j]->in[k] == n->out[1]) {
                if (blk[j] < 0 || blk[j] == blk[i] || (b2 >= 0 && blk[j] != b2)) return -1;
                b2 = blk[j];
            }
    return b2;
}

/* Scratch arrays of one run of the pass. */
typedef struct {
    int *blk;         /* per forward node: its block, or -1 */
    int *vblk;        /* per value: the block of its forward producer, or -1 */
    char *exported;   /* per value: read by a forward node of another block (or none): stays saved */
    char *remat;      /* per value: produced by a recomputable node of a block, not exported */
    char *need;       /* per value: a remat value something after the forward reads (maybe through clones) */
    char *clone;      /* per forward node: gets a clone */
    tt_value **map;   /* per original value: its clone */
    int *renorm;      /* per value: the block that rebuilds it with an rmsnorm of the sum beside it, or -1 */
    int *ins;         /* per block: position of the first node reading its clones (-1: none) */
    int *first, *end; /* per block: its clones' range among the appended nodes */
    tt_node **order;
} scratch;

static void scratch_free(scratch *s)
{
    free(s->blk);
    free(s->vblk);
    free(s->exported);
    free(s->remat);
    free(s->need);
    free(s->clone);
    free(s->map);
    free(s->renorm);
    free(s->ins);
    free(s->first);
    free(s->end);
    free(s->order);
}

tt_err tt_remat(tt_graph *g, int n_fwd, tt_ac_mode mode, tt_remat_stats *stats)
{
    tt_remat_stats st = {0};
    if (stats) *stats = st;
    if (g->failed) return -1;
    if (n_fwd < 0 || n_fwd > g->n_nodes) return tt_errorf("remat: %d forward nodes in a graph of %d", n_fwd, g->n_nodes);
    if (mode != TT_AC_NONE && mode != TT_AC_SELECTIVE && mode != TT_AC_FULL)
        return tt_errorf("remat: unknown activation checkpointing mode %d", (int)mode);
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->id != i) return tt_errorf("remat: node ids are not positions (node %d has id %d)", i, g->nodes[i]->id);
        st.graph_flops += tt_ops[g->nodes[i]->op]->flops(g->nodes[i]);
    }
    if (stats) stats->graph_flops = st.graph_flops;
    if (mode == TT_AC_NONE) return 0;

    int nn = g->n_nodes, nv = g->n_values, n_blocks = 0;
    scratch s = {0};
    s.blk = malloc((size_t)(n_fwd + 1) * sizeof *s.blk);
    s.vblk = malloc((size_t)(nv + 1) * sizeof *s.vblk);
    s.exported = calloc((size_t)nv + 1, 1);
    s.remat = calloc((size_t)nv + 1, 1);
    s.need = calloc((size_t)nv + 1, 1);
    s.clone = calloc((size_t)n_fwd + 1, 1);
    s.map = calloc((size_t)nv + 1, sizeof *s.map);
    s.renorm = malloc(((size_t)nv + 1) * sizeof *s.renorm);
    if (!s.blk || !s.vblk || !s.exported || !s.remat || !s.need || !s.clone || !s.map || !s.renorm) {
        scratch_free(&s);
        return tt_errorf("out of memory in the remat pass");
    }

    /* which block made each value, and which leave their block in the forward */
    for (int v = 0; v < nv; v++) s.vblk[v] = -1;
    for (int i = 0; i < n_fwd; i++) {
        const tt_node *n = g->nodes[i];
        s.blk[i] = block_of(g, n);
        if (s.blk[i] >= n_blocks) n_blocks = s.blk[i] + 1;
        for (int k = 0; k < n->n_out; k++) s.vblk[n->out[k]->id] = s.blk[i];
        for (int k = 0; k < n->n_in; k++) {
            const tt_value *x = n->in[k];
            if (s.vblk[x->id] >= 0 && s.vblk[x->id] != s.blk[i]) s.exported[x->id] = 1;
        }
    }
    for (int i = 0; i < n_fwd; i++) {
        const tt_node *n = g->nodes[i];
        if (s.blk[i] < 0 || !recomputable(n->op, mode)) continue;
        for (int k = 0; k < n->n_out; k++)
            if (!s.exported[n->out[k]->id]) s.remat[n->out[k]->id] = 1;
    }
    /* block boundaries whose norm the next block rebuilds (full checkpointing): the norm becomes one of
     * that block's recomputed values */
    for (int v = 0; v < nv; v++) s.renorm[v] = -1;
    for (int i = 0; i < n_fwd && mode == TT_AC_FULL; i++) {
        const tt_node *n = g->nodes[i];
        const int b2 = renorm_block(g, n_fwd, s.blk, s.exported, n, i);
        if (b2 < 0) continue;
        s.renorm[n->out[1]->id] = b2;
        s.remat[n->out[1]->id] = 1;
    }

    /* what the nodes after the forward read, then (walking the forward
     * backwards) what recomputing that reads in turn */
    for (int i = n_fwd; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++)
            if (s.remat[g->nodes[i]->in[k]->id]) s.need[g->nodes[i]->in[k]->id] = 1;
    for (int i = n_fwd - 1; i >= 0; i--) {
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_out; k++) s.clone[i] |= s.need[n->out[k]->id] && s.renorm[n->out[k]->id] < 0;
        if (!s.clone[i]) continue;
        for (int k = 0; k < n->n_in; k++)
            if (s.remat[n->in[k]->id]) s.need[n->in[k]->id] = 1;
    }

    /* each block's clones go before the first node after the forward that reads one */
    s.ins = malloc((size_t)(n_blocks + 1) * sizeof *s.ins);
    s.first = calloc((size_t)n_blocks + 1, sizeof *s.first);
    s.end = calloc((size_t)n_blocks + 1, sizeof *s.end);
    if (!s.ins || !s.first || !s.end) {
        scratch_free(&s);
        return tt_errorf("out of memory in the remat pass");
    }
    for (int b = 0; b < n_blocks; b++) s.ins[b] = -1;
    for (int i = n_fwd; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_in; k++) {
            const tt_value *x = g->nodes[i]->in[k];
            const int b = s.renorm[x->id] >= 0 ? s.renorm[x->id] : s.vblk[x->id];
            if (s.need[x->id] && s.ins[b] < 0) s.ins[b] = i;
        }

    /* clone block by block, in forward order, so each block's clones are one
     * contiguous, topologically ordered run of the appended nodes */
    char saved_scope[sizeof g->scope];
    snprintf(saved_scope, sizeof saved_scope, "%s", g->scope);
    const int saved_unit = g->unit;
    for (int b = 0; b < n_blocks && !g->failed; b++) {
        s.first[b] = s.end[b] = g->n_nodes;
        if (s.ins[b] < 0) continue;
        /* first the norms this block rebuilds from the sums it was given */
        for (int i = 0; i < n_fwd && !g->failed; i++) {
            const tt_node *n = g->nodes[i];
            if (n->op != TT_OP_ADD_RMSNORM || s.renorm[n->out[1]->id] != b || !s.need[n->out[1]->id]) continue;
            snprintf(g->scope, sizeof g->scope, "%.57s.remat", n->scope);
            g->unit = b;
            tt_value *h = tt_rmsnorm(g, n->out[0], n->in[2], TT_ATTRS(n, tt_norm_attrs)->eps);
            if (!h) break;
            s.map[n->out[1]->id] = h;
            st.nodes++;
            st.flops += tt_ops[h->producer->op]->flops(h->producer);
        }
        for (int i = 0; i < n_fwd && !g->failed; i++) {
            if (!s.clone[i] || s.blk[i] != b) continue;
            const tt_node *n = g->nodes[i];
            tt_value **in = calloc((size_t)n->n_in + 1, sizeof *in);
            if (!in) {
                tt_graph_fail(g, "out of memory in the remat pass");
                break;
            }
            for (int k = 0; k < n->n_in; k++) in[k] = s.map[n->in[k]->id] ? s.map[n->in[k]->id] : n->in[k];
            tt_node *c = tt_node_clone(g, n, in);
            free(in);
            if (!c) break;
            snprintf(c->scope, sizeof c->scope, "%.57s.remat", n->scope);
            for (int k = 0; k < n->n_out; k++)
                if (s.remat[n->out[k]->id] && s.renorm[n->out[k]->id] < 0) s.map[n->out[k]->id] = c->out[k];
            st.nodes++;
            st.flops += tt_ops[c->op]->flops(c);
        }
        s.end[b] = g->n_nodes;
        st.blocks++;
    }
    snprintf(g->scope, sizeof g->scope, "%s", saved_scope);
    g->unit = saved_unit;
    if (g->failed) {
        scratch_free(&s);
        return -1;
    }

    /* rewire: after the forward, read the clones */
    for (int i = n_fwd; i < nn; i++) {
        tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->id < nv && s.remat[n->in[k]->id] && s.map[n->in[k]->id]) n->in[k] = s.map[n->in[k]->id];
    }

    /* the new order: forward, then the rest with each block's clones spliced in */
    s.order = malloc((size_t)g->n_nodes * sizeof *s.order);
    if (!s.order) {
        scratch_free(&s);
        return tt_errorf("out of memory in the remat pass");
    }
    int k = 0;
    for (int i = 0; i < nn; i++) {
        for (int b = 0; b < n_blocks; b++)
            if (s.ins[b] == i)
                for (int j = s.first[b]; j < s.end[b]; j++) s.order[k++] = g->nodes[j];
        s.order[k++] = g->nodes[i];
    }
    tt_err rc = k == g->n_nodes ? tt_graph_set_order(g, s.order) : tt_errorf("remat: lost track of %d nodes", g->n_nodes - k);
    scratch_free(&s);
    if (rc) {
        g->failed = 1;
        return tt_error_prefix("remat: ");
    }
    if (stats) *stats = st;
    return 0;
}

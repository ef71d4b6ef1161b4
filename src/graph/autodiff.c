/* autodiff.c — walks the forward nodes in reverse, asks each op's backward
 * rule to emit its gradient nodes, and sums gradients that fan in. Only what
 * a requested gradient needs is kept: a node none of whose inputs depends on
 * a wrt value emits nothing, and backward nodes whose outputs nothing reads
 * (a frozen weight's gradient, LoRA's base) are removed. */
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"

/* Removes the backward nodes (from n_fwd on) whose outputs no kept node reads,
 * no gradient of grads[] is, and the host does not read: a backward rule
 * emits every input's gradient, and those of values autodiff drops (frozen
 * weights, inputs) would otherwise run for nothing. */
static tt_err prune(tt_graph *g, int n_fwd, int n, tt_value *const *grads)
{
    char *live = calloc((size_t)g->n_values + 1, 1);
    char *keep = calloc((size_t)g->n_nodes + 1, 1);
    tt_node **order = malloc(((size_t)g->n_nodes + 1) * sizeof *order);
    tt_err rc = live && keep && order ? 0 : tt_errorf("out of memory in autodiff");
    for (int i = 0; i < n && !rc; i++)
        if (grads[i]) live[grads[i]->id] = live[tt_value_root(grads[i])->id] = 1;
    int k = 0, cut = 0;
    for (int i = g->n_nodes - 1; i >= 0 && !rc; i--) {
        const tt_node *nd = g->nodes[i];
        int kept = i < n_fwd || tt_ops[nd->op]->writes_ins || (tt_ops[nd->op]->flags & TT_OPF_COMM);
        for (int o = 0; o < nd->n_out && !kept; o++)
            kept = nd->out[o]->is_output || live[nd->out[o]->id] || live[tt_value_root(nd->out[o])->id];
        if (!kept) {
            cut++;
            continue;
        }
        keep[i] = 1;
        if (i >= n_fwd)
            for (int j = 0; j < nd->n_in; j++) live[nd->in[j]->id] = live[tt_value_root(nd->in[j])->id] = 1;
    }
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (keep[i]) order[k++] = g->nodes[i];
    if (!rc && cut) rc = tt_graph_set_nodes(g, order, k);
    free(live);
    free(keep);
    free(order);
    return rc;
}

tt_err tt_autodiff(tt_graph *g, int n_loss, tt_value *const *losses, int n, tt_value *const *wrt, tt_value **grads)
{
    if (g->failed) return -1;
    int n_fwd = g->n_nodes, max_in = 1, max_out = 1;
    for (int i = 0; i < n_fwd; i++) {
        if (g->nodes[i]->n_in > max_in) max_in = g->nodes[i]->n_in;
        if (g->nodes[i]->n_out > max_out) max_out = g->nodes[i]->n_out;
    }
    /* grad[] grows as backward nodes add values; index by value id */
    int cap = g->n_values * 4 + 64;
    tt_value **grad = calloc((size_t)cap, sizeof *grad);
    /* a loss op's backward may add outputs to its node: room for a few */
    tt_value **gout = calloc((size_t)max_out + 8, sizeof *gout), **gin = calloc((size_t)max_in + 1, sizeof *gin);
    if (!grad || !gout || !gin) {
        free(grad), free(gout), free(gin);
        return tt_errorf("out of memory in autodiff");
    }
    for (int k = 0; k < n_loss; k++) {
        const tt_value *l = losses[k];
        if (!l || !l->producer || !(tt_ops[l->producer->op]->flags & TT_OPF_LOSS) || l->out_index != 0 ||
            tt_value_numel(l) != 1 || grad[l->id]) {
            free(grad), free(gout), free(gin);
            return tt_errorf("autodiff: loss %d is not the scalar loss output of a loss op (or is given twice)", k);
        }
        grad[l->id] = &tt_loss_seed;
    }
    /* which values depend on a wrt value (a view depends through its root) */
    char *needs = calloc((size_t)g->n_values + 1, 1);
    if (!needs) {
        free(grad), free(gout), free(gin);
        return tt_errorf("out of memory in autodiff");
    }
    for (int i = 0; i < n; i++) needs[wrt[i]->id] = needs[tt_value_root(wrt[i])->id] = 1;
    for (int i = 0; i < n_fwd; i++) {
        const tt_node *nd = g->nodes[i];
        int any = 0;
        for (int k = 0; k < nd->n_in && !any; k++) any = needs[nd->in[k]->id] || needs[tt_value_root(nd->in[k])->id];
        for (int o = 0; o < nd->n_out && any; o++) needs[nd->out[o]->id] = 1;
    }
    char saved_scope[sizeof g->scope];
    snprintf(saved_scope, sizeof saved_scope, "%s", g->scope);
    const int saved_unit = g->unit;

    for (int ni = n_fwd - 1; ni >= 0 && !g->failed; ni--) {
        tt_node *nd = g->nodes[ni];
        int any = 0;
        for (int o = 0; o < nd->n_out; o++)
            if ((gout[o] = nd->out[o]->id < cap ? grad[nd->out[o]->id] : NULL)) any = 1;
        int feeds = 0; /* some input depends on a wrt value */
        for (int k = 0; k < nd->n_in && !feeds; k++) feeds = needs[nd->in[k]->id] || needs[tt_value_root(nd->in[k])->id];
        if (!any || !feeds) continue; /* (a node with no inputs, zeros, passes its gradient to nothing) */
        if (!tt_ops[nd->op]->backward) {
            tt_graph_fail(g, "op %s has no backward rule", tt_op_name(nd->op));
            break;
        }
        /* the backward of a node belongs to its scope and unit */
        snprintf(g->scope, sizeof g->scope, "%s", nd->scope);
        tt_graph_set_unit(g, nd->unit);
        memset(gin, 0, ((size_t)max_in + 1) * sizeof *gin);
        tt_ops[nd->op]->backward(g, nd, gout, gin);
        for (int i = 0; i < nd->n_in && !g->failed; i++) {
            tt_value *x = nd->in[i];
            if (!gin[i] || x->role == TT_ROLE_INPUT || x->role == TT_ROLE_CONST || x->role == TT_ROLE_FROZEN) continue;
            if (x->id >= cap) continue;
            grad[x->id] = grad[x->id] ? tt_add(g, grad[x->id], gin[i]) : gin[i];
        }
        if (g->n_values > cap) { /* grow the map to cover new values */
            int ncap = g->n_values * 2;
            tt_value **p = realloc(grad, (size_t)ncap * sizeof *grad);
            if (!p) {
                free(grad), free(gout), free(gin);
                return tt_errorf("out of memory in autodiff");
            }
            for (int k = cap; k < ncap; k++) p[k] = NULL;
            grad = p;
            cap = ncap;
        }
    }
    free(needs);
    snprintf(g->scope, sizeof g->scope, "%s", saved_scope);
    tt_graph_set_unit(g, saved_unit);
    for (int i = 0; i < n; i++) grads[i] = wrt[i]->id < cap ? grad[wrt[i]->id] : NULL;
    free(grad);
    free(gout);
    free(gin);
    return g->failed ? -1 : prune(g, n_fwd, n, grads);
}

/* autodiff.c — walks the forward nodes in reverse, asks each op's backward
 * rule to emit its gradient nodes, and sums gradients that fan in. */
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"

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
    char saved_scope[sizeof g->scope];
    snprintf(saved_scope, sizeof saved_scope, "%s", g->scope);
    const int saved_unit = g->unit;

    for (int ni = n_fwd - 1; ni >= 0 && !g->failed; ni--) {
        tt_node *nd = g->nodes[ni];
        int any = 0;
        for (int o = 0; o < nd->n_out; o++)
            if ((gout[o] = nd->out[o]->id < cap ? grad[nd->out[o]->id] : NULL)) any = 1;
        if (!any || nd->n_in == 0) continue; /* a node with no inputs (zeros) passes its gradient to nothing */
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
            if (!gin[i] || x->role == TT_ROLE_INPUT || x->role == TT_ROLE_CONST) continue;
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
    snprintf(g->scope, sizeof g->scope, "%s", saved_scope);
    tt_graph_set_unit(g, saved_unit);
    for (int i = 0; i < n; i++) grads[i] = wrt[i]->id < cap ? grad[wrt[i]->id] : NULL;
    free(grad);
    free(gout);
    free(gin);
    return g->failed ? -1 : 0;
}

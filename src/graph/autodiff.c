/* autodiff.c — walks the forward nodes in reverse, asks each op's backward
 * rule to emit its gradient nodes, and sums gradients that fan in. */
#include <stdlib.h>

#include "graph/autodiff.h"

tt_err tt_autodiff(tt_graph *g, tt_value *loss, int n, tt_value *const *wrt, tt_value **grads)
{
    if (g->failed) return -1;
    int n_fwd = g->n_nodes;
    /* grad[] grows as backward nodes add values; index by value id */
    int cap = g->n_values * 4 + 64;
    tt_value **grad = calloc((size_t)cap, sizeof *grad);
    if (!grad) return tt_errorf("out of memory in autodiff");
    grad[loss->id] = &tt_loss_seed;
    char saved_scope[sizeof g->scope];
    snprintf(saved_scope, sizeof saved_scope, "%s", g->scope);

    for (int ni = n_fwd - 1; ni >= 0 && !g->failed; ni--) {
        tt_node *nd = g->nodes[ni];
        tt_value *gout[TT_MAX_OUT] = {0};
        int any = 0;
        for (int o = 0; o < nd->n_out; o++)
            if (nd->out[o]->id < cap && (gout[o] = grad[nd->out[o]->id])) any = 1;
        if (!any) continue;
        if (!tt_ops[nd->op].backward) {
            tt_graph_fail(g, "op %s has no backward rule", tt_op_name(nd->op));
            break;
        }
        snprintf(g->scope, sizeof g->scope, "%s", nd->scope);
        tt_value *gin[TT_MAX_IN] = {0};
        tt_ops[nd->op].backward(g, nd, gout, gin);
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
                free(grad);
                return tt_errorf("out of memory in autodiff");
            }
            for (int k = cap; k < ncap; k++) p[k] = NULL;
            grad = p;
            cap = ncap;
        }
    }
    snprintf(g->scope, sizeof g->scope, "%s", saved_scope);
    for (int i = 0; i < n; i++) grads[i] = wrt[i]->id < cap ? grad[wrt[i]->id] : NULL;
    free(grad);
    return g->failed ? -1 : 0;
}

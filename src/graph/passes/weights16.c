/* weights16.c — the bf16 products read the weights' bf16 copy (weights16.h). */
#include <stdlib.h>

#include "graph/passes/weights16.h"

/* Whether operand k of n is one its product rounds to bf16: a product runs on bf16 panels when either operand
 * is bf16 (cpu_matmul, cpu_grouped_matmul); the loss's head product when the hidden rows are bf16. */
static int rounded_operand(const tt_node *n, int k)
{
    switch (n->op) {
    case TT_OP_MATMUL: return k < 2 && n->in[1 - k]->dtype == TT_BF16;
    case TT_OP_GROUPED_MATMUL:
    case TT_OP_CE_LINEAR: return k == 1 && n->in[0]->dtype == TT_BF16;
    default: return 0;
    }
}

tt_err tt_weights16(tt_graph *g, tt_value *const *units, tt_value **units16, int n_units, int *rewired)
{
    const int nv = g->n_values;
    tt_value **copy = calloc((size_t)nv + 1, sizeof *copy); /* per weight value: its view of the copy */
    if (!copy) return tt_errorf("out of memory in the weights16 pass");
    int count = 0;
    tt_err rc = 0;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in && k < 2 && !rc; k++) {
            tt_value *v = n->in[k], *root = tt_value_root(v);
            const int u = root->unit;
            if (v->role != TT_ROLE_PARAM || v->dtype != TT_F32 || v->id >= nv || !rounded_operand(n, k) || u < 0 ||
                u >= n_units || units[u] != root)
                continue;
            if (!copy[v->id]) {
                if (!units16[u]) {
                    const int64_t numel = tt_value_numel(root);
                    if (!(units16[u] = tt_value_new(g, TT_ROLE_FROZEN, TT_BF16, 1, &numel))) {
                        rc = -1;
                        break;
                    }
                    units16[u]->unit = u;
                    snprintf(units16[u]->name, sizeof units16[u]->name, "bf16.%.*s", (int)sizeof root->name - 6,
                             root->name);
                }
                /* the same elements: half the byte offset */
                if (!(copy[v->id] = tt_value_view(g, units16[u], tt_value_root_offset(v) / 2, TT_BF16, v->ndim, v->shape))) {
                    rc = -1;
                    break;
                }
                snprintf(copy[v->id]->name, sizeof copy[v->id]->name, "bf16.%.*s", (int)sizeof v->name - 6, v->name);
            }
            n->in[k] = copy[v->id];
            count++;
        }
    }
    free(copy);
    if (rewired) *rewired = count;
    return rc || g->failed ? -1 : 0;
}

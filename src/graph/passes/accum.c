/* accum.c — folding accum nodes into the producers of the gradients they add
 * (see accum.h). An output value of a producer is replaced by the
 * accumulator (a state value the memory plan does not place), and the
 * node's accumulate bit for that output says to add into it. Which outputs
 * of which ops may accumulate is the op table's acc_outs. */
#include <stdlib.h>

#include "graph/passes/accum.h"

/* Whether g (read only by the accum) can be made to add itself into acc. */
static int foldable(const tt_value *g, const tt_value *acc, const int *readers, int depth)
{
    const tt_node *p = g->producer;
    if (!p || readers[g->id] != 1 || g->dtype != acc->dtype || g->is_output) return 0;
    if (p->op == TT_OP_ADD && depth == 0) /* the two halves of a fan-in (tied embeddings) */
        return p->in[0] != p->in[1] && foldable(p->in[0], acc, readers, 1) && foldable(p->in[1], acc, readers, 1);
    return (tt_ops[p->op]->acc_outs >> g->out_index) & 1;
}

static void fold(tt_value *g, tt_value *acc, char *dead)
{
    tt_node *p = g->producer;
    if (p->op == TT_OP_ADD) {
        dead[p->id] = 1;
        fold(p->in[0], acc, dead);
        fold(p->in[1], acc, dead);
        return;
    }
    p->accumulate |= 1u << g->out_index;
    p->out[g->out_index] = acc; /* the producer writes the accumulator; g is left unproduced */
    g->producer = NULL;
}

tt_err tt_fold_accum(tt_graph *g, int *folded)
{
    int *readers = calloc((size_t)g->n_values + 1, sizeof *readers);
    char *dead = calloc((size_t)g->n_nodes + 1, 1);
    tt_node **order = malloc(((size_t)g->n_nodes + 1) * sizeof *order);
    int nf = 0, k = 0;
    tt_err rc = 0;
    if (!readers || !dead || !order) rc = tt_errorf("out of memory folding gradient accumulation");
    for (int i = 0; i < g->n_nodes && !rc; i++)
        for (int j = 0; j < g->nodes[i]->n_in; j++) readers[g->nodes[i]->in[j]->id]++;
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        tt_node *n = g->nodes[i];
        if (n->op != TT_OP_ACCUM || !foldable(n->in[1], n->in[0], readers, 0)) continue;
        fold(n->in[1], n->in[0], dead);
        dead[i] = 1;
        nf++;
    }
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (!dead[i]) order[k++] = g->nodes[i];
    if (!rc && nf) rc = tt_graph_set_nodes(g, order, k);
    free(readers);
    free(dead);
    free(order);
    if (!rc && folded) *folded = nf;
    return rc;
}

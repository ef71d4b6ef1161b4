/* embedding.c — the token embedding: a lookup of table rows by id, whose
 * backward adds each row's gradient back into the table. */
#include "ops/ops_internal.h"

tt_value *tt_embedding(tt_graph *g, tt_value *ids, tt_value *table)
{
    NEED(ids && table && ids->dtype == TT_I32 && table->ndim == 2, "embedding: needs i32 ids and a (V, D) table");
    tt_dtype dt = table->dtype == TT_F32 && g->act_dtype == TT_BF16 ? TT_BF16 : table->dtype;
    tt_value *y = tt_op_act(g, dt, 2, tt_value_numel(ids), table->shape[1], 0);
    tt_value *in[] = {ids, table};
    return tt_op_node(g, TT_OP_EMBEDDING, 2, in, 1, &y, NULL) ? y : NULL;
}

tt_err tt_check_ids(const int32_t *ids, int64_t n, int64_t V, int32_t allowed, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if ((ids[i] < 0 || ids[i] >= V) && ids[i] != allowed)
            return tt_errorf("%s %d at index %lld is outside [0, %lld)", what, ids[i], (long long)i, (long long)V);
    return 0;
}

static void bw_embedding(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0]};
    if (trains(n->in[1])) gin[1] = tt_op_emit1(g, TT_OP_EMBEDDING_BWD, 2, in, n->in[1], NULL);
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_embedding = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .flops = fl_zero,
    .backward = bw_embedding,
};
const tt_op_def tt_op_def_embedding_bwd = {.acc_outs = 1, .flops = fl_zero};

/* op_common.c — what every op family emits nodes with, and what the list
 * gives about any op: its name, its attribute size, its computing dtype. */
#include "ops/ops_internal.h"

tt_value tt_loss_seed;

static const char *const op_names[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = #name,
#define TT_COMM(ID, name, attrs_bytes) [TT_OP_##ID] = #name,
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
};

/* from the list, not the op table, so that emitting a node needs nothing of the family files */
static const size_t op_attrs_size[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = attrs_bytes,
#define TT_COMM(ID, name, attrs_bytes) [TT_OP_##ID] = attrs_bytes,
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
};

const char *tt_op_name(int op) { return op >= 0 && op < TT_OP_COUNT ? op_names[op] : "?"; }

tt_value *tt_op_act(tt_graph *g, tt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t shape[3] = {d0, d1, d2};
    return tt_value_new(g, TT_ROLE_ACT, dt, ndim, shape);
}

tt_node *tt_op_node(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                    const void *attrs)
{
    for (int i = 0; i < n_out; i++)
        if (!out[i]) return NULL;
    return tt_node_new(g, op, n_in, in, n_out, out, attrs, attrs ? op_attrs_size[op] : 0);
}

tt_value *tt_op_emit1(tt_graph *g, int op, int n_in, tt_value *const *in, const tt_value *like, const void *attrs)
{
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, like->dtype, like->ndim, like->shape);
    return y && tt_op_node(g, op, n_in, in, 1, &y, attrs) ? y : NULL;
}

int tt_op_emitn(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *like,
                tt_value **out, const void *attrs)
{
    for (int i = 0; i < n_out; i++)
        out[i] = tt_value_new(g, TT_ROLE_ACT, like[i]->dtype, like[i]->ndim, like[i]->shape);
    return tt_op_node(g, op, n_in, in, n_out, out, attrs) ? 0 : -1;
}

tt_dtype tt_node_dtype(const tt_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        const tt_dtype d = n->in[k]->dtype;
        if (d == TT_F32 || d == TT_BF16 || d == TT_F16 || d == TT_F64) return d;
    }
    for (int k = 0; k < n->n_out; k++) {
        const tt_dtype d = n->out[k]->dtype;
        if (d == TT_F32 || d == TT_BF16 || d == TT_F16 || d == TT_F64) return d;
    }
    return TT_F32; /* integers only (moe_sort): nominally fp32 */
}

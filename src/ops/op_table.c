/* op_table.c — the op table: every op's definition, by id, as the list names
 * them; an op whose family file lacks its tt_op_def_<name> does not link. */
#include "ops/ops_internal.h"

const tt_op_def *const tt_ops[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = &tt_op_def_##name,
#define TT_COMM(ID, name, attrs_bytes) [TT_OP_##ID] = &tt_op_def_##name,
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
};

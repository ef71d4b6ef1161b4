/* ops_internal.h — node emission helpers shared by the builders and the
 * backward rules (private to src/ops/). */
#ifndef TT_OPS_INTERNAL_H
#define TT_OPS_INTERNAL_H
#include "ops/ops.h"
/* Record a node of op with these inputs and (already made) outputs; NULL when an output is missing.
 * attrs: the op's attribute struct (tt_ops[op].attrs_size bytes) or NULL. */
tt_node *tt_op_node(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                    const void *attrs);
/* one output shaped like `like` */
tt_value *tt_op_emit1(tt_graph *g, int op, int n_in, tt_value *const *in, const tt_value *like, const void *attrs);
/* n outputs shaped like like[i], returned in out[] */
int tt_op_emitn(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *like,
                tt_value **out, const void *attrs);
#endif

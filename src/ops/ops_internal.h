/* ops_internal.h — node emission helpers shared by the builders and the
 * backward rules (private to src/ops/). */
#ifndef TT_OPS_INTERNAL_H
#define TT_OPS_INTERNAL_H
#include "ops/ops.h"

/* In a builder: fail the graph with a message (and return NULL) unless cond holds; nothing once it failed. */
#define NEED(cond, ...)                                                                            \
    do {                                                                                           \
        if (g->failed) return NULL;                                                                \
        if (!(cond)) return tt_graph_fail(g, __VA_ARGS__);                                         \
    } while (0)

/* A new activation of ndim (1..3) dims */
tt_value *tt_op_act(tt_graph *g, tt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* fp32, bf16 or f64 */
static inline int tt_op_is_float(tt_dtype d) { return d == TT_F32 || d == TT_BF16 || d == TT_F64; }
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

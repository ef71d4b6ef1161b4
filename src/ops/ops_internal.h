/* ops_internal.h — what the op family files share (private to src/ops/): node
 * emission (op_common.c), the shape and FLOP helpers, and the declarations of
 * every op's definition, one per entry of the list. */
#ifndef TT_OPS_INTERNAL_H
#define TT_OPS_INTERNAL_H
#include <string.h>

#include "ops/ops.h"

/* tt_op_def_<name>, defined in the op's family file; op_table.c puts them in tt_ops */
#define TT_OP(ID, name, attrs_bytes) extern const tt_op_def tt_op_def_##name;
#define TT_COMM(ID, name, attrs_bytes) extern const tt_op_def tt_op_def_##name;
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM

/* In a builder: fail the graph with a message (and return NULL) unless cond holds; nothing once it failed. */
#define NEED(cond, ...)                                                                            \
    do {                                                                                           \
        if (g->failed) return NULL;                                                                \
        if (!(cond)) return tt_graph_fail(g, __VA_ARGS__);                                         \
    } while (0)

/* ---- emission (op_common.c) ---------------------------------------------- */
/* A new activation of ndim (1..3) dims */
tt_value *tt_op_act(tt_graph *g, tt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2);
/* Record a node of op with these inputs and (already made) outputs; NULL when an output is missing.
 * attrs: the op's attribute struct (the list's attrs_bytes) or NULL. */
tt_node *tt_op_node(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                    const void *attrs);
/* one output shaped like `like` */
tt_value *tt_op_emit1(tt_graph *g, int op, int n_in, tt_value *const *in, const tt_value *like, const void *attrs);
/* n outputs shaped like like[i], returned in out[] */
int tt_op_emitn(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *like,
                tt_value **out, const void *attrs);

/* ---- shapes and dtypes ---------------------------------------------------- */
/* fp32, bf16 or f64 */
static inline int tt_op_is_float(tt_dtype d) { return d == TT_F32 || d == TT_BF16 || d == TT_F64; }
static inline int same_shape(const tt_value *a, const tt_value *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}
static inline int64_t rows(const tt_value *v) { return v->ndim == 1 ? 1 : v->shape[0]; }
static inline int64_t cols(const tt_value *v) { return v->shape[v->ndim - 1]; }
/* Statistics a kernel saves for the backward (rstd, mean, logsumexp) and
 * scalar losses stay fp32 when the activations are bf16. */
static inline tt_dtype stat_dtype(tt_dtype d) { return d == TT_BF16 ? TT_F32 : d; }
/* Two floating operands may meet when they have one dtype, or when they are
 * fp32 and bf16: fp32 weights (and statistics) beside bf16 activations. */
static inline int meet(const tt_value *a, const tt_value *b)
{
    if (a->dtype == b->dtype) return a->dtype == TT_F32 || a->dtype == TT_BF16 || a->dtype == TT_F64;
    return (a->dtype == TT_F32 || a->dtype == TT_BF16) && (b->dtype == TT_F32 || b->dtype == TT_BF16);
}

/* ---- FLOP counts that several families share ------------------------------ */
/* A weight that trains (a frozen one, LoRA's base, gets no gradient from a backward rule) */
static inline int trains(const tt_value *v) { return v->role != TT_ROLE_FROZEN; }
static inline double n_rows(const tt_value *v) { return v->ndim == 1 ? 1.0 : (double)v->shape[0]; }
static inline double n_cols(const tt_value *v) { return (double)v->shape[v->ndim - 1]; }
static inline double numel(const tt_value *v) { return (double)tt_value_numel(v); }
static inline double fl_zero(const tt_node *n) { (void)n; return 0; }
static inline double fl_out(const tt_node *n) { return numel(n->out[0]); }
static inline double fl_in0(const tt_node *n) { return numel(n->in[0]); }
#endif

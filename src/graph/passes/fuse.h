/* fuse.h — the fusion pass: rewrites a forward graph into fewer, larger
 * nodes before autodiff, so the backward is derived from the fused ops. */
#ifndef TT_FUSE_H
#define TT_FUSE_H
#include "ops/ops.h"

typedef struct {
    int qkv;       /* attention blocks whose q, k, v projections became one matmul (and RoPE moved inside) */
    int gate_up;   /* SwiGLU blocks whose gate and up projections became one matmul */
    int add_norm;  /* residual adds merged with the RMSNorm that reads them */
} tt_fuse_stats;

/* On the forward nodes of g (all of them: run it before autodiff):
 *  - q, k, v: three matmuls of one input by weights that lie one after the
 *    other in memory (plus adjacent biases, and RoPE on q and k) feeding one
 *    attention become one matmul by the (q+2kv, D) weight they form and one
 *    attention_qkv that reads its column ranges and applies RoPE inside;
 *  - gate/up: swiglu of two such matmuls becomes one matmul by (2F, D) and a
 *    swiglu of the halves of its output;
 *  - add + rmsnorm: a residual add whose sum a full-row RMSNorm reads becomes
 *    one add_rmsnorm node (its backward then sums the residual gradient in
 *    the norm's backward).
 * Fused weights are new param values pointing into the storage of the first
 * of their parts, so their gradient is the parts' gradients laid out the
 * same way. Patterns that do not match exactly (other readers of an
 * intermediate value, weights apart, Qwen3's q/k norms) are left alone. */
tt_err tt_fuse(tt_graph *g, tt_fuse_stats *stats);

#endif

/* ops.h — the op table and the builder functions model code calls. An op is
 * declared once here: its id, its builder (shape inference), its FLOP count
 * and its backward rule. Backends register kernels against the ids.
 *
 * Activations are 2-D: (N, D) with N = B*T tokens. Attention-family ops
 * carry B and T as attributes. */
#ifndef TT_OPS_H
#define TT_OPS_H

#include "ir/graph.h"

typedef enum {
    TT_OP_EMBEDDING,      /* in: ids (N) i32, table (V,D)          out: (N,D) */
    TT_OP_EMBEDDING_BWD,  /* in: ids, dout (N,D)                    out: dtable (V,D);
                             a.i[0]=1: add into dtable (an accumulator) instead */
    TT_OP_MATMUL,         /* in: A, B   a.i[0]=ta a.i[1]=tb   out: C (M,N). Products in bf16 (fp32
                             sums) when A or B is bf16; C fp32 or bf16; a.i[2]=1: C += instead */
    TT_OP_BIAS_ADD,       /* in: x (N,D), b (D)                     out: y */
    TT_OP_BIAS_GRAD,      /* in: dy (N,D)                           out: db (D) */
    TT_OP_ADD,            /* in: a, b (same shape)                  out: y */
    TT_OP_RMSNORM,        /* in: x (N,D), w (G)  a.f[0]=eps, a.i[0]=G: normalise each run of G
                             features (G = D: whole rows; G = head_dim: per head)   out: y, rstd (N*D/G) */
    TT_OP_RMSNORM_BWD,    /* in: x, w, rstd, dy [, dres: a gradient added to dx]   out: dx, dw */
    TT_OP_LAYERNORM,      /* in: x, w, b  a.f[0]=eps                out: y, mean (N), rstd (N) */
    TT_OP_LAYERNORM_BWD,  /* in: x, w, mean, rstd, dy               out: dx, dw, db */
    TT_OP_ROPE,           /* in: x (N,H*hd), pos (N) i32, inv_freq (hd/2)  a.i: H, hd, inverse
                             a.f[0]: cos/sin scale (1; YaRN's attention factor)  out: y */
    TT_OP_ATTENTION,      /* in: q (N,H*hd), k, v (N,Hk*hd), doc (N) i32
                             a.i: B, T, H, Hk, hd, window            out: o (N,H*hd), lse (B,H,T) */
    TT_OP_ATTENTION_BWD,  /* in: q, k, v, doc, o, lse, do           out: dq, dk, dv */
    TT_OP_ATTENTION_KV,   /* generation: in: q (B*Tq,H*hd), k_new, v_new (B*Tq,Hk*hd),
                             cache_k, cache_v (B,Tmax,Hk*hd) state, start (1) i32 input
                             a.i: B, Tq, H, Hk, hd, window, Tmax
                             writes k_new/v_new into the caches at rows [start, start+Tq)
                             out: o (B*Tq,H*hd), lse (B,H,Tq) */
    TT_OP_SWIGLU,         /* in: a, b                               out: silu(a)*b
                             or in: ab (N, 2F) with a = columns [0, F), b = [F, 2F)   out: (N, F) */
    TT_OP_SWIGLU_BWD,     /* in: a, b, dy   out: da, db;  or in: ab, dy   out: dab (N, 2F) */
    TT_OP_GELU,           /* in: x                                  out: y */
    TT_OP_GELU_BWD,       /* in: x, dy                              out: dx */
    TT_OP_CE_LINEAR,      /* in: h (N,D), W (V,D), targets (N) i32, scale (1) f32
                             a.i[0]=ignore_index, a.i[1]=with_grads, a.i[2]=1: dW is added into
                             out: loss (1); with grads also dh (N,D), dW (V,D) */
    TT_OP_ACCUM,          /* in: acc (state), g        acc += g (in place)   out: none */
    TT_OP_SUMSQ,          /* in: g [, prev (1)]        out: (1) f32 = prev + sum of squares of g */
    TT_OP_ATTENTION_QKV,  /* attention on one qkv buffer (N, (H+2Hk)*hd): q, k, v its column ranges,
                             RoPE applied to q and k inside when pos is given.
                             in: qkv, doc [, pos (N) i32, inv_freq (hd/2)]
                             a.i: B, T, H, Hk, hd, window  a.f[0]: cos/sin scale   out: o (N,H*hd), lse */
    TT_OP_ATTENTION_QKV_BWD, /* in: qkv, doc, o, lse, do [, pos, inv_freq]   out: dqkv */
    TT_OP_ADD_RMSNORM,    /* the residual add and the norm after it: in: x, d, w  a.f[0]=eps
                             out: y = x + d, h = rmsnorm(y) w, rstd (N) */
    TT_OP_ADAMW,          /* in: p, g, m, v, sumsq (1), hp (4) f64 input = [lr, step, max_norm, 0]
                             [, decay (S, 2) i64 const: weight decay only inside these element
                             ranges, sorted]   a.f: beta1, beta2, eps, weight_decay
                             updates p, m, v in place, then zeroes g.  out: none. One node may
                             update every parameter of a model through its flat buffers. */
    TT_OP_COUNT
} tt_op_id;

typedef struct tt_op_def {
    const char *name;
    /* FLOPs of one run of the node (multiply-add = 2) */
    double (*flops)(const tt_node *n);
    /* Emit the nodes of the backward: gout[i] is the gradient of output i
     * (NULL: none), set gin[j] for each input that has one. */
    void (*backward)(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin);
} tt_op_def;

extern const tt_op_def tt_ops[TT_OP_COUNT];
const char *tt_op_name(int op);

/* The gradient seed of a loss: autodiff passes it as gout for the loss. */
extern tt_value tt_loss_seed;

/* ---- builders (return NULL after recording an error on the graph) ------- */
tt_value *tt_embedding(tt_graph *g, tt_value *ids, tt_value *table);
/* C = op(A) op(B), C bf16 when A or B is; tt_matmul_to names C's dtype (fp32
 * or bf16: a weight gradient from bf16 activations is fp32) */
tt_value *tt_matmul(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb);
tt_value *tt_matmul_to(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb, tt_dtype out);
/* y = x W^T (+ b): W is (out, in) as in PyTorch's nn.Linear */
tt_value *tt_linear(tt_graph *g, tt_value *x, tt_value *w, tt_value *b);
/* y (N, D) + b (D) */
tt_value *tt_bias_add(tt_graph *g, tt_value *y, tt_value *b);
tt_value *tt_add(tt_graph *g, tt_value *a, tt_value *b);
tt_value *tt_rmsnorm(tt_graph *g, tt_value *x, tt_value *w, double eps);
/* RMSNorm over each group of `group` consecutive features (Qwen3's q/k norm) */
tt_value *tt_rmsnorm_groups(tt_graph *g, tt_value *x, tt_value *w, double eps, int group);
tt_value *tt_layernorm(tt_graph *g, tt_value *x, tt_value *w, tt_value *b, double eps);
/* x (N, H*hd); inv_freq (hd/2) const */
tt_value *tt_rope(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd);
/* the same with cos and sin multiplied by scale (YaRN's attention factor) */
tt_value *tt_rope_scaled(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, double scale);
tt_value *tt_attention(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T,
                       int H, int Hk, int hd, int window);
tt_value *tt_attention_kv(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                          tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd,
                          int window);
tt_value *tt_swiglu(tt_graph *g, tt_value *a, tt_value *b);
/* silu(ab[:, :F]) * ab[:, F:] of one (N, 2F) value: gate and up from one matmul */
tt_value *tt_swiglu_fused(tt_graph *g, tt_value *ab);
/* attention over the column ranges of qkv (N, (H+2Hk)*hd); pos and inv_freq
 * NULL: no RoPE, else RoPE (cos/sin times rope_scale) on q and k inside */
tt_value *tt_attention_qkv(tt_graph *g, tt_value *qkv, tt_value *doc, tt_value *pos, tt_value *inv_freq,
                           double rope_scale, int B, int T, int H, int Hk, int hd, int window);
/* y = x + d and h = rmsnorm(y) in one node; returns h, *y_out = y */
tt_value *tt_add_rmsnorm(tt_graph *g, tt_value *x, tt_value *d, tt_value *w, double eps, tt_value **y_out);
tt_value *tt_gelu(tt_graph *g, tt_value *x);
/* scale * sum of cross-entropy over targets != ignore_index */
tt_value *tt_ce_linear(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale,
                       int ignore_index);
void tt_accum(tt_graph *g, tt_value *acc, tt_value *grad);
/* Chains one grad at a time: total = tt_sumsq(g, grad_k, total_so_far_or_NULL) */
tt_value *tt_sumsq(tt_graph *g, tt_value *grad, tt_value *prev);
/* decay: NULL (decay everything) or (S, 2) i64 ranges of p's elements that decay */
void tt_adamw(tt_graph *g, tt_value *p, tt_value *grad, tt_value *m, tt_value *v, tt_value *sumsq,
              tt_value *hp, tt_value *decay, double beta1, double beta2, double eps, double weight_decay);

#endif

/* kernels.h — the CPU backend's kernels as plain C functions over
 * contiguous row-major buffers, each with the contract of its reference
 * kernel (backend/ref/ref_kernels.h). The CPU kernel table
 * (backend/cpu/cpu_backend.c) adapts graph nodes to these calls.
 *
 * Shapes are written next to each buffer. N = rows (tokens), D = features.
 * Integer index buffers (token ids, targets, positions, document ids) are
 * int32. Unless said otherwise a kernel overwrites its outputs. */
#ifndef TT_CPU_KERNELS_H
#define TT_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>


/* Activation buffers (x, y, dy, dx, q, k, v, o, ...) are void * of dtype
 * `dt`, TT_F32 or TT_BF16 (mixed precision: bf16 activations, every sum and
 * statistic in fp32, rounded once when stored). Weights, biases, saved
 * statistics (rstd, mean, lse) and weight gradients are always fp32. */
#include "core/core.h"

/* C (M,N) = op(A) op(B) (+ C): A, B, C each fp32 or bf16, products of
 * bf16-rounded values when A or B is bf16. Returns -1 only when scratch
 * memory runs out. */
tt_err cpu_matmul(const void *A, tt_dtype adt, const void *B, tt_dtype bdt, void *C, tt_dtype cdt, int M, int N,
                  int K, int ta, int tb, int accumulate);
/* What cpu_matmul runs for such a call, for benchmark output: "titan avx512-bf16", "openblas sgemm", ... */
const char *cpu_matmul_path(tt_dtype adt, tt_dtype bdt, int M, int N, int K, int ta, int tb);
void cpu_bias_add(const void *x, const float *b, void *y, int N, int D, tt_dtype dt);
void cpu_bias_grad(const void *dy, float *db, int N, int D, tt_dtype dt);
void cpu_add(const void *a, const void *b, void *y, size_t n, tt_dtype dt);
/* y = s x */
void cpu_scale(const void *x, void *y, size_t n, float s, tt_dtype dt);
/* y (N, W) = a, plus s b_i (N, w[i]) on columns [c0[i], c0[i] + w[i]) (k <= CPU_ADD_SCALED_MAX_PARTS parts, in column
 * order) */
#define CPU_ADD_SCALED_MAX_PARTS 8
void cpu_add_scaled(const void *a, const void *const *b, const int *w, const int *c0, int k, void *y, int N, int W,
                    float s, tt_dtype dt);
/* acc (n, fp32) += g (n, dt) */
void cpu_accum(float *acc, const void *g, size_t n, tt_dtype dt);
void cpu_embedding_fwd(const int32_t *ids, const void *table, tt_dtype tdt, void *out, int N, int V, int D, tt_dtype dt);
/* dtable (V,D) = (accumulate: +=) scatter-add of dout rows */
void cpu_embedding_bwd(const int32_t *ids, const void *dout, float *dtable, int N, int V, int D, tt_dtype dt,
                       int accumulate);
void cpu_rmsnorm_fwd(const void *x, const float *w, void *y, float *rstd, int N, int D, double eps, tt_dtype dt);
/* dres (N, D) or NULL: a gradient that reaches x by another path (the residual
 * stream), added to dx in the same pass */
void cpu_rmsnorm_bwd(const void *x, const float *w, const float *rstd, const void *dy, const void *dres, void *dx,
                     float *dw, int N, int D, tt_dtype dt);
/* y = x + d (rounded to dt), h = rmsnorm(y) w: the residual add and the next norm in one pass */
void cpu_add_rmsnorm_fwd(const void *x, const void *d, const float *w, void *y, void *h, float *rstd, int N, int D,
                         double eps, tt_dtype dt);
void cpu_layernorm_fwd(const void *x, const float *w, const float *b, void *y, float *mean, float *rstd, int N,
                       int D, double eps, tt_dtype dt);
void cpu_layernorm_bwd(const void *x, const float *w, const float *mean, const float *rstd, const void *dy,
                       void *dx, float *dw, float *db, int N, int D, tt_dtype dt);
void cpu_rope(const void *x, const int32_t *pos, const float *inv_freq, void *y, int N, int H, int hd, int inverse,
              float scale, tt_dtype dt);
/* only each head's first rot features (even) rotated, with rot/2 frequencies; the rest copied */
void cpu_rope_partial(const void *x, const int32_t *pos, const float *inv_freq, void *y, int N, int H, int hd, int rot,
                      int inverse, float scale, tt_dtype dt);
void cpu_swiglu_fwd(const void *a, const void *b, void *y, size_t n, tt_dtype dt);
void cpu_swiglu_bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, tt_dtype dt);
/* gate and up as the two halves of each row of ab (N, 2F): y (N, F), dab (N, 2F) */
void cpu_swiglu_fused_fwd(const void *ab, void *y, int N, int F, tt_dtype dt);
void cpu_swiglu_fused_bwd(const void *ab, const void *dy, void *dab, int N, int F, tt_dtype dt);
/* SwiGLU in AVX-512 (swiglu_avx512.c), which the four above take where the
 * CPU has it: n values of a, b (and dy) to y (da, db), all of dtype dt,
 * each value's line asked for `ahead` values before it is read in a and b
 * (ahead_dy in dy): where the caller reads next. Call only where
 * tt_cpu_avx512() (simd.h) says so. */
void cpu_swiglu_fwd_avx512(const void *a, const void *b, void *y, size_t n, size_t ahead, tt_dtype dt);
void cpu_swiglu_bwd_avx512(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, size_t ahead,
                           size_t ahead_dy, tt_dtype dt);
/* 0: the four above keep the portable bodies (tests); 1 (the default): AVX-512 where usable */
void cpu_swiglu_set_avx512(int on);
/* GPT-OSS's clamped SwiGLU on the same layout (TT_OP_SWIGLU_CLAMP) */
void cpu_swiglu_clamp_fwd(const void *ab, void *y, int N, int F, float alpha, float limit, tt_dtype dt);
void cpu_swiglu_clamp_bwd(const void *ab, const void *dy, void *dab, int N, int F, float alpha, float limit,
                          tt_dtype dt);
void cpu_gelu_fwd(const void *x, void *y, size_t n, tt_dtype dt);
void cpu_geglu_fwd(const void *a, const void *b, void *y, size_t n, tt_dtype dt);
void cpu_geglu_bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, tt_dtype dt);
void cpu_gelu_bwd(const void *x, const void *dy, void *dx, size_t n, tt_dtype dt);
/* y = cap tanh(x / cap); dx = dy (1 - tanh(x / cap)^2) */
void cpu_softcap_fwd(const void *x, void *y, size_t n, double cap, tt_dtype dt);
void cpu_softcap_bwd(const void *x, const void *dy, void *dx, size_t n, double cap, tt_dtype dt);
/* y = x * scale where tt_dropout_keep(key, i, threshold) (ops/dropout.h), else 0; y may alias x */
void cpu_dropout(const void *x, void *y, size_t n, uint64_t key, uint32_t threshold, float scale, tt_dtype dt);

/* Training attention (Tq = Tk = T, causal, GQA, document mask, window): the
 * operands as row-strided views, so q, k, v may be column ranges of one qkv
 * buffer. Token row n = b*T + t of q starts at q + n*ldq elements and head h
 * at + h*hd; likewise k, v (Hk heads), o, dout and the gradients. When pos is
 * not NULL, RoPE (rotate-half, inv_freq, cos/sin times rope_scale) is applied
 * to q and k inside the kernel: the forward attends with rotated q and k, and
 * the backward returns gradients with respect to the unrotated ones. */
typedef struct {
    int B, T, H, Hk, hd, window;
    tt_dtype dt;
    const void *q, *k, *v;
    long ldq, ldk, ldv;
    const int32_t *doc;      /* (B*T) or NULL */
    const int32_t *pos;      /* (B*T) or NULL */
    const float *inv_freq;   /* (hd/2) */
    float rope_scale;
    double scale;            /* the scores' scale; 0: 1 / sqrt(hd) */
    double softcap;          /* > 0: each scaled score s becomes softcap tanh(s / softcap) (Gemma 2); 0: none */
    void *o;                 /* forward out; backward in */
    long ldo;
    float *lse;              /* (B, H, T): forward out; backward in */
    const void *dout;        /* backward in */
    long lddo;
    void *dq, *dk, *dv;      /* backward out (overwritten) */
    long lddq, lddk, lddv;
} tt_attn;
/* Return -1 only when scratch memory runs out. */
tt_err cpu_attention_fwd(const tt_attn *a);
tt_err cpu_attention_bwd(const tt_attn *a);
/* Decoding with a KV cache (fp32): the general form of ref_attention_fwd. */
void cpu_attention_kv(const float *q, const float *k, const float *v, float *o, float *lse, int B, int Tq, int Tk,
                      int kvT, int q_off, int H, int Hk, int hd, int window, double scale, double softcap);
/* GPT-OSS's attention sinks, a logit a head in each row's softmax denominator with no value, on a finished
 * forward: o (B*T rows of stride ldo, head h's dv features at h*dv; dtype dt) and lse (B, H, T) become those of
 * the attention with the sinks (fp32, H). The backward kernels, given them, are then the sinked attention's, and
 * cpu_attention_sinks_bwd gives the sinks' gradient dsinks (H, fp32, overwritten) from o, lse and dout. */
void cpu_attention_sinks_fwd(void *o, long ldo, float *lse, const float *sinks, int B, int T, int H, int dv,
                             tt_dtype dt);
void cpu_attention_sinks_bwd(const void *o, long ldo, const void *dout, long lddo, const float *lse,
                             const float *sinks, float *dsinks, int B, int T, int H, int dv, tt_dtype dt);

/* Fused linear + cross-entropy: h (N,D) of dtype dt, W (V,D) fp32, dh (dt),
 * dW fp32 accumulated into. Logit products in bf16 when dt is bf16. *loss
 * receives the loss (NaN when the model's values are: not an error); -1
 * only when its block of logits cannot be allocated. */
tt_err cpu_ce_linear(const void *h, const void *W, tt_dtype wdt, const int32_t *targets, int N, int D, int V, int ignore_index,
                     double scale, void *dh, float *dW, tt_dtype dt, double *loss);
/* The same over soft-capped logits: z -> softcap tanh(z / softcap) when softcap > 0 (Gemma 2) */
tt_err cpu_ce_linear_capped(const void *h, const void *W, tt_dtype wdt, const int32_t *targets, int N, int D, int V,
                            int ignore_index, double scale, double softcap, void *dh, float *dW, tt_dtype dt,
                            double *loss);
/* The logits a block of rows may hold (rows of the whole vocabulary, at
 * least 64 rows); 0: back to the default, 64M. For tests, which check
 * several blocks on small shapes. */
void cpu_ce_set_block(size_t logits);
/* Terms per partial sum of a row's exponentials: fp32 sums of this many,
 * added up in double, keep the softmax's denominator accurate for any
 * vocabulary and however the compiler vectorises (a plain fp32 running sum
 * over 70,000 terms drifts by ~1e-3). */
#define CPU_CE_SUM_CHUNK 256
/* One row z (V) of logits in AVX-512, without soft-cap (cross_entropy_avx512.c):
 * returns logsumexp - z[t]; with grad, leaves scale (softmax - onehot) in z,
 * or with bf16 as V bf16 values in the row's first 2V bytes; next (or NULL):
 * the next row, asked for on the way. Call only where tt_cpu_avx512()
 * (simd.h) says so. */
double cpu_ce_row_avx512(float *z, int V, int t, float scale, int grad, int bf16, const float *next);
/* 0: the fused cross-entropy keeps the portable row (tests); 1 (the default): AVX-512 where usable */
void cpu_ce_set_avx512(int on);
double cpu_sumsq(const float *g, size_t n);
/* AdamW on n elements in place (the reference's contract), weight decay only
 * inside the n_decay ranges [decay[2i], decay[2i+1]) (sorted, disjoint), or
 * everywhere when decay is NULL; g is zeroed for the next accumulation. p16:
 * NULL, or n bf16 values that get the new p rounded (tt_bf16_bits). */
void cpu_adamw(float *p, float *g, float *m, float *v, uint16_t *p16, size_t n, double lr, double b1, double b2,
               double eps, double wd, double clip, long step, const int64_t *decay, int n_decay);

/* ---- per-head columns (heads.c; TT_OP_HEAD_* in ops/ops.h) ------------------------
 * x (N, H*w); part (N, H*cw), or (N, cw) with sum_heads. place = 0: part = x's columns [c0, c0+cw) of every
 * head (deinterleaved: the even ones then the odd ones; summed over heads with sum_heads); 1: x = part in those
 * columns, zeros elsewhere. */
void cpu_head_move(void *x, void *part, int N, int H, int w, int c0, int cw, int sum_heads, int deinterleave,
                   int place, tt_dtype dt);
/* y (N, H*(wa+wb)) = each head's a columns, then its b columns (b one head for all when bcast) */
void cpu_head_concat(const void *a, const void *b, void *y, int N, int H, int wa, int wb, int bcast, tt_dtype dt);

/* ---- Mixture-of-Experts (moe.c; see the TT_OP_MOE_* ops in ops/ops.h) ----------
 * Router scores, weights and their gradients are fp32; rows (x, xs, ys, y) are
 * of dtype dt. N tokens, E experts, k slots a token, M = N*k assignments. */
/* scores (N,E), weight and expert (N,k); bias (E) or NULL: added for the choice only */
void cpu_moe_route(const float *logits, const float *bias, float *weight, int32_t *expert, float *scores, int N,
                   int E, int k, int sigmoid, int norm, int n_group, int topk_group, float route_scale);
/* dscores (N,E) or NULL: a gradient of the scores, joined to the weights' */
void cpu_moe_route_bwd(const float *scores, const int32_t *expert, const float *dweight, const float *dscores,
                       float *dlogits, int N, int E, int k, int sigmoid, int norm, float route_scale);
/* an auxiliary loss (kind: tt_aux_kind; in: scores, or logits for the z-loss) into *loss; its gradient into grad */
tt_err cpu_moe_aux_loss(const float *in, const int32_t *expert, double scale, float *grad, int N, int E, int k, int B,
                        int kind, double coef, double *loss);
/* perm, pos (M), offsets (E+1); the ids must be in [0, E) */
void cpu_moe_sort(const int32_t *expert, int M, int E, int32_t *perm, int32_t *pos, int32_t *offsets);
/* xs (M,D) row r = x[perm[r]/k] (* w[perm[r]]) */
void cpu_moe_permute(const void *x, const int32_t *perm, const float *w, void *xs, int M, int D, int k, tt_dtype dt);
/* y (N,D) row t = sum over slots s, in order, of ys[pos[t*k+s]] (* w[t*k+s]) */
void cpu_moe_combine(const void *ys, const int32_t *pos, const float *w, void *y, int N, int D, int k, tt_dtype dt);
/* out (N,k) = dot(a[t], b[pos[t*k+s]]) */
void cpu_moe_rowdot(const void *a, const void *b, const int32_t *pos, float *out, int N, int D, int k, tt_dtype dt);
/* y (M,Nw): the rows [off[e], off[e+1]) of x (M,K) times w[e]^T (w (E,Nw,K), tb) or w[e] (w (E,K,Nw)); rows
 * [off[E], M) zero */
tt_err cpu_grouped_matmul(const void *x, tt_dtype xdt, const void *w, tt_dtype wdt, void *y, tt_dtype ydt,
                          const int32_t *off, int E, int M, int K, int Nw, int tb);
/* dw (E,P,Q) (+)= a_e^T b_e over each expert's rows of a (M,P) and b (M,Q) */
tt_err cpu_grouped_matmul_wgrad(const void *a, const void *b, tt_dtype dt, float *dw, const int32_t *off, int E, int P,
                                int Q, int accumulate);
/* y (R,D) row i = x[idx[i]], zero where idx[i] = -1 (the ids checked by the caller: tt_row_gather_check) */
void cpu_row_gather(const void *x, const int32_t *idx, void *y, int R, int D, tt_dtype dt);
/* expert parallelism's exchange plan (TT_OP_MOE_EP_PLAN; offs_all checked by tt_moe_ep_check): counts (4, ep)
 * = scounts, sdispls, rcounts, rdispls; loc_off (El+1); to_src, to_exp (recv_rows) */
void cpu_moe_ep_plan(const int32_t *offs_all, int E, int ep, int rank, int64_t row, int64_t recv_rows,
                     int64_t *const counts[4], int32_t *loc_off, int32_t *to_src, int32_t *to_exp);

#endif

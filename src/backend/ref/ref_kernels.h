/* ref_kernels.h — the naive reference kernels: plain loops with sums in
 * double, written once in ref_kernels.inc and instantiated for float (_f32)
 * and double (_f64, for finite-difference checks). They define what each op
 * computes; every other backend is tested against them.
 *
 * Shapes are written next to each buffer. N = rows (tokens), D = features.
 * Integer index buffers (token ids, targets, positions, document ids) are
 * int32. Unless said otherwise a kernel overwrites its outputs. */
#ifndef TT_REF_KERNELS_H
#define TT_REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The most experts the MoE kernels take (they keep a token's scores on the
 * stack): TT_MOE_MAX_EXPERTS of ops/ops.h, which the builders check. */
#define REF_MAX_EXPERTS 1024

#define TT_REF_KERNELS(T, S)                                                                      \
    /* C (M,N) = op(A) op(B) (+ C if accumulate). op(A) is (M,K): A is (M,K), or (K,M) if ta.   \
     * op(B) is (K,N): B is (K,N), or (N,K) if tb. */                                            \
    void ref_matmul_##S(const T *A, const T *B, T *C, int M, int N, int K, int ta, int tb,      \
                        int accumulate);                                                         \
    /* y (N,D) = x (N,D) + b (D) broadcast over rows */                                          \
    void ref_bias_add_##S(const T *x, const T *b, T *y, int N, int D);                           \
    /* db (D) = sum over rows of dy (N,D) */                                                     \
    void ref_bias_grad_##S(const T *dy, T *db, int N, int D);                                    \
    void ref_add_##S(const T *a, const T *b, T *y, size_t n);                                    \
    void ref_scale_##S(const T *x, T *y, size_t n, double s);                                   \
    /* y (N, W) = a, plus s b (N, w) on columns [c0, c0 + w) (y may be a: in place) */                   \
    void ref_add_scaled_##S(const T *a, const T *b, T *y, int N, int W, int w, int c0, double s);         \
    /* out (N,D) = table (V,D)[ids (N)] */                                                       \
    void ref_embedding_fwd_##S(const int32_t *ids, const T *table, T *out, int N, int V, int D); \
    /* dtable (V,D) = scatter-add of dout (N,D) rows at ids (zeroes dtable first) */             \
    void ref_embedding_bwd_##S(const int32_t *ids, const T *dout, T *dtable, int N, int V,       \
                               int D);                                                           \
    /* y = x * rstd * w, rstd (N) = 1/sqrt(mean(x^2) + eps) */                                   \
    void ref_rmsnorm_fwd_##S(const T *x, const T *w, T *y, T *rstd, int N, int D, double eps);   \
    /* dx (N,D), dw (D) (dw overwritten) */                                                      \
    void ref_rmsnorm_bwd_##S(const T *x, const T *w, const T *rstd, const T *dy, T *dx, T *dw,   \
                             int N, int D);                                                      \
    void ref_layernorm_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,      \
                               int N, int D, double eps);                                        \
    void ref_layernorm_bwd_##S(const T *x, const T *w, const T *mean, const T *rstd,             \
                               const T *dy, T *dx, T *dw, T *db, int N, int D);                  \
    /* Hugging Face rotate-half RoPE on x (N,H,hd): for i < hd/2, angle = pos[n]*inv_freq[i],   \
     * y[i] = x[i] cos - x[i+hd/2] sin, y[i+hd/2] = x[i+hd/2] cos + x[i] sin. inverse = 1       \
     * rotates by -angle (that is the backward). inv_freq has hd/2 entries. */                   \
    void ref_rope_##S(const T *x, const int32_t *pos, const float *inv_freq, T *y, int N, int H, \
                      int hd, int inverse);                                                      \
    /* The same with cos and sin multiplied by `scale` (YaRN's attention factor); ref_rope is   \
     * scale = 1. The transpose of a scaled rotation is the scaled inverse rotation. */         \
    void ref_rope_scaled_##S(const T *x, const int32_t *pos, const float *inv_freq, T *y, int N, \
                             int H, int hd, int inverse, double scale);                          \
    /* Partial rotary (Phi-3, Phi-4-mini): only each head's first rot features (rot even, <= hd) \
     * are rotated, pairs (i, i + rot/2) with rot/2 frequencies; the others pass through. */     \
    void ref_rope_partial_##S(const T *x, const int32_t *pos, const float *inv_freq, T *y, int N, \
                              int H, int hd, int rot, int inverse, double scale);                \
    /* Causal attention with GQA and document masking.                                         \
     * q (B,Tq,H,hd), k and v (B,kvT,Hk,hd) of which the first Tk rows are valid,               \
     * o (B,Tq,H,hd), lse (B,H,Tq). Query row i sits at absolute position q_off+i and sees      \
     * key j iff j <= q_off+i, and (window == 0 or q_off+i-j < window), and, when doc is not    \
     * NULL, doc[b*Tk+j] == doc[b*Tk+q_off+i] (doc is (B,Tk)). Head h reads kv head             \
     * h / (H/Hk). scores are scaled by `scale`. A row that sees no key gets o = 0, lse = -inf.*/\
    void ref_attention_fwd_##S(const T *q, const T *k, const T *v, const int32_t *doc, T *o,     \
                               T *lse, int B, int Tq, int Tk, int kvT, int q_off, int H, int Hk, \
                               int hd, int window, double scale);                                \
    /* The same with values (and the output) dv wide, queries and keys hd, the scores           \
     * soft-capped when cap > 0: s -> cap tanh(s / cap) (Gemma 2), after the scale, and, when     \
     * sink is not NULL, head h's sink logit sink[h] in each row's max and denominator, with no   \
     * value (GPT-OSS). The backward's ds is multiplied by 1 - tanh(s / cap)^2; dsink (H),        \
     * overwritten, is the sinks' gradient. */                                                   \
    void ref_attention_fwd_v_##S(const T *q, const T *k, const T *v, const int32_t *doc, T *o,   \
                                 T *lse, int B, int Tq, int Tk, int kvT, int q_off, int H,        \
                                 int Hk, int hd, int dv, int window, double scale, double cap,    \
                                 const T *sink);                                                  \
    void ref_attention_bwd_v_##S(const T *q, const T *k, const T *v, const int32_t *doc,         \
                                 const T *o, const T *lse, const T *dout, T *dq, T *dk, T *dv,    \
                                 int B, int T_, int H, int Hk, int hd, int vw, int window,       \
                                 double scale, double cap, const T *sink, T *dsink);              \
    /* Backward of the above for Tq == Tk == kvT, q_off == 0: dq (B,T,H,hd), dk, dv            \
     * (B,T,Hk,hd), all overwritten. */                                                          \
    void ref_attention_bwd_##S(const T *q, const T *k, const T *v, const int32_t *doc,           \
                               const T *o, const T *lse, const T *dout, T *dq, T *dk, T *dv,     \
                               int B, int T_, int H, int Hk, int hd, int window, double scale);  \
    /* y = silu(a) * b, elementwise over n */                                                    \
    void ref_swiglu_fwd_##S(const T *a, const T *b, T *y, size_t n);                             \
    void ref_swiglu_bwd_##S(const T *a, const T *b, const T *dy, T *da, T *db, size_t n);        \
    /* y = (clamp(b, -limit, limit) + 1) g sigmoid(alpha g), g = min(a, limit) (GPT-OSS); the       \
     * backward's gradients are 0 where a clamp holds (a > limit; |b| > limit) */                   \
    void ref_swiglu_clamp_fwd_##S(const T *a, const T *b, T *y, size_t n, double alpha,           \
                                  double limit);                                                  \
    void ref_swiglu_clamp_bwd_##S(const T *a, const T *b, const T *dy, T *da, T *db, size_t n,   \
                                  double alpha, double limit);                                    \
    /* GELU, tanh approximation (GPT-2's gelu_new) */                                            \
    void ref_gelu_fwd_##S(const T *x, T *y, size_t n);                                           \
    void ref_gelu_bwd_##S(const T *x, const T *dy, T *dx, size_t n);                             \
    /* gelu(a) * b (GELU's tanh form) and its derivatives */                                     \
    void ref_geglu_fwd_##S(const T *a, const T *b, T *y, size_t n);                              \
    void ref_geglu_bwd_##S(const T *a, const T *b, const T *dy, T *da, T *db, size_t n);         \
    /* dropout, by its definition: y = x * keep / (1 - p) with keep = u(i) >= p,                \
     * u(i) = (tt_hash64(key, i) >> 40) * 2^-24 and key = tt_dropout_key (ops/dropout.h) */       \
    void ref_dropout_##S(const T *x, T *y, size_t n, uint64_t key, double p);                    \
    /* Fused linear + cross-entropy. h (N,D), W (V,D), targets (N). logits = h W^T, never       \
     * held whole: the vocabulary (or the rows) are processed in chunks. Returns               \
     * scale * sum over rows with targets[n] != ignore_index of (logsumexp - logit[target]).   \
     * If dh (N,D) / dW (V,D) are not NULL they receive the gradient of that return value      \
     * (dh overwritten; dW accumulated into, so micro-batches can share it). A target outside  \
     * [0, V) that is not ignore_index is a caller error (checked by the op). */                \
    double ref_ce_linear_##S(const T *h, const T *W, const int32_t *targets, int N, int D, int V,\
                             int ignore_index, double scale, T *dh, T *dW);                      \
    /* The same over soft-capped logits when cap > 0: z -> cap tanh(z / cap) (Gemma 2) */        \
    double ref_ce_linear_capped_##S(const T *h, const T *W, const int32_t *targets, int N, int D,\
                                    int V, int ignore_index, double scale, double cap, T *dh,     \
                                    T *dW);                                                       \
    /* y = cap tanh(x / cap) and its backward dx = dy (1 - tanh(x / cap)^2) */                   \
    void ref_softcap_fwd_##S(const T *x, T *y, size_t n, double cap);                            \
    void ref_softcap_bwd_##S(const T *x, const T *dy, T *dx, size_t n, double cap);              \
    /* sum of squares of g (n), in double */                                                     \
    double ref_sumsq_##S(const T *g, size_t n);                                                  \
    /* AdamW on one tensor, in place: g is multiplied by clip first; wd is decoupled:          \
     * p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p); step counts from 1. */                   \
    void ref_adamw_##S(T *p, const T *g, T *m, T *v, size_t n, double lr, double b1, double b2,  \
                       double eps, double wd, double clip, long step);                  \
    /* Mixture-of-Experts routing of N tokens over E experts, k slots each (see              \
     * TT_OP_MOE_ROUTE in ops/ops.h): scores (N,E), weight and expert (N,k). bias: (E) or     \
     * NULL, added to the scores for the choice only. */                                         \
    void ref_moe_route_##S(const T *logits, const double *bias, T *weight, int32_t *expert,     \
                           T *scores, int N, int E, int k, int sigmoid, int norm, int n_group,   \
                           int topk_group, double route_scale);                                  \
    /* dlogits (N,E) from the gradient of the weights (N,k), and of the scores (N,E) when     \
     * dscores is not NULL */                                                                    \
    void ref_moe_route_bwd_##S(const T *scores, const int32_t *expert, const T *dweight,         \
                               const T *dscores, T *dlogits, int N, int E, int k, int sigmoid,   \
                               int norm, double route_scale);                                    \
    /* An MoE auxiliary loss (TT_OP_MOE_AUX_LOSS, kind tt_aux_kind): returned, and its          \
     * gradient with respect to in (N,E) into grad when not NULL */                              \
    double ref_moe_aux_loss_##S(const T *in, const int32_t *expert, double scale, T *grad,      \
                                int N, int E, int k, int B, int kind, double coef);              \
    /* xs (M,D): row r is x[perm[r]/k] (times w[perm[r]] when w is not NULL) */                  \
    void ref_moe_permute_##S(const T *x, const int32_t *perm, const T *w, T *xs, int M, int D,  \
                             int k);                                                             \
    /* y (N,D): row t is the sum over s of ys[pos[t*k+s]] (times w[t*k+s]) */                    \
    void ref_moe_combine_##S(const T *ys, const int32_t *pos, const T *w, T *y, int N, int D,   \
                             int k);                                                             \
    /* per-head columns (TT_OP_HEAD_SLICE, _PLACE, _CONCAT): x (N, H*w), part (N, H*cw) or     \
     * (N, cw) with sum_heads; place = 0: part = the slice of x, 1: x = part placed, zeros   \
     * elsewhere */                                                                              \
    void ref_head_move_##S(T *x, T *part, int N, int H, int w, int c0, int cw, int sum_heads,   \
                           int deinterleave, int place);                                         \
    /* y (N, H*(wa+wb)) = each head's a (N, H*wa), then b (N, H*wb, or wb when bcast) */        \
    void ref_head_concat_##S(const T *a, const T *b, T *y, int N, int H, int wa, int wb,        \
                             int bcast);                                                         \
    /* out (N,k): dot(a[t], b[pos[t*k+s]]) */                                                    \
    void ref_moe_rowdot_##S(const T *a, const T *b, const int32_t *pos, T *out, int N, int D,   \
                            int k);                                                              \
    /* y (R,D): row i is x[idx[i]], zeros where idx[i] is -1 (ids in [-1, rows of x): checked   \
     * by the caller) */                                                                         \
    void ref_row_gather_##S(const T *x, const int32_t *idx, T *y, int R, int D);

TT_REF_KERNELS(float, f32)
TT_REF_KERNELS(double, f64)

/* perm, pos (N*k) and offsets (E+1) of the (token, slot) assignments sorted
 * by expert, stably; the ids are in [0, E) (checked by the caller). */
void ref_moe_sort(const int32_t *expert, int N, int k, int E, int32_t *perm, int32_t *pos, int32_t *offsets);

/* Expert parallelism's exchange plan (TT_OP_MOE_EP_PLAN in ops/ops.h) of group rank `rank` of ep, from every
 * rank's offsets offs_all (ep, E+1) (checked by the caller): scounts, sdispls, rcounts, rdispls (ep) in
 * elements of rows of `row`; loc_off (E/ep + 1); to_src, to_exp (recv_rows), -1 past the rows received. */
void ref_moe_ep_plan(const int32_t *offs_all, int E, int ep, int rank, int64_t row, int64_t recv_rows, int64_t *scounts,
                     int64_t *sdispls, int64_t *rcounts, int64_t *rdispls, int32_t *loc_off, int32_t *to_src,
                     int32_t *to_exp);

#endif

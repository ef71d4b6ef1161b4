/* kernels.h — the CPU kernels as plain C functions over contiguous row-major
 * buffers. Each op has a naive reference kernel, generated for float (_f32)
 * and double (_f64, for finite-difference tests) from one template in
 * ref_kernels.inc, and a fast fp32 kernel (cpu_*). The op table
 * (backend/cpu/registry.c) adapts graph nodes to these calls.
 *
 * Shapes are written next to each buffer. N = rows (tokens), D = features.
 * Integer index buffers (token ids, targets, positions, document ids) are
 * int32. Unless said otherwise a kernel overwrites its outputs. */
#ifndef TT_CPU_KERNELS_H
#define TT_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

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
    /* Causal attention with GQA and document masking.                                         \
     * q (B,Tq,H,hd), k and v (B,kvT,Hk,hd) of which the first Tk rows are valid,               \
     * o (B,Tq,H,hd), lse (B,H,Tq). Query row i sits at absolute position q_off+i and sees      \
     * key j iff j <= q_off+i, and (window == 0 or q_off+i-j < window), and, when doc is not    \
     * NULL, doc[b*Tk+j] == doc[b*Tk+q_off+i] (doc is (B,Tk)). Head h reads kv head             \
     * h / (H/Hk). scores are scaled by `scale`. A row that sees no key gets o = 0, lse = -inf.*/\
    void ref_attention_fwd_##S(const T *q, const T *k, const T *v, const int32_t *doc, T *o,     \
                               T *lse, int B, int Tq, int Tk, int kvT, int q_off, int H, int Hk, \
                               int hd, int window, double scale);                                \
    /* Backward of the above for Tq == Tk == kvT, q_off == 0: dq (B,T,H,hd), dk, dv            \
     * (B,T,Hk,hd), all overwritten. */                                                          \
    void ref_attention_bwd_##S(const T *q, const T *k, const T *v, const int32_t *doc,           \
                               const T *o, const T *lse, const T *dout, T *dq, T *dk, T *dv,     \
                               int B, int T_, int H, int Hk, int hd, int window, double scale);  \
    /* y = silu(a) * b, elementwise over n */                                                    \
    void ref_swiglu_fwd_##S(const T *a, const T *b, T *y, size_t n);                             \
    void ref_swiglu_bwd_##S(const T *a, const T *b, const T *dy, T *da, T *db, size_t n);        \
    /* GELU, tanh approximation (GPT-2's gelu_new) */                                            \
    void ref_gelu_fwd_##S(const T *x, T *y, size_t n);                                           \
    void ref_gelu_bwd_##S(const T *x, const T *dy, T *dx, size_t n);                             \
    /* Fused linear + cross-entropy. h (N,D), W (V,D), targets (N). logits = h W^T, never       \
     * held whole: the vocabulary (or the rows) are processed in chunks. Returns               \
     * scale * sum over rows with targets[n] != ignore_index of (logsumexp - logit[target]).   \
     * If dh (N,D) / dW (V,D) are not NULL they receive the gradient of that return value      \
     * (dh overwritten; dW accumulated into, so micro-batches can share it). A target outside  \
     * [0, V) that is not ignore_index is a caller error (checked by the op). */                \
    double ref_ce_linear_##S(const T *h, const T *W, const int32_t *targets, int N, int D, int V,\
                             int ignore_index, double scale, T *dh, T *dW);                      \
    /* sum of squares of g (n), in double */                                                     \
    double ref_sumsq_##S(const T *g, size_t n);                                                  \
    /* AdamW on one tensor, in place: g is multiplied by clip first; wd is decoupled:          \
     * p -= lr * (mhat / (sqrt(vhat) + eps) + wd * p); step counts from 1. */                   \
    void ref_adamw_##S(T *p, const T *g, T *m, T *v, size_t n, double lr, double b1, double b2,  \
                       double eps, double wd, double clip, long step);

TT_REF_KERNELS(float, f32)
TT_REF_KERNELS(double, f64)

/* ---- fast kernels: the reference contracts, in both activation dtypes ------
 * Activation buffers (x, y, dy, dx, q, k, v, o, ...) are void * of dtype
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
/* acc (n, fp32) += g (n, dt) */
void cpu_accum(float *acc, const void *g, size_t n, tt_dtype dt);
void cpu_embedding_fwd(const int32_t *ids, const float *table, void *out, int N, int V, int D, tt_dtype dt);
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
void cpu_swiglu_fwd(const void *a, const void *b, void *y, size_t n, tt_dtype dt);
void cpu_swiglu_bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, tt_dtype dt);
/* gate and up as the two halves of each row of ab (N, 2F): y (N, F), dab (N, 2F) */
void cpu_swiglu_fused_fwd(const void *ab, void *y, int N, int F, tt_dtype dt);
void cpu_swiglu_fused_bwd(const void *ab, const void *dy, void *dab, int N, int F, tt_dtype dt);
void cpu_gelu_fwd(const void *x, void *y, size_t n, tt_dtype dt);
void cpu_gelu_bwd(const void *x, const void *dy, void *dx, size_t n, tt_dtype dt);

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
                      int kvT, int q_off, int H, int Hk, int hd, int window, double scale);

/* Fused linear + cross-entropy: h (N,D) of dtype dt, W (V,D) fp32, dh (dt),
 * dW fp32 accumulated into. Logit products in bf16 when dt is bf16. Returns
 * NAN (with the error set) when its block of logits cannot be allocated. */
double cpu_ce_linear(const void *h, const float *W, const int32_t *targets, int N, int D, int V, int ignore_index,
                     double scale, void *dh, float *dW, tt_dtype dt);
double cpu_sumsq(const float *g, size_t n);
/* AdamW on n elements in place (the reference's contract), weight decay only
 * inside the n_decay ranges [decay[2i], decay[2i+1]) (sorted, disjoint), or
 * everywhere when decay is NULL; g is zeroed for the next accumulation. */
void cpu_adamw(float *p, float *g, float *m, float *v, size_t n, double lr, double b1, double b2, double eps,
               double wd, double clip, long step, const int64_t *decay, int n_decay);

#endif

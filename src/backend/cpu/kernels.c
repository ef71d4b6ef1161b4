/* kernels.c — the CPU kernels for the elementwise (dropout among them), bias,
 * embedding and normalisation ops, in both activation dtypes. Each kernel's arithmetic is
 * written once, in fp32, as a body that takes the dtype as a constant `bf`
 * (simd.h's tt_ld / tt_st); TWO_DTYPES makes its fp32 and bf16 instances,
 * each compiled for AVX-512, AVX2 and baseline x86-64 (TT_CLONES). The
 * OpenMP loops live in the plain functions that call them. SwiGLU takes
 * swiglu_avx512.c's kernels instead where the CPU has AVX-512 (their
 * exponential runs on FMAs; see there what that changes).
 *
 * Sums over rows (bias and norm weight gradients) run over column blocks,
 * each summed by one thread in row order, so they need no scratch and give
 * the same bits on any thread count. Outputs may alias their inputs (in
 * place), so the bodies carry no restrict. */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "ops/dropout.h"

/* Columns per block in the column-parallel reductions over rows. */
#define COLS 64
/* Rows ahead whose lines those reductions ask for (rows_ahead) */
#define ROWS_AHEAD 8
/* Elements per task of the elementwise kernels. */
#define CHUNK 8192

/* body(args..., 0) and body(args..., 1) as name_f32 and name_bf16 */
#define TWO_DTYPES(name, params, ...)                                 \
    TT_CLONES static void name##_f32 params { name(__VA_ARGS__, 0); } \
    TT_CLONES static void name##_bf16 params { name(__VA_ARGS__, 1); }
#define PICK(name, dt) ((dt) == TT_BF16 ? name##_bf16 : name##_f32)

/* Runs stmt for each CHUNK of n elements in parallel, with i (the first
 * element) and m (the count) in scope. */
#define FOR_CHUNKS(n, stmt)                                                        \
    do {                                                                           \
        const size_t n_ = (n);                                                     \
        const long nc_ = (long)((n_ + CHUNK - 1) / CHUNK);                         \
        _Pragma("omp parallel for schedule(static)") for (long c_ = 0; c_ < nc_; c_++) \
        {                                                                          \
            const size_t i = (size_t)c_ * CHUNK, m = n_ - i < CHUNK ? n_ - i : CHUNK; \
            stmt;                                                                  \
        }                                                                          \
    } while (0)

/* Runs stmt for each block of rb rows of N in parallel, with rows [n0, n1) in scope. */
#define FOR_ROWS(N, rb, stmt)                                                      \
    do {                                                                           \
        const int N_ = (N), rb_ = (rb), nt_ = (N_ + rb_ - 1) / rb_;                 \
        _Pragma("omp parallel for schedule(static)") for (int t_ = 0; t_ < nt_; t_++) \
        {                                                                          \
            const int n0 = t_ * rb_, n1 = n0 + rb_ < N_ ? n0 + rb_ : N_;            \
            stmt;                                                                  \
        }                                                                          \
    } while (0)

/* element i of a buffer of dtype dt, as an address */
static inline const void *at(const void *p, size_t i, tt_dtype dt) { return (const char *)p + i * tt_dtype_size(dt); }
static inline void *atw(void *p, size_t i, tt_dtype dt) { return (char *)p + i * tt_dtype_size(dt); }

/* ---- elementwise -------------------------------------------------------- */

TT_INLINE void add_body(const void *a, const void *b, void *y, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) tt_st(y, i, tt_ld(a, i, bf) + tt_ld(b, i, bf), bf);
}
TWO_DTYPES(add_body, (const void *a, const void *b, void *y, size_t n), a, b, y, n)

void cpu_add(const void *a, const void *b, void *y, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(add_body, dt)(at(a, i, dt), at(b, i, dt), atw(y, i, dt), m));
}

TT_INLINE void scale_body(const void *x, void *y, size_t n, float s, int bf)
{
    for (size_t i = 0; i < n; i++) tt_st(y, i, s * tt_ld(x, i, bf), bf);
}
TWO_DTYPES(scale_body, (const void *x, void *y, size_t n, float s), x, y, n, s)

void cpu_scale(const void *x, void *y, size_t n, float s, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(scale_body, dt)(at(x, i, dt), atw(y, i, dt), m, s));
}

/* one row: y = a, plus s b_i on its columns */
TT_INLINE void add_scaled_row(const void *a, const void *const *b, const int *w, const int *c0, int k, void *y, int W,
                              float s, int bf)
{
    int c = 0;
    for (int i = 0; i <= k; i++) {
        const int end = i < k ? c0[i] : W;
        for (; c < end; c++) tt_st(y, (size_t)c, tt_ld(a, (size_t)c, bf), bf);
        if (i == k) break;
        for (int j = 0; j < w[i]; j++, c++) tt_st(y, (size_t)c, tt_ld(a, (size_t)c, bf) + s * tt_ld(b[i], (size_t)j, bf), bf);
    }
}
TWO_DTYPES(add_scaled_row, (const void *a, const void *const *b, const int *w, const int *c0, int k, void *y, int W, float s),
           a, b, w, c0, k, y, W, s)

void cpu_add_scaled(const void *a, const void *const *b, const int *w, const int *c0, int k, void *y, int N, int W,
                    float s, tt_dtype dt)
{
    #pragma omp parallel for schedule(static) if ((size_t)N * W > (1 << 15))
    for (int r = 0; r < N; r++) {
        const void *br[CPU_ADD_SCALED_MAX_PARTS];
        for (int i = 0; i < k; i++) br[i] = at(b[i], (size_t)r * w[i], dt);
        PICK(add_scaled_row, dt)(at(a, (size_t)r * W, dt), br, w, c0, k, atw(y, (size_t)r * W, dt), W, s);
    }
}

TT_INLINE void accum_body(float *acc, const void *g, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) acc[i] += tt_ld(g, i, bf);
}
TWO_DTYPES(accum_body, (float *acc, const void *g, size_t n), acc, g, n)

void cpu_accum(float *acc, const void *g, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(accum_body, dt)(acc + i, at(g, i, dt), m));
}

/* silu(a) * b and its derivatives; the exp is simd.h's, which vectorises */
TT_INLINE void swiglu_body(const void *a, const void *b, void *y, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float x = tt_ld(a, i, bf);
        tt_st(y, i, x / (1.0f + tt_expf(-x)) * tt_ld(b, i, bf), bf);
    }
}
TWO_DTYPES(swiglu_body, (const void *a, const void *b, void *y, size_t n), a, b, y, n)

TT_INLINE void swiglu_bwd_body(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float x = tt_ld(a, i, bf), u = tt_ld(b, i, bf), g = tt_ld(dy, i, bf);
        const float s = 1.0f / (1.0f + tt_expf(-x));
        tt_st(da, i, g * u * s * (1.0f + x * (1.0f - s)), bf);
        tt_st(db, i, g * x * s, bf);
    }
}
TWO_DTYPES(swiglu_bwd_body, (const void *a, const void *b, const void *dy, void *da, void *db, size_t n), a, b, dy, da,
           db, n)

/* cpu_swiglu_set_avx512's switch */
static int g_swiglu_avx512 = 1;

void cpu_swiglu_set_avx512(int on) { __atomic_store_n(&g_swiglu_avx512, on != 0, __ATOMIC_RELAXED); }

/* whether a swiglu takes swiglu_avx512.c's kernels */
static int swiglu_avx512(void) { return __atomic_load_n(&g_swiglu_avx512, __ATOMIC_RELAXED) && tt_cpu_avx512(); }

void cpu_swiglu_fwd(const void *a, const void *b, void *y, size_t n, tt_dtype dt)
{
    if (swiglu_avx512())
        FOR_CHUNKS(n, cpu_swiglu_fwd_avx512(at(a, i, dt), at(b, i, dt), atw(y, i, dt), m, 0, dt));
    else FOR_CHUNKS(n, PICK(swiglu_body, dt)(at(a, i, dt), at(b, i, dt), atw(y, i, dt), m));
}

void cpu_swiglu_bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, tt_dtype dt)
{
    if (swiglu_avx512())
        FOR_CHUNKS(n, cpu_swiglu_bwd_avx512(at(a, i, dt), at(b, i, dt), at(dy, i, dt), atw(da, i, dt), atw(db, i, dt), m,
                                            0, 0, dt));
    else
        FOR_CHUNKS(n, PICK(swiglu_bwd_body, dt)(at(a, i, dt), at(b, i, dt), at(dy, i, dt), atw(da, i, dt),
                                                atw(db, i, dt), m));
}

/* rows [n0, n1) of ab (N, 2F): gate a = ab[:, :F], up b = ab[:, F:] */
TT_INLINE void swiglu_rows_body(const void *ab, void *y, int n0, int n1, int F, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, iy = (size_t)n * F;
        for (int f = 0; f < F; f++) {
            const float x = tt_ld(ab, ia + f, bf);
            tt_st(y, iy + f, x / (1.0f + tt_expf(-x)) * tt_ld(ab, ia + F + f, bf), bf);
        }
    }
}
TWO_DTYPES(swiglu_rows_body, (const void *ab, void *y, int n0, int n1, int F), ab, y, n0, n1, F)

TT_INLINE void swiglu_rows_bwd_body(const void *ab, const void *dy, void *dab, int n0, int n1, int F, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, iy = (size_t)n * F;
        for (int f = 0; f < F; f++) {
            const float x = tt_ld(ab, ia + f, bf), u = tt_ld(ab, ia + F + f, bf), g = tt_ld(dy, iy + f, bf);
            const float s = 1.0f / (1.0f + tt_expf(-x));
            tt_st(dab, ia + f, g * u * s * (1.0f + x * (1.0f - s)), bf);
            tt_st(dab, ia + F + f, g * x * s, bf);
        }
    }
}
TWO_DTYPES(swiglu_rows_bwd_body, (const void *ab, const void *dy, void *dab, int n0, int n1, int F), ab, dy, dab, n0, n1,
           F)

/* rows [n0, n1) of ab (N, 2F) through swiglu_avx512.c's kernels, a row's
 * gate and up halves at a time. Each value's line in the next row is asked
 * for as the value is read: the two halves are streams the hardware
 * prefetchers follow within a row, but not to the next row, 2F values on.
 * On the Intel Xeon host that took the SwiGLU of llama_768's bf16 step from
 * 5.9-6.2 to 4.9-5.1 ms forward and from 8.7-8.9 to 7.6-8.0 backward, and
 * moe_288's experts' from 5.2-5.4 to 3.5-4.0 and from 9.9-10.5 to 5.8;
 * asking 2 KiB ahead within the row instead made llama_768's slower
 * (performance-changes.md). */
static void swiglu_rows_avx512(const void *ab, void *y, int n0, int n1, int N, int F, tt_dtype dt)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, next = n + 1 < N ? 2 * (size_t)F : 0; /* ab's next row: 2F on */
        cpu_swiglu_fwd_avx512(at(ab, ia, dt), at(ab, ia + F, dt), atw(y, (size_t)n * F, dt), (size_t)F, next, dt);
    }
}

static void swiglu_rows_bwd_avx512(const void *ab, const void *dy, void *dab, int n0, int n1, int N, int F,
                                   tt_dtype dt)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, next = n + 1 < N ? 2 * (size_t)F : 0; /* dy's: F on */
        cpu_swiglu_bwd_avx512(at(ab, ia, dt), at(ab, ia + F, dt), at(dy, (size_t)n * F, dt), atw(dab, ia, dt),
                              atw(dab, ia + F, dt), (size_t)F, next, next / 2, dt);
    }
}

void cpu_swiglu_fused_fwd(const void *ab, void *y, int N, int F, tt_dtype dt)
{
    const int rb = F > 0 && F < CHUNK ? CHUNK / F : 1;
    if (swiglu_avx512()) FOR_ROWS(N, rb, swiglu_rows_avx512(ab, y, n0, n1, N, F, dt));
    else FOR_ROWS(N, rb, PICK(swiglu_rows_body, dt)(ab, y, n0, n1, F));
}

void cpu_swiglu_fused_bwd(const void *ab, const void *dy, void *dab, int N, int F, tt_dtype dt)
{
    const int rb = F > 0 && F < CHUNK ? CHUNK / F : 1;
    if (swiglu_avx512()) FOR_ROWS(N, rb, swiglu_rows_bwd_avx512(ab, dy, dab, n0, n1, N, F, dt));
    else FOR_ROWS(N, rb, PICK(swiglu_rows_bwd_body, dt)(ab, dy, dab, n0, n1, F));
}

/* GPT-OSS's clamped SwiGLU over rows [n0, n1) of ab (N, 2F): g = min(a, limit), u = clamp(b, -limit, limit),
 * y = (u + 1) g sigmoid(alpha g) */
TT_INLINE void swiglu_clamp_rows_body(const void *ab, void *y, int n0, int n1, int F, float alpha, float limit, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, iy = (size_t)n * F;
        for (int f = 0; f < F; f++) {
            const float g = fminf(tt_ld(ab, ia + f, bf), limit), u = fmaxf(-limit, fminf(tt_ld(ab, ia + F + f, bf), limit));
            tt_st(y, iy + f, (u + 1.0f) * g / (1.0f + tt_expf(-alpha * g)), bf);
        }
    }
}
TWO_DTYPES(swiglu_clamp_rows_body, (const void *ab, void *y, int n0, int n1, int F, float alpha, float limit), ab, y, n0,
           n1, F, alpha, limit)

/* its gradient: d/dg [g s(alpha g)] = s + alpha g s (1 - s); none through a clamp that holds (a > limit, |b| > limit) */
TT_INLINE void swiglu_clamp_rows_bwd_body(const void *ab, const void *dy, void *dab, int n0, int n1, int F, float alpha,
                                          float limit, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t ia = (size_t)n * 2 * F, iy = (size_t)n * F;
        for (int f = 0; f < F; f++) {
            const float a = tt_ld(ab, ia + f, bf), b = tt_ld(ab, ia + F + f, bf), d = tt_ld(dy, iy + f, bf);
            const float g = fminf(a, limit), u = fmaxf(-limit, fminf(b, limit));
            const float s = 1.0f / (1.0f + tt_expf(-alpha * g));
            tt_st(dab, ia + f, a > limit ? 0.0f : d * (u + 1.0f) * (s + alpha * g * s * (1.0f - s)), bf);
            tt_st(dab, ia + F + f, b > limit || b < -limit ? 0.0f : d * g * s, bf);
        }
    }
}
TWO_DTYPES(swiglu_clamp_rows_bwd_body,
           (const void *ab, const void *dy, void *dab, int n0, int n1, int F, float alpha, float limit), ab, dy, dab, n0,
           n1, F, alpha, limit)

void cpu_swiglu_clamp_fwd(const void *ab, void *y, int N, int F, float alpha, float limit, tt_dtype dt)
{
    FOR_ROWS(N, F > 0 && F < CHUNK ? CHUNK / F : 1, PICK(swiglu_clamp_rows_body, dt)(ab, y, n0, n1, F, alpha, limit));
}

void cpu_swiglu_clamp_bwd(const void *ab, const void *dy, void *dab, int N, int F, float alpha, float limit,
                          tt_dtype dt)
{
    FOR_ROWS(N, F > 0 && F < CHUNK ? CHUNK / F : 1,
             PICK(swiglu_clamp_rows_bwd_body, dt)(ab, dy, dab, n0, n1, F, alpha, limit));
}

/* GELU, tanh form: tanh(u) = 1 - 2 / (exp(2u) + 1), with the vectorised exp */
#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
TT_INLINE float tanh_v(float u) { return 1.0f - 2.0f / (tt_expf(2.0f * u) + 1.0f); }

TT_INLINE void gelu_body(const void *x, void *y, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float v = tt_ld(x, i, bf);
        tt_st(y, i, 0.5f * v * (1.0f + tanh_v(GELU_C * (v + 0.044715f * v * v * v))), bf);
    }
}
TWO_DTYPES(gelu_body, (const void *x, void *y, size_t n), x, y, n)

TT_INLINE void gelu_bwd_body(const void *x, const void *dy, void *dx, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float v = tt_ld(x, i, bf), t = tanh_v(GELU_C * (v + 0.044715f * v * v * v));
        const float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
        tt_st(dx, i, tt_ld(dy, i, bf) * g, bf);
    }
}
TWO_DTYPES(gelu_bwd_body, (const void *x, const void *dy, void *dx, size_t n), x, dy, dx, n)

/* gelu(a) * b, GeGLU, and its derivatives */
TT_INLINE void geglu_body(const void *a, const void *b, void *y, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float v = tt_ld(a, i, bf);
        tt_st(y, i, 0.5f * v * (1.0f + tanh_v(GELU_C * (v + 0.044715f * v * v * v))) * tt_ld(b, i, bf), bf);
    }
}
TWO_DTYPES(geglu_body, (const void *a, const void *b, void *y, size_t n), a, b, y, n)

TT_INLINE void geglu_bwd_body(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float v = tt_ld(a, i, bf), u = tt_ld(b, i, bf), g = tt_ld(dy, i, bf);
        const float t = tanh_v(GELU_C * (v + 0.044715f * v * v * v));
        const float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
        tt_st(da, i, g * u * d, bf);
        tt_st(db, i, g * 0.5f * v * (1.0f + t), bf);
    }
}
TWO_DTYPES(geglu_bwd_body, (const void *a, const void *b, const void *dy, void *da, void *db, size_t n), a, b, dy, da,
           db, n)

void cpu_geglu_fwd(const void *a, const void *b, void *y, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(geglu_body, dt)(at(a, i, dt), at(b, i, dt), atw(y, i, dt), m));
}

void cpu_geglu_bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(geglu_bwd_body, dt)(at(a, i, dt), at(b, i, dt), at(dy, i, dt), atw(da, i, dt), atw(db, i, dt), m));
}

void cpu_gelu_fwd(const void *x, void *y, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(gelu_body, dt)(at(x, i, dt), atw(y, i, dt), m));
}

void cpu_gelu_bwd(const void *x, const void *dy, void *dx, size_t n, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(gelu_bwd_body, dt)(at(x, i, dt), at(dy, i, dt), atw(dx, i, dt), m));
}

/* soft-capping, cap tanh(x / cap), and its derivative */
TT_INLINE void softcap_body(const void *x, void *y, size_t n, float cap, int bf)
{
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++) tt_st(y, i, cap * tt_tanhf(tt_ld(x, i, bf) * inv), bf);
}
TWO_DTYPES(softcap_body, (const void *x, void *y, size_t n, float cap), x, y, n, cap)

TT_INLINE void softcap_bwd_body(const void *x, const void *dy, void *dx, size_t n, float cap, int bf)
{
    const float inv = 1.0f / cap;
    for (size_t i = 0; i < n; i++) {
        const float t = tt_tanhf(tt_ld(x, i, bf) * inv);
        tt_st(dx, i, tt_ld(dy, i, bf) * (1.0f - t * t), bf);
    }
}
TWO_DTYPES(softcap_bwd_body, (const void *x, const void *dy, void *dx, size_t n, float cap), x, dy, dx, n, cap)

void cpu_softcap_fwd(const void *x, void *y, size_t n, double cap, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(softcap_body, dt)(at(x, i, dt), atw(y, i, dt), m, (float)cap));
}

void cpu_softcap_bwd(const void *x, const void *dy, void *dx, size_t n, double cap, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(softcap_bwd_body, dt)(at(x, i, dt), at(dy, i, dt), atw(dx, i, dt), m, (float)cap));
}

/* elements [i0, i0 + n): the mask is drawn by the element's index in the whole value, so any split over
 * threads gives the same bits (ops/dropout.h) */
TT_INLINE void dropout_body(const void *x, void *y, size_t i0, size_t n, uint64_t key, uint32_t threshold, float scale,
                            int bf)
{
    for (size_t i = 0; i < n; i++)
        tt_st(y, i, tt_ld(x, i, bf) * (tt_dropout_keep(key, i0 + i, threshold) ? scale : 0.0f), bf);
}
TWO_DTYPES(dropout_body, (const void *x, void *y, size_t i0, size_t n, uint64_t key, uint32_t threshold, float scale),
           x, y, i0, n, key, threshold, scale)

void cpu_dropout(const void *x, void *y, size_t n, uint64_t key, uint32_t threshold, float scale, tt_dtype dt)
{
    FOR_CHUNKS(n, PICK(dropout_body, dt)(at(x, i, dt), atw(y, i, dt), i, m, key, threshold, scale));
}

/* ---- bias --------------------------------------------------------------- */

TT_INLINE void bias_add_body(const void *x, const float *b, void *y, int n0, int n1, int D, int bf)
{
    for (int n = n0; n < n1; n++)
        for (int d = 0; d < D; d++) {
            const size_t i = (size_t)n * D + d;
            tt_st(y, i, tt_ld(x, i, bf) + b[d], bf);
        }
}
TWO_DTYPES(bias_add_body, (const void *x, const float *b, void *y, int n0, int n1, int D), x, b, y, n0, n1, D)

void cpu_bias_add(const void *x, const float *b, void *y, int N, int D, tt_dtype dt)
{
    FOR_ROWS(N, D > 0 && D < CHUNK ? CHUNK / D : 1, PICK(bias_add_body, dt)(x, b, y, n0, n1, D));
}

/* The lines of row n + ROWS_AHEAD's columns [d0, d0 + nd) of p, and of q
 * unless NULL: a column block's rows lie D values apart, a stride the
 * hardware prefetchers follow poorly (rmsnorm_bwd took 9.4-10.3 ms of
 * llama_768's bf16 step without this, 6.8-6.9 with it, on the Intel Xeon
 * host: performance-changes.md). */
TT_INLINE void rows_ahead(const void *p, const void *q, int n, int N, int D, int d0, int nd, int bf)
{
    if (n + ROWS_AHEAD >= N) return;
    const size_t esz = bf ? 2 : 4, off = ((size_t)(n + ROWS_AHEAD) * (size_t)D + (size_t)d0) * esz;
    tt_prefetch((const char *)p + off, (size_t)nd * esz);
    if (q) tt_prefetch((const char *)q + off, (size_t)nd * esz);
}

/* sum over rows of the columns [d0, d0 + nd) into acc */
TT_INLINE void colsum_body(const void *dy, float *acc, int N, int D, int d0, int nd, int bf)
{
    for (int n = 0; n < N; n++) {
        rows_ahead(dy, NULL, n, N, D, d0, nd, bf);
        for (int d = 0; d < nd; d++) acc[d] += tt_ld(dy, (size_t)n * D + d0 + d, bf);
    }
}
TWO_DTYPES(colsum_body, (const void *dy, float *acc, int N, int D, int d0, int nd), dy, acc, N, D, d0, nd)

void cpu_bias_grad(const void *dy, float *db, int N, int D, tt_dtype dt)
{
    const int nblk = (D + COLS - 1) / COLS;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
        float acc[COLS] = {0};
        PICK(colsum_body, dt)(dy, acc, N, D, d0, nd);
        memcpy(db + d0, acc, (size_t)nd * sizeof(float));
    }
}

/* ---- embedding ---------------------------------------------------------- */

/* An id outside [0, V) is a caller error; it reads as a zero row. */
void cpu_embedding_fwd(const int32_t *ids, const void *table, tt_dtype tdt, void *out, int N, int V, int D, tt_dtype dt)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const int id = ids[n];
        void *row = atw(out, (size_t)n * D, dt);
        const void *src = id < 0 || id >= V ? NULL : at(table, (size_t)id * D, tdt);
        if (!src) memset(row, 0, (size_t)D * tt_dtype_size(dt));
        else if (tdt == dt) memcpy(row, src, (size_t)D * tt_dtype_size(dt));
        else if (tdt == TT_F32) tt_cpu_from_f32(row, dt, src, (size_t)D);
        else tt_cpu_to_f32(row, src, tdt, (size_t)D); /* a bf16 table (LoRA's frozen base), fp32 activations */
    }
}

/* dtable rows id (columns d0..d0+nd) += dout row n, for every n */
TT_INLINE void scatter_body(const int32_t *ids, const void *dout, float *dtable, int N, int V, int D, int d0, int nd,
                            int bf)
{
    for (int n = 0; n < N; n++) {
        const int id = ids[n];
        if (id < 0 || id >= V) continue;
        float *dst = dtable + (size_t)id * D + d0;
        for (int d = 0; d < nd; d++) dst[d] += tt_ld(dout, (size_t)n * D + d0 + d, bf);
    }
}
TWO_DTYPES(scatter_body, (const int32_t *ids, const void *dout, float *dtable, int N, int V, int D, int d0, int nd), ids,
           dout, dtable, N, V, D, d0, nd)

/* Repeated ids make a row-parallel scatter race, so each thread owns a slice
 * of columns and walks all rows in order: deterministic and race-free. */
void cpu_embedding_bwd(const int32_t *ids, const void *dout, float *dtable, int N, int V, int D, tt_dtype dt,
                       int accumulate)
{
    #pragma omp parallel
    {
        if (!accumulate) {
            #pragma omp for schedule(static)
            for (int v = 0; v < V; v++) memset(dtable + (size_t)v * D, 0, (size_t)D * sizeof(float));
        }
        const int nblk = (D + COLS - 1) / COLS;
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            PICK(scatter_body, dt)(ids, dout, dtable, N, V, D, d0, nd);
        }
    }
}

/* ---- RMSNorm ------------------------------------------------------------ */

/* As Hugging Face's LlamaRMSNorm in fp32: y = w * (x * rstd). Rows [n0, n1). */
TT_INLINE void rmsnorm_body(const void *x, const float *w, void *y, float *rstd, int n0, int n1, int D, float eps,
                            int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * D;
        float ss = 0;
        #pragma omp simd reduction(+ : ss)
        for (int d = 0; d < D; d++) {
            const float v = tt_ld(x, o + d, bf);
            ss += v * v;
        }
        const float r = 1.0f / sqrtf(ss / (float)D + eps);
        for (int d = 0; d < D; d++) tt_st(y, o + d, w[d] * (tt_ld(x, o + d, bf) * r), bf);
        rstd[n] = r;
    }
}
TWO_DTYPES(rmsnorm_body, (const void *x, const float *w, void *y, float *rstd, int n0, int n1, int D, float eps), x, w,
           y, rstd, n0, n1, D, eps)

/* Rows per task: enough work per call for short rows. */
static int row_block(int D) { return D > 0 && D < 1024 ? 1024 / D : 1; }

void cpu_rmsnorm_fwd(const void *x, const float *w, void *y, float *rstd, int N, int D, double eps, tt_dtype dt)
{
    FOR_ROWS(N, row_block(D), PICK(rmsnorm_body, dt)(x, w, y, rstd, n0, n1, D, (float)eps));
}

/* dw columns [d0, d0 + nd) = sum over rows of dy * x * rstd */
TT_INLINE void rmsnorm_dw_body(const void *x, const float *rstd, const void *dy, float *acc, int N, int D, int d0,
                               int nd, int bf)
{
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * D + d0;
        const float r = rstd[n];
        rows_ahead(x, dy, n, N, D, d0, nd, bf);
        for (int d = 0; d < nd; d++) acc[d] += tt_ld(dy, o + d, bf) * tt_ld(x, o + d, bf) * r;
    }
}
TWO_DTYPES(rmsnorm_dw_body, (const void *x, const float *rstd, const void *dy, float *acc, int N, int D, int d0, int nd),
           x, rstd, dy, acc, N, D, d0, nd)

TT_INLINE void rmsnorm_dx_body(const void *x, const float *w, const float *rstd, const void *dy, const void *dres,
                               void *dx, int n0, int n1, int D, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * D;
        const float r = rstd[n];
        float dot = 0;
        #pragma omp simd reduction(+ : dot)
        for (int d = 0; d < D; d++) dot += tt_ld(dy, o + d, bf) * w[d] * tt_ld(x, o + d, bf);
        const float c = r * r * r * dot / (float)D;
        if (dres)
            for (int d = 0; d < D; d++)
                tt_st(dx, o + d, tt_ld(dres, o + d, bf) + (r * w[d] * tt_ld(dy, o + d, bf) - c * tt_ld(x, o + d, bf)), bf);
        else
            for (int d = 0; d < D; d++) tt_st(dx, o + d, r * w[d] * tt_ld(dy, o + d, bf) - c * tt_ld(x, o + d, bf), bf);
    }
}
TWO_DTYPES(rmsnorm_dx_body, (const void *x, const float *w, const float *rstd, const void *dy, const void *dres, void *dx,
                             int n0, int n1, int D),
           x, w, rstd, dy, dres, dx, n0, n1, D)

/* y = x + d, then the norm of the stored (rounded) y, as the two ops would */
TT_INLINE void add_rmsnorm_body(const void *x, const void *dd, const float *w, void *y, void *h, float *rstd, int n0,
                                int n1, int D, float eps, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * D;
        float ss = 0;
        #pragma omp simd reduction(+ : ss)
        for (int d = 0; d < D; d++) {
            tt_st(y, o + d, tt_ld(x, o + d, bf) + tt_ld(dd, o + d, bf), bf);
            const float v = tt_ld(y, o + d, bf);
            ss += v * v;
        }
        const float r = 1.0f / sqrtf(ss / (float)D + eps);
        for (int d = 0; d < D; d++) tt_st(h, o + d, w[d] * (tt_ld(y, o + d, bf) * r), bf);
        rstd[n] = r;
    }
}
TWO_DTYPES(add_rmsnorm_body, (const void *x, const void *dd, const float *w, void *y, void *h, float *rstd, int n0, int n1,
                              int D, float eps),
           x, dd, w, y, h, rstd, n0, n1, D, eps)

void cpu_add_rmsnorm_fwd(const void *x, const void *d, const float *w, void *y, void *h, float *rstd, int N, int D,
                         double eps, tt_dtype dt)
{
    FOR_ROWS(N, row_block(D), PICK(add_rmsnorm_body, dt)(x, d, w, y, h, rstd, n0, n1, D, (float)eps));
}

void cpu_rmsnorm_bwd(const void *x, const float *w, const float *rstd, const void *dy, const void *dres, void *dx,
                     float *dw, int N, int D, tt_dtype dt)
{
    const int nblk = (D + COLS - 1) / COLS, rb = row_block(D), nt = (N + rb - 1) / rb;
    #pragma omp parallel
    {
        /* dw first, so that dx may overwrite dy in place */
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            float acc[COLS] = {0};
            PICK(rmsnorm_dw_body, dt)(x, rstd, dy, acc, N, D, d0, nd);
            memcpy(dw + d0, acc, (size_t)nd * sizeof(float));
        }
        #pragma omp for schedule(static)
        for (int t = 0; t < nt; t++)
            PICK(rmsnorm_dx_body, dt)(x, w, rstd, dy, dres, dx, t * rb, (t + 1) * rb < N ? (t + 1) * rb : N, D);
    }
}

/* ---- LayerNorm ---------------------------------------------------------- */

TT_INLINE void layernorm_body(const void *x, const float *w, const float *b, void *y, float *mean, float *rstd,
                              int n0, int n1, int D, float eps, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * D;
        float s = 0, v = 0;
        #pragma omp simd reduction(+ : s)
        for (int d = 0; d < D; d++) s += tt_ld(x, o + d, bf);
        const float mu = s / (float)D;
        /* two passes: the variance of centred values loses nothing to cancellation */
        #pragma omp simd reduction(+ : v)
        for (int d = 0; d < D; d++) {
            const float c = tt_ld(x, o + d, bf) - mu;
            v += c * c;
        }
        const float r = 1.0f / sqrtf(v / (float)D + eps);
        for (int d = 0; d < D; d++) tt_st(y, o + d, (tt_ld(x, o + d, bf) - mu) * r * w[d] + b[d], bf);
        mean[n] = mu;
        rstd[n] = r;
    }
}
TWO_DTYPES(layernorm_body, (const void *x, const float *w, const float *b, void *y, float *mean, float *rstd, int n0,
                            int n1, int D, float eps),
           x, w, b, y, mean, rstd, n0, n1, D, eps)

void cpu_layernorm_fwd(const void *x, const float *w, const float *b, void *y, float *mean, float *rstd, int N,
                       int D, double eps, tt_dtype dt)
{
    FOR_ROWS(N, row_block(D), PICK(layernorm_body, dt)(x, w, b, y, mean, rstd, n0, n1, D, (float)eps));
}

TT_INLINE void layernorm_dwb_body(const void *x, const float *mean, const float *rstd, const void *dy, float *aw,
                                  float *ab, int N, int D, int d0, int nd, int bf)
{
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * D + d0;
        const float mu = mean[n], r = rstd[n];
        rows_ahead(x, dy, n, N, D, d0, nd, bf);
        for (int d = 0; d < nd; d++) {
            const float g = tt_ld(dy, o + d, bf);
            aw[d] += g * (tt_ld(x, o + d, bf) - mu) * r;
            ab[d] += g;
        }
    }
}
TWO_DTYPES(layernorm_dwb_body, (const void *x, const float *mean, const float *rstd, const void *dy, float *aw, float *ab,
                                int N, int D, int d0, int nd),
           x, mean, rstd, dy, aw, ab, N, D, d0, nd)

TT_INLINE void layernorm_dx_body(const void *x, const float *w, const float *mean, const float *rstd, const void *dy,
                                 void *dx, int n0, int n1, int D, int bf)
{
    for (int n = n0; n < n1; n++) {
        const size_t o = (size_t)n * D;
        const float mu = mean[n], r = rstd[n];
        float mg = 0, mgx = 0;
        #pragma omp simd reduction(+ : mg, mgx)
        for (int d = 0; d < D; d++) {
            const float g = tt_ld(dy, o + d, bf) * w[d];
            mg += g;
            mgx += g * (tt_ld(x, o + d, bf) - mu) * r;
        }
        mg /= (float)D;
        mgx /= (float)D;
        for (int d = 0; d < D; d++)
            tt_st(dx, o + d, r * (tt_ld(dy, o + d, bf) * w[d] - mg - (tt_ld(x, o + d, bf) - mu) * r * mgx), bf);
    }
}
TWO_DTYPES(layernorm_dx_body, (const void *x, const float *w, const float *mean, const float *rstd, const void *dy,
                               void *dx, int n0, int n1, int D),
           x, w, mean, rstd, dy, dx, n0, n1, D)

void cpu_layernorm_bwd(const void *x, const float *w, const float *mean, const float *rstd, const void *dy,
                       void *dx, float *dw, float *db, int N, int D, tt_dtype dt)
{
    const int nblk = (D + COLS - 1) / COLS, rb = row_block(D), nt = (N + rb - 1) / rb;
    #pragma omp parallel
    {
        /* dw and db first, so that dx may overwrite dy in place */
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            float aw[COLS] = {0}, ab[COLS] = {0};
            PICK(layernorm_dwb_body, dt)(x, mean, rstd, dy, aw, ab, N, D, d0, nd);
            memcpy(dw + d0, aw, (size_t)nd * sizeof(float));
            memcpy(db + d0, ab, (size_t)nd * sizeof(float));
        }
        #pragma omp for schedule(static)
        for (int t = 0; t < nt; t++)
            PICK(layernorm_dx_body, dt)(x, w, mean, rstd, dy, dx, t * rb, (t + 1) * rb < N ? (t + 1) * rb : N, D);
    }
}

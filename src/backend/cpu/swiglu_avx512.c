/* swiglu_avx512.c — SwiGLU in AVX-512: y = silu(a) b and its two input
 * gradients, 16 values a step, on bf16 or fp32 activations.
 *
 * The portable bodies in kernels.c compile to vector code too, but they
 * spend much of their time in tt_expf: 15 multiplies and adds, none of them
 * contracted into an FMA (C11). Here the exponential runs on FMAs: for bf16,
 * avx512_util.h's degree-4 polynomial (relative error below 3e-6), as the
 * results are rounded to bf16 (half an ulp: 2e-3) right after, so about one
 * value in several thousand rounds the other way than the portable body's, by
 * one bf16 ulp; for fp32, tt_expf's own Cephes polynomial (3e-7 on FMAs,
 * against 2e-7), so the results move in their last bits.
 * tests/test_cpu_kernels.c compares both with the portable bodies.
 * Everything else is the portable body's arithmetic, operation for
 * operation: the same clamp of the exponent to [-87.3, 88.7] and 2^n built
 * in the exponent bits, so an overflow is the same +inf, a NaN the same NaN,
 * and the division an IEEE division.
 *
 * On the Intel Xeon host the bf16 kernels made moe_288's bf16 step 2.8-3.0%
 * and llama_768's 1.1-1.7% faster, the fp32 ones with the cross-entropy's
 * fp32 row llama_288's fp32 step 1.7-2.5% (bench/ab_step.sh,
 * docs/performance-changes.md). */
#include "backend/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/avx512_util.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AI static inline __attribute__((always_inline))

/* exp(x) as tt_expf bounds it (x clamped to [-87.3, 88.7]; past about 88.0
 * 2^n is +inf, so exp is +inf; NaN stays NaN, its 2^n taken as 1), with
 * exp16_deg4's polynomial (relative error below 3e-6) for a result rounded
 * to bf16 (bf), else exp16_cephes's (3e-7) */
TGT AI __m512 exp16_sw(__m512 x, const int bf)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    __m512 n;
    const __m512 p = bf ? exp16_deg4(x, &n) : exp16_cephes(x, &n);
    /* 2^n in the exponent bits, n in [-126, 128] (128: +inf). A NaN's n
     * converts to 0x80000000, whose bits shift out: 2^0. */
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* m of 16 values from element i of p (bf16 or fp32) as fp32, 0 in the other lanes */
TGT AI __m512 load16(const void *p, size_t i, __mmask16 m, const int bf)
{
    if (bf) return bf16_widen(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
    return _mm512_maskz_loadu_ps(m, (const float *)p + i);
}

/* m of 16 values to element i of p, rounded to bf16 as tt_bf16_bits rounds when bf */
TGT AI void store16(void *p, size_t i, __mmask16 m, __m512 v, const int bf)
{
    if (bf) _mm256_mask_storeu_epi16((uint16_t *)p + i, m, bf16x16_exact(v));
    else _mm512_mask_storeu_ps((float *)p + i, m, v);
}

/* The line `ahead` elements past element i of p, asked for once a line
 * (the step at its start); nothing when ahead is 0. The callers say where
 * the values they read next lie, which the hardware prefetchers do not see
 * (kernels.c). */
TGT AI void prefetch_ahead(const void *p, size_t i, size_t ahead, const int bf)
{
    const size_t es = bf ? 2 : 4;
    if (ahead && !((i * es) & 63)) _mm_prefetch((const char *)p + (i + ahead) * es, _MM_HINT_T0);
}

/* -x: the sign bit flipped, as the portable body's negation */
TGT AI __m512 neg(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

TGT AI void fwd(const void *a, const void *b, void *y, size_t n, size_t ahead, const int bf)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16(n - i < 16 ? (int)(n - i) : 16);
        prefetch_ahead(a, i, ahead, bf), prefetch_ahead(b, i, ahead, bf);
        const __m512 x = load16(a, i, m, bf), u = load16(b, i, m, bf);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp16_sw(neg(x), bf))); /* silu(x) = x / (1 + exp(-x)) */
        store16(y, i, m, _mm512_mul_ps(s, u), bf);
    }
}

TGT AI void bwd(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, size_t ahead,
                size_t ahead_dy, const int bf)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16(n - i < 16 ? (int)(n - i) : 16);
        prefetch_ahead(a, i, ahead, bf), prefetch_ahead(b, i, ahead, bf), prefetch_ahead(dy, i, ahead_dy, bf);
        const __m512 x = load16(a, i, m, bf), u = load16(b, i, m, bf), g = load16(dy, i, m, bf);
        const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp16_sw(neg(x), bf))); /* sigmoid(x) */
        /* d silu / dx = s (1 + x (1 - s)) */
        const __m512 dsilu = _mm512_add_ps(one, _mm512_mul_ps(x, _mm512_sub_ps(one, s)));
        store16(da, i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(g, u), s), dsilu), bf);
        store16(db, i, m, _mm512_mul_ps(_mm512_mul_ps(g, x), s), bf);
    }
}

TGT void cpu_swiglu_fwd_avx512(const void *a, const void *b, void *y, size_t n, size_t ahead, tt_dtype dt)
{
    if (dt == TT_BF16) fwd(a, b, y, n, ahead, 1);
    else fwd(a, b, y, n, ahead, 0);
}

TGT void cpu_swiglu_bwd_avx512(const void *a, const void *b, const void *dy, void *da, void *db, size_t n,
                               size_t ahead, size_t ahead_dy, tt_dtype dt)
{
    if (dt == TT_BF16) bwd(a, b, dy, da, db, n, ahead, ahead_dy, 1);
    else bwd(a, b, dy, da, db, n, ahead, ahead_dy, 0);
}

#else /* not x86-64 with GNU C: the portable bodies only (these are never called: tt_cpu_avx512 says 0) */
void cpu_swiglu_fwd_avx512(const void *a, const void *b, void *y, size_t n, size_t ahead, tt_dtype dt)
{
    (void)a, (void)b, (void)y, (void)n, (void)ahead, (void)dt;
}
void cpu_swiglu_bwd_avx512(const void *a, const void *b, const void *dy, void *da, void *db, size_t n, size_t ahead,
                           size_t ahead_dy, tt_dtype dt)
{
    (void)a, (void)b, (void)dy, (void)da, (void)db, (void)n, (void)ahead, (void)ahead_dy, (void)dt;
}
#endif

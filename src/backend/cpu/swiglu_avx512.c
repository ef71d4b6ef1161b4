/* swiglu_avx512.c — SwiGLU on bf16 activations in AVX-512: y = silu(a) b
 * and its two input gradients, 16 values a step.
 *
 * The portable bodies in kernels.c compile to vector code too, but they
 * spend much of their time in tt_expf: 15 multiplies and adds, none of them
 * contracted into an FMA (C11). Here the exponential is exp16_bf16_maskz's
 * degree-4 polynomial on FMAs, with a relative error below 3e-6: the results
 * are rounded to bf16 (half an ulp: 2e-3) right after, so about one value in
 * a few thousand rounds the other way than the portable body's, by one bf16
 * ulp (tests/test_cpu_kernels.c counts them: 0.02% of its values).
 * Everything else is the portable body's arithmetic, operation for
 * operation: the same clamp of the exponent to [-87.3, 88.7] and 2^n built
 * in the exponent bits, so an overflow is the same +inf, a NaN the same NaN,
 * and the division an IEEE division. fp32 activations keep the portable
 * bodies (and tt_expf's 2e-7).
 *
 * On the Intel Xeon host this made moe_288's bf16 step 2.8% and llama_768's
 * 1.7% faster (bench/ab_step.sh, docs/performance-changes.md). */
#include "backend/cpu/kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/avx512_util.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AI static inline __attribute__((always_inline))

/* exp(x) as tt_expf bounds it (x clamped to [-87.3, 88.7]; past about 88.0
 * 2^n is +inf, so exp is +inf; NaN stays NaN, its 2^n taken as 1) with
 * exp16_bf16_maskz's polynomial in between */
TGT AI __m512 exp16_sw(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    const __m512 magic = _mm512_set1_ps(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic), magic);
    const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147180559945f), x);
    __m512 p = _mm512_set1_ps(0.04145840182900429f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.16791030764579773f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5000436902046204f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.9999633431434631f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.9999992847442627f));
    /* 2^n in the exponent bits, n in [-126, 128] (128: +inf). A NaN's n
     * converts to 0x80000000, whose bits shift out: 2^0. */
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* m of 16 bf16 values from p as fp32 (0 in the other lanes) */
TGT AI __m512 load16(const uint16_t *p, __mmask16 m) { return bf16_widen(_mm256_maskz_loadu_epi16(m, p)); }

/* -x: the sign bit flipped, as the portable body's negation */
TGT AI __m512 neg(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
}

TGT void cpu_swiglu16_fwd_avx512(const uint16_t *a, const uint16_t *b, uint16_t *y, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16(n - i < 16 ? (int)(n - i) : 16);
        const __m512 x = load16(a + i, m), u = load16(b + i, m);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp16_sw(neg(x)))); /* silu(x) = x / (1 + exp(-x)) */
        _mm256_mask_storeu_epi16(y + i, m, bf16x16_exact(_mm512_mul_ps(s, u)));
    }
}

TGT void cpu_swiglu16_bwd_avx512(const uint16_t *a, const uint16_t *b, const uint16_t *dy, uint16_t *da, uint16_t *db,
                                 size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = mask16(n - i < 16 ? (int)(n - i) : 16);
        const __m512 x = load16(a + i, m), u = load16(b + i, m), g = load16(dy + i, m);
        const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp16_sw(neg(x)))); /* sigmoid(x) */
        /* d silu / dx = s (1 + x (1 - s)) */
        const __m512 dsilu = _mm512_add_ps(one, _mm512_mul_ps(x, _mm512_sub_ps(one, s)));
        _mm256_mask_storeu_epi16(da + i, m, bf16x16_exact(_mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(g, u), s), dsilu)));
        _mm256_mask_storeu_epi16(db + i, m, bf16x16_exact(_mm512_mul_ps(_mm512_mul_ps(g, x), s)));
    }
}

#else /* not x86-64 with GNU C: the portable bodies only (these are never called: tt_cpu_avx512 says 0) */
void cpu_swiglu16_fwd_avx512(const uint16_t *a, const uint16_t *b, uint16_t *y, size_t n)
{
    (void)a, (void)b, (void)y, (void)n;
}
void cpu_swiglu16_bwd_avx512(const uint16_t *a, const uint16_t *b, const uint16_t *dy, uint16_t *da, uint16_t *db,
                             size_t n)
{
    (void)a, (void)b, (void)dy, (void)da, (void)db, (void)n;
}
#endif

/* avx512_util.h — small AVX-512 building blocks shared by the GEMM and the
 * attention kernels. Include only from x86-64 GNU C code compiled with (at
 * least) AVX-512F/BW/VL enabled for the functions that call these. */
#ifndef TT_AVX512_UTIL_H
#define TT_AVX512_UTIL_H

#include <immintrin.h>

/* the first n lanes (n may be <= 0 or past the width) */
static inline __mmask16 mask16(int n)
{
    return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}
static inline __mmask32 mask32(int n)
{
    return n <= 0 ? 0 : n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1);
}

/* r[0..15] rows of 16 words -> r[c] = column c (see the comment per stage) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    /* per 128-bit lane: (a0 b0 a1 b1), (a2 b2 a3 b3) */
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i+j], lane L = rows 4i..4i+3 at column 4L+j */
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    /* gather lane L of u[j], u[4+j], u[8+j], u[12+j] into column 4L+j */
    for (int j = 0; j < 4; j++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i v1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        r[j] = _mm512_shuffle_i32x4(v0, v1, 0x88);
        r[8 + j] = _mm512_shuffle_i32x4(v0, v1, 0xdd);
        r[4 + j] = _mm512_shuffle_i32x4(w0, w1, 0x88);
        r[12 + j] = _mm512_shuffle_i32x4(w0, w1, 0xdd);
    }
}

/* exp(x - n ln 2) for n = round(x / ln 2), returned with n in *n, for an x
 * the caller has clamped: tt_expf's (vmath.h) Cephes polynomial step for
 * step on FMAs, ln 2 in two parts (relative error 3e-7) */
__attribute__((target("avx512f"))) static inline __m512 exp16_cephes(__m512 x, __m512 *n)
{
    const __m512 magic = _mm512_set1_ps(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    *n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic), magic);
    __m512 r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    return _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
}

/* The same for a result rounded to bf16 next, or weighing no more than such
 * values: a relative error below 3e-6 (2.6e-6 for these fp32 coefficients
 * over |r| <= ln2/2, against bf16's half ulp of 2e-3) for 9 vector
 * operations instead of 15. One ln2 (its error, 2e-9 times |n| <= 126, is
 * 2.4e-7 in r), and a degree-4 minimax fit of exp relative to itself, so
 * exp(0) is 0.9999993 (1 once rounded). */
__attribute__((target("avx512f"))) static inline __m512 exp16_deg4(__m512 x, __m512 *n)
{
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    *n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic), magic);
    const __m512 r = _mm512_fnmadd_ps(*n, _mm512_set1_ps(0.693147180559945f), x);
    __m512 p = _mm512_set1_ps(0.04145840182900429f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.16791030764579773f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5000436902046204f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.9999633431434631f));
    return _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.9999992847442627f));
}

/* exp of the 16 lanes set in k, 0 in the others: exp16_cephes, clamped to
 * [-87.3, 88.7] (exp(-inf) is then ~1e-38: callers that need an exact 0 mask
 * it); NaN stays NaN (max and min return their second operand when either is
 * NaN, and the clamp puts x second). The last step, p times 2^n, is one
 * vscalefps: exact, as tt_expf's multiply by the bits of 2^n is for every n
 * up to 127 (x up to 88.0; above, tt_expf gives inf where this gives the
 * finite value), and the mask comes with it. */
__attribute__((target("avx512f"))) static inline __m512 exp16_maskz(__mmask16 k, __m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.7f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
    __m512 n;
    const __m512 p = exp16_cephes(x, &n);
    return _mm512_maskz_scalef_ps(k, p, n);
}

/* exp16_maskz for x <= 0 (a score minus its row's maximum) whose result is
 * rounded to bf16 next, or weighs no more than such values: exp16_deg4,
 * clamped below at -87.3 as exp16_maskz (NaN stays NaN); x up to 88 gives a
 * finite value. */
__attribute__((target("avx512f"))) static inline __m512 exp16_bf16_maskz(__mmask16 k, __m512 x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-87.3f), x);
    __m512 n;
    const __m512 p = exp16_deg4(x, &n);
    return _mm512_maskz_scalef_ps(k, p, n);
}

/* 16 bf16 values as fp32 (exact: bf16 is fp32's top half) */
__attribute__((target("avx512f"))) static inline __m512 bf16_widen(__m256i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* 16 fp32 values rounded to bf16 (round to nearest even, NaN kept quiet,
 * denormals kept: tt_gemm_round_bf16 in integers, AVX-512F only), each word's
 * top half the bf16 value and its low half what rounding left there */
__attribute__((target("avx512f"))) static inline __m512i bf16_round_words(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(x, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x00400000));
}

/* the same rounded to bf16 and back to fp32 */
__attribute__((target("avx512f"))) static inline __m512 round_bf16_ps(__m512 v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(bf16_round_words(v), _mm512_set1_epi32((int)0xffff0000u)));
}

/* the same as 16 bf16 values, bit for bit tt_bf16_bits (vcvtneps2bf16 would
 * flush denormals to zero) */
__attribute__((target("avx512f"))) static inline __m256i bf16x16_exact(__m512 v)
{
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_round_words(v), 16));
}

/* 16 pairs of bf16 as 32-bit words: lo's value in the low half of each */
__attribute__((target("avx512f"))) static inline __m512i pair_words(__m256i lo, __m256i hi)
{
    return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

/* 16 fp32 values as bf16, rounded to nearest even (vcvtneps2bf16) */
__attribute__((target("avx512f,avx512bf16"))) static inline __m256i bf16x16(__m512 v)
{
    return (__m256i)_mm512_cvtneps_pbh(v);
}

/* 32 fp32 values (lo's 16, then hi's) as bf16, rounded to nearest even */
__attribute__((target("avx512f,avx512bf16"))) static inline __m512i bf16x32(__m512 lo, __m512 hi)
{
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* two rows' 16 values as 16 bf16 pairs: lo's value in the low half of each word */
__attribute__((target("avx512f,avx512bf16"))) static inline __m512i bf16_pairs(__m512 lo, __m512 hi)
{
    return pair_words(bf16x16(lo), bf16x16(hi));
}

#endif

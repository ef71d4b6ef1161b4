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

#endif

/* gemm_avx2.c — the AVX2 + FMA GEMM path (x86-64 CPUs without AVX-512): a
 * 6x16 fp32 microkernel; bf16 operands are widened to fp32 while packing.
 * Compiled in through target attributes, called only after a run-time check. */
#include "backend/cpu/gemm_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define TT_AVX2 __attribute__((target("avx2,fma")))

/* 6 rows x 16 columns = 12 ymm accumulators + 2 of B + 1 broadcast: 15 of
 * the 16 registers. */
#define MR 6
#define NR 16
#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

TT_AVX2 static void kern_f32(int ksteps, const void *ap, const void *bp, float *c, long ldc,
                             int accumulate)
{
    const float *a = ap, *b = bp;
#define DECL(i) __m256 c##i##a = _mm256_setzero_ps(), c##i##b = _mm256_setzero_ps();
    ROWS(DECL)
#undef DECL
    for (int s = 0; s < ksteps; s++) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#define FMA(i)                                          \
    {                                                   \
        const __m256 ai = _mm256_broadcast_ss(a + (i)); \
        c##i##a = _mm256_fmadd_ps(ai, b0, c##i##a);     \
        c##i##b = _mm256_fmadd_ps(ai, b1, c##i##b);     \
    }
        ROWS(FMA)
#undef FMA
        a += MR;
        b += NR;
    }
#define STORE(i)                                                        \
    {                                                                   \
        float *ci = c + (long)(i) * ldc;                                \
        if (accumulate) {                                               \
            c##i##a = _mm256_add_ps(c##i##a, _mm256_loadu_ps(ci));      \
            c##i##b = _mm256_add_ps(c##i##b, _mm256_loadu_ps(ci + 8));  \
        }                                                               \
        _mm256_storeu_ps(ci, c##i##a);                                  \
        _mm256_storeu_ps(ci + 8, c##i##b);                              \
    }
    ROWS(STORE)
#undef STORE
}

static void pack_f32(void *dst, const tt_gemm_pack_args *p) { tt_gemm_pack_generic(dst, p, 1); }

static const tt_gemm_impl avx2_f32 = {
    .name = "avx2-f32", .mr = MR, .nr = NR, .kunit = 1, .esize = 4,
    .mc = 144, .kc = 256, .nc = 2048, .kern = kern_f32, .pack = pack_f32,
    .skinny = tt_gemm_skinny_generic,
};

const tt_gemm_impl *tt_gemm_impl_avx2_f32(void) { return &avx2_f32; }

#else
const tt_gemm_impl *tt_gemm_impl_avx2_f32(void) { return NULL; }
#endif

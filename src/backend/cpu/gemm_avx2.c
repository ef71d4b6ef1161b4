/* gemm_avx2.c — the AVX2 + FMA GEMM path (x86-64 CPUs without AVX-512): a
 * 6x16 fp32 microkernel and vectorised packers; bf16 operands are widened to
 * fp32 while packing.
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

/* 8 bf16 values as fp32 (exact: bf16 is fp32's top half) */
TT_AVX2 static inline __m256 bf16_widen8(__m128i h)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* tt_gemm_round_bf16 on 8 lanes (to nearest even, NaN kept quiet, denormals
 * kept): each word's top half the bf16 value, its low half what rounding
 * left there */
TT_AVX2 static inline __m256i bf16_round_words8(__m256 v)
{
    const __m256i x = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(x, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, _mm256_or_si256(x, _mm256_set1_epi32(0x00400000)), nan);
}

/* the same rounded to bf16 and back to fp32 */
TT_AVX2 static inline __m256 round_bf16_8(__m256 v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(bf16_round_words8(v), _mm256_set1_epi32((int)0xffff0000u)));
}

/* the same as 8 bf16 values, bit for bit tt_bf16_bits */
TT_AVX2 static inline __m128i bf16x8_exact(__m256 v)
{
    const __m256i h = _mm256_srli_epi32(bf16_round_words8(v), 16);
    /* packus works per 128-bit lane: words 0-3 in qword 0, 4-7 in qword 2 */
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08));
}

/* The tile: C (row stride ldc) = the sums (+ C when accumulate), from a
 * packed A panel ([ksteps][MR] floats) and B panel ([ksteps][NR]). With
 * out16 (a constant in each instance) C is bf16, at h: the sums, plus
 * part's fp32 partial sums (row stride ldp) when part is not NULL, plus h's
 * old values when accumulate, rounded once, in the order store_bf16 (gemm.c)
 * adds them: the same bits as the scratch path, without its second pass.
 * The tile first asks for its C rows (64 bytes of fp32, 32 of bf16, from L3
 * or memory), which are read only after the k loop. */
TT_AVX2 static inline __attribute__((always_inline)) void tile(int ksteps, const float *a, const float *b, float *c,
                                                               long ldc, int accumulate, const int out16, uint16_t *h,
                                                               const float *part, long ldp)
{
#define DECL(i) __m256 c##i##a = _mm256_setzero_ps(), c##i##b = _mm256_setzero_ps();
    ROWS(DECL)
#undef DECL
#define ASK(i)                                                                                 \
    if (out16) {                                                                               \
        _mm_prefetch((const char *)(h + (long)(i) * ldc), _MM_HINT_T0);                        \
        _mm_prefetch((const char *)(h + (long)(i) * ldc + 15), _MM_HINT_T0);                   \
        if (part) {                                                                            \
            _mm_prefetch((const char *)(part + (long)(i) * ldp), _MM_HINT_T0);                 \
            _mm_prefetch((const char *)(part + (long)(i) * ldp + 15), _MM_HINT_T0);            \
        }                                                                                      \
    } else {                                                                                   \
        _mm_prefetch((const char *)(c + (long)(i) * ldc), _MM_HINT_T0);                        \
        _mm_prefetch((const char *)(c + (long)(i) * ldc + 15), _MM_HINT_T0);                   \
    }
    ROWS(ASK)
#undef ASK
    /* Four k steps a pass: on the Zen 3 host, against one step a pass, the
     * loop nest's inner two loops (A in L2, B in L1 or L2) ran 1.00-1.18x as
     * fast, the step's whole fp32 products 0.99-1.02x (median 1.005;
     * performance-changes.md). */
#pragma GCC unroll 4
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
#define WIDEN(p) bf16_widen8(_mm_loadu_si128((const __m128i *)(p)))
#define OUT(i)                                                                 \
    {                                                                          \
        uint16_t *hi = h + (long)(i) * ldc;                                    \
        if (part) {                                                            \
            c##i##a = _mm256_add_ps(c##i##a, _mm256_loadu_ps(part + (long)(i) * ldp));     \
            c##i##b = _mm256_add_ps(c##i##b, _mm256_loadu_ps(part + (long)(i) * ldp + 8)); \
        }                                                                      \
        if (accumulate) {                                                      \
            c##i##a = _mm256_add_ps(c##i##a, WIDEN(hi));                       \
            c##i##b = _mm256_add_ps(c##i##b, WIDEN(hi + 8));                   \
        }                                                                      \
        _mm_storeu_si128((__m128i *)hi, bf16x8_exact(c##i##a));                \
        _mm_storeu_si128((__m128i *)(hi + 8), bf16x8_exact(c##i##b));          \
    }
    if (out16) {
        ROWS(OUT)
    } else {
        ROWS(STORE)
    }
#undef STORE
#undef WIDEN
#undef OUT
}

/* the kernels gemm.c calls: into an fp32 C, and into a bf16 C. A is always
 * packed: on the Zen 3 host, reading A's rows in place (a kern_rows, as the
 * AVX-512 path has) ran the llama_768 step's fp32 products with N 768
 * 0.94-0.99x as fast as packing it, and a transposed A read in place (the
 * head's weight gradient) 0.95x (bench_gemm_blocks --f32 --a-pack-cols 1,
 * performance-changes.md): six broadcasts a k step from six rows a stride
 * apart, against one packed stream, over only 12 FMAs. */
TT_AVX2 static void kern_f32(int ksteps, const void *a, const void *b, float *c, long ldc, int accumulate)
{
    tile(ksteps, a, b, c, ldc, accumulate, 0, NULL, NULL, 0);
}

TT_AVX2 static void kern_f32_out(int ksteps, const void *a, long lda, const void *b, uint16_t *h, long ldc,
                                 const float *part, long ldp, int accumulate)
{
    (void)lda; /* 0: A is always packed (no kern_rows) */
    tile(ksteps, a, b, NULL, ldc, accumulate, 1, h, part, ldp);
}

/* ---- packing ----------------------------------------------------------------
 * fp32 panels ([kn][W] floats, the last panel's rows past rn zero) from fp32
 * or bf16 sources; fp32 values rounded to bf16 first for bf16 compute
 * (p->round_bf16, as tt_gemm_round_bf16 rounds). Vectorised here because the
 * portable packer, element by element, took 10-15% of the step's products in
 * fp32 and 22-33% in bf16 on this path (performance-changes.md). */

/* the first n of 8 lanes (n may be <= 0 or past 8) as a maskload mask */
TT_AVX2 static inline __m256i lanes8(int n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 0 ? 0 : n > 8 ? 8 : n), idx);
}

/* n (at most 8; zero beyond) consecutive source values from element offset off, as the panel holds them */
TT_AVX2 static inline __m256 load8(const tt_gemm_pack_args *p, size_t off, int n)
{
    if (p->sdt == TT_BF16) {
        __m128i h;
        if (n >= 8) {
            h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p->src + off));
        } else {
            uint16_t t[8] = {0};
            for (int i = 0; i < n; i++) t[i] = ((const uint16_t *)p->src)[off + (size_t)i];
            h = _mm_loadu_si128((const __m128i *)t);
        }
        return bf16_widen8(h);
    }
    const float *s = (const float *)p->src + off;
    const __m256 v = n >= 8 ? _mm256_loadu_ps(s) : _mm256_maskload_ps(s, lanes8(n));
    return p->round_bf16 ? round_bf16_8(v) : v;
}

/* r[0..7] rows of 8 floats -> r[c] = column c */
TT_AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* k step d of a panel: its first `keep` lanes of v. A panel narrower than 8
 * (A's, 6 wide: one group of lanes, its steps written in order) takes all 8
 * but in its last step: the lanes past it land on the next step's first
 * values, which that step then writes (AMD's masked stores are slow), and
 * the last step's would land past the panel. */
TT_AVX2 static inline void put8(float *d, __m256 v, int keep, int W, int last)
{
    if (keep == 8 || (W < 8 && !last)) _mm256_storeu_ps(d, v);
    else _mm256_maskstore_ps(d, lanes8(keep), v);
}

/* one k step of panel pi (its W values of source row k, zero past the block) */
TT_AVX2 static inline void step8(const tt_gemm_pack_args *p, float *d, int k, int pi, int last)
{
    const int W = p->W, r0 = pi * W, w = p->rn - r0;
    for (int g = 0; g < W; g += 8)
        put8(d + g, load8(p, (size_t)k * (size_t)p->ld + (size_t)(r0 + g), w - g), W - g < 8 ? W - g : 8, W, last);
}

/* The rows ahead a row-contiguous source's panels ask for, into L2
 * (tt_gemm_pack_args' prefetch) */
#define PACK_PF_ROWS 16

TT_AVX2 static void pack_f32(void *dst, const tt_gemm_pack_args *p)
{
    const int W = p->W, kn = p->kn, rn = p->rn, np = (rn + W - 1) / W;
    const size_t panel = (size_t)kn * W, esz = p->sdt == TT_F32 ? 4 : 2;
    if (!p->kcontig) {
        /* Row k of the source holds the panels' rows side by side: packed k
         * by k across the block, each source row read once front to back,
         * with the row p->prefetch ahead asked for into L2
         * (tt_gemm_prefetch_stretch). On the Zen 3 host this ran the step's
         * fp32 input gradients 1.00-1.10x and weight gradients 1.01-1.07x as
         * fast as packing panel by panel (wide B panels), and the weight
         * gradients' narrow A panels 1.02-1.10x (bench_gemm_blocks,
         * performance-changes.md), where the AVX-512 packers keep the narrow
         * ones panel by panel, as measured on Zen 4. */
        for (int k = 0; k < kn; k++) {
            const char *ahead = tt_gemm_row_ahead(p, k + p->prefetch, esz);
            for (int pi = 0; pi < np; pi++) {
                tt_gemm_prefetch_stretch(p, ahead, pi, esz);
                step8(p, (float *)dst + pi * panel + (size_t)k * W, k, pi, k == kn - 1);
            }
        }
        return;
    }
    /* k runs along the source rows: 8 rows by 8 k values, transposed. (Asking
     * for each row 256 bytes ahead, as the AVX-512 packer does, ran the
     * forward products 0.95-1.00x as fast on the Zen 3 host.) */
    for (int pi = 0; pi < np; pi++) {
        float *d = (float *)dst + pi * panel;
        const int r0 = pi * W, w = rn - r0 < W ? rn - r0 : W;
        for (int g = 0; g < W; g += 8) { /* 8 rows of the panel at a time */
            const int gw = w - g, keep = W - g < 8 ? W - g : 8; /* rows with values; lanes the panel holds */
            for (int k0 = 0; k0 < kn; k0 += 8) {
                const int nu = kn - k0 < 8 ? kn - k0 : 8;
                __m256 t[8];
                for (int i = 0; i < 8; i++)
                    t[i] = i < gw ? load8(p, (size_t)(r0 + g + i) * (size_t)p->ld + (size_t)k0, nu) : _mm256_setzero_ps();
                transpose8(t);
                for (int u = 0; u < nu; u++) put8(d + (size_t)(k0 + u) * W + g, t[u], keep, W, k0 + u == kn - 1);
            }
        }
    }
}

/* kc 768: on the Zen 3 host (512 KB of L2 a core, 32 KB of L1) the step's
 * fp32 products ran 1.007-1.035x as fast as with kc 256 (1.015x weighted by
 * time), fewer passes over C outweighing a B panel (48 KB) past L1; kc 384
 * and 512 measured 1.012x and 0.996x, and 1024 slowed the weight gradients
 * (bench_gemm_blocks, performance-changes.md). A k block of 768 holds A
 * blocks of mc's 144 rows (442 KB); shorter ones, gemm.c's 384 KB. */
static const tt_gemm_impl avx2_f32 = {
    .name = "avx2-f32", .mr = MR, .nr = NR, .kunit = 1, .esize = 4,
    .mc = 144, .kc = 768, .nc = 2048, .kern = kern_f32, .kern_out16 = kern_f32_out, .pack = pack_f32,
    .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1, .skinny = tt_gemm_skinny_generic,
};

const tt_gemm_impl *tt_gemm_impl_avx2_f32(void) { return &avx2_f32; }

#else
const tt_gemm_impl *tt_gemm_impl_avx2_f32(void) { return NULL; }
#endif

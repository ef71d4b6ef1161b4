/* gemm_avx512.c — the AVX-512 GEMM path: 12x32 register-tile microkernels
 * (fp32 FMA, and bf16 pair dot products with vdpbf16ps), 8x48 ones of both,
 * a 6x64 fp32 one (gemm.c picks per call where they measured faster), vectorised packers
 * and the skinny (few-row) kernels. Compiled into every build through target
 * attributes; gemm.c only calls it after checking the CPU at run time.
 * The BF16 instructions flush denormal inputs to zero (tt_f32_to_bf16 keeps
 * them): a difference below 1e-38. */
#include "backend/cpu/gemm_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/avx512_util.h"

#define TT_AVX512F __attribute__((target("avx512f,avx512bw,avx512vl")))
#define TT_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* The tile: 12 rows of C x 32 columns = 24 zmm accumulators, 2 zmm of B per
 * k step and one broadcast of A at a time (27 of the 32 registers). Zen 4
 * issues one 512-bit FMA (or vdpbf16ps) a cycle, with 4-6 cycles of latency,
 * so 24 independent chains keep it busy; each k step loads 2 vectors and 12
 * scalars for 24 FMAs, well within the two load ports. The fp32 kernel also
 * comes in two other shapes of the same 24 accumulators, 8x48 and 6x64:
 * 11 and 10 loads a k step for the 24 FMAs (gemm.c says where each runs),
 * and the bf16 one in 8x48, whose 8 rows of an A read in place fit an L1
 * set's ways where the rows lie a multiple of 4 KB apart (gemm.c,
 * L1_SET_ROWS). */
#define MR 12
#define NR 32

/* A tile is written once as macros over its rows and its vectors of 16
 * columns: ROWS<n>(X, V) calls X(i, V) for each row i, V(Y, i) calls
 * Y(i, v, n) for each vector n of row i (v names its accumulator c<i><v>). */
#define ROWS6(X, V) X(0, V) X(1, V) X(2, V) X(3, V) X(4, V) X(5, V)
#define ROWS8(X, V) ROWS6(X, V) X(6, V) X(7, V)
#define ROWS12(X, V) ROWS8(X, V) X(8, V) X(9, V) X(10, V) X(11, V)
#define VECS2(Y, i) Y(i, a, 0) Y(i, b, 1)
#define VECS3(Y, i) VECS2(Y, i) Y(i, c, 2)
#define VECS4(Y, i) VECS3(Y, i) Y(i, d, 3)

/* Each kernel first asks for its C tile (64 bytes a vector), which is read
 * only after the k loop: thousands of cycles to bring it from L3 or memory. */
#define ACC_ZERO(i, v, n) __m512 c##i##v = _mm512_setzero_ps();
#define ACC_PREFETCH(i, v, n) _mm_prefetch((const char *)(c + (long)(i) * ldc + 16 * (n)), _MM_HINT_T0);
#define ACC_ADD(i, v, n) c##i##v = _mm512_add_ps(c##i##v, _mm512_loadu_ps(ci + 16 * (n)));
#define ACC_PUT(i, v, n) _mm512_storeu_ps(ci + 16 * (n), c##i##v);
#define STORE(i, V)                      \
    {                                    \
        float *ci = c + (long)(i) * ldc; \
        if (accumulate) { V(ACC_ADD, i) } \
        V(ACC_PUT, i)                    \
    }

/* With out16 (a constant in each instance) C is bf16, at h (row stride ldc):
 * the tile's sums, plus part's fp32 partial sums (row stride ldp) when part
 * is not NULL, plus h's old values when accumulate, are rounded once into h,
 * in the order store_bf16 (gemm.c) adds them, so the bits are the same as
 * storing the sums and rounding them there. That second pass over the tile
 * cost 2.6-3.6% of a linear's forward and input-gradient products. */
#define OUT_PREFETCH(i, v, n)                                                                        \
    _mm_prefetch((const char *)(h + (long)(i) * ldc + 16 * (n)), _MM_HINT_T0);                       \
    if (part) _mm_prefetch((const char *)(part + (long)(i) * ldp + 16 * (n)), _MM_HINT_T0);
#define OUT_PUT(i, v, n)                                                                        \
    {                                                                                           \
        uint16_t *hi = h + (long)(i) * ldc + 16 * (n);                                          \
        __m512 x = c##i##v;                                                                     \
        if (part) x = _mm512_add_ps(x, _mm512_loadu_ps(part + (long)(i) * ldp + 16 * (n)));     \
        if (accumulate) x = _mm512_add_ps(x, bf16_widen(_mm256_loadu_si256((const __m256i *)hi))); \
        _mm256_storeu_si256((__m256i *)hi, bf16x16_exact(x));                                   \
    }
#define ZERO(i, V) V(ACC_ZERO, i)
#define ASK(i, V)                 \
    if (out16) {                  \
        V(OUT_PREFETCH, i)        \
    } else {                      \
        V(ACC_PREFETCH, i)        \
    }
#define PUT(i, V)        \
    if (out16) {         \
        V(OUT_PUT, i)    \
    } else {             \
        STORE(i, V)      \
    }
/* the parameters every tile takes after its B: fp32 C, or bf16 C with partial sums */
#define TILE_OUT_PARAMS float *c, long ldc, int accumulate, const int rows, const int out16, uint16_t *h, \
                        const float *part, long ldp

/* The fp32 tile of `mr` rows and 16 x (the vectors V) columns: a: [ksteps][mr]
 * floats (a packed panel), or with rows = 1 row i of the tile at a + i*lda, k
 * running along it (A read in place: for an A stored k-contiguous in fp32
 * this skips packing A, which costs as much as a sixth of the product when N
 * is small), or with rows = 2 step s's mr values at a + s*lda (A transposed,
 * stored k-major, read in place: the packed panel's layout with a row stride,
 * as a weight gradient's A, the output gradient, lies); b: [ksteps][nr]
 * floats (64-byte aligned). rows is a constant in each instance. */
#define B_LOAD(i, v, n) const __m512 b##n = _mm512_load_ps(b + 16 * (n));
#define ACC_FMA(i, v, n) c##i##v = _mm512_fmadd_ps(ai, b##n, c##i##v);
#define FMA_ROW(i, V)                                                                     \
    {                                                                                    \
        const __m512 ai = _mm512_set1_ps(rows == 1   ? a[(long)(i) * lda + s]                 \
                                         : rows == 2 ? a[(long)s * lda + (i)]                 \
                                                     : a[s * mr + (i)]);                      \
        V(ACC_FMA, i)                                                                    \
    }

/* The bf16 tiles, laid out as the fp32 ones with bf16 pairs (32-bit words)
 * for values: each vdpbf16ps adds a[k]b[k] + a[k+1]b[k+1] to 16 fp32 lanes. */
#define B_LOAD16(i, v, n) const __m512bh b##n = (__m512bh)_mm512_load_si512(b + 16 * (n));
#define ACC_DOT(i, v, n) c##i##v = _mm512_dpbf16_ps(c##i##v, ai, b##n);
#define DOT_ROW(i, V)                                                                                     \
    {                                                                                                     \
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(rows ? a[(long)(i) * lda + s] : a[s * mr + (i)]); \
        V(ACC_DOT, i)                                                                                     \
    }

/* A tile of `mr_` rows and 16 x (the vectors V) columns, on elements of type
 * T (float, or int32_t bf16 pairs): per k step, LOAD its B vectors, then ROW
 * for each row. */
#define TILE(name, TARGET, T, ROWS, V, mr_, nr_, LOAD, ROW)                                                        \
    TARGET static inline __attribute__((always_inline)) void name(int ksteps, const T *a, long lda, const T *b,   \
                                                                  TILE_OUT_PARAMS)                              \
    {                                                                                                               \
        enum { mr = mr_ };                                                                                          \
        ROWS(ZERO, V)                                                                                               \
        ROWS(ASK, V)                                                                                                \
        for (int s = 0; s < ksteps; s++) {                                                                          \
            V(LOAD, 0)                                                                                              \
            ROWS(ROW, V)                                                                                            \
            b += nr_;                                                                                               \
        }                                                                                                           \
        ROWS(PUT, V)                                                                                                \
    }
TILE(tile_f32, TT_AVX512F, float, ROWS12, VECS2, MR, NR, B_LOAD, FMA_ROW)
TILE(tile_f32_8x48, TT_AVX512F, float, ROWS8, VECS3, 8, 48, B_LOAD, FMA_ROW)
TILE(tile_f32_6x64, TT_AVX512F, float, ROWS6, VECS4, 6, 64, B_LOAD, FMA_ROW)
TILE(tile_bf16, TT_AVX512BF16, int32_t, ROWS12, VECS2, MR, NR, B_LOAD16, DOT_ROW)
TILE(tile_bf16_8x48, TT_AVX512BF16, int32_t, ROWS8, VECS3, 8, 48, B_LOAD16, DOT_ROW)
#undef TILE
#undef B_LOAD
#undef ACC_FMA
#undef FMA_ROW
#undef B_LOAD16
#undef ACC_DOT
#undef DOT_ROW

/* each tile's three kernels: A packed, A's rows read in place, and either
 * into a bf16 C (kern_out16) */
#define KERNELS(tile, TT_TARGET)                                                                                   \
    TT_TARGET static void kern_##tile(int ksteps, const void *a, const void *b, float *c, long ldc, int accumulate)  \
    {                                                                                                               \
        tile(ksteps, a, 0, b, c, ldc, accumulate, 0, 0, NULL, NULL, 0);                                             \
    }                                                                                                               \
    TT_TARGET static void kern_##tile##_rows(int ksteps, const void *a, long lda, const void *b, float *c, long ldc,  \
                                             int accumulate)                                                        \
    {                                                                                                               \
        tile(ksteps, a, lda, b, c, ldc, accumulate, 1, 0, NULL, NULL, 0);                                           \
    }                                                                                                               \
    TT_TARGET static void kern_##tile##_out(int ksteps, const void *a, long lda, const void *b, uint16_t *h,          \
                                            long ldc, const float *part, long ldp, int accumulate)                  \
    {                                                                                                               \
        if (lda) tile(ksteps, a, lda, b, NULL, ldc, accumulate, 1, 1, h, part, ldp);                                \
        else tile(ksteps, a, 0, b, NULL, ldc, accumulate, 0, 1, h, part, ldp);                                      \
    }
/* and the fp32 tiles' fourth: A transposed, read in place (rows = 2) */
#define KERNEL_COLS(tile)                                                                                          \
    TT_AVX512F static void kern_##tile##_cols(int ksteps, const void *a, long lda, const void *b, float *c, long ldc, \
                                             int accumulate)                                                        \
    {                                                                                                               \
        tile(ksteps, a, lda, b, c, ldc, accumulate, 2, 0, NULL, NULL, 0);                                           \
    }
KERNELS(tile_f32, TT_AVX512F)
KERNELS(tile_f32_8x48, TT_AVX512F)
KERNELS(tile_f32_6x64, TT_AVX512F)
KERNELS(tile_bf16, TT_AVX512BF16)
KERNELS(tile_bf16_8x48, TT_AVX512BF16)
KERNEL_COLS(tile_f32)
KERNEL_COLS(tile_f32_8x48)
KERNEL_COLS(tile_f32_6x64)
#undef KERNELS
#undef KERNEL_COLS
#undef TILE_OUT_PARAMS
#undef OUT_PREFETCH
#undef OUT_PUT
#undef ZERO
#undef ASK
#undef PUT
#undef STORE
#undef ACC_ZERO
#undef ACC_PREFETCH
#undef ACC_ADD
#undef ACC_PUT
#undef ROWS6
#undef ROWS8
#undef ROWS12
#undef VECS2
#undef VECS3
#undef VECS4

/* ---- packing --------------------------------------------------------------
 * Two source layouts. When rows are contiguous (k-major source: A with ta, B
 * without tb) a panel step is a masked copy of W values (for bf16 pairs, two
 * source rows interleaved). When k is contiguous the block is transposed 16 x
 * 16 (32-bit words) in registers: 16 k values of fp32, or 32 k values = 16
 * bf16 pairs. */

/* 16 words of row r starting at k value k0, for `kunit` and the source dtype;
 * kleft = k values still in range (masked, zero beyond). */
TT_AVX512F static inline __m512i load_row_f32(const tt_gemm_pack_args *p, int r, int k0, int kleft)
{
    const size_t off = (size_t)r * (size_t)p->ld + (size_t)k0;
    if (p->sdt == TT_F32) {
        const __m512 v = _mm512_maskz_loadu_ps(mask16(kleft), (const float *)p->src + off);
        return _mm512_castps_si512(p->round_bf16 ? round_bf16_ps(v) : v);
    }
    return _mm512_castps_si512(bf16_widen(_mm256_maskz_loadu_epi16(mask16(kleft), (const uint16_t *)p->src + off)));
}

TT_AVX512BF16 static inline __m512i load_row_pairs(const tt_gemm_pack_args *p, int r, int k0, int kleft)
{
    const size_t off = (size_t)r * (size_t)p->ld + (size_t)k0;
    if (p->sdt == TT_BF16) return _mm512_maskz_loadu_epi16(mask32(kleft), (const uint16_t *)p->src + off);
    const float *s = (const float *)p->src + off;
    const __m512 lo = _mm512_maskz_loadu_ps(mask16(kleft), s);
    const __m512 hi = _mm512_maskz_loadu_ps(mask16(kleft - 16), s + 16);
    return bf16x32(lo, hi);
}

/* 16 consecutive rows of one k value of a row-contiguous bf16 source */
TT_AVX512BF16 static inline __m256i load_col_bf16(const tt_gemm_pack_args *p, int k, int r0, int rleft)
{
    const size_t off = (size_t)k * (size_t)p->ld + (size_t)r0;
    return _mm256_maskz_loadu_epi16(mask16(rleft), (const uint16_t *)p->src + off);
}

/* Prefetch distance for the transposing packers: each of the 16 source rows
 * is its own stream, too many for the hardware prefetcher to follow. */
#define PF_BYTES 256

/* One k step of the panel of rows [r0, r0 + W) from a row-contiguous source:
 * its W values (zero past the block's rows) to d. */
/* n (at most 16) values of source row k from column r0, zero past n */
TT_AVX512F static inline __m512 f32_load(const tt_gemm_pack_args *p, int k, int r0, int n)
{
    const size_t off = (size_t)k * (size_t)p->ld + (size_t)r0;
    if (p->sdt == TT_F32) {
        const __m512 v = _mm512_maskz_loadu_ps(mask16(n), (const float *)p->src + off);
        return p->round_bf16 ? round_bf16_ps(v) : v;
    }
    return bf16_widen(_mm256_maskz_loadu_epi16(mask16(n), (const uint16_t *)p->src + off));
}

TT_AVX512F static inline void f32_step(const tt_gemm_pack_args *p, float *d, int k, int r0, int W)
{
    const int w = p->rn - r0 < W ? p->rn - r0 : W;
    for (int g = 0; g < W; g += 16) _mm512_mask_storeu_ps(d + g, mask16(W - g), f32_load(p, k, r0 + g, w - g));
}

/* One k step of two adjacent narrow panels (2W <= 16) from one load: the
 * first W values to d0, the next W to d1 (the 6x64 tile's A panels would
 * otherwise take a load and a store for every 6 values) */
TT_AVX512F static inline void f32_step2(const tt_gemm_pack_args *p, float *d0, float *d1, int k, int r0, int W,
                                        __m512i up)
{
    const int w = p->rn - r0 < 2 * W ? p->rn - r0 : 2 * W;
    const __m512 v = f32_load(p, k, r0, w);
    _mm512_mask_storeu_ps(d0, mask16(W), v);
    _mm512_mask_storeu_ps(d1, mask16(W), _mm512_permutexvar_ps(up, v));
}

/* Wide panels from a row-contiguous source (B without tb: a weight read by
 * an input gradient, the activations read by a weight gradient) are packed
 * k by k across the block's width: one row's stretch, then the next row's.
 * Each stretch is a fresh stream, which the hardware prefetchers find too
 * late, so the packers ask for the rows p->prefetch ahead themselves, into
 * L2: L1 has few miss buffers, and a core asking into L1 keeps fewer lines
 * in flight from memory. On the Zen 4 host the llama_768 step's bf16 input
 * gradients ran 1.00-1.05x as fast with the operands from memory, the fp32
 * ones 0.99-1.03x (bench_gemm_blocks --a-no-pack-prefetch,
 * performance-changes.md). */
#define PACK_PF_ROWS 16

/* fp32 panels ([ks][W] floats); fp32 values rounded to bf16 first for bf16
 * compute (p->round_bf16), bf16 values widened */
TT_AVX512F static void pack_f32(void *dst, const tt_gemm_pack_args *p)
{
    const int W = p->W, kn = p->kn, rn = p->rn, np = (rn + W - 1) / W;
    const size_t panel = (size_t)kn * W, esz = p->sdt == TT_F32 ? 4 : 2;
    if (!p->kcontig) {
        /* Narrow (A) panels go panel by panel, keeping each panel's writes
         * together; wide (B) panels go k by k, reading each source row once
         * front to back. Each order measured the faster on Zen 4. */
        if (W < 16) {
            int pi = 0;
            if (2 * W <= 16) {
                const __m512i up = _mm512_add_epi32(
                    _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(W));
                for (; pi + 1 < np; pi += 2) {
                    float *d0 = (float *)dst + pi * panel, *d1 = d0 + panel;
                    for (int k = 0; k < kn; k++) f32_step2(p, d0 + (size_t)k * W, d1 + (size_t)k * W, k, pi * W, W, up);
                }
            }
            for (; pi < np; pi++)
                for (int k = 0; k < kn; k++) f32_step(p, (float *)dst + pi * panel + (size_t)k * W, k, pi * W, W);
        } else {
            for (int k = 0; k < kn; k++) {
                const char *ahead = tt_gemm_row_ahead(p, k + p->prefetch, esz);
                for (int pi = 0; pi < np; pi++) {
                    tt_gemm_prefetch_stretch(p, ahead, pi, esz);
                    f32_step(p, (float *)dst + pi * panel + (size_t)k * W, k, pi * W, W);
                }
            }
        }
        return;
    }
    for (int pi = 0; pi < np; pi++) {
        float *d = (float *)dst + pi * panel;
        const int r0 = pi * W, w = rn - r0 < W ? rn - r0 : W;
        for (int k0 = 0; k0 < kn; k0 += 16) {
            const int nu = kn - k0 < 16 ? kn - k0 : 16;
            for (int g = 0; g < W; g += 16) {
                __m512i t[16];
                for (int i = 0; i < 16; i++) {
                    if (g + i < w) {
                        _mm_prefetch((const char *)p->src + ((size_t)(r0 + g + i) * p->ld + k0) * esz + PF_BYTES, _MM_HINT_T0);
                        t[i] = load_row_f32(p, r0 + g + i, k0, kn - k0);
                    } else {
                        t[i] = _mm512_setzero_si512();
                    }
                }
                transpose16(t);
                for (int u = 0; u < nu; u++)
                    _mm512_mask_storeu_epi32(d + (size_t)(k0 + u) * W + g, mask16(W - g), t[u]);
            }
        }
    }
}

/* One k step (source rows k and k+1) of the panel of rows [r0, r0 + W) from
 * a row-contiguous source: W bf16 pairs to d. From fp32 (a weight read by an
 * input gradient), one vcvtne2ps2bf16 rounds 16 values of both rows (row k's
 * in the low half) and one vpermw interleaves them into pairs: the same bits
 * as two conversions and two widenings, 0.3-0.7% faster on those products
 * (performance-changes.md). */
TT_AVX512BF16 static inline void pairs_step(const tt_gemm_pack_args *p, int32_t *d, int k, int r0, int W)
{
    const int w = p->rn - r0 < W ? p->rn - r0 : W;
    if (p->sdt == TT_F32) {
        const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                               22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const float *ev = (const float *)p->src + (size_t)k * (size_t)p->ld + r0;
        const int odd = k + 1 < p->kn; /* an odd k count's last pair is (row k, 0) */
        for (int g = 0; g < W; g += 16) {
            const __mmask16 m = mask16(w - g);
            const __m512 lo = _mm512_maskz_loadu_ps(m, ev + g);
            const __m512 hi = odd ? _mm512_maskz_loadu_ps(m, ev + p->ld + g) : _mm512_setzero_ps();
            _mm512_mask_storeu_epi32(d + g, mask16(W - g),
                                     _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
        }
        return;
    }
    for (int g = 0; g < W; g += 16) {
        const __m256i ev = load_col_bf16(p, k, r0 + g, w - g);
        const __m256i od = k + 1 < p->kn ? load_col_bf16(p, k + 1, r0 + g, w - g) : _mm256_setzero_si256();
        const __m512i v = pair_words(ev, od);
        _mm512_mask_storeu_epi32(d + g, mask16(W - g), v);
    }
}

/* bf16 pair panels ([ks][W] 32-bit words, ks = ceil(kn / 2)) */
TT_AVX512BF16 static void pack_bf16(void *dst, const tt_gemm_pack_args *p)
{
    const int W = p->W, kn = p->kn, ks = (kn + 1) / 2, rn = p->rn, np = (rn + W - 1) / W;
    const size_t panel = (size_t)ks * W, esz = p->sdt == TT_F32 ? 4 : 2; /* words */
    if (!p->kcontig) { /* the two orders as in pack_f32 */
        if (W < 16) {
            for (int pi = 0; pi < np; pi++)
                for (int s = 0; s < ks; s++) pairs_step(p, (int32_t *)dst + pi * panel + (size_t)s * W, 2 * s, pi * W, W);
        } else {
            for (int s = 0; s < ks; s++) { /* the pair of rows p->prefetch ahead */
                const char *ahead0 = tt_gemm_row_ahead(p, 2 * s + p->prefetch, esz);
                const char *ahead1 = tt_gemm_row_ahead(p, 2 * s + p->prefetch + 1, esz);
                for (int pi = 0; pi < np; pi++) {
                    tt_gemm_prefetch_stretch(p, ahead0, pi, esz), tt_gemm_prefetch_stretch(p, ahead1, pi, esz);
                    pairs_step(p, (int32_t *)dst + pi * panel + (size_t)s * W, 2 * s, pi * W, W);
                }
            }
        }
        return;
    }
    for (int pi = 0; pi < np; pi++) {
        int32_t *d = (int32_t *)dst + pi * panel;
        const int r0 = pi * W, w = rn - r0 < W ? rn - r0 : W;
        for (int k0 = 0; k0 < kn; k0 += 32) {
            const int nu = (kn - k0 + 1) / 2 < 16 ? (kn - k0 + 1) / 2 : 16;
            for (int g = 0; g < W; g += 16) {
                __m512i t[16];
                for (int i = 0; i < 16; i++) {
                    if (g + i < w) {
                        const char *row = (const char *)p->src + ((size_t)(r0 + g + i) * p->ld + k0) * esz;
                        _mm_prefetch(row + PF_BYTES, _MM_HINT_T0);
                        if (esz == 4) _mm_prefetch(row + PF_BYTES + 64, _MM_HINT_T0);
                        t[i] = load_row_pairs(p, r0 + g + i, k0, kn - k0);
                    } else {
                        t[i] = _mm512_setzero_si512();
                    }
                }
                transpose16(t);
                for (int u = 0; u < nu; u++)
                    _mm512_mask_storeu_epi32(d + (size_t)(k0 / 2 + u) * W + g, mask16(W - g), t[u]);
            }
        }
    }
}

/* ---- the skinny path (few rows of C) -----------------------------------------
 * B is streamed once from where it lies; products in fp32. */

/* How B's values become fp32, fixed per call so the loops carry no branch. */
enum { SK_F32, SK_F32_ROUND, SK_BF16 };

static int skinny_mode(const tt_gemm_skinny_args *s)
{
    return s->bdt == TT_BF16 ? SK_BF16 : s->round_b ? SK_F32_ROUND : SK_F32;
}

/* 16 values of B from element off (masked), as the fp32 values the products use */
TT_AVX512F static inline __attribute__((always_inline)) __m512 skinny_load(const void *b, int mode, size_t off,
                                                                            __mmask16 m)
{
    if (mode == SK_BF16) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)b + off);
        return bf16_widen(h);
    }
    const __m512 v = _mm512_maskz_loadu_ps(m, (const float *)b + off);
    return mode == SK_F32 ? v : round_bf16_ps(v);
}

/* [sum(a0), sum(a1), sum(a2), sum(a3)] of four 16-lane vectors */
TT_AVX512F static inline __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3)
{
    /* per 128-bit lane: pairwise sums of a0|a1 and a2|a3, then of those */
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
    const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
    __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(s01), _mm512_castps_pd(s23))));
    /* each lane now holds [a0 a1 a2 a3] partial sums: add the four lanes */
    s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0x4e));
    s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0xb1));
    return _mm512_castps512_ps128(s);
}

/* Named accumulators, not arrays: gcc keeps a 16-vector array in memory as
 * well as in registers and stores it every step. */
#define SK_ACC(h) __m512 acc##h##0 = _mm512_setzero_ps(), acc##h##1 = acc##h##0, acc##h##2 = acc##h##0, acc##h##3 = acc##h##0;

/* R rows of A (R <= 4, a compile-time constant after inlining) against four
 * B rows (columns of C): 4R dot products in zmm accumulators. */
TT_AVX512F static inline __attribute__((always_inline)) void
skinny_dot_block(const tt_gemm_skinny_args *s, int mode, const float *a, const size_t brow[4], int R, float *c,
                 int nj)
{
    const int K = s->K;
    SK_ACC(0) SK_ACC(1) SK_ACC(2) SK_ACC(3)
    for (int k = 0; k < K; k += 16) {
        const __mmask16 m = mask16(K - k);
        const __m512 b0 = skinny_load(s->b, mode, brow[0] + k, m), b1 = skinny_load(s->b, mode, brow[1] + k, m);
        const __m512 b2 = skinny_load(s->b, mode, brow[2] + k, m), b3 = skinny_load(s->b, mode, brow[3] + k, m);
#define SK_DOT(h)                                                                \
    if (h < R) {                                                                 \
        const __m512 x = _mm512_maskz_loadu_ps(m, a + (size_t)(h) * K + k);      \
        acc##h##0 = _mm512_fmadd_ps(x, b0, acc##h##0);                           \
        acc##h##1 = _mm512_fmadd_ps(x, b1, acc##h##1);                           \
        acc##h##2 = _mm512_fmadd_ps(x, b2, acc##h##2);                           \
        acc##h##3 = _mm512_fmadd_ps(x, b3, acc##h##3);                           \
    }
        SK_DOT(0) SK_DOT(1) SK_DOT(2) SK_DOT(3)
#undef SK_DOT
    }
#define SK_OUT(h)                                                                \
    if (h < R) {                                                                 \
        float v[4], *ch = c + (size_t)(h) * s->ldc;                              \
        _mm_storeu_ps(v, reduce4(acc##h##0, acc##h##1, acc##h##2, acc##h##3));   \
        for (int r = 0; r < nj; r++) ch[r] = s->accumulate ? ch[r] + v[r] : v[r]; \
    }
    SK_OUT(0) SK_OUT(1) SK_OUT(2) SK_OUT(3)
#undef SK_OUT
}

/* tb: B rows run along k. Four columns (B rows) at a time against up to four
 * rows of A; the four B rows stay in L1 while the rows of A pass. */
TT_AVX512F static inline __attribute__((always_inline)) void skinny_dot_mode(const tt_gemm_skinny_args *s, int mode,
                                                                             int n0, int n1)
{
    const int K = s->K, M = s->M;
    for (int j = n0; j < n1; j += 4) {
        const int nj = n1 - j < 4 ? n1 - j : 4;
        size_t brow[4];
        for (int r = 0; r < 4; r++) brow[r] = (size_t)(j + (r < nj ? r : nj - 1)) * (size_t)s->ldb;
        for (int i = 0; i < M; i += 4) {
            const float *a = s->a + (size_t)i * K;
            float *c = s->c + (size_t)i * s->ldc + j;
            switch (M - i < 4 ? M - i : 4) {
            case 1: skinny_dot_block(s, mode, a, brow, 1, c, nj); break;
            case 2: skinny_dot_block(s, mode, a, brow, 2, c, nj); break;
            case 3: skinny_dot_block(s, mode, a, brow, 3, c, nj); break;
            default: skinny_dot_block(s, mode, a, brow, 4, c, nj); break;
            }
        }
    }
}

TT_AVX512F static void skinny_dot(const tt_gemm_skinny_args *s, int n0, int n1)
{
    switch (skinny_mode(s)) {
    case SK_F32: skinny_dot_mode(s, SK_F32, n0, n1); break;
    case SK_F32_ROUND: skinny_dot_mode(s, SK_F32_ROUND, n0, n1); break;
    default: skinny_dot_mode(s, SK_BF16, n0, n1); break;
    }
}

/* !tb: B rows run along the columns. A 4 x 64 block of C in 16 zmm
 * accumulators, each k step one row of B (4 vectors) times 4 broadcasts. */
TT_AVX512F static inline __attribute__((always_inline)) void
skinny_axpy_block(const tt_gemm_skinny_args *s, int mode, const float *a, int R, float *c, int j, const __mmask16 m[4])
{
    const int K = s->K;
    const size_t esz = mode == SK_BF16 ? 2 : 4;
    SK_ACC(0) SK_ACC(1) SK_ACC(2) SK_ACC(3)
    for (int k = 0; k < K; k++) {
        const size_t off = (size_t)k * (size_t)s->ldb + (size_t)j;
        /* B is walked down its rows: ask for the row 8 ahead */
        const char *ahead = (const char *)s->b + (off + 8 * (size_t)s->ldb) * esz;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64 * esz - 1, _MM_HINT_T0);
        const __m512 b0 = skinny_load(s->b, mode, off, m[0]), b1 = skinny_load(s->b, mode, off + 16, m[1]);
        const __m512 b2 = skinny_load(s->b, mode, off + 32, m[2]), b3 = skinny_load(s->b, mode, off + 48, m[3]);
#define SK_AXPY(h)                                                               \
    if (h < R) {                                                                 \
        const __m512 x = _mm512_set1_ps(a[(size_t)(h) * K + k]);                 \
        acc##h##0 = _mm512_fmadd_ps(x, b0, acc##h##0);                           \
        acc##h##1 = _mm512_fmadd_ps(x, b1, acc##h##1);                           \
        acc##h##2 = _mm512_fmadd_ps(x, b2, acc##h##2);                           \
        acc##h##3 = _mm512_fmadd_ps(x, b3, acc##h##3);                           \
    }
        SK_AXPY(0) SK_AXPY(1) SK_AXPY(2) SK_AXPY(3)
#undef SK_AXPY
    }
#define SK_STORE1(h, q)                                                                          \
    {                                                                                            \
        __m512 v = acc##h##q;                                                                    \
        if (s->accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m[q], ch + 16 * q));       \
        _mm512_mask_storeu_ps(ch + 16 * q, m[q], v);                                             \
    }
#define SK_STORE(h)                                                              \
    if (h < R) {                                                                 \
        float *ch = c + (size_t)(h) * s->ldc;                                    \
        SK_STORE1(h, 0) SK_STORE1(h, 1) SK_STORE1(h, 2) SK_STORE1(h, 3)          \
    }
    SK_STORE(0) SK_STORE(1) SK_STORE(2) SK_STORE(3)
#undef SK_STORE
#undef SK_STORE1
}

TT_AVX512F static inline __attribute__((always_inline)) void skinny_axpy_mode(const tt_gemm_skinny_args *s,
                                                                              int mode, int n0, int n1)
{
    const int K = s->K, M = s->M;
    for (int j = n0; j < n1; j += 64) {
        __mmask16 m[4];
        for (int q = 0; q < 4; q++) m[q] = mask16(n1 - j - 16 * q);
        for (int i = 0; i < M; i += 4) {
            const float *a = s->a + (size_t)i * K;
            float *c = s->c + (size_t)i * s->ldc + j;
            switch (M - i < 4 ? M - i : 4) {
            case 1: skinny_axpy_block(s, mode, a, 1, c, j, m); break;
            case 2: skinny_axpy_block(s, mode, a, 2, c, j, m); break;
            case 3: skinny_axpy_block(s, mode, a, 3, c, j, m); break;
            default: skinny_axpy_block(s, mode, a, 4, c, j, m); break;
            }
        }
    }
}

TT_AVX512F static void skinny_axpy(const tt_gemm_skinny_args *s, int n0, int n1)
{
    switch (skinny_mode(s)) {
    case SK_F32: skinny_axpy_mode(s, SK_F32, n0, n1); break;
    case SK_F32_ROUND: skinny_axpy_mode(s, SK_F32_ROUND, n0, n1); break;
    default: skinny_axpy_mode(s, SK_BF16, n0, n1); break;
    }
}

TT_AVX512F void tt_gemm_skinny_avx512(const tt_gemm_skinny_args *s, int n0, int n1)
{
    if (s->tb) skinny_dot(s, n0, n1);
    else skinny_axpy(s, n0, n1);
}

/* Cache blocks for Zen 4 (32 KB L1D, 1 MB L2 per core, shared L3), tuned with
 * bench_gemm: the A block (384 KB, gemm.c) sits in L2 and the kc x nc B block
 * (6 MB) in L3. A kc x 32 B micro-panel (64 KB) no longer fits L1, but Zen 4's
 * L2 feeds the kernel at full speed (98% of peak measured with both panels in
 * L2), and the long k runs halve the passes over C and the kernel calls:
 * kc 512 (fp32) / 1024 (bf16) beat 256 / 512 by 3-5%. With a 2 MB L2 (the
 * Intel Xeon hosts) kc and the A block double (l2_kb): a 128 KB B micro-panel
 * and a 768 KB A block, one pass over C where K is 768 or 1024.
 *
 * An A that is not transposed (the forward products and the input
 * gradients) is summed in one k block up to K 2,560 (kc_whole, on the bf16
 * tiles and the 12x32 fp32 one): each cut costs a pass over C, and over a
 * bf16 C's fp32 partial sums. On Zen 4 (bench_gemm_blocks --a-kc-blocks,
 * pairs of calls), one block ran llama_768's bf16 qkv input gradient (K
 * 2,304) 1.03-1.09x as fast and its down forward (2,048) 0.97-1.01x; in fp32
 * the products with K 768, 2,048 and 2,304 ran 1.02-1.04x, 1.015 and 1.03x
 * (the gate/up input gradient, K 4,096, gained 0.5% in one bf16 block, so it
 * stays in four). The fp32 8x48 and 6x64 tiles, which only Intel takes, cut
 * K in kc blocks: with one block, on the Intel Xeon host, the 6x64 tile ran
 * the products with K 1,536, 2,048 and 2,304 0.95-0.99x as fast
 * (performance-changes.md). */
#define KC_WHOLE 2560
static const tt_gemm_impl avx512_f32 = {
    .name = "avx512-f32", .mr = MR, .nr = NR, .kunit = 1, .esize = 4,
    .mc = 144, .kc = 512, .nc = 3072, .kc_whole = KC_WHOLE, .l2_kb = 1024, .kern = kern_tile_f32, .kern_rows = kern_tile_f32_rows,
    .kern_cols = kern_tile_f32_cols, .kern_out16 = kern_tile_f32_out,
    .pack = pack_f32, .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1, .skinny = tt_gemm_skinny_avx512,
};
static const tt_gemm_impl avx512_f32_8x48 = {
    .name = "avx512-f32", .mr = 8, .nr = 48, .kunit = 1, .esize = 4,
    .mc = 144, .kc = 512, .nc = 3072, .l2_kb = 1024, .kern = kern_tile_f32_8x48, .kern_rows = kern_tile_f32_8x48_rows,
    .kern_cols = kern_tile_f32_8x48_cols, .kern_out16 = kern_tile_f32_8x48_out,
    .pack = pack_f32, .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1, .skinny = tt_gemm_skinny_avx512,
};
static const tt_gemm_impl avx512_f32_6x64 = {
    .name = "avx512-f32", .mr = 6, .nr = 64, .kunit = 1, .esize = 4,
    .mc = 144, .kc = 512, .nc = 3072, .l2_kb = 1024, .kern = kern_tile_f32_6x64, .kern_rows = kern_tile_f32_6x64_rows,
    .kern_cols = kern_tile_f32_6x64_cols, .kern_out16 = kern_tile_f32_6x64_out,
    .pack = pack_f32, .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1, .skinny = tt_gemm_skinny_avx512,
};
static const tt_gemm_impl avx512_bf16 = {
    .name = "avx512-bf16", .mr = MR, .nr = NR, .kunit = 2, .esize = 2,
    .mc = 144, .kc = 1024, .nc = 3072, .kc_whole = KC_WHOLE, .l2_kb = 1024, .kern = kern_tile_bf16, .kern_rows = kern_tile_bf16_rows,
    .kern_out16 = kern_tile_bf16_out, .pack = pack_bf16, .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1,
    .skinny = tt_gemm_skinny_avx512,
};
/* the 8x48 bf16 tile: where an A's rows all fall in one L1 set (tt_gemm_one_set_impl) */
static const tt_gemm_impl avx512_bf16_8x48 = {
    .name = "avx512-bf16", .mr = 8, .nr = 48, .kunit = 2, .esize = 2,
    .mc = 144, .kc = 1024, .nc = 3072, .kc_whole = KC_WHOLE, .l2_kb = 1024, .kern = kern_tile_bf16_8x48,
    .kern_rows = kern_tile_bf16_8x48_rows, .kern_out16 = kern_tile_bf16_8x48_out, .pack = pack_bf16,
    .pack_prefetch = PACK_PF_ROWS, .pack_prefetch_l2 = 1, .skinny = tt_gemm_skinny_avx512,
};

const tt_gemm_impl *tt_gemm_impl_avx512_f32(void) { return &avx512_f32; }
const tt_gemm_impl *tt_gemm_impl_avx512_bf16(void) { return &avx512_bf16; }
const tt_gemm_impl *tt_gemm_impl_avx512_bf16_8x48(void) { return &avx512_bf16_8x48; }
const tt_gemm_impl *tt_gemm_impl_avx512_f32_8x48(void) { return &avx512_f32_8x48; }
const tt_gemm_impl *tt_gemm_impl_avx512_f32_6x64(void) { return &avx512_f32_6x64; }

#else /* not x86-64 with GNU C: no AVX-512 path */
const tt_gemm_impl *tt_gemm_impl_avx512_f32(void) { return NULL; }
const tt_gemm_impl *tt_gemm_impl_avx512_bf16(void) { return NULL; }
const tt_gemm_impl *tt_gemm_impl_avx512_bf16_8x48(void) { return NULL; }
const tt_gemm_impl *tt_gemm_impl_avx512_f32_8x48(void) { return NULL; }
const tt_gemm_impl *tt_gemm_impl_avx512_f32_6x64(void) { return NULL; }
#endif

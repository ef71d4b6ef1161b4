/* test_gemm.c — titan's GEMM (backend/cpu/gemm.c) on every code path this CPU
 * runs (amx, avx512, avx2, scalar), every transpose combination, odd shapes,
 * accumulate on/off, fp32 / bf16 / mixed operands, against a double
 * reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/host/bf16_dot.h"
#include "harness.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct { int M, N, K; } shape;

/* Shapes: tiny, odd (not multiples of any tile), K = 1, few rows (the
 * skinny path: up to 8 rows for bf16 on AVX-512, 32 otherwise; also split
 * over threads) and just past it, and some big enough to cross the cache
 * blocks (kc, mc) and be split over threads. */
static const shape shapes[] = {
    {1, 1, 1}, {17, 33, 65}, {129, 5, 300}, {40, 50, 1}, {3, 70, 9}, {8, 20, 33}, {9, 100, 20},
    {32, 50, 40}, {33, 40, 20}, {2, 700, 400}, {300, 70, 600}, {37, 1000, 45}, {20, 40, 1100},
    {40, 3200, 40}, /* past AMX's nc */
    {70, 90, 64}, {100, 40, 1088}, /* k in whole AMX granules: a bf16 A read in place */
    {24, 40, 2700}, /* past every path's kc_whole: an A not transposed over several k blocks there too */
};

static float rnd(tt_rng *r) { return (float)(2.0 * tt_rng_uniform(r) - 1.0); }
static float to_bf16f(float x) { return tt_bf16_to_f32(tt_f32_to_bf16(x)); }

/* op(X) is (R, K) given as logical rows; store it as (R, K), or (K, R) when t */
static void store_op(const float *x, float *dst, int R, int K, int t)
{
    for (int r = 0; r < R; r++)
        for (int k = 0; k < K; k++) {
            if (t) dst[(size_t)k * R + r] = x[(size_t)r * K + k];
            else dst[(size_t)r * K + k] = x[(size_t)r * K + k];
        }
}

/* ref (M,N) = a (M,K) b^T where bt is (N,K); mag = sum |a b| (the scale of the rounding error) */
static void reference(const float *a, const float *bt, double *ref, double *mag, int M, int N, int K)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                const double p = (double)a[(size_t)i * K + k] * bt[(size_t)j * K + k];
                s += p;
                m += fabs(p);
            }
            ref[(size_t)i * N + j] = s;
            mag[(size_t)i * N + j] = m;
        }
}

/* worst |c - want| / (mag + |c0| + tiny) over the matrix */
static double worst_rel(const float *c, const double *ref, const double *mag, const float *c0, int acc, size_t n)
{
    double w = 0;
    for (size_t x = 0; x < n; x++) {
        const double want = ref[x] + (acc ? c0[x] : 0.0);
        const double e = fabs((double)c[x] - want) / (mag[x] + (acc ? fabs(c0[x]) : 0.0) + 1e-30);
        if (!(e <= w)) w = e; /* NaN sticks */
    }
    return w;
}

static const char *isa_names[] = {"auto", "scalar", "avx2", "avx512", "avx512bf16", "amx"};
/* each path's kernels for fp32 and for bf16 products: AMX and AVX512_BF16
 * have bf16 products only, the others widen bf16 to fp32 */
static const char *const path_kernels[][2] = {{"", ""},
                                              {"scalar-f32", "scalar-f32"},
                                              {"avx2-f32", "avx2-f32"},
                                              {"avx512-f32", "avx512-f32"},
                                              {"avx512-f32", "avx512-bf16"},
                                              {"avx512-f32", "amx-bf16"}};

/* the general entry with an fp32 C, argument by argument */
static tt_err gemm(tt_dtype compute, const void *A, tt_dtype adt, int lda, const void *B, tt_dtype bdt, int ldb,
                   float *C, int ldc, int M, int N, int K, int ta, int tb, int acc)
{
    return tt_gemm(&(tt_gemm_args){.compute = compute, .A = A, .adt = adt, .lda = lda, .ta = ta, .B = B, .bdt = bdt,
                                   .ldb = ldb, .tb = tb, .C = C, .cdt = TT_F32, .ldc = ldc, .M = M, .N = N, .K = K,
                                   .accumulate = acc});
}

/* A bf16 C is the fp32 result rounded once: computing into fp32 and rounding
 * must give the same bits, up to the rounding of values that sit within an
 * fp32 ulp of a bf16 tie (counted, and allowed to be a few). Accumulating
 * adds the old bf16 value in fp32 before that rounding: in another order than
 * the fp32 C's sums, so a result that cancels to near zero may differ by an
 * fp32 ulp of the terms, more than a bf16 ulp of itself. */
static void check_bf16_out(tt_rng *rng, const char *isa, int M, int N, int K, tt_dtype compute)
{
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *cf = malloc(nc * 4);
    uint16_t *c = malloc(nc * 2), *c0 = malloc(nc * 2), *c2 = malloc(nc * 2);
    for (size_t x = 0; x < na; x++) a[x] = rnd(rng);
    for (size_t x = 0; x < nb; x++) b[x] = rnd(rng);
    for (size_t x = 0; x < nc; x++) c0[x] = tt_f32_to_bf16(rnd(rng));
    for (int acc = 0; acc < 2; acc++) {
        for (size_t x = 0; x < nc; x++) cf[x] = acc ? tt_bf16_to_f32(c0[x]) : 0;
        memcpy(c, c0, nc * 2);
        CHECK(gemm(compute, a, TT_F32, K, b, TT_F32, N, cf, N, M, N, K, 0, 0, acc) == 0);
        CHECK(tt_gemm(&(tt_gemm_args){.compute = compute, .A = a, .adt = TT_F32, .lda = K, .B = b, .bdt = TT_F32,
                                      .ldb = N, .C = c, .cdt = TT_BF16, .ldc = N, .M = M, .N = N, .K = K,
                                      .accumulate = acc}) == 0);
        /* the kernel's own rounding into C (where the path has it) and the sums in scratch rounded after: the
         * same bits */
        memcpy(c2, c0, nc * 2);
        tt_gemm_set_out16(0);
        CHECK(tt_gemm(&(tt_gemm_args){.compute = compute, .A = a, .adt = TT_F32, .lda = K, .B = b, .bdt = TT_F32,
                                      .ldb = N, .C = c2, .cdt = TT_BF16, .ldc = N, .M = M, .N = N, .K = K,
                                      .accumulate = acc}) == 0);
        tt_gemm_set_out16(1);
        CHECK_MSG(memcmp(c, c2, nc * 2) == 0, "%s %s -> bf16 C %dx%dx%d acc=%d: rounded in the kernel and after differ",
                  isa, tt_dtype_name(compute), M, N, K, acc);
        size_t off = 0, far = 0;
        for (size_t x = 0; x < nc; x++) {
            const float want = tt_bf16_to_f32(tt_f32_to_bf16(cf[x])), got = tt_bf16_to_f32(c[x]);
            if (got != want) off++;
            /* more than one bf16 ulp, beyond what the fp32 sums' order may move a
             * result that cancels to near zero (about an fp32 ulp of its terms) */
            const int i = (int)(x / (size_t)N), col = (int)(x % (size_t)N);
            double mag = acc ? fabs(tt_bf16_to_f32(c0[x])) : 0;
            for (int k = 0; k < K; k++) mag += fabs((double)a[(size_t)i * K + k] * b[(size_t)k * N + col]);
            if (fabsf(got - want) > 1.01f * fabsf(want) / 128 + 1e-6 * mag) far++;
        }
        CHECK_MSG(far == 0 && off <= 2 + nc / 1000, "%s %s -> bf16 C %dx%dx%d acc=%d: %zu of %zu differ, %zu by more than an ulp",
                  isa, tt_dtype_name(compute), M, N, K, acc, off, nc, far);
    }
    free(a), free(b), free(cf), free(c), free(c0), free(c2);
}

/* Adding a zero product into a bf16 C keeps its bits, denormals included:
 * the one rounding is tt_f32_to_bf16's, which keeps them (the hardware's
 * vcvtneps2bf16 flushes them to zero), on whole tiles and ragged ones, in
 * one k block and after several. */
static void check_bf16_keeps(tt_rng *rng, const char *isa, int M, int N, int K, tt_dtype compute)
{
    const size_t nc = (size_t)M * N;
    float *a = calloc((size_t)M * K, 4), *b = malloc((size_t)K * N * 4);
    uint16_t *c = malloc(nc * 2), *c0 = malloc(nc * 2);
    for (size_t x = 0; x < (size_t)K * N; x++) b[x] = rnd(rng);
    for (size_t x = 0; x < nc; x++) /* denormals (exponent 0, mantissa 1..127), either sign, and normal values */
        c0[x] = x % 3 ? (uint16_t)((x % 2) << 15 | (1 + x % 127)) : tt_f32_to_bf16(1.0f + rnd(rng));
    memcpy(c, c0, nc * 2);
    CHECK(tt_gemm(&(tt_gemm_args){.compute = compute, .A = a, .adt = TT_F32, .lda = K, .B = b, .bdt = TT_F32,
                                  .ldb = N, .C = c, .cdt = TT_BF16, .ldc = N, .M = M, .N = N, .K = K,
                                  .accumulate = 1}) == 0);
    size_t off = 0;
    for (size_t x = 0; x < nc; x++) off += c[x] != c0[x];
    CHECK_MSG(off == 0, "%s %s -> bf16 C %dx%dx%d plus a zero product: %zu of %zu values changed", isa,
              tt_dtype_name(compute), M, N, K, off, nc);
    free(a), free(b), free(c), free(c0);
}

/* The order of a bf16 C's one rounding, on a product made to tell orders
 * apart: the first k block sums 2^24 (64 products of 2^18), the last 0.75,
 * and C holds -2^24. Summed in the order store_bf16 (gemm.c) and the
 * kernels keep, (0.75 + 2^24) + -2^24, fp32's rounding at 2^24 (a step of 2)
 * leaves 0; adding C first, (0.75 + -2^24) + 2^24, would leave 1. M above
 * the fp32 paths' skinny bound (32 rows), so that every path runs tiles. */
static void check_bf16_order(const char *isa, int M, int N, int K, tt_dtype compute)
{
    const size_t nc = (size_t)M * N;
    float *a = calloc((size_t)M * K, 4), *b = calloc((size_t)K * N, 4);
    uint16_t *c = malloc(nc * 2);
    for (int i = 0; i < M; i++) {
        for (int k = 0; k < 64; k++) a[(size_t)i * K + k] = 1;
        a[(size_t)i * K + K - 1] = 1;
    }
    for (int col = 0; col < N; col++) {
        for (int k = 0; k < 64; k++) b[(size_t)k * N + col] = 262144.0f;
        b[(size_t)(K - 1) * N + col] = 0.75f;
    }
    for (size_t x = 0; x < nc; x++) c[x] = tt_f32_to_bf16(-16777216.0f);
    CHECK(tt_gemm(&(tt_gemm_args){.compute = compute, .A = a, .adt = TT_F32, .lda = K, .B = b, .bdt = TT_F32,
                                  .ldb = N, .C = c, .cdt = TT_BF16, .ldc = N, .M = M, .N = N, .K = K,
                                  .accumulate = 1}) == 0);
    size_t off = 0;
    for (size_t x = 0; x < nc; x++) off += c[x] != 0;
    CHECK_MSG(off == 0, "%s %s -> bf16 C %dx%dx%d: %zu of %zu sums not rounded in store_bf16's order", isa,
              tt_dtype_name(compute), M, N, K, off, nc);
    free(a), free(b), free(c);
}

/* One shape on the current path: fp32, bf16 and mixed, 4 transposes, acc 0/1. */
static void check_shape(shape s, tt_rng *rng, const char *isa)
{
    const int M = s.M, N = s.N, K = s.K;
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = malloc(na * 4), *bt = malloc(nb * 4), *ar = malloc(na * 4), *btr = malloc(nb * 4);
    float *as = malloc(na * 4), *bs = malloc(nb * 4), *c0 = malloc(nc * 4), *c = malloc(nc * 4);
    uint16_t *as16 = malloc(na * 2), *bs16 = malloc(nb * 2);
    double *ref = malloc(nc * 8), *mag = malloc(nc * 8), *ref32 = malloc(nc * 8), *mag32 = malloc(nc * 8);
    for (size_t x = 0; x < na; x++) a[x] = rnd(rng), ar[x] = to_bf16f(a[x]);
    for (size_t x = 0; x < nb; x++) bt[x] = rnd(rng), btr[x] = to_bf16f(bt[x]);
    for (size_t x = 0; x < nc; x++) c0[x] = rnd(rng);
    reference(a, bt, ref32, mag32, M, N, K);
    reference(ar, btr, ref, mag, M, N, K);

    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            /* op(B) (K,N) is bt^T: B stored (K,N) is bt stored transposed, (N,K) when tb */
            store_op(a, as, M, K, ta);
            store_op(bt, bs, N, K, !tb);
            for (size_t x = 0; x < na; x++) as16[x] = tt_f32_to_bf16(as[x]);
            for (size_t x = 0; x < nb; x++) bs16[x] = tt_f32_to_bf16(bs[x]);
            for (int acc = 0; acc < 2; acc++) {
                /* fp32 */
                memcpy(c, c0, nc * 4);
                CHECK(tt_gemm_f32(as, bs, c, M, N, K, ta, tb, acc) == 0);
                double w = worst_rel(c, ref32, mag32, c0, acc, nc);
                CHECK_MSG(w < 1e-5, "%s f32 %dx%dx%d ta=%d tb=%d acc=%d: rel err %g", isa, M, N, K, ta, tb, acc, w);
                /* bf16: exact products of the rounded inputs, summed in fp32 */
                memcpy(c, c0, nc * 4);
                CHECK(tt_gemm_bf16(as16, bs16, c, M, N, K, ta, tb, acc) == 0);
                w = worst_rel(c, ref, mag, c0, acc, nc);
                CHECK_MSG(w < 1e-5, "%s bf16 %dx%dx%d ta=%d tb=%d acc=%d: rel err %g", isa, M, N, K, ta, tb, acc, w);
                /* mixed: fp32 A rounded while packing, bf16 B */
                memcpy(c, c0, nc * 4);
                CHECK(gemm(TT_BF16, as, TT_F32, ta ? M : K, bs16, TT_BF16, tb ? K : N, c, N, M, N, K,
                              ta, tb, acc) == 0);
                w = worst_rel(c, ref, mag, c0, acc, nc);
                CHECK_MSG(w < 1e-5, "%s mixed A %dx%dx%d ta=%d tb=%d acc=%d: rel err %g", isa, M, N, K, ta, tb, acc, w);
                /* mixed the other way: bf16 A, fp32 B */
                memcpy(c, c0, nc * 4);
                CHECK(gemm(TT_BF16, as16, TT_BF16, ta ? M : K, bs, TT_F32, tb ? K : N, c, N, M, N, K,
                              ta, tb, acc) == 0);
                w = worst_rel(c, ref, mag, c0, acc, nc);
                CHECK_MSG(w < 1e-5, "%s mixed B %dx%dx%d ta=%d tb=%d acc=%d: rel err %g", isa, M, N, K, ta, tb, acc, w);
            }
            /* fp32 compute on bf16 operands widens them exactly */
            memcpy(c, c0, nc * 4);
            CHECK(gemm(TT_F32, as16, TT_BF16, ta ? M : K, bs16, TT_BF16, tb ? K : N, c, N, M, N, K,
                          ta, tb, 0) == 0);
            double w = worst_rel(c, ref, mag, c0, 0, nc);
            CHECK_MSG(w < 1e-5, "%s f32-of-bf16 %dx%dx%d ta=%d tb=%d: rel err %g", isa, M, N, K, ta, tb, w);
        }
    /* the bf16 path really rounds: far from the unrounded product once K is not tiny */
    if (K >= 64) {
        store_op(a, as, M, K, 0);
        store_op(bt, bs, N, K, 1);
        CHECK(gemm(TT_BF16, as, TT_F32, K, bs, TT_F32, N, c, N, M, N, K, 0, 0, 0) == 0);
        double w = worst_rel(c, ref32, mag32, c0, 0, nc);
        CHECK_MSG(w > 1e-4, "%s bf16 %dx%dx%d matches the fp32 product too well (%g): not rounded?", isa, M, N, K, w);
    }
    free(a), free(bt), free(ar), free(btr), free(as), free(bs), free(c0), free(c);
    free(as16), free(bs16), free(ref), free(mag), free(ref32), free(mag32);
}

/* Leading dimensions larger than the rows (a sub-block of bigger matrices):
 * the padding is neither read into the result nor written. */
static void check_strides(tt_rng *rng, const char *isa, int M, tt_dtype compute, int ta, int tb)
{
    const int N = 37, K = 41, pad = 7;
    const int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *C0 = malloc(nc * 4);
    for (size_t x = 0; x < na; x++) A[x] = rnd(rng);
    for (size_t x = 0; x < nb; x++) B[x] = rnd(rng);
    for (size_t x = 0; x < nc; x++) C0[x] = C[x] = rnd(rng);
    CHECK(gemm(compute, A, TT_F32, lda, B, TT_F32, ldb, C, ldc, M, N, K, ta, tb, 1) == 0);
    double worst = 0;
    int outside_ok = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            if (j >= N) { /* columns past N are not C's: untouched */
                outside_ok &= C[i * ldc + j] == C0[i * ldc + j];
                continue;
            }
            double s = C0[i * ldc + j], m = fabs(C0[i * ldc + j]);
            for (int k = 0; k < K; k++) {
                float x = ta ? A[k * lda + i] : A[i * lda + k], y = tb ? B[j * ldb + k] : B[k * ldb + j];
                if (compute == TT_BF16) x = to_bf16f(x), y = to_bf16f(y);
                s += (double)x * y, m += fabs((double)x * y);
            }
            const double e = fabs(C[i * ldc + j] - s) / m;
            if (!(e <= worst)) worst = e;
        }
    CHECK_MSG(worst < 1e-5, "%s strided %s M=%d ta=%d tb=%d: rel err %g", isa, tt_dtype_name(compute), M, ta, tb, worst);
    CHECK_MSG(outside_ok, "%s strided %s M=%d: wrote past N", isa, tt_dtype_name(compute), M);
    free(A), free(B), free(C), free(C0);
}

/* A stored as the kernel reads it (k-contiguous, in the packed dtype: fp32
 * for fp32 kernels, bf16 in whole k granules for bf16 ones) is read in place
 * where the threads have few columns of C each, and packed from 1024 columns
 * a thread on, on every path that reads A in place (AMX and AVX-512).
 * tt_gemm_set_a_pack_cols moves the figure; either way the product has the
 * same bits. */
/* Random operands for the A-in-place and prefetch checks: A (M, K) in fp32
 * and its bf16 copy, B (K, N) in fp32, and two C buffers of (M, N) */
typedef struct {
    float *a, *b, *c0, *c1;
    uint16_t *a16;
} operands;

static operands operands_new(tt_rng *rng, int M, int K, int N)
{
    operands o = {malloc((size_t)M * K * 4), malloc((size_t)K * N * 4), malloc((size_t)M * N * 4),
                  malloc((size_t)M * N * 4), malloc((size_t)M * K * 2)};
    for (size_t x = 0; x < (size_t)M * K; x++) o.a16[x] = tt_f32_to_bf16(o.a[x] = rnd(rng));
    for (size_t x = 0; x < (size_t)K * N; x++) o.b[x] = rnd(rng);
    return o;
}

static void operands_free(operands *o) { free(o->a), free(o->b), free(o->c0), free(o->c1), free(o->a16); }

/* An A whose rows all fall in one L1 set (K 2,048: 4 KB apart in bf16, 8 KB
 * in fp32) is read in place by a tile of 8 rows or fewer and packed for the
 * 12-row tiles; on the AVX-512 bf16 path the automatic tile mode takes the
 * 8x48 tile for it where 48 divides N, and on Intel the automatic fp32 tile
 * is 8x48 or 6x64 (gemm_choice.c). Where the two tiles cut K at the same
 * places, the bits are those of the 12x32 tile on a packed A: each value of
 * C sums the same products in the same order (tt_gemm_k_block says where
 * they cut). With every K cut in kc blocks (tt_gemm_set_kc_whole(0)) they
 * always do. With K up to 2,560 in one block (the default) they do on the
 * bf16 tiles, which all take it, but not on the fp32 8x48 and 6x64 tiles,
 * which cut K 2,048 in kc blocks where 12x32 sums it whole (measured slower
 * for them on the Intel Xeon host, performance-changes.md). (widened: bf16
 * packed to fp32, never read in place) */
static void check_a_one_set(tt_rng *rng, const char *isa, tt_dtype compute, int widened)
{
    const char *kern = tt_gemm_path_name(compute);
    const int M = 40, N = 96, K = 2048;
    const tt_dtype adt = compute == TT_BF16 ? TT_BF16 : TT_F32;
    operands o = operands_new(rng, M, K, N);
    float *c0 = o.c0, *c1 = o.c1;
    tt_gemm_args g = {.compute = compute, .A = adt == TT_BF16 ? (const void *)o.a16 : (const void *)o.a, .adt = adt,
                      .lda = K, .B = o.b, .bdt = TT_F32, .ldb = N, .C = c0, .cdt = TT_F32, .ldc = N, .M = M, .N = N,
                      .K = K};
    const char *const modes[] = {"auto", "12x32"};
    for (int whole = 0; whole < 2; whole++) {
        tt_gemm_set_kc_whole(whole);
        int kblock[2];
        for (int i = 0; i < 2; i++) {
            CHECK(tt_gemm_set_tile(modes[i]) == 0);
            int mr, nr;
            tt_gemm_tile(compute, N, &mr, &nr);
            const int want = !widened && (mr <= 8 || (i == 0 && strcmp(kern, "avx512-bf16") == 0));
            CHECK_MSG(tt_gemm_reads_a_in_place(&g) == want, "%s %s, tile %s: an A in one L1 set %s", isa, kern,
                      modes[i], want ? "packed" : "read in place");
            kblock[i] = tt_gemm_k_block(&g);
            CHECK(kblock[i] > 0);
            g.C = i ? c1 : c0;
            CHECK(tt_gemm(&g) == 0);
        }
        CHECK(tt_gemm_set_tile("auto") == 0);
        /* every K in kc blocks: the same cuts on every tile of a path */
        if (!whole)
            CHECK_MSG(kblock[0] == kblock[1], "%s %s: an A in one L1 set, k blocks of %d and %d with every K cut",
                      isa, kern, kblock[0], kblock[1]);
        if (kblock[0] == kblock[1])
            CHECK_MSG(memcmp(c0, c1, (size_t)M * N * 4) == 0, "%s %s: an A in one L1 set, the tiles differ (K %s)",
                      isa, kern, whole ? "up to 2,560 in one block" : "in kc blocks");
    }
    operands_free(&o);
}

static void check_a_in_place(tt_rng *rng, const char *isa, tt_dtype compute)
{
    const char *kern = tt_gemm_path_name(compute);
    if (strcmp(kern, "amx-bf16") != 0 && strncmp(kern, "avx512-", 7) != 0) return; /* no kernel reads A in place */
    int nt = 1;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    /* bf16 products on an fp32 kernel pack A widened to fp32, however few the columns */
    const int widened = compute == TT_BF16 && strcmp(kern, "amx-bf16") != 0 && strcmp(kern, "avx512-bf16") != 0;
    const int cols = 1024;
    const int M = 96, K = 1056, Nmax = cols * nt + 64; /* rows 4224 bytes apart in fp32: not in one L1 set */
    const tt_dtype adt = compute == TT_BF16 ? TT_BF16 : TT_F32;
    operands o = operands_new(rng, M, K, Nmax);
    float *b = o.b, *c0 = o.c0, *c1 = o.c1;
    const void *A = adt == TT_BF16 ? (const void *)o.a16 : (const void *)o.a;
    const int ns[] = {cols * nt - 16, cols * nt}; /* just below the figure, and the figure */
    for (int i = 0; i < 2; i++) {
        const int N = ns[i];
        tt_gemm_args g = {.compute = compute, .A = A, .adt = adt, .lda = K, .B = b, .bdt = TT_F32, .ldb = N,
                          .C = c0, .cdt = TT_F32, .ldc = N, .M = M, .N = N, .K = K};
        CHECK_MSG(tt_gemm_reads_a_in_place(&g) == (i == 0 && !widened), "%s %s, %d threads: A %s at N %d", isa,
                  kern, nt, i == 0 && !widened ? "packed" : "read in place", N);
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_a_pack_cols(1 << 20); /* in place at every N here */
        CHECK_MSG(tt_gemm_reads_a_in_place(&g) == !widened, "%s %s: A %s at N %d below the figure set", isa, kern,
                  widened ? "in place" : "packed", N);
        g.C = c1;
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_a_pack_cols(1); /* packed at every N */
        CHECK_MSG(tt_gemm_reads_a_in_place(&g) == 0, "%s %s: A in place at N %d above the figure set", isa, kern, N);
        tt_gemm_set_a_pack_cols(0);
        CHECK_MSG(memcmp(c0, c1, (size_t)M * N * 4) == 0, "%s %s %dx%dx%d: A in place and packed differ", isa, kern,
                  M, N, K);
    }
    /* a k-strided A (transposed) is packed below 64 MiB; from the figure tt_gemm_set_a_cols sets, an fp32 one
     * is read in place by the fp32 tiles, with the same bits: over two k blocks (K 1,050), a ragged last panel
     * (M 93) and accumulating into C */
    tt_gemm_args g = {.compute = compute, .A = A, .adt = adt, .lda = M, .ta = 1, .B = b, .bdt = TT_F32, .ldb = 32,
                      .C = c0, .cdt = TT_F32, .ldc = 32, .M = M, .N = 32, .K = M};
    CHECK(tt_gemm_reads_a_in_place(&g) == 0);
    const int cols_kern = adt == TT_F32 && strncmp(kern, "avx512-f32", 10) == 0;
    for (int acc = 0; acc < 2; acc++) {
        g = (tt_gemm_args){.compute = compute, .A = A, .adt = adt, .lda = 96, .ta = 1, .B = b, .bdt = TT_F32,
                           .ldb = 160, .C = c0, .cdt = TT_F32, .ldc = 160, .M = 93, .N = 160, .K = 1050,
                           .accumulate = acc};
        for (size_t x = 0; x < (size_t)93 * 160; x++) c0[x] = c1[x] = (float)(x % 7) - 3.0f;
        tt_gemm_set_a_cols(1);
        CHECK_MSG(tt_gemm_reads_a_in_place(&g) == (cols_kern ? 2 : 0), "%s %s: a transposed A %s", isa, kern,
                  cols_kern ? "packed" : "read in place");
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_a_cols(SIZE_MAX);
        CHECK(tt_gemm_reads_a_in_place(&g) == 0);
        g.C = c1;
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_a_cols(0);
        CHECK_MSG(memcmp(c0, c1, (size_t)93 * 160 * 4) == 0, "%s %s: a transposed A in place and packed differ%s", isa,
                  kern, acc ? ", accumulating" : "");
    }
    if (adt == TT_BF16) {
        g = (tt_gemm_args){.compute = compute, .A = A, .adt = adt, .lda = K, .B = b, .bdt = TT_F32, .ldb = 32,
                           .C = c0, .cdt = TT_F32, .ldc = 32, .M = M, .N = 32, .K = K - 1};
        CHECK(tt_gemm_reads_a_in_place(&g) == 0);
    }
    g.lda = -1;
    CHECK(tt_gemm_reads_a_in_place(&g) == -1);
    operands_free(&o);
    check_a_one_set(rng, isa, compute, widened);
}

/* The packers' prefetches (a row-contiguous B's rows ahead, from bf16 and
 * fp32 sources, on AMX and the AVX-512 and AVX2 paths) read ahead and write nothing:
 * with them turned off (tt_gemm_set_pack_prefetch(0)) the product has the
 * same bits, in bf16 compute and in fp32. K spans two k blocks, the second
 * not a whole number of k blocks (its panels padded); M and N end in
 * partial panels. */
static void check_pack_prefetch(tt_rng *rng, const char *isa)
{
    const int M = 70, N = 100, K = 1300;
    operands o = operands_new(rng, M, K, N);
    uint16_t *b16 = malloc((size_t)K * N * 2);
    for (size_t x = 0; x < (size_t)K * N; x++) b16[x] = tt_f32_to_bf16(o.b[x]);
    for (int v = 0; v < 3; v++) { /* bf16 compute on bf16 operands, on fp32 ones; fp32 compute */
        const int src = v > 0;
        const tt_dtype compute = v == 2 ? TT_F32 : TT_BF16;
        tt_gemm_args g = {.compute = compute, .A = src ? (void *)o.a : o.a16, .adt = src ? TT_F32 : TT_BF16,
                          .lda = K, .B = src ? (void *)o.b : b16, .bdt = src ? TT_F32 : TT_BF16, .ldb = N, .C = o.c0,
                          .cdt = TT_F32, .ldc = N, .M = M, .N = N, .K = K};
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_pack_prefetch(0);
        g.C = o.c1;
        CHECK(tt_gemm(&g) == 0);
        tt_gemm_set_pack_prefetch(1);
        CHECK_MSG(memcmp(o.c0, o.c1, (size_t)M * N * 4) == 0, "%s %s, %s operands: the packers' prefetches change C",
                  isa, tt_gemm_path_name(compute), src ? "fp32" : "bf16");
    }
    operands_free(&o);
    free(b16);
}

/* Own bands claimed across threads: with one thread idle until the others
 * have claimed all of its band (tt_gemm_test_idle), every panel of that band
 * is stolen, and C has the same bits as when each thread computes its own,
 * for bands of rows (a weight gradient's tn) and of columns (a linear's
 * forward, A in place), an fp32 and a bf16 C, over several k blocks. */
static void check_stealing(tt_rng *rng, const char *isa)
{
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2); /* two threads even on one core: the test is of the claims, not the speed */
#endif
    static const shape sh[] = {{600, 70, 1100}, {70, 600, 1100}, {300, 200, 130}, {500, 200, 2700}};
    for (int split = 0; split < 2; split++) {
    CHECK(tt_gemm_set_split(split ? "shared" : "own") == 0);
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int cd = 0; cd < 2; cd++) {
                const int M = sh[s].M, N = sh[s].N, K = sh[s].K;
                const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
                uint16_t *a = malloc(na * 2), *b = malloc(nb * 2);
                float *c[2] = {malloc(nc * 4), malloc(nc * 4)}, *c0 = malloc(nc * 4);
                for (size_t x = 0; x < na; x++) a[x] = tt_f32_to_bf16(rnd(rng));
                for (size_t x = 0; x < nb; x++) b[x] = tt_f32_to_bf16(rnd(rng));
                for (size_t x = 0; x < nc; x++) c0[x] = rnd(rng);
                for (int idle = -1; idle < 2; idle++) {
                    const long before = tt_gemm_units_stolen();
                    float *out = c[idle >= 0];
                    memcpy(out, c0, nc * 4);
                    tt_gemm_test_idle(idle);
                    CHECK(tt_gemm(&(tt_gemm_args){.compute = TT_BF16, .A = a, .adt = TT_BF16, .lda = ta ? M : K,
                                                  .ta = ta, .B = b, .bdt = TT_BF16, .ldb = K, .tb = 1, .C = out,
                                                  .cdt = cd ? TT_BF16 : TT_F32, .ldc = N, .M = M, .N = N, .K = K,
                                                  .accumulate = ta}) == 0);
                    tt_gemm_test_idle(-1);
                    if (idle < 0) continue;
                    CHECK_MSG(tt_gemm_units_stolen() > before, "%s %s %dx%dx%d ta=%d: thread %d idle, nothing stolen",
                              isa, split ? "shared" : "own", M, N, K, ta, idle);
                    /* a bf16 C holds nc / 2 floats' bytes: compare those */
                    CHECK_MSG(memcmp(c[0], c[1], cd ? nc * 2 : nc * 4) == 0,
                              "%s %dx%dx%d ta=%d %s C: thread %d idle, other bits than without", isa, M, N, K, ta,
                              cd ? "bf16" : "fp32", idle);
                }
                free(a), free(b), free(c[0]), free(c[1]), free(c0);
            }
    }
    CHECK(tt_gemm_set_split(NULL) == 0);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
}

int main(void)
{
    tt_rng rng = {1234, 0};
    int paths = 0;
    for (int isa = TT_GEMM_ISA_SCALAR; isa <= TT_GEMM_ISA_AMX; isa++) {
        if (!tt_gemm_isa_supported((tt_gemm_isa)isa)) {
            CHECK(tt_gemm_set_isa((tt_gemm_isa)isa) != 0); /* refused, with a message */
            fprintf(stderr, "test_gemm: this CPU has no %s path, skipped\n", isa_names[isa]);
            continue;
        }
        CHECK(tt_gemm_set_isa((tt_gemm_isa)isa) == 0);
        const char *f32 = tt_gemm_path_name(TT_F32), *bf16 = tt_gemm_path_name(TT_BF16);
        CHECK_MSG(strcmp(f32, path_kernels[isa][0]) == 0, "%s path: fp32 on %s", isa_names[isa], f32);
        CHECK_MSG(strcmp(bf16, path_kernels[isa][1]) == 0, "%s path: bf16 on %s", isa_names[isa], bf16);
        /* the cache blocks for a 1 MB L2 (Zen 4) and for a 2 MB one (Intel Xeon): the AVX-512 kernels' k and
         * A blocks double in the second, which moves every k-block boundary the shapes cross; and on the
         * AVX-512 paths each fp32 register tile, 12x32, 8x48 and 6x64 (whose B panels are ragged on other
         * edges); and each way of sharing a product between threads, shared blocks, own bands (of rows or
         * of columns, whichever the shape takes) and the automatic choice between them */
        const int fp32_avx512 = strcmp(f32, "avx512-f32") == 0;
        static const char *const tiles[] = {"12x32", "8x48", "6x64"}, *const splits[] = {"shared", "own", "auto"};
        for (int run = 0; run < (fp32_avx512 ? 6 : 2); run++) {
            const int l2 = 1 + run % 2;
            const char *tile = tiles[run / 2], *split = splits[run % 3];
            tt_gemm_set_l2((long)l2 << 20);
            CHECK(tt_gemm_set_tile(tile) == 0);
            CHECK(tt_gemm_set_split(split) == 0);
            if (fp32_avx512) {
                int mr, nr;
                tt_gemm_tile(TT_F32, 100, &mr, &nr);
                CHECK_MSG(mr * nr == 384 && nr == atoi(strchr(tile, 'x') + 1), "tile %s: %dx%d", tile, mr, nr);
            }
            for (int d = 0; d < 2; d++) {
                const char *kern = path_kernels[isa][d];
                const int want = l2 == 2 && strncmp(kern, "avx512-", 7) == 0 ? 2 : 1;
                CHECK_MSG(tt_gemm_block_scale(d ? TT_BF16 : TT_F32) == want, "%s path, %d MB L2: %s blocks scaled %d",
                          isa_names[isa], l2, kern, tt_gemm_block_scale(d ? TT_BF16 : TT_F32));
            }
            fprintf(stderr, "test_gemm: path %s: f32 %s, bf16 %s, %d MB L2, split %s%s%s\n", isa_names[isa], f32, bf16,
                    l2, split, fp32_avx512 ? ", fp32 tile " : "", fp32_avx512 ? tile : "");
            for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) check_shape(shapes[s], &rng, isa_names[isa]);
            for (int t = 0; t < 4; t++) { /* few rows (skinny for fp32) and many (packed) */
                check_strides(&rng, isa_names[isa], 23, t & 1 ? TT_BF16 : TT_F32, t >> 1, t >> 1);
                check_strides(&rng, isa_names[isa], 45, t & 1 ? TT_BF16 : TT_F32, t >> 1, t >> 1);
            }
            /* bf16 C: one k block, several (the partial sums; past kc_whole), and few rows (skinny) */
            for (int t = 0; t < 2; t++) {
                check_bf16_out(&rng, isa_names[isa], 37, 70, 50, t ? TT_BF16 : TT_F32);
                check_bf16_out(&rng, isa_names[isa], 40, 45, 2700, t ? TT_BF16 : TT_F32);
                check_bf16_out(&rng, isa_names[isa], 3, 130, 90, t ? TT_BF16 : TT_F32);
                /* whole tiles over three k blocks or more */
                check_bf16_out(&rng, isa_names[isa], 70, 64, 3100, t ? TT_BF16 : TT_F32);
                /* one k block up to the path's kc_whole, and the kc blocks it takes instead after tt_gemm_set_kc_whole(0) */
                check_bf16_out(&rng, isa_names[isa], 40, 64, 2100, t ? TT_BF16 : TT_F32);
                tt_gemm_set_kc_whole(0);
                check_bf16_out(&rng, isa_names[isa], 40, 64, 2100, t ? TT_BF16 : TT_F32);
                check_shape((shape){20, 40, 1100}, &rng, isa_names[isa]);
                tt_gemm_set_kc_whole(1);
                check_bf16_keeps(&rng, isa_names[isa], 37, 70, 50, t ? TT_BF16 : TT_F32);
                check_bf16_keeps(&rng, isa_names[isa], 40, 96, 2700, t ? TT_BF16 : TT_F32);
                check_bf16_order(isa_names[isa], 40, 70, 4200, t ? TT_BF16 : TT_F32);
            }
        }
        check_a_in_place(&rng, isa_names[isa], TT_F32);
        check_a_in_place(&rng, isa_names[isa], TT_BF16);
        check_pack_prefetch(&rng, isa_names[isa]);
        check_stealing(&rng, isa_names[isa]);
        paths++;
    }
    CHECK(paths >= 1);
    CHECK(tt_gemm_set_tile(NULL) == 0);
    CHECK(tt_gemm_set_split(NULL) == 0);
    CHECK(tt_gemm_set_split("halves") != 0 && strstr(tt_last_error(), "halves"));

    /* the fp32 tile: auto takes on Intel the widest of 6x64 and 8x48 whose width divides N, else 12x32, and
     * 12x32 elsewhere; TITAN_GEMM_TILE names the mode, and anything else is ignored for auto. Columns: the
     * value, the tile's width for N 288 (a multiple of 48), 768 (of 64) and 100 (of neither), what it means */
    if (tt_gemm_isa_supported(TT_GEMM_ISA_AVX512)) {
        CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AVX512) == 0);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        const int intel = __builtin_cpu_is("intel");
#else
        const int intel = 0;
#endif
        const char *const a48 = intel ? "48" : "32", *const a64 = intel ? "64" : "32";
        const char *const modes[][5] = {{"auto", a48, a64, "32", "auto"},     {"12x32", "32", "32", "32", "12x32"},
                                        {"8x48", "48", "48", "48", "8x48"},   {"6x64", "64", "64", "64", "6x64"},
                                        {"6x32", a48, a64, "32", "ignored"}, {"wide", a48, a64, "32", "ignored"}};
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            setenv("TITAN_GEMM_TILE", modes[i][0], 1);
            CHECK(tt_gemm_set_tile(NULL) == 0);
            int mr[3], nr[3];
            tt_gemm_tile(TT_F32, 288, &mr[0], &nr[0]);
            tt_gemm_tile(TT_BF16, 768, &mr[1], &nr[1]); /* bf16 widened onto the FMAs on this path */
            tt_gemm_tile(TT_F32, 100, &mr[2], &nr[2]);
            CHECK_MSG(nr[0] == atoi(modes[i][1]) && nr[1] == atoi(modes[i][2]) && nr[2] == atoi(modes[i][3]),
                      "TITAN_GEMM_TILE=%s (%s): N 288 on %dx%d, N 768 on %dx%d, N 100 on %dx%d", modes[i][0],
                      modes[i][4], mr[0], nr[0], mr[1], nr[1], mr[2], nr[2]);
        }
        unsetenv("TITAN_GEMM_TILE");
        CHECK(tt_gemm_set_tile(NULL) == 0);
        CHECK(tt_gemm_set_tile("13x32") != 0 && strstr(tt_last_error(), "13x32"));
        CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AUTO) == 0);
    }

    /* TITAN_GEMM_L2 gives the L2 in bytes, K or M; anything else is ignored for the CPU's own */
    if (tt_gemm_isa_supported(TT_GEMM_ISA_AVX512)) {
        CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AVX512) == 0);
        const char *const sizes[][2] = {{"2M", "2"}, {"2048K", "2"}, {"2097152", "2"}, {"1m", "1"}, {"2097151", "1"}};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            setenv("TITAN_GEMM_L2", sizes[i][0], 1);
            tt_gemm_set_l2(0);
            CHECK_MSG(tt_gemm_block_scale(TT_F32) == atoi(sizes[i][1]), "TITAN_GEMM_L2=%s: blocks scaled %d",
                      sizes[i][0], tt_gemm_block_scale(TT_F32));
        }
        unsetenv("TITAN_GEMM_L2");
        tt_gemm_set_l2(0);
        const int cpu = tt_gemm_block_scale(TT_F32);
        const char *const bad[] = {"2Mb", "lots", "-1", "0", "M"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            setenv("TITAN_GEMM_L2", bad[i], 1);
            tt_gemm_set_l2(0);
            CHECK_MSG(tt_gemm_block_scale(TT_F32) == cpu, "TITAN_GEMM_L2=%s: not ignored", bad[i]);
        }
        unsetenv("TITAN_GEMM_L2");
        tt_gemm_set_l2(0);
        fprintf(stderr, "test_gemm: this CPU's L2 scales the AVX-512 blocks by %d\n", cpu);
    }

    /* TITAN_GEMM_ISA names the path (scalar included); one the CPU lacks falls to the preferred one below it */
    unsetenv("TITAN_GEMM_ISA");
    CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AUTO) == 0);
    const char *auto_bf16 = tt_gemm_path_name(TT_BF16);
    for (int isa = TT_GEMM_ISA_SCALAR; isa <= TT_GEMM_ISA_AMX; isa++) {
        setenv("TITAN_GEMM_ISA", isa_names[isa], 1);
        CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AUTO) == 0);
        /* forced where the CPU has it, even where the automatic choice skips it (AVX512_BF16 on Intel) */
        if (tt_gemm_isa_supported((tt_gemm_isa)isa))
            CHECK_MSG(strcmp(tt_gemm_path_name(TT_BF16), path_kernels[isa][1]) == 0, "TITAN_GEMM_ISA=%s: bf16 on %s",
                      isa_names[isa], tt_gemm_path_name(TT_BF16));
        /* AMX where the CPU lacks it: the automatic choice, which lies below */
        else if (isa == TT_GEMM_ISA_AMX)
            CHECK_MSG(strcmp(tt_gemm_path_name(TT_BF16), auto_bf16) == 0, "TITAN_GEMM_ISA=amx without AMX: bf16 on %s",
                      tt_gemm_path_name(TT_BF16));
    }
    unsetenv("TITAN_GEMM_ISA");
    CHECK(tt_gemm_set_isa(TT_GEMM_ISA_AUTO) == 0);
    /* the automatic choice: bf16 dot products only where preferred to FMAs */
    CHECK(strcmp(tt_gemm_path_name(TT_BF16), "avx512-bf16") != 0 || tt_bf16_dot_preferred());

    /* K = 0: an empty sum */
    float a1[1] = {1}, b1[1] = {1}, c1[6] = {5, 5, 5, 5, 5, 5};
    CHECK(tt_gemm_f32(a1, b1, c1, 2, 3, 0, 0, 0, 1) == 0 && c1[0] == 5 && c1[5] == 5);
    CHECK(tt_gemm_f32(a1, b1, c1, 2, 3, 0, 0, 0, 0) == 0 && c1[0] == 0 && c1[5] == 0);
    /* bad arguments are refused, not run */
    CHECK(tt_gemm_f32(a1, b1, c1, -1, 1, 1, 0, 0, 0) != 0);
    CHECK(gemm(TT_F16, a1, TT_F32, 1, b1, TT_F32, 1, c1, 1, 1, 1, 1, 0, 0, 0) != 0);
    CHECK(gemm(TT_F32, a1, TT_I32, 1, b1, TT_F32, 1, c1, 1, 1, 1, 1, 0, 0, 0) != 0);
    CHECK(gemm(TT_F32, a1, TT_F32, 1, b1, TT_F32, 1, c1, 1, 1, 2, 1, 0, 0, 0) != 0); /* ldc < N */
    CHECK(gemm(TT_F32, a1, TT_F32, 1, b1, TT_F32, 1, c1, 2, 2, 2, 2, 0, 0, 0) != 0); /* lda < K */
    CHECK(strstr(tt_last_error(), "lda") != NULL);
    CHECK(tt_gemm(&(tt_gemm_args){.compute = TT_F32, .A = a1, .adt = TT_F32, .lda = 1, .B = b1, .bdt = TT_F32,
                                  .ldb = 1, .C = c1, .cdt = TT_I32, .ldc = 1, .M = 1, .N = 1, .K = 1}) != 0);
    return th_done("test_gemm");
}

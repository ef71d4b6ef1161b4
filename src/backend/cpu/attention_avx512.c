/* attention_avx512.c — flash attention for AVX-512 CPUs, forward and
 * backward, fp32 (FMA) and bf16 (vdpbf16ps, or AMX tiles where the CPU has
 * them; fp32 sums; or, where FMAs outrun vdpbf16ps, bf16 inputs widened to
 * fp32 by the packing and the fp32 products).
 *
 * Work is cut into 64 x 64 tiles of (queries, keys). The forward keeps, per
 * 64-query block, the running row max and sum of an online softmax and an
 * fp32 output accumulator; the T x T scores are never held, only their
 * logsumexp is saved. The backward recomputes each tile's probabilities from
 * it. Causal tiles above the diagonal are never visited, and on the
 * diagonal the quarter no query sees is not computed; tiles that see
 * nothing (other documents, outside the window) cost a mask scan. Gemma 2's
 * soft-cap (cap tanh(s / cap) of each score) is applied to a tile's scores
 * before its softmax, and its derivative taken in the backward.
 *
 * Every product of a tile is one routine, tile_mm: C (R x 16NV) += A B over
 * ks steps, with A read as broadcasts and B as vectors, the accumulators in
 * registers (R * NV <= 24). For it, each task first copies the q, k, v (and
 * dout) rows it reads into the layouts the products read, in the compute
 * dtype, with RoPE applied to q and k, in buffers of its thread: so each
 * element is converted, rotated and transposed once per task, not once per
 * tile, stays in the core's caches from then on, and GQA shares the kv heads
 * without a copy per query head. A task is one (batch, kv head) with all its
 * query heads: the backward's whole sequence, the forward's too unless there
 * are too few such pairs to share out, when it takes a chunk of the query
 * blocks (and packs the keys that chunk sees). ku is 1 for fp32 values, 2 for bf16 pairs (two
 * consecutive values of the summed index in one 32-bit word, the even one in
 * the low half, as vdpbf16ps reads them). Layouts of a 64-row block X (t =
 * row, d = feature):
 *   R  [t][d]             A operand summed over d   (q for S = q k^T, dout for dP = dout v^T)
 *   BT [d/ku][t][ku]      B operand summed over d   (k for S, v for dP)
 *   BI [t/ku][d][ku]      B operand summed over t   (v for O += P v, k for dq += dS k)
 *   AT [d][t/ku][ku]      A operand summed over t   (bf16 pairs: dout for dv^T += dout^T P, q for dk^T += q^T dS)
 * fp32 needs no AT: it sums dv += P^T dout and dk += dS^T q with P and dS
 * read transposed as A (TA) and dout, q as B in their R layout, which for
 * ku 1 is also BI.
 */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/avx512_util.h"
#include "backend/host/amx.h"
#include "backend/host/bf16_dot.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Everything here is compiled for AVX-512 with BF16; the fp32 code uses no
 * BF16 instruction, and the entry points check the CPU before running any. */
#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define AI static inline __attribute__((always_inline))
/* and with PREFETCHW, which every AVX-512 CPU has */
#define TGT_PFW __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,prfchw")))

#define BLK TT_ATTN_BLK /* queries per tile, keys per tile: a row of a tile is four vectors of 16 */

static int cpu_ok(tt_dtype dt)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
        return 0;
    return dt == TT_F32 || __builtin_cpu_supports("avx512bf16");
}

/* ---- the tile product ------------------------------------------------------ */

/* C (R x 16NV floats, row stride ldc) = (acc: +=) sum over s < ks of A[r][s] B[s]:
 * A[r][s] is the word at a + r*lda + s (TA 0: A as it lies) or at a + s*lda + r
 * (TA 1: A transposed, as the backward reads P and dS for dv and dk in fp32);
 * B step s at b + s*ldb words (16NV words used). A is only ever broadcast, so
 * reading it across its rows costs nothing. */
TGT AI void mm_body(const int R, const int NV, const int ku, const int TA, int ks, const void *a, long lda,
                    const void *b, long ldb, float *c, long ldc, int acc)
{
    __m512 x[8][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) x[r][v] = acc ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
    const int32_t *A = a;
    const int32_t *B = b;
    const long ra = TA ? 1 : lda, sa = TA ? lda : 1; /* A's strides between rows and between steps */
    for (int s = 0; s < ks; s++) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = _mm512_loadu_ps((const float *)(B + (size_t)s * ldb) + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (ku == 1) {
                const __m512 ar = _mm512_set1_ps(((const float *)A)[r * ra + s * sa]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) x[r][v] = _mm512_fmadd_ps(ar, bv[v], x[r][v]);
            } else {
                const __m512bh ar = (__m512bh)_mm512_set1_epi32(A[r * ra + s * sa]);
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++) x[r][v] = _mm512_dpbf16_ps(x[r][v], ar, (__m512bh)bv[v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + r * ldc + 16 * v, x[r][v]);
}

typedef void mm_fn(int ks, const void *a, long lda, const void *b, long ldb, float *c, long ldc, int acc);
#define MM(R, NV, KU, TA)                                                                                      \
    TGT static void mm_##R##_##NV##_##KU##_##TA(int ks, const void *a, long lda, const void *b, long ldb,     \
                                                float *c, long ldc, int acc)                                  \
    {                                                                                                          \
        mm_body(R, NV, KU, TA, ks, a, lda, b, ldb, c, ldc, acc);                                               \
    }
#define MM_R8(NV, KU, TA)                                                                                      \
    MM(1, NV, KU, TA) MM(2, NV, KU, TA) MM(3, NV, KU, TA) MM(4, NV, KU, TA) MM(5, NV, KU, TA)                  \
    MM(6, NV, KU, TA) MM(7, NV, KU, TA) MM(8, NV, KU, TA)
#define MM_KU(KU, TA)                                                                                          \
    MM_R8(1, KU, TA) MM_R8(2, KU, TA) MM_R8(3, KU, TA) MM(1, 4, KU, TA) MM(2, 4, KU, TA) MM(3, 4, KU, TA)      \
    MM(4, 4, KU, TA) MM(5, 4, KU, TA) MM(6, 4, KU, TA)
MM_KU(1, 0)
MM_KU(2, 0)
MM_KU(1, 1) /* A transposed: fp32 only (a bf16 pair must lie along the sum) */
#define ROW8(NV, KU, TA)                                                                                       \
    {mm_1_##NV##_##KU##_##TA, mm_2_##NV##_##KU##_##TA, mm_3_##NV##_##KU##_##TA, mm_4_##NV##_##KU##_##TA,       \
     mm_5_##NV##_##KU##_##TA, mm_6_##NV##_##KU##_##TA, mm_7_##NV##_##KU##_##TA, mm_8_##NV##_##KU##_##TA}
#define ROW6(NV, KU, TA)                                                                                       \
    {mm_1_##NV##_##KU##_##TA, mm_2_##NV##_##KU##_##TA, mm_3_##NV##_##KU##_##TA, mm_4_##NV##_##KU##_##TA,       \
     mm_5_##NV##_##KU##_##TA, mm_6_##NV##_##KU##_##TA, NULL, NULL}
#define TABLE(KU, TA) {ROW8(1, KU, TA), ROW8(2, KU, TA), ROW8(3, KU, TA), ROW6(4, KU, TA)}
/* [kind][NV-1][R-1], kind 0: fp32, 1: bf16 pairs, 2: fp32 with A transposed;
 * up to 8 rows for NV <= 3 (24 accumulators), 6 for NV = 4 */
static mm_fn *const mm_table[3][4][8] = {TABLE(1, 0), TABLE(2, 0), TABLE(1, 1)};

/* C (M x n) (+)= A (M x ks) B (ks x n), n a multiple of 16: rows in register
 * tiles, columns in chunks of at most 64. lda: A's row stride, or its step
 * stride when ta (fp32 only); B step stride ldb (words), C row stride ldc
 * (floats). */
static void tile_mm(int ku, int ta, int M, int n, int ks, const void *a, long lda, const void *b, long ldb, float *c,
                    long ldc, int acc)
{
    const int kind = ta ? 2 : ku - 1;
    for (int c0 = 0; c0 < n; c0 += 64) {
        const int nv = (n - c0 < 64 ? n - c0 : 64) / 16, rmax = nv <= 3 ? 8 : 6;
        /* as few register tiles as rmax allows, their rows evened out (64 rows
         * as 6,6,6,6,6,6,6,6,6,5,5, not ten of 6 and one of 4: a short tile
         * reloads B for few FMAs) */
        const int ng = (M + rmax - 1) / rmax, big = M % ng;
        for (int gi = 0, r0 = 0; gi < ng; gi++) {
            const int R = M / ng + (gi < big);
            mm_table[kind][nv - 1][R - 1](ks, (const int32_t *)a + (size_t)r0 * (ta ? 1 : lda), lda,
                                          (const int32_t *)b + c0, ldb, c + (size_t)r0 * ldc + c0, ldc, acc);
            r0 += R;
        }
    }
}

/* The same product on AMX tiles, for bf16 (ku 2) when M and n are multiples
 * of 16 (as the head dim is here) and ks of 16 pairs: C in 16 x 16 fp32 tiles, two rows by two columns
 * of them at a time (tmm0-3), each k block of 32 values loading two A tiles
 * (tmm4, 5: 16 rows of 16 pairs, A's rows as they lie) and two B tiles (tmm6,
 * 7: 16 steps of 16 pairs, B's steps as they lie: already AMX's pair layout).
 * The calling thread has configured its tiles (tt_amx_tiles_16x64). */
#define TGT_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))
TGT_AMX AI void amx_block(const int rr, const int cc, int ks, const char *a, long lda, const char *b, long ldb,
                          float *c, long ldc, int acc)
{
    const long la = lda * 4, lb = ldb * 4, lc = ldc * 4; /* strides in bytes */
    float *c1 = c + 16 * ldc;
    if (acc) {
        _tile_loadd(0, c, lc);
        if (cc > 1) _tile_loadd(1, c + 16, lc);
        if (rr > 1) _tile_loadd(2, c1, lc);
        if (rr > 1 && cc > 1) _tile_loadd(3, c1 + 16, lc);
    } else {
        _tile_zero(0);
        if (cc > 1) _tile_zero(1);
        if (rr > 1) _tile_zero(2);
        if (rr > 1 && cc > 1) _tile_zero(3);
    }
    for (int s = 0; s < ks; s += 16) {
        const char *as = a + (size_t)s * 4, *bs = b + (size_t)s * lb;
        _tile_loadd(4, as, la);
        if (rr > 1) _tile_loadd(5, as + 16 * la, la);
        _tile_loadd(6, bs, lb);
        if (cc > 1) _tile_loadd(7, bs + 64, lb);
        _tile_dpbf16ps(0, 4, 6);
        if (cc > 1) _tile_dpbf16ps(1, 4, 7);
        if (rr > 1) _tile_dpbf16ps(2, 5, 6);
        if (rr > 1 && cc > 1) _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, lc);
    if (cc > 1) _tile_stored(1, c + 16, lc);
    if (rr > 1) _tile_stored(2, c1, lc);
    if (rr > 1 && cc > 1) _tile_stored(3, c1 + 16, lc);
}

TGT_AMX static void tile_mm_amx(int M, int n, int ks, const void *a, long lda, const void *b, long ldb, float *c,
                                long ldc, int acc)
{
    for (int r0 = 0; r0 < M; r0 += 32) {
        const char *ar = (const char *)a + (size_t)r0 * lda * 4;
        float *cr = c + (size_t)r0 * ldc;
        for (int c0 = 0; c0 < n; c0 += 32) {
            const char *bc = (const char *)b + (size_t)c0 * 4;
            if (M - r0 >= 32 && n - c0 >= 32) amx_block(2, 2, ks, ar, lda, bc, ldb, cr + c0, ldc, acc);
            else if (M - r0 >= 32) amx_block(2, 1, ks, ar, lda, bc, ldb, cr + c0, ldc, acc);
            else if (n - c0 >= 32) amx_block(1, 2, ks, ar, lda, bc, ldb, cr + c0, ldc, acc);
            else amx_block(1, 1, ks, ar, lda, bc, ldb, cr + c0, ldc, acc);
        }
    }
}

/* ---- packing: sources into the tile layouts ------------------------------- */

typedef struct {
    const tt_attn *a;
    int ku, nblk, group;   /* nblk: 64-row blocks per sequence */
    int amx;               /* bf16 products on AMX tiles (tile_mm_amx) */
    size_t es, blk_elems;  /* bytes of one compute element; elements of one packed 64 x hd block */
    size_t esrc;           /* bytes of one element of the call's tensors (a->dt) */
    float scale;           /* 1 / sqrt(hd) */
    float softcap;         /* > 0: scaled scores s become softcap tanh(s / softcap) */
} ws_t;

/* Block blk of head i in a packed layout at base ([head][block][64 * hd] elements) */
static void *blk_at(const ws_t *w, void *base, size_t i, int blk)
{
    return (char *)base + ((i * w->nblk + blk) * w->blk_elems) * w->es;
}

/* A tile product of the call: on AMX tiles where w says so, else tile_mm
 * (ta: A transposed, fp32 only, never on tiles). AMX takes whole blocks of 16
 * steps; the rest of a sum over a head dim that is not a multiple of 32 (48:
 * 24 steps) is added by tile_mm. */
static void prod(const ws_t *w, int ta, int M, int n, int ks, const void *a, long lda, const void *b, long ldb,
                 float *c, long ldc, int acc)
{
    const int ka = w->amx && !ta ? ks / 16 * 16 : 0;
    if (ka) tile_mm_amx(M, n, ka, a, lda, b, ldb, c, ldc, acc);
    if (ka < ks)
        tile_mm(w->ku, ta, M, n, ks - ka, (const int32_t *)a + ka, lda, (const int32_t *)b + (size_t)ka * ldb, ldb, c,
                ldc, acc || ka);
}

/* On a causal tile of the diagonal (queries and keys from the same 64
 * positions), queries [0, 32) see keys [0, 32) at most: the three helpers
 * below leave out that quarter of each product there (diag). */
#define HALF (BLK / 2)

/* Scores-shaped C (64 queries, 64 keys) = A B over the head dim (ks steps):
 * A the query side's rows (row stride lda words), B the keys' BT layout. On
 * the diagonal, rows [0, 32) get columns [0, 32) only; the rest of those rows
 * is left as it was, for the masked reads that follow. */
static void prod_scores(const ws_t *w, int diag, int ks, const void *a, long lda, const void *b, float *c)
{
    if (!diag) {
        prod(w, 0, BLK, BLK, ks, a, lda, b, BLK, c, BLK, 0);
        return;
    }
    prod(w, 0, HALF, HALF, ks, a, lda, b, BLK, c, BLK, 0);
    prod(w, 0, HALF, BLK, ks, (const int32_t *)a + (size_t)HALF * lda, lda, b, BLK, c + HALF * BLK, BLK, 0);
}

/* C (64 queries, n) += M Y over the tile's keys: M (P or dS) in rows of 64
 * keys as ku-packed words, Y (v or k) in the BI layout. On the diagonal, rows
 * [0, 32) sum over keys [0, 32) only. */
static void prod_over_keys(const ws_t *w, int diag, int n, const void *m, const void *y, float *c, long ldc)
{
    const int ks = BLK / w->ku;
    if (!diag) {
        prod(w, 0, BLK, n, ks, m, ks, y, n, c, ldc, 1);
        return;
    }
    prod(w, 0, HALF, n, ks / 2, m, ks, y, n, c, ldc, 1);
    prod(w, 0, HALF, n, ks, (const int32_t *)m + (size_t)HALF * ks, ks, y, n, c + (size_t)HALF * ldc, ldc, 1);
}

/* A key block's gradient += M^T Y over the tile's queries, M (64 queries,
 * 64 keys) being P (for dv) or dS (for dk), Y dout or q. fp32: dX (64 keys,
 * hd) in rows, M read transposed as it lies (row-major), Y in rows (R
 * layout). bf16 pairs: dX^T (hd, 64 keys) = Y^T M, Y^T in the AT layout, M
 * in pairs along the queries. On the diagonal, keys [32, 64) sum over
 * queries [32, 64) only. */
static void prod_key_grad(const ws_t *w, int diag, const void *m, const void *y, float *dx)
{
    const int hd = w->a->hd, ku = w->ku;
    if (ku == 1) {
        prod(w, 1, diag ? HALF : BLK, hd, BLK, m, BLK, y, hd, dx, hd, 1);
        if (diag)
            prod(w, 1, HALF, hd, HALF, (const float *)m + HALF * BLK + HALF, BLK, (const float *)y + (size_t)HALF * hd,
                 hd, dx + (size_t)HALF * hd, hd, 1);
        return;
    }
    const int ks = BLK / ku;
    prod(w, 0, hd, diag ? HALF : BLK, ks, y, ks, m, BLK, dx, BLK, 1);
    if (diag)
        prod(w, 0, hd, HALF, ks / 2, (const int32_t *)y + ks / 2, ks, (const int32_t *)m + (size_t)(ks / 2) * BLK + HALF,
             BLK, dx + HALF, BLK, 1);
}

/* 32-bit words: out (cols x rows, row stride ldo) = in (rows x cols, row stride ldi) transposed */
TGT static void transpose_words(const uint32_t *in, long ldi, int rows, int cols, uint32_t *out, long ldo)
{
    for (int r0 = 0; r0 < rows; r0 += 16)
        for (int c0 = 0; c0 < cols; c0 += 16) {
            const int nr = rows - r0 < 16 ? rows - r0 : 16, nc = cols - c0 < 16 ? cols - c0 : 16;
            const __mmask16 cm = (__mmask16)((1u << nc) - 1), rm = (__mmask16)((1u << nr) - 1);
            __m512i t[16];
            for (int i = 0; i < 16; i++)
                t[i] = i < nr ? _mm512_maskz_loadu_epi32(cm, in + (size_t)(r0 + i) * ldi + c0) : _mm512_setzero_si512();
            transpose16(t);
            for (int j = 0; j < nc; j++) _mm512_mask_storeu_epi32(out + (size_t)(c0 + j) * ldo + r0, rm, t[j]);
        }
}

/* RoPE on one row x (2 half) at position pos, in place: dir 1 rotates,
 * dir -1 rotates back (the transpose, for gradients). Pairs (i, i + half);
 * half is a multiple of 8, so the last vector may be partial. */
TGT static void rope_row(const tt_attn_rope *rt, int pos, int half, float *x, int dir)
{
    const size_t tr = (size_t)(pos - rt->lo) * half; /* the position's table row */
    const float *c = rt->cos + tr, *sn = rt->sin + tr;
    for (int i = 0; i < half; i += 16) {
        const __mmask16 k = mask16(half - i);
        const __m512 x1 = _mm512_maskz_loadu_ps(k, x + i), x2 = _mm512_maskz_loadu_ps(k, x + half + i);
        const __m512 cv = _mm512_maskz_loadu_ps(k, c + i);
        const __m512 sv = dir > 0 ? _mm512_maskz_loadu_ps(k, sn + i) : _mm512_sub_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(k, sn + i));
        _mm512_mask_storeu_ps(x + i, k, _mm512_fnmadd_ps(x2, sv, _mm512_mul_ps(x1, cv)));
        _mm512_mask_storeu_ps(x + half + i, k, _mm512_fmadd_ps(x1, sv, _mm512_mul_ps(x2, cv)));
    }
}

#define PF_ROWS TT_ATTN_PF_ROWS /* store_grad_row's PREFETCHW distance: tt_attn_row's for reads */

/* Rows [t0, t0 + 64) of head hh of batch b: loaded from the strided source
 * into an fp32 tile X (64, hd), RoPE'd when rope, then written to each of
 * the block layouts R, BT, BI, AT that is not NULL; rows past T are zero. X
 * is scratch (64 x hd floats and as many bytes again), unless the values stay
 * fp32 and R or BI is wanted: then the tile is built there. */
TGT static void pack_block(const ws_t *w, const tt_attn_rope *rt, const void *src, long ld, int b, int hh, int blk,
                           int rope, void *R, void *BT, void *BI, void *AT, float *X)
{
    const tt_attn *a = w->a;
    const int hd = a->hd, half = hd / 2, t0 = blk * BLK, nt = a->T - t0 < BLK ? a->T - t0 : BLK;
    const size_t esrc = w->esrc;
    if (w->ku == 1 && (R || BI)) X = R ? R : BI; /* fp32: R and BI are the tile itself, so fill one in place */
    for (int tl = 0; tl < BLK; tl++) {
        float *x = X + (size_t)tl * hd;
        if (tl >= nt) {
            memset(x, 0, (size_t)hd * sizeof(float));
            continue;
        }
        const size_t n = (size_t)b * a->T + t0 + tl;
        const char *row = tt_attn_row(a, src, ld, b, hh, t0 + tl, esrc);
        if (a->dt == TT_BF16)
            for (int d = 0; d < hd; d += 16)
                _mm512_storeu_ps(x + d, bf16_widen(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d))));
        else
            memcpy(x, row, (size_t)hd * sizeof(float));
        if (rope && a->pos) rope_row(rt, a->pos[n], half, x, 1);
    }
    if (w->ku == 1) { /* fp32: R and BI are X itself, BT and AT its transpose [d][t] */
        if (R && BI) memcpy(BI, X, (size_t)BLK * hd * sizeof(float));
        if (BT) transpose_words((const uint32_t *)X, hd, BLK, hd, BT, BLK);
        if (AT) transpose_words((const uint32_t *)X, hd, BLK, hd, AT, BLK);
        return;
    }
    /* bf16. R: the rows rounded; its words are the pairs along d. BT: those
     * words transposed. BI: rows 2tp and 2tp+1 interleaved. AT: BI transposed. */
    uint16_t *r16 = R ? R : (uint16_t *)(X + (size_t)BLK * hd); /* BT needs R's words: X's tail is room for them */
    if (R || BT)
        for (size_t e = 0; e < (size_t)BLK * hd; e += 32) /* BLK * hd is a multiple of 32 */
            _mm512_storeu_si512(r16 + e, bf16x32(_mm512_loadu_ps(X + e), _mm512_loadu_ps(X + e + 16)));
    if (BT) transpose_words((const uint32_t *)r16, half, BLK, half, BT, BLK);
    if (BI || AT) {
        uint32_t *bi32 = BI ? BI : (uint32_t *)(X + (size_t)BLK * hd);
        for (int tp = 0; tp < BLK / 2; tp++) {
            const float *x0 = X + (size_t)2 * tp * hd;
            for (int d = 0; d < hd; d += 16)
                _mm512_storeu_si512(bi32 + (size_t)tp * hd + d, bf16_pairs(_mm512_loadu_ps(x0 + d), _mm512_loadu_ps(x0 + hd + d)));
        }
        if (AT) transpose_words(bi32, hd, BLK / 2, hd, AT, BLK / 2);
    }
}

/* ---- masks ------------------------------------------------------------------ */

/* A row of vis as a mask: bit c set when the query sees key c */
TGT static inline __mmask64 vis_mask(const unsigned char row[BLK])
{
    const __m512i v = _mm512_loadu_si512(row);
    return _mm512_test_epi8_mask(v, v);
}

/* ---- forward ------------------------------------------------------------------ */

/* exp of a softmax's scores (x <= 0), 0 where k is clear: with bf16 operands
 * (ku 2) every P is rounded to bf16 right after, or summed into a row's
 * total beside such values, so the cheaper exp16_bf16_maskz serves; fp32
 * attention keeps tt_expf's accuracy. */
TGT AI __m512 softmax_exp(int ku, __mmask16 k, __m512 x)
{
    return ku == 2 ? exp16_bf16_maskz(k, x) : exp16_maskz(k, x);
}

/* Per-thread buffers of the forward. */
typedef struct {
    float *O, *S; /* (64, hd) output accumulator, (64, 64) scores */
    void *P;      /* (64, 64) bf16 probabilities, pairs along the keys */
    void *Q;      /* the query block, R layout */
    void *k_bt, *v_bi; /* the kv head's keys and values: [block] */
    float *X;     /* pack_block's scratch */
} fwd_bufs;

/* One 64-query block of one head: online softmax over the key blocks it sees. */
TGT static void fwd_task(const ws_t *w, const tt_attn_rope *rt, int b, int h, int ib, const fwd_bufs *u)
{
    const tt_attn *a = w->a;
    const int hd = a->hd, ku = w->ku, i0 = ib * BLK, nq = a->T - i0 < BLK ? a->T - i0 : BLK;
    const float sc = w->scale;
    float *O = u->O, *S = u->S;
    void *P = u->P;
    const void *Q = u->Q;
    pack_block(w, rt, a->q, a->ldq, b, h, ib, 1, u->Q, NULL, NULL, NULL, u->X);
    float m[BLK];
    __m512 l[BLK]; /* each row's running sum, as 16 partial sums: reduced once, at the end */
    unsigned char vis[BLK][BLK];
    for (int r = 0; r < BLK; r++) m[r] = -INFINITY, l[r] = _mm512_setzero_ps();
    memset(O, 0, (size_t)BLK * hd * sizeof(float));
    /* keys any row of the block may see: [jlo, jhi] */
    const int jlo = tt_attn_first_key(a, i0), jhi = i0 + nq - 1;
    for (int jb = jlo / BLK; jb <= jhi / BLK; jb++) {
        const int j0 = jb * BLK, nj = a->T - j0 < BLK ? a->T - j0 : BLK;
        const int see = tt_attn_tile_vis(a, b, i0, nq, j0, nj, vis);
        if (see == TT_SEE_NONE) continue;
        const int diag = j0 == i0;
        /* S (64, 64) = Q K^T */
        prod_scores(w, diag, hd / ku, Q, hd / ku, blk_at(w, u->k_bt, 0, jb), S);
        if (w->softcap > 0) { /* soft-capped, kept in the unscaled units the rest multiplies by sc */
            const float cs = w->softcap / sc, inv = sc / w->softcap;
            #pragma omp simd
            for (int e = 0; e < BLK * BLK; e++) S[e] = cs * tt_tanhf(S[e] * inv);
        }
        for (int r = 0; r < BLK; r++) {
            float *s = S + (size_t)r * BLK;
            /* the row's four vectors of scores; masked keys weigh exactly 0 (and
             * are not read: on the diagonal some were never computed) */
            const __mmask64 seen = see == TT_SEE_ALL ? ~(__mmask64)0 : vis_mask(vis[r]);
            __m512 x[4], e[4], mx = _mm512_set1_ps(-INFINITY);
            for (int v = 0; v < 4; v++) {
                x[v] = _mm512_maskz_loadu_ps((__mmask16)(seen >> 16 * v), s + 16 * v);
                mx = _mm512_mask_max_ps(mx, (__mmask16)(seen >> 16 * v), mx, x[v]);
            }
            const float bm = _mm512_reduce_max_ps(mx);
            if (bm == -INFINITY) { /* this row sees none of these keys */
                for (int v = 0; v < 4; v++) e[v] = _mm512_setzero_ps();
            } else {
                if (bm > m[r]) { /* a new running max: rescale what was summed so far */
                    const __m512 corr = _mm512_set1_ps(tt_expf((m[r] - bm) * sc));
                    float *orow = O + (size_t)r * hd;
                    l[r] = _mm512_mul_ps(l[r], corr);
                    for (int d = 0; d < hd; d += 16)
                        _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), corr));
                    m[r] = bm;
                }
                /* e = exp((x - m) sc), as x sc - m sc */
                const __m512 msc = _mm512_set1_ps(m[r] * sc), scv = _mm512_set1_ps(sc);
                for (int v = 0; v < 4; v++) {
                    e[v] = softmax_exp(ku, (__mmask16)(seen >> 16 * v), _mm512_fmsub_ps(x[v], scv, msc));
                    l[r] = _mm512_add_ps(l[r], e[v]);
                }
            }
            if (ku == 2) { /* P as bf16, pairs along the keys */
                uint16_t *pr = (uint16_t *)P + (size_t)r * BLK;
                _mm512_storeu_si512(pr, bf16x32(e[0], e[1]));
                _mm512_storeu_si512(pr + 32, bf16x32(e[2], e[3]));
            } else {
                for (int v = 0; v < 4; v++) _mm512_storeu_ps(s + 16 * v, e[v]);
            }
        }
        /* O (64, hd) += P V */
        prod_over_keys(w, diag, hd, ku == 2 ? P : S, blk_at(w, u->v_bi, 0, jb), O, hd);
    }
    for (int r = 0; r < nq; r++) {
        const size_t n = (size_t)b * a->T + i0 + r;
        float *lse = a->lse + ((size_t)b * a->H + h) * a->T + i0 + r, *orow = O + (size_t)r * hd;
        const float lr = _mm512_reduce_add_ps(l[r]);
        const float inv = lr > 0 ? 1.0f / lr : 0.0f; /* a row that saw no key gets o = 0 */
        for (int d = 0; d < hd; d++) orow[d] *= inv;
        *lse = lr > 0 ? m[r] * sc + logf(lr) : -INFINITY;
        tt_cpu_from_f32((char *)a->o + (n * (size_t)a->ldo + (size_t)h * hd) * w->esrc, a->dt, orow,
                        (size_t)hd);
    }
}

/* Query blocks [lo, hi) of every query head of kv head kh: their keys and
 * values are packed first, into this thread's buffers, so that every operand
 * the products read stays in this core's caches. */
TGT static void fwd_chunk(const ws_t *w, const tt_attn_rope *rt, int b, int kh, int lo, int hi, const fwd_bufs *u)
{
    const tt_attn *a = w->a;
    for (int jb = tt_attn_first_key(a, lo * BLK) / BLK; jb < hi; jb++) { /* the key blocks the chunk's queries may see */
        pack_block(w, rt, a->k, a->ldk, b, kh, jb, 1, NULL, blk_at(w, u->k_bt, 0, jb), NULL, NULL, u->X);
        pack_block(w, rt, a->v, a->ldv, b, kh, jb, 0, NULL, NULL, blk_at(w, u->v_bi, 0, jb), NULL, u->X);
    }
    for (int g = 0; g < w->group; g++)
        for (int ib = lo; ib < hi; ib++) fwd_task(w, rt, b, kh * w->group + g, ib, u);
}

/* ---- workspace ----------------------------------------------------------------- */

/* The call's shapes and choices. */
static void ws_init(ws_t *w, const tt_attn *a)
{
    memset(w, 0, sizeof *w);
    w->a = a;
    w->amx = a->dt == TT_BF16 && tt_amx_usable();
    /* bf16 as pairs for vdpbf16ps or AMX tiles, or, where FMAs outrun
     * vdpbf16ps (tt_bf16_dot_preferred), widened to fp32 by the packing */
    w->ku = a->dt == TT_BF16 && (w->amx || tt_bf16_dot_preferred()) ? 2 : 1;
    w->es = w->ku == 2 ? 2 : 4;
    w->esrc = tt_dtype_size(a->dt);
    w->nblk = (a->T + BLK - 1) / BLK;
    w->group = a->H / a->Hk;
    w->blk_elems = (size_t)BLK * a->hd;
    w->scale = (float)tt_attn_scale(a);
    w->softcap = (float)a->softcap;
}

/* The entry points are compiled for any x86-64 and check the CPU before calling the AVX-512 code:
 * a function compiled for AVX-512 may use its instructions before its first line (an unoptimised or
 * sanitizer build zeroes its locals with them), so it must never run on a CPU without. */
__attribute__((noinline)) TGT static tt_err fwd_avx512(const tt_attn *a)
{
    ws_t w;
    tt_attn_rope rt;
    const int rr = tt_attn_rope_init(a, &rt);
    if (rr) return rr;
    ws_init(&w, a);
    /* a task: a chunk of the query blocks of one (batch, kv head), all its query
     * heads. Whole sequences where there are enough of them to share out; else
     * chunks, each packing the keys and values it reads again */
    const int kvs = a->B * a->Hk, chunks = tt_attn_fwd_chunks(a, w.nblk);
    const long tasks = (long)kvs * chunks;
    tt_err rc = 0;
    #pragma omp parallel
    {
        /* per thread: O (64, hd) fp32, S (64, 64) fp32, P (64, 64) bf16, the query block, the keys and
         * values, pack scratch */
        const size_t ob = (size_t)BLK * a->hd * sizeof(float), sb = (size_t)BLK * BLK * sizeof(float);
        const size_t pb = (size_t)BLK * BLK * 2, qb = w.blk_elems * w.es, kb = (size_t)w.nblk * qb;
        const size_t xb = (size_t)BLK * a->hd * (sizeof(float) + 4);
        char *tb = tt_cpu_scratch(TT_SCRATCH_ATTN, ob + sb + pb + qb + 2 * kb + xb), *p = tb;
        fwd_bufs u = {0};
        if (!tb) {
            #pragma omp atomic write
            rc = -1;
        } else {
            u.O = (float *)take(&p, ob), u.S = (float *)take(&p, sb), u.P = take(&p, pb), u.Q = take(&p, qb);
            u.k_bt = take(&p, kb), u.v_bi = take(&p, kb), u.X = (float *)take(&p, xb);
        }
        if (w.amx) tt_amx_tiles_16x64();
        /* tasks are independent, so a dynamic schedule (which evens out the causal
         * triangle's chunks, the later ones first) still gives the same bits on every run */
        #pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < tasks; t++) {
            if (!tb) continue;
            const int c = chunks - 1 - (int)(t / kvs), kh = (int)(t % kvs % a->Hk), b = (int)(t % kvs / a->Hk);
            fwd_chunk(&w, &rt, b, kh, (int)((long)c * w.nblk / chunks), (int)((long)(c + 1) * w.nblk / chunks), &u);
        }
        if (w.amx) tt_amx_release();
    }
    return rc;
}

/* ---- backward ------------------------------------------------------------------- */

/* D[t] = dout . o for every row t of head h of batch b: the softmax backward's
 * row term. o's rows are read here first (tt_attn_row asks for those ahead). */
TGT static void row_dots(const ws_t *w, int b, int h, float *D)
{
    const tt_attn *a = w->a;
    const int hd = a->hd, bf = a->dt == TT_BF16; /* hd: a multiple of 16 */
    const size_t es = w->esrc;
    for (int t = 0; t < a->T; t++) {
        const char *x = tt_attn_row(a, a->dout, a->lddo, b, h, t, es);
        const char *y = tt_attn_row(a, a->o, a->ldo, b, h, t, es);
        __m512 s = _mm512_setzero_ps();
        for (int d = 0; d < hd; d += 16) {
            const __m512 xv = bf ? bf16_widen(_mm256_loadu_si256((const __m256i *)((const uint16_t *)x + d)))
                                 : _mm512_loadu_ps((const float *)x + d);
            const __m512 yv = bf ? bf16_widen(_mm256_loadu_si256((const __m256i *)((const uint16_t *)y + d)))
                                 : _mm512_loadu_ps((const float *)y + d);
            s = _mm512_fmadd_ps(xv, yv, s);
        }
        D[t] = _mm512_reduce_add_ps(s);
    }
}

/* Row t of a gradient of head hh: fp32 x (hd) to the strided destination,
 * rotated back (the transpose of RoPE) when rope. The rows are stored a whole
 * row of heads apart, in order: the one PF_ROWS ahead is fetched for writing
 * meanwhile, so the store does not wait for its line. */
TGT_PFW static void store_grad_row(const ws_t *w, const tt_attn_rope *rt, void *dst, long ld, int hh, int b, int t, float *x,
                                   int rope)
{
    const tt_attn *a = w->a;
    const size_t n = (size_t)b * a->T + t, es = w->esrc;
    if (rope && a->pos) rope_row(rt, a->pos[n], a->hd / 2, x, -1);
    char *row = (char *)dst + (n * (size_t)ld + (size_t)hh * a->hd) * es;
    if (t + PF_ROWS < a->T)
        for (size_t o = 0; o < (size_t)a->hd * es; o += 64) __builtin_prefetch(row + PF_ROWS * ld * es + o, 1, 3);
    if (a->dt == TT_BF16)
        for (int d = 0; d < a->hd; d += 16) _mm256_storeu_si256((__m256i *)((uint16_t *)row + d), bf16x16(_mm512_loadu_ps(x + d)));
    else
        memcpy(row, x, (size_t)a->hd * sizeof(float));
}

/* Per-thread buffers of the backward. A task packs every operand it reads
 * itself (no other task reads them), so they stay in this core's caches. */
typedef struct {
    void *q_r, *q_at, *do_r, *do_at; /* the group's query heads: [g][block], AT only for bf16 pairs */
    void *k_bt, *k_bi, *v_bt;        /* the kv head: [block] */
    float *D;                        /* (group, T): rowsum(dout * o) */
    float *X;                        /* pack_block's scratch */
    float *S, *dP;        /* (64, 64): scores then P; dP then dS (S and dP are adjacent) */
    void *P_i, *dS_i, *dS_r; /* bf16 layouts of P and dS (pairs along queries, along keys) */
    float *dK, *dV;       /* the key block's dk, dv: (64, hd) rows in fp32, (hd, 64) transposed for bf16 pairs */
    float *dQ;            /* (group, T rounded to 64, hd) */
} bwd_bufs;

/* One vector of 16 keys of a tile row: P = exp(s sc - lr) and dS = P (dp - dr) sc
 * (lrv, drv, scv: lr, dr and sc in every lane). Keys clear in m weigh exactly
 * 0 and are not read: on the diagonal some were never computed. */
TGT AI void probs16(int ku, __mmask16 m, const float *s, const float *dp, __m512 lrv, __m512 drv, __m512 scv, __m512 *p,
                    __m512 *ds)
{
    *p = softmax_exp(ku, m, _mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, s), scv, lrv));
    *ds = _mm512_mul_ps(_mm512_mul_ps(*p, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dp), drv)), scv);
}

/* A tile's P = exp(S sc - L) and dS = P (dP - D) sc (under a soft-cap, P of
 * the capped scores, and dS times the cap's derivative 1 - tanh^2 too), in
 * place of S and dP in fp32; with bf16 pairs (ku 2) then also as the layouts
 * the products read: P and dS as pairs along the queries (rows 2r2 and
 * 2r2 + 1 in one word), dS along the keys. L and Dr: the tile's rows' lse and
 * rowsum(dout o). */
TGT static void bwd_probs_f32(const ws_t *w, int see, unsigned char vis[BLK][BLK], int nq, const float *L,
                              const float *Dr, const bwd_bufs *u)
{
    const float sc = w->scale;
    for (int r = 0; r < BLK; r++) {
        float *p = u->S + (size_t)r * BLK, *ds = u->dP + (size_t)r * BLK;
        if (r >= nq || L[r] == -INFINITY) { /* a padding row, or one that sees no key */
            for (int c = 0; c < BLK; c++) p[c] = ds[c] = 0;
            continue;
        }
        const float lr = L[r], dr = Dr[r];
        if (w->softcap > 0) {
            const float cap = w->softcap, inv = sc / cap;
            #pragma omp simd
            for (int c = 0; c < BLK; c++) {
                const int seen = see == TT_SEE_ALL || vis[r][c]; /* unseen entries may never have been computed */
                const float t = seen ? tt_tanhf(p[c] * inv) : 0.0f;
                p[c] = seen ? tt_expf(cap * t - lr) : 0.0f;
                ds[c] = seen ? p[c] * (ds[c] - dr) * sc * (1.0f - t * t) : 0.0f;
            }
            continue;
        }
        const __mmask64 seen = see == TT_SEE_ALL ? ~(__mmask64)0 : vis_mask(vis[r]);
        const __m512 lrv = _mm512_set1_ps(lr), drv = _mm512_set1_ps(dr), scv = _mm512_set1_ps(sc);
        for (int v = 0; v < 4; v++) {
            __m512 pv, dsv;
            probs16(w->ku, (__mmask16)(seen >> 16 * v), p + 16 * v, ds + 16 * v, lrv, drv, scv, &pv, &dsv);
            _mm512_storeu_ps(p + 16 * v, pv);
            _mm512_storeu_ps(ds + 16 * v, dsv);
        }
    }
    if (w->ku == 1) return;
    uint32_t *pi = u->P_i, *si = u->dS_i;
    uint16_t *sr = u->dS_r;
    for (int r2 = 0; r2 < BLK / 2; r2++)
        for (int c = 0; c < BLK; c += 16) {
            const float *p0 = u->S + (size_t)2 * r2 * BLK + c, *d0 = u->dP + (size_t)2 * r2 * BLK + c;
            _mm512_storeu_si512(pi + (size_t)r2 * BLK + c, bf16_pairs(_mm512_loadu_ps(p0), _mm512_loadu_ps(p0 + BLK)));
            _mm512_storeu_si512(si + (size_t)r2 * BLK + c, bf16_pairs(_mm512_loadu_ps(d0), _mm512_loadu_ps(d0 + BLK)));
        }
    for (int e = 0; e < BLK * BLK; e += 32)
        _mm512_storeu_si512(sr + e, bf16x32(_mm512_loadu_ps(u->dP + e), _mm512_loadu_ps(u->dP + e + 16)));
}

/* The same for bf16 pairs without a soft-cap, two rows at a time from
 * registers straight into the three bf16 layouts: no fp32 P or dS is
 * written back and read again. The bits are bwd_probs_f32's. */
TGT static void bwd_probs_bf16(const ws_t *w, int see, unsigned char vis[BLK][BLK], int nq, const float *L,
                               const float *Dr, const bwd_bufs *u)
{
    const __m512 scv = _mm512_set1_ps(w->scale);
    uint32_t *pi = u->P_i, *si = u->dS_i;
    uint16_t *sr = u->dS_r;
    for (int r2 = 0; r2 < BLK / 2; r2++) {
        __m512 p[2][4], ds[2][4];
        for (int k = 0; k < 2; k++) {
            const int r = 2 * r2 + k;
            const float *s = u->S + (size_t)r * BLK, *dp = u->dP + (size_t)r * BLK;
            if (r >= nq || L[r] == -INFINITY) { /* a padding row, or one that sees no key */
                for (int v = 0; v < 4; v++) p[k][v] = ds[k][v] = _mm512_setzero_ps();
                continue;
            }
            const __mmask64 seen = see == TT_SEE_ALL ? ~(__mmask64)0 : vis_mask(vis[r]);
            const __m512 lrv = _mm512_set1_ps(L[r]), drv = _mm512_set1_ps(Dr[r]);
            for (int v = 0; v < 4; v++)
                probs16(2, (__mmask16)(seen >> 16 * v), s + 16 * v, dp + 16 * v, lrv, drv, scv, &p[k][v], &ds[k][v]);
        }
        for (int v = 0; v < 4; v++) {
            _mm512_storeu_si512(pi + (size_t)r2 * BLK + 16 * v, bf16_pairs(p[0][v], p[1][v]));
            _mm512_storeu_si512(si + (size_t)r2 * BLK + 16 * v, bf16_pairs(ds[0][v], ds[1][v]));
        }
        for (int k = 0; k < 2; k++) {
            uint16_t *row = sr + (size_t)(2 * r2 + k) * BLK;
            _mm512_storeu_si512(row, bf16x32(ds[k][0], ds[k][1]));
            _mm512_storeu_si512(row + 32, bf16x32(ds[k][2], ds[k][3]));
        }
    }
}

/* One (batch, kv head): dk, dv of its keys, and dq of the query heads that
 * share it, so no other task writes what it writes. Key blocks are the outer
 * loop, so their dk/dv accumulators stay in cache while the query blocks
 * that see them pass. Per tile, with P = exp(S - lse) and D = rowsum(dO o):
 * dP = dO V^T, dS = P (dP - D) scale, dV += P^T dO, dK += dS^T Q, dQ += dS K. */
TGT static void bwd_task(const ws_t *w, const tt_attn_rope *rt, int b, int kh, const bwd_bufs *u)
{
    const tt_attn *a = w->a;
    const int hd = a->hd, ku = w->ku, T = a->T, G = w->group, Tp = w->nblk * BLK;
    unsigned char vis[BLK][BLK];
    for (int blk = 0; blk < w->nblk; blk++) {
        pack_block(w, rt, a->k, a->ldk, b, kh, blk, 1, NULL, blk_at(w, u->k_bt, 0, blk), blk_at(w, u->k_bi, 0, blk), NULL, u->X);
        pack_block(w, rt, a->v, a->ldv, b, kh, blk, 0, NULL, blk_at(w, u->v_bt, 0, blk), NULL, NULL, u->X);
        for (int g = 0; g < G; g++) {
            const int h = kh * G + g;
            pack_block(w, rt, a->q, a->ldq, b, h, blk, 1, blk_at(w, u->q_r, g, blk), NULL, NULL,
                       u->q_at ? blk_at(w, u->q_at, g, blk) : NULL, u->X);
            pack_block(w, rt, a->dout, a->lddo, b, h, blk, 0, blk_at(w, u->do_r, g, blk), NULL, NULL,
                       u->do_at ? blk_at(w, u->do_at, g, blk) : NULL, u->X);
        }
    }
    for (int g = 0; g < G; g++) row_dots(w, b, kh * G + g, u->D + (size_t)g * T);
    memset(u->dQ, 0, (size_t)G * Tp * hd * sizeof(float));
    for (int jb = 0; jb < w->nblk; jb++) {
        const int j0 = jb * BLK, nj = T - j0 < BLK ? T - j0 : BLK;
        memset(u->dK, 0, (size_t)hd * BLK * sizeof(float));
        memset(u->dV, 0, (size_t)hd * BLK * sizeof(float));
        /* queries before j0 see none of these keys, nor those past the window */
        const int ihi = tt_attn_last_query(a, j0, nj);
        for (int g = 0; g < G; g++) {
            const int h = kh * G + g;
            for (int ib = jb; ib <= ihi / BLK; ib++) {
                const int i0 = ib * BLK, nq = T - i0 < BLK ? T - i0 : BLK, diag = ib == jb;
                const int see = tt_attn_tile_vis(a, b, i0, nq, j0, nj, vis);
                if (see == TT_SEE_NONE) continue;
                const float *L = a->lse + ((size_t)b * a->H + h) * T + i0, *Dr = u->D + (size_t)g * T + i0;
                prod_scores(w, diag, hd / ku, blk_at(w, u->q_r, g, ib), hd / ku, blk_at(w, u->k_bt, 0, jb), u->S);
                prod_scores(w, diag, hd / ku, blk_at(w, u->do_r, g, ib), hd / ku, blk_at(w, u->v_bt, 0, jb), u->dP);
                const void *P_i = u->S, *dS_i = u->dP, *dS_r = u->dP; /* fp32: row-major serves all three */
                if (ku == 2 && !(w->softcap > 0)) bwd_probs_bf16(w, see, vis, nq, L, Dr, u);
                else bwd_probs_f32(w, see, vis, nq, L, Dr, u);
                if (ku == 2) P_i = u->P_i, dS_i = u->dS_i, dS_r = u->dS_r;
                /* dV += P^T dO;  dK += dS^T Q;  dQ (64, hd) += dS K */
                prod_key_grad(w, diag, P_i, blk_at(w, ku == 1 ? u->do_r : u->do_at, g, ib), u->dV);
                prod_key_grad(w, diag, dS_i, blk_at(w, ku == 1 ? u->q_r : u->q_at, g, ib), u->dK);
                prod_over_keys(w, diag, hd, dS_r, blk_at(w, u->k_bi, 0, jb), u->dQ + ((size_t)g * Tp + i0) * hd, hd);
            }
        }
        /* the key block's dk and dv rows; bf16 pairs summed them transposed: back into the (spent) score tiles */
        float *dk = u->dK, *dv = u->dV;
        if (ku == 2) {
            dk = u->S, dv = u->S + (size_t)BLK * hd;
            transpose_words((const uint32_t *)u->dK, BLK, hd, BLK, (uint32_t *)dk, hd);
            transpose_words((const uint32_t *)u->dV, BLK, hd, BLK, (uint32_t *)dv, hd);
        }
        for (int c = 0; c < nj; c++) {
            store_grad_row(w, rt, a->dk, a->lddk, kh, b, j0 + c, dk + (size_t)c * hd, 1);
            store_grad_row(w, rt, a->dv, a->lddv, kh, b, j0 + c, dv + (size_t)c * hd, 0);
        }
    }
    for (int g = 0; g < G; g++)
        for (int t = 0; t < T; t++) store_grad_row(w, rt, a->dq, a->lddq, kh * G + g, b, t, u->dQ + ((size_t)g * Tp + t) * hd, 1);
}

__attribute__((noinline)) TGT static tt_err bwd_avx512(const tt_attn *a)
{
    ws_t w;
    tt_attn_rope rt;
    const int rr = tt_attn_rope_init(a, &rt);
    if (rr) return rr;
    ws_init(&w, a);
    const int tasks = a->B * a->Hk, hd = a->hd, Tp = w.nblk * BLK, G = w.group;
    /* fp32 reads P and dS transposed for dv and dk (prod_key_grad), with dout and q as rows; bf16 pairs
     * must lie along the sum, so there dout and q are transposed instead (AT) */
    const int at = w.ku == 2;
    tt_err rc = 0;
    #pragma omp parallel
    {
        /* S and dP hold (64, 64) floats, and the dk, dv rows of a key block at the end: (64, hd) each */
        const size_t th = (size_t)hd * BLK * sizeof(float);
        const size_t t64 = th > (size_t)BLK * BLK * sizeof(float) ? th : (size_t)BLK * BLK * sizeof(float);
        const size_t tq = (size_t)G * Tp * hd * sizeof(float);
        const size_t lay = (size_t)w.nblk * w.blk_elems * w.es; /* one packed layout of one head: a multiple of 64 bytes */
        const size_t nlay = 3 + (size_t)G * (at ? 4 : 2), td = ((size_t)G * a->T * sizeof(float) + 63) & ~(size_t)63;
        const size_t tx = (size_t)BLK * hd * (sizeof(float) + 4);
        /* taken at a thread's first task: a thread the tasks do not reach (fewer
         * (batch, kv head) pairs than threads) holds none of it */
        char *tb = NULL;
        int bad = 0;
        bwd_bufs u = {0};
        if (w.amx) tt_amx_tiles_16x64();
        #pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tasks; t++) {
            if (!tb && !bad) {
                if (!(tb = tt_cpu_scratch(TT_SCRATCH_ATTN, 5 * t64 + 2 * th + tq + nlay * lay + td + tx))) {
                    bad = 1;
                    #pragma omp atomic write
                    rc = -1;
                    continue;
                }
                char *p = tb;
                u.S = (float *)take(&p, t64), u.dP = (float *)take(&p, t64); /* adjacent, as bwd_bufs says */
                u.P_i = take(&p, t64), u.dS_i = take(&p, t64), u.dS_r = take(&p, t64);
                u.dK = (float *)take(&p, th), u.dV = (float *)take(&p, th), u.dQ = (float *)take(&p, tq);
                u.k_bt = take(&p, lay), u.k_bi = take(&p, lay), u.v_bt = take(&p, lay);
                u.q_r = take(&p, G * lay), u.do_r = take(&p, G * lay);
                if (at) u.q_at = take(&p, G * lay), u.do_at = take(&p, G * lay);
                u.D = (float *)take(&p, td), u.X = (float *)take(&p, tx);
            }
            if (tb) bwd_task(&w, &rt, t / a->Hk, t % a->Hk, &u);
        }
        if (w.amx) tt_amx_release();
    }
    return rc;
}

tt_err tt_attention_fwd_avx512(const tt_attn *a) { return a->hd % 16 || a->hd > 512 || !cpu_ok(a->dt) ? 1 : fwd_avx512(a); }
tt_err tt_attention_bwd_avx512(const tt_attn *a) { return a->hd % 16 || a->hd > 512 || !cpu_ok(a->dt) ? 1 : bwd_avx512(a); }

#else /* not x86-64 with GNU C */
tt_err tt_attention_fwd_avx512(const tt_attn *a) { (void)a; return 1; }
tt_err tt_attention_bwd_avx512(const tt_attn *a) { (void)a; return 1; }
#endif

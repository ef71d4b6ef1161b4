/* attention_avx2.c — flash attention for CPUs with AVX2 and FMA, forward and
 * backward: the path of the CPUs without AVX-512 (many laptops, Zen 3 and
 * older servers), or of any CPU when TITAN_ATTENTION=avx2 asks. Products and
 * softmax are fp32; bf16 tensors are widened as their rows are packed and
 * rounded as the results are stored.
 *
 * The algorithm is attention_avx512.c's on fp32 values: 64 x 64 tiles of
 * (queries, keys). The forward keeps, per 64-query block, the running row
 * max and sum of an online softmax and an fp32 output accumulator, and saves
 * only the logsumexp; the backward recomputes each tile's probabilities from
 * it. Causal tiles above the diagonal are never visited, on the diagonal the
 * quarter no query sees is not computed, and tiles that see nothing (other
 * documents, outside the window) cost a mask scan (attention_flash.c).
 * Soft-capped scores (Gemma 2) are capped before the softmax and the cap's
 * derivative is taken in the backward.
 *
 * Every product of a tile is tile_mm: C (M x n) (+)= A B, in register tiles
 * of up to 6 rows by 16 columns (12 of the 16 ymm registers accumulate, two
 * hold B's step, one A's broadcast), A read as it lies or transposed (P^T
 * and dS^T for dv and dk), B as vectors. For it, each task first copies the
 * q, k, v (and dout) rows it reads into fp32 blocks of 64 rows in its
 * thread's buffers, RoPE applied to q and k: so each element is converted
 * and rotated once per task, not once per tile, and GQA shares the kv heads
 * without a copy per query head. Two layouts of a block X (t = row, d =
 * feature):
 *   rows [t][d]   A of S = q k^T and dP = dout v^T; B of O += P v,
 *                 dq += dS k, dv += P^T dout and dk += dS^T q
 *   cols [d][t]   B of S = q k^T and dP = dout v^T
 * A task is one (batch, kv head) with all its query heads: the backward's
 * whole sequence, the forward's too unless there are too few such pairs to
 * share out among the threads (tt_attn_fwd_chunks).
 *
 * The other loops (softmax, RoPE, conversions) are plain C, vectorised for
 * AVX2 by the functions' target, but for the softmax's row max. */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define TGT __attribute__((target("avx2,fma")))
#define AI static inline __attribute__((always_inline))

#define BLK TT_ATTN_BLK
#define HALF (BLK / 2)

static int cpu_ok(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* ---- the tile product ------------------------------------------------------ */

/* C (R x 8NV floats, row stride ldc) = (acc: +=) sum over s < ks of A[r][s] B[s]:
 * A[r][s] is at a + r*lda + s (TA 0: A as it lies) or at a + s*lda + r (TA 1:
 * A transposed); B's step s at b + s*ldb (8NV floats used). */
TGT AI void mm_body(const int R, const int NV, const int TA, int ks, const float *a, long lda, const float *b,
                    long ldb, float *c, long ldc, int acc)
{
    __m256 x[6][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) x[r][v] = acc ? _mm256_loadu_ps(c + r * ldc + 8 * v) : _mm256_setzero_ps();
    const long ra = TA ? 1 : lda, sa = TA ? lda : 1; /* A's strides between rows and between steps */
    for (int s = 0; s < ks; s++) {
        __m256 bv[2];
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) bv[v] = _mm256_loadu_ps(b + (size_t)s * ldb + 8 * v);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m256 ar = _mm256_broadcast_ss(a + r * ra + s * sa);
#pragma GCC unroll 2
            for (int v = 0; v < NV; v++) x[r][v] = _mm256_fmadd_ps(ar, bv[v], x[r][v]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(c + r * ldc + 8 * v, x[r][v]);
}

typedef void mm_fn(int ks, const float *a, long lda, const float *b, long ldb, float *c, long ldc, int acc);
#define MM(R, NV, TA)                                                                                          \
    TGT static void mm_##R##_##NV##_##TA(int ks, const float *a, long lda, const float *b, long ldb, float *c, \
                                         long ldc, int acc)                                                   \
    {                                                                                                          \
        mm_body(R, NV, TA, ks, a, lda, b, ldb, c, ldc, acc);                                                   \
    }
#define MM_R6(NV, TA) MM(1, NV, TA) MM(2, NV, TA) MM(3, NV, TA) MM(4, NV, TA) MM(5, NV, TA) MM(6, NV, TA)
MM_R6(1, 0)
MM_R6(2, 0)
MM_R6(1, 1)
MM_R6(2, 1)
#define ROW6(NV, TA)                                                                                           \
    {mm_1_##NV##_##TA, mm_2_##NV##_##TA, mm_3_##NV##_##TA, mm_4_##NV##_##TA, mm_5_##NV##_##TA, mm_6_##NV##_##TA}
/* [TA][NV-1][R-1] */
static mm_fn *const mm_table[2][2][6] = {{ROW6(1, 0), ROW6(2, 0)}, {ROW6(1, 1), ROW6(2, 1)}};

/* C (M x n) (+)= A (M x ks) B (ks x n), n a multiple of 8: columns in chunks
 * of 16 (the last may be 8), rows in register tiles of at most 6, evened out
 * (64 rows as 6 x 9 and 5 x 2, not 6 x 10 and 4: a short tile reloads B for
 * few FMAs). lda: A's row stride, or its step stride when ta; ldb: B's step
 * stride; ldc: C's row stride (floats). */
static void tile_mm(int ta, int M, int n, int ks, const float *a, long lda, const float *b, long ldb, float *c,
                    long ldc, int acc)
{
    const int ng = (M + 5) / 6, big = M % ng;
    for (int c0 = 0; c0 < n; c0 += 16) {
        const int nv = n - c0 >= 16 ? 2 : 1;
        for (int gi = 0, r0 = 0; gi < ng; gi++) {
            const int R = M / ng + (gi < big);
            mm_table[ta][nv - 1][R - 1](ks, a + (size_t)r0 * (ta ? 1 : lda), lda, b + c0, ldb,
                                        c + (size_t)r0 * ldc + c0, ldc, acc);
            r0 += R;
        }
    }
}

/* On a causal tile of the diagonal (queries and keys from the same 64
 * positions), queries [0, 32) see keys [0, 32) at most: the three products
 * below leave out that quarter there (diag). */

/* S (64 queries, 64 keys) = X Y^T over the head dim: X the query side's rows
 * (q or dout), Y^T the key side's cols block (k or v). On the diagonal, rows
 * [0, 32) get columns [0, 32) only; the rest of those rows is left as it
 * was, for the masked reads that follow. */
static void prod_scores(int diag, int hd, const float *x, const float *yt, float *s)
{
    if (!diag) {
        tile_mm(0, BLK, BLK, hd, x, hd, yt, BLK, s, BLK, 0);
        return;
    }
    tile_mm(0, HALF, HALF, hd, x, hd, yt, BLK, s, BLK, 0);
    tile_mm(0, HALF, BLK, hd, x + (size_t)HALF * hd, hd, yt, BLK, s + HALF * BLK, BLK, 0);
}

/* C (64 queries, hd) += M Y over the tile's keys: M (P or dS) the tile,
 * Y (v or k) rows of the keys. On the diagonal, rows [0, 32) sum over keys
 * [0, 32) only. */
static void prod_over_keys(int diag, int hd, const float *m, const float *y, float *c, long ldc)
{
    if (!diag) {
        tile_mm(0, BLK, hd, BLK, m, BLK, y, hd, c, ldc, 1);
        return;
    }
    tile_mm(0, HALF, hd, HALF, m, BLK, y, hd, c, ldc, 1);
    tile_mm(0, HALF, hd, BLK, m + HALF * BLK, BLK, y, hd, c + (size_t)HALF * ldc, ldc, 1);
}

/* dX (64 keys, hd) += M^T Y over the tile's queries: M (64 queries, 64 keys)
 * is P (for dv) or dS (for dk), read transposed as it lies; Y (dout or q)
 * rows of the queries. On the diagonal, keys [32, 64) sum over queries
 * [32, 64) only. */
static void prod_key_grad(int diag, int hd, const float *m, const float *y, float *dx)
{
    tile_mm(1, diag ? HALF : BLK, hd, BLK, m, BLK, y, hd, dx, hd, 1);
    if (diag)
        tile_mm(1, HALF, hd, HALF, m + HALF * BLK + HALF, BLK, y + (size_t)HALF * hd, hd, dx + (size_t)HALF * hd, hd,
                1);
}

/* ---- packing -------------------------------------------------------------------- */

/* RoPE on one row x (2 half) at position pos, in place: dir 1 rotates, dir -1
 * rotates back (the transpose, for gradients). Pairs (i, i + half). */
TGT static void rope_row(const tt_attn_rope *rt, int pos, int half, float *x, int dir)
{
    const size_t tr = (size_t)(pos - rt->lo) * half; /* the position's table row */
    const float *c = rt->cos + tr, *sn = rt->sin + tr, sg = dir > 0 ? 1.0f : -1.0f;
    #pragma omp simd
    for (int i = 0; i < half; i++) {
        const float x1 = x[i], x2 = x[half + i], s = sg * sn[i];
        x[i] = x1 * c[i] - x2 * s;
        x[half + i] = x1 * s + x2 * c[i];
    }
}

/* cols (hd, 64) = rows (64, hd) transposed, 8 x 8 floats at a time */
TGT static void transpose_block(const float *rows, int hd, float *cols)
{
    for (int t0 = 0; t0 < BLK; t0 += 8)
        for (int d0 = 0; d0 < hd; d0 += 8) {
            __m256 r[8], u[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(rows + (size_t)(t0 + i) * hd + d0);
            for (int i = 0; i < 8; i += 2) {
                u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            /* u: (0,1) pairs lo/hi, (2,3), (4,5), (6,7); now groups of four rows */
            for (int i = 0; i < 8; i += 4) {
                const __m256 a = u[i], b = u[i + 1], c = u[i + 2], d = u[i + 3];
                r[i] = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 1] = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2));
                r[i + 2] = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 3] = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2));
            }
            /* r[0..3]: features d0 + {0, 1, 2, 3} (+4 in the high lanes) of rows t0..t0+3; r[4..7] of rows t0+4.. */
            for (int i = 0; i < 4; i++) {
                _mm256_storeu_ps(cols + (size_t)(d0 + i) * BLK + t0, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
                _mm256_storeu_ps(cols + (size_t)(d0 + 4 + i) * BLK + t0, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
            }
        }
}

/* Rows [t0, t0 + 64) of head hh of batch b from the strided source: into
 * rows (64, hd) as fp32, RoPE'd when rope, and transposed into cols (hd,
 * 64) unless cols is NULL; rows past T are zero. */
TGT static void pack_block(const tt_attn *a, const tt_attn_rope *rt, const void *src, long ld, int b, int hh, int blk,
                           int rope, float *rows, float *cols)
{
    const int hd = a->hd, t0 = blk * BLK, nt = a->T - t0 < BLK ? a->T - t0 : BLK;
    const size_t es = tt_dtype_size(a->dt);
    for (int tl = 0; tl < BLK; tl++) {
        float *x = rows + (size_t)tl * hd;
        if (tl >= nt) {
            memset(x, 0, (size_t)hd * sizeof(float));
            continue;
        }
        tt_cpu_to_f32(x, tt_attn_row(a, src, ld, b, hh, t0 + tl, es), a->dt, (size_t)hd);
        if (rope && a->pos) rope_row(rt, a->pos[(size_t)b * a->T + t0 + tl], hd / 2, x, 1);
    }
    if (cols) transpose_block(rows, hd, cols);
}

/* ---- forward ------------------------------------------------------------------- */

/* Per-thread buffers of the forward. */
typedef struct {
    float *O, *S, *Q;      /* (64, hd) output accumulator, (64, 64) scores, the query block's rows */
    float *k_cols, *v_rows; /* the kv head's keys (cols) and values (rows): [block] */
} fwd_bufs;

/* One row of a tile's scores s (64 keys; seen[c] says which count, or all
 * when seen is NULL: inlined, that case has no masking left): the online
 * softmax's step. Its running max m and sum l (of exp((s - m) sc)) and its
 * output row o (hd) are rescaled when the max grows; s becomes the row's
 * weights exp((s - m) sc), 0 where unseen. */
TGT AI void softmax_row(float *s, const unsigned char *seen, float sc, float *m, float *l, float *o, int hd)
{
    /* the row's max over the seen keys: eight running maxima, then across them (intrinsics: a max reduction
     * is not one every compiler vectorises) */
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    for (int c = 0; c < BLK; c += 8) {
        __m256 x = _mm256_loadu_ps(s + c);
        if (seen) { /* unseen keys as -inf: their scores may never have been computed */
            const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(seen + c)));
            x = _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(v, _mm256_setzero_si256())));
        }
        mx = _mm256_max_ps(mx, x);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float bm = _mm_cvtss_f32(m4);
    if (bm == -INFINITY) { /* this row sees none of these keys */
        memset(s, 0, BLK * sizeof(float));
        return;
    }
    if (bm > *m) { /* a new running max: rescale what was summed so far */
        const float corr = tt_expf((*m - bm) * sc);
        *l *= corr;
        #pragma omp simd
        for (int d = 0; d < hd; d++) o[d] *= corr;
        *m = bm;
    }
    const float msc = *m * sc; /* e = exp((s - m) sc), as s sc - m sc */
    float sum = 0;
    #pragma omp simd reduction(+ : sum)
    for (int c = 0; c < BLK; c++) {
        const float e = !seen || seen[c] ? tt_expf(s[c] * sc - msc) : 0.0f; /* unseen scores may never have been computed */
        s[c] = e;
        sum += e;
    }
    *l += sum;
}

/* One 64-query block of head h: online softmax over the key blocks it sees. */
TGT static void fwd_block(const tt_attn *a, const tt_attn_rope *rt, float sc, int b, int h, int ib, const fwd_bufs *u)
{
    const int hd = a->hd, i0 = ib * BLK, nq = a->T - i0 < BLK ? a->T - i0 : BLK;
    float *O = u->O, *S = u->S, m[BLK], l[BLK];
    unsigned char vis[BLK][BLK];
    pack_block(a, rt, a->q, a->ldq, b, h, ib, 1, u->Q, NULL);
    for (int r = 0; r < BLK; r++) m[r] = -INFINITY, l[r] = 0;
    memset(O, 0, (size_t)BLK * hd * sizeof(float));
    /* keys any row of the block may see: [jlo, jhi] */
    const int jlo = tt_attn_first_key(a, i0), jhi = i0 + nq - 1;
    for (int jb = jlo / BLK; jb <= jhi / BLK; jb++) {
        const int j0 = jb * BLK, nj = a->T - j0 < BLK ? a->T - j0 : BLK;
        const int see = tt_attn_tile_vis(a, b, i0, nq, j0, nj, vis);
        if (see == TT_SEE_NONE) continue;
        const int diag = j0 == i0;
        /* S (64, 64) = Q K^T */
        prod_scores(diag, hd, u->Q, u->k_cols + (size_t)jb * BLK * hd, S);
        if (a->softcap > 0) { /* soft-capped, kept in the unscaled units the rest multiplies by sc */
            const float cs = (float)a->softcap / sc, inv = sc / (float)a->softcap;
            #pragma omp simd
            for (int e = 0; e < BLK * BLK; e++) S[e] = cs * tt_tanhf(S[e] * inv);
        }
        for (int r = 0; r < BLK; r++) {
            float *sr = S + (size_t)r * BLK, *orow = O + (size_t)r * hd;
            if (see == TT_SEE_ALL) softmax_row(sr, NULL, sc, &m[r], &l[r], orow, hd);
            else softmax_row(sr, vis[r], sc, &m[r], &l[r], orow, hd);
        }
        /* O (64, hd) += P V */
        prod_over_keys(diag, hd, S, u->v_rows + (size_t)jb * BLK * hd, O, hd);
    }
    for (int r = 0; r < nq; r++) {
        const size_t n = (size_t)b * a->T + i0 + r;
        float *lse = a->lse + ((size_t)b * a->H + h) * a->T + i0 + r, *orow = O + (size_t)r * hd;
        const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f; /* a row that saw no key gets o = 0 */
        #pragma omp simd
        for (int d = 0; d < hd; d++) orow[d] *= inv;
        *lse = l[r] > 0 ? m[r] * sc + logf(l[r]) : -INFINITY;
        tt_cpu_from_f32((char *)a->o + (n * (size_t)a->ldo + (size_t)h * hd) * tt_dtype_size(a->dt), a->dt, orow,
                        (size_t)hd);
    }
}

/* Query blocks [lo, hi) of every query head of kv head kh: the keys and
 * values they may see are packed first, into this thread's buffers. */
TGT static void fwd_chunk(const tt_attn *a, const tt_attn_rope *rt, float sc, int b, int kh, int lo, int hi,
                          const fwd_bufs *u)
{
    const size_t bs = (size_t)BLK * a->hd; /* floats in a packed block */
    float *x = u->O;                       /* the keys' rows, before their transpose: O is free until fwd_block */
    for (int jb = tt_attn_first_key(a, lo * BLK) / BLK; jb < hi; jb++) {
        pack_block(a, rt, a->k, a->ldk, b, kh, jb, 1, x, u->k_cols + jb * bs);
        pack_block(a, rt, a->v, a->ldv, b, kh, jb, 0, u->v_rows + jb * bs, NULL);
    }
    const int G = a->H / a->Hk;
    for (int g = 0; g < G; g++)
        for (int ib = lo; ib < hi; ib++) fwd_block(a, rt, sc, b, kh * G + g, ib, u);
}

/* The entry points are compiled for any x86-64 and check the CPU before
 * calling these: a function compiled for AVX2 may use its instructions before
 * its first line, so it must never run on a CPU without. */
__attribute__((noinline)) TGT static tt_err fwd_avx2(const tt_attn *a)
{
    tt_attn_rope rt;
    const int rr = tt_attn_rope_init(a, &rt);
    if (rr) return rr;
    const int nblk = (a->T + BLK - 1) / BLK, kvs = a->B * a->Hk, chunks = tt_attn_fwd_chunks(a, nblk);
    const long tasks = (long)kvs * chunks;
    const float sc = (float)tt_attn_scale(a);
    tt_err rc = 0;
    #pragma omp parallel
    {
        /* per thread: O and Q (64, hd), S (64, 64), the kv head's packed keys and values */
        const size_t ob = (size_t)BLK * a->hd * sizeof(float), sb = (size_t)BLK * BLK * sizeof(float);
        const size_t kb = (size_t)nblk * ob;
        char *tb = tt_cpu_scratch(TT_SCRATCH_ATTN, 2 * ob + sb + 2 * kb), *p = tb;
        fwd_bufs u = {0};
        if (!tb) {
            #pragma omp atomic write
            rc = -1;
        } else {
            u.O = (float *)take(&p, ob), u.Q = (float *)take(&p, ob), u.S = (float *)take(&p, sb);
            u.k_cols = (float *)take(&p, kb), u.v_rows = (float *)take(&p, kb);
        }
        /* tasks are independent, so a dynamic schedule (which evens out the causal
         * triangle's chunks, the later ones first) still gives the same bits on every run */
        #pragma omp for schedule(dynamic, 1)
        for (long t = 0; t < tasks; t++) {
            if (!tb) continue;
            const int c = chunks - 1 - (int)(t / kvs), kh = (int)(t % kvs % a->Hk), b = (int)(t % kvs / a->Hk);
            fwd_chunk(a, &rt, sc, b, kh, (int)((long)c * nblk / chunks), (int)((long)(c + 1) * nblk / chunks), &u);
        }
    }
    return rc;
}

/* ---- backward ------------------------------------------------------------------ */

/* D[t] = dout . o for every row t of head h of batch b: the softmax backward's row term. */
TGT static void row_dots(const tt_attn *a, int b, int h, float *D)
{
    const int hd = a->hd;
    const size_t es = tt_dtype_size(a->dt);
    for (int t = 0; t < a->T; t++) {
        const void *x = tt_attn_row(a, a->dout, a->lddo, b, h, t, es), *y = tt_attn_row(a, a->o, a->ldo, b, h, t, es);
        float s = 0;
        if (a->dt == TT_BF16) {
            #pragma omp simd reduction(+ : s)
            for (int d = 0; d < hd; d++) s += tt_ld(x, (size_t)d, 1) * tt_ld(y, (size_t)d, 1);
        } else {
            #pragma omp simd reduction(+ : s)
            for (int d = 0; d < hd; d++) s += tt_ld(x, (size_t)d, 0) * tt_ld(y, (size_t)d, 0);
        }
        D[t] = s;
    }
}

/* Row t of a gradient of head hh: fp32 x (hd) to the strided destination,
 * rotated back (the transpose of RoPE) when rope. */
TGT static void store_grad_row(const tt_attn *a, const tt_attn_rope *rt, void *dst, long ld, int hh, int b, int t,
                               float *x, int rope)
{
    const size_t n = (size_t)b * a->T + t, es = tt_dtype_size(a->dt);
    if (rope && a->pos) rope_row(rt, a->pos[n], a->hd / 2, x, -1);
    tt_cpu_from_f32((char *)dst + (n * (size_t)ld + (size_t)hh * a->hd) * es, a->dt, x, (size_t)a->hd);
}

/* Per-thread buffers of the backward. A task packs every operand it reads
 * itself (no other task reads them), so they stay in this core's caches. */
typedef struct {
    float *q_rows, *do_rows;           /* the group's query heads: [g][block] */
    float *k_cols, *k_rows, *v_cols;   /* the kv head: [block] */
    float *D;                          /* (group, T): rowsum(dout * o) */
    float *S, *dP;                     /* (64, 64): scores then P; dP then dS */
    float *dK, *dV;                    /* the key block's dk, dv: (64, hd) */
    float *dQ;                         /* (group, T rounded to 64, hd) */
} bwd_bufs;

/* One row of a tile: P = exp(s sc - lr) and dS = P (dp - dr) sc in place of
 * s and dp (under a soft-cap, P of the capped scores, and dS times the cap's
 * derivative 1 - tanh^2 too). Unseen entries (seen[c] 0; seen NULL: all are
 * seen) weigh exactly 0: they may never have been computed. */
TGT AI void probs_row(float *p, float *ds, const unsigned char *seen, float sc, float softcap, float lr, float dr)
{
    if (softcap > 0) {
        const float inv = sc / softcap;
        #pragma omp simd
        for (int c = 0; c < BLK; c++) {
            const float t = tt_tanhf(p[c] * inv), e = tt_expf(softcap * t - lr);
            const int ok = !seen || seen[c];
            ds[c] = ok ? e * (ds[c] - dr) * sc * (1.0f - t * t) : 0.0f;
            p[c] = ok ? e : 0.0f;
        }
        return;
    }
    #pragma omp simd
    for (int c = 0; c < BLK; c++) {
        const float e = tt_expf(p[c] * sc - lr);
        const int ok = !seen || seen[c];
        ds[c] = ok ? e * (ds[c] - dr) * sc : 0.0f;
        p[c] = ok ? e : 0.0f;
    }
}

/* A tile's P and dS (probs_row) in place of S and dP. L and Dr: the tile's
 * rows' lse and rowsum(dout o). */
TGT static void bwd_probs(const tt_attn *a, float sc, int see, unsigned char vis[BLK][BLK], int nq, const float *L,
                          const float *Dr, float *S, float *dP)
{
    for (int r = 0; r < BLK; r++) {
        float *p = S + (size_t)r * BLK, *ds = dP + (size_t)r * BLK;
        if (r >= nq || L[r] == -INFINITY) { /* a padding row, or one that sees no key */
            memset(p, 0, BLK * sizeof(float));
            memset(ds, 0, BLK * sizeof(float));
        } else if (see == TT_SEE_ALL) {
            probs_row(p, ds, NULL, sc, (float)a->softcap, L[r], Dr[r]);
        } else {
            probs_row(p, ds, vis[r], sc, (float)a->softcap, L[r], Dr[r]);
        }
    }
}

/* One (batch, kv head): dk, dv of its keys, and dq of the query heads that
 * share it, so no other task writes what it writes. Key blocks are the outer
 * loop, so their dk/dv accumulators stay in cache while the query blocks
 * that see them pass. Per tile, with P = exp(S - lse) and D = rowsum(dO o):
 * dP = dO V^T, dS = P (dP - D) scale, dV += P^T dO, dK += dS^T Q, dQ += dS K. */
TGT static void bwd_task(const tt_attn *a, const tt_attn_rope *rt, float sc, int nblk, int b, int kh,
                         const bwd_bufs *u)
{
    const int hd = a->hd, T = a->T, G = a->H / a->Hk, Tp = nblk * BLK;
    const size_t bs = (size_t)BLK * hd, hs = (size_t)nblk * bs; /* floats in a packed block, in a head's blocks */
    unsigned char vis[BLK][BLK];
    for (int blk = 0; blk < nblk; blk++) {
        const size_t o = blk * bs;
        pack_block(a, rt, a->k, a->ldk, b, kh, blk, 1, u->k_rows + o, u->k_cols + o);
        pack_block(a, rt, a->v, a->ldv, b, kh, blk, 0, u->dV, u->v_cols + o); /* dV: free until the tiles start */
        for (int g = 0; g < G; g++) {
            const int h = kh * G + g;
            pack_block(a, rt, a->q, a->ldq, b, h, blk, 1, u->q_rows + g * hs + o, NULL);
            pack_block(a, rt, a->dout, a->lddo, b, h, blk, 0, u->do_rows + g * hs + o, NULL);
        }
    }
    for (int g = 0; g < G; g++) row_dots(a, b, kh * G + g, u->D + (size_t)g * T);
    memset(u->dQ, 0, (size_t)G * Tp * hd * sizeof(float));
    for (int jb = 0; jb < nblk; jb++) {
        const int j0 = jb * BLK, nj = T - j0 < BLK ? T - j0 : BLK;
        memset(u->dK, 0, bs * sizeof(float));
        memset(u->dV, 0, bs * sizeof(float));
        /* queries before j0 see none of these keys, nor those past the window */
        const int ihi = tt_attn_last_query(a, j0, nj);
        for (int g = 0; g < G; g++) {
            const int h = kh * G + g;
            for (int ib = jb; ib <= ihi / BLK; ib++) {
                const int i0 = ib * BLK, nq = T - i0 < BLK ? T - i0 : BLK, diag = ib == jb;
                const int see = tt_attn_tile_vis(a, b, i0, nq, j0, nj, vis);
                if (see == TT_SEE_NONE) continue;
                const float *L = a->lse + ((size_t)b * a->H + h) * T + i0, *Dr = u->D + (size_t)g * T + i0;
                const float *Q = u->q_rows + g * hs + ib * bs, *dO = u->do_rows + g * hs + ib * bs;
                prod_scores(diag, hd, Q, u->k_cols + jb * bs, u->S);
                prod_scores(diag, hd, dO, u->v_cols + jb * bs, u->dP);
                bwd_probs(a, sc, see, vis, nq, L, Dr, u->S, u->dP);
                /* dV += P^T dO;  dK += dS^T Q;  dQ (64, hd) += dS K */
                prod_key_grad(diag, hd, u->S, dO, u->dV);
                prod_key_grad(diag, hd, u->dP, Q, u->dK);
                prod_over_keys(diag, hd, u->dP, u->k_rows + jb * bs, u->dQ + ((size_t)g * Tp + i0) * hd, hd);
            }
        }
        for (int c = 0; c < nj; c++) {
            store_grad_row(a, rt, a->dk, a->lddk, kh, b, j0 + c, u->dK + (size_t)c * hd, 1);
            store_grad_row(a, rt, a->dv, a->lddv, kh, b, j0 + c, u->dV + (size_t)c * hd, 0);
        }
    }
    for (int g = 0; g < G; g++)
        for (int t = 0; t < T; t++)
            store_grad_row(a, rt, a->dq, a->lddq, kh * G + g, b, t, u->dQ + ((size_t)g * Tp + t) * hd, 1);
}

__attribute__((noinline)) TGT static tt_err bwd_avx2(const tt_attn *a)
{
    tt_attn_rope rt;
    const int rr = tt_attn_rope_init(a, &rt);
    if (rr) return rr;
    const int nblk = (a->T + BLK - 1) / BLK, tasks = a->B * a->Hk, G = a->H / a->Hk;
    const float sc = (float)tt_attn_scale(a);
    tt_err rc = 0;
    #pragma omp parallel
    {
        /* per thread: S, dP (64, 64); dK, dV (64, hd); dQ (G, T rounded to 64, hd); the kv head's keys (rows and
         * cols) and values (cols); the group's q and dout rows; D (G, T) */
        const size_t sb = (size_t)BLK * BLK * sizeof(float), bb = (size_t)BLK * a->hd * sizeof(float);
        const size_t hb = (size_t)nblk * bb, db = ((size_t)G * a->T * sizeof(float) + 63) & ~(size_t)63;
        /* taken at a thread's first task: a thread the tasks do not reach
         * (fewer (batch, kv head) pairs than threads) holds none of it */
        char *tb = NULL;
        int bad = 0;
        bwd_bufs u = {0};
        #pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < tasks; t++) {
            if (!tb && !bad) {
                if (!(tb = tt_cpu_scratch(TT_SCRATCH_ATTN, 2 * sb + 2 * bb + (3 + 3 * (size_t)G) * hb + db))) {
                    bad = 1;
                    #pragma omp atomic write
                    rc = -1;
                    continue;
                }
                char *p = tb;
                u.S = (float *)take(&p, sb), u.dP = (float *)take(&p, sb);
                u.dK = (float *)take(&p, bb), u.dV = (float *)take(&p, bb), u.dQ = (float *)take(&p, G * hb);
                u.k_cols = (float *)take(&p, hb), u.k_rows = (float *)take(&p, hb), u.v_cols = (float *)take(&p, hb);
                u.q_rows = (float *)take(&p, G * hb), u.do_rows = (float *)take(&p, G * hb);
                u.D = (float *)take(&p, db);
            }
            if (tb) bwd_task(a, &rt, sc, nblk, t / a->Hk, t % a->Hk, &u);
        }
    }
    return rc;
}

tt_err tt_attention_fwd_avx2(const tt_attn *a) { return a->hd % 8 || a->hd > 512 || !cpu_ok() ? 1 : fwd_avx2(a); }
tt_err tt_attention_bwd_avx2(const tt_attn *a) { return a->hd % 8 || a->hd > 512 || !cpu_ok() ? 1 : bwd_avx2(a); }

#else /* not x86-64 with GNU C */
tt_err tt_attention_fwd_avx2(const tt_attn *a) { (void)a; return 1; }
tt_err tt_attention_bwd_avx2(const tt_attn *a) { (void)a; return 1; }
#endif

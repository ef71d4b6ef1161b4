/* attention_flash.c — what the flash attention kernels (attention_avx512.c,
 * attention_avx2.c) share and that needs no particular instructions: the
 * RoPE table, which keys a tile's queries see, and how the forward's work is
 * cut into tasks. */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/simd.h"

#define BLK TT_ATTN_BLK

int tt_attn_rope_init(const tt_attn *a, tt_attn_rope *rt)
{
    memset(rt, 0, sizeof *rt);
    if (!a->pos) return 0;
    const int N = a->B * a->T, half = a->hd / 2;
    int lo = a->pos[0], hi = a->pos[0];
    for (int n = 1; n < N; n++) {
        if (a->pos[n] < lo) lo = a->pos[n];
        if (a->pos[n] > hi) hi = a->pos[n];
    }
    const int64_t span = (int64_t)hi - lo + 1;
    if (span > 4 * (int64_t)N + 4096) return 1;
    const size_t cnt = (size_t)span * half;
    rt->cos = tt_cpu_scratch(TT_SCRATCH_ATTN_ROPE, 2 * cnt * sizeof(float));
    if (!rt->cos) return -1;
    rt->sin = rt->cos + cnt;
    rt->lo = lo;
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < span; p++)
        for (int i = 0; i < half; i++) {
            const float ang = (float)(lo + p) * a->inv_freq[i]; /* fp32, as transformers */
            rt->cos[(size_t)p * half + i] = cosf(ang) * a->rope_scale;
            rt->sin[(size_t)p * half + i] = sinf(ang) * a->rope_scale;
        }
    return 0;
}

/* tt_attn_tile_vis, whose loops over a tile's 64 x 64 pairs TT_CLONES
 * vectorises for the CPU it runs on. Static, as every TT_CLONES function:
 * clang 14 emits no symbol for the clones of an external one.
 *
 * Causality, the window and the tile's ragged edges leave each query one
 * range of keys, [lo, hi) of the tile's columns; documents may cut it
 * further. A row is built from its range in byte lanes (64 a vector on
 * AVX-512) and the documents are compared key by key only in a tile whose
 * keys span more than one: on the diagonal tiles of a causal run the 32-bit
 * compares and packs of that loop took a tenth of the attention's time
 * (perf, `titan bench attention`, performance-changes.md). */
TT_CLONES static int tile_vis(const tt_attn *a, int b, int i0, int nq, int j0, int nj, unsigned char vis[BLK][BLK])
{
    const int32_t *db = a->doc ? a->doc + (size_t)b * a->T : NULL;
    const int W = a->window;
    /* whole tile below the diagonal, inside the window, one document (every
     * id of its keys and queries the same: ids need not be sorted), no ragged edge */
    if (nq == BLK && nj == BLK && j0 + nj - 1 <= i0 && (W <= 0 || i0 + nq - 1 - j0 < W)) {
        int one = 1;
        if (db) {
            const int32_t d0 = db[j0];
            #pragma omp simd reduction(& : one)
            for (int c = 0; c < BLK; c++) one &= (db[j0 + c] == d0) & (db[i0 + c] == d0);
        }
        if (one) return TT_SEE_ALL;
    }
    /* do the tile's keys lie in one document (then a query sees its range or nothing)? */
    int keys_one = 1;
    if (db)
        for (int c = 1; c < nj; c++) keys_one &= db[j0 + c] == db[j0];
    int32_t kd[BLK]; /* the keys' documents, for a tile whose keys span several */
    if (!keys_one)
        for (int c = 0; c < BLK; c++) kd[c] = c < nj ? db[j0 + c] : -1;
    int any = 0;
    for (int r = 0; r < BLK; r++) {
        const int i = i0 + r;
        /* keys j0 + c with c in [lo, hi): j <= i, i - j < W, c < nj; none past nq */
        const long first = W > 0 ? (long)i - j0 - W + 1 : 0; /* (long: W may be as large as an int goes) */
        const int lo = first > 0 ? (int)first : 0;
        int hi = i - j0 + 1 < nj ? i - j0 + 1 : nj;
        if (r >= nq || hi < lo) hi = lo;
        if (db && keys_one && hi > lo && db[i] != db[j0]) hi = lo; /* another document */
        /* c in [lo, hi) as one unsigned compare of bytes: c - lo wraps past 255 below lo */
        const unsigned char ulo = (unsigned char)lo, un = (unsigned char)(hi - lo);
        unsigned char *row = vis[r];
        for (int c = 0; c < BLK; c++) row[c] = (unsigned char)((unsigned char)((unsigned char)c - ulo) < un);
        if (keys_one || hi == lo) { /* (a row past nq has hi == lo: its document is not read) */
            any |= hi > lo;
            continue;
        }
        const int32_t qd = db[i];
        int seen = 0;
        #pragma omp simd reduction(| : seen)
        for (int c = 0; c < BLK; c++) {
            const int ok = row[c] & (kd[c] == qd);
            row[c] = (unsigned char)ok;
            seen |= ok;
        }
        any |= seen;
    }
    return any ? TT_SEE_SOME : TT_SEE_NONE;
}

int tt_attn_tile_vis(const tt_attn *a, int b, int i0, int nq, int j0, int nj, unsigned char vis[BLK][BLK])
{
    return tile_vis(a, b, i0, nq, j0, nj, vis);
}

int tt_attn_fwd_chunks(const tt_attn *a, int nblk)
{
    const int kvs = a->B * a->Hk, want = 4 * tt_num_threads();
    return kvs >= want ? 1 : (want + kvs - 1) / kvs < nblk ? (want + kvs - 1) / kvs : nblk;
}

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
 * clang 14 emits no symbol for the clones of an external one. */
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
    int32_t kd[BLK]; /* the keys' documents; -1 past the end (no query has it) */
    for (int c = 0; c < BLK; c++) kd[c] = db && c < nj ? db[j0 + c] : c < nj ? 0 : -1;
    int any = 0;
    for (int r = 0; r < BLK; r++) {
        const int i = i0 + r, qd = r >= nq ? -2 : db ? db[i] : 0;
        int row = 0;
        #pragma omp simd reduction(| : row)
        for (int c = 0; c < BLK; c++) {
            const int j = j0 + c;
            const int ok = (j <= i) & (W <= 0 || i - j < W) & (kd[c] == qd);
            vis[r][c] = (unsigned char)ok;
            row |= ok;
        }
        any |= row;
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

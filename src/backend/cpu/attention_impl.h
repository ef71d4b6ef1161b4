/* attention_impl.h — the attention code paths behind cpu_attention_fwd/bwd
 * (kernels.h): the portable one (attention.c, fp32 tiles through BLAS), the
 * AVX-512 flash kernels and the AVX2 ones, and what the flash kernels share.
 * Private to the attention files. */
#ifndef TT_ATTENTION_IMPL_H
#define TT_ATTENTION_IMPL_H

#include <math.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

tt_err tt_attention_fwd_portable(const tt_attn *a);
tt_err tt_attention_bwd_portable(const tt_attn *a);
/* 1 when this CPU or call is not theirs (no AVX-512, AVX512_BF16 for bf16,
 * or a head size that is not a multiple of 16): a path below runs. */
tt_err tt_attention_fwd_avx512(const tt_attn *a);
tt_err tt_attention_bwd_avx512(const tt_attn *a);
/* 1 when this CPU or call is not theirs (no AVX2 and FMA, or a head size
 * that is not a multiple of 8): the portable path runs. */
tt_err tt_attention_fwd_avx2(const tt_attn *a);
tt_err tt_attention_bwd_avx2(const tt_attn *a);

/* ---- what the flash kernels share (attention_flash.c) ---------------------- */

#define TT_ATTN_BLK 64 /* queries per tile, keys per tile */

/* RoPE's cos and sin (times rope_scale) for every position the call uses:
 * rows [lo, hi] of (hd/2) each, so each is computed once, not per head. */
typedef struct {
    float *cos, *sin;
    int lo;
} tt_attn_rope;

/* The cos/sin table of the positions the call uses (none without RoPE).
 * Returns 1 when the positions spread too widely for a table worth making
 * (then the portable path, which rotates row by row, runs instead), -1 when
 * scratch memory runs out. */
int tt_attn_rope_init(const tt_attn *a, tt_attn_rope *rt);

/* How a tile of queries sees its keys: none of them, all of them, or some
 * (then vis says which). */
enum { TT_SEE_NONE, TT_SEE_ALL, TT_SEE_SOME };

/* Which keys j0.. (nj of them) the queries i0.. (nq) of batch row b see:
 * vis[r][c] (1 or 0), filled unless the answer is TT_SEE_ALL. */
int tt_attn_tile_vis(const tt_attn *a, int b, int i0, int nq, int j0, int nj,
                     unsigned char vis[TT_ATTN_BLK][TT_ATTN_BLK]);

/* The forward's tasks: each (batch, kv head) in this many chunks of its
 * nblk query blocks. Whole sequences where there are enough of them to share
 * out among the threads; else chunks, each packing the keys and values it
 * reads again. */
int tt_attn_fwd_chunks(const tt_attn *a, int nblk);

/* The first key that any query from i0 on may see: 0, or where the sliding window of query i0 starts */
static inline int tt_attn_first_key(const tt_attn *a, int i0)
{
    return a->window > 0 && i0 - a->window + 1 > 0 ? i0 - a->window + 1 : 0;
}

/* The last query that may see any of the keys [j0, j0 + nj): the last
 * position, or where the sliding window of key j0 + nj - 1 ends */
static inline int tt_attn_last_query(const tt_attn *a, int j0, int nj)
{
    const int last = a->T - 1;
    return a->window > 0 && (long)j0 + nj - 1 + a->window - 1 < last ? j0 + nj - 1 + a->window - 1 : last;
}

/* The scores' scale: the call's, or 1 / sqrt(hd) */
static inline double tt_attn_scale(const tt_attn *a) { return a->scale > 0 ? a->scale : 1.0 / sqrt((double)a->hd); }

#define TT_ATTN_PF_ROWS 8 /* how many rows ahead the flash kernels ask for a strided view's row */

/* Row t of head hh of batch row b in the strided view src (row stride ld
 * elements of es bytes). Its rows lie a whole row of heads apart, a stream
 * the hardware prefetchers find late: the row TT_ATTN_PF_ROWS ahead (into the
 * next block too) is asked for here. */
static inline const char *tt_attn_row(const tt_attn *a, const void *src, long ld, int b, int hh, int t, size_t es)
{
    const size_t n = (size_t)b * a->T + t;
    const char *row = (const char *)src + (n * (size_t)ld + (size_t)hh * a->hd) * es;
    if (t + TT_ATTN_PF_ROWS < a->T) tt_prefetch(row + TT_ATTN_PF_ROWS * ld * es, (size_t)a->hd * es);
    return row;
}

/* The next n bytes of a thread's scratch from *p on, and *p moved past them
 * (sizes that are multiples of 64 bytes keep every buffer aligned) */
static inline char *take(char **p, size_t n)
{
    char *r = *p;
    *p += n;
    return r;
}

#endif

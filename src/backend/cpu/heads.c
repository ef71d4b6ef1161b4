/* heads.c — per-head column moves on the CPU (TT_OP_HEAD_SLICE, _PLACE,
 * _CONCAT in ops/ops.h): row by row, each row on one thread; a sum over
 * heads in fp32, rounded once. */
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

/* the column of the range [c0, c0+cw) that part column i holds: deinterleaved, the even ones then the odd ones */
static inline int src_col(int i, int cw, int deinterleave)
{
    return deinterleave ? (i < cw / 2 ? 2 * i : 2 * (i - cw / 2) + 1) : i;
}

void cpu_head_move(void *x, void *part, int N, int H, int w, int c0, int cw, int sum_heads, int deinterleave,
                   int place, tt_dtype dt)
{
    const int bf = dt == TT_BF16, pw = sum_heads ? cw : H * cw;
    const size_t es = tt_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        char *xr = (char *)x + (size_t)n * H * w * es, *pr = (char *)part + (size_t)n * pw * es;
        if (place) memset(xr, 0, (size_t)H * w * es);
        if (!sum_heads && !deinterleave) { /* each head's columns are one run: one copy a head */
            for (int h = 0; h < H; h++) {
                char *xe = xr + ((size_t)h * w + c0) * es, *pe = pr + (size_t)h * cw * es;
                memcpy(place ? xe : pe, place ? pe : xe, (size_t)cw * es);
            }
            continue;
        }
        for (int i = 0; i < cw; i++) {
            const int c = c0 + src_col(i, cw, deinterleave);
            if (sum_heads && !place) { /* the heads' sum */
                float acc = 0;
                for (int h = 0; h < H; h++) acc += tt_ld(xr, (size_t)h * w + c, bf);
                tt_st(pr, (size_t)i, acc, bf);
                continue;
            }
            for (int h = 0; h < H; h++) {
                char *xe = xr + ((size_t)h * w + c) * es, *pe = pr + (size_t)(sum_heads ? i : h * cw + i) * es;
                memcpy(place ? xe : pe, place ? pe : xe, es);
            }
        }
    }
}

void cpu_head_concat(const void *a, const void *b, void *y, int N, int H, int wa, int wb, int bcast, tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            char *yh = (char *)y + ((size_t)n * H + h) * (wa + wb) * es;
            memcpy(yh, (const char *)a + ((size_t)n * H + h) * wa * es, (size_t)wa * es);
            memcpy(yh + (size_t)wa * es, (const char *)b + (bcast ? (size_t)n : (size_t)n * H + h) * wb * es,
                   (size_t)wb * es);
        }
}

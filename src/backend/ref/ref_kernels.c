/* ref_kernels.c — instantiates the reference kernels of ref_kernels.inc for
 * float (_f32, what the ref backend runs) and double (_f64, for gradient checks). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ref/ref_kernels.h"
#include "core/core.h"

#define T float
#define S f32
#include "ref_kernels.inc"
#undef T
#undef S

#define T double
#define S f64
#include "ref_kernels.inc"
#undef T
#undef S

/* For each expert in turn, every assignment that chose it, in assignment
 * order: O(E * N * k), the definition of the stable sort. */
void ref_moe_sort(const int32_t *expert, int N, int k, int E, int32_t *perm, int32_t *pos, int32_t *offsets)
{
    const int M = N * k;
    int r = 0;
    for (int e = 0; e < E; e++) {
        offsets[e] = r;
        for (int a = 0; a < M; a++)
            if (expert[a] == e) perm[r] = a, pos[a] = r, r++;
    }
    offsets[E] = r;
}

/* c(i, e): the rows source rank i has for expert e (of all E) */
static int32_t ep_rows(const int32_t *offs_all, int E, int i, int e)
{
    return offs_all[(size_t)i * (E + 1) + e + 1] - offs_all[(size_t)i * (E + 1) + e];
}

/* Each output by its defining sum; then every received row, named by its source i, its local expert j and
 * its place t in that run, written where it lies in the source-major and in the expert-major order. */
void ref_moe_ep_plan(const int32_t *offs_all, int E, int ep, int rank, int64_t row, int64_t recv_rows, int64_t *scounts,
                     int64_t *sdispls, int64_t *rcounts, int64_t *rdispls, int32_t *loc_off, int32_t *to_src,
                     int32_t *to_exp)
{
    const int El = E / ep, e0 = rank * El; /* my experts: [e0, e0 + El) */
    const int32_t *mine = offs_all + (size_t)rank * (E + 1);
    for (int d = 0; d < ep; d++) {
        scounts[d] = (int64_t)(mine[(d + 1) * El] - mine[d * El]) * row;
        sdispls[d] = (int64_t)mine[d * El] * row;
    }
    for (int i = 0; i < ep; i++) {
        rcounts[i] = rdispls[i] = 0;
        for (int j = 0; j < El; j++) rcounts[i] += (int64_t)ep_rows(offs_all, E, i, e0 + j) * row;
        for (int q = 0; q < i; q++) rdispls[i] += rcounts[q];
    }
    for (int j = 0; j <= El; j++) {
        loc_off[j] = 0;
        for (int q = 0; q < j; q++)
            for (int i = 0; i < ep; i++) loc_off[j] += ep_rows(offs_all, E, i, e0 + q);
    }
    for (int64_t r = 0; r < recv_rows; r++) to_src[r] = to_exp[r] = -1;
    for (int i = 0; i < ep; i++)
        for (int j = 0; j < El; j++)
            for (int t = 0; t < ep_rows(offs_all, E, i, e0 + j); t++) {
                int32_t sm = (int32_t)(rdispls[i] / row) + t, em = loc_off[j] + t; /* source-, expert-major */
                for (int q = 0; q < j; q++) sm += ep_rows(offs_all, E, i, e0 + q);
                for (int q = 0; q < i; q++) em += ep_rows(offs_all, E, q, e0 + j);
                to_src[em] = sm;
                to_exp[sm] = em;
            }
}

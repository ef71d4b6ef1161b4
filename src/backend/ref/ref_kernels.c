/* ref_kernels.c — instantiates the reference kernels of ref_kernels.inc for
 * float (_f32, what the ref backend runs) and double (_f64, for gradient checks). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ref/ref_kernels.h"

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

/* dist_single.c — a collective in a group of one process: the copy it amounts
 * to (a job of one process, or a mesh dimension of degree 1). Complete at once. */
#include <string.h>

#include "dist/dist_internal.h"

static void copy(void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src) memmove(dst, src, bytes);
}

void tt_single_run(const tt_coll *c, size_t elem_size)
{
    size_t bytes = c->count * elem_size;
    switch ((int)c->kind) {
    case TT_COLL_ALL_GATHER:     /* this rank's count elements are the whole result */
    case TT_COLL_REDUCE_SCATTER: /* the sum of one is itself, bf16 included (no rounding) */
    case TT_COLL_ALL_REDUCE: copy(c->recv, c->send, bytes); break;
    case TT_COLL_ALL_TO_ALLV: /* rank 0 to itself; check_coll made scounts[0] == rcounts[0] */
        copy((char *)c->recv + c->rdispls[0] * elem_size, (const char *)c->send + c->sdispls[0] * elem_size,
             c->scounts[0] * elem_size);
        break;
    default: break; /* broadcast from the only rank, barrier: nothing to move */
    }
}

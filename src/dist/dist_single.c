/* dist_single.c — a collective in a group of one process: the copy it amounts
 * to (a job of one process, or a mesh dimension of degree 1). Complete at once
 * on host memory; on backend buffers a copy on the queue, which orders it
 * after its producers and before its readers. */
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

const tt_dist_transport tt_single_transport = {"a group of one (copies on the queue)", 0};

static tt_err copy_bufs(const tt_coll_bufs *b, tt_mem dst, tt_mem src, size_t bytes)
{
    if (!bytes || (dst.buf == src.buf && dst.off == src.off)) return 0;
    return b->be->copy(b->q, dst, src, bytes);
}

tt_err tt_single_run_bufs(const tt_coll *c, size_t elem_size, const tt_coll_bufs *b)
{
    /* the copies follow the producers in the queue's order: ready has no other
     * use, and syncing it is how an event is released */
    if (b->be->sync(b->ready)) return -1;
    size_t bytes = c->count * elem_size;
    switch ((int)c->kind) {
    case TT_COLL_ALL_GATHER:
    case TT_COLL_REDUCE_SCATTER:
    case TT_COLL_ALL_REDUCE: return copy_bufs(b, b->recv, b->send, bytes);
    case TT_COLL_ALL_TO_ALLV:
        return copy_bufs(b, tt_mem_at(b->recv, c->rdispls[0] * elem_size), tt_mem_at(b->send, c->sdispls[0] * elem_size),
                         c->scounts[0] * elem_size);
    default: return 0;
    }
}

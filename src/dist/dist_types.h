/* dist_types.h — the words of dist.h's API: the mesh's groups, the kinds of
 * collective, the description of one (tt_coll) and its backend buffers
 * (tt_coll_bufs). Apart from dist.h so that
 * dist_internal.h, which dist.c includes, needs only these and not dist.h. */
#ifndef TT_DIST_TYPES_H
#define TT_DIST_TYPES_H

#include <stddef.h>

#include "backend/backend.h"
#include "core/core.h"

/* Expert parallelism splits each shard group into shard / ep groups of ep
 * consecutive ranks (TT_GROUP_EXPERT: the ranks that exchange tokens, each
 * holding 1/ep of every MoE layer's experts); the ranks of a shard group with
 * the same index in their expert group (TT_GROUP_EXPERT_SHARD: shard / ep of
 * them, stride ep) shard those experts as FSDP shards the rest. */
typedef enum {
    TT_GROUP_WORLD = 0,
    TT_GROUP_SHARD,
    TT_GROUP_REPLICATE,
    TT_GROUP_EXPERT,
    TT_GROUP_EXPERT_SHARD,
    TT_GROUP_COUNT
} tt_group_id;
typedef enum { TT_REDUCE_SUM = 0, TT_REDUCE_MAX } tt_reduce_op;
typedef enum {
    TT_COLL_ALL_GATHER = 0, /* recv (group size x count) = each rank's send (count), in group-rank order */
    TT_COLL_REDUCE_SCATTER, /* recv (count) = the group-rank-th count elements of the reduction of every
                               rank's send (group size x count) */
    TT_COLL_ALL_REDUCE,     /* recv (count) = the reduction of every rank's send (count); send may be recv */
    TT_COLL_BROADCAST,      /* recv (count) on every rank = root's recv (send unused) */
    TT_COLL_ALL_TO_ALLV,    /* rank i's send [sdispls[j], + scounts[j]) lands in rank j's recv at
                               [rdispls[i], + rcounts[i]) (counts in elements, per group rank) */
    TT_COLL_KINDS
} tt_coll_kind;
/* In place: an all_gather whose send is this rank's slot of recv (recv + group
 * rank x count); a reduce_scatter whose send is recv (group size x count
 * elements; the result is its first count); an all_reduce whose send is recv.
 * Any other overlap of send and recv is refused. */

typedef struct tt_dist tt_dist;
typedef struct tt_coll_req tt_coll_req;

/* One collective. dtype: f32, bf16 (each combining step sums in fp32 and
 * rounds to bf16, as NCCL does), f64, i32, i64. */
typedef struct {
    tt_coll_kind kind;
    tt_group_id group;
    tt_reduce_op op;
    int root;              /* broadcast: the group rank whose data everyone gets */
    const void *send;
    void *recv;
    size_t count;          /* elements: see tt_coll_kind */
    tt_dtype dtype;
    const size_t *scounts, *sdispls, *rcounts, *rdispls; /* all_to_allv, one per group rank */
    const char *what;      /* names it in errors and in the watchdog's message ("layers.3 all_gather") */
} tt_coll;

/* ---- collectives on backend buffers ----
 * Ordered by the backend's queue: the caller records `ready` on q after the
 * collective's producers; the collective waits on it before it touches a byte;
 * the readers of its result are enqueued after tt_coll_wait_bufs returns.
 * How each step is kept depends on the transport (dist_internal.h):
 *   - a group of one process: the collective is a be->copy enqueued on q (any
 *     backend's memory);
 *   - MPI: host-reachable memory only (the transport says so, and a backend
 *     whose buffers have no host address is refused, naming it): the host
 *     syncs `ready` before MPI reads the send buffer, and blocks in the wait
 *     until the transfer has completed, so the readers, enqueued after it,
 *     see the result;
 *   - a device transport (NCCL, later) would instead make its stream wait on
 *     `ready` and the queue wait on its completion event, the host blocking in
 *     neither. */
typedef struct {
    const tt_backend *be;
    tt_queue *q;
    tt_event *ready;  /* recorded on q after the producers; the collective consumes it (syncs or waits on it) */
    tt_mem send, recv;
} tt_coll_bufs;

#endif

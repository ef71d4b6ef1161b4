/* dist.h — the processes of a job and the collectives between them: MPI when
 * the build has it and the process was started by an MPI launcher (mpirun,
 * srun), one process otherwise. A device mesh splits the world into
 * replicate x shard groups as TorchTitan's data_parallel_replicate_degree x
 * data_parallel_shard_degree: rank r is replica r / shard, shard r % shard.
 * Collectives run asynchronously: a started collective advances when the
 * caller drives progress between kernels and completes on a wait. The graph's
 * collectives run on backend buffers, ordered by the backend's queue
 * (tt_coll_start_bufs); the blocking conveniences and tt_coll_start take host
 * memory. A watchdog ends the whole job (MPI_Abort) when a
 * collective does not complete within the timeout, so a dead or hung rank
 * never hangs the others. */
#ifndef TT_DIST_H
#define TT_DIST_H

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

/* The job: under an MPI launcher with more than one process, MPI (threads:
 * MPI_THREAD_FUNNELED); else one process. Idempotent: later calls return the
 * same object. tt_dist_finalize ends MPI once, at the end of the process.
 * NULL after an error (a launcher's several processes in a build without MPI,
 * an MPI that cannot reach its launcher, a call after MPI ended); later calls
 * give the same error. */
tt_dist *tt_dist_get(void);
void tt_dist_finalize(void);
/* Whether this build has MPI (a build without it runs one process and says
 * so when a launcher or a config asks for more). */
int tt_dist_built_with_mpi(void);
/* Whether this process runs MPI (launched with more than one process); 0 for
 * a plain process, which never initialises MPI. */
int tt_dist_uses_mpi(const tt_dist *d);
int tt_dist_rank(const tt_dist *d);
int tt_dist_world(const tt_dist *d);
/* The processes of this job on this machine, and this one's index among them
 * (a rank's default thread count is the cores divided by them). */
int tt_dist_local_rank(const tt_dist *d);
int tt_dist_local_size(const tt_dist *d);

/* The mesh: replicate x shard must equal the world, and ep (the expert
 * parallel degree, 1 for none) must divide shard; groups are made once per
 * mesh (calling again with the same degrees is free). */
tt_err tt_dist_set_mesh(tt_dist *d, int replicate, int shard, int ep);
int tt_dist_group_size(const tt_dist *d, tt_group_id g);
int tt_dist_group_rank(const tt_dist *d, tt_group_id g);

/* Start a collective; *req completes it (tt_coll_wait). The buffers must stay
 * untouched until then. */
tt_err tt_coll_start(tt_dist *d, const tt_coll *c, tt_coll_req **req);
/* Wait for it (under the watchdog) and free req. */
tt_err tt_coll_wait(tt_dist *d, tt_coll_req *req);
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
/* Start c with its bytes at b->send and b->recv (c->send and c->recv unused);
 * the buffers must stay untouched by the queue's other work until the wait. */
tt_err tt_coll_start_bufs(tt_dist *d, const tt_coll *c, const tt_coll_bufs *b, tt_coll_req **req);
/* Order the readers of req's result (enqueued on q after this returns) after
 * the transfer, and free req. */
tt_err tt_coll_wait_bufs(tt_dist *d, tt_coll_req *req, const tt_backend *be, tt_queue *q);

/* Advance every started collective without blocking; the executor calls it
 * between kernels so transfers move while the next kernel is prepared. */
void tt_dist_progress(tt_dist *d);
/* Blocking conveniences on small host buffers. */
tt_err tt_dist_all_reduce(tt_dist *d, tt_group_id g, void *buf, size_t count, tt_dtype dt, tt_reduce_op op,
                          const char *what);
tt_err tt_dist_broadcast(tt_dist *d, tt_group_id g, void *buf, size_t bytes, int root, const char *what);
tt_err tt_dist_barrier(tt_dist *d, const char *what);
/* Every rank holds the same bytes (a config, a model's layout): else an error
 * on every rank naming the ranks that differ from rank 0 and `what`. */
tt_err tt_dist_check_same(tt_dist *d, const void *bytes, size_t n, const char *what);

/* The watchdog: a collective not complete after `seconds` ends the job with
 * a message naming this rank and the collective's `what` (MPI_Abort, exit
 * status non-zero). 0 turns it off. */
void tt_dist_set_timeout(tt_dist *d, double seconds);
/* Seconds this process has spent blocked in tt_coll_wait and the blocking
 * conveniences since the last call (the per-step log reports it). */
double tt_dist_take_wait_seconds(tt_dist *d);
/* Of those, the seconds blocked on collectives of the expert group (the
 * token exchange of expert parallelism) since the last call. */
double tt_dist_take_expert_wait_seconds(tt_dist *d);

#endif

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
#include "dist/dist_types.h" /* the groups, the collectives' kinds, tt_coll */

/* The job: under an MPI launcher with more than one process, MPI (threads:
 * MPI_THREAD_FUNNELED); else one process. Idempotent: later calls return the
 * same object. tt_dist_finalize ends MPI once, at the end of the process.
 * NULL after an error (a launcher's several processes in a build without MPI,
 * an MPI that cannot reach its launcher, a call after MPI ended); later calls
 * give the same error. */
tt_dist *tt_dist_get(void);
/* tt_dist_get with the watchdog's timeout (tt_dist_set_timeout) set from the
 * start: it also watches MPI_Init_thread, which waits for the launcher, and a
 * rank whose start does not complete in timeout_seconds ends itself (exit
 * status 1), naming its rank and the start. tt_dist_get starts with 60 s. */
tt_dist *tt_dist_start(double timeout_seconds);
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

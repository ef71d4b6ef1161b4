/* dist_internal.h — what the files of src/dist/ share: the job's state, a
 * started collective, the watchdog's list, and the two ways a collective runs
 * (a local copy for a group of one process, MPI otherwise). Private to src/dist/. */
#ifndef TT_DIST_INTERNAL_H
#define TT_DIST_INTERNAL_H

#include <pthread.h>

#include "dist/dist_types.h"
#ifdef TITAN_HAVE_MPI
#include <mpi.h>
#endif

/* Internal kinds and transfer types beside the public ones: the barrier has no
 * buffers, and the blocking broadcast moves raw bytes. Callers of
 * tt_coll_start never get them through (check_coll refuses them). */
#define TT_COLL_BARRIER ((tt_coll_kind)TT_COLL_KINDS)
#define TT_DIST_BYTES ((tt_dtype)TT_DTYPE_COUNT)

/* What a way of running collectives needs of the backend's memory. MPI moves
 * host memory (host_memory = 1): only its implementation turns a backend
 * buffer into a host address (tt_mpi_host_addr), and the host orders its
 * transfers with the queue by waiting (dist.h). A group of one copies on the
 * queue and needs nothing (0). A device transport (NCCL) would say 0 too. */
typedef struct {
    const char *name;
    int host_memory;
} tt_dist_transport;
extern const tt_dist_transport tt_mpi_transport, tt_single_transport;

/* Something the watchdog times: a started collective (req set) or a blocking
 * MPI call (req NULL, on the caller's stack). Linked into tt_dist.watched by
 * the main thread, under tt_dist.mu; the watchdog only reads the list. */
typedef struct tt_watch {
    struct tt_watch *prev, *next;
    double since; /* tt_now() when it began */
    char what[96];
    tt_coll_req *req;
    int before_mpi; /* MPI_Init_thread's: MPI_Abort cannot end the job yet, so a late one ends this rank alone */
} tt_watch;

struct tt_coll_req {
    tt_watch watch;       /* on the list while the collective is pending */
    tt_coll_req *next_free; /* the pool of finished requests */
    tt_coll_req *next_all;  /* every request made, freed at finalize */
    int done;             /* complete: the buffers are the caller's again */
    int failed;           /* completed with an error; err says which */
    int expert;           /* on the expert group: its wait counts as the token exchange's */
    const tt_dist_transport *how; /* how it runs: what its wait must do */
    char err[256];
#ifdef TITAN_HAVE_MPI
    MPI_Request mpi;
    int *v;               /* all_to_allv: counts and displacements as MPI ints, 4 x group size */
    size_t v_cap;
#endif
};

typedef struct {
    int size, rank;  /* this process's index in the group */
    int first, step; /* group rank j is world rank first + j * step */
#ifdef TITAN_HAVE_MPI
    MPI_Comm comm;   /* MPI_COMM_NULL for a group of one */
#endif
} tt_dist_group;

struct tt_dist {
    int rank, world, local_rank, local_size;
    int mpi; /* MPI is initialised: launched with more than one process */
    int replicate, shard, ep; /* the mesh (0 x 0 x 0 until the first tt_dist_set_mesh) */
    tt_dist_group groups[TT_GROUP_COUNT];
    double wait_seconds;   /* blocked in waits since the last tt_dist_take_wait_seconds */
    double expert_wait_seconds; /* of which on the expert group (tt_dist_take_expert_wait_seconds) */
    tt_coll_req *free_reqs; /* finished requests, reused so a step allocates nothing */
    int n_pending;

    /* the watchdog (dist_watchdog.c); mu guards watched, timeout, stop and heard* */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_running, stop;
    double timeout;
    tt_watch watched; /* sentinel of a circular list */

    /* progress (dist_watchdog.c): a rank doing long work alone tells the
     * others now and then; a rank blocked in a wait listens, and the
     * watchdog counts its timeout from the last word heard */
    pthread_t main_thread; /* the one that calls MPI (FUNNELED) */
    double heard;          /* tt_now() when another rank's progress last arrived (0: never) */
    int heard_from;        /* that rank */
    double told, listened; /* tt_now() when this rank last told the others, last listened */
    int64_t *n_told, *n_heard; /* per world rank: messages sent to it, received from it */
#ifdef TITAN_HAVE_MPI
    MPI_Comm world_comm; /* a duplicate of MPI_COMM_WORLD: our traffic apart from anyone else's */
    MPI_Comm progress_comm; /* another: the progress messages, apart from the collectives */
    MPI_Request *telling;   /* per world rank: the last progress message sent to it */
    MPI_Op bf16_sum, bf16_max;
#endif
};

/* ---- dist_single.c: a group of one process ---------------------------------- */
/* Run c as the one member of its group (the copies a collective of one
 * process is); c has passed check_coll. */
void tt_single_run(const tt_coll *c, size_t elem_size);
/* The same on backend buffers: copies enqueued on b->q. */
tt_err tt_single_run_bufs(const tt_coll *c, size_t elem_size, const tt_coll_bufs *b);

/* ---- dist_mpi.c: MPI (stubs that fail in a build without it) ----------------- */
/* MPI_Init_thread (FUNNELED), world rank and size, the bf16 ops; no
 * communication yet (the watchdog starts after it). */
tt_err tt_mpi_init(tt_dist *d);
/* Collective setup under the watchdog: the world's duplicate, local rank and size. */
tt_err tt_mpi_setup(tt_dist *d);
/* The communicators of every group but the world, as set_groups laid the
 * groups out in d->groups (MPI_Comm_split), replacing the previous ones. */
tt_err tt_mpi_make_groups(tt_dist *d);
/* The host address of backend memory m, for MPI: an error naming the backend
 * when its memory is not host memory. The one place in src/dist/ that asks. */
tt_err tt_mpi_host_addr(const tt_backend *be, tt_mem m, void **out);
/* Start c on group g; r->mpi is the request. */
tt_err tt_mpi_start(tt_dist *d, const tt_coll *c, const tt_dist_group *g, tt_coll_req *r);
/* 1: complete, 0: pending, -1: failed (tt_errorf says why). */
int tt_mpi_test(tt_coll_req *r);
void tt_mpi_req_release(tt_coll_req *r); /* frees what the request holds */
_Noreturn void tt_mpi_abort(int status);
void tt_mpi_finalize(tt_dist *d);
/* Progress messages (empty, on progress_comm): one to every other rank whose
 * previous one has gone; and those that arrived, received without blocking
 * (the count; *from: the last sender), or from one rank, blocking. */
void tt_mpi_tell_progress(tt_dist *d);
int tt_mpi_hear_progress(tt_dist *d, int *from);
tt_err tt_mpi_hear_progress_from(tt_dist *d, int rank);

/* ---- dist_watchdog.c ----------------------------------------------------------- */
tt_err tt_watchdog_start(tt_dist *d);
void tt_watchdog_stop(tt_dist *d);
/* Time w from now (what names it in the abort message); end it when done. */
void tt_watch_begin(tt_dist *d, tt_watch *w, const char *what, tt_coll_req *req);
void tt_watch_end(tt_dist *d, tt_watch *w);
/* Before ending the job: this process ends by itself a few seconds later,
 * whatever the launcher does (see dist_watchdog.c). */
void tt_abort_deadline(void);
/* The progress hook (tt_work_progress) on this job's ranks, and off again
 * at the end; and, in a wait, the messages of the others' (taken at most
 * every few ms), which push back the timeouts of this rank's watches. */
void tt_progress_start(tt_dist *d);
void tt_progress_stop(void);
void tt_progress_listen(tt_dist *d);

#endif

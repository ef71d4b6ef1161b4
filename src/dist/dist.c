/* dist.c — the job (one process, or MPI under a launcher that started several),
 * the mesh's groups, starting, advancing and completing collectives, and the
 * blocking conveniences built on them; also the process API of titan.h
 * (tt_shutdown, tt_process_rank, tt_process_world). */
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/dist_internal.h"

#define DEFAULT_TIMEOUT 60.0 /* comm.timeout_seconds' default, until the run sets its own */

enum { NONE, READY, FAILED, FINALIZED };
static tt_dist the_dist;
static int state = NONE;
static char failure[1024];     /* why tt_dist_get fails, for every later call */
static tt_coll_req *all_reqs;  /* every request ever made (next_all), freed at finalize */

/* ---- the launcher -------------------------------------------------------------- */

/* A non-negative int from the environment, or -1. */
static int env_int(const char *name)
{
    const char *s = getenv(name);
    if (!s || !*s) return -1;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v < 0 || v > INT_MAX ? -1 : (int)v;
}

/* The processes an MPI launcher says it started, 0 when none started this
 * one: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), a PMI launcher (MPICH's
 * hydra, srun --mpi=pmi2: PMI_SIZE), Slurm's srun (SLURM_STEP_NUM_TASKS,
 * which a job step's tasks have and a batch script does not). -1: a PMIx
 * launcher that says this process's rank but not the size. *var names the
 * variable that said so. */
static int launcher_size(const char **var)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int n = env_int(sizes[i]);
        if (n >= 1) {
            *var = sizes[i];
            return n;
        }
    }
    *var = "PMIX_RANK";
    return env_int("PMIX_RANK") >= 0 ? -1 : 0;
}

/* This process's rank as the launcher says it, before (or without) MPI. */
static int launcher_rank(void)
{
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        int r = env_int(ranks[i]);
        if (r >= 0) return r;
    }
    return 0;
}

/* ---- the job ------------------------------------------------------------------- */

int tt_dist_built_with_mpi(void)
{
#ifdef TITAN_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

/* The three groups of a replicate x shard mesh: rank r is replica r / shard,
 * shard r % shard (dist.h). */
static void set_groups(tt_dist *d, int replicate, int shard, int ep)
{
    int r = d->rank, s_rank = r % shard, replica0 = r / shard * shard;
    tt_dist_group *w = &d->groups[TT_GROUP_WORLD], *s = &d->groups[TT_GROUP_SHARD],
                  *p = &d->groups[TT_GROUP_REPLICATE], *x = &d->groups[TT_GROUP_EXPERT],
                  *xs = &d->groups[TT_GROUP_EXPERT_SHARD];
    w->size = d->world, w->rank = r, w->first = 0, w->step = 1;
    s->size = shard, s->rank = s_rank, s->first = replica0, s->step = 1;
    p->size = replicate, p->rank = r / shard, p->first = s_rank, p->step = shard;
    /* ep consecutive ranks of a shard group exchange tokens; the ranks at the
     * same place in each of those groups shard their experts */
    x->size = ep, x->rank = s_rank % ep, x->first = replica0 + s_rank / ep * ep, x->step = 1;
    xs->size = shard / ep, xs->rank = s_rank / ep, xs->first = replica0 + s_rank % ep, xs->step = ep;
}

static tt_dist *fail_get(void)
{
    snprintf(failure, sizeof failure, "%s", tt_last_error());
    state = FAILED;
    return NULL;
}

static tt_dist *start(double timeout_seconds);

tt_dist *tt_dist_get(void) { return state == READY ? &the_dist : start(DEFAULT_TIMEOUT); }

tt_dist *tt_dist_start(double timeout_seconds)
{
    if (state != READY) return start(timeout_seconds);
    tt_dist_set_timeout(&the_dist, timeout_seconds);
    return &the_dist;
}

static tt_dist *start(double timeout_seconds)
{
    if (state == FAILED || state == FINALIZED) {
        tt_errorf("%s", failure);
        return NULL;
    }
    tt_dist *d = &the_dist;
    memset(d, 0, sizeof *d);
    d->world = 1, d->local_size = 1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    tt_dist_set_timeout(d, timeout_seconds);
    d->watched.next = d->watched.prev = &d->watched;
    set_groups(d, 1, 1, 1);
    d->replicate = d->shard = 1;

    const char *var;
    int n = launcher_size(&var);
    if (n == 0 || n == 1) { /* a plain process (or a launcher's one): MPI stays untouched */
        state = READY;
        return d;
    }
    if (!tt_dist_built_with_mpi()) {
        char size[32] = "several";
        if (n > 1) snprintf(size, sizeof size, "%d", n);
        tt_errorf("an MPI launcher started %s processes (%s is set), but this build of titan has no MPI (it was "
                  "configured with -DTITAN_MPI=OFF or without libopenmpi-dev): it runs one process only, and %s "
                  "copies would each train alone",
                  size, var, size);
        return fail_get();
    }
    /* MPI_Init_thread waits for the launcher (PMIx), which may never answer: stopped, hung, its machine gone.
     * The watchdog runs from before it, and a rank whose start does not complete ends itself: without MPI it
     * cannot end the job, but the launcher, if it looks again, sees a rank die, and the other ranks, waiting
     * for the same launcher, end themselves too. Its rank until MPI says is the launcher's. */
    d->rank = launcher_rank();
    if (tt_watchdog_start(d)) return fail_get();
    tt_watch init_w = {.before_mpi = 1};
    tt_watch_begin(d, &init_w, "starting the job (MPI_Init_thread, which waits for the launcher)", NULL);
    tt_err init = tt_mpi_init(d);
    tt_watch_end(d, &init_w);
    if (init) {
        tt_watchdog_stop(d);
        return fail_get();
    }
    if (n > 1 && d->world != n) { /* each process alone in a world of its own: they cannot cooperate */
        tt_errorf("%s says the job has %d processes, but MPI sees %d: this MPI cannot reach the launcher (under "
                  "Slurm, srun --mpi=pmix; or start the job with this MPI's mpirun)",
                  var, n, d->world);
        return fail_get();
    }
    tt_log_set_rank(d->rank, d->world);
    tt_watch w = {0};
    tt_watch_begin(d, &w, "starting the job (MPI_Comm_dup, MPI_Comm_split_type)", NULL);
    int rc = tt_mpi_setup(d);
    tt_watch_end(d, &w);
    if (rc) return fail_get();
    tt_progress_start(d);
    d->replicate = d->shard = 0; /* no groups yet: the default mesh makes them */
    if (tt_dist_set_mesh(d, 1, d->world, 1)) return fail_get();
    state = READY;
    return d;
}

/* Finish what is pending (MPI_Finalize with a collective in flight is
 * erroneous), under the watchdog. */
static void drain(tt_dist *d)
{
    while (d->n_pending) {
        tt_dist_progress(d);
        tt_progress_listen(d);
        if (d->n_pending) sched_yield();
    }
}

/* Before MPI_Finalize: every rank learns how many progress messages the
 * others sent it (an all-to-all, itself a wait that listens, so a rank that
 * is still busy at the end keeps the others waiting for it) and receives
 * them all: MPI_Finalize then starts with no message in flight. */
static tt_err close_progress(tt_dist *d)
{
    tt_progress_stop();
    const size_t n = (size_t)d->world;
    size_t *v = calloc(4 * n, sizeof *v);
    int64_t *sent = calloc(n, sizeof *sent);
    tt_err rc = v && sent ? 0 : tt_errorf("rank %d: out of memory ending the job", d->rank);
    for (size_t j = 0; !rc && j < n; j++) v[j] = v[2 * n + j] = 1, v[n + j] = v[3 * n + j] = j;
    /* how many each rank sent this one: a wait like any other, that listens */
    tt_coll c = {.kind = TT_COLL_ALL_TO_ALLV, .group = TT_GROUP_WORLD, .send = d->n_told, .recv = sent,
                 .count = 1, .dtype = TT_I64, .scounts = v, .sdispls = v + n, .rcounts = v + 2 * n,
                 .rdispls = v + 3 * n, .what = "the end of the job (every rank finishing its work)"};
    tt_coll_req *req = NULL;
    if (!rc && (tt_coll_start(d, &c, &req) || tt_coll_wait(d, req))) rc = -1;
    tt_watch w = {0};
    tt_watch_begin(d, &w, "receiving the last progress messages", NULL);
    for (int j = 0; !rc && j < d->world; j++)
        while (!rc && d->n_heard[j] < sent[j]) rc = tt_mpi_hear_progress_from(d, j);
    tt_watch_end(d, &w);
    free(v);
    free(sent);
    return rc;
}

void tt_dist_finalize(void)
{
    tt_dist *d = &the_dist;
    if (state == NONE || state == FINALIZED) return;
    if (d->mpi) {
        drain(d);
        /* Every rank past its work before any sits in MPI_Finalize, which
         * blocks unwatched by progress: rank 0 may still be exporting */
        if (state == READY && d->n_told && close_progress(d)) tt_warn("%s", tt_last_error());
        tt_watch w = {0};
        tt_watch_begin(d, &w, "MPI_Finalize (every rank ending the job)", NULL);
        tt_mpi_finalize(d);
        tt_watch_end(d, &w);
        tt_watchdog_stop(d);
        snprintf(failure, sizeof failure, "the job's MPI has ended (tt_shutdown): it cannot start again");
        state = FINALIZED;
    } else {
        state = NONE; /* one process: a later tt_dist_get starts afresh */
    }
    while (all_reqs) {
        tt_coll_req *r = all_reqs;
        all_reqs = r->next_all;
        tt_mpi_req_release(r);
        free(r);
    }
    d->free_reqs = NULL;
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
}

int tt_dist_rank(const tt_dist *d) { return d ? d->rank : 0; }
int tt_dist_world(const tt_dist *d) { return d ? d->world : 1; }
int tt_dist_local_rank(const tt_dist *d) { return d ? d->local_rank : 0; }
int tt_dist_local_size(const tt_dist *d) { return d ? d->local_size : 1; }
int tt_dist_uses_mpi(const tt_dist *d) { return d ? d->mpi : 0; }

/* ---- the public process API (titan.h) ---------------------------------------------- */

void tt_shutdown(void) { tt_dist_finalize(); }

void tt_abort_job(int status)
{
    if (state != READY || !the_dist.mpi) return;
    tt_abort_deadline(); /* the flushes, too, can wait on a launcher that no longer reads */
    fflush(stdout);
    fflush(stderr);
    tt_mpi_abort(status ? status : 1);
}

int tt_process_rank(void)
{
    if (state == READY || state == FINALIZED || the_dist.mpi) return the_dist.rank;
    return launcher_rank();
}

int tt_process_world(void)
{
    if (state == READY || state == FINALIZED || the_dist.mpi) return the_dist.world;
    const char *var;
    int n = launcher_size(&var);
    return n > 1 ? n : 1;
}

/* ---- the mesh ---------------------------------------------------------------------- */

tt_err tt_dist_set_mesh(tt_dist *d, int replicate, int shard, int ep)
{
    if (!d) return tt_errorf("tt_dist_set_mesh: no job (tt_dist_get failed)");
    if (replicate < 1 || shard < 1 || (long long)replicate * shard != d->world)
        return tt_errorf("a mesh of %d x %d (replicate x shard) ranks does not fit the job's %d process%s: the "
                         "degrees must be at least 1 and multiply to the world",
                         replicate, shard, d->world, d->world == 1 ? "" : "es");
    if (ep < 1 || shard % ep)
        return tt_errorf("an expert parallel degree of %d does not divide the shard degree %d", ep, shard);
    if (replicate == d->replicate && shard == d->shard && ep == d->ep) return 0;
    if (d->n_pending)
        return tt_errorf("a new mesh (%d x %d) while %d collective%s of the old one %s pending: wait for them first",
                         replicate, shard, d->n_pending, d->n_pending == 1 ? "" : "s",
                         d->n_pending == 1 ? "is" : "are");
    set_groups(d, replicate, shard, ep);
    d->replicate = d->shard = d->ep = 0; /* until the groups exist */
    if (d->mpi) {
        tt_watch w = {0};
        char what[96];
        snprintf(what, sizeof what, "the groups of the %d x %d mesh, experts over %d (MPI_Comm_split)", replicate,
                 shard, ep);
        tt_watch_begin(d, &w, what, NULL);
        int rc = tt_mpi_make_groups(d);
        tt_watch_end(d, &w);
        if (rc) return -1;
    }
    d->replicate = replicate, d->shard = shard, d->ep = ep;
    return 0;
}

int tt_dist_group_size(const tt_dist *d, tt_group_id g)
{
    return d && (unsigned)g < TT_GROUP_COUNT ? d->groups[g].size : 1;
}

int tt_dist_group_rank(const tt_dist *d, tt_group_id g)
{
    return d && (unsigned)g < TT_GROUP_COUNT ? d->groups[g].rank : 0;
}

/* ---- checking a collective ---------------------------------------------------------- */

static const char *kind_name(tt_coll_kind k)
{
    static const char *const names[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_allv",
                                        "barrier"};
    return (unsigned)k <= TT_COLL_KINDS ? names[k] : "?";
}

static const char *group_name(tt_group_id g)
{
    static const char *const names[] = {"world", "shard", "replicate", "expert", "expert shard"};
    return (unsigned)g < TT_GROUP_COUNT ? names[g] : "?";
}

/* Where a collective's bytes are: host memory (base NULL, at the address) or
 * a backend buffer (base the buffer, at the offset in it), so one check serves
 * both without asking a backend for addresses. */
typedef struct {
    const void *base;
    uintptr_t at;
} loc;
static loc host_loc(const void *p) { return (loc){NULL, (uintptr_t)p}; }
static loc mem_loc(tt_mem m) { return (loc){m.buf, m.off}; }
static int loc_none(loc a) { return a.base ? 0 : !a.at; }
static int loc_eq(loc a, loc b) { return a.base == b.base && a.at == b.at; }
static loc loc_add(loc a, size_t bytes) { return (loc){a.base, a.at + bytes}; }

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static int overlap(loc a, size_t an, loc b, size_t bn)
{
    return a.base == b.base && an && bn && a.at < b.at + bn && b.at < a.at + an;
}

/* The elements [displs[j], + counts[j]) of every group rank j lie in a buffer
 * of *extent elements; -1 when a count or displacement passes MPI's int. */
static int v_extent(const size_t *counts, const size_t *displs, int n, size_t *extent, size_t *total)
{
    *extent = *total = 0;
    for (int j = 0; j < n; j++) {
        if (counts[j] > INT_MAX || displs[j] > INT_MAX) return -1;
        if (counts[j] && displs[j] + counts[j] > *extent) *extent = displs[j] + counts[j];
        *total += counts[j];
    }
    return 0;
}

/* Everything a collective's description can be wrong in, named; *esize: the
 * element size. internal: the barrier and the raw-bytes broadcast pass. send
 * and recv: where its bytes are (c's host memory, or backend buffers). */
static tt_err check_coll(const tt_dist *d, const tt_coll *c, int internal, size_t *esize, loc send, loc recv)
{
    const char *what = c->what && c->what[0] ? c->what : "collective";
    if ((unsigned)c->kind >= (unsigned)TT_COLL_KINDS + (internal ? 1u : 0u))
        return tt_errorf("%s: unknown collective kind %d", what, (int)c->kind);
    if ((unsigned)c->group >= TT_GROUP_COUNT) return tt_errorf("%s: unknown group %d", what, (int)c->group);
    const char *k = kind_name(c->kind), *gn = group_name(c->group);
    const tt_dist_group *g = &d->groups[c->group];
    int n = g->size;
    *esize = 1;
    if (c->kind == TT_COLL_BARRIER) return 0;
    if (internal && c->dtype == TT_DIST_BYTES && c->kind == TT_COLL_BROADCAST) *esize = 1;
    else if (c->dtype == TT_F32 || c->dtype == TT_BF16 || c->dtype == TT_F64 || c->dtype == TT_I32 ||
             c->dtype == TT_I64)
        *esize = tt_dtype_size(c->dtype);
    else
        return tt_errorf("%s: %s of %s: collectives move f32, bf16, f64, i32 and i64", what, k,
                         tt_dtype_name(c->dtype));
    int reduces = c->kind == TT_COLL_REDUCE_SCATTER || c->kind == TT_COLL_ALL_REDUCE;
    if (reduces && c->op != TT_REDUCE_SUM && c->op != TT_REDUCE_MAX)
        return tt_errorf("%s: %s: unknown reduction %d", what, k, (int)c->op);
    if (c->count > INT_MAX)
        return tt_errorf("%s: %s of %zu elements per rank: MPI counts are ints (at most %d): split it", what, k,
                         c->count, INT_MAX);
    size_t bytes, total; /* one rank's part, the group's */
    if (tt_mul_size(c->count, *esize, &bytes) || tt_mul_size(bytes, (size_t)n, &total))
        return tt_errorf("%s: %s of %zu elements x %d ranks: the size overflows", what, k, c->count, n);
    switch ((int)c->kind) {
    case TT_COLL_ALL_GATHER:
        if (c->count && (loc_none(send) || loc_none(recv))) return tt_errorf("%s: %s: no send or recv buffer", what, k);
        if (!loc_eq(send, loc_add(recv, (size_t)g->rank * bytes)) && overlap(send, bytes, recv, total))
            return tt_errorf("%s: %s: send overlaps recv without being this rank's part of it (in place, send is "
                             "recv + group rank x count)",
                             what, k);
        break;
    case TT_COLL_REDUCE_SCATTER:
    case TT_COLL_ALL_REDUCE: {
        size_t sent = c->kind == TT_COLL_REDUCE_SCATTER ? total : bytes;
        if (c->count && (loc_none(send) || loc_none(recv))) return tt_errorf("%s: %s: no send or recv buffer", what, k);
        if (!loc_eq(send, recv) && overlap(send, sent, recv, bytes))
            return tt_errorf("%s: %s: send and recv overlap (in place, send is recv)", what, k);
        break;
    }
    case TT_COLL_BROADCAST:
        if (c->count && loc_none(recv)) return tt_errorf("%s: %s: no buffer", what, k);
        if (c->root < 0 || c->root >= n)
            return tt_errorf("%s: %s: root %d is not a rank of the %s group (size %d)", what, k, c->root, gn, n);
        break;
    case TT_COLL_ALL_TO_ALLV: {
        if (!c->scounts || !c->sdispls || !c->rcounts || !c->rdispls)
            return tt_errorf("%s: %s: counts and displacements are needed, one per rank of the %s group", what, k,
                             gn);
        size_t sext, stot, rext, rtot;
        if (v_extent(c->scounts, c->sdispls, n, &sext, &stot) || v_extent(c->rcounts, c->rdispls, n, &rext, &rtot))
            return tt_errorf("%s: %s: a count or displacement passes MPI's int (%d)", what, k, INT_MAX);
        if ((stot && loc_none(send)) || (rtot && loc_none(recv))) return tt_errorf("%s: %s: no send or recv buffer", what, k);
        if (n == 1 && c->scounts[0] != c->rcounts[0])
            return tt_errorf("%s: %s: rank 0 sends itself %zu elements but receives %zu", what, k, c->scounts[0],
                             c->rcounts[0]);
        if (sext > SIZE_MAX / *esize || rext > SIZE_MAX / *esize ||
            overlap(send, sext * *esize, recv, rext * *esize))
            return tt_errorf("%s: %s: send and recv overlap", what, k);
        break;
    }
    }
    return 0;
}

/* ---- requests ---------------------------------------------------------------------- */

/* A request from the pool (allocated only when the pool is empty). */
static tt_coll_req *take_req(tt_dist *d)
{
    tt_coll_req *r = d->free_reqs;
    if (r) {
        d->free_reqs = r->next_free;
    } else {
        r = calloc(1, sizeof *r);
        if (!r) {
            tt_errorf("out of memory for a collective's request");
            return NULL;
        }
        r->next_all = all_reqs;
        all_reqs = r;
    }
    r->next_free = NULL;
    r->how = NULL;
    r->done = r->failed = 0;
    r->err[0] = 0;
    r->watch.next = r->watch.prev = NULL;
    return r;
}

static void put_req(tt_dist *d, tt_coll_req *r)
{
    r->next_free = d->free_reqs;
    d->free_reqs = r;
}

/* A pending request completed (or failed, with tt_last_error's message). */
static void complete(tt_dist *d, tt_coll_req *r, int failed)
{
    tt_watch_end(d, &r->watch);
    d->n_pending--;
    r->done = 1;
    if (failed) {
        r->failed = 1;
        snprintf(r->err, sizeof r->err, "%s", tt_last_error());
    }
}

/* Start c on MPI with request r (which goes back to the pool on an error),
 * under the watchdog. */
static tt_err mpi_start(tt_dist *d, const tt_coll *c, const tt_dist_group *g, tt_coll_req *r)
{
    if (tt_mpi_start(d, c, g, r)) {
        put_req(d, r);
        return -1;
    }
    r->how = &tt_mpi_transport;
    char name[96];
    if (c->what && c->what[0]) snprintf(name, sizeof name, "%s", c->what);
    else snprintf(name, sizeof name, "%s on the %s group", kind_name(c->kind), group_name(c->group));
    tt_watch_begin(d, &r->watch, name, r);
    d->n_pending++;
    return 0;
}

static tt_err coll_start(tt_dist *d, const tt_coll *c, tt_coll_req **req, int internal)
{
    if (req) *req = NULL;
    if (!d || !c || !req) return tt_errorf("tt_coll_start: %s is NULL", !d ? "the job" : !c ? "the collective" : "req");
    size_t esize = 1;
    if (check_coll(d, c, internal, &esize, host_loc(c->send), host_loc(c->recv))) return -1;
    tt_coll_req *r = take_req(d);
    if (!r) return -1;
    r->expert = c->group == TT_GROUP_EXPERT;
    const tt_dist_group *g = &d->groups[c->group];
    if (g->size == 1) {
        tt_single_run(c, esize);
        r->done = 1, r->how = &tt_single_transport;
    } else if (mpi_start(d, c, g, r)) {
        return -1;
    }
    *req = r;
    return 0;
}

tt_err tt_coll_start_bufs(tt_dist *d, const tt_coll *c, const tt_coll_bufs *b, tt_coll_req **req)
{
    if (req) *req = NULL;
    if (!d || !c || !b || !req) {
        if (b && b->ready) b->be->sync(b->ready);
        return tt_errorf("tt_coll_start_bufs: %s is NULL", !d ? "the job" : !c ? "the collective" : !b ? "b" : "req");
    }
    size_t esize = 1;
    const tt_dist_group *g = (unsigned)c->group < TT_GROUP_COUNT ? &d->groups[c->group] : NULL;
    tt_coll mc = *c; /* with MPI: its bytes at their host addresses */
    tt_coll_req *r = NULL;
    tt_err rc = check_coll(d, c, 0, &esize, mem_loc(b->send), mem_loc(b->recv));
    if (!rc && g->size > 1) {
        void *send = NULL, *recv = NULL;
        if (tt_mpi_transport.host_memory && ((b->send.buf && tt_mpi_host_addr(b->be, b->send, &send)) ||
                               (b->recv.buf && tt_mpi_host_addr(b->be, b->recv, &recv))))
            rc = tt_error_prefix("%s: ", c->what && c->what[0] ? c->what : kind_name(c->kind));
        mc.send = send, mc.recv = recv;
    }
    if (!rc && !(r = take_req(d))) rc = -1;
    if (rc) { /* ready is consumed either way */
        if (b->ready) b->be->sync(b->ready);
        return -1;
    }
    r->expert = c->group == TT_GROUP_EXPERT;
    if (g->size == 1) {
        r->done = 1, r->how = &tt_single_transport;
        if (tt_single_run_bufs(c, esize, b)) {
            put_req(d, r);
            return -1;
        }
    } else {
        /* MPI reads the send buffer from the host: its producers must be done */
        if (b->be->sync(b->ready)) {
            put_req(d, r);
            return -1;
        }
        if (mpi_start(d, &mc, g, r)) return -1;
    }
    *req = r;
    return 0;
}

tt_err tt_coll_wait_bufs(tt_dist *d, tt_coll_req *req, const tt_backend *be, tt_queue *q)
{
    /* both transports here complete on the host: the group of one's copies are
     * already in the queue before the readers; MPI's transfer is complete when
     * tt_coll_wait returns, before the caller enqueues the readers. A device
     * transport would make q wait on the transfer's event here (be->wait). */
    (void)be, (void)q;
    return tt_coll_wait(d, req);
}

tt_err tt_coll_start(tt_dist *d, const tt_coll *c, tt_coll_req **req) { return coll_start(d, c, req, 0); }

tt_err tt_coll_wait(tt_dist *d, tt_coll_req *req)
{
    if (!d || !req) return tt_errorf("tt_coll_wait: %s is NULL", !d ? "the job" : "the request");
    double t0 = tt_now();
    for (int spins = 0; !req->done; spins++) {
        int rc = tt_mpi_test(req);
        if (rc) complete(d, req, rc < 0);
        else if (spins > 100) sched_yield(); /* ranks may share cores: let the peer run */
        if (!rc && d->mpi) tt_progress_listen(d); /* a rank this one waits for may be busy, not hung */
    }
    d->wait_seconds += tt_now() - t0;
    if (req->expert) d->expert_wait_seconds += tt_now() - t0;
    int r = req->failed ? tt_errorf("%s", req->err) : 0;
    put_req(d, req);
    return r;
}

void tt_dist_progress(tt_dist *d)
{
    if (!d || !d->n_pending) return;
    /* the main thread alone changes the list, so walking it needs no lock */
    for (tt_watch *w = d->watched.next, *next; w != &d->watched; w = next) {
        next = w->next;
        if (!w->req) continue;
        int rc = tt_mpi_test(w->req);
        if (rc) complete(d, w->req, rc < 0);
    }
}

/* ---- blocking conveniences ---------------------------------------------------------- */

static tt_err run_blocking(tt_dist *d, const tt_coll *c, int internal)
{
    tt_coll_req *r;
    if (coll_start(d, c, &r, internal)) return -1;
    return tt_coll_wait(d, r);
}

tt_err tt_dist_all_reduce(tt_dist *d, tt_group_id g, void *buf, size_t count, tt_dtype dt, tt_reduce_op op,
                          const char *what)
{
    tt_coll c = {.kind = TT_COLL_ALL_REDUCE, .group = g, .op = op, .send = buf, .recv = buf, .count = count,
                 .dtype = dt, .what = what};
    return run_blocking(d, &c, 0);
}

tt_err tt_dist_broadcast(tt_dist *d, tt_group_id g, void *buf, size_t bytes, int root, const char *what)
{
    tt_coll c = {.kind = TT_COLL_BROADCAST, .group = g, .root = root, .recv = buf, .count = bytes,
                 .dtype = TT_DIST_BYTES, .what = what};
    return run_blocking(d, &c, 1);
}

tt_err tt_dist_barrier(tt_dist *d, const char *what)
{
    tt_coll c = {.kind = TT_COLL_BARRIER, .group = TT_GROUP_WORLD, .what = what};
    return run_blocking(d, &c, 1);
}

/* Two independent 64-bit hashes of the bytes: a difference that both miss is
 * a 2^-128 accident. */
static void hash_bytes(const void *bytes, size_t n, uint64_t *h1, uint64_t *h2)
{
    const unsigned char *p = bytes;
    uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull; /* FNV-1a's offset basis; the golden ratio */
    for (size_t i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;
        b = tt_hash64(b ^ p[i], i);
    }
    *h1 = a, *h2 = b;
}

tt_err tt_dist_check_same(tt_dist *d, const void *bytes, size_t n, const char *what)
{
    if (!d) return tt_errorf("tt_dist_check_same: no job (tt_dist_get failed)");
    if (!what || !what[0]) what = "the data";
    if (d->world == 1) return 0;
    int64_t mine[3];
    uint64_t h1, h2;
    hash_bytes(bytes, bytes ? n : 0, &h1, &h2);
    mine[0] = (int64_t)n, mine[1] = (int64_t)h1, mine[2] = (int64_t)h2;
    int64_t *all = calloc((size_t)d->world * 3, sizeof *all);
    if (!all) return tt_errorf("%s: out of memory comparing across %d ranks", what, d->world);
    char name[96];
    snprintf(name, sizeof name, "comparing %s across ranks", what);
    tt_coll c = {.kind = TT_COLL_ALL_GATHER, .group = TT_GROUP_WORLD, .send = mine, .recv = all, .count = 3,
                 .dtype = TT_I64, .what = name};
    if (run_blocking(d, &c, 0)) {
        free(all);
        return -1;
    }
    char list[256] = "";
    int n_diff = 0, first = -1;
    for (int j = 1; j < d->world; j++) {
        if (!memcmp(all + 3 * j, all, 3 * sizeof *all)) continue;
        if (first < 0) first = j;
        size_t len = strlen(list);
        if (n_diff < 8) snprintf(list + len, sizeof list - len, "%s%d", n_diff ? ", " : "", j);
        n_diff++;
    }
    int r = 0;
    if (n_diff) {
        char more[48] = "", sizes[96] = "";
        if (n_diff > 8) snprintf(more, sizeof more, " and %d more", n_diff - 8);
        if (all[3 * first] != all[0])
            snprintf(sizes, sizeof sizes, " (%lld bytes on rank %d, %lld on rank 0)", (long long)all[3 * first], first,
                     (long long)all[0]);
        r = tt_errorf("%s is not the same on every rank: rank%s %s%s differ%s from rank 0%s", what,
                      n_diff > 1 ? "s" : "", list, more, n_diff > 1 ? "" : "s", sizes);
    }
    free(all);
    return r;
}

/* ---- the watchdog's setting and the wait clock ---------------------------------------- */

void tt_dist_set_timeout(tt_dist *d, double seconds)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->timeout = seconds > 0 ? seconds : 0; /* NaN and negatives: off, as 0 */
    pthread_mutex_unlock(&d->mu);
}

double tt_dist_take_wait_seconds(tt_dist *d)
{
    if (!d) return 0;
    double s = d->wait_seconds;
    d->wait_seconds = 0;
    return s;
}

double tt_dist_take_expert_wait_seconds(tt_dist *d)
{
    if (!d) return 0;
    double s = d->expert_wait_seconds;
    d->expert_wait_seconds = 0;
    return s;
}

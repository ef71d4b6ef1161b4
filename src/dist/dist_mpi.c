/* dist_mpi.c — collectives on MPI: start-up, the mesh's communicators, the
 * nonblocking collectives and their requests, bf16 reductions summed in fp32.
 * In a build without MPI (-DTITAN_MPI=OFF) only stubs remain: tt_dist never
 * reaches them past tt_mpi_init's error. Only the main thread calls MPI
 * (MPI_THREAD_FUNNELED), except the watchdog's abort (dist_watchdog.c). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist/dist_internal.h"

/* MPI moves host memory: a backend's buffers reach it through their host addresses */
const tt_dist_transport tt_mpi_transport = {"MPI", 1};

#ifdef TITAN_HAVE_MPI

/* tt_errorf with MPI's own words for rc. */
static int mpi_fail(int rc, const char *what, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error code %d", rc);
    return tt_errorf("%s: %s failed: %s", what, call, s);
}

/* bf16 travels as MPI_UINT16_T; each combining step sums in fp32 and rounds
 * to bf16 once (the sum of two ranks is the correctly rounded bf16 of their
 * exact sum; over n ranks the result is within n - 1 roundings). */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) b[i] = tt_f32_to_bf16(tt_bf16_to_f32(a[i]) + tt_bf16_to_f32(b[i]));
}

static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) {
        float x = tt_bf16_to_f32(a[i]), y = tt_bf16_to_f32(b[i]);
        if (isnan(x) || x > y) b[i] = a[i]; /* a NaN anywhere wins, as it would in a sum */
    }
}

tt_err tt_mpi_init(tt_dist *d)
{
    int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "starting the job", "MPI_Init_thread");
    d->mpi = 1;
    d->world_comm = d->progress_comm = MPI_COMM_NULL;
    for (int g = 0; g < TT_GROUP_COUNT; g++) d->groups[g].comm = MPI_COMM_NULL;
    d->bf16_sum = d->bf16_max = MPI_OP_NULL;
    /* errors come back as return codes (and from there as tt_err), not as
     * MPI's default abort; communicators made from the world inherit it */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    if (provided < MPI_THREAD_FUNNELED)
        return tt_errorf("rank %d: this MPI gives thread support level %d, titan needs MPI_THREAD_FUNNELED (%d): "
                         "its kernels run OpenMP threads",
                         d->rank, provided, MPI_THREAD_FUNNELED);
    if ((rc = MPI_Op_create(bf16_sum, 1, &d->bf16_sum)) != MPI_SUCCESS ||
        (rc = MPI_Op_create(bf16_max, 1, &d->bf16_max)) != MPI_SUCCESS)
        return mpi_fail(rc, "starting the job", "MPI_Op_create");
    return 0;
}

tt_err tt_mpi_setup(tt_dist *d)
{
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &d->world_comm);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "starting the job", "MPI_Comm_dup");
    d->groups[TT_GROUP_WORLD].comm = d->world_comm;
    /* the processes on this machine: those that can share memory with this one */
    MPI_Comm node;
    rc = MPI_Comm_split_type(d->world_comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "starting the job", "MPI_Comm_split_type");
    MPI_Comm_rank(node, &d->local_rank);
    MPI_Comm_size(node, &d->local_size);
    MPI_Comm_free(&node);
    if ((rc = MPI_Comm_dup(d->world_comm, &d->progress_comm)) != MPI_SUCCESS)
        return mpi_fail(rc, "starting the job", "MPI_Comm_dup");
    d->telling = malloc((size_t)d->world * sizeof *d->telling);
    d->n_told = calloc((size_t)d->world, sizeof *d->n_told);
    d->n_heard = calloc((size_t)d->world, sizeof *d->n_heard);
    if (!d->telling || !d->n_told || !d->n_heard)
        return tt_errorf("rank %d: out of memory for the progress messages of %d ranks", d->rank, d->world);
    for (int j = 0; j < d->world; j++) d->telling[j] = MPI_REQUEST_NULL;
    return 0;
}

#define PROGRESS_TAG 1

void tt_mpi_tell_progress(tt_dist *d)
{
    /* empty messages: their arrival is the news. One in flight a rank at
     * most: a peer that has not taken the last one yet needs no other. */
    for (int j = 0; j < d->world; j++) {
        int gone = 1;
        if (j == d->rank || MPI_Test(&d->telling[j], &gone, MPI_STATUS_IGNORE) != MPI_SUCCESS || !gone) continue;
        if (MPI_Isend(NULL, 0, MPI_BYTE, j, PROGRESS_TAG, d->progress_comm, &d->telling[j]) == MPI_SUCCESS)
            d->n_told[j]++;
    }
}

int tt_mpi_hear_progress(tt_dist *d, int *from)
{
    int n = 0, any = 1;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, PROGRESS_TAG, d->progress_comm, &any, &st) == MPI_SUCCESS && any) {
        if (MPI_Recv(NULL, 0, MPI_BYTE, st.MPI_SOURCE, PROGRESS_TAG, d->progress_comm, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
            break;
        d->n_heard[st.MPI_SOURCE]++;
        *from = st.MPI_SOURCE;
        n++;
    }
    return n;
}

tt_err tt_mpi_hear_progress_from(tt_dist *d, int rank)
{
    int rc = MPI_Recv(NULL, 0, MPI_BYTE, rank, PROGRESS_TAG, d->progress_comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "the last progress messages", "MPI_Recv");
    d->n_heard[rank]++;
    return 0;
}

static void free_comm(MPI_Comm *c)
{
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
    *c = MPI_COMM_NULL;
}

tt_err tt_mpi_make_groups(tt_dist *d)
{
    /* every group but the world: the ranks with the same first world rank
     * form one group, ordered by their index in it (group rank j is world
     * rank first + j x step); a group of one runs its collectives as copies
     * (dist_single.c) and keeps no communicator */
    for (int g = TT_GROUP_WORLD + 1; g < TT_GROUP_COUNT; g++) {
        tt_dist_group *grp = &d->groups[g];
        free_comm(&grp->comm);
        MPI_Comm c;
        int rc = MPI_Comm_split(d->world_comm, grp->first, grp->rank, &c);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "the mesh's groups", "MPI_Comm_split");
        if (grp->size > 1) grp->comm = c;
        else MPI_Comm_free(&c);
    }
    return 0;
}

static MPI_Datatype mpi_type(tt_dtype t)
{
    switch ((int)t) {
    case TT_F32: return MPI_FLOAT;
    case TT_F64: return MPI_DOUBLE;
    case TT_I32: return MPI_INT32_T;
    case TT_I64: return MPI_INT64_T;
    case TT_BF16: return MPI_UINT16_T; /* reduced by the bf16 ops */
    default: return MPI_BYTE;          /* TT_DIST_BYTES */
    }
}

/* all_to_allv's size_t counts and displacements as the ints MPI takes; they
 * live in the request until it completes (check_coll bounded them by INT_MAX) */
static tt_err alltoallv_ints(tt_coll_req *r, const tt_coll *c, int n)
{
    size_t need = 4 * (size_t)n;
    if (r->v_cap < need) {
        int *v = realloc(r->v, need * sizeof *v);
        if (!v) return tt_errorf("%s: out of memory for all_to_allv's counts", c->what ? c->what : "all_to_allv");
        r->v = v;
        r->v_cap = need;
    }
    for (int i = 0; i < n; i++) {
        r->v[i] = (int)c->scounts[i];
        r->v[n + i] = (int)c->sdispls[i];
        r->v[2 * n + i] = (int)c->rcounts[i];
        r->v[3 * n + i] = (int)c->rdispls[i];
    }
    return 0;
}

tt_err tt_mpi_host_addr(const tt_backend *be, tt_mem m, void **out)
{
    /* the one place the dist layer asks a backend for a host address */
    if (!(*out = be->host_ptr ? be->host_ptr(m) : NULL))
        return tt_errorf("backend %s: its memory is not host memory, and collectives over MPI move host memory "
                         "(a device backend needs a device transport, such as NCCL)",
                         be->name);
    return 0;
}

tt_err tt_mpi_start(tt_dist *d, const tt_coll *c, const tt_dist_group *g, tt_coll_req *r)
{
    MPI_Datatype type = mpi_type(c->dtype);
    MPI_Op op = c->op == TT_REDUCE_MAX ? (c->dtype == TT_BF16 ? d->bf16_max : MPI_MAX)
                                       : (c->dtype == TT_BF16 ? d->bf16_sum : MPI_SUM);
    int n = (int)c->count, rc = MPI_SUCCESS;
    size_t esize = c->dtype == TT_DIST_BYTES ? 1 : tt_dtype_size(c->dtype);
    const char *call = "?";
    switch ((int)c->kind) {
    case TT_COLL_ALL_GATHER: {
        /* in place when this rank's part already sits at its slot of recv */
        int in_place = c->send == (const char *)c->recv + (size_t)g->rank * c->count * esize;
        call = "MPI_Iallgather";
        rc = MPI_Iallgather(in_place ? MPI_IN_PLACE : c->send, n, type, c->recv, n, type, g->comm, &r->mpi);
        break;
    }
    case TT_COLL_REDUCE_SCATTER:
        call = "MPI_Ireduce_scatter_block";
        rc = MPI_Ireduce_scatter_block(c->send == c->recv ? MPI_IN_PLACE : c->send, c->recv, n, type, op, g->comm,
                                       &r->mpi);
        break;
    case TT_COLL_ALL_REDUCE:
        call = "MPI_Iallreduce";
        rc = MPI_Iallreduce(c->send == c->recv ? MPI_IN_PLACE : c->send, c->recv, n, type, op, g->comm, &r->mpi);
        break;
    case TT_COLL_BROADCAST:
        call = "MPI_Ibcast";
        rc = MPI_Ibcast(c->recv, n, type, c->root, g->comm, &r->mpi);
        break;
    case TT_COLL_ALL_TO_ALLV: {
        if (alltoallv_ints(r, c, g->size)) return -1;
        int *v = r->v, k = g->size;
        call = "MPI_Ialltoallv";
        rc = MPI_Ialltoallv(c->send, v, v + k, type, c->recv, v + 2 * k, v + 3 * k, type, g->comm, &r->mpi);
        break;
    }
    default:
        call = "MPI_Ibarrier";
        rc = MPI_Ibarrier(g->comm, &r->mpi);
        break;
    }
    return rc == MPI_SUCCESS ? 0 : mpi_fail(rc, c->what ? c->what : "collective", call);
}

int tt_mpi_test(tt_coll_req *r)
{
    int flag = 0, rc = MPI_Test(&r->mpi, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, r->watch.what, "MPI_Test");
    return flag;
}

void tt_mpi_req_release(tt_coll_req *r)
{
    free(r->v);
    r->v = NULL;
    r->v_cap = 0;
}

_Noreturn void tt_mpi_abort(int status)
{
    MPI_Abort(MPI_COMM_WORLD, status);
    _exit(status); /* MPI_Abort does not return; should it, the process still ends */
}

void tt_mpi_finalize(tt_dist *d)
{
    for (int g = TT_GROUP_WORLD + 1; g < TT_GROUP_COUNT; g++) free_comm(&d->groups[g].comm);
    d->groups[TT_GROUP_WORLD].comm = MPI_COMM_NULL;
    free_comm(&d->world_comm);
    if (d->telling) MPI_Waitall(d->world, d->telling, MPI_STATUSES_IGNORE); /* all received (tt_progress_close) */
    free_comm(&d->progress_comm);
    free(d->telling);
    free(d->n_told);
    free(d->n_heard);
    d->telling = NULL, d->n_told = d->n_heard = NULL;
    if (d->bf16_sum != MPI_OP_NULL) MPI_Op_free(&d->bf16_sum);
    if (d->bf16_max != MPI_OP_NULL) MPI_Op_free(&d->bf16_max);
    MPI_Finalize();
}

#else /* a build without MPI */

tt_err tt_mpi_host_addr(const tt_backend *be, tt_mem m, void **out)
{
    (void)be, (void)m;
    *out = NULL;
    return tt_errorf("this build of titan has no MPI");
}

tt_err tt_mpi_init(tt_dist *d)
{
    (void)d;
    return tt_errorf("this build of titan has no MPI");
}
tt_err tt_mpi_setup(tt_dist *d)
{
    (void)d;
    return tt_errorf("this build of titan has no MPI");
}
tt_err tt_mpi_make_groups(tt_dist *d)
{
    (void)d;
    return tt_errorf("this build of titan has no MPI");
}
tt_err tt_mpi_start(tt_dist *d, const tt_coll *c, const tt_dist_group *g, tt_coll_req *r)
{
    (void)d, (void)c, (void)g, (void)r;
    return tt_errorf("this build of titan has no MPI");
}
int tt_mpi_test(tt_coll_req *r)
{
    (void)r;
    return 1;
}
void tt_mpi_req_release(tt_coll_req *r) { (void)r; }
void tt_mpi_tell_progress(tt_dist *d) { (void)d; }
int tt_mpi_hear_progress(tt_dist *d, int *from)
{
    (void)d, (void)from;
    return 0;
}
tt_err tt_mpi_hear_progress_from(tt_dist *d, int rank)
{
    (void)d, (void)rank;
    return tt_errorf("this build of titan has no MPI");
}
_Noreturn void tt_mpi_abort(int status) { _exit(status); }
void tt_mpi_finalize(tt_dist *d) { (void)d; }

#endif

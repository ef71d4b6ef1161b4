/* test_dist.c — the communication layer on as many processes as launched it:
 * one (CTest's plain run: every collective is a copy) or 2 and 4 under mpirun
 * (test_dist_mpi2, test_dist_mpi4). Each rank computes what every member of a
 * group sends and checks every collective kind and dtype, on every group of
 * every mesh the world allows (1x4, 2x2, 4x1 on four ranks), several in
 * flight at once, check_same, the errors, and the rank-aware logging. In a
 * build without MPI it checks that a launcher's several processes are refused. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/dist.h"
#include "harness.h"
#include "titan/titan.h"

static int rank, world;

static const tt_dtype dtypes[] = {TT_F32, TT_BF16, TT_F64, TT_I32, TT_I64};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])
static const char *const group_names[] = {"world", "shard", "replicate", "expert", "expert shard"};

/* ---- values ------------------------------------------------------------------------ */

static void put(void *buf, tt_dtype dt, size_t i, long double v)
{
    switch (dt) {
    case TT_F32: ((float *)buf)[i] = (float)v; break;
    case TT_BF16: ((uint16_t *)buf)[i] = tt_f32_to_bf16((float)v); break;
    case TT_F64: ((double *)buf)[i] = (double)v; break;
    case TT_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = (int64_t)v; break;
    }
}

static long double get(const void *buf, tt_dtype dt, size_t i)
{
    switch (dt) {
    case TT_F32: return ((const float *)buf)[i];
    case TT_BF16: return tt_bf16_to_f32(((const uint16_t *)buf)[i]);
    case TT_F64: return ((const double *)buf)[i];
    case TT_I32: return ((const int32_t *)buf)[i];
    default: return ((const int64_t *)buf)[i];
    }
}

/* x as the dtype holds it */
static long double rounded(long double x, tt_dtype dt)
{
    unsigned char b[8];
    put(b, dt, 0, x);
    return get(b, dt, 0);
}

/* Element i of what world rank w sends in a collective tagged salt. exact:
 * small integers, whose sums no order of summation changes (integers scaled
 * to use the high bits of i32 and i64); else fractions. */
static long double value(tt_dtype dt, int w, size_t i, int salt, int exact)
{
    long double small = (long double)((w * 7 + (long)(i % 13) * 3 + salt * 5) % 17) - 8;
    if (dt == TT_I32) return small * 1000000 + w;
    if (dt == TT_I64) return small * (long double)(1LL << 50) + w * 1000 + (long)(i % 7);
    if (exact) return small;
    return 0.1L * (w + 1) + 0.37L * (long double)(i % 11) - 1.3L + 0.01L * salt;
}

static void fill(void *buf, tt_dtype dt, int w, size_t n, int salt, int exact)
{
    for (size_t i = 0; i < n; i++) put(buf, dt, i, value(dt, w, i, salt, exact));
}

/* The world rank of group rank j of group g on a replicate x shard mesh: the
 * layout dist.h states (rank r is replica r / shard, shard r % shard). */
static int mesh_ep = 1; /* the current mesh's expert parallel degree */

static int member(tt_group_id g, int shard, int j)
{
    const int replica0 = rank / shard * shard, s = rank % shard;
    if (g == TT_GROUP_SHARD) return replica0 + j;
    if (g == TT_GROUP_REPLICATE) return j * shard + s;
    if (g == TT_GROUP_EXPERT) return replica0 + s / mesh_ep * mesh_ep + j;
    if (g == TT_GROUP_EXPERT_SHARD) return replica0 + s % mesh_ep + j * mesh_ep;
    return j;
}

/* How far a sum of n terms may be from the exact one: exactly the dtype's
 * rounding of it when the order cannot matter (integers, or two terms: a + b
 * is b + a), else n roundings of the magnitudes involved. */
static long double tolerance(tt_dtype dt, int n, int exact, long double magnitude)
{
    if (exact || n <= 2 || dt == TT_I32 || dt == TT_I64) return 0;
    long double eps = dt == TT_BF16 ? 1.0L / 256 : dt == TT_F32 ? 1.0L / (1 << 24) : 1.0L / (1LL << 52);
    return n * eps * magnitude;
}

/* ---- one blocking collective, checked ----------------------------------------------------- */

typedef struct {
    tt_coll_kind kind;
    tt_group_id group;
    tt_reduce_op op;
    tt_dtype dt;
    size_t count;
    int exact, in_place, root, salt;
    int shard; /* the mesh's shard degree, for member() */
} coll_case;

static void describe(const coll_case *k, char *buf, size_t size)
{
    static const char *const kinds[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_allv"};
    snprintf(buf, size, "rank %d: %s %s on the %s group, %s, count %zu%s%s", rank, kinds[k->kind],
             k->op == TT_REDUCE_MAX ? "(max)" : "", group_names[k->group], tt_dtype_name(k->dt), k->count,
             k->exact ? " (integers)" : "", k->in_place ? " in place" : "");
}

/* all_to_allv's shape: group rank a sends (a + 2 b) % 3 + 1 elements to b,
 * one element apart (a gap that displacements must honour). */
static size_t a2a_count(int a, int b) { return (size_t)((a + 2 * b) % 3 + 1); }

/* The elements, and the expected result, of case k; the collective runs
 * between the two (started and waited by the caller). */
typedef struct {
    coll_case k;
    int n, me;
    void *send, *recv;
    size_t send_n, recv_n;
    size_t sc[8], sd[8], rc[8], rd[8];
    tt_coll c;
} prepared;

static void prepare(prepared *p, tt_dist *d, const coll_case *k)
{
    memset(p, 0, sizeof *p);
    p->k = *k;
    p->n = tt_dist_group_size(d, k->group);
    p->me = tt_dist_group_rank(d, k->group);
    size_t es = tt_dtype_size(k->dt), n = (size_t)p->n;
    switch (k->kind) {
    case TT_COLL_ALL_GATHER: p->send_n = k->count, p->recv_n = n * k->count; break;
    case TT_COLL_REDUCE_SCATTER: p->send_n = n * k->count, p->recv_n = k->in_place ? n * k->count : k->count; break;
    case TT_COLL_ALL_REDUCE: p->send_n = p->recv_n = k->count; break;
    case TT_COLL_BROADCAST: p->recv_n = k->count; break;
    default: {
        size_t s = 0, r = 0;
        for (int b = 0; b < p->n; b++) {
            p->sc[b] = a2a_count(p->me, b), p->sd[b] = s, s += p->sc[b] + 1;
            p->rc[b] = a2a_count(b, p->me), p->rd[b] = r, r += p->rc[b] + 1;
        }
        p->send_n = s, p->recv_n = r;
    }
    }
    p->send = th_alloc(p->send_n + 1, es);
    p->recv = th_alloc(p->recv_n + 1, es);
    for (size_t i = 0; i < p->recv_n; i++) put(p->recv, k->dt, i, -99); /* what no collective writes */
    if (k->kind == TT_COLL_ALL_TO_ALLV) {
        for (int b = 0; b < p->n; b++)
            for (size_t e = 0; e < p->sc[b]; e++)
                put(p->send, k->dt, p->sd[b] + e, (long double)(p->me * 100 + b * 10) + (long double)e);
    } else if (k->kind == TT_COLL_BROADCAST) {
        if (p->me == k->root) fill(p->recv, k->dt, rank, k->count, k->salt, k->exact);
    } else {
        fill(p->send, k->dt, rank, p->send_n, k->salt, k->exact);
    }
    p->c = (tt_coll){.kind = k->kind, .group = k->group, .op = k->op, .root = k->root, .send = p->send,
                     .recv = p->recv, .count = k->count, .dtype = k->dt, .what = "test collective"};
    if (k->kind == TT_COLL_ALL_TO_ALLV) p->c.scounts = p->sc, p->c.sdispls = p->sd, p->c.rcounts = p->rc,
                                        p->c.rdispls = p->rd;
    if (k->in_place) {
        if (k->kind == TT_COLL_ALL_GATHER) { /* this rank's part already at its slot */
            memcpy((char *)p->recv + (size_t)p->me * k->count * es, p->send, k->count * es);
            p->c.send = (char *)p->recv + (size_t)p->me * k->count * es;
        } else { /* reduce_scatter, all_reduce: send is recv */
            memcpy(p->recv, p->send, p->send_n * es);
            p->c.send = p->recv;
        }
    }
}

/* Check the result against what each member sent; one CHECK per case. */
static void verify(prepared *p)
{
    const coll_case *k = &p->k;
    char name[160];
    describe(k, name, sizeof name);
    long double worst = 0;
    size_t bad = (size_t)-1;
    long double got = 0, want = 0;
    for (size_t i = 0; i < (k->kind == TT_COLL_ALL_TO_ALLV ? p->recv_n : (k->kind == TT_COLL_ALL_GATHER ?
                                                                           (size_t)p->n * k->count : k->count));
         i++) {
        long double expect, tol = 0;
        if (k->kind == TT_COLL_ALL_GATHER) {
            size_t j = i / (k->count ? k->count : 1);
            expect = rounded(value(k->dt, member(k->group, k->shard, (int)j), i % k->count, k->salt, k->exact), k->dt);
        } else if (k->kind == TT_COLL_BROADCAST) {
            expect = rounded(value(k->dt, member(k->group, k->shard, k->root), i, k->salt, k->exact), k->dt);
        } else if (k->kind == TT_COLL_ALL_TO_ALLV) {
            expect = -99; /* the gaps stay untouched */
            for (int a = 0; a < p->n; a++)
                if (i >= p->rd[a] && i < p->rd[a] + p->rc[a])
                    expect = rounded((long double)(a * 100 + p->me * 10) + (long double)(i - p->rd[a]), k->dt);
        } else { /* reductions: over each member's element at this rank's part */
            size_t at = (k->kind == TT_COLL_REDUCE_SCATTER ? (size_t)p->me * k->count : 0) + i;
            long double sum = 0, mag = 0, mx = -1e30L;
            for (int j = 0; j < p->n; j++) {
                long double x = rounded(value(k->dt, member(k->group, k->shard, j), at, k->salt, k->exact), k->dt);
                sum += x, mag += x < 0 ? -x : x;
                if (x > mx) mx = x;
            }
            expect = k->op == TT_REDUCE_MAX ? mx : rounded(sum, k->dt);
            if (k->op == TT_REDUCE_SUM) tol = tolerance(k->dt, p->n, k->exact, mag);
        }
        long double g = get(p->recv, k->dt, i), err = g > expect ? g - expect : expect - g;
        if (err > tol && (bad == (size_t)-1 || err - tol > worst)) worst = err - tol, bad = i, got = g, want = expect;
    }
    CHECK_MSG(bad == (size_t)-1, "%s: element %zu is %.9Lg, expected %.9Lg", name, bad, got, want);
    free(p->send);
    free(p->recv);
}

static void run_case(tt_dist *d, const coll_case *k)
{
    prepared p;
    prepare(&p, d, k);
    tt_coll_req *r = NULL;
    char name[160];
    describe(k, name, sizeof name);
    int rc = tt_coll_start(d, &p.c, &r);
    CHECK_MSG(rc == 0, "%s: start: %s", name, tt_last_error());
    if (!rc) CHECK_MSG(tt_coll_wait(d, r) == 0, "%s: wait: %s", name, tt_last_error());
    verify(&p);
}

/* Every kind, dtype and variant on group g of the current mesh. */
static void all_kinds(tt_dist *d, tt_group_id g, int shard)
{
    static const size_t counts[] = {1, 37, 4099};
    int salt = 0;
    for (size_t t = 0; t < N_DTYPES; t++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            coll_case k = {.group = g, .dt = dtypes[t], .count = counts[ci], .shard = shard};
            for (int exact = 0; exact <= 1; exact++) {
                k.exact = exact, k.salt = ++salt;
                k.kind = TT_COLL_ALL_GATHER, k.in_place = 0, run_case(d, &k);
                k.in_place = 1, run_case(d, &k);
                k.kind = TT_COLL_REDUCE_SCATTER, k.op = TT_REDUCE_SUM, k.in_place = 0, run_case(d, &k);
                k.in_place = 1, run_case(d, &k);
                k.kind = TT_COLL_ALL_REDUCE, k.in_place = 0, run_case(d, &k);
                k.in_place = 1, run_case(d, &k);
                k.op = TT_REDUCE_MAX, k.in_place = 0, run_case(d, &k);
                k.kind = TT_COLL_REDUCE_SCATTER, run_case(d, &k);
                k.op = TT_REDUCE_SUM;
            }
            k.kind = TT_COLL_BROADCAST;
            for (int root = 0; root < tt_dist_group_size(d, g); root++) k.root = root, k.salt = ++salt, run_case(d, &k);
            k.root = 0;
            if (ci == 0) k.kind = TT_COLL_ALL_TO_ALLV, run_case(d, &k);
        }
}

/* ---- several in flight ------------------------------------------------------------------ */

static void in_flight(tt_dist *d, int shard)
{
    enum { K = 7 };
    prepared p[K];
    tt_coll_req *r[K] = {0};
    const coll_case cases[K] = {
        {TT_COLL_ALL_GATHER, TT_GROUP_SHARD, TT_REDUCE_SUM, TT_BF16, 20000, 0, 0, 0, 101, shard},
        {TT_COLL_REDUCE_SCATTER, TT_GROUP_SHARD, TT_REDUCE_SUM, TT_F32, 30000, 1, 0, 0, 102, shard},
        {TT_COLL_ALL_REDUCE, TT_GROUP_REPLICATE, TT_REDUCE_SUM, TT_F32, 5000, 0, 1, 0, 103, shard},
        {TT_COLL_ALL_REDUCE, TT_GROUP_WORLD, TT_REDUCE_SUM, TT_F64, 3, 0, 0, 0, 104, shard},
        {TT_COLL_BROADCAST, TT_GROUP_WORLD, TT_REDUCE_SUM, TT_I64, 777, 0, 0, 0, 105, shard},
        {TT_COLL_ALL_TO_ALLV, TT_GROUP_WORLD, TT_REDUCE_SUM, TT_I32, 0, 0, 0, 0, 106, shard},
        {TT_COLL_REDUCE_SCATTER, TT_GROUP_REPLICATE, TT_REDUCE_SUM, TT_BF16, 4000, 0, 0, 0, 107, shard},
    };
    int started = 0;
    for (int i = 0; i < K; i++) {
        prepare(&p[i], d, &cases[i]);
        if (tt_coll_start(d, &p[i].c, &r[i]) == 0) started++;
        else CHECK_MSG(0, "rank %d: in flight: start %d: %s", rank, i, tt_last_error());
        tt_dist_progress(d);
    }
    CHECK_MSG(started == K, "rank %d: %d of %d collectives started", rank, started, K);
    for (int spin = 0; spin < 100; spin++) tt_dist_progress(d); /* as the executor would between kernels */
    for (int i = K - 1; i >= 0; i--) /* completed in the reverse order of their start */
        if (r[i]) CHECK_MSG(tt_coll_wait(d, r[i]) == 0, "rank %d: in flight: wait %d: %s", rank, i, tt_last_error());
    for (int i = 0; i < K; i++) verify(&p[i]);
}

/* ---- meshes ------------------------------------------------------------------------------- */

static void mesh(tt_dist *d, int replicate, int shard, int ep)
{
    CHECK_MSG(tt_dist_set_mesh(d, replicate, shard, ep) == 0, "rank %d: mesh %d x %d (ep %d): %s", rank, replicate,
              shard, ep, tt_last_error());
    CHECK(tt_dist_set_mesh(d, replicate, shard, ep) == 0); /* again: free */
    mesh_ep = ep;
    CHECK(tt_dist_group_size(d, TT_GROUP_WORLD) == world && tt_dist_group_rank(d, TT_GROUP_WORLD) == rank);
    CHECK_MSG(tt_dist_group_size(d, TT_GROUP_SHARD) == shard && tt_dist_group_rank(d, TT_GROUP_SHARD) == rank % shard,
              "rank %d, mesh %d x %d: shard group %d of %d", rank, replicate, shard,
              tt_dist_group_rank(d, TT_GROUP_SHARD), tt_dist_group_size(d, TT_GROUP_SHARD));
    CHECK_MSG(tt_dist_group_size(d, TT_GROUP_REPLICATE) == replicate &&
                  tt_dist_group_rank(d, TT_GROUP_REPLICATE) == rank / shard,
              "rank %d, mesh %d x %d: replicate group %d of %d", rank, replicate, shard,
              tt_dist_group_rank(d, TT_GROUP_REPLICATE), tt_dist_group_size(d, TT_GROUP_REPLICATE));
    CHECK_MSG(tt_dist_group_size(d, TT_GROUP_EXPERT) == ep && tt_dist_group_rank(d, TT_GROUP_EXPERT) == rank % shard % ep &&
                  tt_dist_group_size(d, TT_GROUP_EXPERT_SHARD) == shard / ep &&
                  tt_dist_group_rank(d, TT_GROUP_EXPERT_SHARD) == rank % shard / ep,
              "rank %d, mesh %d x %d, ep %d: expert group %d of %d, expert shard group %d of %d", rank, replicate,
              shard, ep, tt_dist_group_rank(d, TT_GROUP_EXPERT), tt_dist_group_size(d, TT_GROUP_EXPERT),
              tt_dist_group_rank(d, TT_GROUP_EXPERT_SHARD), tt_dist_group_size(d, TT_GROUP_EXPERT_SHARD));
    int before = th_failed;
    /* without experts the expert groups are a group of one and the shard group: the first three suffice */
    for (int g = ep > 1 ? TT_GROUP_EXPERT : 0; g < (ep > 1 ? TT_GROUP_COUNT : TT_GROUP_EXPERT); g++)
        all_kinds(d, (tt_group_id)g, shard);
    if (ep == 1) in_flight(d, shard);
    if (rank == 0)
        printf("  mesh %d x %d, ep %d: every kind and dtype on the %s groups%s\n", replicate, shard, ep,
               ep > 1 ? "expert and expert shard" : "world, shard and replicate", th_failed == before ? "" : ": FAILED");
}

/* ---- what is refused ------------------------------------------------------------------------ */

static void expect_error(int rc, const char *what, const char *needle)
{
    CHECK_MSG(rc != 0 && strstr(tt_last_error(), needle), "rank %d: %s: rc %d, error '%s' lacks '%s'", rank, what,
              rc, rc ? tt_last_error() : "", needle);
}

static void refusals(tt_dist *d)
{
    float a[8] = {0}, b[64] = {0};
    tt_coll_req *r = (tt_coll_req *)1;
    tt_coll c = {.kind = TT_COLL_ALL_REDUCE, .send = a, .recv = a + 1, .count = 4, .dtype = TT_F32, .what = "ar"};
    expect_error(tt_coll_start(d, &c, &r), "overlapping all_reduce", "overlap");
    CHECK(r == NULL);
    c.recv = b, c.dtype = TT_F16;
    expect_error(tt_coll_start(d, &c, &r), "f16", "f16");
    c.dtype = TT_F32, c.op = (tt_reduce_op)7;
    expect_error(tt_coll_start(d, &c, &r), "unknown reduction", "reduction");
    c.op = TT_REDUCE_SUM, c.count = (size_t)INT_MAX + 1;
    expect_error(tt_coll_start(d, &c, &r), "a count past int", "MPI counts are ints");
    c = (tt_coll){.kind = TT_COLL_BROADCAST, .recv = b, .count = 2, .dtype = TT_F32, .root = world, .what = "bc"};
    expect_error(tt_coll_start(d, &c, &r), "broadcast root", "root");
    c = (tt_coll){.kind = TT_COLL_ALL_GATHER, .send = b + 1, .recv = b, .count = 2, .dtype = TT_F32};
    expect_error(tt_coll_start(d, &c, &r), "all_gather overlapping off its slot", "overlaps");
    c = (tt_coll){.kind = TT_COLL_ALL_TO_ALLV, .send = a, .recv = b, .dtype = TT_F32};
    expect_error(tt_coll_start(d, &c, &r), "all_to_allv without counts", "counts and displacements");
    c = (tt_coll){.kind = TT_COLL_KINDS, .send = a, .recv = b, .dtype = TT_F32};
    expect_error(tt_coll_start(d, &c, &r), "the internal barrier kind", "unknown collective");
    c = (tt_coll){.kind = TT_COLL_ALL_REDUCE, .group = TT_GROUP_COUNT, .send = a, .recv = b, .dtype = TT_F32};
    expect_error(tt_coll_start(d, &c, &r), "a group out of range", "unknown group");
    expect_error(tt_coll_wait(d, NULL), "waiting on no request", "NULL");
    char want[64];
    snprintf(want, sizeof want, "%d process", world);
    expect_error(tt_dist_set_mesh(d, world + 1, 1, 1), "a mesh larger than the world", want);
    expect_error(tt_dist_set_mesh(d, 0, world, 1), "a degree of 0", "at least 1");
    expect_error(tt_dist_set_mesh(d, 1, world, world + 1), "an expert degree that does not divide", "does not divide");
}

static void check_same(tt_dist *d)
{
    char text[] = "[training]\nsteps = 10\n";
    CHECK_MSG(tt_dist_check_same(d, text, sizeof text, "the config") == 0, "rank %d: same bytes refused: %s", rank,
              tt_last_error());
    if (world == 1) return;
    char other[sizeof text];
    memcpy(other, text, sizeof text);
    if (rank == world - 1) other[9] = 'S'; /* the last rank's config differs */
    char want[64];
    snprintf(want, sizeof want, "rank %d differs from rank 0", world - 1);
    int rc = tt_dist_check_same(d, other, sizeof other, "the config");
    expect_error(rc, "a differing config", want);
    if (rc) CHECK_MSG(strstr(tt_last_error(), "the config"), "rank %d: '%s' does not name what", rank, tt_last_error());
    /* lengths differ on every rank but 0 */
    rc = tt_dist_check_same(d, text, rank == 0 ? sizeof text : sizeof text - 1, "the model layout");
    snprintf(want, sizeof want, "rank%s 1", world > 2 ? "s" : "");
    expect_error(rc, "differing lengths", want);
}

/* ---- logging and the process API -------------------------------------------------------------- */

/* What f writes to file descriptor fd while it runs (at most size - 1 bytes). */
static void capture(int fd, void (*f)(void), char *out, size_t size)
{
    fflush(NULL);
    char path[] = "/tmp/test_dist_XXXXXX";
    int tmp = mkstemp(path), saved = dup(fd);
    out[0] = 0;
    if (tmp < 0 || saved < 0) return;
    dup2(tmp, fd);
    f();
    fflush(NULL);
    dup2(saved, fd);
    close(saved);
    ssize_t n = pread(tmp, out, size - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(tmp);
    unlink(path);
}

static void log_line(void) { tt_log("a log line"); }
static void warn_line(void) { tt_warn("a warning"); }

static void logging(void)
{
    char out[256], want[64];
    capture(1, log_line, out, sizeof out);
    CHECK_MSG(rank == 0 ? strcmp(out, "a log line\n") == 0 : out[0] == 0, "rank %d: tt_log wrote '%s'", rank, out);
    capture(2, warn_line, out, sizeof out);
    if (world > 1) snprintf(want, sizeof want, "rank %d: warning: a warning\n", rank);
    else snprintf(want, sizeof want, "warning: a warning\n");
    CHECK_MSG(strcmp(out, want) == 0, "rank %d: tt_warn wrote '%s', expected '%s'", rank, out, want);
}

/* A build without MPI: a launcher's several processes are refused, saying why. */
static void without_mpi(void)
{
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    CHECK(tt_dist_get() == NULL);
    CHECK_MSG(strstr(tt_last_error(), "no MPI") && strstr(tt_last_error(), "4 processes"), "error: %s",
              tt_last_error());
    CHECK(tt_dist_get() == NULL); /* the same answer again */
    CHECK(tt_process_world() == 4 && tt_process_rank() == 2); /* the CLI's error line names the rank */
    tt_dist_finalize();
    unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    printf("  without MPI: a launcher's 4 processes refused: %s\n", tt_last_error());
}

int main(void)
{
    if (!tt_dist_built_with_mpi()) without_mpi();
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    tt_dist *d = tt_dist_get();
    CHECK_MSG(d != NULL, "tt_dist_get: %s", tt_last_error());
    if (!d) return th_done("test_dist");
    CHECK(tt_dist_get() == d);
    rank = tt_dist_rank(d), world = tt_dist_world(d);
    tt_dist_set_timeout(d, 30); /* a bug that leaves a rank behind ends the test, not CTest's timeout */
    CHECK(!launched || world == atoi(launched));
    CHECK(tt_dist_uses_mpi(d) == (world > 1)); /* a plain process never starts MPI */
    CHECK(tt_process_rank() == rank && tt_process_world() == world);
    /* every rank of these tests runs on this machine, in rank order */
    CHECK_MSG(tt_dist_local_size(d) == world && tt_dist_local_rank(d) == rank, "rank %d: local %d of %d", rank,
              tt_dist_local_rank(d), tt_dist_local_size(d));
    if (rank == 0)
        printf("  %d process%s (%s)\n", world, world == 1 ? "" : "es",
               tt_dist_uses_mpi(d) ? "MPI" : tt_dist_built_with_mpi() ? "no launcher: one process, MPI untouched"
                                                                       : "a build without MPI");
    for (int replicate = 1; replicate <= world; replicate++)
        if (world % replicate == 0)
            for (int ep = 1; ep <= world / replicate; ep++)
                if (world / replicate % ep == 0) mesh(d, replicate, world / replicate, ep);
    refusals(d);
    check_same(d);
    logging();
    CHECK(tt_dist_barrier(d, "the end") == 0);
    double waited = tt_dist_take_wait_seconds(d);
    CHECK_MSG(waited >= 0 && waited < 120, "rank %d: waited %g s", rank, waited);
    CHECK(tt_dist_take_wait_seconds(d) == 0); /* taken: the clock restarts */
    /* the blocking conveniences on a rank-dependent value */
    int64_t sum = rank + 1;
    CHECK(tt_dist_all_reduce(d, TT_GROUP_WORLD, &sum, 1, TT_I64, TT_REDUCE_SUM, "sum of ranks") == 0);
    CHECK(sum == (int64_t)world * (world + 1) / 2);
    char word[8] = "";
    if (rank == world - 1) strcpy(word, "last");
    CHECK(tt_dist_broadcast(d, TT_GROUP_WORLD, word, sizeof word, world - 1, "a word") == 0);
    CHECK(strcmp(word, "last") == 0);

    tt_shutdown();
    tt_shutdown(); /* idempotent */
    tt_dist *again = tt_dist_get();
    if (world > 1) CHECK(again == NULL && strstr(tt_last_error(), "cannot start again")); /* MPI ends once */
    else CHECK(again != NULL);
    tt_dist_finalize();
    return th_done("test_dist");
}

/* test_comm_ops.c — the collective ops as graph ops: all-gather,
 * reduce-scatter, all-reduce, broadcast and all-to-all-v, each a start node
 * and a wait, run by the executor on every backend (cpu, and ref, whose
 * buffers are not host pointers but give host addresses through host_ptr),
 * in f32 and bf16, in every execution mode, against what the ranks' inputs
 * imply; and autodiff through an all-to-all-v of rows (expert parallelism's
 * exchange), whose gradient is the reverse exchange. CTest runs it as one
 * process (every group has one rank: copies) and under mpirun -np 2 and 4
 * (tests/test_dist.c tests the dist layer below it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "graph/autodiff.h"
#include "graph/exec.h"
#include "harness.h"
#include "ops/ops.h"

static int rank, world;

/* The value rank r holds at element i of an op's input: small integers, exact in bf16 and in their sums. */
static float val(int r, int64_t i) { return (float)((r + 1) * 8 + (i % 7)); }

static void fill(tt_dtype dt, void *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (dt == TT_BF16) ((uint16_t *)dst)[i] = tt_f32_to_bf16(src[i]);
        else ((float *)dst)[i] = src[i];
}

static float at(tt_dtype dt, const void *p, int64_t i)
{
    return dt == TT_BF16 ? tt_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

typedef enum { AG, RS, AR, BC, A2A, KINDS } kind;
static const char *const kind_names[] = {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_allv"};

/* all_to_allv: rank i sends rank j (i + 2j + 1) % 3 + 1 elements */
static int64_t a2a_count(int i, int j) { return (i + 2 * j + 1) % 3 + 1; }

static void run_case(const tt_backend *be, tt_exec_mode mode, tt_dtype dt, kind k)
{
    const int64_t n = 37; /* an odd count per rank */
    tt_graph *g = tt_graph_new();
    int64_t in_n = k == RS ? n * world : n, out_n = k == AG ? n * world : n;
    int64_t cnt[4][64] = {{0}}; /* scounts, sdispls, rcounts, rdispls */
    if (k == A2A) {
        in_n = out_n = 0;
        for (int j = 0; j < world; j++) {
            cnt[0][j] = a2a_count(rank, j), cnt[1][j] = in_n, in_n += cnt[0][j];
            cnt[2][j] = a2a_count(j, rank), cnt[3][j] = out_n, out_n += cnt[2][j];
        }
    }
    tt_value *x = tt_graph_input(g, "x", dt, 1, &in_n), *y = NULL, *c[4] = {0};
    if (k == AG) y = tt_all_gather(g, x, NULL, TT_GROUP_WORLD, world, "test all_gather");
    if (k == RS) y = tt_reduce_scatter(g, x, NULL, TT_GROUP_WORLD, world, "test reduce_scatter");
    if (k == AR) y = tt_all_reduce(g, x, NULL, TT_GROUP_WORLD, TT_REDUCE_SUM, "test all_reduce");
    if (k == BC) y = tt_broadcast(g, x, NULL, TT_GROUP_WORLD, world - 1, "test broadcast");
    if (k == A2A) {
        const int64_t w = world;
        for (int q = 0; q < 4; q++) c[q] = tt_graph_input(g, "counts", TT_I64, 1, &w);
        y = tt_all_to_allv(g, x, c[0], c[1], c[2], c[3], out_n, TT_GROUP_WORLD, "test all_to_allv");
    }
    tt_value *z = y ? tt_comm_wait(g, y) : NULL;
    if (z) tt_graph_mark_output(g, z);
    char what[128];
    snprintf(what, sizeof what, "%s on %s, %s, mode %d, rank %d of %d", kind_names[k], be->name, tt_dtype_name(dt),
             (int)mode, rank, world);
    CHECK_MSG(z && !g->failed, "%s: did not build: %s", what, tt_last_error());
    tt_exec *e = z ? tt_exec_new(g, be, NULL, mode) : NULL;
    CHECK_MSG(!z || e, "%s: %s", what, tt_last_error());
    float *src = calloc((size_t)in_n + 1, sizeof *src), *got = calloc((size_t)out_n + 1, sizeof *got);
    void *buf = calloc((size_t)(in_n > out_n ? in_n : out_n) + 1, sizeof(float));
    if (e && src && got && buf) {
        for (int64_t i = 0; i < in_n; i++) src[i] = val(rank, i);
        fill(dt, buf, src, in_n);
        tt_err rc = tt_exec_write(e, x, buf, tt_value_bytes(x));
        for (int q = 0; q < 4 && c[q] && !rc; q++) rc = tt_exec_write(e, c[q], cnt[q], (size_t)world * sizeof(int64_t));
        if (!rc) rc = tt_exec_run(e);
        if (!rc) rc = tt_exec_read(e, z, buf, tt_value_bytes(z));
        CHECK_MSG(rc == 0, "%s: %s", what, tt_last_error());
        for (int64_t i = 0; i < out_n && !rc; i++) got[i] = at(dt, buf, i);
        int bad = 0;
        for (int64_t i = 0; i < out_n && !rc && !bad; i++) {
            float want = 0;
            if (k == AG) want = val((int)(i / n), i % n);
            if (k == RS)
                for (int r = 0; r < world; r++) want += val(r, rank * n + i);
            if (k == AR)
                for (int r = 0; r < world; r++) want += val(r, i);
            if (k == BC) want = val(world - 1, i);
            if (k == A2A) { /* from rank j: its elements at its displacement for this rank */
                int j = 0;
                while (j + 1 < world && cnt[3][j + 1] <= i) j++;
                int64_t sd = 0;
                for (int q = 0; q < rank; q++) sd += a2a_count(j, q);
                want = val(j, sd + (i - cnt[3][j]));
            }
            if (got[i] != want) {
                CHECK_MSG(0, "%s: element %lld is %g, want %g", what, (long long)i, got[i], want);
                bad = 1;
            }
        }
    }
    free(src), free(got), free(buf);
    tt_exec_free(e);
    tt_graph_free(g);
}

/* ---- the exchange's backward ------------------------------------------------------
 * Rows of D elements: rank i sends rank j a2a_count(i, j) rows. Every block, sent and received, has an unused
 * row before it, and the buffers one more after the last, so some of x goes nowhere and some of y receives
 * nothing. */
enum { D = 3, V = 4 };
/* the row at which rank i's rows for rank j start in its x */
static int64_t send_row(int i, int j)
{
    int64_t r = 1;
    for (int q = 0; q < j; q++) r += a2a_count(i, q) + 1;
    return r;
}
/* the row at which rank j's rows from rank i land in its y */
static int64_t recv_row(int j, int i)
{
    int64_t r = 1;
    for (int q = 0; q < i; q++) r += a2a_count(q, j) + 1;
    return r;
}

/* y = wait(all_to_allv(x)) of x (rows, D), a cross-entropy loss on y, and autodiff's dx: y must hold what was
 * sent, zeros where nothing landed, and dx must be the reverse exchange of the loss's gradient dy (gathered
 * from every rank in the graph), zeros on the rows of x that went nowhere. */
static void run_grad_case(const tt_backend *be, tt_exec_mode mode, tt_dtype dt)
{
    /* every rank's y has the most rows any rank receives, so the dy of all ranks can be gathered */
    const int64_t in_rows = send_row(rank, world), w = world;
    int64_t out_rows = 0;
    for (int j = 0; j < world; j++) out_rows = recv_row(j, world) > out_rows ? recv_row(j, world) : out_rows;
    int64_t cnt[4][64] = {{0}}; /* scounts, sdispls, rcounts, rdispls, in elements */
    for (int j = 0; j < world; j++) {
        cnt[0][j] = a2a_count(rank, j) * D, cnt[1][j] = send_row(rank, j) * D;
        cnt[2][j] = a2a_count(j, rank) * D, cnt[3][j] = recv_row(rank, j) * D;
    }
    char what[128];
    snprintf(what, sizeof what, "all_to_allv backward on %s, %s, mode %d, rank %d of %d", be->name, tt_dtype_name(dt),
             (int)mode, rank, world);
    tt_graph *g = tt_graph_new();
    /* x a parameter: autodiff gives no gradient to inputs */
    tt_value *x = tt_value_new(g, TT_ROLE_PARAM, dt, 2, (int64_t[]){in_rows, D}), *c[4];
    for (int q = 0; q < 4; q++) c[q] = tt_graph_input(g, "counts", TT_I64, 1, &w);
    tt_value *W = tt_graph_input(g, "W", TT_F32, 2, (int64_t[]){V, D});
    tt_value *targets = tt_graph_input(g, "targets", TT_I32, 1, &out_rows);
    tt_value *scale = tt_graph_input(g, "scale", TT_F32, 1, (int64_t[]){1});
    tt_value *y = tt_all_to_allv(g, x, c[0], c[1], c[2], c[3], out_rows * D, TT_GROUP_WORLD, "test all_to_allv rows");
    CHECK_MSG(!y || (y->ndim == 2 && y->shape[0] == out_rows && y->shape[1] == D), "%s: y is not (%lld, %d)", what,
              (long long)out_rows, D);
    tt_value *z = y ? tt_comm_wait(g, y) : NULL, *loss = z ? tt_ce_linear(g, z, W, targets, scale, -100) : NULL;
    tt_value *dx = NULL, *dy_all = NULL;
    if (loss && tt_autodiff(g, 1, &loss, 1, &x, &dx) == 0 && dx && loss->producer->n_out == 3) {
        tt_value *dy = loss->producer->out[1]; /* the loss's gradient of z, computed by the loss node */
        tt_value *ga = tt_all_gather(g, dy, NULL, TT_GROUP_WORLD, world, "test dy");
        dy_all = ga ? tt_comm_wait(g, ga) : NULL;
    }
    CHECK_MSG(dy_all && !g->failed, "%s: did not build: %s", what, tt_last_error());
    tt_exec *e = NULL;
    if (dy_all) {
        tt_graph_mark_output(g, z), tt_graph_mark_output(g, dx), tt_graph_mark_output(g, dy_all);
        e = tt_exec_new(g, be, NULL, mode);
        CHECK_MSG(e, "%s: %s", what, tt_last_error());
    }
    const size_t es = tt_dtype_size(dt), n_in = (size_t)(in_rows * D), n_out = (size_t)(out_rows * D);
    float *xf = calloc(n_in, sizeof *xf), Wf[V * D], sc = 1.0f / (float)out_rows;
    int32_t *tg = calloc((size_t)out_rows, sizeof *tg);
    void *xb = calloc(n_in, es), *yb = calloc(n_out, es), *dxb = calloc(n_in, es), *dyb = calloc(n_out * world, es);
    if (e && xf && tg && xb && yb && dxb && dyb) {
        for (size_t i = 0; i < n_in; i++) xf[i] = val(rank, (int64_t)i) / 16;
        for (int i = 0; i < V * D; i++) Wf[i] = (float)(i % 5 - 2) / 4;
        for (int64_t r = 0; r < out_rows; r++) tg[r] = (int32_t)((r + rank) % V);
        fill(dt, xb, xf, (int64_t)n_in);
        tt_err rc = tt_exec_write(e, x, xb, n_in * es) || tt_exec_write(e, W, Wf, sizeof Wf) ||
                    tt_exec_write(e, targets, tg, (size_t)out_rows * sizeof *tg) ||
                    tt_exec_write(e, scale, &sc, sizeof sc);
        for (int q = 0; q < 4 && !rc; q++) rc = tt_exec_write(e, c[q], cnt[q], (size_t)world * sizeof(int64_t));
        if (!rc) rc = tt_exec_run(e) || tt_exec_read(e, z, yb, n_out * es) || tt_exec_read(e, dx, dxb, n_in * es) ||
                      tt_exec_read(e, dy_all, dyb, n_out * world * es);
        CHECK_MSG(rc == 0, "%s: %s", what, tt_last_error());
        int bad = 0;
        for (int64_t r = 0; r < out_rows && !rc && !bad; r++) /* y: source i's rows at recv_row(rank, i), else 0 */
            for (int d = 0; d < D && !bad; d++) {
                float want = 0;
                for (int i = 0; i < world; i++)
                    if (r >= recv_row(rank, i) && r < recv_row(rank, i) + a2a_count(i, rank))
                        want = val(i, (send_row(i, rank) + r - recv_row(rank, i)) * D + d) / 16;
                const float got = at(dt, yb, r * D + d);
                if (got != want) {
                    CHECK_MSG(0, "%s: y[%lld][%d] is %g, want %g", what, (long long)r, d, got, want);
                    bad = 1;
                }
            }
        for (int64_t r = 0; r < in_rows && !rc && !bad; r++) /* dx: dy of the rank row r went to, where it landed */
            for (int d = 0; d < D && !bad; d++) {
                float want = 0;
                for (int j = 0; j < world; j++)
                    if (r >= send_row(rank, j) && r < send_row(rank, j) + a2a_count(rank, j))
                        want = at(dt, dyb, j * out_rows * D + (recv_row(j, rank) + r - send_row(rank, j)) * D + d);
                const float got = at(dt, dxb, r * D + d);
                if (got != want) {
                    CHECK_MSG(0, "%s: dx[%lld][%d] is %g, want %g", what, (long long)r, d, got, want);
                    bad = 1;
                }
            }
        CHECK_MSG(!rc && !bad, "%s", what);
    }
    free(xf), free(tg), free(xb), free(yb), free(dxb), free(dyb);
    tt_exec_free(e);
    tt_graph_free(g);
}

int main(void)
{
    tt_dist *d = tt_dist_get();
    if (!d) {
        fprintf(stderr, "%s\n", tt_last_error());
        return 1;
    }
    rank = tt_dist_rank(d), world = tt_dist_world(d);
    if (world > 64) return th_skip("test_comm_ops", "more than 64 ranks");
    tt_dist_set_timeout(d, 60);
    const char *backends[] = {"cpu", "ref"};
    for (int b = 0; b < 2; b++)
        for (int m = TT_EXEC_GRAPH; m <= TT_EXEC_DEBUG; m++)
            for (int k = 0; k < KINDS; k++)
                for (int t = 0; t < 2; t++) run_case(tt_backend_get(backends[b]), (tt_exec_mode)m, t ? TT_BF16 : TT_F32, (kind)k);
    for (int b = 0; b < 2; b++) /* the exchange's backward */
        for (int m = TT_EXEC_GRAPH; m <= TT_EXEC_DEBUG; m++)
            for (int t = 0; t < 2; t++)
                run_grad_case(tt_backend_get(backends[b]), (tt_exec_mode)m, t ? TT_BF16 : TT_F32);
    int rc = th_done(world > 1 ? (rank == 0 ? "test_comm_ops (rank 0)" : "test_comm_ops (another rank)") : "test_comm_ops");
    tt_shutdown();
    return rc;
}

/* test_comm_ops.c — the collective ops as graph ops: all-gather,
 * reduce-scatter, all-reduce, broadcast and all-to-all-v, each a start node
 * and a wait, run by the executor on every backend (cpu, and ref, whose
 * buffers are not host pointers but give host addresses through host_ptr),
 * in f32 and bf16, in every execution mode, against what the ranks' inputs
 * imply. CTest runs it as one process (every group has one rank: copies) and
 * under mpirun -np 2 and 4 (tests/test_dist.c tests the dist layer below it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
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
    int rc = th_done(world > 1 ? (rank == 0 ? "test_comm_ops (rank 0)" : "test_comm_ops (another rank)") : "test_comm_ops");
    tt_shutdown();
    return rc;
}

/* test_dropout.c — the dropout op (tt_dropout, its mask in ops/dropout.h): the builder's checks, the mask by its
 * definition on every backend and dtype (the same bits everywhere), the rate within a few sigma of p, the same
 * (seed, counter, site) giving the same mask and another counter, site or seed an unrelated one, the backward through
 * autodiff equal to dy * mask / (1 - p), and activation checkpointing recomputing the same mask. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/exec.h"
#include "graph/passes/remat.h"
#include "harness.h"
#include "ops/ops.h"

enum { ROWS = 512, COLS = 2048, NEL = ROWS * COLS }; /* 2^20 elements: a rate's sigma is under 0.05% of them */

/* keep(i) by the definition: u(i) = (tt_hash64(key, i) >> 40) * 2^-24 >= p */
static int keep_def(uint64_t key, int64_t i, double p)
{
    return (double)(tt_hash64(key, (uint64_t)i) >> 40) * 0x1p-24 >= p;
}

/* x (never zero, so a kept element is never 0): 0.5 to 1.5 with a random sign */
static double *make_x(int64_t n)
{
    double *x = th_alloc((size_t)n, sizeof *x);
    tt_rng r = {11, 0};
    for (int64_t i = 0; i < n; i++) x[i] = (tt_rng_below(&r, 2) ? 1 : -1) * (0.5 + tt_rng_uniform(&r));
    return x;
}

static void pack(const double *x, int64_t n, tt_dtype dt, void *p)
{
    for (int64_t i = 0; i < n; i++) {
        if (dt == TT_F64) ((double *)p)[i] = x[i];
        else if (dt == TT_F32) ((float *)p)[i] = (float)x[i];
        else ((uint16_t *)p)[i] = tt_f32_to_bf16((float)x[i]);
    }
}
static void unpack(const void *p, int64_t n, tt_dtype dt, double *x)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = dt == TT_F64 ? ((const double *)p)[i]
               : dt == TT_F32 ? ((const float *)p)[i]
                              : tt_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* y (rows, cols) = dropout(x) on a backend in dtype dt; 0 on success */
static int run_dropout(const char *backend, tt_dtype dt, const double *x, int64_t rows, int64_t cols,
                       const int64_t rng[2], double p, uint64_t site, double *y)
{
    const tt_backend *be = tt_backend_get(backend);
    tt_graph *g = tt_graph_new();
    const int64_t shape[2] = {rows, cols}, two = 2, n = rows * cols;
    tt_value *xv = tt_graph_input(g, "x", dt, 2, shape), *rv = tt_graph_input(g, "rng", TT_I64, 1, &two);
    tt_value *yv = tt_dropout(g, xv, rv, p, site);
    if (yv) tt_graph_mark_output(g, yv);
    tt_exec *e = be && yv ? tt_exec_new(g, be, NULL, TT_EXEC_GRAPH) : NULL;
    void *buf = th_alloc((size_t)n, sizeof(double));
    const size_t bytes = (size_t)n * tt_dtype_size(dt);
    pack(x, n, dt, buf);
    const int rc = !e || tt_exec_write(e, xv, buf, bytes) || tt_exec_write(e, rv, rng, 2 * sizeof(int64_t)) ||
                   tt_exec_run(e) || tt_exec_read(e, yv, buf, bytes);
    CHECK_MSG(rc == 0, "dropout on %s in %s: %s", backend, tt_dtype_name(dt), tt_last_error());
    if (!rc) unpack(buf, n, dt, y);
    free(buf);
    tt_exec_free(e);
    tt_graph_free(g);
    return rc;
}

/* |count - n q| within 5 sigma of a binomial (n, q) */
static int within_sigma(int64_t count, int64_t n, double q)
{
    return fabs((double)count - (double)n * q) <= 5 * sqrt((double)n * q * (1 - q));
}

static void test_builder(void)
{
    tt_graph *g = tt_graph_new();
    const int64_t shape[2] = {4, 3}, two = 2, three = 3;
    tt_value *x = tt_graph_input(g, "x", TT_F32, 2, shape), *rng = tt_graph_input(g, "rng", TT_I64, 1, &two);
    const int nodes = g->n_nodes;
    CHECK_MSG(tt_dropout(g, x, rng, 0.0, 1) == x && tt_dropout(g, x, NULL, 0.0, 1) == x && g->n_nodes == nodes,
              "p = 0 is the identity: x itself, no node, no rng needed");
    tt_value *y = tt_dropout(g, x, rng, 0.25, 1);
    CHECK(y && y->dtype == TT_F32 && y->ndim == 2 && y->shape[0] == 4 && y->shape[1] == 3 &&
          y->producer->op == TT_OP_DROPOUT && (tt_ops[TT_OP_DROPOUT]->flags & TT_OPF_PURE));
    tt_graph_free(g);
    /* each refused, with the graph failed and a message naming the problem */
    static const double bad_p[] = {1.0, -0.1, 1.5, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad_p / sizeof bad_p[0]; i++) {
        g = tt_graph_new();
        x = tt_graph_input(g, "x", TT_F32, 2, shape), rng = tt_graph_input(g, "rng", TT_I64, 1, &two);
        CHECK_MSG(!tt_dropout(g, x, rng, bad_p[i], 1) && g->failed && strstr(tt_last_error(), "outside [0, 1)"),
                  "p = %g: %s", bad_p[i], tt_last_error());
        tt_graph_free(g);
    }
    for (int k = 0; k < 3; k++) { /* rng as f32, as i64 (3), absent */
        g = tt_graph_new();
        x = tt_graph_input(g, "x", TT_F32, 2, shape);
        rng = k == 0 ? tt_graph_input(g, "rng", TT_F32, 1, &two) : k == 1 ? tt_graph_input(g, "rng", TT_I64, 1, &three) : NULL;
        CHECK_MSG(!tt_dropout(g, x, rng, 0.5, 1) && g->failed && strstr(tt_last_error(), "rng must be an i64 (2)"),
                  "rng case %d: %s", k, tt_last_error());
        tt_graph_free(g);
    }
    g = tt_graph_new();
    x = tt_graph_input(g, "ids", TT_I32, 2, shape), rng = tt_graph_input(g, "rng", TT_I64, 1, &two);
    CHECK_MSG(!tt_dropout(g, x, rng, 0.5, 1) && strstr(tt_last_error(), "x must be an f32, bf16 or f64"), "%s",
              tt_last_error());
    tt_graph_free(g);
}

/* The kernels compare the top 24 bits with ceil(p 2^24); the definition compares u with p: the same at the edges */
static void test_threshold(void)
{
    static const double ps[] = {0.1, 0.5, 0.05, 0.9, 1e-12, 3 * 0x1p-24, 1 - 0x1p-24, 0.3333333333333333};
    int bad = 0;
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
        for (int side = -1; side <= 1; side++) {
            const double p = side ? nextafter(ps[i], side > 0 ? 1.0 : 0.0) : ps[i];
            const int64_t t = tt_dropout_threshold(p);
            for (int64_t k = t - 2; k <= t + 2; k++) {
                if (k < 0 || k >= (1 << 24)) continue;
                bad += ((double)k * 0x1p-24 >= p) != (k >= t);
            }
        }
    CHECK_MSG(bad == 0, "the integer threshold disagrees with u >= p %d times", bad);
}

/* On every backend and dtype it runs: the mask is the definition's, bit for bit; kept values are x / (1 - p) */
static void test_definition(void)
{
    const int64_t rng[2] = {42, 9};
    const uint64_t site = 5;
    double *x = make_x(NEL), *y = th_alloc(NEL, sizeof *y);
    static const tt_dtype dts[] = {TT_F32, TT_BF16, TT_F64};
    static const double ps[] = {0.3, 0.05, 0.9};
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        for (int di = 0; di < 3; di++)
            for (int pi = 0; pi < 3; pi++) {
                const tt_dtype dt = dts[di];
                const double p = ps[pi];
                if (!be->supports(TT_OP_DROPOUT, dt) || (pi && dt != TT_F32)) continue;
                if (run_dropout(be->name, dt, x, ROWS, COLS, rng, p, site, y)) continue;
                const uint64_t key = tt_dropout_key((uint64_t)rng[0], (uint64_t)rng[1], site);
                const double tol = dt == TT_BF16 ? 0x1p-8 : dt == TT_F32 ? 0x1p-23 : 1e-15;
                int64_t wrong_mask = 0, wrong_value = 0, dropped = 0;
                for (int64_t i = 0; i < NEL; i++) {
                    const int k = keep_def(key, i, p);
                    const double xi = dt == TT_BF16 ? tt_bf16_to_f32(tt_f32_to_bf16((float)x[i])) /* x as dt holds it */
                                      : dt == TT_F32  ? (float)x[i]
                                                      : x[i];
                    dropped += !k;
                    wrong_mask += k != (y[i] != 0);
                    wrong_value += k && !(fabs(y[i] - xi / (1 - p)) <= tol * fabs(xi / (1 - p)));
                }
                CHECK_MSG(wrong_mask == 0 && wrong_value == 0,
                          "dropout p %g on %s in %s: %lld elements off the definition's mask, %lld kept values off "
                          "x / (1 - p)",
                          p, be->name, tt_dtype_name(dt), (long long)wrong_mask, (long long)wrong_value);
                CHECK_MSG(within_sigma(dropped, NEL, p), "dropout p %g on %s in %s: %lld of %d dropped", p, be->name,
                          tt_dtype_name(dt), (long long)dropped, NEL);
            }
    }
    free(x);
    free(y);
}

/* The same (seed, counter, site) again gives the same mask (a resumed run draws what it drew); another counter,
 * site or seed gives a mask that agrees with it only as often as two independent ones do (p^2 + (1-p)^2), also
 * shifted by one element and by one row (what an additive mixing of counter, site and index would repeat). */
static void test_streams(void)
{
    const double p = 0.3, q = p * p + (1 - p) * (1 - p);
    double *x = make_x(NEL), *base = th_alloc(NEL, sizeof *base), *y = th_alloc(NEL, sizeof *y);
    const int64_t rng[2] = {42, 9};
    const int failed = run_dropout("cpu", TT_F32, x, ROWS, COLS, rng, p, 5, base);
    static const struct {
        const char *what;
        int64_t seed, counter;
        uint64_t site;
    } other[] = {
        {"the next counter", 42, 10, 5}, {"the next site", 42, 9, 6}, {"another seed", 43, 9, 5}, {"counter 0, site 0", 42, 0, 0},
    };
    CHECK(!failed && run_dropout("cpu", TT_F32, x, ROWS, COLS, rng, p, 5, y) == 0 && memcmp(y, base, NEL * sizeof *y) == 0);
    for (size_t o = 0; o < sizeof other / sizeof other[0] && !failed; o++) {
        const int64_t r2[2] = {other[o].seed, other[o].counter};
        if (run_dropout("cpu", TT_F32, x, ROWS, COLS, r2, p, other[o].site, y)) continue;
        static const int64_t shifts[] = {0, 1, -1, COLS, -COLS};
        for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
            int64_t agree = 0, n = 0;
            for (int64_t i = 0; i < NEL; i++) {
                const int64_t j = i + shifts[s];
                if (j < 0 || j >= NEL) continue;
                agree += (y[i] != 0) == (base[j] != 0), n++;
            }
            CHECK_MSG(within_sigma(agree, n, q), "%s shifted by %lld: agrees with the mask at %lld of %lld elements "
                                                 "(independent masks: %.0f)",
                      other[o].what, (long long)shifts[s], (long long)agree, (long long)n, q * (double)n);
        }
    }
    free(x);
    free(base);
    free(y);
}

/* loss = ce_linear(dropout(x)) (through gelu inside a block when `block`): the graph, its inputs and what autodiff
 * gives for x and for the dropout's output */
typedef struct {
    tt_graph *g;
    tt_value *x, *rng, *w, *tg, *sc, *y, *gx, *gy;
    int n_fwd;
} bw_graph;
enum { BN = 48, BD = 40, BV = 11 };
static bw_graph bw_build(double p, uint64_t site, int block)
{
    bw_graph b = {.g = tt_graph_new()};
    const int64_t xs[2] = {BN, BD}, ws[2] = {BV, BD}, two = 2, n = BN, one = 1;
    b.x = tt_value_new(b.g, TT_ROLE_PARAM, TT_F32, 2, xs); /* autodiff gives no gradient to graph inputs */
    b.rng = tt_graph_input(b.g, "rng", TT_I64, 1, &two);
    b.w = tt_graph_input(b.g, "w", TT_F32, 2, ws), b.tg = tt_graph_input(b.g, "targets", TT_I32, 1, &n);
    b.sc = tt_graph_input(b.g, "scale", TT_F32, 1, &one);
    if (block) tt_graph_set_unit(b.g, tt_graph_add_unit(b.g, "layers.0", 1));
    b.y = tt_dropout(b.g, b.x, b.rng, p, site);
    tt_value *h = block ? tt_gelu(b.g, b.y) : b.y;
    tt_graph_set_unit(b.g, -1);
    tt_value *loss = tt_ce_linear(b.g, h, b.w, b.tg, b.sc, -100);
    tt_graph_mark_output(b.g, loss);
    b.n_fwd = b.g->n_nodes;
    tt_value *wrt[2] = {b.x, b.y}, *grads[2] = {NULL, NULL};
    CHECK_MSG(loss && tt_autodiff(b.g, 1, &loss, 2, wrt, grads) == 0 && grads[0] && grads[1], "%s", tt_last_error());
    b.gx = grads[0], b.gy = grads[1];
    if (b.gx) tt_graph_mark_output(b.g, b.gx), tt_graph_mark_output(b.g, b.gy), tt_graph_mark_output(b.g, b.y);
    return b;
}

/* run it on a backend with fixed inputs; y, gx, gy (BN*BD floats each) read back */
static int bw_run(const bw_graph *b, const tt_backend *be, const int64_t rng[2], float *y, float *gx, float *gy)
{
    float x[BN * BD], w[BV * BD], sc = 1.0f / BN;
    int32_t tg[BN];
    tt_rng r = {5, 0};
    for (int i = 0; i < BN * BD; i++) x[i] = (float)tt_rng_normal(&r);
    for (int i = 0; i < BV * BD; i++) w[i] = (float)(0.3 * tt_rng_normal(&r));
    for (int i = 0; i < BN; i++) tg[i] = (int32_t)tt_rng_below(&r, BV);
    tt_exec *e = b->g->failed || !b->gx ? NULL : tt_exec_new(b->g, be, NULL, TT_EXEC_GRAPH);
    const int rc = !e || tt_exec_write(e, b->x, x, sizeof x) || tt_exec_write(e, b->rng, rng, 2 * sizeof(int64_t)) ||
                   tt_exec_write(e, b->w, w, sizeof w) || tt_exec_write(e, b->tg, tg, sizeof tg) ||
                   tt_exec_write(e, b->sc, &sc, sizeof sc) || tt_exec_run(e) || tt_exec_read(e, b->y, y, sizeof x) ||
                   tt_exec_read(e, b->gx, gx, sizeof x) || tt_exec_read(e, b->gy, gy, sizeof x);
    CHECK_MSG(rc == 0, "dropout's backward on %s: %s", be->name, tt_last_error());
    tt_exec_free(e);
    return rc;
}

/* dx = dy * mask / (1 - p) with the forward's mask (the definition's), on every backend */
static void test_backward(void)
{
    const double p = 0.4;
    const uint64_t site = 77;
    const int64_t rng[2] = {2024, 31};
    const uint64_t key = tt_dropout_key(2024, 31, site);
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        bw_graph b = bw_build(p, site, 0);
        float y[BN * BD], gx[BN * BD], gy[BN * BD];
        if (bw_run(&b, be, rng, y, gx, gy) == 0) {
            int bad = 0, kept = 0, nonzero_dy = 0;
            for (int i = 0; i < BN * BD; i++) {
                const int k = keep_def(key, i, p);
                const double want = k ? gy[i] / (1 - p) : 0;
                kept += k, nonzero_dy += gy[i] != 0;
                bad += (y[i] != 0) != k || !(fabs(gx[i] - want) <= 1e-6 * fabs(want));
            }
            CHECK_MSG(bad == 0 && kept > 0 && kept < BN * BD && nonzero_dy == BN * BD,
                      "dropout's backward on %s: %d elements off dy * mask / (1 - p) (%d kept)", be->name, bad, kept);
        }
        tt_graph_free(b.g);
    }
}

/* Full activation checkpointing recomputes the dropout in the backward (it is pure): the same mask, so the
 * gradient is bitwise the one without checkpointing */
static void test_remat(void)
{
    const tt_backend *cpu = tt_backend_get("cpu");
    const int64_t rng[2] = {7, 1234567};
    bw_graph plain = bw_build(0.25, 3, 1), re = bw_build(0.25, 3, 1);
    tt_remat_stats st = {0};
    CHECK_MSG(tt_remat(re.g, re.n_fwd, TT_AC_FULL, &st) == 0, "%s", tt_last_error());
    int cloned = 0;
    for (int i = re.n_fwd; i < re.g->n_nodes; i++)
        cloned += re.g->nodes[i]->op == TT_OP_DROPOUT && strstr(re.g->nodes[i]->scope, "remat") != NULL;
    CHECK_MSG(cloned == 1, "the remat pass cloned %d dropout nodes into the backward (of %d clones)", cloned, st.nodes);
    float y0[BN * BD], gx0[BN * BD], gy0[BN * BD], y1[BN * BD], gx1[BN * BD], gy1[BN * BD];
    if (cpu && bw_run(&plain, cpu, rng, y0, gx0, gy0) == 0 && bw_run(&re, cpu, rng, y1, gx1, gy1) == 0)
        CHECK_MSG(memcmp(gx0, gx1, sizeof gx0) == 0 && memcmp(y0, y1, sizeof y0) == 0,
                  "recomputing the dropout changed the gradient");
    tt_graph_free(plain.g);
    tt_graph_free(re.g);
}

int main(void)
{
    test_builder();
    test_threshold();
    test_definition();
    test_streams();
    test_backward();
    test_remat();
    return th_done("test_dropout");
}

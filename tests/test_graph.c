/* test_graph.c — autodiff against finite differences on a composite f64
 * graph (run on the reference kernels, the ref backend), with one loss root
 * and with two (a main loss and a weighted auxiliary one), the three
 * execution modes agreeing on a model's loss and gradients, and the op table
 * agreeing with the op list. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/exec.h"
#include "harness.h"
#include "models/model.h"
#include "ops/ops.h"

static double *rand_buf(tt_rng *r, size_t n, double scale)
{
    double *p = tt_alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2 * tt_rng_uniform(r) - 1);
    return p;
}

/* x -> rmsnorm -> linear(W1), linear(W3) -> swiglu -> linear(W2) + x -> ce(Wh).
 * f64 graphs run only on the ref backend: its parameters are roots the
 * executor gives memory of its own, written from host copies before each run. */
static void test_autodiff_fd(void)
{
    enum { N = 5, D = 6, F = 7, V = 9 };
    tt_rng r = {7, 0};
    static const struct {
        const char *name;
        int ndim;
        int64_t shape[2];
        double scale;
    } spec[6] = {
        {"x", 2, {N, D}, 1},    {"g", 1, {D}, 1},       {"w1", 2, {F, D}, 0.5},
        {"w3", 2, {F, D}, 0.5}, {"w2", 2, {D, F}, 0.5}, {"wh", 2, {V, D}, 0.5},
    };
    double *w[6];
    int64_t cnt[6];
    for (int i = 0; i < 6; i++) {
        cnt[i] = tt_numel(spec[i].ndim, spec[i].shape);
        w[i] = rand_buf(&r, (size_t)cnt[i], spec[i].scale);
    }
    int32_t targets[N] = {1, 8, -100, 0, 4};
    double scale = 1.0 / 4;
    tt_graph *g = tt_graph_new();
    tt_value *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = tt_value_new(g, TT_ROLE_PARAM, TT_F64, spec[i].ndim, spec[i].shape);
        if (p[i]) snprintf(p[i]->name, sizeof p[i]->name, "%s", spec[i].name);
    }
    tt_value *tg = tt_graph_input(g, "targets", TT_I32, 1, (int64_t[]){N});
    tt_value *sc = tt_graph_input(g, "scale", TT_F64, 1, (int64_t[]){1});
    tt_value *h = tt_rmsnorm(g, p[0], p[1], 1e-5);
    tt_value *ff = tt_swiglu(g, tt_linear(g, h, p[2], NULL), tt_linear(g, h, p[3], NULL));
    tt_value *y = tt_add(g, p[0], tt_linear(g, ff, p[4], NULL));
    tt_value *loss = tt_ce_linear(g, y, p[5], tg, sc, -100);
    tt_graph_mark_output(g, loss);
    tt_value *grads[6];
    CHECK_MSG(tt_autodiff(g, 1, &loss, 6, p, grads) == 0, "%s", tt_last_error());
    for (int i = 0; i < 6; i++) {
        CHECK(grads[i] != NULL);
        if (grads[i]) tt_graph_mark_output(g, grads[i]);
    }
    const tt_backend *ref = tt_backend_get("ref");
    CHECK_MSG(ref != NULL, "%s", tt_last_error());
    tt_exec *e = ref ? tt_exec_new(g, ref, NULL, TT_EXEC_DEBUG) : NULL;
    CHECK_MSG(e != NULL, "%s", tt_last_error());
    int ok = e != NULL;
    for (int i = 0; i < 6 && ok; i++) ok = tt_exec_write(e, p[i], w[i], (size_t)cnt[i] * sizeof(double)) == 0;
    ok = ok && tt_exec_write(e, tg, targets, sizeof targets) == 0 && tt_exec_write(e, sc, &scale, sizeof scale) == 0;
    ok = ok && tt_exec_run(e) == 0;
    CHECK_MSG(ok, "%s", tt_last_error());
    double maxerr = 0;
    for (int i = 0; i < 6 && ok; i++) {
        if (!grads[i]) continue; /* already failed above */
        const int64_t n = cnt[i];
        double gcopy[64];
        CHECK_MSG(tt_exec_read(e, grads[i], gcopy, (size_t)n * sizeof(double)) == 0, "%s", tt_last_error());
        /* one run with w[i][k] moved by +-eps; the parameter is rewritten from the host copy */
        for (int64_t k = 0; k < n; k++) {
            double keep = w[i][k], eps = 1e-6, lp = 0, lm = 0;
            w[i][k] = keep + eps;
            CHECK(tt_exec_write(e, p[i], w[i], (size_t)n * sizeof(double)) == 0 && tt_exec_run(e) == 0 &&
                  tt_exec_read(e, loss, &lp, sizeof lp) == 0);
            w[i][k] = keep - eps;
            CHECK(tt_exec_write(e, p[i], w[i], (size_t)n * sizeof(double)) == 0 && tt_exec_run(e) == 0 &&
                  tt_exec_read(e, loss, &lm, sizeof lm) == 0);
            w[i][k] = keep;
            CHECK(tt_exec_write(e, p[i], w[i], (size_t)n * sizeof(double)) == 0);
            double fd = (lp - lm) / (2 * eps), err = fabs(fd - gcopy[k]) / (1e-6 + fabs(fd));
            if (err > maxerr) maxerr = err;
            CHECK_MSG(fabs(fd - gcopy[k]) < 1e-6 + 1e-5 * fabs(fd), "%s[%lld]: fd %g vs autodiff %g", spec[i].name,
                      (long long)k, fd, gcopy[k]);
        }
    }
    printf("autodiff vs finite differences: max relative error %.2e\n", maxerr);
    tt_exec_free(e);
    tt_graph_free(g);
    for (int i = 0; i < 6; i++) tt_free(w[i]);
}

/* Two loss roots: a shared trunk h = rmsnorm(x) feeds a main head (Wa,
 * weight 1/3 per scored token) and an auxiliary head (Wb, weight 0.1 per
 * token, on other targets), as a multi-token or auxiliary loss would. The
 * gradient autodiff gives for the two roots must be that of their sum, and a
 * value that is no loss op's loss is refused as a root. */
static void test_two_losses(void)
{
    enum { N = 4, D = 5, V = 7 };
    tt_rng r = {11, 0};
    const int64_t cnt[4] = {N * D, D, V * D, V * D};
    double *w[4];
    for (int i = 0; i < 4; i++) w[i] = rand_buf(&r, (size_t)cnt[i], i == 1 ? 1.0 : 0.7);
    int32_t ta[N] = {1, 6, -100, 3}, tb[N] = {0, 2, 5, 5};
    double sa = 1.0 / 3, sb = 0.1;
    tt_graph *g = tt_graph_new();
    static const int64_t shapes[4][2] = {{N, D}, {D, 0}, {V, D}, {V, D}};
    tt_value *p[4];
    for (int i = 0; i < 4; i++) p[i] = tt_value_new(g, TT_ROLE_PARAM, TT_F64, i == 1 ? 1 : 2, shapes[i]);
    tt_value *tga = tt_graph_input(g, "ta", TT_I32, 1, (int64_t[]){N}), *tgb = tt_graph_input(g, "tb", TT_I32, 1, (int64_t[]){N});
    tt_value *sca = tt_graph_input(g, "sa", TT_F64, 1, (int64_t[]){1}), *scb = tt_graph_input(g, "sb", TT_F64, 1, (int64_t[]){1});
    tt_value *h = tt_rmsnorm(g, p[0], p[1], 1e-5);
    tt_value *loss[2] = {tt_ce_linear(g, h, p[2], tga, sca, -100), tt_ce_linear(g, h, p[3], tgb, scb, -100)};
    for (int k = 0; k < 2; k++) tt_graph_mark_output(g, loss[k]);
    tt_value *grads[4];
    CHECK_MSG(tt_autodiff(g, 1, &h, 4, p, grads) != 0, "autodiff took a norm's output as a loss root");
    CHECK_MSG(tt_autodiff(g, 2, loss, 4, p, grads) == 0, "%s", tt_last_error());
    for (int i = 0; i < 4; i++) {
        CHECK(grads[i] != NULL);
        if (grads[i]) tt_graph_mark_output(g, grads[i]);
    }
    const tt_backend *ref = tt_backend_get("ref");
    tt_exec *e = ref ? tt_exec_new(g, ref, NULL, TT_EXEC_DEBUG) : NULL;
    int ok = e != NULL;
    for (int i = 0; i < 4 && ok; i++) ok = tt_exec_write(e, p[i], w[i], (size_t)cnt[i] * sizeof(double)) == 0;
    ok = ok && !tt_exec_write(e, tga, ta, sizeof ta) && !tt_exec_write(e, tgb, tb, sizeof tb) &&
         !tt_exec_write(e, sca, &sa, sizeof sa) && !tt_exec_write(e, scb, &sb, sizeof sb) && !tt_exec_run(e);
    CHECK_MSG(ok, "%s", tt_last_error());
    double maxerr = 0;
    for (int i = 0; i < 4 && ok; i++) {
        double an[64], l[2][2];
        CHECK(grads[i] && tt_exec_read(e, grads[i], an, (size_t)cnt[i] * sizeof(double)) == 0);
        for (int64_t k = 0; k < cnt[i]; k++) {
            const double keep = w[i][k], eps = 1e-6;
            for (int s = 0; s < 2; s++) {
                w[i][k] = keep + (s ? -eps : eps);
                CHECK(!tt_exec_write(e, p[i], w[i], (size_t)cnt[i] * sizeof(double)) && !tt_exec_run(e) &&
                      !tt_exec_read(e, loss[0], &l[s][0], sizeof(double)) &&
                      !tt_exec_read(e, loss[1], &l[s][1], sizeof(double)));
            }
            w[i][k] = keep;
            CHECK(tt_exec_write(e, p[i], w[i], (size_t)cnt[i] * sizeof(double)) == 0);
            const double fd = (l[0][0] + l[0][1] - l[1][0] - l[1][1]) / (2 * eps);
            maxerr = fmax(maxerr, fabs(fd - an[k]) / (1e-6 + fabs(fd)));
            CHECK_MSG(fabs(fd - an[k]) < 1e-6 + 1e-5 * fabs(fd), "two losses, param %d [%lld]: fd %g vs autodiff %g", i,
                      (long long)k, fd, an[k]);
        }
    }
    printf("two loss roots vs finite differences of their sum: max relative error %.2e\n", maxerr);
    tt_exec_free(e);
    tt_graph_free(g);
    for (int i = 0; i < 4; i++) tt_free(w[i]);
}

static void test_modes_agree(tt_arch_id arch)
{
    tt_model_cfg c = {arch, 32, 2, 4, arch == TT_ARCH_LLAMA ? 2 : 4, 8, 48, 40, 64, 1e-5, {10000, 0, 0, 0, 0, 0},
                      0, 1, arch == TT_ARCH_LLAMA, 0, {0}, {0}};
    tt_model *m = tt_model_new(&c);
    CHECK(m != NULL);
    if (!m) return;
    float *w = th_alloc(m->numel, sizeof(float)); /* the weights, flat layout */
    tt_param_store store = tt_model_host_store(w);
    CHECK_MSG(tt_model_init_weights(m, 42, &store) == 0, "%s", tt_last_error());
    enum { B = 2, T = 13 };
    int32_t ids[B * T], tg[B * T], pos[B * T], doc[B * T];
    tt_rng r = {3, 0};
    for (int i = 0; i < B * T; i++) {
        int t = i % T, d = t < 6 ? 0 : 1; /* two documents per row */
        ids[i] = (int32_t)tt_rng_below(&r, 40);
        doc[i] = d;
        pos[i] = d ? t - 6 : t;
        tg[i] = (t == 5 || t == T - 1) ? -100 : (int32_t)tt_rng_below(&r, 40);
    }
    float scale = 1.0f / (B * T - 2 * B);
    double loss[3];
    float *grad[3];
    size_t arena = 0;
    const tt_exec_mode modes[3] = {TT_EXEC_DEBUG, TT_EXEC_EAGER, TT_EXEC_GRAPH}; /* the reference first */
    for (int mode = 0; mode < 3; mode++) {
        /* debug = the reference kernels (ref backend) with NaN/Inf checks; eager and graph on cpu */
        const tt_backend *be = tt_backend_get(modes[mode] == TT_EXEC_DEBUG ? "ref" : "cpu");
        CHECK_MSG(be != NULL, "%s", tt_last_error());
        th_train_graph tgr = th_train_graph_build(m, B, T);
        tt_exec *e = be ? tt_exec_new(tgr.g, be, NULL, modes[mode]) : NULL;
        CHECK_MSG(e != NULL, "%s", tt_last_error());
        float l = NAN;
        grad[mode] = th_alloc(m->numel, sizeof(float));
        int ok = e && th_train_graph_upload(e, m, &tgr, w, ids, tg, pos, doc, &scale) == 0;
        CHECK_MSG(ok && tt_exec_run(e) == 0, "%s", tt_last_error());
        CHECK_MSG(ok && tt_exec_read(e, tgr.loss, &l, sizeof l) == 0, "%s", tt_last_error());
        if (ok && modes[mode] == TT_EXEC_GRAPH) {
            arena = tt_exec_arena_bytes(e);
            /* run twice: replay gives the same answer */
            float again = NAN;
            CHECK(tt_exec_run(e) == 0);
            CHECK(tt_exec_read(e, tgr.loss, &again, sizeof again) == 0);
            CHECK(l == again);
        }
        loss[mode] = l;
        if (ok) th_train_graph_grads(e, m, &tgr, grad[mode]); /* each read a CHECK */
        tt_exec_free(e);
        th_train_graph_free(&tgr);
    }
    printf("%s: loss debug %.7f eager %.7f graph %.7f, arena %zu bytes\n", tt_arch_name(arch), loss[0], loss[1],
           loss[2], arena);
    CHECK(fabs(loss[0] - log(40.0)) < 0.5); /* a fresh model is near uniform */
    for (int mode = 1; mode < 3; mode++) {
        CHECK_NEAR(loss[mode], loss[0], 1e-5);
        double maxd = 0, maxg = 0;
        for (size_t k = 0; k < m->numel; k++) {
            double d = fabs(grad[mode][k] - grad[0][k]);
            if (d > maxd) maxd = d;
            if (fabs(grad[0][k]) > maxg) maxg = fabs(grad[0][k]);
        }
        CHECK_MSG(maxd <= 1e-4 * maxg + 1e-7, "mode %d: max grad difference %g (max grad %g)", mode, maxd, maxg);
    }
    for (int i = 0; i < 3; i++) free(grad[i]);
    free(w);
    tt_model_free(m);
}

/* DESIGN.md's model FLOPs: 6*N + 12*L*d*T, N = all parameters but the input
 * embedding (a tied head counted once), checked on GPT-2 small's shape. */
static void test_flops_per_token(void)
{
    tt_model_cfg c = {TT_ARCH_GPT2, 768, 12, 12, 12, 64, 3072, 50304, 1024, 1e-5, {10000, 0, 0, 0, 0, 0}, 1, 0, 0, 0, {0}, {0}};
    int64_t mm = 0, n = tt_model_count_params(&c, &mm);
    CHECK(n == 124475904); /* 50304 x 768 + 1024 x 768 + 12 blocks + final norm */
    CHECK(mm == n - 1024 * 768); /* only the position table does no matmul */
    CHECK_NEAR(tt_model_flops_per_token(&c, 1024), 6.0 * (double)mm + 12.0 * 12 * 768 * 1024, 1);
}

/* The build makes every listed op have a definition; what it cannot see is a
 * definition's COMM flag against the list's TT_COMM mark, which the executor
 * and the passes read as one fact. */
static void test_op_list(void)
{
    static const int comm[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = 0,
#define TT_COMM(ID, name, attrs_bytes) [TT_OP_##ID] = 1,
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
    };
    for (int op = 0; op < TT_OP_COUNT; op++) {
        CHECK_MSG(tt_ops[op] && tt_ops[op]->flops, "op %s has no definition or no FLOP count", tt_op_name(op));
        CHECK_MSG(((tt_ops[op]->flags & TT_OPF_COMM) != 0) == comm[op], "op %s: the COMM flag and the list disagree",
                  tt_op_name(op));
        for (int o = 0; o < op; o++) CHECK_MSG(strcmp(tt_op_name(op), tt_op_name(o)), "two ops named %s", tt_op_name(op));
    }
}

/* Initial weights: parameter i is the stream (seed, i) drawn in element order, whatever the thread count (the
 * init runs the big parameters on all threads, each starting at its own counter); checked bit for bit against
 * the draws taken one after the other */
static void test_init_streams(void)
{
    tt_model_cfg c = {TT_ARCH_LLAMA, 64, 1, 4, 4, 16, 128, 4096, 64, 1e-5, {10000, 0, 0, 0, 0, 0},
                      0, 0, 0, 0, {0}, {0}};
    tt_model *m = tt_model_new(&c);
    CHECK(m != NULL);
    if (!m) return;
    float *w = th_alloc(m->numel, sizeof(float));
    tt_param_store store = tt_model_host_store(w);
    CHECK_MSG(tt_model_init_weights(m, 42, &store) == 0, "%s", tt_last_error());
    int64_t biggest = 0, bad = 0;
    for (int i = 0; i < m->n_params; i++) {
        const tt_param *p = &m->params[i];
        const int64_t n = tt_param_numel(p);
        if (n > biggest) biggest = n;
        tt_rng r = {tt_hash64(42, (uint64_t)i), 0};
        for (int64_t k = 0; k < n; k++) {
            const float want = p->init == TT_INIT_ONES    ? 1.0f
                               : p->init == TT_INIT_ZEROS ? 0.0f
                               : p->init == TT_INIT_UNIFORM ? (float)(p->std * (2.0 * tt_rng_uniform(&r) - 1.0))
                                                            : (float)(p->std * tt_rng_normal(&r));
            if (memcmp(&want, &w[p->offset + k], sizeof want) != 0) bad++;
        }
    }
    CHECK_MSG(bad == 0, "%lld initial weights differ from their streams drawn in order", (long long)bad);
    CHECK_MSG(biggest >= (1 << 16), "no parameter big enough (%lld) for the threaded init", (long long)biggest);
    free(w);
    tt_model_free(m);
}

int main(void)
{
    test_init_streams();
    test_op_list();
    test_flops_per_token();
    test_autodiff_fd();
    test_two_losses();
    test_modes_agree(TT_ARCH_LLAMA);
    test_modes_agree(TT_ARCH_GPT2);
    return th_done("test_graph");
}

/* test_graph.c — autodiff against finite differences on a composite f64
 * graph, and the three execution modes agreeing on a model's loss and
 * gradients, and the memory plan never overlapping live values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/exec.h"
#include "harness.h"
#include "models/model.h"

static double *rand_buf(tt_rng *r, size_t n, double scale)
{
    double *p = tt_alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * (2 * tt_rng_uniform(r) - 1);
    return p;
}

/* x -> rmsnorm -> linear(W1), linear(W3) -> swiglu -> linear(W2) + x -> ce(Wh) */
static void test_autodiff_fd(void)
{
    enum { N = 5, D = 6, F = 7, V = 9 };
    tt_rng r = {7, 0};
    tt_tensor t[6] = {
        {"x", TT_F64, 2, {N, D}, rand_buf(&r, N * D, 1)},   {"g", TT_F64, 1, {D}, rand_buf(&r, D, 1)},
        {"w1", TT_F64, 2, {F, D}, rand_buf(&r, F * D, 0.5)}, {"w3", TT_F64, 2, {F, D}, rand_buf(&r, F * D, 0.5)},
        {"w2", TT_F64, 2, {D, F}, rand_buf(&r, D * F, 0.5)}, {"wh", TT_F64, 2, {V, D}, rand_buf(&r, V * D, 0.5)},
    };
    int32_t targets[N] = {1, 8, -100, 0, 4};
    double scale = 1.0 / 4;
    tt_graph *g = tt_graph_new();
    tt_value *p[6];
    for (int i = 0; i < 6; i++) p[i] = tt_graph_bind(g, TT_ROLE_PARAM, &t[i]);
    tt_value *tg = tt_graph_input(g, "targets", TT_I32, 1, (int64_t[]){N});
    tt_value *sc = tt_graph_input(g, "scale", TT_F64, 1, (int64_t[]){1});
    tg->data = targets;
    sc->data = &scale;
    tt_value *h = tt_rmsnorm(g, p[0], p[1], 1e-5);
    tt_value *ff = tt_swiglu(g, tt_linear(g, h, p[2], NULL), tt_linear(g, h, p[3], NULL));
    tt_value *y = tt_add(g, p[0], tt_linear(g, ff, p[4], NULL));
    tt_value *loss = tt_ce_linear(g, y, p[5], tg, sc, -100);
    tt_graph_mark_output(g, loss);
    tt_value *grads[6];
    CHECK(tt_autodiff(g, loss, 6, p, grads) == 0);
    for (int i = 0; i < 6; i++) {
        CHECK(grads[i] != NULL);
        tt_graph_mark_output(g, grads[i]);
    }
    tt_exec *e = tt_exec_new(g, &tt_backend_cpu, TT_EXEC_DEBUG);
    CHECK(e && tt_exec_run(e) == 0);
    double maxerr = 0;
    for (int i = 0; i < 6; i++) {
        double *w = t[i].data, *gr = grads[i]->data;
        int64_t n = tt_numel(t[i].ndim, t[i].shape);
        double gcopy[64];
        memcpy(gcopy, gr, (size_t)n * sizeof(double));
        for (int64_t k = 0; k < n; k++) {
            double keep = w[k], eps = 1e-6;
            w[k] = keep + eps;
            tt_exec_run(e);
            double lp = *(double *)loss->data;
            w[k] = keep - eps;
            tt_exec_run(e);
            double lm = *(double *)loss->data;
            w[k] = keep;
            double fd = (lp - lm) / (2 * eps), err = fabs(fd - gcopy[k]) / (1e-6 + fabs(fd));
            if (err > maxerr) maxerr = err;
            CHECK_MSG(fabs(fd - gcopy[k]) < 1e-6 + 1e-5 * fabs(fd), "%s[%lld]: fd %g vs autodiff %g", t[i].name,
                      (long long)k, fd, gcopy[k]);
        }
    }
    printf("autodiff vs finite differences: max relative error %.2e\n", maxerr);
    tt_exec_free(e);
    tt_graph_free(g);
    for (int i = 0; i < 6; i++) tt_free(t[i].data);
}

/* Build one llama/gpt2 train graph (loss + grads) over a fixed batch. */
typedef struct {
    tt_graph *g;
    tt_value *loss, **grads;
} train_graph;

static train_graph build(const tt_model *m, int B, int T, int32_t *ids, int32_t *tg, int32_t *pos, int32_t *doc,
                         float *scale)
{
    train_graph tgr = {tt_graph_new(), NULL, calloc((size_t)m->n_params, sizeof(tt_value *))};
    tt_graph *g = tgr.g;
    tt_value **vals = calloc((size_t)m->n_params, sizeof *vals);
    tt_model_bind(g, m, vals);
    int64_t n = (int64_t)B * T;
    tt_fwd_inputs in = {B, T, tt_graph_input(g, "ids", TT_I32, 1, &n), tt_graph_input(g, "pos", TT_I32, 1, &n),
                        tt_graph_input(g, "doc", TT_I32, 1, &n), NULL, NULL, NULL};
    in.ids->data = ids;
    in.pos->data = pos;
    in.doc->data = doc;
    tt_value *targets = tt_graph_input(g, "targets", TT_I32, 1, &n);
    targets->data = tg;
    tt_value *sc = tt_graph_input(g, "scale", TT_F32, 1, (int64_t[]){1});
    sc->data = scale;
    tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
    tgr.loss = tt_ce_linear(g, h, head, targets, sc, -100);
    tt_graph_mark_output(g, tgr.loss);
    tt_autodiff(g, tgr.loss, m->n_params, vals, tgr.grads);
    for (int i = 0; i < m->n_params; i++) tt_graph_mark_output(g, tgr.grads[i]);
    free(vals);
    return tgr;
}

static void test_modes_agree(tt_arch_id arch)
{
    tt_model_cfg c = {arch, 32, 2, 4, arch == TT_ARCH_LLAMA ? 2 : 4, 8, 48, 40, 64, 1e-5, {10000, 0, 0, 0, 0, 0},
                      0, 1, arch == TT_ARCH_LLAMA, 0};
    tt_model *m = tt_model_new(&c);
    CHECK(m != NULL);
    if (!m) return;
    tt_model_init_weights(m, 42);
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
        train_graph tgr = build(m, B, T, ids, tg, pos, doc, &scale);
        tt_exec *e = tt_exec_new(tgr.g, &tt_backend_cpu, modes[mode]);
        CHECK_MSG(e != NULL, "%s", tt_last_error());
        CHECK_MSG(e && tt_exec_run(e) == 0, "%s", tt_last_error());
        if (modes[mode] == TT_EXEC_GRAPH) {
            arena = tt_exec_arena_bytes(e);
            /* run twice: replay gives the same answer */
            float first = *(float *)tgr.loss->data;
            CHECK(tt_exec_run(e) == 0);
            CHECK(first == *(float *)tgr.loss->data);
        }
        loss[mode] = *(float *)tgr.loss->data;
        grad[mode] = malloc(m->numel * sizeof(float));
        size_t off = 0;
        for (int i = 0; i < m->n_params; i++) {
            size_t cnt = (size_t)tt_numel(m->params[i].t.ndim, m->params[i].t.shape);
            if (tgr.grads[i]) memcpy(grad[mode] + off, tgr.grads[i]->data, cnt * sizeof(float));
            else memset(grad[mode] + off, 0, cnt * sizeof(float));
            off += cnt;
        }
        tt_exec_free(e);
        free(tgr.grads);
        tt_graph_free(tgr.g);
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
    tt_model_free(m);
}

/* DESIGN.md's model FLOPs: 6*N + 12*L*d*T, N = all parameters but the input
 * embedding (a tied head counted once), checked on GPT-2 small's shape. */
static void test_flops_per_token(void)
{
    tt_model_cfg c = {TT_ARCH_GPT2, 768, 12, 12, 12, 64, 3072, 50304, 1024, 1e-5, {10000, 0, 0, 0, 0, 0}, 1, 0, 0, 0};
    int64_t mm = 0, n = tt_model_count_params(&c, &mm);
    CHECK(n == 124475904); /* 50304 x 768 + 1024 x 768 + 12 blocks + final norm */
    CHECK(mm == n - 1024 * 768); /* only the position table does no matmul */
    CHECK_NEAR(tt_model_flops_per_token(&c, 1024), 6.0 * (double)mm + 12.0 * 12 * 768 * 1024, 1);
}

int main(void)
{
    test_flops_per_token();
    test_autodiff_fd();
    test_modes_agree(TT_ARCH_LLAMA);
    test_modes_agree(TT_ARCH_GPT2);
    return th_done("test_graph");
}

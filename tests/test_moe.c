/* test_moe.c — the Mixture-of-Experts layer as a whole (its ops one by one
 * are in test_backend_ops.c):
 *   - a 1-expert top-1 MoE model equals the dense model with the same
 *     weights: the same loss and the same gradients (the router's is zero),
 *     on cpu and ref;
 *   - the balancing bias steers selection and not the gate weights, and the
 *     update of tt_moe_balance_step moves a skewed router's load toward
 *     balance;
 *   - parameter counts: active parameters count top_k / n_experts of the
 *     routed experts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "graph/exec.h"
#include "harness.h"
#include "train/moe_balance.h"

static tt_model_cfg tiny(int moe)
{
    tt_model_cfg c = {TT_ARCH_LLAMA, 32, 2, 4, 2, 8, 48, 40, 64, 1e-5, {10000, 0, 0, 0, 0, 0}, 0, 0, 0, 0, {0}, {0}};
    if (moe) c.moe = (tt_moe_cfg){.n_experts = 1, .top_k = 1, .ffn_dim = 48, .route_norm = 1, .route_scale = 1.0};
    return c;
}

/* loss and every gradient of model m with weights w on a fixed batch */
static double run_model(const tt_model *m, const float *w, const char *backend, float *grad)
{
    enum { B = 2, T = 16 };
    int32_t ids[B * T], tgt[B * T], pos[B * T], doc[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7 + 3) % 40, tgt[i] = (i * 11 + 5) % 40, pos[i] = i % T, doc[i] = i / T;
    const float scale = 1.0f / (B * T);
    th_train_graph t = th_train_graph_build(m, B, T);
    tt_exec *e = tt_exec_new(t.g, tt_backend_get(backend), NULL, TT_EXEC_GRAPH);
    CHECK_MSG(e != NULL, "%s", tt_last_error());
    float loss = NAN;
    if (e && !th_train_graph_upload(e, m, &t, w, ids, tgt, pos, doc, &scale)) {
        CHECK_MSG(tt_exec_run(e) == 0, "%s: %s", backend, tt_last_error());
        tt_exec_read(e, t.loss, &loss, sizeof loss);
        th_train_graph_grads(e, m, &t, grad);
    }
    tt_exec_free(e);
    th_train_graph_free(&t);
    return loss;
}

/* dense parameter name -> the 1-expert model's, for the MLP */
static void moe_name(const char *dense, char *out, size_t cap)
{
    int l;
    char w[8];
    if (sscanf(dense, "layers.%d.feed_forward.%2[w0-9].weight", &l, w) == 2)
        snprintf(out, cap, "layers.%d.moe.experts.0.%s.weight", l, w);
    else snprintf(out, cap, "%s", dense);
}

static void test_one_expert_is_dense(void)
{
    tt_model_cfg dc = tiny(0), mc = tiny(1);
    tt_model *dm = tt_model_new(&dc), *mm = tt_model_new(&mc);
    CHECK(dm && mm);
    if (!dm || !mm) return;
    float *mw = th_alloc(mm->numel, sizeof(float)), *dw = th_alloc(dm->numel, sizeof(float));
    float *mg = th_alloc(mm->numel, sizeof(float)), *dg = th_alloc(dm->numel, sizeof(float));
    tt_param_store ms = tt_model_host_store(mw);
    CHECK(tt_model_init_weights(mm, 7, &ms) == 0);
    /* the dense model's weights are the MoE model's, the expert's as the MLP */
    for (int i = 0; i < dm->n_params; i++) {
        char name[96];
        moe_name(dm->params[i].name, name, sizeof name);
        const int j = tt_model_find(mm, name);
        CHECK_MSG(j >= 0 && tt_param_numel(&mm->params[j]) == tt_param_numel(&dm->params[i]), "no %s", name);
        if (j >= 0) memcpy(dw + dm->params[i].offset, mw + mm->params[j].offset, sizeof(float) * (size_t)tt_param_numel(&dm->params[i]));
    }
    static const char *const backends[] = {"cpu", "ref"};
    for (int b = 0; b < 2; b++) {
        const double ld = run_model(dm, dw, backends[b], dg), lm = run_model(mm, mw, backends[b], mg);
        CHECK_MSG(fabs(ld - lm) <= 1e-6 * fabs(ld), "%s: dense loss %.9g, 1-expert MoE loss %.9g", backends[b], ld, lm);
        double worst = 0, router = 0;
        for (int i = 0; i < dm->n_params; i++) {
            char name[96];
            moe_name(dm->params[i].name, name, sizeof name);
            const int j = tt_model_find(mm, name);
            if (j < 0) continue;
            double mag = 1e-12, err = 0;
            for (int64_t x = 0; x < tt_param_numel(&dm->params[i]); x++) {
                const double a = dg[dm->params[i].offset + x], c = mg[mm->params[j].offset + x];
                mag = fmax(mag, fabs(a)), err = fmax(err, fabs(a - c));
            }
            worst = fmax(worst, err / mag);
        }
        for (int i = 0; i < mm->n_params; i++)
            if (strstr(mm->params[i].name, "router"))
                for (int64_t x = 0; x < tt_param_numel(&mm->params[i]); x++) router = fmax(router, fabs(mg[mm->params[i].offset + x]));
        CHECK_MSG(worst < 1e-5, "%s: gradients of the 1-expert MoE differ from the dense model's by %.3g", backends[b], worst);
        CHECK_MSG(router < 1e-7, "%s: the router of one expert has gradient %.3g", backends[b], router);
    }
    free(mw), free(dw), free(mg), free(dg);
    tt_model_free(dm);
    tt_model_free(mm);
}

/* A skewed router over 8 experts, every token routed with the balancing bias
 * of tt_moe_balance; returns the last load max/mean. */
static void test_bias_balances(void)
{
    enum { N = 256, E = 8, K = 2 };
    tt_model_cfg c = tiny(1);
    c.moe = (tt_moe_cfg){.n_experts = E, .top_k = K, .ffn_dim = 8, .route_norm = 1, .route_scale = 1.0, .has_bias = 1};
    tt_model *m = tt_model_new(&c);
    CHECK(m != NULL);
    if (!m) return;
    float *w = th_alloc(m->numel, sizeof(float));
    tt_param_store st = tt_model_host_store(w);
    tt_moe_balance bal;
    CHECK(tt_moe_balance_init(&bal, m, 1e-2, 1, 0) == 0 && bal.n == 2 && bal.bias[0] >= 0);

    tt_graph *g = tt_graph_new();
    tt_value *logits = tt_graph_input(g, "logits", TT_F32, 2, (int64_t[]){N, E});
    tt_value *bias = tt_graph_input(g, "bias", TT_F32, 1, (int64_t[]){E});
    tt_moe_attrs a = {E, K, TT_SCORE_SOFTMAX, 1, 0, 0, 1.0};
    tt_value *expert, *scores, *perm, *pos, *off;
    tt_value *gate = tt_moe_route(g, logits, bias, &a, &expert, &scores);
    CHECK(tt_moe_sort(g, expert, E, &perm, &pos, &off) == 0);
    tt_graph_mark_output(g, gate), tt_graph_mark_output(g, expert), tt_graph_mark_output(g, scores);
    tt_graph_mark_output(g, off);
    tt_exec *e = tt_exec_new(g, tt_backend_get("cpu"), NULL, TT_EXEC_GRAPH);
    CHECK_MSG(e != NULL, "%s", tt_last_error());
    if (!e) return;
    static float lg[N * E];
    tt_rng r = {5, 0};
    for (int i = 0; i < N * E; i++) lg[i] = (float)(0.5 * tt_rng_normal(&r)) + (i % E == 0 ? 2.0f : 0.0f); /* expert 0 favoured */
    tt_exec_write(e, logits, lg, sizeof lg);

    /* a large bias on expert 7 makes every token choose it, at its unbiased score's weight */
    float b[E] = {0, 0, 0, 0, 0, 0, 0, 10};
    int32_t ex[N * K], o[E + 1];
    float gw[N * K], sc[N * E];
    tt_exec_write(e, bias, b, sizeof b);
    CHECK(tt_exec_run(e) == 0);
    tt_exec_read(e, expert, ex, sizeof ex), tt_exec_read(e, gate, gw, sizeof gw), tt_exec_read(e, scores, sc, sizeof sc);
    int all7 = 1;
    double werr = 0;
    for (int t = 0; t < N; t++) {
        all7 &= ex[t * K] == 7;
        const double z = sc[t * E + ex[t * K]] + sc[t * E + ex[t * K + 1]];
        for (int j = 0; j < K; j++) werr = fmax(werr, fabs(gw[t * K + j] - sc[t * E + ex[t * K + j]] / z));
    }
    CHECK_MSG(all7, "a bias of 10 on expert 7 does not make every token choose it");
    CHECK_MSG(werr < 1e-6, "the gate weights depend on the bias (off the unbiased scores by %.3g)", werr);

    /* the balancing update, from zero: the load of a skewed router comes toward the mean */
    memset(w, 0, m->numel * sizeof(float));
    double first = 0, last = 0;
    for (int it = 0; it < 300; it++) {
        CHECK(st.read(st.ctx, m, bal.bias[0], b) == 0);
        tt_exec_write(e, bias, b, sizeof b);
        if (tt_exec_run(e) || tt_exec_read(e, off, o, sizeof o)) break;
        for (int x = 0; x < E; x++) bal.counts[x] = o[x + 1] - o[x]; /* layer 0 only */
        CHECK(tt_moe_balance_step(&bal, m, &st, NULL) == 0);
        if (it == 0) first = bal.load_max[0];
        last = bal.load_max[0];
    }
    CHECK(st.read(st.ctx, m, bal.bias[0], b) == 0);
    double mean = 0;
    for (int x = 0; x < E; x++) mean += b[x] / E;
    CHECK_MSG(fabs(mean) < 1e-5, "the bias update is not centred: mean %.3g", mean);
    CHECK_MSG(b[0] < 0, "the over-loaded expert's bias did not go down (%.4f)", b[0]);
    CHECK_MSG(first > 2.0 && last < 1.3, "load max/mean %.2f at first, %.2f after 300 updates", first, last);
    printf("  balancing: load max/mean %.2f -> %.2f, bias of the favoured expert %.3f\n", first, last, b[0]);
    tt_exec_free(e);
    tt_graph_free(g);
    tt_moe_balance_free(&bal);
    free(w);
    tt_model_free(m);
}

static void test_counts(void)
{
    tt_model_cfg c = tiny(1);
    c.moe = (tt_moe_cfg){.n_experts = 8, .top_k = 2, .ffn_dim = 16, .n_shared = 1, .shared_ffn = 16, .route_norm = 1, .route_scale = 1};
    int64_t active = 0, total = tt_model_count_active(&c, NULL, &active);
    /* per layer: 8 experts of 3 * 16 * 32, of which 2 active */
    const int64_t expert = 3 * 16 * 32;
    CHECK_MSG(total - active == 2 * 6 * expert, "total %lld, active %lld", (long long)total, (long long)active);
}

int main(void)
{
    test_one_expert_is_dense();
    test_bias_balances();
    test_counts();
    return th_done("test_moe");
}

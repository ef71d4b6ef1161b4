/* test_fuse.c — the fusion passes (fuse, and fold_accum after autodiff):
 * what they merge on each architecture, and that a training step with them
 * gives the loss and the gradients of the same step without them: in fp32
 * within rounding, in bf16 within bf16's, with the reference kernels (the ref
 * backend in debug mode) and in eager mode too. Also a graph whose
 * intermediate value has a second reader is left unfused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "graph/passes/fuse.h"
#include "harness.h"
#include "models/model.h"
#include "train/step_graph.h"

enum { B = 2, T = 37, V = 50, L = 2 };

typedef struct {
    int32_t ids[B * T], tg[B * T], pos[B * T], doc[B * T];
} batch;

static void make_batch(batch *b)
{
    tt_rng r = {9, 0};
    for (int i = 0; i < B * T; i++) {
        int t = i % T, d = t < 20 ? 0 : 1; /* two documents per row */
        b->ids[i] = (int32_t)tt_rng_below(&r, V);
        b->doc[i] = d;
        b->pos[i] = d ? t - 20 : t;
        b->tg[i] = t == T - 1 ? -100 : (int32_t)tt_rng_below(&r, V);
    }
}

typedef enum { LLAMA, QWEN2, QWEN3, GPT2, MOE, N_VARIANTS } variant;
static const char *const names[] = {"llama (GQA)", "llama + qkv bias", "llama + q/k norm", "gpt2",
                                    "llama + MoE (4 experts, top-2, a shared expert)"};

static tt_model *make_model(variant va, float **weights)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = va == GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    c.dim = 64;
    c.n_layers = L;
    c.n_heads = 4;
    c.n_kv_heads = va == GPT2 ? 4 : 2;
    c.head_dim = 16;
    c.ffn_dim = 96;
    c.vocab_size = V;
    c.max_seq_len = 64;
    c.norm_eps = 1e-5;
    c.rope.theta = 10000;
    c.tie_embeddings = va == GPT2 || va == QWEN2;
    c.qkv_bias = va == QWEN2;
    c.qk_norm = va == QWEN3;
    if (va == MOE) /* the shared expert's gate and up fuse as a dense MLP's do */
        c.moe = (tt_moe_cfg){.n_experts = 4, .top_k = 2, .ffn_dim = 32, .n_shared = 1, .shared_ffn = 32,
                             .route_norm = 1, .route_scale = 1.0};
    tt_model *m = tt_model_new(&c);
    *weights = NULL;
    if (m) {
        /* the weights in host memory, flat layout */
        float *w = th_alloc(m->numel, sizeof(float));
        tt_param_store store = tt_model_host_store(w);
        CHECK_MSG(tt_model_init_weights(m, 7, &store) == 0, "%s", tt_last_error());
        for (size_t i = 0; i < m->numel; i++) w[i] += 0.01f * (float)((i * 2654435761u) % 7) - 0.03f;
        *weights = w;
    }
    return m;
}

typedef struct {
    float loss, *grad;
    tt_fuse_stats st;
    int nodes, folded;
} result;

/* one micro-step, fused or not: its loss and the gradient buffer. Debug mode
 * runs on the reference kernels (the ref backend), the others on cpu. */
static result step(const tt_model *m, const float *weights, batch *bt, tt_dtype dt, tt_exec_mode mode, int fuse)
{
    result r = {0};
    const tt_backend *be = tt_backend_get(mode == TT_EXEC_DEBUG ? "ref" : "cpu");
    CHECK_MSG(be != NULL, "%s", tt_last_error());
    if (!be) return r;
    tt_queue *q = be->queue_new();
    CHECK_MSG(q != NULL, "%s", tt_last_error());
    if (!q) return r;
    tt_step_cfg cfg = {.B = B, .T = T, .act_dtype = dt, .no_fuse = !fuse};
    tt_train_state st;
    tt_step_graph sg;
    int rc = tt_state_init(&st, m, be, q, 1);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (rc == 0) {
        CHECK_MSG((rc = tt_state_upload(&st, TT_STATE_PARAM, weights)) == 0, "%s", tt_last_error());
        if (rc == 0) {
            rc = tt_build_micro_step(&sg, m, &st, &cfg, 1, mode, TT_AC_NONE, NULL);
            CHECK_MSG(rc == 0, "%s", tt_last_error());
        }
        if (rc == 0) {
            double loss = 0;
            CHECK_MSG(tt_step_set_batch(&sg, bt->ids, bt->tg, bt->pos, bt->doc, 1.0f / (B * T - B), 1.0f) == 0, "%s",
                      tt_last_error());
            CHECK_MSG(tt_exec_run(sg.exec) == 0, "%s", tt_last_error());
            CHECK_MSG(tt_step_loss(&sg, &loss) == 0, "%s", tt_last_error());
            r.loss = (float)loss;
            r.grad = th_alloc(m->numel, sizeof(float));
            CHECK_MSG(tt_state_download(&st, TT_STATE_GRAD, r.grad) == 0, "%s", tt_last_error());
            r.st = sg.fused;
            r.folded = sg.folded;
            r.nodes = sg.g->n_nodes;
            tt_step_graph_free(&sg);
        }
        tt_state_free(&st);
    }
    be->queue_free(q);
    return r;
}

static void compare(variant va)
{
    float *w = NULL;
    tt_model *m = make_model(va, &w);
    CHECK(m != NULL);
    if (!m) return;
    batch bt;
    make_batch(&bt);
    static const struct { tt_dtype dt; tt_exec_mode mode; double tl, tg; const char *what; } runs[] = {
        {TT_F32, TT_EXEC_GRAPH, 1e-5, 1e-4, "fp32"},
        {TT_BF16, TT_EXEC_GRAPH, 1e-2, 6e-2, "bf16"},
        {TT_F32, TT_EXEC_DEBUG, 1e-6, 1e-5, "reference kernels"},
        {TT_BF16, TT_EXEC_EAGER, 1e-2, 6e-2, "bf16 eager"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        result f = step(m, w, &bt, runs[k].dt, runs[k].mode, 1), u = step(m, w, &bt, runs[k].dt, runs[k].mode, 0);
        if (!f.grad || !u.grad) {
            free(f.grad), free(u.grad);
            continue;
        }
        /* what merges where */
        const tt_fuse_stats want = {
            .qkv = va == QWEN3 ? 0 : L,
            .gate_up = va == GPT2 ? 0 : L,
            .add_norm = va == GPT2 ? 0 : 2 * L, /* each block's two norms but the first, and the final norm */
        };
        CHECK_MSG(f.st.qkv == want.qkv && f.st.gate_up == want.gate_up && f.st.add_norm == want.add_norm,
                  "%s: fused %d qkv, %d gate/up, %d add+norm; want %d, %d, %d", names[va], f.st.qkv, f.st.gate_up,
                  f.st.add_norm, want.qkv, want.gate_up, want.add_norm);
        CHECK(u.st.qkv == 0 && u.st.gate_up == 0 && u.st.add_norm == 0 && u.folded == 0);
        /* every weight gradient but the norms' (rmsnorm_bwd keeps its accum) is made in place */
        CHECK_MSG(f.folded > 0, "%s: no accum folded", names[va]);
        CHECK_MSG(f.nodes < u.nodes, "%s: %d nodes fused, %d not", names[va], f.nodes, u.nodes);
        double dmax = 0, gmax = 0;
        size_t at = 0;
        for (size_t i = 0; i < m->numel; i++) {
            const double d = fabs((double)f.grad[i] - u.grad[i]);
            if (!(d <= dmax)) dmax = d, at = i;
            gmax = fmax(gmax, fabs(u.grad[i]));
        }
        CHECK_MSG(fabs(f.loss - u.loss) <= runs[k].tl * fabs(u.loss), "%s %s: loss %.7g fused, %.7g not", names[va],
                  runs[k].what, f.loss, u.loss);
        CHECK_MSG(gmax > 0 && dmax <= runs[k].tg * gmax, "%s %s: gradients differ by %.3g (max %.3g) at %zu", names[va],
                  runs[k].what, dmax, gmax, at);
        free(f.grad), free(u.grad);
    }
    free(w);
    tt_model_free(m);
}

/* q's projection read by something besides the attention: no qkv fusion, and
 * add + norm where the sum is also the graph's output: fused, sum kept. The
 * weights are views of one parameter root, q, k and v back to back (what the
 * pass looks for), then the norm's; without the second reader of q the same
 * graph fuses q, k and v, so the first result is the second reader's doing.
 * With attention sinks (GPT-OSS), which attention_qkv has none of, q, k and v
 * stay apart too. */
static void build_partial(int second_reader, int sinks)
{
    tt_graph *g = tt_graph_new();
    int64_t n = 8, total = 3 * 16 * 16 + 16;
    tt_value *x = tt_graph_input(g, "x", TT_F32, 2, (int64_t[]){8, 16}), *d = tt_graph_input(g, "d", TT_F32, 2, (int64_t[]){8, 16});
    tt_value *doc = tt_graph_input(g, "doc", TT_I32, 1, &n);
    tt_value *root = tt_value_new(g, TT_ROLE_PARAM, TT_F32, 1, &total);
    const int64_t wshape[2] = {16, 16}, nshape[1] = {16};
    const size_t wbytes = 16 * 16 * sizeof(float);
    tt_value *wq = tt_value_view(g, root, 0, TT_F32, 2, wshape), *wk = tt_value_view(g, root, wbytes, TT_F32, 2, wshape);
    tt_value *wv = tt_value_view(g, root, 2 * wbytes, TT_F32, 2, wshape);
    tt_value *wn = tt_value_view(g, root, 3 * wbytes, TT_F32, 1, nshape);
    CHECK(wq && wk && wv && wn && wk->base == root && wv->offset == 2 * wbytes);
    tt_value *s = tt_add(g, x, d), *h = tt_rmsnorm(g, s, wn, 1e-5);
    tt_value *q = tt_linear(g, h, wq, NULL), *k = tt_linear(g, h, wk, NULL), *v = tt_linear(g, h, wv, NULL);
    tt_value *sk = sinks ? tt_graph_input(g, "sinks", TT_F32, 1, (int64_t[]){2}) : NULL;
    tt_value *o = tt_attention_scaled(g, q, k, v, doc, 1, 8, 2, 2, 8, 0, 0, 0, sk);
    tt_graph_mark_output(g, o);
    if (second_reader) tt_graph_mark_output(g, q); /* a second reader of q */
    tt_graph_mark_output(g, s);
    tt_fuse_stats st = {0};
    CHECK(!g->failed && tt_fuse(g, &st) == 0);
    CHECK_MSG(st.qkv == (second_reader || sinks ? 0 : 1) && st.add_norm == 1,
              "%s second reader of q%s: qkv %d, add+norm %d", second_reader ? "with a" : "without a",
              sinks ? ", sinks" : "", st.qkv, st.add_norm);
    CHECK(!sinks || (o->producer && o->producer->op == TT_OP_ATTENTION && o->producer->in[4] == sk));
    CHECK(s->producer && s->producer->op == TT_OP_ADD_RMSNORM && h->producer == s->producer);
    tt_graph_free(g);
}

static void test_partial(void)
{
    build_partial(1, 0);
    build_partial(0, 0); /* the control: the same weights fuse when nothing else reads q */
    build_partial(0, 1);
}

int main(void)
{
    for (int va = 0; va < N_VARIANTS; va++) compare((variant)va);
    test_partial();
    return th_done("test_fuse");
}

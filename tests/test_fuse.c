/* test_fuse.c — the fusion passes (fuse, and fold_accum after autodiff):
 * what they merge on each architecture, and that a training step with them
 * gives the loss and the gradients of the same step without them: in fp32
 * within rounding, in bf16 within bf16's, with the reference kernels (debug
 * mode) and in eager mode too. Also a graph whose intermediate value has a
 * second reader is left unfused. */
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

typedef enum { LLAMA, QWEN2, QWEN3, GPT2, N_VARIANTS } variant;
static const char *const names[] = {"llama (GQA)", "llama + qkv bias", "llama + q/k norm", "gpt2"};

static tt_model *make_model(variant va)
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
    tt_model *m = tt_model_new(&c);
    if (m) {
        tt_model_init_weights(m, 7);
        for (size_t i = 0; i < m->numel; i++) m->storage[i] += 0.01f * (float)((i * 2654435761u) % 7) - 0.03f;
    }
    return m;
}

typedef struct {
    float loss, *grad;
    tt_fuse_stats st;
    int nodes, folded;
} result;

/* one micro-step, fused or not: its loss and the gradient buffer */
static result step(const tt_model *m, batch *bt, tt_dtype dt, tt_exec_mode mode, int fuse)
{
    result r = {0};
    tt_step_io io = {B, T, bt->ids, bt->tg, bt->pos, bt->doc, 1.0f / (B * T - B), {0}, dt, !fuse};
    tt_optim_state os;
    tt_step_graph sg;
    CHECK(tt_optim_state_init(&os, m) == 0);
    int rc = tt_build_micro_step(&sg, m, &os, &io, 1, &tt_backend_cpu, mode, TT_AC_NONE);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (rc == 0) {
        CHECK_MSG(tt_exec_run(sg.exec) == 0, "%s", tt_last_error());
        r.loss = *(float *)sg.loss->data;
        r.grad = malloc(m->numel * sizeof(float));
        memcpy(r.grad, os.grad, m->numel * sizeof(float));
        r.st = sg.fused;
        r.folded = sg.folded;
        r.nodes = sg.g->n_nodes;
        tt_step_graph_free(&sg);
    }
    tt_optim_state_free(&os);
    return r;
}

static void compare(variant va)
{
    tt_model *m = make_model(va);
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
        result f = step(m, &bt, runs[k].dt, runs[k].mode, 1), u = step(m, &bt, runs[k].dt, runs[k].mode, 0);
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
    tt_model_free(m);
}

/* q's projection read by something besides its RoPE: no qkv fusion, and
 * add + norm where the sum is also the graph's output: fused, sum kept. */
static void test_partial(void)
{
    tt_graph *g = tt_graph_new();
    int64_t n = 8;
    float w[3 * 16 * 16], nw[16];
    tt_tensor tq = {.name = "wq", .dtype = TT_F32, .ndim = 2, .shape = {16, 16}, .data = w};
    tt_tensor tk = tq, tv = tq, tn = {.name = "norm", .dtype = TT_F32, .ndim = 1, .shape = {16}, .data = nw};
    tk.data = w + 256, tv.data = w + 512;
    tt_value *x = tt_graph_input(g, "x", TT_F32, 2, (int64_t[]){8, 16}), *d = tt_graph_input(g, "d", TT_F32, 2, (int64_t[]){8, 16});
    tt_value *doc = tt_graph_input(g, "doc", TT_I32, 1, &n);
    tt_value *wq = tt_graph_bind(g, TT_ROLE_PARAM, &tq), *wk = tt_graph_bind(g, TT_ROLE_PARAM, &tk);
    tt_value *wv = tt_graph_bind(g, TT_ROLE_PARAM, &tv), *wn = tt_graph_bind(g, TT_ROLE_PARAM, &tn);
    tt_value *s = tt_add(g, x, d), *h = tt_rmsnorm(g, s, wn, 1e-5);
    tt_value *q = tt_linear(g, h, wq, NULL), *k = tt_linear(g, h, wk, NULL), *v = tt_linear(g, h, wv, NULL);
    tt_value *o = tt_attention(g, q, k, v, doc, 1, 8, 2, 2, 8, 0);
    tt_graph_mark_output(g, o);
    tt_graph_mark_output(g, q); /* a second reader of q */
    tt_graph_mark_output(g, s);
    tt_fuse_stats st = {0};
    CHECK(!g->failed && tt_fuse(g, &st) == 0);
    CHECK_MSG(st.qkv == 0 && st.add_norm == 1, "qkv %d, add+norm %d", st.qkv, st.add_norm);
    CHECK(s->producer && s->producer->op == TT_OP_ADD_RMSNORM && h->producer == s->producer);
    tt_graph_free(g);
}

int main(void)
{
    for (int va = 0; va < N_VARIANTS; va++) compare((variant)va);
    test_partial();
    return th_done("test_fuse");
}

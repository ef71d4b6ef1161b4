/* test_lora.c — LoRA's adapters and its pass, against the math they stand for:
 * with B = 0 the step's loss is the base model's, bit for bit; the adapters'
 * gradients equal central finite differences of the loss; the loss equals the
 * plain model's with each adapter merged into its weight (W + s B A); no
 * weight-gradient product is made for a frozen weight; training steps leave
 * the frozen base's bytes as they were; a bf16 base keeps its linear weights
 * in bf16. Target lists: PEFT's names, all-linear, a name that matches
 * nothing (the error lists what exists), a routed expert (refused). Each on
 * the dense llama block (q/k/v and gate/up fused), Qwen2's (q/k/v biases,
 * tied head) and an MoE block with a shared expert (attention and shared
 * expert adapted). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "harness.h"
#include "models/lora.h"
#include "train/step_graph.h"

enum { B = 2, T = 19, V = 40, L = 2 };

typedef struct {
    int32_t ids[B * T], tg[B * T], pos[B * T], doc[B * T];
} batch;

static void make_batch(batch *b)
{
    tt_rng r = {5, 0};
    for (int i = 0; i < B * T; i++) {
        b->ids[i] = (int32_t)tt_rng_below(&r, V);
        b->tg[i] = (int32_t)tt_rng_below(&r, V);
        b->pos[i] = i % T;
        b->doc[i] = i / T;
    }
}

typedef enum { LLAMA, QWEN2, MOE, N_VARIANTS } variant;
static const char *const names[] = {"llama", "qwen2 (q/k/v bias, tied)", "llama + MoE (shared expert)"};

static tt_model *make_model(variant va)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = TT_ARCH_LLAMA;
    c.dim = 32, c.n_layers = L, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8, c.ffn_dim = 48;
    c.vocab_size = V, c.max_seq_len = 64, c.norm_eps = 1e-5, c.rope.theta = 10000;
    c.tie_embeddings = va == QWEN2;
    c.qkv_bias = va == QWEN2;
    if (va == MOE)
        c.moe = (tt_moe_cfg){.n_experts = 4, .top_k = 2, .ffn_dim = 16, .n_shared = 1, .shared_ffn = 16,
                             .route_norm = 1, .route_scale = 1.0};
    tt_model *m = tt_model_new(&c);
    CHECK_MSG(m != NULL, "%s", tt_last_error());
    return m;
}

static tt_lora_spec spec_of(const char *const *targets, int n)
{
    tt_lora_spec s = {.rank = 3, .alpha = 5, .use_rslora = 0};
    if (!n) s.all_linear = 1;
    for (int i = 0; i < n; i++) snprintf(s.targets[s.n_targets++], sizeof s.targets[0], "%s", targets[i]);
    return s;
}

/* One micro-step's loss (and the adapters' gradients into grad, when given) of the model with base weights w and
 * adapter weights aw; lora NULL: the plain model (its weights w). */
typedef struct {
    const tt_backend *be;
    tt_queue *q;
    tt_frozen_base fb;
    tt_train_state st;
    tt_step_graph sg;
    int ok;
} run;

static int open_run(run *r, const tt_model *m, const tt_lora *l, tt_dtype base_dt, tt_dtype act, const float *w,
                    const float *aw)
{
    memset(r, 0, sizeof *r);
    r->be = tt_backend_get("cpu");
    r->q = r->be->queue_new();
    tt_step_cfg cfg = {.B = B, .T = T, .act_dtype = act, .lora = l, .frozen = l ? &r->fb : NULL};
    int rc = l ? tt_frozen_init(&r->fb, m, base_dt, r->be, r->q) : 0;
    if (!rc) rc = tt_state_init(&r->st, l ? l->adapters : m, r->be, r->q, 1);
    if (!rc && l) {
        tt_param_store fs = tt_frozen_store(&r->fb);
        for (int i = 0; i < m->n_params && !rc; i++) rc = fs.write(fs.ctx, m, i, w + m->params[i].offset);
    }
    if (!rc) rc = tt_state_upload(&r->st, TT_STATE_PARAM, l ? aw : w);
    if (!rc) rc = tt_build_micro_step(&r->sg, m, &r->st, &cfg, 1, TT_EXEC_GRAPH, TT_AC_NONE, NULL);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    return r->ok = rc == 0;
}

static double run_loss(run *r, const batch *b)
{
    double loss = NAN;
    CHECK_MSG(tt_step_set_batch(&r->sg, b->ids, b->tg, b->pos, b->doc, 1.0f / (B * T), 1.0f) == 0 &&
                  tt_exec_run(r->sg.exec) == 0 && tt_step_loss(&r->sg, &loss) == 0,
              "%s", tt_last_error());
    return loss;
}

static void close_run(run *r)
{
    if (r->ok) tt_step_graph_free(&r->sg);
    if (r->st.be) tt_state_free(&r->st);
    if (r->fb.buf) tt_frozen_free(&r->fb);
    if (r->q) r->be->queue_free(r->q);
}

/* the model's weights, and the adapters' (B drawn non-zero unless zero_b) */
static float *base_weights(const tt_model *m)
{
    float *w = th_alloc(m->numel, sizeof(float));
    tt_param_store s = tt_model_host_store(w);
    CHECK(tt_model_init_weights(m, 11, &s) == 0);
    return w;
}
static float *adapter_weights(const tt_lora *l, int zero_b)
{
    const tt_model *a = l->adapters;
    float *w = th_alloc(a->numel, sizeof(float));
    tt_param_store s = tt_model_host_store(w);
    CHECK(tt_model_init_weights(a, 3, &s) == 0);
    tt_rng r = {17, 0};
    for (int t = 0; t < l->n_targets && !zero_b; t++) {
        const tt_param *p = &a->params[l->targets[t].b];
        for (int64_t k = 0; k < tt_param_numel(p); k++) w[p->offset + k] = (float)(0.2 * tt_rng_normal(&r));
    }
    return w;
}

/* matmuls whose first operand is transposed: weight-gradient products */
static int wgrad_matmuls(const tt_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += g->nodes[i]->op == TT_OP_MATMUL && TT_ATTRS(g->nodes[i], tt_matmul_attrs)->ta;
    return n;
}

static void check_variant(variant va, const char *const *targets, int n_targets)
{
    tt_model *m = make_model(va);
    if (!m) return;
    tt_lora l;
    tt_lora_spec sp = spec_of(targets, n_targets);
    int rc = tt_lora_new(m, &sp, &l);
    CHECK_MSG(rc == 0, "%s: %s", names[va], tt_last_error());
    if (rc) {
        tt_model_free(m);
        return;
    }
    batch b;
    make_batch(&b);
    float *w = base_weights(m), *a0 = adapter_weights(&l, 1), *a = adapter_weights(&l, 0);

    /* B = 0: the base's loss, bit for bit */
    run plain, zero;
    if (open_run(&plain, m, NULL, TT_F32, TT_F32, w, NULL) && open_run(&zero, m, &l, TT_F32, TT_F32, w, a0)) {
        const double lp = run_loss(&plain, &b), lz = run_loss(&zero, &b);
        CHECK_MSG(lp == lz, "%s: B = 0 gives %.9g, the base %.9g", names[va], lz, lp);
        CHECK_MSG(zero.sg.lora_applied > 0, "%s: no matmul adapted", names[va]);
        /* every frozen weight's gradient product is gone: the adapters' two a target remain */
        const int wg = wgrad_matmuls(zero.sg.g);
        CHECK_MSG(wg == 2 * l.n_targets, "%s: %d weight-gradient matmuls for %d targets", names[va], wg, l.n_targets);
        CHECK_MSG(wgrad_matmuls(plain.sg.g) > 0, "%s: the plain step makes weight gradients", names[va]);
    }
    close_run(&plain);
    close_run(&zero);

    /* the adapters' gradients against central differences of the loss; the loss against the merged model's */
    run lr;
    if (open_run(&lr, m, &l, TT_F32, TT_F32, w, a)) {
        const double loss = run_loss(&lr, &b);
        float *grad = th_alloc(l.adapters->numel, sizeof(float));
        CHECK(tt_state_download(&lr.st, TT_STATE_GRAD, grad) == 0);
        /* a few coordinates of every A and B: the largest gradients, where fp32 differences resolve them */
        int checked = 0;
        for (int i = 0; i < l.adapters->n_params; i++) {
            const tt_param *p = &l.adapters->params[i];
            int64_t best = 0;
            for (int64_t k = 1; k < tt_param_numel(p); k++)
                if (fabsf(grad[p->offset + k]) > fabsf(grad[p->offset + best])) best = k;
            const int64_t at = p->offset + best;
            const float keep = a[at], eps = 1e-2f;
            double f[2];
            for (int s = 0; s < 2; s++) {
                a[at] = keep + (s ? -eps : eps);
                CHECK(tt_state_upload(&lr.st, TT_STATE_PARAM, a) == 0);
                f[s] = run_loss(&lr, &b);
            }
            a[at] = keep;
            const double fd = (f[0] - f[1]) / (2 * eps);
            CHECK_MSG(fabs(fd - grad[at]) <= 2e-2 * fabs(grad[at]) + 2e-4, "%s: d loss / d %s[%lld] = %g, differences %g",
                      names[va], p->name, (long long)best, grad[at], fd);
            checked++;
        }
        CHECK(checked == 2 * l.n_targets);
        CHECK(tt_state_upload(&lr.st, TT_STATE_PARAM, a) == 0);
        /* merged: W + s B A in a plain step gives the same loss */
        float *wm = th_alloc(m->numel, sizeof(float));
        memcpy(wm, w, m->numel * sizeof(float));
        for (int t = 0; t < l.n_targets; t++) {
            const tt_lora_target *x = &l.targets[t];
            const tt_param *p = &m->params[x->base];
            tt_lora_merge(wm + p->offset, a + l.adapters->params[x->a].offset, a + l.adapters->params[x->b].offset,
                          p->shape[0], p->shape[1], l.rank, l.scale);
        }
        run mg;
        if (open_run(&mg, m, NULL, TT_F32, TT_F32, wm, NULL)) {
            const double lm = run_loss(&mg, &b);
            CHECK_MSG(fabs(lm - loss) <= 2e-6 * fabs(loss), "%s: merged %.9g, adapters %.9g", names[va], lm, loss);
        }
        close_run(&mg);
        free(wm);
        free(grad);
    }
    close_run(&lr);

    /* bf16: the linear weights stored bf16, the rest fp32; a step runs and leaves the base's bytes alone */
    tt_frozen_layout fl;
    CHECK(tt_frozen_layout_new(m, TT_BF16, &fl) == 0);
    int n_bf16 = 0;
    for (int i = 0; i < m->n_params; i++) {
        n_bf16 += fl.dtype[i] == TT_BF16;
        if (!m->units[m->params[i].unit].block || m->params[i].ndim == 1) CHECK(fl.dtype[i] == TT_F32);
        CHECK(fl.offset[i] % 64 == 0);
    }
    CHECK(n_bf16 >= l.n_targets);
    tt_frozen_layout_free(&fl);
    run bf;
    if (open_run(&bf, m, &l, TT_BF16, TT_BF16, w, a)) {
        uint64_t h0 = 0, h1 = 1;
        CHECK(tt_frozen_hash(&bf.fb, &h0) == 0);
        for (int k = 0; k < 3; k++) CHECK(isfinite(run_loss(&bf, &b)));
        CHECK(tt_frozen_hash(&bf.fb, &h1) == 0);
        CHECK_MSG(h0 == h1, "%s: the frozen base changed", names[va]);
    }
    close_run(&bf);
    free(w);
    free(a0);
    free(a);
    tt_lora_free(&l);
    tt_model_free(m);
}

static void check_errors(void)
{
    tt_model *m = make_model(MOE);
    if (!m) return;
    tt_lora l;
    static const char *const nothing[] = {"q_proj", "wq_proj"};
    tt_lora_spec s = spec_of(nothing, 2);
    CHECK(tt_lora_new(m, &s, &l) != 0);
    CHECK_MSG(strstr(tt_last_error(), "'wq_proj' matches no linear layer") && strstr(tt_last_error(), "q_proj, "),
              "%s", tt_last_error());
    static const char *const routed[] = {"gate_proj"};
    s = spec_of(routed, 1);
    CHECK(tt_lora_new(m, &s, &l) != 0);
    CHECK_MSG(strstr(tt_last_error(), "routed expert"), "%s", tt_last_error());
    s.rank = 0;
    CHECK(tt_lora_new(m, &s, &l) != 0);
    tt_model_free(m);
}

int main(void)
{
    static const char *const peft[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    static const char *const qv[] = {"q_proj", "v_proj"}; /* a fused q/k/v with k left alone: zeros between */
    static const char *const moe[] = {"q_proj", "k_proj", "v_proj", "o_proj", "shared_experts.gate_proj",
                                      "shared_experts.up_proj", "shared_experts.down_proj"};
    check_variant(LLAMA, peft, 7);
    check_variant(LLAMA, qv, 2);
    check_variant(QWEN2, NULL, 0); /* all-linear */
    check_variant(MOE, moe, 7);
    check_errors();
    return th_done("test_lora");
}

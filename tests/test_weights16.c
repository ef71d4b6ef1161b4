/* test_weights16.c — the bf16 copy of the weights that mixed-precision runs
 * keep for their bf16 products (tt_state_alloc_w16, the weights16 pass,
 * AdamW writing the copy):
 * - on the cpu backend, steps that read the copy give the losses and the
 *   weights of steps that round the fp32 weights in their products, bit for
 *   bit (the GEMM's packers round as the copy does), with activation
 *   checkpointing too (its recomputed products read the copy);
 * - on the reference kernels within bf16's rounding (they widen bf16 and
 *   leave fp32 weights unrounded, so there the copy changes the products);
 * - after every optimizer step, and after every write of weights from the
 *   host, the copy is the weights rounded to bf16;
 * - no bf16 product is left reading an fp32 weight;
 * - where it does not apply (fp32, LoRA, shards, experts over ranks) it is
 *   not used, and a graph that wants it on a state without it is an error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "harness.h"
#include "models/model.h"
#include "train/step_graph.h"

enum { B = 2, T = 29, V = 61, L = 2, STEPS = 3 };

typedef enum { LLAMA, GPT2, MOE, N_VARIANTS } variant;
static const char *const names[] = {"llama (GQA)", "gpt2 (tied head)", "llama + MoE (4 experts, top-2, shared)"};

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
    c.tie_embeddings = va == GPT2;
    if (va == MOE)
        c.moe = (tt_moe_cfg){.n_experts = 4, .top_k = 2, .ffn_dim = 32, .n_shared = 1, .shared_ffn = 32,
                             .route_norm = 1, .route_scale = 1.0};
    return tt_model_new(&c);
}

typedef struct {
    int32_t ids[B * T], tg[B * T], pos[B * T], doc[B * T];
} batch;

static void make_batch(batch *b, uint64_t seed)
{
    tt_rng r = {seed, 0};
    for (int i = 0; i < B * T; i++) {
        b->ids[i] = (int32_t)tt_rng_below(&r, V);
        b->tg[i] = (int32_t)tt_rng_below(&r, V);
        b->pos[i] = i % T;
        b->doc[i] = 0;
    }
}

/* Whether the copy in s is the weights rounded to bf16, element for element; the first that is not in *at. */
static int copy_is_rounding(tt_train_state *s, size_t *at)
{
    const size_t n = (size_t)s->numel;
    float *w = th_alloc(n, sizeof *w);
    uint16_t *h = th_alloc(n, sizeof *h);
    int ok = tt_state_download(s, TT_STATE_PARAM, w) == 0 &&
             tt_backend_read(s->be, s->q, h, tt_state_w16_mem(s), n * sizeof *h) == 0;
    for (size_t i = 0; i < n && ok; i++)
        if (h[i] != tt_f32_to_bf16(w[i])) ok = 0, *at = i;
    free(w);
    free(h);
    return ok;
}

/* Every bf16 product's operands: none an fp32 weight (what the pass leaves there is a product it missed). */
static int fp32_weights_in_bf16_products(const tt_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *nd = g->nodes[i];
        const int mm = nd->op == TT_OP_MATMUL, head = nd->op == TT_OP_CE_LINEAR || nd->op == TT_OP_GROUPED_MATMUL;
        for (int k = mm ? 0 : 1; (mm || head) && k < 2; k++)
            n += nd->in[k]->role == TT_ROLE_PARAM && nd->in[k]->dtype == TT_F32 && nd->in[1 - k]->dtype == TT_BF16;
    }
    return n;
}

typedef struct {
    double loss[STEPS];
    float *w; /* the weights after the steps */
    int read; /* operands that read the copy */
} result;

/* STEPS optimizer steps of one micro-step each from the model's seeded weights, the copy read or not. Debug
 * mode runs on the reference kernels. */
static result train(const tt_model *m, tt_exec_mode mode, tt_ac_mode ac, int weights16)
{
    result r = {{0}, NULL, 0};
    const tt_backend *be = tt_backend_get(mode == TT_EXEC_DEBUG ? "ref" : "cpu");
    tt_queue *q = be ? be->queue_new() : NULL;
    CHECK_MSG(q != NULL, "%s", tt_last_error());
    if (!q) return r;
    tt_step_cfg cfg = {.B = B, .T = T, .act_dtype = TT_BF16};
    tt_train_state st;
    tt_step_graph sg = {0}, opt = {0};
    const tt_adamw_cfg oc = {0.9, 0.95, 1e-8, 0.1, 1.0};
    int rc = tt_state_init(&st, m, be, q, 1);
    tt_param_store store = tt_state_store(&st, TT_STATE_PARAM);
    if (!rc) rc = tt_model_init_weights(m, 5, &store);
    if (!rc && weights16) rc = tt_step_use_weights16(&cfg, &st);
    CHECK_MSG(!weights16 || rc || (cfg.weights16 && st.w16), "weights16 not taken up in bf16");
    if (!rc) rc = tt_build_micro_step(&sg, m, &st, &cfg, 1, mode, ac, NULL);
    if (!rc) rc = tt_build_optim_step(&opt, m, &st, &oc, mode);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (!rc) {
        r.read = sg.weights16_read;
        const int left = fp32_weights_in_bf16_products(sg.g);
        CHECK_MSG(!weights16 || left == 0, "%d bf16 products still read fp32 weights", left);
        CHECK_MSG(weights16 || left > 0, "without the copy no bf16 product reads a weight: the scan sees nothing");
    }
    size_t at = 0;
    if (!rc && weights16) CHECK_MSG(copy_is_rounding(&st, &at), "the new copy differs from the weights at %zu", at);
    for (int s = 0; s < STEPS && !rc; s++) {
        batch bt;
        make_batch(&bt, 11 + (uint64_t)s);
        rc = tt_step_set_batch(&sg, bt.ids, bt.tg, bt.pos, bt.doc, 1.0f / (B * T), 1.0f) || tt_exec_run(sg.exec) ||
             tt_step_loss(&sg, &r.loss[s]) || tt_optim_set_hp(&opt, 3e-2, s + 1) || tt_exec_run(opt.exec);
        CHECK_MSG(rc == 0, "step %d: %s", s + 1, tt_last_error());
        if (!rc && weights16)
            CHECK_MSG(copy_is_rounding(&st, &at), "after step %d the copy differs from the weights at %zu", s + 1, at);
    }
    if (!rc) {
        r.w = th_alloc(m->numel, sizeof(float));
        CHECK(tt_state_download(&st, TT_STATE_PARAM, r.w) == 0);
    }
    tt_step_graph_free(&sg);
    tt_step_graph_free(&opt);
    tt_state_free(&st);
    be->queue_free(q);
    return r;
}

static void compare(variant va)
{
    tt_model *m = make_model(va);
    CHECK(m != NULL);
    if (!m) return;
    static const struct {
        tt_exec_mode mode;
        tt_ac_mode ac;
        int exact;
        const char *what;
    } runs[] = {
        {TT_EXEC_GRAPH, TT_AC_NONE, 1, "cpu"},
        {TT_EXEC_GRAPH, TT_AC_FULL, 1, "cpu, full activation checkpointing"},
        {TT_EXEC_DEBUG, TT_AC_NONE, 0, "reference kernels"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        result a = train(m, runs[k].mode, runs[k].ac, 1), b = train(m, runs[k].mode, runs[k].ac, 0);
        if (a.w && b.w) {
            CHECK_MSG(a.read > 0 && b.read == 0, "%s, %s: %d products' operands read the copy (%d without it)", names[va],
                      runs[k].what, a.read, b.read);
            for (int s = 0; s < STEPS; s++)
                CHECK_MSG(runs[k].exact ? a.loss[s] == b.loss[s] : fabs(a.loss[s] - b.loss[s]) <= 2e-2 * fabs(b.loss[s]),
                          "%s, %s: step %d's loss %.9g reading the copy, %.9g rounding the weights", names[va],
                          runs[k].what, s + 1, a.loss[s], b.loss[s]);
            size_t diff = 0;
            double dmax = 0;
            for (size_t i = 0; i < m->numel; i++) {
                diff += a.w[i] != b.w[i];
                dmax = fmax(dmax, fabs((double)a.w[i] - b.w[i]));
            }
            /* (on the reference kernels the weights are not compared: AdamW's first steps move each weight by
             * about lr times the sign of its gradient, and a gradient near zero changes sign with the rounding) */
            CHECK_MSG(!runs[k].exact || diff == 0, "%s, %s: %zu weights differ after %d steps (by up to %.3g)",
                      names[va], runs[k].what, diff, STEPS, dmax);
        }
        free(a.w);
        free(b.w);
    }
    tt_model_free(m);
}

/* A llama's train state on the cpu backend; 0 when it could not be made (the checks say why). */
typedef struct {
    tt_model *m;
    const tt_backend *be;
    tt_queue *q;
    tt_train_state st;
} fixture;

static int fixture_open(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->m = make_model(LLAMA);
    f->be = tt_backend_get("cpu");
    f->q = f->be ? f->be->queue_new() : NULL;
    const int ok = f->m && f->q && tt_state_init(&f->st, f->m, f->be, f->q, 1) == 0;
    CHECK_MSG(ok, "%s", tt_last_error());
    if (!ok) {
        if (f->q) f->be->queue_free(f->q);
        tt_model_free(f->m);
    }
    return ok;
}

static void fixture_close(fixture *f)
{
    tt_state_free(&f->st);
    f->be->queue_free(f->q);
    tt_model_free(f->m);
}

/* Writes from the host (a Hugging Face load, a checkpoint, the balancing bias) round into the copy too. */
static void test_host_writes(void)
{
    fixture f;
    if (!fixture_open(&f)) return;
    tt_model *m = f.m;
    const tt_backend *be = f.be;
    tt_queue *q = f.q;
    tt_train_state *st = &f.st;
    CHECK_MSG(tt_state_alloc_w16(st) == 0, "%s", tt_last_error());
    size_t at = 0;
    CHECK_MSG(copy_is_rounding(st, &at), "the copy of zero weights differs at %zu", at);
    float *w = th_alloc(m->numel, sizeof *w);
    tt_rng r = {3, 0};
    for (size_t i = 0; i < m->numel; i++) w[i] = (float)tt_rng_normal(&r) * 0.7f;
    CHECK(tt_state_upload(st, TT_STATE_PARAM, w) == 0);
    CHECK_MSG(copy_is_rounding(st, &at), "after an upload the copy differs at %zu", at);
    for (size_t i = 0; i < m->numel; i++) w[i] = -w[i] * 1.5f;
    tt_param_store store = tt_state_store(st, TT_STATE_PARAM);
    const int p = m->n_params / 2;
    CHECK(store.write(store.ctx, m, p, w + m->params[p].offset) == 0);
    CHECK(tt_state_write_range(st, TT_STATE_PARAM, 5, 100, w + 5) == 0);
    CHECK_MSG(copy_is_rounding(st, &at), "after writes of a parameter and a range the copy differs at %zu", at);
    /* the moments are not weights: their writes leave the copy alone */
    uint16_t before, after;
    CHECK(tt_backend_read(be, q, &before, tt_state_w16_mem(st), sizeof before) == 0);
    CHECK(tt_state_write_range(st, TT_STATE_EXP_AVG, 0, 1, (const float[]){1e6f}) == 0);
    CHECK(tt_backend_read(be, q, &after, tt_state_w16_mem(st), sizeof after) == 0);
    CHECK(before == after);
    free(w);
    fixture_close(&f);
}

/* Where the copy applies, and a graph that wants one on a state without it. */
static void test_where(void)
{
    CHECK(tt_step_weights16_fits(TT_BF16, 0, 1, 1));
    CHECK(!tt_step_weights16_fits(TT_F32, 0, 1, 1));
    CHECK(!tt_step_weights16_fits(TT_BF16, 1, 1, 1));
    CHECK(!tt_step_weights16_fits(TT_BF16, 0, 2, 1));
    CHECK(!tt_step_weights16_fits(TT_BF16, 0, 1, 2));
    fixture f;
    if (!fixture_open(&f)) return;
    tt_model *m = f.m;
    tt_train_state *st = &f.st;
    tt_step_cfg f32 = {.B = B, .T = T, .act_dtype = TT_F32};
    CHECK(tt_step_use_weights16(&f32, st) == 0 && !f32.weights16 && !st->w16);
    tt_step_cfg want = {.B = B, .T = T, .act_dtype = TT_BF16, .weights16 = 1};
    tt_step_graph sg;
    CHECK(tt_build_micro_step(&sg, m, st, &want, 1, TT_EXEC_GRAPH, TT_AC_NONE, NULL) != 0);
    CHECK_MSG(strstr(tt_last_error(), "bf16 copy"), "error: %s", tt_last_error());
    want.act_dtype = TT_F32;
    CHECK(tt_build_micro_graph(&sg, m, &want, 1, TT_AC_NONE) != 0);
    CHECK_MSG(strstr(tt_last_error(), "mixed precision"), "error: %s", tt_last_error());
    fixture_close(&f);
}

int main(void)
{
    for (int va = 0; va < N_VARIANTS; va++) compare((variant)va);
    test_host_writes();
    test_where();
    return th_done("test_weights16");
}

/* test_mla.c — Multi-head Latent Attention in a whole model: the gradient of
 * every kind of MLA weight (the query's and the keys' compressions, their
 * norms, the output) against central differences of the loss, on the ref
 * backend, with interleaved RoPE pairs, values narrower than queries and keys,
 * and a YaRN softmax scale; and the same model's loss on cpu and ref. The
 * forward itself is checked against transformers' DeepSeek-V3 in test_hf.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "graph/exec.h"
#include "harness.h"

enum { B = 2, T = 9, V = 40 };

static tt_model *make_model(int q_lora)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = TT_ARCH_LLAMA;
    c.dim = 24, c.n_layers = 2, c.n_heads = 3, c.n_kv_heads = 3, c.ffn_dim = 32, c.vocab_size = V;
    c.max_seq_len = 64, c.norm_eps = 1e-5, c.rope.theta = 10000;
    c.mla = (tt_mla_cfg){.q_lora_rank = q_lora, .kv_lora_rank = 8, .qk_nope = 6, .qk_rope = 4, .v_head = 5,
                         .rope_interleave = 1};
    c.head_dim = 4;
    c.rope.factor = 4, c.rope.original_max_pos = 16;
    tt_model_ext x;
    memset(&x, 0, sizeof x);
    x.rope = (tt_rope_ext){.yarn = 1, .beta_fast = 32, .beta_slow = 1, .attention_factor = 1, .mscale_all_dim = 1};
    return tt_model_new_ext(&c, &x);
}

static double loss_of(const tt_model *m, const float *w, const char *backend, float *grad)
{
    int32_t ids[B * T], tgt[B * T], pos[B * T], doc[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7 + 3) % V, tgt[i] = (i * 11 + 5) % V, pos[i] = i % T, doc[i] = i / T;
    const float scale = 1.0f / (B * T);
    th_train_graph t = th_train_graph_build(m, B, T);
    tt_exec *e = tt_exec_new(t.g, tt_backend_get(backend), NULL, TT_EXEC_GRAPH);
    float loss = NAN;
    if (e && !th_train_graph_upload(e, m, &t, w, ids, tgt, pos, doc, &scale) && tt_exec_run(e) == 0) {
        tt_exec_read(e, t.loss, &loss, sizeof loss);
        if (grad) th_train_graph_grads(e, m, &t, grad);
    }
    CHECK_MSG(e != NULL && !isnan(loss), "%s: %s", backend, tt_last_error());
    tt_exec_free(e);
    th_train_graph_free(&t);
    return loss;
}

static void test_gradients(int q_lora)
{
    tt_model *m = make_model(q_lora);
    CHECK_MSG(m != NULL, "%s", tt_last_error());
    if (!m) return;
    float *w = th_alloc(m->numel, sizeof(float)), *g = th_alloc(m->numel, sizeof(float));
    tt_param_store st = tt_model_host_store(w);
    CHECK(tt_model_init_weights(m, 11, &st) == 0);
    for (size_t i = 0; i < m->numel; i++) w[i] += 0.05f * (float)((i * 2654435761u) % 9) - 0.2f; /* away from init */
    const double l0 = loss_of(m, w, "ref", g), lc = loss_of(m, w, "cpu", NULL);
    CHECK_MSG(fabs(l0 - lc) < 1e-5 * fabs(l0), "loss: ref %.7g, cpu %.7g", l0, lc);
    static const char *const kinds[] = {"attention.wq_a", "attention.q_a_norm", "attention.wq_b", "attention.wq.weight",
                                        "attention.wkv_a", "attention.kv_a_norm", "attention.wkv_b", "attention.wo"};
    tt_rng r = {3, 0};
    double worst = 0;
    int checked = 0;
    for (int i = 0; i < m->n_params; i++) {
        const tt_param *p = &m->params[i];
        int mla = 0;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) mla |= strstr(p->name, kinds[k]) != NULL;
        if (!mla || tt_param_numel(p) == 0) continue;
        double mag = 1e-9, err = 0;
        for (int64_t x = 0; x < tt_param_numel(p); x++) mag = fmax(mag, fabs(g[p->offset + x]));
        for (int s = 0; s < 4; s++) { /* central differences in fp32: eps large enough for its rounding */
            const int64_t x = p->offset + (int64_t)tt_rng_below(&r, (uint64_t)tt_param_numel(p));
            const float keep = w[x], eps = 3e-3f;
            w[x] = keep + eps;
            const double lp = loss_of(m, w, "ref", NULL);
            w[x] = keep - eps;
            const double lm = loss_of(m, w, "ref", NULL);
            w[x] = keep;
            err = fmax(err, fabs((lp - lm) / (2 * eps) - g[x]));
        }
        /* 2% of the largest gradient, plus what fp32 rounding of the loss does to a difference quotient */
        const double noise = fabs(l0) * FLT_EPSILON / (2 * 3e-3);
        CHECK_MSG(err <= 2e-2 * mag + noise, "%s: gradient off central differences by %.3g (max |grad| %.3g)", p->name,
                  err, mag);
        worst = fmax(worst, err / mag);
        checked++;
    }
    CHECK_MSG(checked >= (q_lora ? 12 : 8), "only %d MLA weights checked", checked);
    printf("  MLA (q_lora_rank %d): %d weights against central differences, worst %.2e of their largest gradient\n",
           q_lora, checked, worst);
    free(w), free(g);
    tt_model_free(m);
}

int main(void)
{
    test_gradients(10); /* the query compressed too */
    test_gradients(0);  /* one query projection */
    return th_done("test_mla");
}

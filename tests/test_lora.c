/* test_lora.c — LoRA's adapters and its pass, against the math they stand for:
 * with B = 0 the step's loss is the base model's, bit for bit; the adapters'
 * gradients equal central finite differences of the loss; the loss equals the
 * plain model's with each adapter merged into its weight (W + s B A); no
 * weight-gradient product is made for a frozen weight; training steps leave
 * the frozen base's bytes as they were; a bf16 base keeps its 2-D weights
 * (linear layers, embeddings, head) in bf16. Target lists: PEFT's names, all-linear, a name that matches
 * nothing (the error lists what exists), a routed expert (refused). Each on
 * the dense llama block (q/k/v and gate/up fused), Qwen2's (q/k/v biases,
 * tied head), an MoE block with a shared expert (attention and shared
 * expert adapted) and GPT-2's (c_attn one adapter over q, k and v; the fused
 * and unfused graphs give one loss and the same gradients with dropout, one
 * mask per adapter). And against PEFT (tests/fixtures/lora, made by
 * tools/gen_lora_fixtures.py): for each tiny Hugging Face model (GPT-2's
 * merged c_attn compared as the Conv1D's (in, 3 D) weight) and its PEFT
 * adapter (B non-zero), titan's loss, adapter gradients and gradient norm
 * equal PEFT's, its merge equals merge_and_unload (fp32 within 1e-6, bf16 bit
 * for bit), and the adapter written back in PEFT's format reads back the
 * same. With TITAN_LORA_EXPORT_DIR set, it also trains each fixture's adapter
 * for a few AdamW steps on the reference batch and writes, for the live
 * cross-check in PEFT (tests/cli_lora_peft.sh, make crosscheck),
 * <dir>/<name>/adapter (PEFT's format), <dir>/<name>/merged (the merged
 * Hugging Face folder) and <dir>/<name>/loss (titan's loss on the batch after
 * training). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/safetensors.h"
#include "graph/exec.h"
#include "harness.h"
#include "hf/hf_model.h"
#include "hf/peft.h"
#include "hf/peft_adapter.h"
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

typedef enum { LLAMA, QWEN2, MOE, GPT2, N_VARIANTS } variant;
static const char *const names[] = {"llama", "qwen2 (q/k/v bias, tied)", "llama + MoE (shared expert)",
                                    "gpt2 (c_attn: one adapter for q, k, v)"};

static tt_model *make_model(variant va)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = va == GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    c.dim = 32, c.n_layers = L, c.n_heads = 4, c.n_kv_heads = va == GPT2 ? 4 : 2, c.head_dim = 8, c.ffn_dim = 48;
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
    int ok, B, T;
} run;

static int open_run_cfg(run *r, const tt_model *m, const tt_lora *l, tt_dtype base_dt, tt_dtype act, const float *w,
                        const float *aw, int b, int t, int no_fuse)
{
    memset(r, 0, sizeof *r);
    r->be = tt_backend_get("cpu");
    r->q = r->be->queue_new();
    r->B = b, r->T = t;
    tt_step_cfg cfg = {.B = b, .T = t, .act_dtype = act, .lora = l, .frozen = l ? &r->fb : NULL, .no_fuse = no_fuse};
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

static int open_run_bt(run *r, const tt_model *m, const tt_lora *l, tt_dtype base_dt, tt_dtype act, const float *w,
                       const float *aw, int b, int t)
{
    return open_run_cfg(r, m, l, base_dt, act, w, aw, b, t, 0);
}

static int open_run(run *r, const tt_model *m, const tt_lora *l, tt_dtype base_dt, tt_dtype act, const float *w,
                    const float *aw)
{
    return open_run_bt(r, m, l, base_dt, act, w, aw, B, T);
}

/* the mean loss of one step on ids and targets (B*T each) */
static double run_loss_of(run *r, const int32_t *ids, const int32_t *tg, const int32_t *pos, const int32_t *doc)
{
    double loss = NAN;
    CHECK_MSG(tt_step_set_batch(&r->sg, ids, tg, pos, doc, 1.0f / (float)(r->B * r->T), 1.0f) == 0 &&
                  tt_exec_run(r->sg.exec) == 0 && tt_step_loss(&r->sg, &loss) == 0,
              "%s", tt_last_error());
    return loss;
}

static double run_loss(run *r, const batch *b) { return run_loss_of(r, b->ids, b->tg, b->pos, b->doc); }

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

/* matmuls whose first operand is transposed: weight-gradient products; *base counts those whose output is not an
 * adapter's shape (r columns for B, up to 4 stacked A's of r rows) */
static int wgrad_matmuls(const tt_graph *g, int r, int *base)
{
    int n = 0;
    *base = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *nd = g->nodes[i];
        if (nd->op != TT_OP_MATMUL || !TT_ATTRS(nd, tt_matmul_attrs)->ta) continue;
        const int64_t *s = nd->out[0]->shape;
        n++;
        *base += !(s[1] == r || (s[0] % r == 0 && s[0] <= 4 * r));
    }
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
        /* every frozen weight's gradient product is gone: the adapters' remain, a B's for every target and an A's
         * for every target or stack of a fused layer's A's */
        int base = 0;
        const int wg = wgrad_matmuls(zero.sg.g, l.rank, &base);
        CHECK_MSG(base == 0 && wg > l.n_targets && wg <= 2 * l.n_targets, "%s: %d weight-gradient matmuls (%d not an "
                  "adapter's) for %d targets", names[va], wg, base, l.n_targets);
        wgrad_matmuls(plain.sg.g, l.rank, &base);
        CHECK_MSG(base > 0, "%s: the plain step makes the weights' gradients", names[va]);
    }
    close_run(&plain);
    close_run(&zero);

    /* the adapters' gradients against central differences of the loss; the loss against the merged model's */
    run lr;
    double no_drop = NAN;
    if (open_run(&lr, m, &l, TT_F32, TT_F32, w, a)) {
        const double loss = no_drop = run_loss(&lr, &b);
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
        for (int i = 0; i < m->n_params; i++) { /* each weight of a target, with its rows of B */
            int64_t row0;
            const int t = tt_lora_target_of(&l, m, i, &row0);
            if (t < 0) continue;
            const tt_param *p = &m->params[i];
            tt_lora_merge(wm + p->offset, a + l.adapters->params[l.targets[t].a].offset,
                          a + l.adapters->params[l.targets[t].b].offset + row0 * l.rank, p->shape[0], p->shape[1],
                          l.rank, l.scale);
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

    /* unfused (q, k and v three matmuls, each reading its rows of a fused module's B) against fused, with dropout:
     * one mask per adapter, so the same loss and gradients */
    l.dropout = 0.25;
    run fu, un;
    if (open_run_cfg(&fu, m, &l, TT_F32, TT_F32, w, a, B, T, 0) && open_run_cfg(&un, m, &l, TT_F32, TT_F32, w, a, B, T, 1)) {
        CHECK(tt_step_set_rng(&fu.sg, 7, 3) == 0 && tt_step_set_rng(&un.sg, 7, 3) == 0);
        const double lf = run_loss(&fu, &b), lu = run_loss(&un, &b);
        float *gf = th_alloc(l.adapters->numel, sizeof(float)), *gu = th_alloc(l.adapters->numel, sizeof(float));
        CHECK(tt_state_download(&fu.st, TT_STATE_GRAD, gf) == 0 && tt_state_download(&un.st, TT_STATE_GRAD, gu) == 0);
        double err = 0, mag = 0;
        for (size_t k = 0; k < l.adapters->numel; k++) err = fmax(err, fabs(gf[k] - gu[k])), mag = fmax(mag, fabs(gf[k]));
        CHECK_MSG(fabs(lf - lu) <= 1e-6 * fabs(lf) && err <= 1e-5 * mag, "%s, dropout: fused %.9g, unfused %.9g; "
                  "gradients differ by %g (largest %g)", names[va], lf, lu, err, mag);
        CHECK_MSG(lf != no_drop, "%s: dropout 0.25 leaves the loss at %.9g", names[va], lf);
        free(gf);
        free(gu);
    }
    close_run(&fu);
    close_run(&un);
    l.dropout = 0;

    /* bf16: the linear weights (the routed experts' too) stored bf16, the rest fp32, each on a 64-byte boundary but
     * a routed expert's parameter, right after the one before it (the MoE block reads them as one stack); a step runs
     * and leaves the base's bytes alone */
    tt_frozen_layout fl;
    CHECK(tt_frozen_layout_new(m, TT_BF16, &fl) == 0);
    int n_bf16 = 0;
    for (int i = 0; i < m->n_params; i++) {
        n_bf16 += fl.dtype[i] == TT_BF16;
        CHECK(fl.dtype[i] == (m->params[i].ndim == 2 ? TT_BF16 : TT_F32));
        const tt_param *p = &m->params[i], *q = i > 0 ? &m->params[i - 1] : NULL;
        if (p->routed && q && q->routed && q->unit == p->unit)
            CHECK(fl.offset[i] == fl.offset[i - 1] + (size_t)tt_param_numel(q) * tt_dtype_size(fl.dtype[i - 1]));
        else CHECK(fl.offset[i] % 64 == 0);
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

/* a tensor of the reference file as fp32 (F32 or BF16), n elements expected */
static const tt_st_tensor *ref_tensor(const tt_safetensors *st, const char *name, size_t n, const char *dt)
{
    const tt_st_tensor *t = tt_st_find(st, name);
    CHECK_MSG(t && !strcmp(t->dtype, dt) && t->nbytes == n * tt_st_dtype_bits(dt) / 8, "reference tensor '%s'", name);
    return t && !strcmp(t->dtype, dt) && t->nbytes == n * tt_st_dtype_bits(dt) / 8 ? t : NULL;
}

/* The adapters aw trained for a few AdamW steps on one batch (aw is left as it was), then written in PEFT's format,
 * merged into a Hugging Face folder, and titan's loss on the batch after them. */
static void export_trained(const char *name, const char *root, const tt_model *m, const tt_lora *l,
                           const tt_lora_spec *spec, const tt_hf_config *hc, const float *w, const float *aw,
                           const int32_t *ids, const int32_t *lab)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    int32_t pos[16], doc[16];
    for (int i = 0; i < 16; i++) pos[i] = i % 8, doc[i] = i / 8;
    run r;
    if (!open_run_bt(&r, m, l, TT_F32, TT_F32, w, aw, 2, 8)) return;
    tt_step_graph opt;
    const tt_adamw_cfg ac = {0.9, 0.95, 1e-8, 0.0, 1.0};
    int rc = tt_build_optim_step(&opt, l->adapters, &r.st, &ac, TT_EXEC_GRAPH);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    double loss = NAN;
    for (int step = 1; step <= 5 && !rc; step++) {
        run_loss_of(&r, ids, lab, pos, doc);
        rc = tt_optim_set_hp(&opt, 1e-2, step) || tt_exec_run(opt.exec);
    }
    if (!rc) loss = run_loss_of(&r, ids, lab, pos, doc); /* after the steps (its gradients unused) */
    CHECK_MSG(rc == 0 && isfinite(loss), "%s: %s", name, tt_last_error());
    float *merged = th_alloc(m->numel, sizeof(float)), *trained = th_alloc(l->adapters->numel, sizeof(float));
    CHECK(tt_state_download(&r.st, TT_STATE_PARAM, trained) == 0);
    memcpy(merged, w, m->numel * sizeof(float));
    for (int i = 0; i < m->n_params; i++) {
        int64_t row0;
        const int t = tt_lora_target_of(l, m, i, &row0);
        if (t < 0) continue;
        const tt_param *p = &m->params[i];
        tt_lora_merge(merged + p->offset, trained + l->adapters->params[l->targets[t].a].offset,
                      trained + l->adapters->params[l->targets[t].b].offset + row0 * l->rank, p->shape[0], p->shape[1],
                      l->rank, l->scale);
    }
    tt_param_store ts = tt_model_host_store(trained), ms = tt_model_host_store(merged);
    tt_hf_export_opts o = tt_hf_export_opts_of(hc);
    snprintf(path, sizeof path, "%s/adapter", dir);
    CHECK_MSG(!rc && tt_peft_adapter_save(path, m, l, spec, "", &ts) == 0, "%s", tt_last_error());
    snprintf(path, sizeof path, "%s/merged", dir);
    CHECK_MSG(tt_hf_export(m, path, &o, &ms) == 0, "%s", tt_last_error());
    snprintf(path, sizeof path, "%s/loss", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fprintf(f, "%.9g\n", loss), fclose(f);
    free(merged);
    free(trained);
    tt_step_graph_free(&opt);
    close_run(&r);
}

static void check_peft(const char *name)
{
    char base_dir[512], adapter_dir[512], ref_path[512], tmp[] = "/tmp/titan_lora_peft.XXXXXX";
    snprintf(base_dir, sizeof base_dir, "%s/tests/fixtures/hf/%s", TITAN_SOURCE_DIR, name);
    snprintf(adapter_dir, sizeof adapter_dir, "%s/tests/fixtures/lora/%s", TITAN_SOURCE_DIR, name);
    snprintf(ref_path, sizeof ref_path, "%s/tests/fixtures/lora/%s.ref.safetensors", TITAN_SOURCE_DIR, name);
    tt_hf_config hc;
    float *w = NULL;
    tt_model *m = tt_hf_load(base_dir, &hc, &w);
    tt_safetensors *ref = tt_st_open(ref_path);
    tt_lora_spec spec;
    tt_lora l;
    memset(&l, 0, sizeof l);
    int rc = !m || !ref || tt_peft_adapter_spec(adapter_dir, &spec) || tt_lora_new(m, &spec, &l);
    CHECK_MSG(!rc, "%s: %s", name, tt_last_error());
    float *aw = rc ? NULL : th_alloc(l.adapters->numel, sizeof(float));
    tt_param_store as = tt_model_host_store(aw);
    if (!rc) CHECK_MSG(!(rc = tt_peft_adapter_load(adapter_dir, &l, &as)), "%s: %s", name, tt_last_error());
    const tt_st_tensor *ids = rc ? NULL : ref_tensor(ref, "input_ids", 16, "I32");
    const tt_st_tensor *lab = rc ? NULL : ref_tensor(ref, "labels", 16, "I32");
    const tt_st_tensor *rl = rc ? NULL : ref_tensor(ref, "loss", 1, "F32");
    const tt_st_tensor *rn = rc ? NULL : ref_tensor(ref, "grad_norm", 1, "F32");
    run r;
    if (ids && lab && rl && rn && open_run_bt(&r, m, &l, TT_F32, TT_F32, w, aw, 2, 8)) {
        int32_t pos[16], doc[16];
        for (int i = 0; i < 16; i++) pos[i] = i % 8, doc[i] = i / 8;
        const double loss = run_loss_of(&r, ids->data, lab->data, pos, doc);
        const float want = *(const float *)rl->data, want_norm = *(const float *)rn->data;
        CHECK_MSG(fabs(loss - want) <= 1e-5 * fabs(want), "%s: loss %.8g, PEFT's %.8g", name, loss, want);
        float *grad = th_alloc(l.adapters->numel, sizeof(float));
        CHECK(tt_state_download(&r.st, TT_STATE_GRAD, grad) == 0);
        double sumsq = 0;
        for (size_t k = 0; k < l.adapters->numel; k++) sumsq += (double)grad[k] * grad[k];
        CHECK_MSG(fabs(sqrt(sumsq) - want_norm) <= 1e-5 * want_norm, "%s: gradient norm %.8g, PEFT's %.8g", name,
                  sqrt(sumsq), want_norm);
        for (int t = 0; t < l.n_targets; t++) /* every A and B, by PEFT's name */
            for (int half = 0; half < 2; half++) {
                const tt_param *p = &l.adapters->params[half ? l.targets[t].b : l.targets[t].a];
                char tn[320] = "grad.";
                tt_peft_tensor_name(l.targets[t].module, half, tn + 5, sizeof tn - 5);
                const tt_st_tensor *g = ref_tensor(ref, tn, (size_t)tt_param_numel(p), "F32");
                double err = 0, mag = 0;
                for (int64_t k = 0; g && k < tt_param_numel(p); k++) {
                    const double x = ((const float *)g->data)[k];
                    err = fmax(err, fabs(x - grad[p->offset + k]));
                    mag = fmax(mag, fabs(x));
                }
                CHECK_MSG(g && err <= 1e-4 * mag + 1e-9, "%s: %s off PEFT's by %g (largest %g)", name, tn, err, mag);
            }
        free(grad);
    }
    close_run(&r);
    const char *export_dir = getenv("TITAN_LORA_EXPORT_DIR");
    if (export_dir && ids && lab && !rc) export_trained(name, export_dir, m, &l, &spec, &hc, w, aw, ids->data, lab->data);
    /* the merge, fp32 and bf16, against merge_and_unload's: each weight of a target (GPT-2's c_attn holds three, as
     * column blocks of the Conv1D's (in, out) weight) */
    for (int i = 0; i < m->n_params && !rc; i++) {
        int64_t row0;
        const int t = tt_lora_target_of(&l, m, i, &row0);
        if (t < 0) continue;
        const tt_lora_target *x = &l.targets[t];
        const tt_param *p = &m->params[i];
        const int64_t rows = l.adapters->params[x->b].shape[0], out = p->shape[0], in = p->shape[1];
        tt_hf_slot slot;
        CHECK(tt_model_hf_slot(m, i, &slot) == 0);
        const size_t n = (size_t)tt_param_numel(p);
        float *wm = th_alloc(n, sizeof(float)), *wb = th_alloc(n, sizeof(float));
        for (size_t k = 0; k < n; k++) wb[k] = tt_bf16_to_f32(tt_f32_to_bf16(w[p->offset + (int64_t)k]));
        memcpy(wm, w + p->offset, n * sizeof(float));
        const float *A = aw + l.adapters->params[x->a].offset, *Bm = aw + l.adapters->params[x->b].offset + row0 * l.rank;
        tt_lora_merge(wm, A, Bm, out, in, l.rank, l.scale);
        tt_lora_merge(wb, A, Bm, out, in, l.rank, l.scale);
        char tn[300];
        snprintf(tn, sizeof tn, "merged.%s.weight", x->module);
        const tt_st_tensor *f = ref_tensor(ref, tn, (size_t)(rows * in), "F32");
        snprintf(tn, sizeof tn, "merged_bf16.%s.weight", x->module);
        const tt_st_tensor *h = ref_tensor(ref, tn, (size_t)(rows * in), "BF16");
        double err = 0;
        size_t differ = 0;
        for (int64_t o = 0; f && h && o < out; o++)
            for (int64_t c = 0; c < in; c++) {
                const int64_t k = o * in + c, at = slot.transpose ? c * rows + row0 + o : (row0 + o) * in + c;
                err = fmax(err, fabs(((const float *)f->data)[at] - wm[k]));
                uint16_t hb;
                memcpy(&hb, (const char *)h->data + 2 * at, 2);
                differ += hb != tt_f32_to_bf16(wb[k]);
            }
        CHECK_MSG(err <= 1e-6, "%s: merged %s off PEFT's by %g", name, p->name, err);
        CHECK_MSG(differ == 0, "%s: bf16 merge of %s: %zu of %zu values differ from PEFT's", name, p->name, differ, n);
        free(wm);
        free(wb);
    }
    /* written in PEFT's format and read back: the same values */
    if (!rc && mkdtemp(tmp)) {
        CHECK_MSG(tt_peft_adapter_save(tmp, m, &l, &spec, base_dir, &as) == 0, "%s", tt_last_error());
        tt_lora_spec s2;
        tt_lora l2;
        CHECK_MSG(tt_peft_adapter_spec(tmp, &s2) == 0 && s2.rank == spec.rank && s2.alpha == spec.alpha &&
                      s2.use_rslora == spec.use_rslora && tt_lora_new(m, &s2, &l2) == 0,
                  "%s", tt_last_error());
        float *back = th_alloc(l.adapters->numel, sizeof(float));
        tt_param_store bs = tt_model_host_store(back);
        CHECK_MSG(l2.n_targets == l.n_targets && tt_peft_adapter_load(tmp, &l2, &bs) == 0, "%s", tt_last_error());
        CHECK(!memcmp(back, aw, l.adapters->numel * sizeof(float)));
        free(back);
        tt_lora_free(&l2);
        char path[600];
        snprintf(path, sizeof path, "%s/adapter_model.safetensors", tmp);
        remove(path);
        snprintf(path, sizeof path, "%s/adapter_config.json", tmp);
        remove(path);
        rmdir(tmp);
    }
    free(aw);
    free(w);
    tt_lora_free(&l);
    tt_st_close(ref);
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
    check_variant(GPT2, NULL, 0); /* all-linear: c_attn (q, k, v in one adapter), c_proj, c_fc, mlp.c_proj */
    static const char *const c_attn[] = {"c_attn"};
    check_variant(GPT2, c_attn, 1);
    check_errors();
    static const char *const peft_models[] = {"llama", "qwen2", "qwen3", "mistral", "qwen3_moe", "gpt2", "phi3",
                                              "gemma3", "gemma2", "gpt_oss"};
    for (size_t k = 0; k < sizeof peft_models / sizeof *peft_models; k++) check_peft(peft_models[k]);
    return th_done("test_lora");
}

/* moe.c — the Mixture-of-Experts block (see moe.h): its parameters and their
 * Hugging Face names, and the layer as graph ops. */
#include <stdio.h>
#include <string.h>

#include "models/moe.h"

tt_moe_slots tt_moe_slots_of(const tt_moe_cfg *e)
{
    tt_moe_slots s = {0, -1, 0, 0, -1, -1, -1, -1, 1, -1, -1, -1};
    if (e->has_bias) s.bias = s.n++;
    if (e->router_bias) s.rbias = s.n++;
    s.w13 = s.n, s.n += 2 * e->n_experts;
    s.w2 = s.n, s.n += e->n_experts;
    if (e->expert_biases) s.b13 = s.n, s.n += 2 * e->n_experts, s.b2 = s.n, s.n += e->n_experts;
    const int shared = e->n_shared > 0 && e->shared_ffn > 0;
    if (shared) s.sh1 = s.n++, s.sh3 = s.n++, s.sh2 = s.n++;
    if (shared && e->shared_gate) s.sgate = s.n++;
    return s;
}

tt_err tt_moe_declare(tt_model *m, int unit, const char *prefix, double std, double out_std)
{
    const tt_moe_cfg *e = &m->cfg.moe;
    const int64_t D = m->cfg.dim, F = e->ffn_dim, E = e->n_experts, Fs = e->n_shared ? e->shared_ffn : 0;
    const int first = m->n_params;
    char name[96];
#define DECL(nd, r, k, init, sd, no_decay, ...)                                                               \
    do {                                                                                                      \
        snprintf(name, sizeof name, __VA_ARGS__);                                                             \
        if (tt_model_declare(m, unit, name, nd, (int64_t[]){r, k}, init, sd, no_decay)) return -1;            \
    } while (0)
    DECL(2, E, D, TT_INIT_NORMAL, std, 0, "%s.router.weight", prefix);
    if (e->has_bias) DECL(1, E, 0, TT_INIT_ZEROS, 0, 1, "%s.expert_bias", prefix);
    if (e->router_bias) DECL(1, E, 0, TT_INIT_ZEROS, 0, 1, "%s.router.bias", prefix);
    const int experts = m->n_params;
    for (int x = 0; x < E; x++) {
        DECL(2, F, D, TT_INIT_NORMAL, std, 0, "%s.experts.%d.w1.weight", prefix, x);
        DECL(2, F, D, TT_INIT_NORMAL, std, 0, "%s.experts.%d.w3.weight", prefix, x);
    }
    for (int x = 0; x < E; x++) DECL(2, D, F, TT_INIT_NORMAL, out_std, 0, "%s.experts.%d.w2.weight", prefix, x);
    if (e->expert_biases) {
        for (int x = 0; x < E; x++) {
            DECL(1, F, 0, TT_INIT_ZEROS, 0, 1, "%s.experts.%d.w1.bias", prefix, x);
            DECL(1, F, 0, TT_INIT_ZEROS, 0, 1, "%s.experts.%d.w3.bias", prefix, x);
        }
        for (int x = 0; x < E; x++) DECL(1, D, 0, TT_INIT_ZEROS, 0, 1, "%s.experts.%d.w2.bias", prefix, x);
    }
    /* ranges of expert blocks, each expert's in order: gate/up pairs, then downs (weights, then biases) */
    for (int i = experts; i < m->n_params; i++) {
        const int j = (i - experts) % (3 * E);
        m->params[i].routed = 1;
        m->params[i].expert = j < 2 * E ? j / 2 : j - 2 * E;
    }
    if (Fs) {
        DECL(2, Fs, D, TT_INIT_NORMAL, std, 0, "%s.shared_experts.w1.weight", prefix);
        DECL(2, Fs, D, TT_INIT_NORMAL, std, 0, "%s.shared_experts.w3.weight", prefix);
        DECL(2, D, Fs, TT_INIT_NORMAL, out_std, 0, "%s.shared_experts.w2.weight", prefix);
        if (e->shared_gate) DECL(2, 1, D, TT_INIT_NORMAL, std, 0, "%s.shared_expert_gate.weight", prefix);
    }
#undef DECL
    return m->n_params - first == tt_moe_slots_of(e).n ? 0 : tt_errorf("model: MoE layout");
}

/* A view of `n` consecutive parameters starting at p[i] as one (n, r, k) value, or (n, r) for k = 0, in their
 * dtype (fp32; LoRA's frozen base holds the experts' weights in bf16) */
static tt_value *stacked(tt_graph *g, tt_value *const *p, int i, int64_t n, int64_t r, int64_t k)
{
    return p[i] ? tt_value_view(g, p[i]->base, p[i]->offset, p[i]->dtype, k ? 3 : 2, (int64_t[]){n, r, k}) : NULL;
}

/* The shared experts on h (N, D), gated by Qwen2-MoE's sigmoid(h . gate)
 * where it has one (a route to one expert with sigmoid scores); NULL where
 * the block has none. */
static tt_value *shared_experts(tt_graph *g, const tt_moe_slots *s, tt_value *const *p, tt_value *h)
{
    if (s->sh1 < 0) return NULL;
    tt_value *sh = tt_linear(g, tt_swiglu(g, tt_linear(g, h, p[s->sh1], NULL), tt_linear(g, h, p[s->sh3], NULL)),
                             p[s->sh2], NULL); // (N, D)
    if (s->sgate < 0) return sh;
    const tt_moe_attrs ga = {1, 1, TT_SCORE_SIGMOID, 0, 0, 0, 1.0};
    tt_value *one = NULL, *p1 = NULL, *q1 = NULL, *o1 = NULL;
    tt_value *gate = tt_moe_route(g, tt_matmul_to(g, h, p[s->sgate], 0, 1, TT_F32), NULL, &ga, &one, NULL);
    if (tt_moe_sort(g, one, 1, &p1, &q1, &o1)) return NULL;
    return tt_moe_combine(g, sh, p1, q1, gate, 1);
}

/* Every expert's SwiGLU over its rows xs (M, D), sorted by expert with
 * offsets off, as two grouped matmuls; the SwiGLU between computes the rows
 * the offsets cover (all of them here; under expert parallelism the receive
 * buffer is larger than the rows it gets). GPT-OSS's experts add their
 * biases after each product and clamp their SwiGLU. (M, D). */
static tt_value *experts(tt_graph *g, const tt_moe_cfg *e, const tt_moe_slots *s, tt_value *const *p, tt_value *xs,
                         tt_value *off)
{
    const int64_t E = e->n_experts, F = e->ffn_dim, D = xs ? xs->shape[1] : 0;
    tt_value *ab = tt_grouped_matmul(g, xs, stacked(g, p, s->w13, E, 2 * F, D), off, 1); // (M, 2F)
    if (s->b13 >= 0) ab = tt_grouped_bias_add(g, ab, stacked(g, p, s->b13, E, 2 * F, 0), off);
    tt_value *act = e->swiglu_limit > 0 ? tt_swiglu_clamped_rows(g, ab, off, e->swiglu_alpha, e->swiglu_limit)
                                        : tt_swiglu_fused_rows(g, ab, off);         // (M, F)
    tt_value *y = tt_grouped_matmul(g, act, stacked(g, p, s->w2, E, D, F), off, 1); // (M, D)
    return s->b2 >= 0 ? tt_grouped_bias_add(g, y, stacked(g, p, s->b2, E, D, 0), off) : y;
}

tt_value *tt_moe_layer(tt_graph *g, const tt_moe_cfg *e, tt_value *const *p, tt_value *h, int B, int T,
                       tt_value *aux_scale)
{
    const tt_moe_slots s = tt_moe_slots_of(e);
    const int E = e->n_experts, k = e->top_k;
    const tt_moe_attrs ra = {E, k, e->score_func, e->route_norm, e->n_group, e->topk_group, e->route_scale};
    tt_value *logits = tt_matmul_to(g, h, p[s.router], 0, 1, TT_F32); // (N, E), scored in fp32
    if (s.rbias >= 0) logits = tt_bias_add(g, logits, p[s.rbias]);   /* GPT-OSS's router bias */
    tt_value *expert = NULL, *perm = NULL, *pos = NULL, *off = NULL, *scores = NULL;
    tt_value *gate = tt_moe_route(g, logits, s.bias >= 0 ? p[s.bias] : NULL, &ra, &expert, &scores); // (N, k)
    if (aux_scale && e->aux_coef > 0) { /* load balancing, per batch or per sequence */
        const tt_moe_aux_attrs aa = {e->aux_seq ? TT_AUX_SEQUENCE : TT_AUX_BALANCE, E, k, B, T, e->aux_coef};
        tt_moe_name_aux_loss(tt_moe_aux_loss(g, scores, expert, aux_scale, &aa));
    }
    if (aux_scale && e->z_coef > 0) {
        const tt_moe_aux_attrs za = {TT_AUX_Z, E, k, B, T, e->z_coef};
        tt_moe_name_aux_loss(tt_moe_aux_loss(g, logits, NULL, aux_scale, &za));
    }
    if (tt_moe_sort(g, expert, E, &perm, &pos, &off)) return NULL;
    tt_moe_name_offsets(off);                                                           // (E+1) i32
    tt_value *xs = tt_moe_permute(g, h, perm, pos, e->score_before ? gate : NULL, k); // (N*k, D)
    tt_moe_mark_dispatch(xs);
    tt_value *ys = experts(g, e, &s, p, xs, off);                                     // (N*k, D)
    tt_moe_mark_combine(ys);
    /* after the routed experts, so that under expert parallelism they compute while the rows travel */
    tt_value *sh = shared_experts(g, &s, p, h);
    tt_value *y = tt_moe_combine(g, ys, perm, pos, e->score_before ? NULL : gate, k); // (N, D)
    return s.sh1 < 0 ? y : tt_add(g, y, sh);
}

/* GPT-OSS's names: mlp.router.{weight,bias}; each layer's experts packed (E, in, out), the gate and up columns
 * of gate_up_proj (E, D, 2F) and of its bias (E, 2F) interleaved (gate first), down_proj (E, F, D) and its bias
 * (E, D) */
static tt_err gpt_oss_slot(const tt_model *m, int l, int k, tt_hf_slot *s)
{
    const tt_moe_slots b = tt_moe_slots_of(&m->cfg.moe);
    const int E = m->cfg.moe.n_experts, F = m->cfg.moe.ffn_dim, D = m->cfg.dim;
    /* each packed tensor: its first slot, parameters, interleave, transpose, shape */
    const struct { const char *name; int first, count, ilv, transpose, ndim; int64_t shape[3]; } t[] = {
        {"mlp.experts.gate_up_proj", b.w13, 2 * E, 2, 1, 3, {E, D, 2 * F}},
        {"mlp.experts.down_proj", b.w2, E, 1, 1, 3, {E, F, D}},
        {"mlp.experts.gate_up_proj_bias", b.b13, 2 * E, 2, 0, 2, {E, 2 * F}},
        {"mlp.experts.down_proj_bias", b.b2, E, 1, 0, 2, {E, D}},
    };
    const char *n = k == b.router ? "mlp.router.weight" : k == b.rbias ? "mlp.router.bias" : NULL;
    for (size_t i = 0; i < sizeof t / sizeof t[0] && !n; i++) {
        if (t[i].first < 0 || k < t[i].first || k >= t[i].first + t[i].count) continue;
        n = t[i].name;
        *s = (tt_hf_slot){.part = k - t[i].first, .n_parts = t[i].count, .stacked = 1, .hf_ndim = t[i].ndim,
                          .hf_shape = {t[i].shape[0], t[i].shape[1], t[i].shape[2]}, .transpose = t[i].transpose,
                          .ilv = t[i].ilv};
    }
    if (!n) return tt_errorf("model: layer %d has no GPT-OSS MoE slot %d", l, k);
    snprintf(s->name, sizeof s->name, "model.layers.%d.%s", l, n);
    return 0;
}

tt_err tt_moe_hf_slot(const tt_model *m, int l, int k, tt_hf_slot *s)
{
    const tt_moe_slots b = tt_moe_slots_of(&m->cfg.moe);
    const int packed = m->ext.hf_packed_experts, mx = m->ext.hf_mixtral && !packed;
    const int E = m->cfg.moe.n_experts, F = m->cfg.moe.ffn_dim, D = m->cfg.dim;
    const char *blk = mx ? "block_sparse_moe" : "mlp";
    char n[96];
    if (m->ext.hf_gpt_oss) return gpt_oss_slot(m, l, k, s);
    if (k == b.router) snprintf(n, sizeof n, "%s.gate.weight", blk);
    else if (k == b.bias) snprintf(n, sizeof n, "%s.gate.e_score_correction_bias", blk);
    else if (packed && k >= b.w13 && k < b.w2 + E) { /* gate rows, then up rows, of each expert; then downs */
        const int up = k < b.w2;
        snprintf(n, sizeof n, "mlp.experts.%s", up ? "gate_up_proj" : "down_proj");
        *s = (tt_hf_slot){.part = up ? k - b.w13 : k - b.w2, .n_parts = up ? 2 * E : E, .stacked = 1, .hf_ndim = 3,
                          .hf_shape = {E, up ? 2 * F : D, up ? D : F}};
    } else if (k >= b.w13 && k < b.w13 + 2 * E)
        snprintf(n, sizeof n, "%s.experts.%d.%s.weight", blk, (k - b.w13) / 2,
                 (k - b.w13) % 2 ? (mx ? "w3" : "up_proj") : (mx ? "w1" : "gate_proj"));
    else if (k >= b.w2 && k < b.w2 + E)
        snprintf(n, sizeof n, "%s.experts.%d.%s.weight", blk, k - b.w2, mx ? "w2" : "down_proj");
    else if (k == b.sh1 || k == b.sh3 || k == b.sh2)
        snprintf(n, sizeof n, "mlp.shared_expert%s.%s.weight", m->cfg.moe.shared_gate ? "" : "s",
                 k == b.sh1 ? "gate_proj" : k == b.sh3 ? "up_proj" : "down_proj");
    else if (k == b.sgate) snprintf(n, sizeof n, "mlp.shared_expert_gate.weight");
    else return tt_errorf("model: layer %d has no MoE slot %d", l, k);
    snprintf(s->name, sizeof s->name, "model.layers.%d.%s", l, n);
    return 0;
}

/* The marks are value names, as the offsets' and the auxiliary losses' are:
 * the pass that reads them runs before any other renames a value. */
#define MOE_DISPATCH_NAME "moe.dispatch"
#define MOE_COMBINE_NAME "moe.combine"
void tt_moe_mark_dispatch(tt_value *xs)
{
    if (xs) snprintf(xs->name, sizeof xs->name, MOE_DISPATCH_NAME);
}
int tt_moe_is_dispatch(const tt_value *v) { return strcmp(v->name, MOE_DISPATCH_NAME) == 0; }
void tt_moe_mark_combine(tt_value *ys)
{
    if (ys) snprintf(ys->name, sizeof ys->name, MOE_COMBINE_NAME);
}
int tt_moe_is_combine(const tt_value *v) { return strcmp(v->name, MOE_COMBINE_NAME) == 0; }

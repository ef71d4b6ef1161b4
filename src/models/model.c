/* model.c — the front over the architectures (llama.c, gpt2.c): a model from
 * its config, the unit layout and initialisation, binding it into a graph and
 * its forward, the Hugging Face names, and the FLOPs/parameter arithmetic.
 * What the architectures call back (declaring a parameter, the per-layer
 * facts) is model_parts.c, so that they do not call this file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

static const tt_arch_impl *arch_impl(tt_arch_id a)
{
    return a == TT_ARCH_LLAMA ? &tt_arch_llama : a == TT_ARCH_GPT2 ? &tt_arch_gpt2 : NULL;
}

const char *tt_arch_name(tt_arch_id a)
{
    const tt_arch_impl *impl = arch_impl(a);
    return impl ? impl->name : "?";
}

static tt_err check_cfg(const tt_model_cfg *c)
{
    const struct {
        const char *key;
        int value;
    } sizes[] = {{"dim", c->dim}, {"n_layers", c->n_layers}, {"n_heads", c->n_heads}, {"ffn_dim", c->ffn_dim},
                 {"vocab_size", c->vocab_size}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value <= 0) return tt_errorf("model: %s must be positive (got %d)", sizes[i].key, sizes[i].value);
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
        return tt_errorf("model: n_heads (%d) must be a multiple of n_kv_heads (%d)", c->n_heads, c->n_kv_heads);
    if (c->head_dim <= 0 || c->head_dim % 2)
        return tt_errorf("model: head_dim must be positive and even (got %d)", c->head_dim);
    if (c->window < 0) return tt_errorf("model: the sliding window must be 0 (none) or positive (got %d)", c->window);
    const tt_mla_cfg *a = &c->mla;
    if (a->kv_lora_rank > 0 &&
        (c->arch != TT_ARCH_LLAMA || a->qk_rope != c->head_dim || a->qk_nope <= 0 || a->v_head <= 0 ||
         a->q_lora_rank < 0 || c->qkv_bias || c->qk_norm))
        return tt_errorf("model: Multi-head Latent Attention needs a llama block without q/k/v biases or norms, "
                         "head_dim = qk_rope_head_dim (%d, got %d), qk_nope_head_dim and v_head_dim > 0", a->qk_rope,
                         c->head_dim);
    const tt_moe_cfg *e = &c->moe;
    if (e->n_experts > 0 && (e->n_experts > TT_MOE_MAX_EXPERTS || e->top_k < 1 || e->top_k > e->n_experts ||
                             e->ffn_dim <= 0))
        return tt_errorf("model: %d experts, top-%d, %d wide: want 1 <= top_k <= num_experts <= %d", e->n_experts,
                         e->top_k, e->ffn_dim, TT_MOE_MAX_EXPERTS);
    return 0;
}

tt_model *tt_model_new(const tt_model_cfg *cfg)
{
    return tt_model_new_ext(cfg, NULL);
}

/* The declaration table's bytes, checked against the memory available before
 * it is built (a config.json of 10^9 layers is refused at once, not after
 * minutes of growing the table): a layer adds the same parameters whatever
 * the depth, so declaring the model with one and with two layers (small
 * whatever the config) gives the count. Only the table: the weights are the
 * caller's (titan plan builds the table of an 8B model and no weights). */
static tt_err check_table_size(const tt_arch_impl *impl, tt_model *m)
{
    int64_t n[2];
    for (int k = 0; k < 2; k++) {
        tt_model probe;
        memset(&probe, 0, sizeof probe);
        probe.cfg = m->cfg;
        probe.ext = m->ext;
        probe.cfg.n_layers = k + 1;
        tt_err rc = impl->declare(&probe);
        n[k] = probe.n_params;
        free(probe.params);
        if (rc) return rc;
    }
    const int64_t per_layer = n[1] - n[0], fixed = n[0] - per_layer, L = m->cfg.n_layers;
    const size_t params = (size_t)(fixed + per_layer * L); /* <= 2^31 layers of a few dozen: no overflow */
    size_t bytes;
    if (tt_mul_size(params, sizeof(tt_param), &bytes))
        return tt_errorf("model: the parameter table of n_layers = %d (%zu parameters) overflows", m->cfg.n_layers,
                         params);
    if (tt_mem_check(bytes + ((size_t)L + 3) * sizeof(tt_unit),
                     "model: the parameter table of n_layers = %d (%zu parameters, %lld per layer)", m->cfg.n_layers,
                     params, (long long)per_layer))
        return -1;
    if (params > INT32_MAX)
        return tt_errorf("model: n_layers = %d declares %zu parameters (%lld per layer), more than %d", m->cfg.n_layers,
                         params, (long long)per_layer, INT32_MAX);
    /* the table at its exact size: growing it by doubling could ask twice that */
    if (!(m->params = malloc((params ? params : 1) * sizeof *m->params)))
        return tt_errorf("model: out of memory for the parameter table of n_layers = %d (%zu parameters)",
                         m->cfg.n_layers, params);
    m->cap_params = (int)params;
    return 0;
}

/* Each unit's routed experts as ranges of expert blocks (tt_unit): a range
 * starts where the expert index falls back (expert 0 after the last); within
 * one, every expert's parameters must be consecutive, in expert order and of
 * one size, which is what lets expert parallelism hand a rank a contiguous
 * run of experts. Called once the offsets are known. */
static tt_err lay_out_experts(tt_model *m)
{
    for (int i = 0; i < m->n_params; i++) {
        const tt_param *p = &m->params[i];
        if (!p->routed) continue;
        tt_unit *u = &m->units[p->unit];
        const int E = m->cfg.moe.n_experts;
        const int start = i == 0 || !m->params[i - 1].routed || m->params[i - 1].unit != p->unit ||
                          m->params[i - 1].expert > p->expert;
        if (start) {
            if (u->n_expert_ranges == TT_MAX_EXPERT_RANGES || p->expert != 0)
                return tt_errorf("model: the routed experts of %s are not laid out expert after expert ('%s')",
                                 u->name, p->name);
            u->n_experts = E;
            u->expert_offset[u->n_expert_ranges++] = p->offset;
        }
        /* the range's extent so far: expert x's block ends where this parameter does */
        const int r = u->n_expert_ranges - 1;
        const int64_t end = p->offset + tt_param_numel(p) - u->expert_offset[r];
        if (p->expert == 0) u->expert_numel[r] = end;
        else if (end > (int64_t)(p->expert + 1) * u->expert_numel[r] || p->offset < u->expert_offset[r] +
                                                                              (int64_t)p->expert * u->expert_numel[r])
            return tt_errorf("model: the routed expert %d of %s differs in size from expert 0 ('%s')", p->expert,
                             u->name, p->name);
    }
    return 0;
}

/* Params are declared unit by unit, so each unit is one contiguous range of
 * the flat layout: offsets in declaration order. n_units: as many units as
 * the parameters name, or (LoRA's adapters) the base's count, some of them
 * possibly empty. */
static tt_err lay_out(tt_model *m, int n_units)
{
    const tt_model_cfg *c = &m->cfg;
    m->n_units = n_units ? n_units : m->n_params ? m->params[m->n_params - 1].unit + 1 : 0;
    if (!(m->units = calloc((size_t)m->n_units + 1, sizeof *m->units))) return tt_errorf("out of memory");
    size_t off = 0;
    int i = 0;
    for (int k = 0; k < m->n_units; k++) {
        tt_unit *u = &m->units[k];
        u->first_param = i, u->offset = (int64_t)off;
        for (; i < m->n_params && m->params[i].unit == k; i++) {
            tt_param *p = &m->params[i];
            p->offset = (int64_t)off;
            /* the layout's floats are addressed in bytes: keep 4 * numel in range */
            const int64_t n = tt_param_numel(p);
            if (n < 0 || (uint64_t)n > (uint64_t)(INT64_MAX / 4) - off)
                return tt_errorf("model: parameter '%s' (%lld x %lld) takes the layout past %lld elements", p->name,
                                 (long long)p->shape[0], (long long)(p->ndim > 1 ? p->shape[1] : 1),
                                 (long long)(INT64_MAX / 4));
            off += (size_t)n;
        }
        u->numel = (int64_t)off - u->offset;
    }
    if (i < m->n_params)
        return tt_errorf("model: parameter '%s' is in unit %d of %d", m->params[i].name, m->params[i].unit, m->n_units);
    m->numel = off;
    for (int u = 0; u < m->n_units; u++) {
        tt_unit *x = &m->units[u];
        if (u == 0) snprintf(x->name, sizeof x->name, "embeddings");
        else if (u <= c->n_layers) snprintf(x->name, sizeof x->name, "%s.%d", c->arch == TT_ARCH_GPT2 ? "h" : "layers", u - 1);
        else snprintf(x->name, sizeof x->name, "head");
        x->block = u >= 1 && u <= c->n_layers;
    }
    return lay_out_experts(m);
}

tt_model *tt_model_new_ext(const tt_model_cfg *cfg, const tt_model_ext *ext)
{
    const tt_arch_impl *impl = arch_impl(cfg->arch);
    if (!impl) {
        tt_errorf("unknown model architecture %d", (int)cfg->arch);
        return NULL;
    }
    if (check_cfg(cfg)) return NULL;
    tt_model *m = calloc(1, sizeof *m);
    if (!m) {
        tt_errorf("out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    if (ext) m->ext = *ext;
    if (check_table_size(impl, m) || impl->declare(m) || lay_out(m, 0)) {
        tt_model_free(m);
        return NULL;
    }
    return m;
}

tt_model *tt_model_new_declared(const tt_model *like, tt_err (*declare)(tt_model *m, void *ctx), void *ctx)
{
    tt_model *m = calloc(1, sizeof *m);
    if (!m) {
        tt_errorf("out of memory");
        return NULL;
    }
    m->cfg = like->cfg;
    m->ext = like->ext;
    if (declare(m, ctx) || lay_out(m, like->n_units)) {
        tt_model_free(m);
        return NULL;
    }
    return m;
}

void tt_model_free(tt_model *m)
{
    if (!m) return;
    free(m->params);
    free(m->units);
    free(m);
}

/* One stream per parameter, drawn in element order: element k takes draws
 * [k * per, (k + 1) * per) of it (per = 2 for a Box-Muller normal, 1 for a
 * uniform). The generator is counter-based, so the threads each start their
 * range of elements at its own counter and the values do not depend on the
 * thread count; a big model's init then runs on every core (llama_768's
 * normals, their log and cos, took about 8 s on one). */
void tt_model_init_param(const tt_model *m, int i, uint64_t seed, float *w)
{
    const tt_param *p = &m->params[i];
    const int64_t n = tt_param_numel(p);
    const uint64_t stream = tt_hash64(seed, (uint64_t)i);
    const int per = p->init == TT_INIT_UNIFORM ? 1 : 2;
    #pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (int64_t k = 0; k < n; k++) {
        tt_rng r = {stream, (uint64_t)k * (uint64_t)per};
        w[k] = p->init == TT_INIT_ONES    ? 1.0f
               : p->init == TT_INIT_ZEROS ? 0.0f
               : p->init == TT_INIT_UNIFORM ? (float)(p->std * (2.0 * tt_rng_uniform(&r) - 1.0))
                                            : (float)(p->std * tt_rng_normal(&r));
    }
}

/* The largest parameter's element count: a staging buffer for one at a time. */
static int64_t max_param_numel(const tt_model *m)
{
    int64_t mx = 1;
    for (int i = 0; i < m->n_params; i++)
        if (tt_param_numel(&m->params[i]) > mx) mx = tt_param_numel(&m->params[i]);
    return mx;
}

tt_err tt_model_init_weights(const tt_model *m, uint64_t seed, const tt_param_store *dst)
{
    float *w = tt_alloc((size_t)max_param_numel(m) * sizeof(float));
    tt_err rc = w ? 0 : -1;
    for (int i = 0; i < m->n_params && !rc; i++) {
        tt_model_init_param(m, i, seed, w);
        rc = dst->write(dst->ctx, m, i, w);
    }
    tt_free(w);
    return rc;
}

static tt_err host_read(void *ctx, const tt_model *m, int i, float *dst)
{
    memcpy(dst, (const float *)ctx + m->params[i].offset, (size_t)tt_param_numel(&m->params[i]) * sizeof(float));
    return 0;
}
static tt_err host_write(void *ctx, const tt_model *m, int i, const float *src)
{
    memcpy((float *)ctx + m->params[i].offset, src, (size_t)tt_param_numel(&m->params[i]) * sizeof(float));
    return 0;
}
tt_param_store tt_model_host_store(float *flat) { return (tt_param_store){flat, host_read, host_write}; }

int tt_model_find(const tt_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

tt_err tt_model_bind(tt_graph *g, const tt_model *m, tt_value **vals, tt_value **units)
{
    if (g->n_units) return tt_errorf("model: the graph already has units");
    tt_value **u = calloc((size_t)m->n_units + 1, sizeof *u);
    if (!u) return tt_errorf("out of memory");
    tt_err rc = 0;
    for (int k = 0; k < m->n_units && !rc; k++) {
        const int64_t n = m->units[k].numel;
        if (tt_graph_add_unit(g, m->units[k].name, m->units[k].block) != k || !(u[k] = tt_value_new(g, TT_ROLE_PARAM, TT_F32, 1, &n)))
            rc = -1;
        else {
            u[k]->unit = k;
            snprintf(u[k]->name, sizeof u[k]->name, "%s", m->units[k].name);
        }
    }
    for (int i = 0; i < m->n_params && !rc; i++) {
        const tt_param *p = &m->params[i];
        tt_value *v = tt_value_view(g, u[p->unit], (size_t)(p->offset - m->units[p->unit].offset) * sizeof(float), TT_F32,
                                    p->ndim, p->shape);
        if (!(vals[i] = v)) rc = -1;
        else snprintf(v->name, sizeof v->name, "%s", p->name);
    }
    if (!rc && units) memcpy(units, u, (size_t)m->n_units * sizeof *u);
    free(u);
    return rc || g->failed ? -1 : 0;
}

tt_value *tt_model_forward(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                           tt_value **head)
{
    return arch_impl(m->cfg.arch)->forward(g, m, vals, in, head);
}

tt_value *tt_model_logits(tt_graph *g, const tt_model *m, tt_value *h, tt_value *head)
{
    tt_value *z = tt_linear(g, h, head, NULL);
    return m->ext.final_softcap > 0 ? tt_softcap(g, z, m->ext.final_softcap) : z;
}

tt_value *tt_model_loss(tt_graph *g, const tt_model *m, tt_value *h, tt_value *head, tt_value *targets,
                        tt_value *scale, int ignore_index)
{
    return tt_ce_linear_capped(g, h, head, targets, scale, ignore_index, m->ext.final_softcap);
}

tt_err tt_model_hf_slot(const tt_model *m, int i, tt_hf_slot *out)
{
    memset(out, 0, sizeof *out);
    out->n_parts = 1;
    if (i < 0 || i >= m->n_params) return tt_errorf("model: parameter index %d out of range", i);
    return arch_impl(m->cfg.arch)->hf_slot(m, i, out);
}

const char *tt_model_hf_optional_prefix(const tt_model *m)
{
    return arch_impl(m->cfg.arch)->hf_optional_prefix;
}

int tt_model_hf_ignorable(const tt_model *m, const char *name)
{
    return arch_impl(m->cfg.arch)->hf_ignorable(m, name);
}

/* Every parameter, and those a token uses (a routed expert's at top_k / n_experts), with or without the
 * input lookup tables */
static int64_t count(const tt_model_cfg *cfg, const tt_model_ext *ext, int64_t *used, int matmul_only)
{
    tt_model *m = ext ? tt_model_new_ext(cfg, ext) : tt_model_new(cfg);
    int64_t total = 0;
    double u = 0;
    const double routed = cfg->moe.n_experts > 0 ? (double)cfg->moe.top_k / cfg->moe.n_experts : 1.0;
    for (int i = 0; m && i < m->n_params; i++) {
        const int64_t n = tt_param_numel(&m->params[i]);
        total += n;
        if (matmul_only && m->params[i].embedding_only) continue;
        u += m->params[i].routed ? n * routed : (double)n;
    }
    tt_model_free(m);
    if (used) *used = (int64_t)llround(u);
    return total;
}

int64_t tt_model_count_params(const tt_model_cfg *cfg, int64_t *matmul_params)
{
    return count(cfg, NULL, matmul_params, 1);
}

int64_t tt_model_count_active(const tt_model_cfg *cfg, const tt_model_ext *ext, int64_t *active)
{
    return count(cfg, ext, active, 0);
}

double tt_model_flops_per_token(const tt_model_cfg *cfg, int seq_len)
{
    int64_t mm = 0;
    tt_model_count_params(cfg, &mm);
    const tt_attn_dims ad = tt_model_attn_dims(cfg); /* QK^T and PV: 6 L H (d_qk + d_v) T per token */
    return 6.0 * (double)mm + 6.0 * cfg->n_layers * (double)cfg->n_heads * (ad.qk + ad.v) * seq_len;
}

void tt_model_moe_describe(const tt_model_cfg *c, const tt_model_ext *x, char *buf, size_t cap)
{
    const tt_moe_cfg *e = &c->moe;
    size_t at = 0;
    buf[0] = '\0';
    if (e->n_experts <= 0 || cap == 0) return;
#define PUT(...) (at += at < cap ? (size_t)snprintf(buf + at, cap - at, __VA_ARGS__) : 0)
    PUT("MoE layers ");
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) { /* runs of consecutive MoE layers */
        if (!tt_model_layer_is_moe(c, l) || (l > 0 && tt_model_layer_is_moe(c, l - 1))) continue;
        int end = l;
        while (end + 1 < c->n_layers && tt_model_layer_is_moe(c, end + 1)) end++;
        if (end > l) PUT("%s%d-%d", n ? "," : "", l, end);
        else PUT("%s%d", n ? "," : "", l);
        n++;
    }
    int moe = 0;
    for (int l = 0; l < c->n_layers; l++) moe += tt_model_layer_is_moe(c, l);
    PUT(" (%d of %d): %d experts of %d, top-%d, %s%s", moe, c->n_layers, e->n_experts, e->ffn_dim, e->top_k,
        e->score_func == TT_SCORE_SIGMOID ? "sigmoid" : "softmax", e->route_norm ? ", renormalised" : "");
    if (e->route_scale != 1.0) PUT(", scaled %g", e->route_scale);
    if (e->n_group > 1) PUT(", %d of %d groups", e->topk_group, e->n_group);
    if (e->score_before) PUT(", gate on the input");
    if (e->n_shared) PUT("; shared experts %d wide%s", e->shared_ffn, e->shared_gate ? " (gated)" : "");
    if (e->has_bias) PUT("; balancing bias");
    int64_t active = 0, total = tt_model_count_active(c, x, &active);
    PUT("; %.2fM of %.2fM parameters active", active / 1e6, total / 1e6);
#undef PUT
}

/* resolve.c — a config in the terms of the layers below it: the model's
 * architecture (from the model.* keys or a Hugging Face config.json), the
 * backend and the compute dtype. */
#include <math.h>
#include <string.h>

#include "config/resolve.h"
#include "hf/peft_adapter.h"
#include "hf/hf_model.h"

/* The auxiliary losses of the config, on an MoE model (a Hugging Face one included). */
static void moe_losses_from_config(const tt_model_config *m, tt_model_cfg *o)
{
    if (o->moe.n_experts <= 0) return;
    o->moe.aux_coef = m->router_aux_loss_coef;
    o->moe.aux_seq = m->router_aux_loss_seq;
    o->moe.z_coef = m->router_z_loss_coef;
}

/* The model.* keys that apply to a model loaded from model.hf_assets_path:
 * how long a context it has (not GPT-2's, whose positions are weights), how
 * much its routers scale, and the balancing and auxiliary losses. The folder's
 * config.json gives the rest, so overriding one of them would do nothing (a
 * recipe's model.* keys describe its own model and give way to the folder). */
static const char *const hf_model_keys[] = {"model.hf_assets_path",       "model.max_seq_len",
                                             "model.route_scale",          "model.load_balance_coeff",
                                             "model.router_aux_loss_coef", "model.router_aux_loss_seq",
                                             "model.router_z_loss_coef",   NULL};

static int hf_applies(const char *key)
{
    for (int i = 0; hf_model_keys[i]; i++)
        if (!strcmp(key, hf_model_keys[i])) return 1;
    return 0;
}

/* The model.* keys overridden (the command line) over a loaded model's config.json (hc): applied, or refused by
 * name. */
static tt_err hf_model_overrides(const tt_config *c, tt_hf_config *hc)
{
    const tt_model_config *m = &c->model;
    const char *dir = m->hf_assets_path, *arch = tt_hf_family_architecture(hc->family), *key;
    tt_model_cfg *o = &hc->model;
    for (size_t i = 0; (key = tt_config_key_name(i)); i++)
        if (!strncmp(key, "model.", 6) && tt_config_is_overridden(c, key) && !hf_applies(key))
            return tt_errorf("%s is given on the command line, but model.hf_assets_path %s gives the architecture "
                             "(its config.json): leave it out (on a loaded model only model.max_seq_len, "
                             "model.route_scale, model.load_balance_coeff and the router loss keys apply)",
                             key, dir);
    if (tt_config_is_overridden(c, "model.max_seq_len")) {
        if (o->arch == TT_ARCH_GPT2)
            return tt_errorf("model.max_seq_len is given, but %s is a GPT-2 whose %d positions are learned weights: "
                             "leave it out",
                             dir, o->max_seq_len);
        o->max_seq_len = m->max_seq_len;
    }
    if (tt_config_is_overridden(c, "model.route_scale")) {
        if (o->moe.n_experts <= 0)
            return tt_errorf("model.route_scale is given, but %s (%s) has no experts", dir, arch);
        o->moe.route_scale = m->route_scale;
    }
    if (tt_config_is_overridden(c, "model.load_balance_coeff") && m->load_balance_coeff > 0 && !o->moe.has_bias)
        return tt_errorf("model.load_balance_coeff = %g, but the routers of %s (%s) have no selection bias for it to "
                         "move: leave it out, or 0",
                         m->load_balance_coeff, dir, arch);
    moe_losses_from_config(m, o);
    return 0;
}

tt_err tt_model_cfg_from_config(const tt_config *c, tt_model_cfg *o, tt_model_ext *ext, tt_hf_config *hf)
{
    const tt_model_config *m = &c->model;
    memset(o, 0, sizeof *o);
    if (ext) memset(ext, 0, sizeof *ext);
    if (m->hf_assets_path[0]) { /* the architecture is the HF folder's config.json */
        tt_hf_config hc;
        if (tt_hf_config_read(m->hf_assets_path, &hc)) return tt_error_prefix("model.hf_assets_path: ");
        tt_hf_detect_layout(m->hf_assets_path, &hc.model, &hc.ext);
        if (hf_model_overrides(c, &hc)) return -1;
        *o = hc.model;
        if (ext) *ext = hc.ext;
        if (hf) *hf = hc;
        return 0;
    }
    o->arch = m->name == TT_MODEL_GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    o->dim = m->dim;
    o->n_layers = m->n_layers;
    o->n_heads = m->n_heads;
    o->n_kv_heads = m->n_kv_heads;
    o->head_dim = m->head_dim;
    o->ffn_dim = m->ffn_dim;
    o->vocab_size = m->vocab_size;
    o->max_seq_len = m->max_seq_len;
    o->norm_eps = m->norm_eps;
    o->rope.theta = m->rope_theta;
    o->rope.llama3 = m->rope_scaling == TT_ROPE_SCALING_LLAMA3;
    o->rope.factor = m->rope_factor;
    o->rope.low_freq_factor = m->rope_low_freq_factor;
    o->rope.high_freq_factor = m->rope_high_freq_factor;
    o->rope.original_max_pos = m->rope_original_max_position_embeddings;
    o->tie_embeddings = m->tie_embeddings;
    o->qkv_bias = m->qkv_bias;
    o->qk_norm = m->qk_norm;
    if (m->no_rope_interval > 0 && m->n_layers > TT_MODEL_MAX_LAYERS)
        return tt_errorf("model.no_rope_interval: layers without RoPE are supported in models of at most %d layers "
                         "(model.n_layers = %d)", TT_MODEL_MAX_LAYERS, m->n_layers);
    if (ext) { /* the dense families' blocks, as their config.json would give them */
        ext->qk_norm_full = m->qk_norm_full;
        ext->post_norms = m->post_norms;
        for (int l = 0; l < m->n_layers && l < TT_MODEL_MAX_LAYERS && m->no_rope_interval > 0; l++)
            ext->no_rope[l] = (l + 1) % m->no_rope_interval == 0;
        const int rot = (int)floor(m->head_dim * m->partial_rotary_factor);
        ext->rope_rot = m->partial_rotary_factor > 0 && rot < m->head_dim ? rot : 0;
        ext->embed_mult = m->embedding_multiplier, ext->residual_mult = m->residual_multiplier;
        ext->attn_mult = m->attention_multiplier, ext->logits_div = m->logits_scaling;
    }
    if (m->kv_lora_rank > 0) /* TorchTitan's MLA rotates adjacent pairs (a complex view): interleaved */
        o->mla = (tt_mla_cfg){.q_lora_rank = m->q_lora_rank, .kv_lora_rank = m->kv_lora_rank,
                              .qk_nope = m->qk_nope_head_dim, .qk_rope = m->qk_rope_head_dim, .v_head = m->v_head_dim,
                              .rope_interleave = 1};
    if (m->num_experts > 0)
        o->moe = (tt_moe_cfg){.n_experts = m->num_experts, .top_k = m->top_k,
                              .ffn_dim = m->moe_ffn_dim ? m->moe_ffn_dim : m->ffn_dim,
                              .n_shared = m->num_shared_experts,
                              .shared_ffn = m->num_shared_experts * (m->moe_ffn_dim ? m->moe_ffn_dim : m->ffn_dim),
                              .n_dense_layers = m->n_dense_layers,
                              .sparse_step = m->decoder_sparse_step,
                              .score_func = m->score_func == TT_SCORE_FUNC_SIGMOID ? TT_SCORE_SIGMOID : TT_SCORE_SOFTMAX,
                              .route_norm = m->route_norm, .score_before = m->score_before_experts,
                              .n_group = m->num_expert_groups, .topk_group = m->num_limited_groups,
                              .route_scale = m->route_scale, .has_bias = m->load_balance_coeff > 0,
                              .shared_gate = m->shared_expert_gate};
    moe_losses_from_config(m, o);
    return 0;
}

const tt_backend *tt_config_backend(const tt_config *c)
{
    return tt_backend_get(c->training.exec_mode == TT_EXEC_DEBUG ? "ref" : c->training.backend);
}

tt_dtype tt_config_act_dtype(const tt_config *c)
{
    return c->training.mixed_precision_param == TT_PARAM_BFLOAT16 ? TT_BF16 : TT_F32;
}

/* The [lora] keys as a spec: lora.target_modules is comma-separated names, or all-linear. */
static tt_err keys_spec(const tt_lora_config *lc, tt_lora_spec *s)
{
    memset(s, 0, sizeof *s);
    s->rank = lc->rank, s->alpha = lc->alpha, s->dropout = lc->dropout, s->use_rslora = lc->use_rslora;
    const char *p = lc->target_modules;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ') n--;
        if (!n) break;
        if (n == 10 && !strncmp(p, "all-linear", 10)) s->all_linear = 1;
        else if (s->n_targets == TT_LORA_MAX_TARGETS || n >= sizeof s->targets[0])
            return tt_errorf("lora.target_modules: more than %d names, or a name of %zu characters", TT_LORA_MAX_TARGETS, n);
        else memcpy(s->targets[s->n_targets++], p, n);
        p += n;
        while (*p && *p != ',') p++;
    }
    if (s->all_linear && s->n_targets)
        return tt_errorf("lora.target_modules: all-linear stands alone (got it with %d names)", s->n_targets);
    return 0;
}

tt_err tt_config_lora_spec(const tt_config *c, tt_lora_spec *spec)
{
    const char *adapter = c->lora.adapter_path;
    if (!adapter[0]) return keys_spec(&c->lora, spec);
    /* the adapter's own config and modules; the [lora] keys must not say otherwise */
    if (tt_peft_adapter_spec(adapter, spec)) return -1;
    const char *differs = tt_config_is_set(c, "lora.rank") && c->lora.rank != spec->rank       ? "lora.rank"
                          : tt_config_is_set(c, "lora.alpha") && c->lora.alpha != spec->alpha ? "lora.alpha"
                          : tt_config_is_set(c, "lora.use_rslora") && c->lora.use_rslora != spec->use_rslora
                              ? "lora.use_rslora"
                          : tt_config_is_set(c, "lora.target_modules") ? "lora.target_modules"
                                                                       : NULL;
    if (differs)
        return tt_errorf("%s is set, and lora.adapter_path %s gives its own (r %d, lora_alpha %g, use_rslora %s, the "
                         "modules of its tensors): leave it unset",
                         differs, adapter, spec->rank, spec->alpha, spec->use_rslora ? "true" : "false");
    if (tt_config_is_set(c, "lora.dropout")) spec->dropout = c->lora.dropout; /* training's, not the file's */
    return 0;
}

int tt_config_lora_on(const tt_config *c) { return c->lora.rank > 0 || c->lora.adapter_path[0]; }

tt_dtype tt_config_lora_base_dtype(const tt_config *c)
{
    if (!tt_config_is_set(c, "lora.base_dtype")) return tt_config_act_dtype(c);
    return c->lora.base_dtype ? TT_BF16 : TT_F32;
}

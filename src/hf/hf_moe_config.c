/* hf_moe_config.c — the Mixture-of-Experts keys of config.json: the routed and shared experts of Mixtral,
 * Qwen2/3-MoE and OLMoE, and DeepSeek-V3's (with its Multi-head Latent Attention keys), read, written and checked
 * for what each class can express. Every family routes by softmax over all experts, then top-k, renormalised when
 * norm_topk_prob (Mixtral: always), the gate on the expert's output; DeepSeek-V3 by sigmoid in groups. */
#include <math.h>
#include <string.h>

#include "hf/hf_json.h"
#include "hf/hf_moe_config.h"

/* DeepSeek-V3: Multi-head Latent Attention, and its MoE keys (sigmoid scores, groups, the selection bias) */
tt_err hf_read_deepseek(const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x)
{
    tt_mla_cfg *a = &m->mla;
    tt_moe_cfg *e = &m->moe;
    int ab = 0;
    if (hf_get_bool(path, j, "attention_bias", 0, &ab)) return -1;
    if (ab) return tt_errorf("%s: key 'attention_bias' is true: biased MLA projections are not supported", path);
    if (hf_present(j, "quantization_config"))
        return tt_errorf("%s: key 'quantization_config' is set: quantized (FP8) checkpoints are not supported; use "
                         "a BF16 copy of the weights", path);
    const cJSON *ql = cJSON_GetObjectItemCaseSensitive(j, "q_lora_rank");
    if (ql && !cJSON_IsNull(ql) && hf_get_int(path, j, "q_lora_rank", 1536, 1, &a->q_lora_rank)) return -1;
    if (!ql) a->q_lora_rank = 1536; /* absent: the class default; null: no query compression */
    int freq = 1, ilv = 1;
    const char *sf = "sigmoid", *tm = "noaux_tc";
    if (hf_get_int(path, j, "kv_lora_rank", 512, 1, &a->kv_lora_rank) ||
        hf_get_int(path, j, "qk_nope_head_dim", 128, 1, &a->qk_nope) ||
        hf_get_int(path, j, "qk_rope_head_dim", 64, 2, &a->qk_rope) || hf_get_int(path, j, "v_head_dim", 128, 1, &a->v_head) ||
        hf_get_bool(path, j, "rope_interleave", 1, &ilv) ||
        hf_get_int(path, j, "n_routed_experts", 256, 1, &e->n_experts) ||
        hf_get_int(path, j, "num_experts_per_tok", 8, 1, &e->top_k) ||
        hf_get_int(path, j, "moe_intermediate_size", 2048, 1, &e->ffn_dim) ||
        hf_get_int(path, j, "n_shared_experts", 1, 0, &e->n_shared) ||
        hf_get_int(path, j, "first_k_dense_replace", 3, 0, &e->n_dense_layers) ||
        hf_get_int(path, j, "moe_layer_freq", 1, 1, &freq) || hf_get_int(path, j, "n_group", 8, 1, &e->n_group) ||
        hf_get_int(path, j, "topk_group", 4, 1, &e->topk_group) ||
        hf_get_pos(path, j, "routed_scaling_factor", 2.5, &e->route_scale) ||
        hf_get_bool(path, j, "norm_topk_prob", 1, &e->route_norm) ||
        hf_get_int(path, j, "num_nextn_predict_layers", 0, 0, &x->n_mtp_layers) ||
        hf_get_str(path, j, "scoring_func", "sigmoid", &sf) || hf_get_str(path, j, "topk_method", "noaux_tc", &tm))
        return -1;
    a->rope_interleave = ilv;
    if (a->qk_rope % 2) return tt_errorf("%s: key 'qk_rope_head_dim' is %d: RoPE needs it even", path, a->qk_rope);
    if (freq != 1) return tt_errorf("%s: key 'moe_layer_freq' is %d: only 1 (every layer after the dense ones)", path, freq);
    if (strcmp(sf, "sigmoid") || strcmp(tm, "noaux_tc"))
        return tt_errorf("%s: scoring_func '%s' with topk_method '%s': DeepSeek-V3 routes by sigmoid with noaux_tc", path,
                         sf, tm);
    if (e->n_experts > TT_MOE_MAX_EXPERTS || e->top_k > e->n_experts || e->n_experts % e->n_group ||
        e->topk_group > e->n_group || e->topk_group * (e->n_experts / e->n_group) < e->top_k)
        return tt_errorf("%s: %d routed experts in %d groups, top-%d from %d groups: the experts must split evenly "
                         "and the groups kept must hold the top-k", path, e->n_experts, e->n_group, e->top_k,
                         e->topk_group);
    if (e->n_dense_layers >= m->n_layers)
        return tt_errorf("%s: key 'first_k_dense_replace' (%d) leaves no MoE layer", path, e->n_dense_layers);
    e->score_func = TT_SCORE_SIGMOID, e->sparse_step = 1, e->has_bias = 1;
    e->shared_ffn = e->n_shared * e->ffn_dim;
    m->head_dim = a->qk_rope; /* the width RoPE acts on */
    m->n_kv_heads = m->n_heads;
    return 0;
}

tt_err hf_read_moe(const hf_moe_keys *k, const cJSON *j, const char *path, tt_model_cfg *m)
{
    tt_moe_cfg *e = &m->moe;
    const int qwen = k->qwen;
    /* transformers 5 writes num_local_experts for every family (attribute_map), checkpoints num_experts */
    const char *ek = hf_present(j, "num_experts") ? "num_experts" : "num_local_experts";
    if (hf_get_int(path, j, ek, k->def_experts, 1, &e->n_experts) ||
        hf_get_int(path, j, "num_experts_per_tok", k->def_top_k, 1, &e->top_k))
        return -1;
    if (e->n_experts > TT_MOE_MAX_EXPERTS)
        return tt_errorf("%s: key '%s' is %d: at most %d experts are supported", path, ek, e->n_experts, TT_MOE_MAX_EXPERTS);
    if (e->top_k > e->n_experts)
        return tt_errorf("%s: key 'num_experts_per_tok' is %d, more than the %d experts", path, e->top_k, e->n_experts);
    e->ffn_dim = m->ffn_dim; /* Mixtral and OLMoE: intermediate_size is each expert's */
    e->route_norm = 1, e->route_scale = 1.0, e->score_func = TT_SCORE_SOFTMAX, e->sparse_step = 1;
    if (!k->mixtral && !k->gpt_oss && hf_get_bool(path, j, "norm_topk_prob", 0, &e->route_norm)) return -1;
    if (k->gpt_oss) { /* softmax over the top-k logits: the softmax over all, renormalised over the top-k */
        e->router_bias = 1, e->expert_biases = 1;
        if (hf_get_pos(path, j, "swiglu_alpha", 1.702, &e->swiglu_alpha) ||
            hf_get_pos(path, j, "swiglu_limit", 7.0, &e->swiglu_limit))
            return -1;
    }
    if (qwen) {
        if (hf_get_int(path, j, "moe_intermediate_size", k->def_ffn, 1, &e->ffn_dim) ||
            hf_get_int(path, j, "decoder_sparse_step", 1, 1, &e->sparse_step))
            return -1;
        const cJSON *dl = hf_present(j, "mlp_only_layers");
        if (dl && !cJSON_IsArray(dl)) return tt_errorf("%s: key 'mlp_only_layers' must be a list of layer indices", path);
        for (const cJSON *x = dl ? dl->child : NULL; x; x = x->next) {
            const double l = cJSON_IsNumber(x) ? x->valuedouble : -1;
            if (!(l >= 0 && l < m->n_layers && l == floor(l)))
                return tt_errorf("%s: key 'mlp_only_layers' must hold layer indices below num_hidden_layers (%d)", path,
                                 m->n_layers);
            if (l >= TT_MODEL_MAX_LAYERS)
                return tt_errorf("%s: key 'mlp_only_layers': dense layers past %d are not supported", path,
                                 TT_MODEL_MAX_LAYERS);
            e->mlp_only[(int)l] = 1;
        }
        if (!tt_model_has_moe_layer(m))
            return tt_errorf("%s: mlp_only_layers and decoder_sparse_step leave no MoE layer", path);
    }
    if (k->shared_gated) {
        if (hf_get_int(path, j, "shared_expert_intermediate_size", 5632, 0, &e->shared_ffn)) return -1;
        e->n_shared = e->shared_ffn > 0, e->shared_gate = e->shared_ffn > 0;
    }
    if (k->olmoe) {
        const cJSON *clip = hf_present(j, "clip_qkv");
        if (clip) return tt_errorf("%s: key 'clip_qkv' is set: clipping q/k/v is not supported", path);
    }
    return 0;
}

void hf_write_deepseek(const tt_model_cfg *m, const tt_model_ext *x, cJSON *j)
{
    const tt_mla_cfg *a = &m->mla;
    const tt_moe_cfg *e = &m->moe;
    if (a->q_lora_rank > 0) cJSON_AddNumberToObject(j, "q_lora_rank", a->q_lora_rank);
    else cJSON_AddNullToObject(j, "q_lora_rank");
    const struct { const char *k; int v; } ints[] = {
        {"kv_lora_rank", a->kv_lora_rank}, {"qk_nope_head_dim", a->qk_nope}, {"qk_rope_head_dim", a->qk_rope},
        {"v_head_dim", a->v_head}, {"n_routed_experts", e->n_experts}, {"num_experts_per_tok", e->top_k},
        {"moe_intermediate_size", e->ffn_dim}, {"n_shared_experts", e->n_shared},
        {"first_k_dense_replace", e->n_dense_layers}, {"moe_layer_freq", 1}, {"n_group", e->n_group > 1 ? e->n_group : 1},
        {"topk_group", e->n_group > 1 ? e->topk_group : 1}, {"num_nextn_predict_layers", 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) cJSON_AddNumberToObject(j, ints[i].k, ints[i].v);
    cJSON_AddBoolToObject(j, "rope_interleave", a->rope_interleave);
    hf_add_real(j, "routed_scaling_factor", e->route_scale);
    cJSON_AddBoolToObject(j, "norm_topk_prob", e->route_norm);
    (void)x;
}

void hf_write_moe(const hf_moe_keys *k, const tt_model_cfg *m, cJSON *j)
{
    const tt_moe_cfg *e = &m->moe;
    cJSON_AddNumberToObject(j, k->mixtral || k->gpt_oss ? "num_local_experts" : "num_experts", e->n_experts);
    cJSON_AddNumberToObject(j, "num_experts_per_tok", e->top_k);
    if (!k->mixtral && !k->gpt_oss) cJSON_AddBoolToObject(j, "norm_topk_prob", e->route_norm);
    if (k->gpt_oss) {
        hf_add_float(j, "swiglu_alpha", e->swiglu_alpha);
        hf_add_float(j, "swiglu_limit", e->swiglu_limit);
    }
    if (k->qwen) {
        cJSON_AddNumberToObject(j, "moe_intermediate_size", e->ffn_dim);
        cJSON_AddNumberToObject(j, "decoder_sparse_step", e->sparse_step > 0 ? e->sparse_step : 1);
        cJSON *dl = cJSON_AddArrayToObject(j, "mlp_only_layers"); /* the leading dense layers and the others */
        for (int l = 0; l < m->n_layers; l++)
            if (l < e->n_dense_layers || (l < TT_MODEL_MAX_LAYERS && e->mlp_only[l]))
                cJSON_AddItemToArray(dl, cJSON_CreateNumber(l));
    }
    if (k->shared_gated) cJSON_AddNumberToObject(j, "shared_expert_intermediate_size", e->n_shared ? e->shared_ffn : 0);
}

static tt_err cannot(const hf_moe_keys *k, const char *what)
{
    return tt_errorf("%s cannot express this model: %s", k->architecture, what);
}

/* What a family's MoE can express: the routing above, and its own extras */
tt_err hf_check_moe(const hf_moe_keys *k, const tt_model_cfg *m)
{
    const tt_moe_cfg *e = &m->moe;
    if ((m->mla.kv_lora_rank > 0) != k->deepseek)
        return cannot(k, k->deepseek ? "it has Multi-head Latent Attention" : "it has Multi-head Latent Attention "
                                                                                 "(only DeepseekV3ForCausalLM does)");
    if (!e->n_experts) return k->moe ? cannot(k, "it is a Mixture-of-Experts class and the model is dense") : 0;
    if (!k->moe) return cannot(k, "it is a Mixture-of-Experts model");
    if (k->deepseek) { /* sigmoid scores, a selection bias, shared experts without a gate, leading dense layers */
        if (e->score_func != TT_SCORE_SIGMOID || !e->has_bias || e->score_before || (e->n_shared && e->shared_gate) ||
            (e->sparse_step > 1) || (e->n_shared && e->shared_ffn != e->n_shared * e->ffn_dim))
            return cannot(k, "it routes by sigmoid scores with a selection bias, gates the experts' output and has "
                             "ungated shared experts as wide as n_shared x the experts");
        return 0;
    }
    if (!k->gpt_oss && (e->router_bias || e->expert_biases || e->swiglu_limit > 0))
        return cannot(k, "its router or experts have biases, or its SwiGLU is clamped (of the Hugging Face classes "
                         "only GptOssForCausalLM's are)");
    if (k->gpt_oss && !(e->router_bias && e->expert_biases && e->swiglu_limit > 0))
        return cannot(k, "the class's router and experts have biases and its SwiGLU is clamped");
    if (e->has_bias)
        return cannot(k, "its experts have a selection bias (model.load_balance_coeff > 0); of the Hugging Face MoE "
                         "classes only DeepseekV3ForCausalLM has one, with Multi-head Latent Attention and sigmoid "
                         "scores: train with model.load_balance_coeff = 0 to export as another class");
    if (e->score_func != TT_SCORE_SOFTMAX) return cannot(k, "its router scores by sigmoid (it routes by softmax)");
    if (e->route_scale != 1.0) return cannot(k, "its gate weights are scaled (model.route_scale)");
    if (e->score_before) return cannot(k, "it gates the experts' input (model.score_before_experts)");
    if (e->n_group > 1) return cannot(k, "it has group-limited routing");
    if ((k->mixtral || k->gpt_oss) && !e->route_norm) return cannot(k, "it always renormalises the top-k weights (model.route_norm)");
    if (!k->qwen && (e->n_dense_layers || (e->sparse_step > 1)))
        return cannot(k, "every layer is MoE in it (model.n_dense_layers, model.decoder_sparse_step)");
    if (e->n_shared && !(k->shared_gated && e->shared_gate)) return cannot(k, "it has no shared experts");
    if (k->shared_gated && e->n_shared && !e->shared_gate) return cannot(k, "its shared expert has no gate");
    return 0;
}

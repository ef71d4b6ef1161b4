/* hf_moe_config.h — the Mixture-of-Experts keys of config.json, by class: what a class reads (hf_moe_keys, which
 * hf_config.c's table gives), read into tt_model_cfg, written back, and checked for what the class can express. */
#ifndef TT_HF_MOE_CONFIG_H
#define TT_HF_MOE_CONFIG_H

#include <cjson/cJSON.h>

#include "models/model.h"

typedef struct {
    const char *architecture; /* the class, for "<class> cannot express this model" */
    int moe;                  /* a Mixture-of-Experts class */
    int mixtral;              /* num_local_experts; always renormalised; Mixtral's tensor names */
    int qwen;                 /* moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers */
    int shared_gated;         /* a shared expert behind a sigmoid gate (Qwen2-MoE) */
    int deepseek;             /* Multi-head Latent Attention; sigmoid routing in groups with a selection bias */
    int olmoe;                /* OLMoE: clip_qkv refused */
    int gpt_oss;              /* always renormalised; biased router and experts, swiglu_alpha and swiglu_limit */
    int def_experts, def_top_k, def_ffn; /* the class defaults of the expert count, top-k and expert width */
} hf_moe_keys;

/* DeepSeek-V3's MLA and MoE keys */
tt_err hf_read_deepseek(const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x);
void hf_write_deepseek(const tt_model_cfg *m, const tt_model_ext *x, cJSON *j);
/* The other MoE classes' keys, on top of the Llama-like ones m already holds */
tt_err hf_read_moe(const hf_moe_keys *k, const cJSON *j, const char *path, tt_model_cfg *m);
void hf_write_moe(const hf_moe_keys *k, const tt_model_cfg *m, cJSON *j);
/* What the class's MoE can express of m */
tt_err hf_check_moe(const hf_moe_keys *k, const tt_model_cfg *m);

#endif

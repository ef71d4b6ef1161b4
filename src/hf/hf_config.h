/* hf_config.h — Hugging Face config.json <-> tt_model_cfg for the supported
 * architectures (a table: one row per transformers class), and the checks of
 * which class can express a given model when exporting. */
#ifndef TT_HF_CONFIG_H
#define TT_HF_CONFIG_H

#include <stddef.h>

#include "models/model.h"

/* One row per transformers class. TT_HF_AUTO picks a family when exporting. */
typedef enum {
    TT_HF_AUTO = 0,
    TT_HF_LLAMA,   /* LlamaForCausalLM: Llama 2, 3, 3.1, 3.2, SmolLM */
    TT_HF_MISTRAL, /* MistralForCausalLM */
    TT_HF_QWEN2,   /* Qwen2ForCausalLM */
    TT_HF_QWEN3,   /* Qwen3ForCausalLM */
    TT_HF_GPT2,    /* GPT2LMHeadModel */
    TT_HF_MIXTRAL, /* MixtralForCausalLM */
    TT_HF_QWEN3_MOE, /* Qwen3MoeForCausalLM */
    TT_HF_QWEN2_MOE, /* Qwen2MoeForCausalLM: a shared expert behind a sigmoid gate */
    TT_HF_OLMOE,   /* OlmoeForCausalLM: q/k RMSNorm over whole projections */
    TT_HF_DEEPSEEK_V3, /* DeepseekV3ForCausalLM: Multi-head Latent Attention, sigmoid routing in groups */
    TT_HF_OLMO2,   /* Olmo2ForCausalLM: an RMSNorm on each branch's output, q/k RMSNorm over whole projections */
    TT_HF_SMOLLM3, /* SmolLM3ForCausalLM: RoPE on the layers no_rope_layers marks only */
    TT_HF_GRANITE, /* GraniteForCausalLM: embedding, residual, attention and logits multipliers */
    TT_HF_PHI3,    /* Phi3ForCausalLM (Phi-3, Phi-4-mini): fused qkv_proj and gate_up_proj, LongRoPE, partial rotary */
    TT_HF_GEMMA3,  /* Gemma3ForCausalLM (Gemma 3 text: 270M, 1B): (1 + w) norms around each branch, GeGLU, local RoPE */
    TT_HF_GEMMA2,  /* Gemma2ForCausalLM: Gemma 3's block without q/k norms, tanh soft-capping of scores and logits */
    TT_HF_GPT_OSS, /* GptOssForCausalLM: attention sinks; biased router and experts, the clamped SwiGLU */
    TT_HF_FAMILY_COUNT
} tt_hf_family;

#define TT_HF_MAX_EOS 8

typedef struct {
    tt_hf_family family;
    tt_model_cfg model;              /* everything that changes the math ... */
    tt_model_ext ext;                /* ... with the extras of tt_model_ext */
    int bos_token_id;                /* -1: absent or null */
    int has_pad, pad_token_id;       /* pad_token_id given (has_pad; -1: null), kept for the export: absent, the
                                        class default rules, which may lie outside a small vocabulary */
    int n_eos;                       /* eos_token_id may be one id or a list */
    int eos_token_ids[TT_HF_MAX_EOS];
    char torch_dtype[16];            /* "float32", "bfloat16", ...; "" when absent */
} tt_hf_config;

/* Read <dir>/config.json. Errors name the file and the key:
 * "DIR/config.json: architecture 'FooForCausalLM' is not supported (supported: ...)". */
tt_err tt_hf_config_read(const char *dir, tt_hf_config *out);
/* The same from JSON text; path names the file in errors. */
tt_err tt_hf_config_parse(const char *json, size_t len, const char *path, tt_hf_config *out);

/* config.json text (malloc'd, free() it) for c->family with the class's own
 * keys, torch_dtype "bfloat16" when c->torch_dtype says so, else "float32"; NULL + error when the family cannot express
 * the model. c->family TT_HF_AUTO picks one with tt_hf_family_for. */
char *tt_hf_config_to_json(const tt_hf_config *c);

/* 0 if family f can express the model (m, x) exactly, else -1 + an error
 * naming the feature ("Qwen2ForCausalLM cannot express this model: ..."). */
tt_err tt_hf_family_check(tt_hf_family f, const tt_model_cfg *m, const tt_model_ext *x);
/* The first family in table order that can express it; TT_HF_AUTO + error if none. */
tt_hf_family tt_hf_family_for(const tt_model_cfg *m, const tt_model_ext *x);
/* "LlamaForCausalLM", ... ("?" for TT_HF_AUTO or out of range). */
const char *tt_hf_family_architecture(tt_hf_family f);

#endif

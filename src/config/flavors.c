/* flavors.c — the table of model flavors: published shapes of real models
 * (checked against their Hugging Face config.json) and small test shapes. */
#include <string.h>

#include "config/flavors.h"

/* Llama 3.1's RoPE scaling as published (factor 8, low 1, high 4, 8192);
 * flavors without scaling carry it too, so rope_scaling = "llama3" alone works. */
#define ROPE_L3(factor)                                                                                \
    .rope_factor = (factor), .rope_low_freq_factor = 1.0, .rope_high_freq_factor = 4.0,               \
    .rope_original_max_position_embeddings = 8192

#define LLAMA .name = TT_MODEL_LLAMA
/* GPT-2: LayerNorm eps 1e-5, learned positions, tied head, biases everywhere;
 * vocab 50257 padded to 50304 (a multiple of 128) as llm.c does. */
#define GPT2                                                                                           \
    .name = TT_MODEL_GPT2, .norm_eps = 1e-5, .rope_theta = 10000.0, .rope_scaling = TT_ROPE_SCALING_NONE, \
    ROPE_L3(8.0), .tie_embeddings = true, .qkv_bias = true, .max_seq_len = 1024

static const tt_flavor flavors[] = {
    /* ---- llama (the first is the model's default) ---- */
    {"debugmodel", {LLAMA, .dim = 128, .n_layers = 4, .n_heads = 4, .n_kv_heads = 4, .ffn_dim = 384,
                    .vocab_size = 258, .norm_eps = 1e-5, .rope_theta = 10000.0, ROPE_L3(8.0),
                    .max_seq_len = 2048}},
    {"llama3_debug", {LLAMA, .dim = 256, .n_layers = 6, .n_heads = 8, .n_kv_heads = 2, .ffn_dim = 768,
                      .vocab_size = 258, .norm_eps = 1e-5, .rope_theta = 500000.0,
                      .rope_scaling = TT_ROPE_SCALING_LLAMA3, ROPE_L3(8.0), .max_seq_len = 8192}},
    /* llama2.c's stories15M shape */
    {"llama_288", {LLAMA, .dim = 288, .n_layers = 6, .n_heads = 6, .n_kv_heads = 6, .ffn_dim = 768,
                   .vocab_size = 32000, .norm_eps = 1e-5, .rope_theta = 10000.0, ROPE_L3(8.0),
                   .tie_embeddings = true, .max_seq_len = 256}},
    /* GPT-2 small's size with a Llama block */
    {"llama_768", {LLAMA, .dim = 768, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12, .ffn_dim = 2048,
                   .vocab_size = 50304, .norm_eps = 1e-5, .rope_theta = 10000.0, ROPE_L3(8.0),
                   .max_seq_len = 2048}},
    {"llama2_7b", {LLAMA, .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 32, .ffn_dim = 11008,
                   .vocab_size = 32000, .norm_eps = 1e-5, .rope_theta = 10000.0, ROPE_L3(8.0),
                   .max_seq_len = 4096}},
    /* Llama 3.2 1B */
    {"llama3_1b", {LLAMA, .dim = 2048, .n_layers = 16, .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 8192,
                   .vocab_size = 128256, .norm_eps = 1e-5, .rope_theta = 500000.0,
                   .rope_scaling = TT_ROPE_SCALING_LLAMA3, ROPE_L3(32.0), .tie_embeddings = true,
                   .max_seq_len = 131072}},
    /* Llama 3.1 8B */
    {"llama3_8b", {LLAMA, .dim = 4096, .n_layers = 32, .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 14336,
                   .vocab_size = 128256, .norm_eps = 1e-5, .rope_theta = 500000.0,
                   .rope_scaling = TT_ROPE_SCALING_LLAMA3, ROPE_L3(8.0), .max_seq_len = 131072}},
    /* Llama 3.1 70B */
    {"llama3_70b", {LLAMA, .dim = 8192, .n_layers = 80, .n_heads = 64, .n_kv_heads = 8, .ffn_dim = 28672,
                    .vocab_size = 128256, .norm_eps = 1e-5, .rope_theta = 500000.0,
                    .rope_scaling = TT_ROPE_SCALING_LLAMA3, ROPE_L3(8.0), .max_seq_len = 131072}},
    /* Qwen2.5 0.5B: biases on q/k/v, tied head */
    {"qwen2_0.5b", {LLAMA, .dim = 896, .n_layers = 24, .n_heads = 14, .n_kv_heads = 2, .ffn_dim = 4864,
                    .vocab_size = 151936, .norm_eps = 1e-6, .rope_theta = 1000000.0, ROPE_L3(8.0),
                    .tie_embeddings = true, .qkv_bias = true, .max_seq_len = 32768}},
    /* Qwen3 0.6B: RMSNorm on q and k, head_dim 128 (n_heads * head_dim != dim) */
    {"qwen3_0.6b", {LLAMA, .dim = 1024, .n_layers = 28, .n_heads = 16, .n_kv_heads = 8, .head_dim = 128,
                    .ffn_dim = 3072, .vocab_size = 151936, .norm_eps = 1e-6, .rope_theta = 1000000.0,
                    ROPE_L3(8.0), .tie_embeddings = true, .qk_norm = true, .max_seq_len = 40960}},
    /* SmolLM3-3B (HuggingFaceTB/SmolLM3-3B's config.json): every fourth layer applies no RoPE, tied head */
    {"smollm3_3b", {LLAMA, .dim = 2048, .n_layers = 36, .n_heads = 16, .n_kv_heads = 4, .ffn_dim = 11008,
                    .vocab_size = 128256, .norm_eps = 1e-6, .rope_theta = 5000000.0, ROPE_L3(8.0),
                    .tie_embeddings = true, .no_rope_interval = 4, .max_seq_len = 65536}},
    /* OLMo 2 1B (allenai/OLMo-2-0425-1B's config.json): norms after each branch, q/k norms over the whole
     * projections, an untied head; its 4096-token context from the model card */
    {"olmo2_1b", {LLAMA, .dim = 2048, .n_layers = 16, .n_heads = 16, .n_kv_heads = 16, .ffn_dim = 8192,
                  .vocab_size = 100352, .norm_eps = 1e-6, .rope_theta = 500000.0, ROPE_L3(8.0), .qk_norm = true,
                  .qk_norm_full = true, .post_norms = true, .max_seq_len = 4096}},
    /* ---- Mixture-of-Experts (llama blocks, SwiGLU experts) ---- */
    /* the default job's shape with 8 experts of half its MLP width, top-2: the dense debugmodel's active
     * parameters */
    {"debugmodel_moe", {LLAMA, .dim = 128, .n_layers = 4, .n_heads = 4, .n_kv_heads = 4, .ffn_dim = 384,
                        .vocab_size = 258, .norm_eps = 1e-5, .rope_theta = 10000.0, ROPE_L3(8.0),
                        .max_seq_len = 2048, .num_experts = 8, .top_k = 2, .moe_ffn_dim = 192}},
    /* Qwen3-30B-A3B: 128 experts of 768, top-8, q/k norm (TorchTitan's qwen3 30B-A3B flavor) */
    {"qwen3_30b_a3b", {LLAMA, .dim = 2048, .n_layers = 48, .n_heads = 32, .n_kv_heads = 4, .head_dim = 128,
                       .ffn_dim = 6144, .vocab_size = 151936, .norm_eps = 1e-6, .rope_theta = 1000000.0,
                       ROPE_L3(8.0), .qk_norm = true, .max_seq_len = 40960, .num_experts = 128, .top_k = 8,
                       .moe_ffn_dim = 768}},
    /* DeepSeek-V3 shapes (Multi-head Latent Attention, sigmoid routing): a small one for CPU runs (no query
     * compression, 8 experts of 96 in 4 groups, top-2 from 2 groups, a shared expert, the first layer dense),
     * and TorchTitan's 16B */
    {"deepseek_v3_debug", {LLAMA, .dim = 128, .n_layers = 4, .n_heads = 4, .n_kv_heads = 4, .ffn_dim = 384,
                           .vocab_size = 258, .norm_eps = 1e-6, .rope_theta = 10000.0, ROPE_L3(8.0),
                           .max_seq_len = 2048, .kv_lora_rank = 32, .qk_nope_head_dim = 32, .qk_rope_head_dim = 16,
                           .v_head_dim = 32, .num_experts = 8, .top_k = 2, .moe_ffn_dim = 96,
                           .num_shared_experts = 1, .n_dense_layers = 1}},
    {"deepseek_v3_16b", {LLAMA, .dim = 2048, .n_layers = 27, .n_heads = 16, .n_kv_heads = 16, .ffn_dim = 10944,
                         .vocab_size = 102400, .norm_eps = 1e-6, .rope_theta = 10000.0, ROPE_L3(8.0),
                         .max_seq_len = 16384, .kv_lora_rank = 512, .qk_nope_head_dim = 128, .qk_rope_head_dim = 64,
                         .v_head_dim = 128, .num_experts = 64, .top_k = 6, .moe_ffn_dim = 1408,
                         .num_shared_experts = 2, .n_dense_layers = 1}},
    /* ---- gpt2 ---- */
    {"gpt2_debug", {GPT2, .dim = 128, .n_layers = 4, .n_heads = 4, .n_kv_heads = 4, .ffn_dim = 512,
                    .vocab_size = 258}},
    {"gpt2_124m", {GPT2, .dim = 768, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12, .ffn_dim = 3072,
                   .vocab_size = 50304}},
    {"gpt2_350m", {GPT2, .dim = 1024, .n_layers = 24, .n_heads = 16, .n_kv_heads = 16, .ffn_dim = 4096,
                   .vocab_size = 50304}},
    {"gpt2_774m", {GPT2, .dim = 1280, .n_layers = 36, .n_heads = 20, .n_kv_heads = 20, .ffn_dim = 5120,
                   .vocab_size = 50304}},
    {"gpt2_1558m", {GPT2, .dim = 1600, .n_layers = 48, .n_heads = 25, .n_kv_heads = 25, .ffn_dim = 6400,
                    .vocab_size = 50304}},
};

#define N_FLAVORS (sizeof flavors / sizeof flavors[0])

const tt_flavor *tt_flavor_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < N_FLAVORS; i++)
        if (!strcmp(flavors[i].name, name)) return &flavors[i];
    return NULL;
}

size_t tt_flavor_count(void) { return N_FLAVORS; }

const tt_flavor *tt_flavor_at(size_t i) { return i < N_FLAVORS ? &flavors[i] : NULL; }

const tt_flavor *tt_flavor_default(tt_model_name model)
{
    for (size_t i = 0; i < N_FLAVORS; i++)
        if (flavors[i].shape.name == model) return &flavors[i];
    return NULL;
}

const char *tt_model_name_str(tt_model_name model)
{
    switch (model) {
    case TT_MODEL_LLAMA: return "llama";
    case TT_MODEL_GPT2: return "gpt2";
    }
    return "?";
}

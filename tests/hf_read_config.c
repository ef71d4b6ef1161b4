/* hf_read_config.c — test_hf's config.json part: reading both transformers 4 and 5 spellings of every family's
 * keys with their class defaults, writing them back, which class can express which model, and the keys refused
 * by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hf/hf_config.h"
#include "hf_parts.h"

static int parse(const char *json, tt_hf_config *c) { return tt_hf_config_parse(json, strlen(json), "t/config.json", c); }

static void expect_parse_fail(const char *json, const char *needle)
{
    tt_hf_config c;
    int rc = parse(json, &c);
    CHECK_MSG(rc != 0 && strstr(tt_last_error(), needle), "'%s': rc %d, error '%s'", needle, rc, rc ? tt_last_error() : "");
}

/* Qwen-MoE's mlp_only_layers: any layers keep the dense MLP; they survive a round trip and the model's layout */
void test_mlp_only_layers(void)
{
    tt_hf_config c, back;
    const char *js = "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":40,"
                     "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":8,"
                     "\"vocab_size\":64,\"num_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16,"
                     "\"mlp_only_layers\":[3,1]}";
    CHECK_MSG(parse(js, &c) == 0, "%s", tt_last_error());
    const int want[4] = {1, 0, 1, 0};
    for (int l = 0; l < 4; l++) CHECK_MSG(tt_model_layer_is_moe(&c.model, l) == want[l], "layer %d", l);
    char *out = tt_hf_config_to_json(&c);
    CHECK(out && strstr(out, "\"mlp_only_layers\":\t[1, 3]") && parse(out, &back) == 0);
    for (int l = 0; l < 4; l++) CHECK(tt_model_layer_is_moe(&back.model, l) == want[l]);
    free(out);
    tt_model *m = tt_model_new_ext(&c.model, &c.ext);
    CHECK(m && tt_model_find(m, "layers.0.moe.router.weight") >= 0 && tt_model_find(m, "layers.1.moe.router.weight") < 0);
    CHECK(m && tt_param_numel(&m->params[tt_model_find(m, "layers.1.feed_forward.w1.weight")]) == 40 * 32);
    tt_model_free(m);
    expect_parse_fail("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"num_hidden_layers\":2,\"mlp_only_layers\":[0,1]}",
                      "leave no MoE layer");
    expect_parse_fail("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"num_hidden_layers\":2,\"mlp_only_layers\":[2]}",
                      "key 'mlp_only_layers' must hold layer indices below num_hidden_layers (2)");
    /* whether any layer is MoE, without a walk over num_hidden_layers (2e9 of them took 268 s in the fuzz build):
     * the same answer as the walk, and at once for a config of 2e9 layers */
    tt_model_cfg mc = c.model;
    const int steps[] = {1, 2, 3, 7, 511, 512, 513, 1000}, dense[] = {0, 5, 511, 600}, lens[] = {1, 2, 511, 512, 513, 600, 1100, 1600};
    int bad = 0;
    for (int f = 0; f < 3; f++)
        for (size_t s = 0; s < sizeof steps / sizeof *steps; s++)
            for (size_t d = 0; d < sizeof dense / sizeof *dense; d++)
                for (size_t n = 0; n < sizeof lens / sizeof *lens; n++) {
                    mc.n_layers = lens[n], mc.moe.sparse_step = steps[s], mc.moe.n_dense_layers = dense[d];
                    for (int l = 0; l < TT_MODEL_MAX_LAYERS; l++) mc.moe.mlp_only[l] = f == 2 || (f == 1 && l % 2);
                    int walk = 0;
                    for (int l = 0; l < mc.n_layers; l++) walk |= tt_model_layer_is_moe(&mc, l);
                    bad += walk != tt_model_has_moe_layer(&mc);
                }
    CHECK_MSG(bad == 0, "tt_model_has_moe_layer differs from the walk over the layers in %d configs", bad);
    CHECK_MSG(parse("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"num_hidden_layers\":2005558902}", &c) == 0 &&
                  c.model.n_layers == 2005558902,
              "2005558902 layers: %s", tt_last_error());
    expect_parse_fail("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"num_hidden_layers\":2000000000,"
                      "\"decoder_sparse_step\":2000000001}",
                      "leave no MoE layer");
}

void test_config(void)
{
    tt_hf_config c;
    /* transformers 4 spelling of Llama 3.1 8B */
    const char *l31 = "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":4096,"
                      "\"intermediate_size\":14336,\"num_hidden_layers\":32,\"num_attention_heads\":32,"
                      "\"num_key_value_heads\":8,\"vocab_size\":128256,\"max_position_embeddings\":131072,"
                      "\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":8.0,"
                      "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,"
                      "\"rope_type\":\"llama3\"},\"tie_word_embeddings\":false,\"hidden_act\":\"silu\","
                      "\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009],\"torch_dtype\":\"bfloat16\","
                      "\"pretraining_tp\":1,\"attention_bias\":false,\"mlp_bias\":false}";
    CHECK_MSG(parse(l31, &c) == 0, "%s", tt_last_error());
    CHECK(c.family == TT_HF_LLAMA && c.model.head_dim == 128 && c.model.n_kv_heads == 8 && c.model.rope.llama3);
    CHECK(c.model.rope.theta == 500000 && c.model.rope.original_max_pos == 8192 && c.model.norm_eps == 1e-5);
    CHECK(c.bos_token_id == 128000 && c.n_eos == 3 && c.eos_token_ids[2] == 128009);
    CHECK(!strcmp(c.torch_dtype, "bfloat16") && c.model.max_seq_len == 131072 && !c.model.qkv_bias);
    /* Mistral: sliding_window absent is the class default 4096, null is none */
    CHECK(parse("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":128,\"num_attention_heads\":8}", &c) == 0);
    CHECK(c.model.window == 4096 && c.model.n_kv_heads == 8 && c.model.head_dim == 16 && c.model.max_seq_len == 131072);
    CHECK(parse("{\"model_type\":\"mistral\",\"hidden_size\":64,\"num_attention_heads\":4,\"sliding_window\":null,"
                "\"num_key_value_heads\":null}", &c) == 0);
    CHECK(c.family == TT_HF_MISTRAL && c.model.window == 0 && c.model.n_kv_heads == 4);
    /* Qwen2: the window needs use_sliding_window; max_window_layers decides which layers */
    CHECK(parse("{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":4,\"num_hidden_layers\":3,\"sliding_window\":4096,\"use_sliding_window\":false}",
                &c) == 0);
    CHECK(c.model.window == 0 && c.model.qkv_bias && !c.ext.o_bias && c.model.head_dim == 16);
    CHECK(parse("{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":2,\"num_hidden_layers\":3,\"sliding_window\":8,\"use_sliding_window\":true,"
                "\"max_window_layers\":1,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4,"
                "\"original_max_position_embeddings\":4096,\"mscale\":1,\"mscale_all_dim\":0.5}}", &c) == 0);
    CHECK(tt_model_layer_window(&c.model, &c.ext, 0) == 0 && tt_model_layer_window(&c.model, &c.ext, 1) == 8 &&
          tt_model_layer_window(&c.model, &c.ext, 2) == 8);
    CHECK_NEAR(tt_rope_attention_scale(&c.model.rope, &c.ext.rope), (0.1 * log(4.0) + 1) / (0.05 * log(4.0) + 1), 1e-15);
    /* Qwen3: head_dim absent is the class default 128 */
    CHECK(parse("{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":2}", &c) == 0);
    CHECK(c.model.head_dim == 128 && c.model.qk_norm && !c.model.qkv_bias);
    /* GPT-2 through its attribute_map names, no architectures key */
    CHECK(parse("{\"model_type\":\"gpt2\",\"hidden_size\":64,\"num_hidden_layers\":3,\"num_attention_heads\":4}", &c) == 0);
    CHECK(c.family == TT_HF_GPT2 && c.model.dim == 64 && c.model.n_layers == 3 && c.model.ffn_dim == 256 &&
          c.model.max_seq_len == 1024 && c.model.vocab_size == 50257);

    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"partial_rotary_factor\":0.5}",
                      "partial_rotary_factor 0.5 is not supported");
    expect_parse_fail("{\"architectures\":[\"GPT2LMHeadModel\"],\"scale_attn_by_inverse_layer_idx\":true}",
                      "t/config.json: scale_attn_by_inverse_layer_idx = true is not supported");
    expect_parse_fail("{\"architectures\":[\"GPT2LMHeadModel\"],\"tie_word_embeddings\":false}",
                      "tie_word_embeddings = false is not supported");
    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"mistral\"}",
                      "model_type 'mistral' does not match architecture 'LlamaForCausalLM'");
    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":60,\"num_attention_heads\":4,"
                      "\"head_dim\":15}", "head_dim 15 must be even");
    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":6}",
                      "hidden_size 64 is not a multiple of num_attention_heads 6");
    expect_parse_fail("{\"architectures\":[\"Qwen2ForCausalLM\"],\"num_hidden_layers\":2,\"use_sliding_window\":true,"
                      "\"layer_types\":[\"full_attention\",\"chunked_attention\"]}", "layer_types[1] is 'chunked_attention'");
    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}",
                      "rope_scaling: key 'low_freq_factor' is missing");
    expect_parse_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"rope_scaling\":{\"rope_type\":\"longrope\"}}",
                      "rope type 'longrope' is not supported (supported: default, linear, llama3, yarn)");
    /* the dense families' own keys */
    expect_parse_fail("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"num_hidden_layers\":3,\"no_rope_layers\":[1,0]}",
                      "key 'no_rope_layers' must be a list of 3 numbers 0 or 1");
    expect_parse_fail("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"num_hidden_layers\":2,\"no_rope_layers\":[1,2]}",
                      "no_rope_layers[1] must be 0 or 1");
    expect_parse_fail("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"no_rope_layer_interval\":0}",
                      "key 'no_rope_layer_interval' must be an integer in [1,");
    expect_parse_fail("{\"architectures\":[\"GraniteForCausalLM\"],\"residual_multiplier\":0}",
                      "key 'residual_multiplier' must be a positive finite number");
    expect_parse_fail("{\"architectures\":[\"GraniteForCausalLM\"],\"logits_scaling\":\"8\"}",
                      "key 'logits_scaling' must be a positive finite number");
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"resid_pdrop\":0.1}",
                      "key 'resid_pdrop' must be 0: dropout inside the model is not supported");
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                      "\"partial_rotary_factor\":0.7}", "partial_rotary_factor 0.7 rotates 11 of a head's 16 features");
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                      "\"rope_scaling\":{\"rope_type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1,1,1],"
                      "\"long_factor\":[1,1]}}", "rope_scaling: key 'long_factor' must be a list of 8 numbers");
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                      "\"rope_scaling\":{\"type\":\"su\",\"long_factor\":[1,1,1,1,1,1,1,1]}}",
                      "rope_scaling: key 'short_factor' is missing");
    /* fuzz_hf_config: a factor past fp32's range was kept as infinity, and the config written back was unreadable */
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                      "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1,1,1],"
                      "\"long_factor\":[1,1,1e39,1,1,1,1,1]}}",
                      "rope_scaling: long_factor[2] must be a positive number a 32-bit float holds");
    expect_parse_fail("{\"architectures\":[\"Phi3ForCausalLM\"],\"rope_scaling\":{\"rope_type\":\"llama3\","
                      "\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4}}",
                      "rope type 'llama3' is not supported for Phi3ForCausalLM (supported: default, longrope)");
    expect_parse_fail("{\"architectures\":[\"Gemma3ForCausalLM\"],\"final_logit_softcapping\":30.0}",
                      "key 'final_logit_softcapping' is set: soft-capping is not supported");
    expect_parse_fail("{\"architectures\":[\"Gemma3ForCausalLM\"],\"use_bidirectional_attention\":true}",
                      "key 'use_bidirectional_attention' is true: only causal attention is supported");
    expect_parse_fail("{\"architectures\":[\"Gemma3ForCausalLM\"],\"hidden_activation\":\"silu\"}",
                      "hidden_activation 'silu' is not supported for Gemma3ForCausalLM");
    expect_parse_fail("{\"architectures\":[\"Gemma3ForCausalLM\"],\"sliding_window\":null}",
                      "sliding_window is null but layer_types has sliding layers");
    expect_parse_fail("{\"architectures\":[\"Gemma3ForCausalLM\"],\"rope_parameters\":{\"full_attention\":"
                      "{\"rope_type\":\"default\"},\"sliding_attention\":{\"rope_type\":\"linear\",\"factor\":2}}}",
                      "rope_parameters.sliding_attention: rope type 'linear' is not supported (only default)");
    expect_parse_fail("{\"architectures\":[\"Olmo2ForCausalLM\"],\"hidden_act\":\"gelu\"}",
                      "hidden_act 'gelu' is not supported for Olmo2ForCausalLM");
    expect_parse_fail("{\"model_type\":\"deepseek_v2\"}", "model_type 'deepseek_v2' is not supported");
    expect_parse_fail("[1,2]", "t/config.json: not a JSON object");

    /* export checks: which class can express which model */
    CHECK(parse("{\"architectures\":[\"Qwen3ForCausalLM\"],\"hidden_size\":64,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":4,\"head_dim\":16,\"num_hidden_layers\":3}", &c) == 0);
    CHECK(tt_hf_family_check(TT_HF_LLAMA, &c.model, &c.ext) != 0 &&
          strstr(tt_last_error(), "LlamaForCausalLM cannot express"));
    c.model.window = 4;
    c.ext.full_attention[0] = 1;
    CHECK(tt_hf_family_check(TT_HF_MISTRAL, &c.model, &c.ext) != 0);
    c.family = TT_HF_MISTRAL;
    CHECK(tt_hf_config_to_json(&c) == NULL);
    /* a family's own block is no other class's: OLMo 2's norms, SmolLM3's layers without RoPE, Granite's multipliers */
    tt_hf_config d;
    CHECK(parse("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"num_hidden_layers\":4}", &d) == 0 && d.ext.no_rope[3] &&
          !d.ext.no_rope[2] && d.model.rope.theta == 2000000.0 && d.model.tie_embeddings);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_SMOLLM3 && tt_hf_family_check(TT_HF_LLAMA, &d.model, &d.ext) != 0 &&
          strstr(tt_last_error(), "some of its layers apply no RoPE"));
    CHECK(parse("{\"architectures\":[\"Olmo2ForCausalLM\"]}", &d) == 0 && d.ext.post_norms && d.ext.qk_norm_full);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_OLMO2 && tt_hf_family_check(TT_HF_OLMOE, &d.model, &d.ext) != 0);
    d.ext.post_norms = 0;
    CHECK(tt_hf_family_check(TT_HF_OLMO2, &d.model, &d.ext) != 0 && strstr(tt_last_error(), "branch's output"));
    /* Gemma 3 as transformers 4 wrote it: rope_theta, rope_local_base_freq, rope_scaling for the full layers, and
     * the sliding_window_pattern (every sixth layer full) */
    CHECK(parse("{\"architectures\":[\"Gemma3ForCausalLM\"],\"num_hidden_layers\":12,\"rope_theta\":1e6,"
                "\"rope_local_base_freq\":1e4,\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8},"
                "\"sliding_window\":512}", &d) == 0 && d.ext.gemma && d.model.rope.theta == 1e6 &&
          d.ext.rope_local_theta == 1e4 && d.ext.rope.linear && d.model.rope.factor == 8 && d.model.window == 512);
    CHECK(tt_model_layer_window(&d.model, &d.ext, 4) == 512 && tt_model_layer_window(&d.model, &d.ext, 5) == 0 &&
          tt_model_layer_window(&d.model, &d.ext, 11) == 0 && tt_model_layer_window(&d.model, &d.ext, 6) == 512);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_GEMMA3 && tt_hf_family_check(TT_HF_QWEN3, &d.model, &d.ext) != 0);
    /* Gemma 2's class defaults: caps of 50 and 30, every other layer sliding from the first; a null cap is none; its
     * caps are no other class's, nor is a sliding layer's own RoPE base its */
    CHECK(parse("{\"architectures\":[\"Gemma2ForCausalLM\"],\"num_hidden_layers\":5}", &d) == 0 && d.ext.gemma &&
          d.ext.attn_softcap == 50 && d.ext.final_softcap == 30 && d.model.window == 4096 && !d.model.qk_norm &&
          d.model.rope.theta == 10000 && d.model.vocab_size == 256000 && d.ext.query_pre_attn_scalar == 256);
    CHECK(tt_model_layer_window(&d.model, &d.ext, 0) == 4096 && tt_model_layer_window(&d.model, &d.ext, 1) == 0 &&
          tt_model_layer_window(&d.model, &d.ext, 4) == 4096 && tt_model_layer_window(&d.model, &d.ext, 3) == 0);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_GEMMA2 && tt_hf_family_check(TT_HF_GEMMA3, &d.model, &d.ext) != 0);
    d.model.qk_norm = 1, d.ext.rope_local_theta = 1e4; /* now Gemma 3's block, but capped */
    CHECK(tt_hf_family_check(TT_HF_GEMMA3, &d.model, &d.ext) != 0 && strstr(tt_last_error(), "soft-caps"));
    d.model.qk_norm = 0;
    CHECK(tt_hf_family_check(TT_HF_GEMMA2, &d.model, &d.ext) != 0 && strstr(tt_last_error(), "own RoPE base"));
    CHECK(parse("{\"architectures\":[\"Gemma2ForCausalLM\"],\"attn_logit_softcapping\":null,"
                "\"final_logit_softcapping\":null}", &d) == 0 && !d.ext.attn_softcap && !d.ext.final_softcap);
    CHECK(parse("{\"architectures\":[\"Gemma2ForCausalLM\"],\"attn_logit_softcapping\":-1}", &d) != 0 &&
          strstr(tt_last_error(), "attn_logit_softcapping"));
    CHECK(parse("{\"architectures\":[\"Gemma3ForCausalLM\"],\"final_logit_softcapping\":30}", &d) != 0 &&
          strstr(tt_last_error(), "final_logit_softcapping"));
    /* GPT-OSS's class defaults: 128 experts, top-4, biased attention, windows of 128 on the even layers, YaRN x32
     * when config.json has no RoPE dict; its sinks, biased router and experts and clamped SwiGLU are no other
     * class's; quantized checkpoints are refused by name */
    CHECK(parse("{\"architectures\":[\"GptOssForCausalLM\"],\"num_hidden_layers\":3}", &d) == 0 && d.ext.attn_sinks &&
          d.model.moe.n_experts == 128 && d.model.moe.top_k == 4 && d.model.moe.ffn_dim == 2880 && d.ext.o_bias &&
          d.model.qkv_bias && d.model.moe.swiglu_limit == 7.0 && d.model.moe.swiglu_alpha == 1.702 &&
          d.ext.rope.yarn && d.ext.rope.yarn_no_truncate && d.model.rope.factor == 32 && d.model.rope.theta == 150000);
    CHECK(tt_model_layer_window(&d.model, &d.ext, 0) == 128 && tt_model_layer_window(&d.model, &d.ext, 1) == 0 &&
          tt_model_layer_window(&d.model, &d.ext, 2) == 128);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_GPT_OSS && tt_hf_family_check(TT_HF_MIXTRAL, &d.model, &d.ext) != 0);
    d.ext.attn_sinks = 0;
    CHECK(tt_hf_family_check(TT_HF_GPT_OSS, &d.model, &d.ext) != 0 && strstr(tt_last_error(), "attention sinks"));
    /* a plain RoPE is written as one (fuzz_hf_config: written as null, it read back as the class's YaRN) */
    CHECK(parse("{\"architectures\":[\"GptOssForCausalLM\"],\"num_hidden_layers\":2,\"rope_theta\":5e5,"
                "\"rope_parameters\":{\"rope_type\":\"default\"}}", &d) == 0 && !d.ext.rope.yarn);
    char *plain = tt_hf_config_to_json(&d);
    tt_hf_config again;
    CHECK(plain && parse(plain, &again) == 0 && !again.ext.rope.yarn && again.model.rope.theta == 5e5 &&
          again.family == TT_HF_GPT_OSS);
    free(plain);
    CHECK(parse("{\"architectures\":[\"GptOssForCausalLM\"],\"quantization_config\":{\"quant_method\":\"fp8\"}}",
                &d) != 0 && strstr(tt_last_error(), "quantization_config' (quant_method 'fp8')"));
    /* neither an architecture nor a model_type: refused, not taken for a vision-language folder (a fuzzer found
     * the read of a NULL model_type here) */
    CHECK(parse("{\"hidden_size\":64}", &d) != 0 && strstr(tt_last_error(), "neither 'architectures' nor 'model_type'"));
    /* Gemma3ForConditionalGeneration: its text_config is read, as Gemma 3's language model, or refused by name */
    CHECK(parse("{\"architectures\":[\"Gemma3ForConditionalGeneration\"]}", &d) != 0 &&
          strstr(tt_last_error(), "'text_config'"));
    CHECK(parse("{\"architectures\":[\"Gemma3ForConditionalGeneration\"],\"text_config\":{\"model_type\":\"llama\"}}",
                &d) != 0 && strstr(tt_last_error(), "text_config: model_type 'llama'"));
    CHECK(parse("{\"model_type\":\"gemma3\",\"eos_token_id\":[1,106],\"text_config\":{\"num_hidden_layers\":7,"
                "\"eos_token_id\":1,\"bos_token_id\":2,\"sliding_window\":0}}", &d) != 0 &&
          strstr(tt_last_error(), "text_config: key 'sliding_window'"));
    CHECK(parse("{\"model_type\":\"gemma3\",\"eos_token_id\":[1,106],\"text_config\":{\"num_hidden_layers\":7,"
                "\"eos_token_id\":1,\"bos_token_id\":2}}", &d) == 0 && d.ext.hf_vlm && d.family == TT_HF_GEMMA3 &&
          d.model.n_layers == 7 && d.n_eos == 2 && d.eos_token_ids[1] == 106 && d.bos_token_id == 2);
    CHECK(parse("{\"architectures\":[\"GraniteForCausalLM\"]}", &d) == 0 && d.ext.attn_mult == 1 && !d.ext.embed_mult);
    CHECK(tt_hf_family_for(&d.model, &d.ext) == TT_HF_GRANITE && tt_hf_family_check(TT_HF_LLAMA, &d.model, &d.ext) != 0 &&
          strstr(tt_last_error(), "Granite's multipliers"));
    /* a config written for each family parses back to the same model */
    c.family = TT_HF_QWEN3;
    c.model.rope = (tt_rope_params){20000, 0, 3, 0, 0, 512};
    c.ext.rope = (tt_rope_ext){.yarn = 1, .beta_fast = 24, .beta_slow = 2, .yarn_no_truncate = 1};
    char *js = tt_hf_config_to_json(&c);
    tt_hf_config back;
    CHECK_MSG(js && parse(js, &back) == 0, "%s", tt_last_error());
    CHECK(same_cfg(&c.model, &c.ext, &back.model, &back.ext) && back.family == TT_HF_QWEN3);
    free(js);
}

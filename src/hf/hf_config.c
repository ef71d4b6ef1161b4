/* hf_config.c — Hugging Face config.json <-> tt_model_cfg. One table row per
 * transformers class: its names, the keys it reads with their class
 * defaults (what transformers uses when a key is absent), and its reader,
 * writer and export check. The MoE families are Llama-like rows with F_MOE:
 * their router and experts are read by hf_read_moe (hf_moe_config.c) on top
 * of read_llama; RoPE's keys are hf_rope_config.c's. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/hf_config.h"
#include "hf/hf_json.h"
#include "hf/hf_moe_config.h"
#include "hf/hf_rope_config.h"
#include "formats/safetensors.h" /* tt_read_file */

/* Features of the Llama-like classes (which keys they read, which weights they have). */
enum {
    F_ATTN_BIAS = 1 << 0,  /* attention_bias: q, k, v and o projections biased */
    F_MLP_BIAS = 1 << 1,   /* mlp_bias: gate, up, down biased */
    F_QKV_BIAS = 1 << 2,   /* q, k, v always biased, o never (Qwen2) */
    F_QK_NORM = 1 << 3,    /* per-head RMSNorm of q and k (Qwen3) */
    F_WINDOW_ALL = 1 << 4, /* sliding_window on every layer (Mistral) */
    F_WINDOW_LAYERS = 1 << 5, /* use_sliding_window, max_window_layers, layer_types (Qwen2/3) */
    F_HEAD_DIM = 1 << 6,   /* writes head_dim (classes that read it) */
    F_MOE = 1 << 7,        /* Mixture-of-Experts: num_experts, num_experts_per_tok, ... */
    F_MOE_QWEN = 1 << 8,   /* moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers */
    F_SHARED_GATED = 1 << 9, /* a shared expert behind a sigmoid gate (Qwen2-MoE) */
    F_MIXTRAL = 1 << 10,   /* num_local_experts, always renormalised, Mixtral's tensor names */
    F_QK_NORM_FULL = 1 << 11, /* RMSNorm over all of q and all of k (OLMoE) */
    F_DEEPSEEK = 1 << 12,  /* Multi-head Latent Attention; sigmoid routing in groups with a selection bias */
    F_POST_NORMS = 1 << 13, /* an RMSNorm on each branch's output, none on its input (OLMo 2) */
    F_NO_ROPE = 1 << 14,   /* no_rope_layers: RoPE on some layers only (SmolLM3) */
    F_GRANITE = 1 << 15,   /* embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling */
    F_PHI3 = 1 << 16,      /* fused qkv_proj and gate_up_proj; partial_rotary_factor, longrope; no dropout */
    F_GEMMA3 = 1 << 17,    /* Gemma 3's block, windows by layer_types, RoPE per layer type, hidden_activation */
    F_GEMMA2 = 1 << 18,    /* Gemma 2: Gemma 3's block without q/k norms; soft-capped scores and logits; one RoPE */
    F_GPT_OSS = 1 << 19,   /* GPT-OSS: sinks, windows by layer_types, YaRN by default; its MoE keys and names */
};

typedef struct hf_spec hf_spec;
struct hf_spec {
    tt_hf_family family;
    const char *architecture, *model_type;
    tt_arch_id arch;
    unsigned features;
    /* class defaults for absent keys (head_dim 0: hidden_size / num_attention_heads) */
    int hidden, inter, layers, heads, kv_heads, head_dim, vocab, max_pos, window;
    double eps;
    int tie;
    tt_err (*read)(const hf_spec *s, const cJSON *j, const char *path, tt_hf_config *o);
    tt_err (*write)(const hf_spec *s, const tt_hf_config *c, cJSON *j);
    tt_err (*check)(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x);
};

static tt_err read_llama(const hf_spec *s, const cJSON *j, const char *path, tt_hf_config *o);
static tt_err write_llama(const hf_spec *s, const tt_hf_config *c, cJSON *j);
static tt_err check_llama(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x);
static tt_err read_gpt2(const hf_spec *s, const cJSON *j, const char *path, tt_hf_config *o);
static tt_err write_gpt2(const hf_spec *s, const tt_hf_config *c, cJSON *j);
static tt_err check_gpt2(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x);

static const hf_spec specs[] = {
    {TT_HF_LLAMA, "LlamaForCausalLM", "llama", TT_ARCH_LLAMA, F_ATTN_BIAS | F_MLP_BIAS | F_HEAD_DIM,
     4096, 11008, 32, 32, 0, 0, 32000, 2048, 0, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_MISTRAL, "MistralForCausalLM", "mistral", TT_ARCH_LLAMA, F_WINDOW_ALL | F_HEAD_DIM,
     4096, 14336, 32, 32, 8, 0, 32000, 131072, 4096, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_QWEN2, "Qwen2ForCausalLM", "qwen2", TT_ARCH_LLAMA, F_QKV_BIAS | F_WINDOW_LAYERS,
     4096, 22016, 32, 32, 32, 0, 151936, 32768, 4096, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_QWEN3, "Qwen3ForCausalLM", "qwen3", TT_ARCH_LLAMA, F_ATTN_BIAS | F_QK_NORM | F_WINDOW_LAYERS | F_HEAD_DIM,
     4096, 22016, 32, 32, 32, 128, 151936, 32768, 4096, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_GPT2, "GPT2LMHeadModel", "gpt2", TT_ARCH_GPT2, 0,
     768, 0, 12, 12, 12, 0, 50257, 1024, 0, 1e-5, 1, read_gpt2, write_gpt2, check_gpt2},
    /* Mixture-of-Experts (their MoE keys' class defaults are in read_moe) */
    {TT_HF_MIXTRAL, "MixtralForCausalLM", "mixtral", TT_ARCH_LLAMA, F_WINDOW_ALL | F_HEAD_DIM | F_MOE | F_MIXTRAL,
     4096, 14336, 32, 32, 8, 0, 32000, 131072, 0, 1e-5, 0, read_llama, write_llama, check_llama},
    {TT_HF_QWEN3_MOE, "Qwen3MoeForCausalLM", "qwen3_moe", TT_ARCH_LLAMA,
     F_ATTN_BIAS | F_QK_NORM | F_WINDOW_LAYERS | F_HEAD_DIM | F_MOE | F_MOE_QWEN,
     2048, 6144, 24, 32, 4, 0, 151936, 32768, 4096, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_QWEN2_MOE, "Qwen2MoeForCausalLM", "qwen2_moe", TT_ARCH_LLAMA,
     F_QKV_BIAS | F_WINDOW_LAYERS | F_MOE | F_MOE_QWEN | F_SHARED_GATED,
     2048, 5632, 24, 16, 16, 0, 151936, 32768, 4096, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_OLMOE, "OlmoeForCausalLM", "olmoe", TT_ARCH_LLAMA, F_ATTN_BIAS | F_QK_NORM_FULL | F_MOE,
     2048, 2048, 16, 16, 16, 0, 50304, 4096, 0, 1e-5, 0, read_llama, write_llama, check_llama},
    {TT_HF_DEEPSEEK_V3, "DeepseekV3ForCausalLM", "deepseek_v3", TT_ARCH_LLAMA, F_HEAD_DIM | F_MOE | F_DEEPSEEK,
     7168, 18432, 61, 128, 128, 64, 129280, 4096, 0, 1e-6, 0, read_llama, write_llama, check_llama},
    /* dense families with their own block */
    {TT_HF_OLMO2, "Olmo2ForCausalLM", "olmo2", TT_ARCH_LLAMA, F_ATTN_BIAS | F_QK_NORM_FULL | F_POST_NORMS,
     4096, 11008, 32, 32, 0, 0, 50304, 2048, 0, 1e-5, 0, read_llama, write_llama, check_llama},
    {TT_HF_SMOLLM3, "SmolLM3ForCausalLM", "smollm3", TT_ARCH_LLAMA,
     F_ATTN_BIAS | F_MLP_BIAS | F_NO_ROPE | F_WINDOW_LAYERS,
     2048, 11008, 36, 16, 4, 0, 128256, 32768, 0, 1e-6, 1, read_llama, write_llama, check_llama},
    {TT_HF_GRANITE, "GraniteForCausalLM", "granite", TT_ARCH_LLAMA, F_ATTN_BIAS | F_MLP_BIAS | F_GRANITE,
     4096, 11008, 32, 32, 0, 0, 32000, 2048, 0, 1e-6, 0, read_llama, write_llama, check_llama},
    {TT_HF_PHI3, "Phi3ForCausalLM", "phi3", TT_ARCH_LLAMA, F_PHI3 | F_WINDOW_ALL,
     3072, 8192, 32, 32, 0, 0, 32064, 4096, 0, 1e-5, 0, read_llama, write_llama, check_llama},
    {TT_HF_GEMMA3, "Gemma3ForCausalLM", "gemma3_text", TT_ARCH_LLAMA, F_ATTN_BIAS | F_QK_NORM | F_HEAD_DIM | F_GEMMA3,
     2304, 9216, 26, 8, 4, 256, 262208, 131072, 4096, 1e-6, 1, read_llama, write_llama, check_llama},
    {TT_HF_GEMMA2, "Gemma2ForCausalLM", "gemma2", TT_ARCH_LLAMA, F_ATTN_BIAS | F_HEAD_DIM | F_GEMMA2,
     2304, 9216, 26, 8, 4, 256, 256000, 8192, 4096, 1e-6, 1, read_llama, write_llama, check_llama},
    /* Mixture-of-Experts with attention sinks (its MoE keys' class defaults are in moe_keys) */
    {TT_HF_GPT_OSS, "GptOssForCausalLM", "gpt_oss", TT_ARCH_LLAMA, F_ATTN_BIAS | F_HEAD_DIM | F_MOE | F_GPT_OSS,
     2880, 2880, 36, 64, 8, 64, 201088, 131072, 128, 1e-5, 0, read_llama, write_llama, check_llama},
};
#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

/* The MoE keys a class reads, with its class defaults of the expert count, top-k and expert width */
static hf_moe_keys moe_keys(const hf_spec *s)
{
    const tt_hf_family f = s->family;
    return (hf_moe_keys){
        .architecture = s->architecture,
        .moe = (s->features & F_MOE) != 0,
        .mixtral = (s->features & F_MIXTRAL) != 0,
        .qwen = (s->features & F_MOE_QWEN) != 0,
        .shared_gated = (s->features & F_SHARED_GATED) != 0,
        .deepseek = (s->features & F_DEEPSEEK) != 0,
        .olmoe = f == TT_HF_OLMOE,
        .gpt_oss = f == TT_HF_GPT_OSS,
        .def_experts = f == TT_HF_MIXTRAL ? 8 : f == TT_HF_QWEN2_MOE ? 60 : f == TT_HF_OLMOE ? 64 : 128,
        .def_top_k = f == TT_HF_MIXTRAL ? 2 : f == TT_HF_QWEN2_MOE || f == TT_HF_GPT_OSS ? 4 : 8,
        .def_ffn = f == TT_HF_QWEN2_MOE ? 1408 : 768,
    };
}

static const hf_spec *spec_of(tt_hf_family f)
{
    for (int i = 0; i < N_SPECS; i++)
        if (specs[i].family == f) return &specs[i];
    return NULL;
}

const char *tt_hf_family_architecture(tt_hf_family f)
{
    const hf_spec *s = spec_of(f);
    return s ? s->architecture : "?";
}

static void supported_list(char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < N_SPECS && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", specs[i].architecture);
}

/* ---- Llama, Mistral, Qwen2, Qwen3 ------------------------------------------ */
/* The layers' windows (window: 0 = none): each layer slides as layer_types says, else as sliding_default(l); a full
 * layer past TT_MODEL_MAX_LAYERS is refused while a window is on, and without layer_types a default that holds
 * for every layer past it (uniform) stops the walk there. Sets x->full_attention and *any: whether a layer slides. */
static tt_err layer_windows(const char *path, const cJSON *j, const tt_model_cfg *m, int window, tt_model_ext *x,
                            int (*sliding_default)(int l, const void *ctx), const void *ctx, int uniform, int *any)
{
    const cJSON *lt = hf_present(j, "layer_types");
    if (lt && (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != m->n_layers))
        return tt_errorf("%s: key 'layer_types' must be a list of %d strings (one per layer)", path, m->n_layers);
    *any = 0;
    const cJSON *e = lt ? lt->child : NULL; /* walked along: cJSON_GetArrayItem(lt, l) would be quadratic */
    for (int l = 0; l < m->n_layers; l++, e = e ? e->next : NULL) {
        int sliding = sliding_default(l, ctx);
        if (!lt && uniform && l > TT_MODEL_MAX_LAYERS) break; /* every later layer is like this one */
        if (lt) {
            const char *t = cJSON_IsString(e) ? e->valuestring : "";
            if (strcmp(t, "sliding_attention") && strcmp(t, "full_attention"))
                return tt_errorf("%s: layer_types[%d] is '%s': only 'full_attention' and 'sliding_attention' are "
                                 "supported", path, l, t);
            sliding = strcmp(t, "sliding_attention") == 0;
        }
        if (!sliding && l >= TT_MODEL_MAX_LAYERS && window)
            return tt_errorf("%s: per-layer sliding windows are supported for at most %d layers", path,
                             TT_MODEL_MAX_LAYERS);
        if (l < TT_MODEL_MAX_LAYERS) x->full_attention[l] = window && !sliding;
        *any |= sliding;
    }
    return 0;
}

/* Qwen2/3's default: layers from max_window_layers on slide; SmolLM3's: its layers without RoPE */
static int slides_past(int l, const void *ctx) { return l >= *(const int *)ctx; }
static int slides_without_rope(int l, const void *ctx)
{
    return l < TT_MODEL_MAX_LAYERS && ((const tt_model_ext *)ctx)->no_rope[l];
}

static tt_err read_windows(const hf_spec *s, const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x)
{
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "sliding_window");
    int window = 0, on = 1;
    /* a window use_sliding_window turns off may be written as 0 (Qwen2-MoE) */
    if ((s->features & F_WINDOW_LAYERS) && hf_get_bool(path, j, "use_sliding_window", 0, &on)) return -1;
    if (!sw) window = s->window; /* absent: the class default; null: no window */
    else if (!cJSON_IsNull(sw) && hf_get_int(path, j, "sliding_window", 0, on ? 1 : 0, &window)) return -1;
    if (s->features & F_WINDOW_ALL) {
        m->window = window;
        return 0;
    }
    int use = 0, mwl = 0, any = 0;
    const int no_rope = (s->features & F_NO_ROPE) != 0; /* SmolLM3: its layers without RoPE slide, by default */
    if (hf_get_bool(path, j, "use_sliding_window", 0, &use) ||
        (!no_rope && hf_get_int(path, j, "max_window_layers", 28, 0, &mwl)))
        return -1;
    m->window = use ? window : 0; /* transformers drops sliding_window unless use_sliding_window */
    if (no_rope ? layer_windows(path, j, m, m->window, x, slides_without_rope, x, 1, &any)
                : layer_windows(path, j, m, m->window, x, slides_past, &mwl, 1, &any))
        return -1;
    if (!any) { /* a window no layer uses is no window */
        m->window = 0;
        memset(x->full_attention, 0, sizeof x->full_attention);
    }
    return 0;
}

/* SmolLM3's no_rope_layers: one 0 or 1 a layer, 1 applying RoPE; absent, every no_rope_layer_interval-th layer
 * has none */
static tt_err read_no_rope(const cJSON *j, const char *path, const tt_model_cfg *m, tt_model_ext *x)
{
    int every = 4;
    if (hf_get_int(path, j, "no_rope_layer_interval", 4, 1, &every)) return -1;
    const cJSON *nr = hf_present(j, "no_rope_layers");
    if (nr && (!cJSON_IsArray(nr) || cJSON_GetArraySize(nr) != m->n_layers))
        return tt_errorf("%s: key 'no_rope_layers' must be a list of %d numbers 0 or 1 (one per layer)", path,
                         m->n_layers);
    const cJSON *e = nr ? nr->child : NULL;
    for (int l = 0; l < m->n_layers; l++, e = e ? e->next : NULL) {
        int rope = (l + 1) % every != 0;
        if (nr) {
            if (!cJSON_IsNumber(e) || (e->valuedouble != 0 && e->valuedouble != 1))
                return tt_errorf("%s: no_rope_layers[%d] must be 0 or 1", path, l);
            rope = e->valuedouble == 1;
        }
        if (!rope && l >= TT_MODEL_MAX_LAYERS)
            return tt_errorf("%s: key 'no_rope_layers': layers without RoPE past %d are not supported", path,
                             TT_MODEL_MAX_LAYERS);
        if (l < TT_MODEL_MAX_LAYERS) x->no_rope[l] = !rope;
    }
    return 0;
}

/* Granite's multipliers, each a positive number (1 by default); those of 1 are kept as none (0), but the attention's,
 * which replaces 1 / sqrt(head_dim), always */
static tt_err read_granite(const cJSON *j, const char *path, tt_model_ext *x)
{
    double em, rm, lg;
    if (hf_get_pos(path, j, "embedding_multiplier", 1, &em) || hf_get_pos(path, j, "residual_multiplier", 1, &rm) ||
        hf_get_pos(path, j, "attention_multiplier", 1, &x->attn_mult) || hf_get_pos(path, j, "logits_scaling", 1, &lg))
        return -1;
    x->embed_mult = em != 1 ? em : 0;
    x->residual_mult = rm != 1 ? rm : 0;
    x->logits_div = lg != 1 ? lg : 0;
    return 0;
}

/* Gemma's default: every pattern-th layer full, the others sliding (Gemma 3: 6; Gemma 2: 2) */
static int slides_between_full(int l, const void *ctx) { return (l + 1) % *(const int *)ctx != 0; }

/* The windows of Gemma 2 and 3 and GPT-OSS: sliding_window (def when absent, null: none) on the layers layer_types
 * marks, else on all but every pattern-th. *any: whether a layer slides. */
static tt_err typed_windows(const cJSON *j, const char *path, int def, int pattern, tt_model_cfg *m, tt_model_ext *x,
                            int *any)
{
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(j, "sliding_window");
    int window = def;
    if (sw && cJSON_IsNull(sw)) window = 0;
    else if (hf_get_int(path, j, "sliding_window", def, 1, &window)) return -1;
    m->window = window;
    /* the default repeats with the pattern: the walk past TT_MODEL_MAX_LAYERS stops at the first full layer (refused
     * with a window), so it is uniform only when no layer is full or no window is on */
    const int uniform = pattern > m->n_layers || pattern == 1 || !window;
    return layer_windows(path, j, m, window, x, slides_between_full, &pattern, uniform, any);
}

/* What Gemma 2 and 3 share: query_pre_attn_scalar, causal attention only, and the windows (typed_windows). */
static tt_err read_gemma(const cJSON *j, const char *path, int pattern, tt_model_cfg *m, tt_model_ext *x, int *any)
{
    int bidi = 0;
    if (hf_get_bool(path, j, "use_bidirectional_attention", 0, &bidi) ||
        hf_get_pos(path, j, "query_pre_attn_scalar", 256, &x->query_pre_attn_scalar))
        return -1;
    if (bidi) return tt_errorf("%s: key 'use_bidirectional_attention' is true: only causal attention is supported", path);
    x->gemma = 1;
    return typed_windows(j, path, 4096, pattern, m, x, any);
}

/* A window no layer uses is no window, and every layer is full */
static void drop_unused_window(tt_model_cfg *m, tt_model_ext *x)
{
    m->window = 0;
    memset(x->full_attention, 0, sizeof x->full_attention);
}

/* Gemma 2: soft-capping of the attention scores and of the final logits (each null: none), one RoPE for all layers,
 * every other layer sliding by default */
static tt_err read_gemma2(const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x, int *rot)
{
    static const char *const caps[] = {"attn_logit_softcapping", "final_logit_softcapping"};
    double *dst[] = {&x->attn_softcap, &x->final_softcap};
    const double def[] = {50.0, 30.0};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, caps[i]);
        if (!(v && cJSON_IsNull(v)) && hf_get_pos(path, j, caps[i], def[i], dst[i])) return -1; /* null: none */
    }
    int any = 0;
    if (read_gemma(j, path, 2, m, x, &any) ||
        hf_read_rope(path, j, m->max_seq_len, 10000.0, 0, m->head_dim, rot, &m->rope, &x->rope))
        return -1;
    if (!any) drop_unused_window(m, x);
    return 0;
}

/* Gemma 3: RoPE per layer type (rope_parameters' full_attention and sliding_attention, or transformers 4's
 * rope_theta, rope_scaling and rope_local_base_freq), the local one plain; every sliding_window_pattern-th layer
 * full by default; no soft-capping */
static tt_err read_gemma3(const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x)
{
    static const char *const refused[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++)
        if (hf_present(j, refused[i]))
            return tt_errorf("%s: key '%s' is set: soft-capping is not supported (Gemma 3 has none)", path, refused[i]);
    int pattern = 6, any = 0;
    if (hf_get_int(path, j, "sliding_window_pattern", 6, 1, &pattern) || read_gemma(j, path, pattern, m, x, &any))
        return -1;
    /* RoPE: the full layers' (with its scaling) and the sliding layers' base */
    const cJSON *rp = hf_present(j, "rope_parameters"), *full = rp ? hf_present(rp, "full_attention") : NULL;
    const cJSON *loc = rp ? hf_present(rp, "sliding_attention") : NULL;
    int rot;
    cJSON *wrap = cJSON_CreateObject(); /* {"rope_parameters": full}: the global dict read as a whole-model one */
    if (!wrap) return tt_errorf("out of memory");
    if (full) cJSON_AddItemReferenceToObject(wrap, "rope_parameters", (cJSON *)full);
    else if (rp) {
        cJSON_Delete(wrap);
        return tt_errorf("%s: rope_parameters must hold 'full_attention' and 'sliding_attention' dicts", path);
    }
    double theta;
    tt_err rc = hf_get_pos(path, j, "rope_theta", 1000000.0, &theta) ||
                hf_read_rope(path, full ? wrap : j, m->max_seq_len, theta, 0, m->head_dim, &rot, &m->rope, &x->rope);
    cJSON_Delete(wrap);
    if (rc) return -1;
    if (loc) {
        const char *t = "default";
        if (hf_get_str(path, loc, "rope_type", "default", &t) || hf_get_pos(path, loc, "rope_theta", 10000.0, &x->rope_local_theta))
            return -1;
        if (strcmp(t, "default"))
            return tt_errorf("%s: rope_parameters.sliding_attention: rope type '%s' is not supported (only default)",
                             path, t);
    } else if (hf_get_pos(path, j, "rope_local_base_freq", 10000.0, &x->rope_local_theta))
        return -1;
    if (any && !m->window)
        return tt_errorf("%s: sliding_window is null but layer_types has sliding layers (their own RoPE base without a "
                         "window): not supported", path);
    if (!any) drop_unused_window(m, x); /* and every layer takes the full layers' RoPE */
    return 0;
}

/* Phi-3's dropouts: titan applies none, so a config that asks for them in training is refused by name */
/* GPT-OSS: a sink a head, windows on the layers layer_types marks (every other one from the first by default), YaRN
 * (factor 32 over 4,096 positions, not truncated) when config.json has no RoPE dict; MXFP4 experts (quantization_config
 * quant_method mxfp4, the published checkpoints'), other quantizations refused; its MoE keys are hf_read_moe's.
 * *rot: the features RoPE turns. */
static tt_err read_gpt_oss(const cJSON *j, const char *path, tt_model_cfg *m, tt_model_ext *x, int *rot)
{
    const cJSON *q = hf_present(j, "quantization_config");
    if (q) {
        const char *method = "?";
        if (!cJSON_IsObject(q)) return tt_errorf("%s: key 'quantization_config' must be an object", path);
        if (hf_get_str(path, q, "quant_method", "?", &method)) return -1;
        if (strcmp(method, "mxfp4"))
            return tt_errorf("%s: key 'quantization_config' (quant_method '%s'): of quantized GPT-OSS checkpoints "
                             "only MXFP4 ones are supported", path, method);
        x->hf_mxfp4 = 1;
    }
    int any = 0;
    x->attn_sinks = 1, x->hf_gpt_oss = 1;
    if (typed_windows(j, path, 128, 2, m, x, &any)) return -1;
    if (!any) drop_unused_window(m, x);
    double theta;
    if (hf_get_pos(path, j, "rope_theta", 150000.0, &theta)) return -1;
    if (hf_present(j, "rope_parameters") || hf_present(j, "rope_scaling"))
        return hf_read_rope(path, j, m->max_seq_len, theta, 0, m->head_dim, rot, &m->rope, &x->rope);
    cJSON *yarn = cJSON_Parse("{\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, "
                              "\"beta_slow\": 1.0, \"truncate\": false, \"original_max_position_embeddings\": 4096}}");
    if (!yarn) return tt_errorf("out of memory");
    const tt_err rc = hf_read_rope(path, yarn, m->max_seq_len, theta, 0, m->head_dim, rot, &m->rope, &x->rope);
    cJSON_Delete(yarn);
    return rc;
}

static tt_err read_phi3(const cJSON *j, const char *path)
{
    static const char *const keys[] = {"resid_pdrop", "embd_pdrop", "attention_dropout"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = hf_present(j, keys[i]);
        if (v && (!cJSON_IsNumber(v) || v->valuedouble != 0))
            return tt_errorf("%s: key '%s' must be 0: dropout inside the model is not supported", path, keys[i]);
    }
    return 0;
}

static tt_err cannot(const hf_spec *s, const char *what)
{
    return tt_errorf("%s cannot express this model: %s", s->architecture, what);
}

static tt_err read_llama(const hf_spec *s, const cJSON *j, const char *path, tt_hf_config *o)
{
    tt_model_cfg *m = &o->model;
    const hf_moe_keys mk = moe_keys(s);
    int hd = 0;
    m->arch = TT_ARCH_LLAMA;
    if (hf_get_int(path, j, "hidden_size", s->hidden, 1, &m->dim) ||
        hf_get_int(path, j, "intermediate_size", s->inter, 1, &m->ffn_dim) ||
        hf_get_int(path, j, "num_hidden_layers", s->layers, 1, &m->n_layers) ||
        hf_get_int(path, j, "num_attention_heads", s->heads, 1, &m->n_heads) ||
        hf_get_int(path, j, "num_key_value_heads", s->kv_heads ? s->kv_heads : m->n_heads, 1, &m->n_kv_heads) ||
        hf_get_int(path, j, "vocab_size", s->vocab, 1, &m->vocab_size) ||
        hf_get_int(path, j, "max_position_embeddings", s->max_pos, 1, &m->max_seq_len) ||
        hf_get_pos(path, j, "rms_norm_eps", s->eps, &m->norm_eps) ||
        hf_get_bool(path, j, "tie_word_embeddings", s->tie, &m->tie_embeddings))
        return -1;
    const cJSON *jk = cJSON_GetObjectItemCaseSensitive(j, "num_key_value_heads");
    if (jk && cJSON_IsNull(jk)) m->n_kv_heads = m->n_heads; /* null: no GQA; absent: the class default */
    /* head_dim: absent takes the class default, null means hidden_size / num_attention_heads */
    const cJSON *jh = cJSON_GetObjectItemCaseSensitive(j, "head_dim");
    if (jh && !cJSON_IsNull(jh)) {
        if (hf_get_int(path, j, "head_dim", 0, 1, &hd)) return -1;
    } else if (!jh && s->head_dim)
        hd = s->head_dim;
    if (!hd) {
        if (m->dim % m->n_heads)
            return tt_errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", path, m->dim, m->n_heads);
        hd = m->dim / m->n_heads;
    }
    m->head_dim = hd;
    if (m->n_heads % m->n_kv_heads)
        return tt_errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, m->n_heads,
                         m->n_kv_heads);
    if (hd % 2) return tt_errorf("%s: head_dim %d must be even for RoPE", path, hd);
    const char *act = "";
    if (s->features & (F_GEMMA3 | F_GEMMA2)) { /* GeGLU */
        if (hf_get_str(path, j, "hidden_activation", "gelu_pytorch_tanh", &act)) return -1;
        if (strcmp(act, "gelu_pytorch_tanh"))
            return tt_errorf("%s: hidden_activation '%s' is not supported for %s (only 'gelu_pytorch_tanh')", path, act,
                             s->architecture);
    } else if (hf_get_str(path, j, "hidden_act", "silu", &act))
        return -1;
    else if (strcmp(act, "silu"))
        return tt_errorf("%s: hidden_act '%s' is not supported for %s (only 'silu')", path, act, s->architecture);
    int ab = 0, mb = 0;
    if ((s->features & F_ATTN_BIAS) && hf_get_bool(path, j, "attention_bias", s->family == TT_HF_GPT_OSS, &ab))
        return -1;
    if ((s->features & F_MLP_BIAS) && hf_get_bool(path, j, "mlp_bias", 0, &mb)) return -1;
    m->qkv_bias = ab || (s->features & F_QKV_BIAS);
    o->ext.o_bias = ab;
    o->ext.mlp_bias = mb;
    m->qk_norm = (s->features & (F_QK_NORM | F_QK_NORM_FULL)) != 0;
    o->ext.qk_norm_full = (s->features & F_QK_NORM_FULL) != 0;
    o->ext.hf_mixtral = (s->features & F_MIXTRAL) != 0;
    if ((s->features & F_DEEPSEEK) && hf_read_deepseek(j, path, m, &o->ext)) return -1;
    else if ((s->features & F_MOE) && !(s->features & F_DEEPSEEK) && hf_read_moe(&mk, j, path, m)) return -1;
    if ((s->features & F_POST_NORMS)) o->ext.post_norms = 1;
    if ((s->features & F_GRANITE) && read_granite(j, path, &o->ext)) return -1;
    if ((s->features & F_NO_ROPE) && read_no_rope(j, path, m, &o->ext)) return -1;
    /* the class default of rope_theta: SmolLM3's default_theta, 10000 elsewhere */
    int rot;
    if (s->features & F_GEMMA3) {
        if (read_gemma3(j, path, m, &o->ext)) return -1;
        rot = m->head_dim;
    } else if (s->features & F_GEMMA2) {
        if (read_gemma2(j, path, m, &o->ext, &rot)) return -1;
    } else if (s->features & F_GPT_OSS) {
        if (read_gpt_oss(j, path, m, &o->ext, &rot)) return -1;
    } else if (hf_read_rope(path, j, m->max_seq_len, s->family == TT_HF_SMOLLM3 ? 2000000.0 : 10000.0,
                         (s->features & F_PHI3) != 0, m->head_dim, &rot, &m->rope, &o->ext.rope))
        return -1;
    o->ext.rope_rot = rot < m->head_dim ? rot : 0;
    o->ext.hf_phi3 = (s->features & F_PHI3) != 0;
    if ((s->features & F_PHI3) && read_phi3(j, path)) return -1;
    if ((s->features & (F_WINDOW_ALL | F_WINDOW_LAYERS)) && read_windows(s, j, path, m, &o->ext)) return -1;
    return 0;
}

static void add_window_keys(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x, cJSON *j)
{
    if (s->features & F_WINDOW_ALL) {
        if (m->window) cJSON_AddNumberToObject(j, "sliding_window", m->window);
        else cJSON_AddNullToObject(j, "sliding_window");
    }
    if (!(s->features & F_WINDOW_LAYERS)) return;
    cJSON_AddBoolToObject(j, "use_sliding_window", m->window > 0);
    if (!m->window) {
        cJSON_AddNullToObject(j, "sliding_window");
        if (!(s->features & F_NO_ROPE)) cJSON_AddNumberToObject(j, "max_window_layers", m->n_layers);
        return;
    }
    int first = m->n_layers;
    cJSON *lt = cJSON_CreateArray();
    for (int l = 0; l < m->n_layers; l++) {
        int sliding = tt_model_layer_window(m, x, l) > 0;
        if (sliding && first == m->n_layers) first = l;
        cJSON_AddItemToArray(lt, cJSON_CreateString(sliding ? "sliding_attention" : "full_attention"));
    }
    cJSON_AddNumberToObject(j, "sliding_window", m->window);
    if (!(s->features & F_NO_ROPE)) cJSON_AddNumberToObject(j, "max_window_layers", first); /* transformers 4 */
    cJSON_AddItemToObject(j, "layer_types", lt);            /* what transformers 5 reads */
}

/* The windows as typed_windows reads them: sliding_window (null: none) and every layer's type */
static void add_layer_types(const tt_model_cfg *m, const tt_model_ext *x, cJSON *j)
{
    if (m->window) cJSON_AddNumberToObject(j, "sliding_window", m->window);
    else cJSON_AddNullToObject(j, "sliding_window"); /* and every layer full */
    cJSON *lt = cJSON_AddArrayToObject(j, "layer_types");
    for (int l = 0; l < m->n_layers; l++)
        cJSON_AddItemToArray(lt, cJSON_CreateString(tt_model_layer_window(m, x, l) > 0 ? "sliding_attention"
                                                                                       : "full_attention"));
}

/* What Gemma 2 and 3 write alike: the activation, score scale, soft-cappings (null: none), causal attention, and the
 * windows: sliding_window and every layer's type */
static void write_gemma(const tt_model_cfg *m, const tt_model_ext *x, cJSON *j)
{
    cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh");
    hf_add_real(j, "query_pre_attn_scalar", x->query_pre_attn_scalar);
    if (x->final_softcap > 0) hf_add_float(j, "final_logit_softcapping", x->final_softcap);
    else cJSON_AddNullToObject(j, "final_logit_softcapping");
    if (x->attn_softcap > 0) hf_add_float(j, "attn_logit_softcapping", x->attn_softcap);
    else cJSON_AddNullToObject(j, "attn_logit_softcapping");
    cJSON_AddFalseToObject(j, "use_bidirectional_attention");
    add_layer_types(m, x, j);
}

/* Gemma 3's own keys: RoPE per layer type */
static void write_gemma3(const tt_model_cfg *m, const tt_model_ext *x, cJSON *j)
{
    cJSON *rp = cJSON_AddObjectToObject(j, "rope_parameters");
    cJSON *full = hf_rope_to_json(&m->rope, &x->rope, m->head_dim);
    if (cJSON_IsNull(full)) {
        cJSON_Delete(full);
        full = cJSON_CreateObject();
        cJSON_AddStringToObject(full, "rope_type", "default");
    }
    hf_add_real(full, "rope_theta", m->rope.theta);
    cJSON_AddItemToObject(rp, "full_attention", full);
    cJSON *loc = cJSON_AddObjectToObject(rp, "sliding_attention");
    cJSON_AddStringToObject(loc, "rope_type", "default");
    hf_add_real(loc, "rope_theta", x->rope_local_theta);
}

static tt_err write_llama(const hf_spec *s, const tt_hf_config *c, cJSON *j)
{
    const tt_model_cfg *m = &c->model;
    const hf_moe_keys mk = moe_keys(s);
    cJSON_AddNumberToObject(j, "hidden_size", m->dim);
    /* Mixtral and OLMoE: every layer is MoE, and intermediate_size is each expert's width */
    const int experts_wide = (s->features & F_MOE) && !(s->features & (F_MOE_QWEN | F_DEEPSEEK));
    cJSON_AddNumberToObject(j, "intermediate_size", experts_wide ? m->moe.ffn_dim : m->ffn_dim);
    cJSON_AddNumberToObject(j, "num_hidden_layers", m->n_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", m->n_heads);
    cJSON_AddNumberToObject(j, "num_key_value_heads", m->n_kv_heads);
    if (s->features & F_HEAD_DIM) cJSON_AddNumberToObject(j, "head_dim", m->head_dim);
    cJSON_AddNumberToObject(j, "vocab_size", m->vocab_size);
    cJSON_AddNumberToObject(j, "max_position_embeddings", m->max_seq_len);
    hf_add_real(j, "rms_norm_eps", m->norm_eps);
    const int rot = c->ext.rope_rot > 0 ? c->ext.rope_rot : m->head_dim;
    if (s->features & (F_GEMMA3 | F_GEMMA2)) write_gemma(m, &c->ext, j);
    if (s->features & F_GEMMA3) write_gemma3(m, &c->ext, j);
    else {
        if (!(s->features & F_GEMMA2)) cJSON_AddStringToObject(j, "hidden_act", "silu");
        hf_add_real(j, "rope_theta", m->rope.theta);
        cJSON *rs = hf_rope_to_json(&m->rope, &c->ext.rope, rot);
        if ((s->features & F_GPT_OSS) && cJSON_IsNull(rs)) { /* said, as GPT-OSS's absent dict means YaRN */
            cJSON_Delete(rs);
            rs = cJSON_CreateObject();
            cJSON_AddStringToObject(rs, "rope_type", "default");
        }
        cJSON_AddItemToObject(j, "rope_scaling", rs);
    }
    if (s->features & F_PHI3) {
        /* the factor whose int(head_dim * factor) is the rotated features: rot / hd, or just above it */
        double prf = (double)rot / m->head_dim;
        while ((int)floor(m->head_dim * prf) < rot) prf = nextafter(prf, 2.0);
        hf_add_real(j, "partial_rotary_factor", prf);
        cJSON_AddNumberToObject(j, "original_max_position_embeddings",
                                c->ext.rope.longrope ? m->rope.original_max_pos : m->max_seq_len);
    }
    cJSON_AddBoolToObject(j, "tie_word_embeddings", m->tie_embeddings);
    if (s->features & F_ATTN_BIAS) cJSON_AddBoolToObject(j, "attention_bias", c->ext.o_bias);
    if (s->features & F_MLP_BIAS) cJSON_AddBoolToObject(j, "mlp_bias", c->ext.mlp_bias);
    if (s->features & F_NO_ROPE) { /* before the windows: transformers derives layer_types from it when absent */
        cJSON *nr = cJSON_AddArrayToObject(j, "no_rope_layers");
        for (int l = 0; l < m->n_layers; l++)
            cJSON_AddItemToArray(nr, cJSON_CreateNumber(l < TT_MODEL_MAX_LAYERS && c->ext.no_rope[l] ? 0 : 1));
    }
    add_window_keys(s, m, &c->ext, j);
    if (s->features & F_GPT_OSS) add_layer_types(m, &c->ext, j);
    if (s->features & F_GRANITE) {
        const tt_model_ext *x = &c->ext;
        hf_add_real(j, "embedding_multiplier", x->embed_mult ? x->embed_mult : 1);
        hf_add_real(j, "residual_multiplier", x->residual_mult ? x->residual_mult : 1);
        hf_add_real(j, "attention_multiplier", x->attn_mult ? x->attn_mult : 1 / sqrt((double)m->head_dim));
        hf_add_real(j, "logits_scaling", x->logits_div ? x->logits_div : 1);
    }
    if (s->features & F_DEEPSEEK) hf_write_deepseek(m, &c->ext, j);
    else if (s->features & F_MOE) hf_write_moe(&mk, m, j);
    return 0;
}


static tt_err check_llama(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x)
{
    unsigned f = s->features;
    const hf_moe_keys mk = moe_keys(s);
    if (m->arch != TT_ARCH_LLAMA) return cannot(s, "it is not a Llama-style model");
    if (m->qk_norm != ((f & (F_QK_NORM | F_QK_NORM_FULL)) != 0))
        return cannot(s, m->qk_norm ? "it has q/k norms" : "it has no q/k norms (the class always has them)");
    if (m->qk_norm && !x->qk_norm_full != !(f & F_QK_NORM_FULL))
        return cannot(s, x->qk_norm_full ? "its q/k norms span all heads (the class norms each head)"
                                         : "its q/k norms are per head (the class norms all heads at once)");
    if (hf_check_moe(&mk, m)) return -1;
    if (!!x->gemma != !!(f & (F_GEMMA3 | F_GEMMA2)))
        return cannot(s, x->gemma ? "it has Gemma's block ((1 + w) norms around each branch, GeGLU)"
                                  : "its block is Gemma's ((1 + w) norms around each branch, GeGLU)");
    if ((f & F_GEMMA3) && m->window && !x->rope_local_theta)
        return cannot(s, "its sliding layers need their own RoPE base");
    if ((f & F_GEMMA2) && x->rope_local_theta)
        return cannot(s, "its sliding layers have their own RoPE base (Gemma 2 has one RoPE)");
    if (!!x->attn_sinks != !!(f & F_GPT_OSS))
        return cannot(s, x->attn_sinks ? "it has attention sinks (of the Hugging Face classes only GptOssForCausalLM "
                                         "does)"
                                       : "the class has attention sinks");
    if ((f & F_GPT_OSS) && (!m->qkv_bias || !x->o_bias)) return cannot(s, "the class's attention projections are biased");
    if (!(f & F_GEMMA2) && (x->attn_softcap > 0 || x->final_softcap > 0))
        return cannot(s, "it soft-caps its attention scores or logits (of the Hugging Face classes only "
                         "Gemma2ForCausalLM does)");
    if (!(f & F_PHI3) && (x->rope_rot || x->rope.longrope))
        return cannot(s, x->rope_rot ? "it rotates part of each head (partial rotary)" : "it has LongRoPE scaling");
    if ((f & F_PHI3) && (m->rope.llama3 || x->rope.linear || x->rope.yarn))
        return cannot(s, "its RoPE scaling is llama3, linear or YaRN (the class has default and longrope)");
    if (x->post_norms != !!(f & F_POST_NORMS))
        return cannot(s, x->post_norms ? "it norms each branch's output, not its input"
                                       : "the class norms each branch's output, not its input");
    if (!(f & F_GRANITE) && (x->embed_mult || x->residual_mult || x->attn_mult || x->logits_div))
        return cannot(s, "it has Granite's multipliers (of the embeddings, the residual branches, the attention "
                         "scores or the logits)");
    for (int l = 0; l < m->n_layers && l < TT_MODEL_MAX_LAYERS && !(f & F_NO_ROPE); l++)
        if (x->no_rope[l]) return cannot(s, "some of its layers apply no RoPE");
    if (f & F_QKV_BIAS) {
        if (!m->qkv_bias || x->o_bias) return cannot(s, "its q/k/v projections must have biases and o_proj none");
    } else if (f & F_ATTN_BIAS) {
        if (m->qkv_bias != x->o_bias) return cannot(s, "attention_bias covers q, k, v and o together");
    } else if (m->qkv_bias || x->o_bias)
        return cannot(s, "it has attention biases");
    if (x->mlp_bias && !(f & F_MLP_BIAS)) return cannot(s, "it has MLP biases");
    if (!(f & F_HEAD_DIM) && (long long)m->head_dim * m->n_heads != m->dim)
        return cannot(s, "head_dim differs from hidden_size / num_attention_heads");
    if (m->window && !(f & (F_WINDOW_ALL | F_WINDOW_LAYERS | F_GEMMA3 | F_GEMMA2 | F_GPT_OSS)))
        return cannot(s, "it has a sliding window");
    if (m->window && (f & F_WINDOW_ALL))
        for (int l = 0; l < m->n_layers && l < TT_MODEL_MAX_LAYERS; l++)
            if (x->full_attention[l]) return cannot(s, "its sliding window is not on every layer");
    return 0;
}

/* ---- GPT-2 ------------------------------------------------------------------
 * GPT2Config's attribute_map lets hidden_size, num_hidden_layers,
 * num_attention_heads and max_position_embeddings stand for its own names. */
static tt_err gpt2_int(const char *path, const cJSON *j, const char *key, const char *alias, int def, int *out)
{
    return hf_get_int(path, j, hf_present(j, key) || !hf_present(j, alias) ? key : alias, def, 1, out);
}

static tt_err read_gpt2(const hf_spec *s, const cJSON *j, const char *path, tt_hf_config *o)
{
    tt_model_cfg *m = &o->model;
    m->arch = TT_ARCH_GPT2;
    int inner = 0, flag = 0;
    if (gpt2_int(path, j, "n_embd", "hidden_size", s->hidden, &m->dim) ||
        gpt2_int(path, j, "n_layer", "num_hidden_layers", s->layers, &m->n_layers) ||
        gpt2_int(path, j, "n_head", "num_attention_heads", s->heads, &m->n_heads) ||
        gpt2_int(path, j, "n_positions", "max_position_embeddings", s->max_pos, &m->max_seq_len) ||
        hf_get_int(path, j, "vocab_size", s->vocab, 1, &m->vocab_size) || hf_get_int(path, j, "n_inner", 0, 1, &inner) ||
        hf_get_pos(path, j, "layer_norm_epsilon", s->eps, &m->norm_eps))
        return -1;
    if (m->dim % m->n_heads)
        return tt_errorf("%s: n_embd %d is not a multiple of n_head %d", path, m->dim, m->n_heads);
    m->n_kv_heads = m->n_heads;
    m->head_dim = m->dim / m->n_heads;
    if (!inner && m->dim > INT_MAX / 4)
        return tt_errorf("%s: n_embd %d is too large: the MLP's width, 4 * n_embd when n_inner is null, must be at "
                         "most %d", path, m->dim, INT_MAX);
    m->ffn_dim = inner ? inner : 4 * m->dim; /* n_inner null: 4 * n_embd */
    m->tie_embeddings = 1;
    m->rope.theta = 10000; /* unused: GPT-2 learns its positions */
    const char *act = "";
    if (hf_get_str(path, j, "activation_function", "gelu_new", &act)) return -1;
    if (strcmp(act, "gelu_new") && strcmp(act, "gelu_pytorch_tanh"))
        return tt_errorf("%s: activation_function '%s' is not supported for %s (supported: gelu_new, "
                         "gelu_pytorch_tanh)", path, act, s->architecture);
    static const struct { const char *key; int def, want; } flags[] = {
        {"tie_word_embeddings", 1, 1}, {"scale_attn_weights", 1, 1},
        {"scale_attn_by_inverse_layer_idx", 0, 0}, {"add_cross_attention", 0, 0},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        if (hf_get_bool(path, j, flags[i].key, flags[i].def, &flag)) return -1;
        if (flag != flags[i].want)
            return tt_errorf("%s: %s = %s is not supported for %s", path, flags[i].key, flag ? "true" : "false",
                             s->architecture);
    }
    return 0;
}

static tt_err write_gpt2(const hf_spec *s, const tt_hf_config *c, cJSON *j)
{
    const tt_model_cfg *m = &c->model;
    (void)s;
    cJSON_AddNumberToObject(j, "n_embd", m->dim);
    cJSON_AddNumberToObject(j, "n_layer", m->n_layers);
    cJSON_AddNumberToObject(j, "n_head", m->n_heads);
    cJSON_AddNumberToObject(j, "n_inner", m->ffn_dim);
    cJSON_AddNumberToObject(j, "n_positions", m->max_seq_len);
    cJSON_AddNumberToObject(j, "n_ctx", m->max_seq_len);
    cJSON_AddNumberToObject(j, "vocab_size", m->vocab_size);
    hf_add_real(j, "layer_norm_epsilon", m->norm_eps);
    cJSON_AddStringToObject(j, "activation_function", "gelu_new");
    cJSON_AddTrueToObject(j, "tie_word_embeddings");
    cJSON_AddTrueToObject(j, "scale_attn_weights");
    cJSON_AddFalseToObject(j, "scale_attn_by_inverse_layer_idx");
    cJSON_AddFalseToObject(j, "reorder_and_upcast_attn");
    return 0;
}

static tt_err check_gpt2(const hf_spec *s, const tt_model_cfg *m, const tt_model_ext *x)
{
    if (m->arch != TT_ARCH_GPT2) return cannot(s, "it is not a GPT-2 model");
    if (x->o_bias || x->mlp_bias) return cannot(s, "it has extra biases");
    if ((long long)m->head_dim * m->n_heads != m->dim) return cannot(s, "head_dim must be n_embd / n_head");
    if (m->window) return cannot(s, "it has a sliding window");
    return 0;
}

/* ---- entry points -------------------------------------------------------- */
static tt_err read_common(const cJSON *j, const char *path, tt_hf_config *o)
{
    const cJSON *b = hf_present(j, "bos_token_id"), *e = hf_present(j, "eos_token_id");
    o->bos_token_id = -1;
    if (b && hf_get_int(path, j, "bos_token_id", -1, 0, &o->bos_token_id)) return -1;
    o->has_pad = cJSON_GetObjectItemCaseSensitive(j, "pad_token_id") != NULL, o->pad_token_id = -1;
    if (o->has_pad && hf_get_int(path, j, "pad_token_id", -1, 0, &o->pad_token_id)) return -1; /* null: -1 */
    if (e && cJSON_IsArray(e)) {
        if (cJSON_GetArraySize(e) > TT_HF_MAX_EOS)
            return tt_errorf("%s: key 'eos_token_id' lists more than %d ids", path, TT_HF_MAX_EOS);
        for (const cJSON *x = e->child; x; x = x->next) {
            double d = cJSON_IsNumber(x) ? x->valuedouble : -1;
            if (!(d >= 0 && d == floor(d) && d <= INT_MAX))
                return tt_errorf("%s: key 'eos_token_id' must hold non-negative integers", path);
            o->eos_token_ids[o->n_eos++] = (int)d;
        }
    } else if (e) {
        if (hf_get_int(path, j, "eos_token_id", 0, 0, &o->eos_token_ids[0])) return -1;
        o->n_eos = 1;
    }
    const char *dt = "";
    if (hf_get_str(path, j, "torch_dtype", "", &dt) || hf_get_str(path, j, "dtype", dt, &dt)) return -1;
    snprintf(o->torch_dtype, sizeof o->torch_dtype, "%s", dt);
    return 0;
}

/* Gemma3ForConditionalGeneration (Gemma 3 4B and up): its language model alone, read from text_config as a
 * Gemma3ForCausalLM; the ids and dtype from the top level where it has them, else from text_config. The loader takes
 * the language model's weights from under language_model. and skips the vision tower's (ext.hf_vlm). */
static tt_err read_gemma3_vlm(const cJSON *j, const char *path, tt_hf_config *out)
{
    const cJSON *tc = hf_present(j, "text_config");
    if (!tc || !cJSON_IsObject(tc))
        return tt_errorf("%s: key 'text_config' (the language model's configuration) must be an object", path);
    char tp[4200];
    snprintf(tp, sizeof tp, "%s: text_config", path);
    const hf_spec *s = spec_of(TT_HF_GEMMA3);
    const char *mt = NULL;
    if (hf_get_str(tp, tc, "model_type", s->model_type, &mt)) return -1;
    if (strcmp(mt, s->model_type))
        return tt_errorf("%s: model_type '%s' is not Gemma 3's language model ('%s')", tp, mt, s->model_type);
    out->family = s->family;
    if (s->read(s, tc, tp, out) || read_common(tc, tp, out)) return -1;
    tt_hf_config top;
    memset(&top, 0, sizeof top);
    if (read_common(j, path, &top)) return -1;
    if (top.bos_token_id >= 0) out->bos_token_id = top.bos_token_id;
    if (top.has_pad) out->has_pad = 1, out->pad_token_id = top.pad_token_id;
    if (top.n_eos) {
        out->n_eos = top.n_eos;
        memcpy(out->eos_token_ids, top.eos_token_ids, sizeof top.eos_token_ids);
    }
    if (top.torch_dtype[0]) memcpy(out->torch_dtype, top.torch_dtype, sizeof top.torch_dtype);
    out->ext.hf_vlm = 1;
    return 0;
}

tt_err tt_hf_config_parse(const char *json, size_t len, const char *path, tt_hf_config *out)
{
    memset(out, 0, sizeof *out);
    cJSON *j = cJSON_ParseWithLength(json, len);
    if (!j) return tt_errorf("%s: not valid JSON", path);
    tt_err rc = -1;
    char list[1024];
    supported_list(list, sizeof list);
    const char *arch = NULL, *mtype = NULL;
    if (!cJSON_IsObject(j)) {
        tt_errorf("%s: not a JSON object", path);
        goto done;
    }
    const cJSON *a = hf_present(j, "architectures");
    if (a) {
        const cJSON *a0 = cJSON_IsArray(a) ? cJSON_GetArrayItem(a, 0) : NULL;
        if (!cJSON_IsString(a0)) {
            tt_errorf("%s: key 'architectures' must be a list of class names", path);
            goto done;
        }
        arch = a0->valuestring;
    }
    if (hf_get_str(path, j, "model_type", NULL, &mtype)) goto done;
    if (!arch && !mtype) {
        tt_errorf("%s: neither 'architectures' nor 'model_type' says which model this is (supported: %s)", path, list);
        goto done;
    }
    if (arch ? !strcmp(arch, "Gemma3ForConditionalGeneration") : !strcmp(mtype, "gemma3")) {
        rc = read_gemma3_vlm(j, path, out);
        goto done;
    }
    const hf_spec *s = NULL;
    for (int i = 0; i < N_SPECS && !s; i++)
        if (arch ? strcmp(arch, specs[i].architecture) == 0 : strcmp(mtype, specs[i].model_type) == 0) s = &specs[i];
    if (!s) {
        if (arch) tt_errorf("%s: architecture '%s' is not supported (supported: %s)", path, arch, list);
        else tt_errorf("%s: model_type '%s' is not supported (supported: %s)", path, mtype, list);
        goto done;
    }
    if (mtype && strcmp(mtype, s->model_type)) {
        tt_errorf("%s: model_type '%s' does not match architecture '%s' (model_type '%s')", path, mtype,
                  s->architecture, s->model_type);
        goto done;
    }
    out->family = s->family;
    if (s->read(s, j, path, out) || read_common(j, path, out)) goto done;
    rc = 0;
done:
    cJSON_Delete(j);
    return rc;
}

tt_err tt_hf_config_read(const char *dir, tt_hf_config *out)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return tt_errorf("%s: path too long", dir);
    size_t len;
    char *text = tt_read_file(path, 16u << 20, &len);
    if (!text) return -1;
    tt_err rc = tt_hf_config_parse(text, len, path, out);
    free(text);
    return rc;
}

tt_err tt_hf_family_check(tt_hf_family f, const tt_model_cfg *m, const tt_model_ext *x)
{
    const hf_spec *s = spec_of(f);
    if (!s) return tt_errorf("no Hugging Face class for family %d", (int)f);
    return s->check(s, m, x);
}

tt_hf_family tt_hf_family_for(const tt_model_cfg *m, const tt_model_ext *x)
{
    char why[512] = "";
    for (int i = 0; i < N_SPECS; i++) {
        if (specs[i].check(&specs[i], m, x) == 0) return specs[i].family;
        /* the reason of the first class of the model's kind (dense or MoE, its architecture) */
        if (!why[0] && specs[i].arch == m->arch && !(specs[i].features & F_MOE) == !m->moe.n_experts)
            snprintf(why, sizeof why, "%s", tt_last_error());
    }
    tt_errorf("no supported Hugging Face architecture can express this model (a %s with these options)%s%s",
              tt_arch_name(m->arch), why[0] ? "; the nearest: " : "", why);
    return TT_HF_AUTO;
}

char *tt_hf_config_to_json(const tt_hf_config *c)
{
    tt_hf_family f = c->family == TT_HF_AUTO ? tt_hf_family_for(&c->model, &c->ext) : c->family;
    const hf_spec *s = spec_of(f);
    if (!s || s->check(s, &c->model, &c->ext)) {
        if (!s && f != TT_HF_AUTO) tt_errorf("no Hugging Face class for family %d", (int)f);
        return NULL;
    }
    cJSON *j = cJSON_CreateObject();
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(s->architecture));
    cJSON_AddStringToObject(j, "model_type", s->model_type);
    if (s->write(s, c, j)) {
        cJSON_Delete(j);
        return NULL;
    }
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(j, "bos_token_id", c->bos_token_id);
    if (c->has_pad && c->pad_token_id >= 0) cJSON_AddNumberToObject(j, "pad_token_id", c->pad_token_id);
    else if (c->has_pad) cJSON_AddNullToObject(j, "pad_token_id");
    if (c->n_eos == 1) cJSON_AddNumberToObject(j, "eos_token_id", c->eos_token_ids[0]);
    else if (c->n_eos > 1) cJSON_AddItemToObject(j, "eos_token_id", cJSON_CreateIntArray(c->eos_token_ids, c->n_eos));
    /* the dtype export writes the weights in: bfloat16, or (anything else) float32 */
    cJSON_AddStringToObject(j, "torch_dtype", strcmp(c->torch_dtype, "bfloat16") ? "float32" : "bfloat16");
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) tt_errorf("out of memory writing config.json");
    return text;
}

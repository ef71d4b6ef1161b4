/* rope.h — RoPE's inverse frequencies and cos/sin scale: model math, computed
 * in fp32 exactly as Hugging Face transformers does. The rope op takes the
 * frequencies as a graph constant, so backends never compute them. */
#ifndef TT_MODELS_ROPE_H
#define TT_MODELS_ROPE_H

/* RoPE inverse frequencies (hd/2 floats), computed in fp32 as transformers
 * does (modeling_rope_utils.py): inv_freq[i] = 1 / theta^(2i/hd), then llama3
 * scaling when `llama3` is set (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings), as in _compute_llama3_parameters. */
typedef struct {
    double theta;
    int llama3;                 /* 1 = apply llama3 scaling below */
    double factor, low_freq_factor, high_freq_factor;
    int original_max_pos;
} tt_rope_params;
void tt_rope_inv_freq(const tt_rope_params *p, int hd, float *inv_freq);

/* The other scalings of transformers' rope_type: "linear" (inv_freq / factor)
 * and "yarn" (_compute_yarn_parameters), both reading factor and, for YaRN,
 * original_max_pos from tt_rope_params (whose llama3 stays 0). Kept apart
 * because tt_rope_params is built with positional initialisers elsewhere. */
#define TT_ROPE_MAX_FACTORS 256 /* LongRoPE's factors: one per rotated pair, heads of up to 512 rotated features */
typedef struct {
    int linear;                 /* 1 = linear scaling */
    int yarn;                   /* 1 = YaRN */
    double beta_fast, beta_slow;/* YaRN ramp bounds in rotations; 0 = transformers' 32 and 1 */
    int yarn_no_truncate;       /* YaRN "truncate": false keeps fractional ramp bounds */
    double attention_factor;    /* cos/sin multiplier; 0 = the type's default */
    double mscale_all_dim;      /* YaRN (DeepSeek): MLA's scores times (0.1 mscale_all_dim ln(factor) + 1)^2; 0 = none */
    /* LongRoPE (Phi-3, rope_type "longrope"): inv_freq[i] = 1 / (f[i] theta^(2i/dim)), f the short factors while
     * the positions a graph sees fit original_max_pos, the long ones past it; attention_factor scales cos/sin */
    int longrope;
    float short_factor[TT_ROPE_MAX_FACTORS], long_factor[TT_ROPE_MAX_FACTORS];
} tt_rope_ext;
/* x may be NULL (then this is tt_rope_inv_freq). hd: the features that rotate (the head's, or fewer under partial
 * rotary); LongRoPE takes its short factors here. */
void tt_rope_inv_freq_ext(const tt_rope_params *p, const tt_rope_ext *x, int hd, float *inv_freq);
/* The same for a graph whose positions run up to `positions`: LongRoPE's long factors past original_max_pos, as
 * transformers picks them for a forward whose last position + 1 exceeds it. */
void tt_rope_inv_freq_at(const tt_rope_params *p, const tt_rope_ext *x, int hd, long positions, float *inv_freq);
/* The multiplier of cos and sin: x->attention_factor when set, else for YaRN
 * 0.1 ln(factor) + 1 (factor > 1), else 1. x may be NULL. */
double tt_rope_attention_scale(const tt_rope_params *p, const tt_rope_ext *x);

#endif

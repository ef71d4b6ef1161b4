/* model.h — a model: its shape config, its parameters laid out unit by unit
 * (a unit being one transformer block, the embeddings or the head, each one
 * contiguous range of the model's flat layout), and the forward builder of
 * its architecture. A model holds no weights: where they live (host memory,
 * a backend's buffers, shards of them) is the caller's, and the graph sees
 * each parameter as a view of its unit. Models know nothing of backends,
 * passes or training: they only build a forward graph. */
#ifndef TT_MODEL_H
#define TT_MODEL_H

#include "models/rope.h"
#include "ops/ops.h"

typedef enum { TT_ARCH_LLAMA = 0, TT_ARCH_GPT2, TT_ARCH_COUNT } tt_arch_id;

/* Layers whose sliding window can be switched off one by one (full_attention),
 * and whose MLP can be kept dense one by one (mlp_only). */
#define TT_MODEL_MAX_LAYERS 512

/* Mixture-of-Experts: n_experts > 0 replaces the SwiGLU MLP of each MoE
 * layer by a router, n_experts SwiGLU experts of width ffn_dim (each token
 * through top_k of them) and n_shared shared experts; all zero: dense. */
typedef struct {
    int n_experts, top_k, ffn_dim;
    int n_shared;        /* shared experts: one SwiGLU shared_ffn wide (0: none) */
    int shared_ffn;      /* its width: n_shared * ffn_dim natively, Qwen2-MoE's shared_expert_intermediate_size */
    int n_dense_layers;  /* the first layers keep the dense MLP */
    int sparse_step;     /* after them, layer l is MoE when (l + 1) % sparse_step == 0 (0 = 1) */
    int score_func;      /* tt_score_func */
    int route_norm, score_before, n_group, topk_group;
    double route_scale;
    int has_bias;        /* a selection bias per expert (the balancing state, DeepSeek's e_score_correction_bias) */
    int shared_gate;     /* the shared experts' output times sigmoid(x . gate) (Qwen2-MoE) */
    /* auxiliary losses of each MoE layer, built when the forward is given an aux_scale (training) */
    double aux_coef, z_coef; /* load balancing (Switch/Mixtral; per sequence when aux_seq) and router z-loss */
    int aux_seq;
    unsigned char mlp_only[TT_MODEL_MAX_LAYERS]; /* 1: layer l keeps the dense MLP (Qwen-MoE's mlp_only_layers) */
    /* GPT-OSS: a trained bias on the router's logits (router_bias), biases on each expert's gate/up and down
     * projections (expert_biases), and for swiglu_limit > 0 the clamped SwiGLU (clamp(up, -limit, limit) + 1) g
     * sigmoid(swiglu_alpha g), g = min(gate, limit), in place of silu(gate) up */
    int router_bias, expert_biases;
    double swiglu_alpha, swiglu_limit;
} tt_moe_cfg;

/* Multi-head Latent Attention (DeepSeek-V2/V3): kv_lora_rank > 0 replaces
 * q/k/v by low-rank projections. Queries: x -> (q_lora_rank, normed) -> H
 * heads of qk_nope + qk_rope (q_lora_rank 0: one projection); keys and values:
 * x -> kv_lora_rank (normed) -> H heads of qk_nope key and v_head value
 * columns, plus one RoPE key part of qk_rope shared by every head. RoPE acts
 * on the qk_rope parts (head_dim is qk_rope), interleaved pairs when
 * rope_interleave. The attention ops take values of their own width. */
typedef struct {
    int q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head;
    int rope_interleave;
} tt_mla_cfg;

typedef struct {
    tt_arch_id arch;
    int dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, max_seq_len;
    double norm_eps;
    tt_rope_params rope;
    int tie_embeddings, qkv_bias, qk_norm, window; /* window: sliding-window size, 0 = none */
    tt_moe_cfg moe;
    tt_mla_cfg mla;
} tt_model_cfg;

/* The attention's query/key and value widths of a head (head_dim both, or MLA's qk_nope + qk_rope and v_head),
 * the heads keys and values have, and the queries' and keys' width the attention ops get (qk, padded to v when
 * the values are wider); the KV cache holds kv_heads x hd key and kv_heads x v value columns a position */
typedef struct {
    int qk, v, kv_heads, hd;
} tt_attn_dims;
tt_attn_dims tt_model_attn_dims(const tt_model_cfg *c);

/* The expert row offsets of an MoE layer's routed experts are named so that
 * the trainer can read the load (tt_moe_is_offsets finds them). */
void tt_moe_name_offsets(tt_value *offsets);
int tt_moe_is_offsets(const tt_value *v);
void tt_moe_name_aux_loss(tt_value *loss);
int tt_moe_is_aux_loss(const tt_value *v);
/* Whether layer l's MLP is a Mixture-of-Experts. */
int tt_model_layer_is_moe(const tt_model_cfg *c, int layer);
/* Whether any layer's is, in time that does not grow with n_layers (a config's num_hidden_layers can
 * be any int, and is checked against memory only later). */
int tt_model_has_moe_layer(const tt_model_cfg *c);


/* What Hugging Face models add to tt_model_cfg. A separate struct because
 * tt_model_cfg is built with positional initialisers elsewhere; all zero is
 * the plain model of tt_model_cfg. */
typedef struct {
    int o_bias;        /* the attention output projection has a bias (Llama/Qwen3 attention_bias) */
    int mlp_bias;      /* gate, up and down projections have biases (Llama's mlp_bias) */
    int hf_mixtral;    /* MoE tensors under Mixtral's names (block_sparse_moe, w1/w3/w2) */
    int qk_norm_full;  /* with cfg.qk_norm: one RMSNorm over all of q and all of k, not per head (OLMoE) */
    int hf_packed_experts; /* the checkpoint packs each layer's experts: mlp.experts.gate_up_proj (E, 2I, H) and
                              mlp.experts.down_proj (E, H, I) (transformers 5), not one tensor per expert */
    tt_rope_ext rope;  /* linear and YaRN RoPE scaling */
    int n_mtp_layers;  /* DeepSeek's multi-token-prediction layers in the checkpoint (after the last layer): skipped */
    int post_norms;    /* OLMo 2: no norm before a branch, an RMSNorm on the branch's output before the residual add
                          (attention_norm and ffn_norm are those) */
    /* Granite 3's multipliers (0: none): the embeddings times embed_mult, each branch's output times
     * residual_mult before its add, the attention scores times attn_mult (in place of 1 / sqrt(head_dim)), and the
     * final hidden state (so the logits) divided by logits_div */
    double embed_mult, residual_mult, attn_mult, logits_div;
    /* Gemma 3's block: RMSNorms that scale by (1 + w), norms both before and after each branch, GeGLU (gelu tanh)
     * in the MLP, the embeddings times sqrt(dim), the scores times query_pre_attn_scalar^-1/2, and on its sliding
     * layers RoPE of base rope_local_theta (the full layers take cfg.rope and ext.rope) */
    int gemma;
    double query_pre_attn_scalar, rope_local_theta;
    /* Gemma 2's tanh soft-capping (0: none): each attention score s becomes attn_softcap * tanh(s / attn_softcap)
     * before the softmax, each logit z final_softcap * tanh(z / final_softcap) */
    double attn_softcap, final_softcap;
    int rope_rot;      /* partial rotary (Phi-3's partial_rotary_factor): a head's first rope_rot features rotate; 0 = all */
    int hf_phi3;       /* Phi-3's names: q, k, v as rows of one qkv_proj, gate and up of one gate_up_proj */
    int attn_sinks;    /* GPT-OSS: a learned sink logit a head in each attention row's softmax (attention.sinks) */
    int hf_mxfp4;      /* GPT-OSS's MXFP4 checkpoints: its experts as <name>_blocks and <name>_scales, dequantized to
                          bf16 on load (an export writes them unquantized) */
    int hf_gpt_oss;    /* GPT-OSS's names: the router as mlp.router, each layer's experts packed in (E, D, 2F)
                          gate_up_proj with gate and up columns interleaved, (E, F, D) down_proj, and their biases */
    int hf_vlm;        /* the checkpoint is a Gemma3ForConditionalGeneration's: the language model's weights under
                          language_model. (or model.language_model.), the vision tower's and projector's skipped */
    /* 1 = layer l applies no RoPE (SmolLM3's no_rope_layers 0); layers past TT_MODEL_MAX_LAYERS apply it */
    unsigned char no_rope[TT_MODEL_MAX_LAYERS];
    /* 1 = layer l attends to all earlier keys even when cfg.window > 0 (Qwen2/3's
     * layers below max_window_layers); layers past TT_MODEL_MAX_LAYERS use the window. */
    unsigned char full_attention[TT_MODEL_MAX_LAYERS];
} tt_model_ext;

/* "MoE layers 1-5 of 6: 8 experts of 768, top-2, softmax, renormalised; 1 shared of 768; 19.2M of 43.1M
 * parameters active" (empty for a dense model): the run log and titan plan. The counts take x's extras (biases,
 * sinks: none when NULL). */
void tt_model_moe_describe(const tt_model_cfg *c, const tt_model_ext *x, char *buf, size_t cap);

/* The sliding window of layer l: 0 (none) or c->window. x may be NULL. */
int tt_model_layer_window(const tt_model_cfg *c, const tt_model_ext *x, int layer);

/* TT_INIT_UNIFORM: uniform in [-std, std) (LoRA's A, Kaiming-uniform as PEFT draws it) */
typedef enum { TT_INIT_NORMAL, TT_INIT_ONES, TT_INIT_ZEROS, TT_INIT_UNIFORM } tt_init_kind;

typedef struct {
    char name[96];
    int ndim;
    int64_t shape[2];
    int unit;          /* 0 = embeddings, 1..L = blocks, L+1 = final norm + head */
    int64_t offset;    /* its first element in the model's flat layout */
    int no_decay;      /* norms and biases get no weight decay */
    int embedding_only;/* an input lookup table that does no matmul (for FLOPs) */
    int routed;        /* a routed expert's weight: top_k / n_experts of them work per token (for FLOPs) */
    int expert;        /* the routed expert it belongs to (routed weights only) */
    tt_init_kind init;
    double std;
} tt_param;

static inline int64_t tt_param_numel(const tt_param *p) { return tt_numel(p->ndim, p->shape); }

/* The most ranges a unit's routed experts span (llama: gate/up, then down; GPT-OSS: their biases too). */
#define TT_MAX_EXPERT_RANGES 4

/* A unit: one contiguous range [offset, offset + numel) of the flat layout. */
typedef struct {
    char name[48];     /* "embeddings", "layers.3", "head" */
    int block;         /* a transformer block (activation checkpointing works on these) */
    int64_t offset, numel;
    int first_param;   /* the index of its first parameter (blocks differ in parameters: dense, MoE, MLA) */
    /* An MoE block's routed experts (n_experts > 0): n_expert_ranges ranges
     * of the flat layout, range r holding n_experts blocks of expert_numel[r]
     * elements from expert_offset[r], expert after expert. Expert
     * parallelism gives a rank the same consecutive experts' blocks of each. */
    int n_experts, n_expert_ranges;
    int64_t expert_offset[TT_MAX_EXPERT_RANGES], expert_numel[TT_MAX_EXPERT_RANGES];
} tt_unit;

typedef struct tt_model {
    tt_model_cfg cfg;
    tt_model_ext ext;
    int n_params, cap_params;
    tt_param *params;
    int n_units;
    tt_unit *units;
    size_t numel;       /* all parameters: the flat layout, unit after unit */
} tt_model;

/* Where a model's parameter values are, one parameter at a time in fp32 and
 * its own shape: host memory (tt_model_host_store), or the train state's
 * backend buffers, reached through copies. Loading and exporting Hugging Face
 * folders and checkpoints go through it. */
typedef struct tt_param_store {
    void *ctx;
    tt_err (*read)(void *ctx, const tt_model *m, int i, float *dst);
    tt_err (*write)(void *ctx, const tt_model *m, int i, const float *src);
} tt_param_store;
/* Parameters in host memory, in the flat layout (m->numel floats at flat). */
tt_param_store tt_model_host_store(float *flat);

/* Inputs of one forward: token ids, positions and document ids, all (B*T) i32. */
typedef struct {
    int B, T;
    tt_value *ids, *pos, *doc;
    /* generation: per-layer KV caches (B, Tmax, Hk*hd) and the start row */
    tt_value **cache_k, **cache_v, *start;
    /* training: (1) f32, the weight of this micro-batch's auxiliary losses (1 / micro-batches a step); NULL:
     * none are built. Each is a value named by tt_moe_name_aux_loss, a loss root for the step graph. */
    tt_value *aux_scale;
} tt_fwd_inputs;

/* Declare a model's parameters and lay them out (no weights are allocated). */
tt_model *tt_model_new(const tt_model_cfg *cfg);
/* The same with the Hugging Face extras (ext may be NULL). */
tt_model *tt_model_new_ext(const tt_model_cfg *cfg, const tt_model_ext *ext);
void tt_model_free(tt_model *m);
/* A model with like's config and units whose parameters declare() declares (tt_model_declare, in unit order; a
 * unit may get none): LoRA's adapters. Its architecture's forward and names are not its own: never build it. */
tt_model *tt_model_new_declared(const tt_model *like, tt_err (*declare)(tt_model *m, void *ctx), void *ctx);
/* The initial values of parameter i (normal, ones or zeros), one RNG stream
 * per parameter from seed: dst receives its numel floats. */
void tt_model_init_param(const tt_model *m, int i, uint64_t seed, float *dst);
/* Every parameter's initial values into a store. */
tt_err tt_model_init_weights(const tt_model *m, uint64_t seed, const tt_param_store *dst);
int tt_model_find(const tt_model *m, const char *name);
const char *tt_arch_name(tt_arch_id a);

/* Into a graph with no units yet: declare the model's units (graph unit k =
 * model unit k), make one root param value per unit (units[k], may be NULL:
 * f32 [numel], unbound) and every parameter as a view of its unit (vals has
 * n_params entries). */
tt_err tt_model_bind(tt_graph *g, const tt_model *m, tt_value **vals, tt_value **units);
/* Build the forward to the final hidden state (B*T, dim); *head receives the
 * output projection (V, dim) to use with tt_model_loss or tt_model_logits. */
tt_value *tt_model_forward(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                           tt_value **head);
/* The logits (N, V) of the final hidden state h and the head, soft-capped where the model caps them (Gemma 2) */
tt_value *tt_model_logits(tt_graph *g, const tt_model *m, tt_value *h, tt_value *head);
/* The loss over them without holding them: tt_ce_linear with the model's final soft-cap */
tt_value *tt_model_loss(tt_graph *g, const tt_model *m, tt_value *h, tt_value *head, tt_value *targets,
                        tt_value *scale, int ignore_index);

/* Parameter counts and the model FLOPs per token of DESIGN.md, from the
 * config alone (titan plan). matmul_params counts the parameters a token
 * multiplies by: of a routed expert's, top_k / n_experts (the active ones). */
int64_t tt_model_count_params(const tt_model_cfg *cfg, int64_t *matmul_params);
/* All parameters and the active ones (routed experts counted top_k / n_experts), ext's extras among them (none
 * when NULL). */
int64_t tt_model_count_active(const tt_model_cfg *cfg, const tt_model_ext *ext, int64_t *active);
double tt_model_flops_per_token(const tt_model_cfg *cfg, int seq_len);

/* ---- Hugging Face tensor names ---------------------------------------------
 * Where one titan parameter lives in a Hugging Face checkpoint. The HF tensor
 * is viewed as 2-D (R, C) (a 1-D one as (1, C)); titan's parameter is the
 * column block [part*C/n_parts, (part+1)*C/n_parts) of it, transposed when
 * `transpose` is set. GPT-2's Conv1D weights are stored (in, out): transposed.
 * Its fused c_attn (D, 3D) holds q, k, v as parts 0, 1, 2 of 3. */
typedef struct {
    char name[128];   /* e.g. "model.layers.3.self_attn.q_proj.weight" */
    int transpose;
    int part, n_parts;
    /* stacked: the HF tensor (hf_ndim dims, hf_shape) holds n_parts parameters one after another in its
     * element order, this one the part-th (packed experts: gate_up_proj (E, 2I, H) holds expert e's gate
     * as part 2e and its up as part 2e+1; down_proj (E, H, I) its down as part e) */
    int stacked, hf_ndim;
    int64_t hf_shape[3];
    /* hf_rows > 0: the HF tensor is (hf_rows, C) (1-D: hf_rows) and the parameter its rows [row0, row0 + rows),
     * part `part` of n_parts of unequal sizes (Phi-3's qkv_proj under grouped-query attention, gate_up_proj) */
    int64_t row0, hf_rows;
    /* stacked with ilv > 1 (GPT-OSS's gate_up_proj): the parameters' values interleave, ilv of them in turn along
     * the tensor's last axis, part p the (p % ilv)-th of block p / ilv; with transpose a 2-D parameter (r, c) sits
     * at its block's [c][r] (the blocks (in, out), as GPT-OSS stores its experts) */
    int ilv;
} tt_hf_slot;

/* The slot of parameter i; -1 + error if the architecture has no HF form. */
tt_err tt_model_hf_slot(const tt_model *m, int i, tt_hf_slot *out);
/* The prefix an HF checkpoint may leave out (GPT-2's "transformer."), or NULL. */
const char *tt_model_hf_optional_prefix(const tt_model *m);
/* Whether an HF tensor that maps to no parameter is a known non-weight that
 * loaders skip: GPT-2's attn.bias / attn.masked_bias masks, rotary_emb.inv_freq,
 * and lm_head.weight of a tied model (name without the optional prefix). */
int tt_model_hf_ignorable(const tt_model *m, const char *name);

/* ---- for the architecture files ---------------------------------------- */
typedef struct tt_arch_impl {
    const char *name;
    tt_err (*declare)(tt_model *m);
    tt_value *(*forward)(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                         tt_value **head);
    tt_err (*hf_slot)(const tt_model *m, int i, tt_hf_slot *out);
    const char *hf_optional_prefix;
    int (*hf_ignorable)(const tt_model *m, const char *name);
} tt_arch_impl;
extern const tt_arch_impl tt_arch_llama, tt_arch_gpt2;
tt_err tt_model_declare(tt_model *m, int unit, const char *name, int ndim, const int64_t *shape,
                        tt_init_kind init, double std, int no_decay);
/* inv_freq for RoPE as a graph constant (with the model's RoPE scaling), for a graph whose positions run up to
 * `positions` (LongRoPE's factors depend on it): rot/2 of them, rot the features of a head that rotate */
tt_value *tt_model_rope_table(tt_graph *g, const tt_model *m, long positions);
/* The same for any RoPE parameters (x may be NULL: plain RoPE of p's base) over rot features a head */
tt_value *tt_rope_table(tt_graph *g, const tt_rope_params *p, const tt_rope_ext *x, int rot, long positions);
/* The features of a head RoPE rotates: the head's, or partial rotary's first ext.rope_rot */
int tt_model_rope_rot(const tt_model *m);
#endif

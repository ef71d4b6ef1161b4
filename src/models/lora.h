/* lora.h — LoRA's adapters on a base model: which linear weights a target
 * list picks (PEFT's module names), the adapters as a model of their own
 * (A (r, in) and B (out, r) of every target, declared in the base's units so
 * that adapter unit k goes with base unit k), the frozen base's layout in its
 * storage dtypes, and merging an adapter into its base weight. */
#ifndef TT_LORA_H
#define TT_LORA_H

#include "models/model.h"

#define TT_LORA_MAX_TARGETS 32

/* What a run asks for (the [lora] keys, or an adapter's adapter_config.json) */
typedef struct {
    int rank;          /* r > 0 */
    double alpha;      /* the adapters' output is scaled by alpha / r (alpha / sqrt(r) with use_rslora) */
    double dropout;    /* on each adapter's input, in [0, 1) */
    int use_rslora;
    int all_linear;    /* every linear layer of the blocks, as PEFT's "all-linear" (the head excluded) */
    int n_targets;     /* otherwise: PEFT module names ("q_proj", "mlp.down_proj", ...) */
    char targets[TT_LORA_MAX_TARGETS][64];
} tt_lora_spec;

/* One adapted linear layer: a module of PEFT's, which may hold several of titan's weights (GPT-2's c_attn holds
 * q, k and v: one adapter, its B's rows theirs in order) */
typedef struct {
    int base;          /* its weight: a 2-D parameter (out, in) of the base model, the first of n_parts */
    int n_parts;       /* base .. base + n_parts - 1, consecutive parameters with one in */
    int a, b;          /* A (r, in) and B (sum of the parts' out, r): parameters of the adapter model */
    char module[128];  /* its Hugging Face module name: "model.layers.0.self_attn.q_proj" */
} tt_lora_target;

typedef struct {
    tt_model *adapters; /* A and B of every target; its units are the base's */
    int n_targets;
    tt_lora_target *targets;
    int rank;
    double scale, dropout;
} tt_lora;

/* The adapters of spec on base: every targeted linear weight of the base's
 * blocks. A target that matches nothing is refused with the module names
 * that exist; a routed expert's weight is refused by name. */
tt_err tt_lora_new(const tt_model *base, const tt_lora_spec *spec, tt_lora *out);
void tt_lora_free(tt_lora *l);
/* The factor of an adapter's output: alpha / r, or alpha / sqrt(r) */
double tt_lora_scale(const tt_lora_spec *spec);
/* The last component of a module name ("q_proj" of "model.layers.0.self_attn.q_proj") */
const char *tt_lora_module_leaf(const char *module);
/* The target of base parameter i, or -1; *row0 (may be NULL) receives the first row of B that is i's */
int tt_lora_target_of(const tt_lora *l, const tt_model *base, int base_param, int64_t *row0);
/* The Hugging Face module name of base parameter i (its tensor name without ".weight"). *adaptable: 1 when it is
 * a linear layer's weight in a block that LoRA may adapt, with *parts (may be NULL) the parameters its module
 * holds from i on (3 for GPT-2's c_attn, whose q is i); 0 when it is not (the embeddings, the head, a later part
 * of a fused module); -2 for a routed expert's weight, -1 for one of several weights stacked in one tensor. */
tt_err tt_lora_module_name(const tt_model *base, int i, char *module, size_t cap, int *adaptable, int *parts);

/* The frozen base's storage: the linear weights of the blocks in dtype (bf16 halves them), everything else fp32
 * (the embeddings, norms, biases and head, which the kernels read as fp32); each parameter at a 64-byte aligned
 * byte offset of its unit, each unit a range of one buffer. */
typedef struct {
    tt_dtype *dtype;      /* per base parameter */
    size_t *offset;       /* per base parameter: bytes from its unit's start */
    size_t *unit_offset;  /* per unit: bytes from the buffer's start */
    size_t *unit_bytes;   /* per unit */
    size_t bytes;         /* the whole buffer */
} tt_frozen_layout;
tt_err tt_frozen_layout_new(const tt_model *base, tt_dtype linear_dtype, tt_frozen_layout *out);
void tt_frozen_layout_free(tt_frozen_layout *l);

/* Into a graph with no units yet: the base's units, each a frozen root laid out as fl says (views in their
 * dtypes), and the adapters' units, each a trained root (NULL where a unit has no adapter; f32, the flat layout);
 * graph unit k is base unit k and adapter unit k. base_vals (base n_params), adapter_vals (adapter n_params) and
 * the roots (n_units each, may be NULL) receive the values. */
tt_err tt_lora_bind(tt_graph *g, const tt_model *base, const tt_frozen_layout *fl, const tt_lora *l,
                    tt_value **base_vals, tt_value **base_units, tt_value **adapter_vals, tt_value **adapter_units);

/* Model FLOPs a token of a LoRA step: the model's (fpt, 6 N + attention) less the frozen weights' gradient
 * products (2 a matmul parameter), plus the adapters' own 6 a parameter (their products for x A^T and u B^T) */
double tt_lora_flops_per_token(double fpt, int64_t matmul_params, int64_t adapter_params);

/* W (out, in) += scale B (out, r) A (r, in): an adapter merged into its weight, in fp32 */
void tt_lora_merge(float *W, const float *A, const float *B, int64_t out, int64_t in, int r, double scale);
#endif

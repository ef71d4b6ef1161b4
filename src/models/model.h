/* model.h — a model: its shape config, its parameters (one contiguous buffer
 * per unit, a unit being one transformer block or the embeddings/head), and
 * the forward builder of its architecture. Models know nothing of backends,
 * passes or training: they only build a forward graph. */
#ifndef TT_MODEL_H
#define TT_MODEL_H

#include "backend/cpu/kernels.h" /* tt_rope_params */
#include "ops/ops.h"

typedef enum { TT_ARCH_LLAMA = 0, TT_ARCH_GPT2, TT_ARCH_COUNT } tt_arch_id;

typedef struct {
    tt_arch_id arch;
    int dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, max_seq_len;
    double norm_eps;
    tt_rope_params rope;
    int tie_embeddings, qkv_bias, qk_norm, window;
} tt_model_cfg;

typedef enum { TT_INIT_NORMAL, TT_INIT_ONES, TT_INIT_ZEROS } tt_init_kind;

typedef struct {
    tt_tensor t;
    int unit;          /* 0 = embeddings, 1..L = blocks, L+1 = final norm + head */
    int no_decay;      /* norms and biases get no weight decay */
    int embedding_only;/* an input lookup table that does no matmul (for FLOPs) */
    tt_init_kind init;
    double std;
} tt_param;

typedef struct tt_model {
    tt_model_cfg cfg;
    int n_params, cap_params;
    tt_param *params;
    float *storage;     /* all parameters, unit after unit */
    size_t numel;
} tt_model;

/* Inputs of one forward: token ids, positions and document ids, all (B*T) i32. */
typedef struct {
    int B, T;
    tt_value *ids, *pos, *doc;
    /* generation: per-layer KV caches (B, Tmax, Hk*hd) and the start row */
    tt_value **cache_k, **cache_v, *start;
} tt_fwd_inputs;

tt_model *tt_model_new(const tt_model_cfg *cfg);
void tt_model_free(tt_model *m);
void tt_model_init_weights(tt_model *m, uint64_t seed);
int tt_model_find(const tt_model *m, const char *name);
const char *tt_arch_name(tt_arch_id a);

/* Bind every parameter as a graph value (vals has n_params entries). */
tt_err tt_model_bind(tt_graph *g, const tt_model *m, tt_value **vals);
/* Build the forward to the final hidden state (B*T, dim); *head receives the
 * output projection (V, dim) to use with tt_ce_linear or tt_linear. */
tt_value *tt_model_forward(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                           tt_value **head);

/* Parameter counts and the model FLOPs per token of DESIGN.md. These work
 * from the config alone, without allocating (titan plan). */
/* Declare the parameters (names, shapes) without allocating storage;
 * free(m->params) after. */
tt_err tt_model_declare_only(const tt_model_cfg *cfg, tt_model *m);
int64_t tt_model_count_params(const tt_model_cfg *cfg, int64_t *matmul_params);
double tt_model_flops_per_token(const tt_model_cfg *cfg, int seq_len);

/* ---- for the architecture files ---------------------------------------- */
typedef struct tt_arch_impl {
    const char *name;
    tt_err (*declare)(tt_model *m);
    tt_value *(*forward)(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                         tt_value **head);
} tt_arch_impl;
extern const tt_arch_impl tt_arch_llama, tt_arch_gpt2;
tt_err tt_model_declare(tt_model *m, int unit, const char *name, int ndim, const int64_t *shape,
                        tt_init_kind init, double std, int no_decay);
/* inv_freq for RoPE as a graph constant */
tt_value *tt_model_rope_table(tt_graph *g, const tt_model_cfg *c);
#endif

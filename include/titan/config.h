/* config.h — the run configuration: one struct with TorchTitan's sections, read
 * from a TOML recipe, overridden on the command line, resolved against a model flavor. */
#ifndef TITAN_CONFIG_H
#define TITAN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "titan/modes.h" /* tt_exec_mode, tt_ac_mode */
#include "titan/titan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_CONFIG_PATH_MAX 1024   /* capacity of path and text keys, NUL included */
#define TT_CONFIG_PROMPT_MAX 4096 /* capacity of generate.prompt */
#define TT_CONFIG_NAME_MAX 64     /* capacity of model.flavor */
#define TT_CONFIG_MAX_KEYS 160    /* capacity of the explicitly-set flags */

/* Enum keys: the C value is the index of the name in the key's allowed list (training.exec_mode
 * and activation_checkpoint.mode: titan/modes.h). */
typedef enum { TT_MODEL_LLAMA = 0, TT_MODEL_GPT2 } tt_model_name;               /* "llama" "gpt2" */
typedef enum { TT_ROPE_SCALING_NONE = 0, TT_ROPE_SCALING_LLAMA3 } tt_rope_scaling; /* "none" "llama3" */
typedef enum { TT_TOKENIZER_BYTE = 0 } tt_tokenizer_kind;                        /* "byte" */
typedef enum { TT_PARAM_FLOAT32 = 0, TT_PARAM_BFLOAT16 } tt_param_dtype;         /* "float32" "bfloat16" */
typedef enum { TT_OPTIMIZER_ADAMW = 0 } tt_optimizer_name;                       /* "AdamW" */
typedef enum { TT_LR_DECAY_LINEAR = 0, TT_LR_DECAY_SQRT, TT_LR_DECAY_COSINE } tt_decay_type; /* "linear" ... */
/* parallelism.fsdp_reshard_after_forward: free a unit's gathered weights after its forward */
typedef enum { TT_RESHARD_DEFAULT = 0, TT_RESHARD_ALWAYS, TT_RESHARD_NEVER } tt_reshard_mode; /* "default" ... */
typedef enum { TT_FAULT_EXIT = 0, TT_FAULT_HANG, TT_FAULT_NAN, TT_FAULT_SLOW_SAVE, TT_FAULT_NAN_GRAD } tt_fault_kind;
/* "exit" "hang" "nan" "slow_save" "nan_grad" */
/* model.score_func: how the router turns logits into scores */
typedef enum { TT_SCORE_FUNC_SOFTMAX = 0, TT_SCORE_FUNC_SIGMOID } tt_score_func_name; /* "softmax" "sigmoid" */
/* checkpoint.export_dtype: the dtype of a Hugging Face export's weights; auto (also "") = the source folder's */
typedef enum { TT_EXPORT_DTYPE_AUTO = 0, TT_EXPORT_DTYPE_FLOAT32, TT_EXPORT_DTYPE_BFLOAT16 } tt_export_dtype; /* "auto" ... */

typedef struct tt_job_config {
    char dump_folder[TT_CONFIG_PATH_MAX]; /* checkpoints, logs and metrics go under it */
    char description[TT_CONFIG_PATH_MAX];
} tt_job_config;

/* The shape keys (dim .. max_seq_len) come from the flavor unless set explicitly. */
typedef struct tt_model_config {
    tt_model_name name;
    char flavor[TT_CONFIG_NAME_MAX];
    int dim, n_layers, n_heads, n_kv_heads;
    int head_dim;   /* 0 before tt_config_finalize = dim / n_heads; always set after it */
    int ffn_dim;    /* hidden size of the MLP (SwiGLU for llama, GELU for gpt2) */
    int vocab_size; /* embedding rows; may exceed the tokenizer's vocabulary (padding) */
    double norm_eps, rope_theta;
    tt_rope_scaling rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
    bool tie_embeddings, qkv_bias, qk_norm;
    /* the dense families' own blocks (Hugging Face folders give them through config.json): OLMo 2's
     * whole-projection q/k norms and norms after each branch, SmolLM3's layers without RoPE, Phi-3's partial
     * rotation, Granite's multipliers (0: none) */
    bool qk_norm_full, post_norms;
    int no_rope_interval;
    double partial_rotary_factor, embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
    int max_seq_len; /* context length; gpt2's learned position table has this many rows */
    /* Mixture-of-Experts (TorchTitan's MoE arguments): num_experts > 0 replaces the MLP of each
     * MoE layer (after n_dense_layers, every decoder_sparse_step-th) by routed experts */
    int num_experts, top_k, moe_ffn_dim, num_shared_experts, n_dense_layers, decoder_sparse_step;
    int num_expert_groups, num_limited_groups; /* group-limited routing (DeepSeek); 0 = none */
    tt_score_func_name score_func;
    bool route_norm, score_before_experts;
    double route_scale, load_balance_coeff;
    double router_aux_loss_coef, router_z_loss_coef; /* auxiliary losses, as extra loss roots; 0 = off */
    bool router_aux_loss_seq;                        /* the balance loss per sequence (DeepSeek-V3), not per batch */
    bool shared_expert_gate; /* a sigmoid gate on the shared experts' output (Qwen2-MoE; set by HF configs) */
    /* Multi-head Latent Attention (DeepSeek-V2/V3): kv_lora_rank > 0 turns it on */
    int q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    tt_tokenizer_kind tokenizer;
    char hf_assets_path[TT_CONFIG_PATH_MAX]; /* "" = none; else config.json + tokenizer.json from there */
} tt_model_config;

typedef struct tt_training_config {
    int steps;
    int64_t seed;
    int local_batch_size;
    int global_batch_size; /* -1 = local_batch_size x data-parallel ranks (no accumulation) */
    int seq_len;
    double max_norm; /* 0 = no gradient clipping */
    tt_param_dtype mixed_precision_param;
    tt_param_dtype mixed_precision_reduce; /* dtype of the gradients' reduce-scatter / all-reduce */
    /* "synthetic" = the built-in corpus, else a token shard path. After
     * tt_config_finalize, dataset_path names the same shard (or is ""). */
    char dataset[TT_CONFIG_PATH_MAX];
    char dataset_path[TT_CONFIG_PATH_MAX];
    tt_exec_mode exec_mode;
    char backend[32]; /* "cpu" or "ref" (the reference kernels); exec_mode debug runs on "ref" */
} tt_training_config;

/* The device mesh, as TorchTitan names it: replicate x shard ranks (HSDP;
 * FSDP is 1 x world, plain data parallel world x 1). Expert parallelism
 * splits each MoE layer's experts over expert_parallel_degree ranks of a
 * shard group (which it must divide); tensor, pipeline and context
 * parallelism do not exist yet: their degrees must be 1. */
typedef struct tt_parallelism_config {
    int data_parallel_replicate_degree;
    int data_parallel_shard_degree; /* -1 = the rest of the world */
    tt_reshard_mode fsdp_reshard_after_forward;
    int64_t fsdp_bucket_bytes; /* 0 = one collective per unit; units smaller than this merge */
    int tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree, expert_parallel_degree;
    double expert_receive_factor; /* a rank's token receive buffer: this many times its own tokens (0: worst case) */
} tt_parallelism_config;

/* Communication between ranks; the fault keys exist for tests only. */
typedef struct tt_comm_config {
    double timeout_seconds; /* a collective not complete after this ends the job; 0 = never */
    int overlap;            /* the FSDP schedule pass (false: each collective waited right after its start) */
    int fault_rank;         /* -1 = no fault */
    int fault_step;
    tt_fault_kind fault_kind;
} tt_comm_config;

typedef struct tt_synthetic_config {
    int64_t train_tokens, val_tokens;
    int64_t seed; /* corpus seed */
} tt_synthetic_config;

typedef struct tt_optimizer_config {
    tt_optimizer_name name;
    double lr, beta1, beta2, eps, weight_decay;
} tt_optimizer_config;

typedef struct tt_lr_scheduler_config {
    int warmup_steps;
    double decay_ratio;   /* meaningful only when has_decay_ratio */
    bool has_decay_ratio; /* false = decay over all steps after warmup (TorchTitan's None) */
    tt_decay_type decay_type;
    double min_lr_factor;
} tt_lr_scheduler_config;

typedef struct tt_validation_config {
    bool enable;
    int freq;
    int steps; /* -1 = the whole validation set */
    char dataset_path[TT_CONFIG_PATH_MAX]; /* "" = the training source's validation split */
    int local_batch_size; /* 0 before tt_config_finalize = training.local_batch_size */
} tt_validation_config;

typedef struct tt_checkpoint_config {
    bool enable;
    char folder[TT_CONFIG_PATH_MAX]; /* relative to job.dump_folder */
    int interval;
    int keep_latest_k; /* 0 = keep all */
    int load_step;     /* -1 = latest */
    bool fallback_to_previous; /* false: refuse a corrupt latest checkpoint */
    bool initial_load_in_hf;   /* a fresh run loads Hugging Face weights */
    char initial_load_path[TT_CONFIG_PATH_MAX]; /* "" = model.hf_assets_path */
    bool last_save_in_hf;      /* also export <dump_folder>/hf at the end */
    int hf_max_shard_mb;       /* 0 = one model.safetensors */
    tt_export_dtype export_dtype; /* auto: model.hf_assets_path's dtype when bfloat16, else float32 */
} tt_checkpoint_config;

/* TorchTitan's activation checkpointing: "full" keeps only each transformer
 * block's input and recomputes the block's forward in the backward;
 * "selective" keeps matmul and attention outputs and recomputes the cheap
 * ops between them (norms, RoPE, activations, adds). */
typedef struct tt_activation_checkpoint_config {
    tt_ac_mode mode;
} tt_activation_checkpoint_config;

/* LoRA (PEFT's names): rank > 0 trains low-rank adapters on a frozen base instead of the weights. */
typedef struct tt_lora_config {
    int rank;                                   /* 0 = off */
    double alpha, dropout;
    bool use_rslora;                            /* scale by alpha / sqrt(rank), not alpha / rank */
    char target_modules[TT_CONFIG_PATH_MAX];    /* comma-separated PEFT module names, or "all-linear" */
    char adapter_path[TT_CONFIG_PATH_MAX];      /* a PEFT adapter folder to start from ("" = new adapters) */
    int base_dtype;                             /* 0 float32, 1 bfloat16: the frozen base's linear weights */
} tt_lora_config;

typedef struct tt_metrics_config {
    int log_freq;
    double peak_tflops; /* 0 = the value measured (and cached) by `titan bench peak` */
    bool save_jsonl;
    bool enable_tensorboard;                 /* scalar event files for TensorBoard */
    char save_tb_folder[TT_CONFIG_PATH_MAX]; /* their folder, relative to job.dump_folder */
} tt_metrics_config;

/* TorchTitan's profiling keys: every profile_freq steps the loop times each
 * node of that step and writes a Chrome trace of it to
 * <job.dump_folder>/<save_traces_folder>/iteration_<step>/rank0_trace.json. */
typedef struct tt_profiling_config {
    bool enable_profiling;
    char save_traces_folder[TT_CONFIG_PATH_MAX]; /* relative to job.dump_folder, unless absolute */
    int profile_freq;
} tt_profiling_config;

typedef struct tt_generate_config {
    char prompt[TT_CONFIG_PROMPT_MAX];
    int max_new_tokens;
    double temperature; /* 0 = greedy */
    int top_k;          /* 0 = off */
    double top_p;       /* 1 = off */
    int64_t seed;
} tt_generate_config;

typedef struct tt_config {
    tt_job_config job;
    tt_model_config model;
    tt_training_config training;
    tt_parallelism_config parallelism;
    tt_comm_config comm;
    tt_synthetic_config synthetic;
    tt_optimizer_config optimizer;
    tt_lr_scheduler_config lr_scheduler;
    tt_validation_config validation;
    tt_checkpoint_config checkpoint;
    tt_activation_checkpoint_config activation_checkpoint;
    tt_lora_config lora;
    tt_metrics_config metrics;
    tt_profiling_config profiling;
    tt_generate_config generate;
    /* Private: which keys a file or the command line set (indexed by the key
     * registry). Explicit keys win over the flavor. Kept last so that
     * memcmp(a, b, offsetof(tt_config, set_by_user_)) compares values only. */
    unsigned char set_by_user_[TT_CONFIG_MAX_KEYS];
} tt_config;

/* Every key at its default (model shape from llama "debugmodel"), none set. */
void tt_config_defaults(tt_config *c);

/* Read a TOML recipe and set every key in it. Errors name the file and line:
 * "path:LINE: unknown key 'training.stpes' (did you mean 'training.steps'?)",
 * wrong types, out-of-range values, enum values (listing the allowed ones).
 * On error *c is unchanged. */
tt_err tt_config_load_file(tt_config *c, const char *path);
/* The same from text in memory; name stands for the file in messages. */
tt_err tt_config_load_string(tt_config *c, const char *text, size_t len, const char *name);

/* Set one key from text, parsed by the key's type: integers and floats as in
 * TOML (3e-3, 1_000), booleans true/false, strings and enums as given (no
 * quotes). "none" unsets an optional key (lr_scheduler.decay_ratio).
 * origin (e.g. "command line") starts any error message. */
tt_err tt_config_set(tt_config *c, const char *key, const char *value, const char *origin);

/* Command-line arguments after the subcommand (argv[0] is the first argument,
 * not the program). First "--config FILE" (or --config=FILE, or TorchTitan's
 * --job.config_file), then every "--section.key value" / "--section.key=value"
 * in order; a boolean key given with no value means true. Arguments that do
 * not start with '-', and everything after "--", go to rest[] (capacity argc)
 * with their count in *n_rest; with rest == NULL they are errors. Unknown flags
 * are errors naming the flag. On error *c is unchanged. */
tt_err tt_config_parse_args(tt_config *c, int argc, char **argv, int *n_rest, char **rest);

/* Call once after loading and overriding: applies model.flavor (keys set
 * explicitly win over the flavor's values; model.name follows the flavor when
 * not set, and each model has a default flavor), resolves head_dim,
 * validation.local_batch_size and training.dataset/dataset_path, then checks
 * the keys against each other (n_heads % n_kv_heads, dim % n_heads,
 * global_batch_size % local_batch_size, gpt2 seq_len <= max_seq_len, tensor,
 * pipeline, context and expert parallel degrees of 1, ...). The mesh's fit to
 * the world is checked when a run starts and the world is known. */
tt_err tt_config_finalize(tt_config *c);

/* The full configuration as TOML text that tt_config_load_string reads back to
 * the same values. Caller free()s it; NULL on out of memory. */
char *tt_config_to_toml(const tt_config *c);

/* One key's value as text (strings unquoted, enums by name); -1 if the key is
 * unknown or buf is too small. */
tt_err tt_config_get(const tt_config *c, const char *key, char *buf, size_t size);
/* true if a file or the command line set this key. */
bool tt_config_is_set(const tt_config *c, const char *key);
/* true if the command line (or tt_config_set) set this key, over any recipe file. */
bool tt_config_is_overridden(const tt_config *c, const char *key);
/* The name of the i-th key ("section.key", in the order --help lists them); NULL past the last. */
const char *tt_config_key_name(size_t i);

/* Every key with its type, allowed values or range, default and help, then
 * the model flavors. */
void tt_config_print_help(FILE *f);

#ifdef __cplusplus
}
#endif
#endif

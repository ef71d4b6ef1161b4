/* config.c — the run configuration: a table of every key (type, field, range,
 * default, help) drives loading TOML, command-line overrides, the flavor
 * merge, validation, printing back to TOML and the help text. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/core.h"
#include "formats/toml.h"
#include "config/flavors.h"
#include "titan/config.h"

/* ---- the key registry ------------------------------------------------------ */

typedef enum { K_INT, K_I64, K_FLOAT, K_BOOL, K_STRING, K_ENUM } key_type;

enum {
    LO_OPEN = 1,  /* value must be > lo (else >= lo) */
    HI_OPEN = 2,  /* value must be < hi (else <= hi) */
    FLAVOR = 4,   /* model shape key: the flavor supplies it unless set explicitly */
    NEG1 = 8,     /* -1 is also allowed (a special meaning, see help) */
    OPTIONAL = 16, /* may be unset (TorchTitan's None); has_off names the flag */
    HARDWARE = 32, /* unset, the default depends on the machine (the help says how); dflt is the fallback */
    LIST = 64      /* a string key that a TOML array of strings may set: its items, comma-separated */
};

typedef struct {
    const char *key; /* "section.key" */
    key_type type;
    size_t off, size; /* the field in tt_config */
    double lo, hi;    /* numeric range */
    unsigned flags;
    const char *const *choices; /* K_ENUM: allowed names, NULL-terminated; index = C value */
    const char *dflt;           /* default as command-line text; NULL = flavor or unset */
    const char *help;
    size_t has_off; /* OPTIONAL: offset of the bool "is set" field */
} cfg_key;

#define AT(f) offsetof(tt_config, f), sizeof(((tt_config *)0)->f)
#define BIG 1e9                  /* upper bound of counts that fit an int comfortably */
#define I64_BIG 9007199254740992.0 /* 2^53: every int64 below converts to double exactly */
#define INT_(k, f, lo, hi, fl, d, h) {k, K_INT, AT(f), lo, hi, fl, NULL, d, h, 0}
#define I64_(k, f, lo, hi, d, h) {k, K_I64, AT(f), lo, hi, 0, NULL, d, h, 0}
#define FLT_(k, f, lo, hi, fl, d, h) {k, K_FLOAT, AT(f), lo, hi, fl, NULL, d, h, 0}
#define BOOL_(k, f, fl, d, h) {k, K_BOOL, AT(f), 0, 1, fl, NULL, d, h, 0}
#define STR_(k, f, d, h) {k, K_STRING, AT(f), 0, 0, 0, NULL, d, h, 0}
#define LIST_(k, f, d, h) {k, K_STRING, AT(f), 0, 0, LIST, NULL, d, h, 0}
#define ENUM_(k, f, ch, fl, d, h) {k, K_ENUM, AT(f), 0, 0, fl, ch, d, h, 0}

static const char *const model_names[] = {"llama", "gpt2", NULL};
static const char *const rope_scalings[] = {"none", "llama3", NULL};
static const char *const tokenizers[] = {"byte", NULL};
static const char *const param_dtypes[] = {"float32", "bfloat16", NULL};
static const char *const exec_modes[] = {"graph", "eager", "debug", NULL};
static const char *const optimizers[] = {"AdamW", NULL};
static const char *const decay_types[] = {"linear", "sqrt", "cosine", NULL};
static const char *const ac_modes[] = {"none", "selective", "full", NULL};
static const char *const reshard_modes[] = {"default", "always", "never", NULL};
static const char *const fault_kinds[] = {"exit", "hang", "nan", "slow_save", "nan_grad", NULL};
static const char *const score_funcs[] = {"softmax", "sigmoid", NULL};
static const char *const export_dtypes[] = {"auto", "float32", "bfloat16", NULL}; /* "" also means auto */

/* The byte tokenizer: 256 byte values plus BOS and EOS. */
#define BYTE_TOKENIZER_VOCAB 258

/* Defaults are the default job's numbers (configs/default.toml), except that
 * validation and checkpointing are off unless a recipe turns them on. */
static const cfg_key keys[] = {
    STR_("job.dump_folder", job.dump_folder, "./outputs", "folder for checkpoints, logs and metrics"),
    STR_("job.description", job.description, "",
         "free text describing the run (logged at the start, and in summary.json)"),

    ENUM_("model.name", model.name, model_names, 0, "llama", "model family"),
    STR_("model.flavor", model.flavor, "debugmodel",
         "named shape preset (see the list below); model keys set explicitly override it"),
    INT_("model.dim", model.dim, 1, 1 << 20, FLAVOR, NULL, "model (embedding) width"),
    INT_("model.n_layers", model.n_layers, 1, 100000, FLAVOR, NULL, "transformer blocks"),
    INT_("model.n_heads", model.n_heads, 1, 1 << 16, FLAVOR, NULL, "attention (query) heads"),
    INT_("model.n_kv_heads", model.n_kv_heads, 1, 1 << 16, FLAVOR, NULL, "key/value heads (grouped-query attention)"),
    INT_("model.head_dim", model.head_dim, 0, 1 << 16, FLAVOR, NULL, "width of one head; 0 = dim / n_heads"),
    INT_("model.ffn_dim", model.ffn_dim, 1, 1 << 24, FLAVOR, NULL, "hidden width of the MLP"),
    INT_("model.vocab_size", model.vocab_size, 1, 1 << 24, FLAVOR, NULL,
         "embedding rows; may exceed the tokenizer's vocabulary (padding)"),
    FLT_("model.norm_eps", model.norm_eps, 0, 1, LO_OPEN | HI_OPEN | FLAVOR, NULL, "epsilon of RMSNorm / LayerNorm"),
    FLT_("model.rope_theta", model.rope_theta, 0, INFINITY, LO_OPEN | FLAVOR, NULL, "RoPE base frequency"),
    ENUM_("model.rope_scaling", model.rope_scaling, rope_scalings, FLAVOR, NULL,
          "RoPE frequency scaling for long context (Llama 3.1)"),
    FLT_("model.rope_factor", model.rope_factor, 1, 1e6, FLAVOR, NULL, "llama3 scaling: factor"),
    FLT_("model.rope_low_freq_factor", model.rope_low_freq_factor, 0, 1e6, LO_OPEN | FLAVOR, NULL,
         "llama3 scaling: low frequency factor"),
    FLT_("model.rope_high_freq_factor", model.rope_high_freq_factor, 0, 1e6, LO_OPEN | FLAVOR, NULL,
         "llama3 scaling: high frequency factor"),
    INT_("model.rope_original_max_position_embeddings", model.rope_original_max_position_embeddings, 1, BIG,
         FLAVOR, NULL, "llama3 scaling: context length before scaling"),
    BOOL_("model.tie_embeddings", model.tie_embeddings, FLAVOR, NULL, "output head shares the embedding table"),
    BOOL_("model.qkv_bias", model.qkv_bias, FLAVOR, NULL, "biases on the q/k/v projections (Qwen2)"),
    BOOL_("model.qk_norm", model.qk_norm, FLAVOR, NULL, "RMSNorm on queries and keys per head (Qwen3)"),
    BOOL_("model.qk_norm_full", model.qk_norm_full, FLAVOR, NULL,
          "with model.qk_norm: one RMSNorm over all of q and one over all of k, not one a head (OLMo 2, OLMoE)"),
    BOOL_("model.post_norms", model.post_norms, FLAVOR, NULL,
          "RMSNorm on each branch's output before the residual add, none on its input (OLMo 2)"),
    INT_("model.no_rope_interval", model.no_rope_interval, 0, 1 << 20, FLAVOR, NULL,
         "layers N, 2N, ... (counted from 1) apply no RoPE (SmolLM3's no_rope_layer_interval); 0 = all apply it"),
    FLT_("model.partial_rotary_factor", model.partial_rotary_factor, 0, 1, FLAVOR, NULL,
         "RoPE turns each head's first int(head_dim x this) features, an even number (Phi-3); 0 or 1 = all"),
    FLT_("model.embedding_multiplier", model.embedding_multiplier, 0, 1e6, FLAVOR, NULL,
         "the embeddings times this (Granite); 0 = none"),
    FLT_("model.residual_multiplier", model.residual_multiplier, 0, 1e6, FLAVOR, NULL,
         "each branch's output times this before its residual add (Granite); 0 = none"),
    FLT_("model.attention_multiplier", model.attention_multiplier, 0, 1e6, FLAVOR, NULL,
         "the attention scores times this instead of 1 / sqrt(head_dim) (Granite); 0 = 1 / sqrt(head_dim)"),
    FLT_("model.logits_scaling", model.logits_scaling, 0, 1e6, FLAVOR, NULL,
         "the logits divided by this (Granite); 0 = none"),
    INT_("model.max_seq_len", model.max_seq_len, 1, 1 << 24, FLAVOR, NULL,
         "context length; gpt2 learns this many positions"),
    INT_("model.num_experts", model.num_experts, 0, 1024, FLAVOR, NULL,
         "routed experts of each MoE layer (Mixture-of-Experts); 0 = a dense model"),
    INT_("model.top_k", model.top_k, 0, 1024, FLAVOR, NULL, "MoE: experts each token is routed to"),
    INT_("model.moe_ffn_dim", model.moe_ffn_dim, 0, 1 << 24, FLAVOR, NULL,
         "MoE: hidden width of each expert's SwiGLU; 0 = ffn_dim"),
    INT_("model.num_shared_experts", model.num_shared_experts, 0, 1024, FLAVOR, NULL,
         "MoE: shared experts every token passes through (one SwiGLU num_shared_experts x moe_ffn_dim wide)"),
    INT_("model.n_dense_layers", model.n_dense_layers, 0, 100000, FLAVOR, NULL,
         "MoE: the first layers keep the dense MLP (DeepSeek's first_k_dense_replace)"),
    INT_("model.decoder_sparse_step", model.decoder_sparse_step, 0, 100000, FLAVOR, NULL,
         "MoE: after the dense layers, layer l (from 0) is MoE when (l + 1) is a multiple of this; 0 = 1"),
    ENUM_("model.score_func", model.score_func, score_funcs, 0, "softmax",
          "MoE: router scores from its logits: softmax over the experts (Mixtral, Qwen) or sigmoid (DeepSeek-V3)"),
    BOOL_("model.route_norm", model.route_norm, 0, "true",
          "MoE: divide each token's top-k scores by their sum (HF's norm_topk_prob)"),
    FLT_("model.route_scale", model.route_scale, 0, 1e6, LO_OPEN, "1.0",
         "MoE: the gate weights times this (HF's routed_scaling_factor)"),
    BOOL_("model.score_before_experts", model.score_before_experts, 0, "false",
          "MoE: multiply each expert's input by its gate weight instead of its output (TorchTitan's default; "
          "Hugging Face models gate the output)"),
    FLT_("model.load_balance_coeff", model.load_balance_coeff, 0, 1, 0, "1e-3",
         "MoE: auxiliary-loss-free load balancing (DeepSeek-V3): after each optimizer step every expert's "
         "selection bias moves by this toward the mean load; 0 = off"),
    FLT_("model.router_aux_loss_coef", model.router_aux_loss_coef, 0, 1e6, 0, "0",
         "MoE: weight of the load-balancing loss of each MoE layer (Switch/Mixtral: num_experts x the sum over experts "
         "of the fraction of tokens routed to each times its mean score), an extra loss root per micro-batch; 0 = off"),
    BOOL_("model.router_aux_loss_seq", model.router_aux_loss_seq, 0, "false",
          "MoE: compute the load-balancing loss per sequence and average (DeepSeek-V3's sequence-wise variant)"),
    FLT_("model.router_z_loss_coef", model.router_z_loss_coef, 0, 1e6, 0, "0",
         "MoE: weight of the router z-loss (the mean squared logsumexp of each token's router logits); 0 = off"),
    INT_("model.kv_lora_rank", model.kv_lora_rank, 0, 1 << 20, FLAVOR, NULL,
         "Multi-head Latent Attention (DeepSeek-V3): the rank keys and values are compressed to; 0 = ordinary "
         "grouped-query attention"),
    INT_("model.q_lora_rank", model.q_lora_rank, 0, 1 << 20, FLAVOR, NULL,
         "MLA: the rank queries are compressed to; 0 = one query projection"),
    INT_("model.qk_nope_head_dim", model.qk_nope_head_dim, 0, 1 << 16, FLAVOR, NULL,
         "MLA: the query/key columns of a head without RoPE"),
    INT_("model.qk_rope_head_dim", model.qk_rope_head_dim, 0, 1 << 16, FLAVOR, NULL,
         "MLA: the query/key columns of a head with RoPE (the key's shared by all heads); head_dim becomes this"),
    INT_("model.v_head_dim", model.v_head_dim, 0, 1 << 16, FLAVOR, NULL, "MLA: the value columns of a head"),
    INT_("model.num_expert_groups", model.num_expert_groups, 0, 1024, 0, "0",
         "MoE: group-limited routing: the experts in this many groups, a token choosing among the best "
         "num_limited_groups (DeepSeek-V3's n_group); 0 = none"),
    INT_("model.num_limited_groups", model.num_limited_groups, 0, 1024, 0, "0",
         "MoE: groups a token may choose experts from (DeepSeek-V3's topk_group)"),
    ENUM_("model.tokenizer", model.tokenizer, tokenizers, 0, "byte", "tokenizer"),
    STR_("model.hf_assets_path", model.hf_assets_path, "",
         "Hugging Face model folder: the architecture comes from its config.json and the tokenizer from its "
         "tokenizer.json; over it the command line may give only model.max_seq_len, model.route_scale, "
         "model.load_balance_coeff and the router loss keys"),

    INT_("training.steps", training.steps, 1, BIG, 0, "600", "optimizer steps to train for"),
    I64_("training.seed", training.seed, 0, I64_BIG, "42", "seed of parameter init and data order"),
    INT_("training.local_batch_size", training.local_batch_size, 1, 1 << 20, 0, "16", "sequences per rank per micro-step"),
    INT_("training.global_batch_size", training.global_batch_size, 1, BIG, NEG1, "-1",
         "sequences per optimizer step (gradient accumulation); -1 = local x data-parallel ranks"),
    INT_("training.seq_len", training.seq_len, 1, 1 << 24, 0, "256", "tokens per sequence"),
    FLT_("training.max_norm", training.max_norm, 0, INFINITY, 0, "1.0", "gradient clipping norm; 0 = no clipping"),
    ENUM_("training.mixed_precision_param", training.mixed_precision_param, param_dtypes, HARDWARE, "float32",
          "compute dtype: bfloat16 = bf16 activations and products, fp32 master weights, optimizer state and "
          "sums; unset: the backend's default, on cpu bfloat16 where the CPU has bf16 dot products (AVX512_BF16), "
          "else float32, on ref float32"),
    ENUM_("training.mixed_precision_reduce", training.mixed_precision_reduce, param_dtypes, 0, "float32",
          "dtype in which the gradients are reduced across data-parallel ranks (reduce-scatter, all-reduce); "
          "bfloat16 halves the bytes sent, each combining step rounding to bf16"),
    STR_("training.dataset", training.dataset, "synthetic", "\"synthetic\" = the built-in corpus, else a token shard path"),
    STR_("training.dataset_path", training.dataset_path, "", "token shard path (TorchTitan's name); \"\" = unset"),
    ENUM_("training.exec_mode", training.exec_mode, exec_modes, 0, "graph",
          "graph = planned whole step, eager = op by op, debug = op by op on the ref backend + NaN/Inf checks"),
    STR_("training.backend", training.backend, "cpu",
         "where the step runs: cpu (titan's kernels) or ref (the naive reference kernels every backend is "
         "tested against)"),

    INT_("parallelism.data_parallel_replicate_degree", parallelism.data_parallel_replicate_degree, 1, BIG, 0, "1",
         "replicas of the model (HSDP's outer dimension): each holds the whole model, sharded over "
         "data_parallel_shard_degree ranks"),
    INT_("parallelism.data_parallel_shard_degree", parallelism.data_parallel_shard_degree, 1, BIG, NEG1, "-1",
         "ranks one replica's weights, gradients and optimizer state are sharded over (FSDP); -1 = the rest: "
         "the world divided by data_parallel_replicate_degree"),
    ENUM_("parallelism.fsdp_reshard_after_forward", parallelism.fsdp_reshard_after_forward, reshard_modes, 0,
          "default",
          "free each unit's gathered weights after its forward and gather them again for the backward: always, "
          "never (keep them: more memory, fewer all-gathers), default (as TorchTitan: always, except the last "
          "unit the forward uses, the head, whose backward follows at once)"),
    I64_("parallelism.fsdp_bucket_bytes", parallelism.fsdp_bucket_bytes, 0, I64_BIG, "0",
         "units smaller than this many bytes are merged into one all-gather and reduce-scatter; 0 = one "
         "collective per unit"),
    INT_("parallelism.tensor_parallel_degree", parallelism.tensor_parallel_degree, 1, BIG, 0, "1",
         "tensor parallelism: not in titan yet, must be 1"),
    INT_("parallelism.pipeline_parallel_degree", parallelism.pipeline_parallel_degree, 1, BIG, 0, "1",
         "pipeline parallelism: not in titan yet, must be 1"),
    INT_("parallelism.context_parallel_degree", parallelism.context_parallel_degree, 1, BIG, 0, "1",
         "context parallelism: not in titan yet, must be 1"),
    INT_("parallelism.expert_parallel_degree", parallelism.expert_parallel_degree, 1, BIG, 0, "1",
         "split each MoE layer's experts over this many ranks of a shard group, which exchange tokens with "
         "all-to-all (it must divide data_parallel_shard_degree and the experts; the experts are FSDP-sharded "
         "over the shard degree / this)"),
    FLT_("parallelism.expert_receive_factor", parallelism.expert_receive_factor, 0, 1e6, 0, "0",
         "under expert parallelism, a rank's buffer for the tokens it receives holds this many times its own "
         "token rows (a step that needs more stops with an error, never drops a token); 0 = the worst case, "
         "expert_parallel_degree times"),

    FLT_("comm.timeout_seconds", comm.timeout_seconds, 0, INFINITY, 0, "60",
         "a collective that does not complete in this many seconds ends the whole job (a dead or hung rank); "
         "a rank busy alone (writing a checkpoint or the export, sampling) reports progress, and a wait on it "
         "counts from its last report; 0 = wait forever"),
    BOOL_("comm.overlap", comm.overlap, 0, "true",
          "the schedule pass issues each unit's all-gather one unit ahead and waits for each reduction one "
          "unit later, so transfers run while kernels do; false waits for every collective right after it "
          "starts (to measure what the overlap hides)"),
    INT_("comm.fault_rank", comm.fault_rank, 0, BIG, NEG1, "-1",
         "for tests: the rank that fails at comm.fault_step as comm.fault_kind says; -1 = none"),
    INT_("comm.fault_step", comm.fault_step, 1, BIG, 0, "1", "for tests: the step at which comm.fault_rank fails"),
    ENUM_("comm.fault_kind", comm.fault_kind, fault_kinds, 0, "exit",
          "for tests: how comm.fault_rank fails: exit (the process ends), hang (it stops answering), nan (its "
          "loss is NaN), slow_save (its checkpoint of that step, and the closing export when it is the last, "
          "take 3 x comm.timeout_seconds while it keeps writing), nan_grad (the first element of its gradients is "
          "NaN when the optimizer step reads them)"),

    I64_("synthetic.train_tokens", synthetic.train_tokens, 1, I64_BIG, "4194304", "tokens in the synthetic training split"),
    I64_("synthetic.val_tokens", synthetic.val_tokens, 1, I64_BIG, "131072", "tokens in the synthetic validation split"),
    I64_("synthetic.seed", synthetic.seed, 0, I64_BIG, "1234", "seed of the synthetic corpus"),

    ENUM_("optimizer.name", optimizer.name, optimizers, 0, "AdamW", "optimizer"),
    FLT_("optimizer.lr", optimizer.lr, 0, INFINITY, LO_OPEN, "3e-3", "peak learning rate"),
    FLT_("optimizer.beta1", optimizer.beta1, 0, 1, HI_OPEN, "0.9", "AdamW beta1"),
    FLT_("optimizer.beta2", optimizer.beta2, 0, 1, HI_OPEN, "0.95", "AdamW beta2"),
    FLT_("optimizer.eps", optimizer.eps, 0, 1, LO_OPEN | HI_OPEN, "1e-8", "AdamW epsilon"),
    FLT_("optimizer.weight_decay", optimizer.weight_decay, 0, INFINITY, 0, "0.1", "decoupled weight decay"),

    INT_("lr_scheduler.warmup_steps", lr_scheduler.warmup_steps, 0, BIG, 0, "30", "linear warmup steps"),
    {"lr_scheduler.decay_ratio", K_FLOAT, AT(lr_scheduler.decay_ratio), 0, 1, OPTIONAL, NULL, NULL,
     "fraction of steps spent decaying (WSD); unset = all steps after warmup",
     offsetof(tt_config, lr_scheduler.has_decay_ratio)},
    ENUM_("lr_scheduler.decay_type", lr_scheduler.decay_type, decay_types, 0, "cosine", "shape of the decay"),
    FLT_("lr_scheduler.min_lr_factor", lr_scheduler.min_lr_factor, 0, 1, 0, "0.1", "final lr = lr x min_lr_factor"),

    BOOL_("validation.enable", validation.enable, 0, "false", "evaluate on the validation set during training"),
    INT_("validation.freq", validation.freq, 1, BIG, 0, "100", "validate every this many steps"),
    INT_("validation.steps", validation.steps, 1, BIG, NEG1, "-1", "batches per validation; -1 = the whole set"),
    STR_("validation.dataset_path", validation.dataset_path, "",
         "validation shard; \"\" = the training source's validation split"),
    INT_("validation.local_batch_size", validation.local_batch_size, 0, 1 << 20, 0, "0",
         "sequences per rank per batch; 0 = training.local_batch_size"),

    BOOL_("checkpoint.enable", checkpoint.enable, 0, "false", "save checkpoints and resume from the latest"),
    STR_("checkpoint.folder", checkpoint.folder, "checkpoint", "checkpoint folder, under job.dump_folder"),
    INT_("checkpoint.interval", checkpoint.interval, 1, BIG, 0, "200", "save every this many steps"),
    INT_("checkpoint.keep_latest_k", checkpoint.keep_latest_k, 0, BIG, 0, "2", "checkpoints to keep; 0 = all"),
    INT_("checkpoint.load_step", checkpoint.load_step, 0, BIG, NEG1, "-1", "step to resume from; -1 = latest"),
    BOOL_("checkpoint.fallback_to_previous", checkpoint.fallback_to_previous, 0, "false",
          "use an older checkpoint when the latest is corrupt (else refuse)"),
    BOOL_("checkpoint.initial_load_in_hf", checkpoint.initial_load_in_hf, 0, "false",
          "a fresh run starts from Hugging Face weights (checkpoint.initial_load_path, else model.hf_assets_path)"),
    STR_("checkpoint.initial_load_path", checkpoint.initial_load_path, "",
         "folder of the weights a fresh run starts from (with initial_load_in_hf)"),
    BOOL_("checkpoint.last_save_in_hf", checkpoint.last_save_in_hf, 0, "false",
          "at the end of training also write the model as a Hugging Face folder, <dump_folder>/hf"),
    INT_("checkpoint.hf_max_shard_mb", checkpoint.hf_max_shard_mb, 0, BIG, 0, "5000",
         "Hugging Face export: split model.safetensors into shards of at most this many MB; 0 = one file"),
    ENUM_("checkpoint.export_dtype", checkpoint.export_dtype, export_dtypes, 0, "auto",
          "dtype of the weights a Hugging Face export writes (checkpoint.last_save_in_hf, titan export --dtype): "
          "float32, bfloat16 (each fp32 weight rounded to nearest even), or auto (also \"\"): the dtype of "
          "model.hf_assets_path's weights (its config.json's torch_dtype / dtype, else its safetensors) when that "
          "is bfloat16, else float32"),

    ENUM_("activation_checkpoint.mode", activation_checkpoint.mode, ac_modes, 0, "none",
          "recompute activations in the backward: none, selective (keep matmul and attention outputs), "
          "full (keep each block's input)"),

    INT_("lora.rank", lora.rank, 0, 1 << 16, 0, "0",
         "LoRA: train adapters of this rank on a frozen base (PEFT's r); 0 = off, train the weights"),
    FLT_("lora.alpha", lora.alpha, -1e9, 1e9, 0, "16", "LoRA: the adapters' output is scaled by alpha / rank"),
    FLT_("lora.dropout", lora.dropout, 0, 1, HI_OPEN, "0", "LoRA: dropout on each adapter's input"),
    BOOL_("lora.use_rslora", lora.use_rslora, 0, "false", "LoRA: scale by alpha / sqrt(rank) (rsLoRA)"),
    LIST_("lora.target_modules", lora.target_modules, "all-linear",
         "LoRA: the linear layers that get adapters, PEFT's module names (q_proj, k_proj, v_proj, o_proj, "
         "gate_proj, up_proj, down_proj, ...), a TOML array or comma-separated; all-linear = every linear layer "
         "of the blocks"),
    STR_("lora.adapter_path", lora.adapter_path, "",
         "LoRA: a PEFT adapter folder (adapter_config.json, adapter_model.safetensors) to start from, or to "
         "evaluate and generate with; \"\" = new adapters"),
    ENUM_("lora.base_dtype", lora.base_dtype, param_dtypes, 0, "float32",
          "LoRA: the dtype the frozen base's linear weights are kept in (bfloat16 halves them, and needs bf16 "
          "compute); unset: the compute dtype's (training.mixed_precision_param)"),

    INT_("metrics.log_freq", metrics.log_freq, 1, BIG, 0, "10", "log metrics every this many steps"),
    FLT_("metrics.peak_tflops", metrics.peak_tflops, 0, INFINITY, 0, "0",
         "peak TFLOP/s for MFU; 0 = measured by `titan bench peak`"),
    BOOL_("metrics.save_jsonl", metrics.save_jsonl, 0, "false", "also write metrics as JSON lines in job.dump_folder"),
    BOOL_("metrics.enable_tensorboard", metrics.enable_tensorboard, 0, "false",
          "also write every logged figure to a TensorBoard event file in <job.dump_folder>/<metrics.save_tb_folder>"),
    STR_("metrics.save_tb_folder", metrics.save_tb_folder, "tb",
         "folder of the TensorBoard event files, relative to job.dump_folder"),

    BOOL_("profiling.enable_profiling", profiling.enable_profiling, 0, "false",
          "every profiling.profile_freq steps, time each node of the step and write a Chrome trace of it"),
    STR_("profiling.save_traces_folder", profiling.save_traces_folder, "profile_traces",
         "folder of the traces, relative to job.dump_folder: <folder>/iteration_<step>/rank<R>_trace.json"),
    INT_("profiling.profile_freq", profiling.profile_freq, 1, BIG, 0, "10", "trace every this many steps"),

    STR_("generate.prompt", generate.prompt, "", "text to continue"),
    INT_("generate.max_new_tokens", generate.max_new_tokens, 0, 1 << 24, 0, "128",
         "tokens to generate (also the sample printed after training; 0 = none)"),
    FLT_("generate.temperature", generate.temperature, 0, 100, 0, "1.0", "sampling temperature; 0 = greedy"),
    INT_("generate.top_k", generate.top_k, 0, BIG, 0, "0", "sample from the k most likely tokens; 0 = off"),
    FLT_("generate.top_p", generate.top_p, 0, 1, LO_OPEN, "1.0", "nucleus sampling mass; 1 = off"),
    I64_("generate.seed", generate.seed, 0, I64_BIG, "42", "sampling seed"),
};

#define N_KEYS (sizeof keys / sizeof keys[0])
_Static_assert(N_KEYS <= TT_CONFIG_MAX_KEYS, "raise TT_CONFIG_MAX_KEYS");
/* enum fields are written through int pointers */
_Static_assert(sizeof(tt_model_name) == sizeof(int) && sizeof(tt_decay_type) == sizeof(int) &&
                   sizeof(tt_ac_mode) == sizeof(int) && sizeof(tt_reshard_mode) == sizeof(int) &&
                   sizeof(tt_fault_kind) == sizeof(int) && sizeof(tt_export_dtype) == sizeof(int),
               "enum size");

static int find_key(const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].key, key)) return (int)i;
    return -1;
}

static void *field(tt_config *c, const cfg_key *k) { return (char *)c + k->off; }
static const void *cfield(const tt_config *c, const cfg_key *k) { return (const char *)c + k->off; }

bool tt_config_is_set(const tt_config *c, const char *key)
{
    int i = find_key(key);
    return i >= 0 && c->set_by_user_[i];
}

/* set_by_user_: 0 unset, 1 by a recipe file, OVERRIDDEN by the command line or tt_config_set */
#define OVERRIDDEN 2

bool tt_config_is_overridden(const tt_config *c, const char *key)
{
    int i = find_key(key);
    return i >= 0 && c->set_by_user_[i] == OVERRIDDEN;
}

const char *tt_config_key_name(size_t i) { return i < N_KEYS ? keys[i].key : NULL; }

/* ---- text building ---------------------------------------------------------- */

typedef struct {
    char *d;
    size_t n, cap;
    bool oom;
} tbuf;

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->n + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + (size_t)n + 1) cap *= 2;
        char *d = realloc(b->d, cap);
        if (!d) {
            b->oom = true;
            return;
        }
        b->d = d;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->d + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* The shortest decimal text that reads back as exactly x, shaped as a TOML
 * float (always with '.' or an exponent). */
static void format_float(double x, char *buf, size_t size)
{
    if (x == floor(x) && fabs(x) < 1e15) { /* whole numbers read best as 10000.0 */
        snprintf(buf, size, "%.1f", x);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", size - strlen(buf) - 1);
}

static void format_range(const cfg_key *k, char *buf, size_t size)
{
    bool is_int = k->type == K_INT || k->type == K_I64;
    bool unbounded = isinf(k->hi) || (is_int && k->hi >= BIG);
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.15g", k->lo);
    snprintf(hi, sizeof hi, "%.15g", k->hi);
    if (unbounded) snprintf(buf, size, "%s %s", k->flags & LO_OPEN ? ">" : ">=", lo);
    else
        snprintf(buf, size, "in %c%s, %s%c", k->flags & LO_OPEN ? '(' : '[', lo, hi, k->flags & HI_OPEN ? ')' : ']');
    if (k->flags & NEG1) strncat(buf, " or -1", size - strlen(buf) - 1);
}

static void format_choices(const cfg_key *k, char *buf, size_t size)
{
    buf[0] = 0;
    for (int i = 0; k->choices[i]; i++) {
        if (i) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, k->choices[i], size - strlen(buf) - 1);
    }
}

/* A TOML basic string with every byte that needs it escaped. */
static void put_toml_string(tbuf *b, const char *s)
{
    tb_printf(b, "\"");
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q == '"' || *q == '\\') tb_printf(b, "\\%c", *q);
        else if (*q == '\n') tb_printf(b, "\\n");
        else if (*q == '\t') tb_printf(b, "\\t");
        else if (*q < 0x20 || *q == 0x7f) tb_printf(b, "\\u%04X", *q);
        else tb_printf(b, "%c", *q);
    }
    tb_printf(b, "\"");
}

/* Append key k's value, as TOML (strings quoted) or as plain text. */
static void put_value(tbuf *b, const tt_config *c, const cfg_key *k, bool toml)
{
    const void *p = cfield(c, k);
    char num[64];
    switch (k->type) {
    case K_INT: tb_printf(b, "%d", *(const int *)p); break;
    case K_I64: tb_printf(b, "%lld", (long long)*(const int64_t *)p); break;
    case K_FLOAT:
        format_float(*(const double *)p, num, sizeof num);
        tb_printf(b, "%s", num);
        break;
    case K_BOOL: tb_printf(b, "%s", *(const bool *)p ? "true" : "false"); break;
    case K_STRING:
        if (toml) put_toml_string(b, (const char *)p);
        else tb_printf(b, "%s", (const char *)p);
        break;
    case K_ENUM: {
        int v = *(const int *)p, n = 0;
        while (k->choices[n]) n++;
        const char *name = v >= 0 && v < n ? k->choices[v] : "?";
        tb_printf(b, toml ? "\"%s\"" : "%s", name);
        break;
    }
    }
}

/* Copy a string that fits, zeroing the rest of the field, so equal configs
 * compare equal byte for byte. */
static void put_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    memset(dst, 0, size);
    memcpy(dst, src, n < size ? n : size - 1);
}

/* ---- setting one key ------------------------------------------------------------ */

static bool in_range(const cfg_key *k, double x)
{
    if ((k->flags & NEG1) && x == -1) return true;
    if (isnan(x)) return false;
    if ((k->flags & LO_OPEN) ? x <= k->lo : x < k->lo) return false;
    if ((k->flags & HI_OPEN) ? x >= k->hi : x > k->hi) return false;
    return true;
}

static const char *expected(const cfg_key *k)
{
    switch (k->type) {
    case K_INT:
    case K_I64: return "an integer";
    case K_FLOAT: return "a number";
    case K_BOOL: return "true or false";
    case K_STRING: return "a string";
    case K_ENUM: return "a string";
    }
    return "?";
}

/* Store a parsed value into key ki; where ("file:LINE" or "command line")
 * starts error messages. */
static int store(tt_config *c, int ki, const tt_toml_value *v, const char *where)
{
    const cfg_key *k = &keys[ki];
    void *p = field(c, k);
    char buf[256];
    bool type_ok = false;
    switch (k->type) {
    case K_INT:
    case K_I64: type_ok = v->type == TT_TOML_INT; break;
    case K_FLOAT: type_ok = v->type == TT_TOML_INT || v->type == TT_TOML_FLOAT; break;
    case K_BOOL: type_ok = v->type == TT_TOML_BOOL; break;
    case K_STRING:
        type_ok = v->type == TT_TOML_STRING || (v->type == TT_TOML_ARRAY && k->flags & LIST &&
                                                (!v->n_items || v->items[0].type == TT_TOML_STRING));
        break;
    case K_ENUM: type_ok = v->type == TT_TOML_STRING; break;
    }
    if (!type_ok) {
        if (k->type == K_ENUM) format_choices(k, buf, sizeof buf);
        return tt_errorf("%s: %s: expected %s%s%s%s, got %s %s", where, k->key, expected(k),
                         k->type == K_ENUM ? " (one of: " : "", k->type == K_ENUM ? buf : "",
                         k->type == K_ENUM ? ")" : "",
                         v->type == TT_TOML_INT || v->type == TT_TOML_ARRAY ? "an" : "a", tt_toml_type_name(v->type));
    }
    if (k->type == K_INT || k->type == K_I64 || k->type == K_FLOAT) {
        double x = v->type == TT_TOML_INT ? (double)v->i : v->f;
        if (!in_range(k, x)) {
            char num[64];
            format_range(k, buf, sizeof buf);
            if (x > k->hi && k->type != K_FLOAT && k->hi >= BIG) /* written ">= lo" by format_range: say the bound */
                snprintf(buf, sizeof buf, "%s %.0f", k->flags & HI_OPEN ? "<" : "<=", k->hi);
            if (v->type == TT_TOML_INT) snprintf(num, sizeof num, "%lld", (long long)v->i);
            else format_float(v->f, num, sizeof num);
            return tt_errorf("%s: %s = %s is out of range (must be %s)", where, k->key, num, buf);
        }
        if (k->type == K_INT) *(int *)p = (int)v->i;
        else if (k->type == K_I64) *(int64_t *)p = v->i;
        else *(double *)p = x;
    } else if (k->type == K_BOOL) {
        *(bool *)p = v->b;
    } else if (k->type == K_STRING && v->type == TT_TOML_ARRAY) { /* a list key: its items, comma-separated */
        size_t n = 0;
        for (size_t i = 0; i < v->n_items; i++) {
            const size_t len = strlen(v->items[i].str);
            if (strchr(v->items[i].str, ',') || !len)
                return tt_errorf("%s: %s: item %zu ('%.64s') is empty or holds a comma", where, k->key, i + 1,
                                 v->items[i].str);
            if (n + len + 1 >= k->size)
                return tt_errorf("%s: %s: value too long (at most %zu bytes in all)", where, k->key, k->size - 1);
            memcpy((char *)p + n, v->items[i].str, len);
            n += len;
            ((char *)p)[n++] = ',';
        }
        ((char *)p)[n ? n - 1 : 0] = 0;
    } else if (k->type == K_STRING) {
        size_t n = strlen(v->str);
        if (n >= k->size) return tt_errorf("%s: %s: value too long (%zu bytes, at most %zu)", where, k->key, n, k->size - 1);
        put_str(p, k->size, v->str);
    } else {
        int i;
        for (i = 0; k->choices[i]; i++)
            if (!strcmp(k->choices[i], v->str)) break;
        if (!v->str[0] && !strcmp(k->choices[0], "auto")) i = 0; /* TorchTitan leaves such keys empty for "decide" */
        if (!k->choices[i]) {
            format_choices(k, buf, sizeof buf);
            return tt_errorf("%s: %s: unknown value '%.64s' (allowed: %s)", where, k->key, v->str, buf);
        }
        *(int *)p = i;
    }
    if (k->flags & OPTIONAL) *(bool *)((char *)c + k->has_off) = true;
    c->set_by_user_[ki] = 1;
    return 0;
}

/* Set key ki from command-line text. */
static int set_text(tt_config *c, int ki, const char *value, const char *where)
{
    const cfg_key *k = &keys[ki];
    if (!value) return tt_errorf("%s: %s: no value", where, k->key);
    if ((k->flags & OPTIONAL) && !strcmp(value, "none")) {
        *(bool *)((char *)c + k->has_off) = false;
        memset(field(c, k), 0, k->size);
        c->set_by_user_[ki] = 1;
        return 0;
    }
    tt_toml_value v = {0};
    if (k->type == K_STRING || k->type == K_ENUM) {
        if (!tt_toml_valid_utf8(value, strlen(value))) return tt_errorf("%s: %s: value is not valid UTF-8", where, k->key);
        v.type = TT_TOML_STRING;
        v.str = (char *)value; /* borrowed: not cleared below */
        return store(c, ki, &v, where);
    }
    if (tt_toml_parse_scalar(value, &v))
        return tt_errorf("%s: %s: expected %s, got '%.64s'", where, k->key, expected(k), value);
    int r = store(c, ki, &v, where);
    tt_toml_value_clear(&v);
    return r;
}

/* ---- suggestions for misspelt keys ---------------------------------------------------- */

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 96 || lb > 96) return 1000;
    size_t row[97];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The registered key closest to an unknown one, or NULL: a small edit
 * distance, or the same name in another section (training.lr -> optimizer.lr). */
static const char *suggest(const char *key)
{
    const char *best = NULL;
    size_t best_d = 3;
    const char *dot = strrchr(key, '.');
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t d = edit_distance(key, keys[i].key);
        if (d < best_d) best_d = d, best = keys[i].key;
    }
    if (best || !dot) return best;
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(strrchr(keys[i].key, '.'), dot)) return keys[i].key;
    return NULL;
}

/* "unknown key 'x'" (or "unknown option '--x'" for a command-line flag) */
static int unknown_key(const char *where, bool flag, const char *key)
{
    const char *s = suggest(key), *what = flag ? "option" : "key", *dash = flag ? "--" : "";
    if (s) return tt_errorf("%s: unknown %s '%s%.200s' (did you mean '%s%s'?)", where, what, dash, key, dash, s);
    return tt_errorf("%s: unknown %s '%s%.200s' (`titan help keys` lists the keys)", where, what, dash, key);
}

/* ---- public: defaults, load, set, arguments ------------------------------------------------ */

static void apply_flavor(tt_config *c, const tt_flavor *fl)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &keys[i];
        if (!(k->flags & FLAVOR) || c->set_by_user_[i]) continue;
        const char *src = (const char *)&fl->shape + (k->off - offsetof(tt_config, model));
        memcpy(field(c, k), src, k->size);
    }
}

void tt_config_defaults(tt_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].dflt && set_text(c, (int)i, keys[i].dflt, "default"))
            tt_warn("config: bad default: %s", tt_last_error()); /* a bug in the table; test_config catches it */
    memset(c->set_by_user_, 0, sizeof c->set_by_user_);
    apply_flavor(c, tt_flavor_default(c->model.name));
}

tt_err tt_config_load_string(tt_config *c, const char *text, size_t len, const char *name)
{
    if (!name) name = "<config>";
    tt_toml_doc *doc = tt_toml_parse(text, len, name);
    if (!doc) return -1;
    tt_config t = *c;
    int r = 0;
    for (size_t i = 0; i < doc->n && !r; i++) {
        const tt_toml_entry *e = &doc->entries[i];
        char where[1100];
        snprintf(where, sizeof where, "%s:%d", name, e->line);
        int ki = find_key(e->key);
        r = ki < 0 ? unknown_key(where, false, e->key) : store(&t, ki, &e->value, where);
    }
    tt_toml_free(doc);
    if (!r) *c = t;
    return r;
}

tt_err tt_config_load_file(tt_config *c, const char *path)
{
    size_t len;
    char *text = tt_toml_read_file(path, &len);
    if (!text) return -1;
    int r = tt_config_load_string(c, text, len, path);
    free(text);
    return r;
}

tt_err tt_config_set(tt_config *c, const char *key, const char *value, const char *origin)
{
    const char *where = origin ? origin : "config";
    int ki = key ? find_key(key) : -1;
    if (ki < 0) return unknown_key(where, false, key ? key : "");
    if (set_text(c, ki, value, where)) return -1;
    c->set_by_user_[ki] = OVERRIDDEN;
    return 0;
}

tt_err tt_config_get(const tt_config *c, const char *key, char *buf, size_t size)
{
    int ki = find_key(key);
    if (ki < 0) return unknown_key("config", false, key);
    tbuf b = {0};
    put_value(&b, c, &keys[ki], false);
    int r = 0;
    if (b.oom || !b.d) r = tt_errorf("out of memory");
    else if (b.n >= size) r = tt_errorf("%s: value longer than the buffer", key);
    else memcpy(buf, b.d, b.n + 1);
    free(b.d);
    return r;
}

tt_err tt_config_parse_args(tt_config *c, int argc, char **argv, int *n_rest, char **rest)
{
    const char *config = NULL;
    int *pair_key = malloc(((size_t)argc + 1) * sizeof *pair_key);
    const char **pair_val = malloc(((size_t)argc + 1) * sizeof *pair_val);
    int n_pairs = 0, nr = 0, r = -1;
    bool after_dashdash = false;
    if (!pair_key || !pair_val) {
        tt_errorf("out of memory");
        goto done;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (after_dashdash || a[0] != '-' || a[1] == 0) { /* positional ("-" alone too) */
            if (!rest) {
                tt_errorf("command line: unexpected argument '%.200s'", a);
                goto done;
            }
            rest[nr++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            after_dashdash = true;
            continue;
        }
        if (a[1] != '-') {
            tt_errorf("command line: unknown option '%.200s' (options are --section.key)", a);
            goto done;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        char key[128];
        if (len >= sizeof key) len = sizeof key - 1; /* too long to be a key: reported unknown */
        memcpy(key, name, len);
        key[len] = 0;
        bool is_config = !strcmp(key, "config") || !strcmp(key, "job.config_file");
        int ki = is_config ? -1 : find_key(key);
        if (!is_config && ki < 0) {
            unknown_key("command line", true, key);
            goto done;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val && !is_config && keys[ki].type == K_BOOL) {
            /* a bare boolean flag means true; an explicit true/false may follow */
            val = "true";
            if (i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false"))) val = argv[++i];
        }
        if (!val) {
            if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)) {
                tt_errorf("command line: option '--%s' needs a value (use --%s=VALUE for values starting with --)",
                          key, key);
                goto done;
            }
            val = argv[++i];
        }
        if (is_config) {
            if (config) {
                tt_errorf("command line: --config given twice ('%.200s' and '%.200s')", config, val);
                goto done;
            }
            config = val;
        } else {
            pair_key[n_pairs] = ki;
            pair_val[n_pairs++] = val;
        }
    }
    /* the recipe first, then the overrides in the order given */
    tt_config t = *c;
    if (config && tt_config_load_file(&t, config)) goto done;
    for (int i = 0; i < n_pairs; i++) {
        if (set_text(&t, pair_key[i], pair_val[i], "command line")) goto done;
        t.set_by_user_[pair_key[i]] = OVERRIDDEN;
    }
    *c = t;
    if (n_rest) *n_rest = nr;
    r = 0;
done:
    free(pair_key);
    free((void *)pair_val);
    return r;
}

/* ---- finalize: flavor merge, derived values, cross-key checks ------------------------------------ */

/* The dense families' block keys (OLMo 2, SmolLM3, Phi-3, Granite): a Llama block's, with grouped-query attention
 * (not GPT-2's, not Multi-head Latent Attention's, whose RoPE is its own) */
static tt_err check_block_keys(const tt_model_config *m)
{
    const double prf = m->partial_rotary_factor;
    const struct { const char *key; bool set; } k[] = {
        {"model.qk_norm_full", m->qk_norm_full},
        {"model.post_norms", m->post_norms},
        {"model.no_rope_interval", m->no_rope_interval > 0},
        {"model.partial_rotary_factor", prf > 0 && prf < 1},
        {"model.embedding_multiplier", m->embedding_multiplier > 0},
        {"model.residual_multiplier", m->residual_multiplier > 0},
        {"model.attention_multiplier", m->attention_multiplier > 0},
        {"model.logits_scaling", m->logits_scaling > 0},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (!k[i].set) continue;
        if (m->name == TT_MODEL_GPT2) return tt_errorf("%s: gpt2 has no such option (a llama block's)", k[i].key);
        if (m->kv_lora_rank > 0)
            return tt_errorf("%s: Multi-head Latent Attention (model.kv_lora_rank) has no such option", k[i].key);
    }
    if (m->qk_norm_full && !m->qk_norm) return tt_errorf("model.qk_norm_full needs model.qk_norm = true");
    if (prf > 0 && prf < 1) {
        const double rot = floor(m->head_dim * prf);
        if (rot < 2 || (int)rot % 2)
            return tt_errorf("model.partial_rotary_factor = %g turns %g of a head's %d features: RoPE needs an even "
                             "number of at least 2",
                             prf, rot, m->head_dim);
    }
    return 0;
}

/* " (from flavor X)" when the key came from the flavor, "" when set explicitly. */
static const char *origin_of(const tt_config *c, const char *key, char *buf, size_t size)
{
    if (tt_config_is_set(c, key)) return "";
    snprintf(buf, size, " (flavor '%s')", c->model.flavor);
    return buf;
}

static void list_flavors(tt_model_name model, char *buf, size_t size)
{
    buf[0] = 0;
    for (size_t i = 0; i < tt_flavor_count(); i++) {
        const tt_flavor *f = tt_flavor_at(i);
        if (f->shape.name != model) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, f->name, size - strlen(buf) - 1);
    }
}

tt_err tt_config_finalize(tt_config *c)
{
    tt_config t = *c;
    tt_model_config *m = &t.model;
    char list[1024], o1[96], o2[96];

    /* the flavor: model.name follows it unless set; each model has a default */
    const tt_flavor *fl = tt_flavor_find(m->flavor);
    bool flavor_set = tt_config_is_set(&t, "model.flavor"), name_set = tt_config_is_set(&t, "model.name");
    if (!flavor_set && (!fl || (name_set && fl->shape.name != m->name))) fl = tt_flavor_default(m->name);
    if (!fl) {
        list_flavors(m->name, list, sizeof list);
        return tt_errorf("model.flavor: unknown flavor '%s' for model %s (known: %s)", m->flavor,
                         tt_model_name_str(m->name), list);
    }
    if (fl->shape.name != m->name) {
        if (name_set) {
            list_flavors(m->name, list, sizeof list);
            return tt_errorf("model.flavor '%s' is a %s flavor but model.name is '%s' (its flavors: %s)", fl->name,
                             tt_model_name_str(fl->shape.name), tt_model_name_str(m->name), list);
        }
        m->name = fl->shape.name;
    }
    put_str(m->flavor, sizeof m->flavor, fl->name);
    apply_flavor(&t, fl);

    /* attention shape */
    if (m->head_dim == 0) {
        if (m->dim % m->n_heads)
            return tt_errorf("model.dim = %d%s is not divisible by model.n_heads = %d%s; set model.head_dim", m->dim,
                             origin_of(&t, "model.dim", o1, sizeof o1), m->n_heads,
                             origin_of(&t, "model.n_heads", o2, sizeof o2));
        m->head_dim = m->dim / m->n_heads;
    }
    if (m->n_heads % m->n_kv_heads)
        return tt_errorf("model.n_heads = %d%s is not a multiple of model.n_kv_heads = %d%s", m->n_heads,
                         origin_of(&t, "model.n_heads", o1, sizeof o1), m->n_kv_heads,
                         origin_of(&t, "model.n_kv_heads", o2, sizeof o2));
    if (m->rope_scaling == TT_ROPE_SCALING_LLAMA3 && m->rope_high_freq_factor <= m->rope_low_freq_factor)
        return tt_errorf("model.rope_high_freq_factor (%g) must exceed model.rope_low_freq_factor (%g)",
                         m->rope_high_freq_factor, m->rope_low_freq_factor);
    if (m->name == TT_MODEL_GPT2) {
        if (m->n_kv_heads != m->n_heads)
            return tt_errorf("model.n_kv_heads = %d: gpt2 has no grouped-query attention (n_heads = %d)",
                             m->n_kv_heads, m->n_heads);
        if (m->qk_norm) return tt_errorf("model.qk_norm: gpt2 has no q/k norm");
        if (m->rope_scaling != TT_ROPE_SCALING_NONE) return tt_errorf("model.rope_scaling: gpt2 has no RoPE");
        if (t.training.seq_len > m->max_seq_len)
            return tt_errorf("training.seq_len = %d exceeds model.max_seq_len = %d%s: gpt2 learns one embedding "
                             "per position",
                             t.training.seq_len, m->max_seq_len, origin_of(&t, "model.max_seq_len", o1, sizeof o1));
    }
    if (m->kv_lora_rank > 0) { /* Multi-head Latent Attention: heads of qk_nope + qk_rope, RoPE on qk_rope */
        if (m->name == TT_MODEL_GPT2) return tt_errorf("model.kv_lora_rank: gpt2 has no Multi-head Latent Attention");
        if (m->qk_nope_head_dim < 1 || m->qk_rope_head_dim < 2 || m->qk_rope_head_dim % 2 || m->v_head_dim < 1)
            return tt_errorf("model.kv_lora_rank = %d: Multi-head Latent Attention needs model.qk_nope_head_dim >= 1 "
                             "(%d), an even model.qk_rope_head_dim >= 2 (%d) and model.v_head_dim >= 1 (%d)",
                             m->kv_lora_rank, m->qk_nope_head_dim, m->qk_rope_head_dim, m->v_head_dim);
        if (m->qkv_bias || m->qk_norm)
            return tt_errorf("model.kv_lora_rank: Multi-head Latent Attention has no q/k/v biases or q/k norms");
        m->head_dim = m->qk_rope_head_dim;
        m->n_kv_heads = m->n_heads;
    }
    if (check_block_keys(m)) return -1;
    if (m->num_experts > 0) { /* Mixture-of-Experts */
        if (m->name == TT_MODEL_GPT2) return tt_errorf("model.num_experts: gpt2 has no MoE form");
        if (m->top_k < 1 || m->top_k > m->num_experts)
            return tt_errorf("model.top_k = %d%s must be between 1 and model.num_experts = %d%s", m->top_k,
                             origin_of(&t, "model.top_k", o1, sizeof o1), m->num_experts,
                             origin_of(&t, "model.num_experts", o2, sizeof o2));
        if (m->n_dense_layers >= m->n_layers)
            return tt_errorf("model.n_dense_layers = %d leaves no MoE layer of model.n_layers = %d", m->n_dense_layers,
                             m->n_layers);
        const int G = m->num_expert_groups, Gk = m->num_limited_groups;
        if (G > 1 && (m->num_experts % G || Gk < 1 || Gk > G || Gk * (m->num_experts / G) < m->top_k))
            return tt_errorf("model.num_expert_groups = %d, model.num_limited_groups = %d: the %d experts must split "
                             "evenly into the groups, and the limited groups must hold top_k = %d experts",
                             G, Gk, m->num_experts, m->top_k);
        if (m->moe_ffn_dim == 0) m->moe_ffn_dim = m->ffn_dim;
        if (m->decoder_sparse_step == 0) m->decoder_sparse_step = 1;
    }
    if (m->tokenizer == TT_TOKENIZER_BYTE && m->vocab_size < BYTE_TOKENIZER_VOCAB)
        return tt_errorf("model.vocab_size = %d%s is smaller than the byte tokenizer's %d tokens", m->vocab_size,
                         origin_of(&t, "model.vocab_size", o1, sizeof o1), BYTE_TOKENIZER_VOCAB);

    /* batches */
    tt_training_config *tr = &t.training;
    /* the backend, and its default compute dtype (bf16 where the hardware has bf16 arithmetic) */
    const tt_backend *be = tt_backend_get(tr->backend);
    if (!be) return tt_error_prefix("training.backend: ");
    if (!tt_config_is_set(&t, "training.mixed_precision_param"))
        tr->mixed_precision_param = be->default_dtype() == TT_BF16 ? TT_PARAM_BFLOAT16 : TT_PARAM_FLOAT32;
    if (tr->global_batch_size != -1 && tr->global_batch_size % tr->local_batch_size)
        return tt_errorf("training.global_batch_size = %d is not a multiple of training.local_batch_size = %d",
                         tr->global_batch_size, tr->local_batch_size);
    if (t.validation.local_batch_size == 0) t.validation.local_batch_size = tr->local_batch_size;
    if (t.parallelism.expert_parallel_degree > 1 && t.parallelism.expert_receive_factor > 0 &&
        t.parallelism.expert_receive_factor < 1)
        return tt_errorf("parallelism.expert_receive_factor = %g: below 1 a rank could not hold even its own tokens "
                         "(0 = the worst case)",
                         t.parallelism.expert_receive_factor);

    /* parallelism: data and expert parallelism (the mesh against the world: tt_parallel_resolve) */
    static const struct { const char *key, *what; size_t off; } missing[] = {
        {"parallelism.tensor_parallel_degree", "tensor", offsetof(tt_config, parallelism.tensor_parallel_degree)},
        {"parallelism.pipeline_parallel_degree", "pipeline", offsetof(tt_config, parallelism.pipeline_parallel_degree)},
        {"parallelism.context_parallel_degree", "context", offsetof(tt_config, parallelism.context_parallel_degree)},
    };
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        int deg = *(const int *)((const char *)&t + missing[i].off);
        if (deg != 1)
            return tt_errorf("%s = %d: %s parallelism does not exist in titan yet (set it to 1; titan parallelises "
                             "over data: parallelism.data_parallel_replicate_degree x data_parallel_shard_degree, "
                             "and over experts: parallelism.expert_parallel_degree)",
                             missing[i].key, deg, missing[i].what);
    }

    /* data source: training.dataset and its TorchTitan alias dataset_path */
    if (tr->dataset_path[0]) {
        if (!strcmp(tr->dataset, "synthetic")) { /* a path replaces the built-in corpus */
            put_str(tr->dataset, sizeof tr->dataset, tr->dataset_path);
        } else if (strcmp(tr->dataset, tr->dataset_path))
            return tt_errorf("training.dataset ('%.200s') and training.dataset_path ('%.200s') disagree; set one",
                             tr->dataset, tr->dataset_path);
    } else if (strcmp(tr->dataset, "synthetic"))
        put_str(tr->dataset_path, sizeof tr->dataset_path, tr->dataset);
    if (!tr->dataset[0]) return tt_errorf("training.dataset is empty (use \"synthetic\" or a shard path)");
    if (!strcmp(tr->dataset, "synthetic")) {
        if (t.synthetic.train_tokens <= tr->seq_len)
            return tt_errorf("synthetic.train_tokens = %lld must exceed training.seq_len = %d",
                             (long long)t.synthetic.train_tokens, tr->seq_len);
        if (t.validation.enable && !t.validation.dataset_path[0] && t.synthetic.val_tokens <= tr->seq_len)
            return tt_errorf("synthetic.val_tokens = %lld must exceed training.seq_len = %d for validation",
                             (long long)t.synthetic.val_tokens, tr->seq_len);
    }
    *c = t;
    return 0;
}

/* ---- output: TOML and help ------------------------------------------------------------- */

static size_t section_len(const char *key) { return (size_t)(strchr(key, '.') - key); }

char *tt_config_to_toml(const tt_config *c)
{
    tbuf b = {0};
    tb_printf(&b, "# titan configuration: every key's effective value\n");
    for (size_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &keys[i];
        size_t sl = section_len(k->key);
        if (i == 0 || sl != section_len(keys[i - 1].key) || strncmp(k->key, keys[i - 1].key, sl))
            tb_printf(&b, "\n[%.*s]\n", (int)sl, k->key);
        if ((k->flags & OPTIONAL) && !*(const bool *)((const char *)c + k->has_off)) {
            tb_printf(&b, "# %s: unset\n", k->key + sl + 1);
            continue;
        }
        tb_printf(&b, "%s = ", k->key + sl + 1);
        put_value(&b, c, k, true);
        tb_printf(&b, "\n");
    }
    if (b.oom) {
        free(b.d);
        tt_errorf("out of memory");
        return NULL;
    }
    return b.d;
}

void tt_config_print_help(FILE *f)
{
    char buf[256];
    fprintf(f, "Configuration keys: in a TOML recipe as [section] key = value, or on the command line as\n"
               "--section.key VALUE (or --section.key=VALUE); the command line wins over the recipe.\n");
    for (size_t i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &keys[i];
        size_t sl = section_len(k->key);
        if (i == 0 || sl != section_len(keys[i - 1].key) || strncmp(k->key, keys[i - 1].key, sl))
            fprintf(f, "\n[%.*s]\n", (int)sl, k->key);
        switch (k->type) {
        case K_INT:
        case K_I64: format_range(k, buf, sizeof buf); fprintf(f, "  --%s  integer %s", k->key, buf); break;
        case K_FLOAT: format_range(k, buf, sizeof buf); fprintf(f, "  --%s  float %s", k->key, buf); break;
        case K_BOOL: fprintf(f, "  --%s  true|false", k->key); break;
        case K_STRING: fprintf(f, "  --%s  string", k->key); break;
        case K_ENUM:
            fprintf(f, "  --%s  ", k->key);
            for (int j = 0; k->choices[j]; j++) fprintf(f, "%s%s", j ? "|" : "", k->choices[j]);
            break;
        }
        if (k->flags & HARDWARE) fprintf(f, "  (default: this machine's, see below)\n");
        else if (k->dflt) fprintf(f, k->type == K_STRING ? "  (default \"%s\")\n" : "  (default %s)\n", k->dflt);
        else fprintf(f, "  (default: %s)\n", (k->flags & FLAVOR) ? "from model.flavor" : "unset");
        fprintf(f, "        %s\n", k->help);
    }
    fprintf(f, "\nModel flavors (model.flavor; the first of each model is its default):\n");
    for (size_t i = 0; i < tt_flavor_count(); i++) {
        const tt_flavor *fl = tt_flavor_at(i);
        const tt_model_config *s = &fl->shape;
        char heads[32];
        snprintf(heads, sizeof heads, "%d/%d", s->n_heads, s->n_kv_heads);
        fprintf(f, "  %-5s %-13s dim %-5d layers %-3d heads %-6s ffn %-6d vocab %-6d%s%s%s\n",
                tt_model_name_str(s->name), fl->name, s->dim, s->n_layers, heads, s->ffn_dim, s->vocab_size,
                s->tie_embeddings ? "  tied" : "", s->qkv_bias && s->name != TT_MODEL_GPT2 ? "  qkv_bias" : "",
                s->qk_norm ? "  qk_norm" : "");
    }
}

/* config_keys.c — every key of the run configuration: its type, field,
 * range, default and help (config_keys.h), which config.c's loading, setting,
 * checks, TOML output and help text are driven by. */
#include <math.h>

#include "config/config_keys.h"

#define AT(f) offsetof(tt_config, f), sizeof(((tt_config *)0)->f)
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

/* Defaults are the default job's numbers (configs/default.toml), except that
 * validation and checkpointing are off unless a recipe turns them on. */
const cfg_key tt_cfg_keys[] = {
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

#define N_KEYS (sizeof tt_cfg_keys / sizeof tt_cfg_keys[0])
_Static_assert(N_KEYS <= TT_CONFIG_MAX_KEYS, "raise TT_CONFIG_MAX_KEYS");
const size_t tt_cfg_n_keys = N_KEYS;

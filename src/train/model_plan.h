/* model_plan.h — what planning a config tells, allocating nothing big: the
 * activation arenas come from the memory plan of the step graph a run of the
 * config builds, with no memory behind it. `titan plan` prints it; a training
 * run writes it to <dump_folder>/plan.json, which `titan report` reads. */
#ifndef TT_MODEL_PLAN_H
#define TT_MODEL_PLAN_H
#include "graph/passes/fuse.h"
#include "graph/passes/remat.h"
#include "models/model.h"
#include "titan/config.h"

typedef struct {
    size_t arena, naive;  /* the planned activation arena of one micro-step, and its bytes without reuse */
    tt_remat_stats remat; /* what activation checkpointing recomputes */
} tt_plan_ac;
typedef struct {
    tt_model_cfg mc;
    tt_model_ext ext;              /* what a Hugging Face config adds */
    int64_t params, matmul_params; /* params: the model's layout, Hugging Face biases included */
    int64_t active_params;         /* those a token uses: of the routed experts top_k / num_experts */
    int B, T;                      /* the micro-batch: local_batch_size x seq_len */
    double flops_per_token;        /* 6*N + 12*L*d*T (tt_model_flops_per_token) */
    tt_dtype dtype;                /* the compute dtype */
    tt_ac_mode ac;                 /* the configured activation checkpointing mode */
    tt_plan_ac modes[3];           /* under none, selective and full (indexed by tt_ac_mode) */
    tt_fuse_stats fused;           /* what the fusion pass merged */
    int folded;                    /* gradient accumulations folded into their matmuls */
    double param_bytes, grad_bytes, optim_bytes; /* fp32 master weights, gradients, AdamW's two moments */
    double w16_bytes; /* the weights' bf16 copy for the bf16 products, where a run keeps one (else 0) */
    /* LoRA: the weights are the frozen base (frozen_bytes, its linear weights in lora_base_dtype) and the adapters'
     * fp32 weights; gradients and moments are the adapters' only */
    int lora, lora_targets;
    int64_t adapter_params;
    double frozen_bytes;
    tt_dtype lora_base_dtype;
    /* The mesh planned: parallelism.data_parallel_replicate_degree x
     * data_parallel_shard_degree (-1: 1, as no ranks are launched to fill
     * it). Past one rank, per rank: what its state holds (its slices, and the
     * full gradients when micro-steps accumulate), and what it sends per
     * optimizer step, counted as ring algorithms send ((n-1)/n of each buffer
     * for an all-gather or reduce-scatter over n ranks, twice that for an
     * all-reduce). The arenas above are then the FSDP step graph's. */
    int replicas, shards, ep, accum, n_buckets;
    double rank_state_bytes, full_grad_bytes;
    double rank_frozen_bytes;          /* LoRA: its slices of the frozen base (in rank_state_bytes) */
    double gather_bytes, reduce_bytes; /* per micro-step, and once per optimizer step */
    /* expert parallelism's token exchanges per micro-step (all-to-all, forward and backward), with the
     * tokens spread evenly over the experts: (ep - 1) / ep of the rows a rank sends leave it */
    double exchange_bytes;
} tt_model_plan;
tt_err tt_model_plan_build(const tt_config *c, tt_model_plan *p);
/* The plan as the JSON object of plan.json (the run adds its backend and
 * peak); NULL on out of memory. */
struct cJSON *tt_model_plan_json(const tt_model_plan *p, const tt_config *c);
/* The model's shape: the flavor, or the Hugging Face folder it comes from. */
const char *tt_model_plan_source(const tt_config *c);
#endif

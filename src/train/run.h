/* run.h — one training (or evaluation) run's state: the resolved config, the
 * model, optimizer state, data loaders, step graphs, metrics, and the
 * checkpoint it resumes from or saves to. */
#ifndef TT_RUN_H
#define TT_RUN_H
#include "data/corpus.h"
#include "hf/hf_config.h"
#include "data/loader.h"
#include "tokenizer/tokenizer.h"
#include "titan/config.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "dist/dist.h"
#include "train/sharding.h"
#include "train/moe_balance.h"
#include "train/step_graph.h"

#define TT_MAX_ACCUM 1024

typedef struct {
    const tt_config *cfg;
    tt_dist *dist;        /* the job's processes: one, or the ranks of an MPI launch */
    int rank, world;
    tt_sharding sh;       /* the train state's layout over the mesh (one shard when world is 1) */
    tt_model *model;
    tt_model_ext ext;  /* the Hugging Face extras of the architecture */
    tt_hf_config hf;   /* model.hf_assets_path's config.json, when has_hf */
    int has_hf;
    const tt_backend *be; /* training.backend, or ref in debug mode */
    tt_queue *q;          /* every graph and copy of the run, in order */
    tt_train_state state; /* weights (and for training gradients and moments) in the backend's memory */
    double state_bytes;   /* its backend memory on the rank that holds the most, measured */
    tt_lr_sched sched;
    tt_exec_mode mode;
    tt_loader *train_loader, *val_loader;
    int builtin_corpus;
    tt_corpus_stats corpus;
    int accum_steps;         /* micro-steps per optimizer step on each rank: global / (local x world) */
    tt_step_cfg step_cfg;    /* the micro-step's shape and compute dtype */
    tt_batch **micro;        /* accum_steps batches of one optimizer step */
    tt_batch *val_batch;
    tt_step_graph train, optim, eval;
    tt_step_graph train_nosync; /* several ranks accumulating: the micro-steps before the last (no reduction) */
    size_t arena_bytes;
    double flops_per_token, peak_gflops;
    const char *peak_source;
    tt_metrics metrics;
    tt_moe_balance balance;  /* the expert load and the balancing bias (MoE models) */
    long step;
    char ckpt_dir[4096];
} tt_run;

typedef enum {
    TT_RUN_TRAIN, /* train and optimizer graphs; resumes from the latest checkpoint if any */
    TT_RUN_EVAL,  /* the validation data and eval graph; a checkpoint is required */
    TT_RUN_MODEL, /* only the model, loaded from a checkpoint (generation, export) */
    TT_RUN_HF,    /* only the model, with the weights of model.hf_assets_path */
} tt_run_purpose;
tt_err tt_run_open(tt_run *r, const tt_config *cfg, tt_run_purpose purpose);
/* Checkpoints (checkpoint.c): every rank calls both. A sharded state saves
 * one file per shard with its layout; any checkpoint loads into any layout
 * (a run resumes on another number of ranks). restore: checkpoint.load_step
 * or the newest, falling back as the config allows; require: an error when
 * there is none. */
tt_err tt_run_save(tt_run *r);
tt_err tt_run_restore(tt_run *r, int require);
tt_err tt_run_validate(tt_run *r, double *loss, long *tokens);
/* `titan bench gemm`'s grouped GEMM table for an MoE config (bench_grouped.c); nothing for a dense one */
tt_err tt_bench_grouped_gemm(const tt_config *c, int dtypes, double seconds, double peak_f32, double peak_bf16,
                             FILE *out);
/* ---- the model plan (eval_plan.c) ------------------------------------------
 * What planning a config tells, allocating nothing big: the activation arenas
 * come from the memory plan of the step graph a run of the config builds,
 * with no memory behind it. `titan plan` prints it; a training run writes it
 * to <dump_folder>/plan.json, which `titan report` reads. */
typedef struct {
    size_t arena, naive;  /* the planned activation arena of one micro-step, and its bytes without reuse */
    tt_remat_stats remat; /* what activation checkpointing recomputes */
} tt_plan_ac;
typedef struct {
    tt_model_cfg mc;
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
    /* The mesh planned: parallelism.data_parallel_replicate_degree x
     * data_parallel_shard_degree (-1: 1, as no ranks are launched to fill
     * it). Past one rank, per rank: what its state holds (its slices, and the
     * full gradients when micro-steps accumulate), and what it sends per
     * optimizer step, counted as ring algorithms send ((n-1)/n of each buffer
     * for an all-gather or reduce-scatter over n ranks, twice that for an
     * all-reduce). The arenas above are then the FSDP step graph's. */
    int replicas, shards, ep, accum, n_buckets;
    double rank_state_bytes, full_grad_bytes;
    double gather_bytes, reduce_bytes; /* per micro-step, and once per optimizer step */
    /* expert parallelism's token exchanges per micro-step (all-to-all, forward and backward), with the
     * tokens spread evenly over the experts: (ep - 1) / ep of the rows a rank sends leave it */
    double exchange_bytes;
} tt_model_plan;
tt_err tt_model_plan_build(const tt_config *c, tt_model_plan *p);
/* The plan as the JSON object of plan.json (the run adds its backend and
 * peak); NULL on out of memory. */
struct cJSON *tt_model_plan_json(const tt_model_plan *p, const tt_config *c);
void tt_run_close(tt_run *r);
/* Stream generate.max_new_tokens tokens continuing prompt (generate.c),
 * stopping at any of the stop ids, with the weights of the state s. */
tt_err tt_generate_from(const tt_model *m, tt_train_state *s, const tt_tokenizer *tk, const int *stop, int n_stop,
                        const tt_config *cfg, const char *prompt, FILE *out);
/* The same with the run's model, weights and tokenizer. */
tt_err tt_run_generate(tt_run *r, const char *prompt, FILE *out);
/* A training run's closing sample of generate.prompt, fitted to the model and
 * logged: an empty prompt starts from the end-of-text token, the new tokens
 * stop at the model's last position (tt_run_generate refuses both). */
tt_err tt_run_sample(tt_run *r, FILE *out);
/* The whole model's weights for rank 0 to read (every rank calls it): the
 * run's own state when it is not sharded, else a params-only state made in
 * *gathered from every rank's slices (free it with tt_state_free when *whole
 * is gathered). *whole is NULL on the other ranks. */
tt_err tt_run_whole_weights(tt_run *r, tt_train_state *gathered, tt_train_state **whole);
/* Write the run's model as a Hugging Face folder (tt_hf_export), from rank 0. */
tt_err tt_run_export_hf(tt_run *r, const char *out_dir);
/* The backend a config runs on: ref in debug mode, else training.backend. */
const tt_backend *tt_config_backend(const tt_config *c);
/* The compute dtype of a config (training.mixed_precision_param, resolved). */
tt_dtype tt_config_act_dtype(const tt_config *c);
/* The model's architecture: from model.hf_assets_path's config.json when
 * set, else from the model.* keys. ext and hf may be NULL. */
tt_err tt_model_cfg_from_config(const tt_config *c, tt_model_cfg *out, tt_model_ext *ext, tt_hf_config *hf);
#endif

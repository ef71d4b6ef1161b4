/* run.h — one training (or evaluation) run's state: the resolved config, the
 * model, optimizer state, data loaders, step graphs, metrics, and the
 * checkpoint it resumes from or saves to; closing it (run_open.h opens one). */
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
    tt_train_state state; /* weights (and for training gradients and moments) in the backend's memory; under
                             LoRA the adapters' */
    /* LoRA (cfg lora.rank > 0): the adapters, and the frozen base they adapt with a hash of its weights */
    int has_lora;
    tt_lora lora;
    tt_lora_spec lora_spec; /* what it was made from: the [lora] keys or lora.adapter_path's config */
    tt_frozen_base frozen;
    uint64_t base_hash;
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

void tt_run_close(tt_run *r);
/* The model whose parameters the run's state holds and trains: the model, or LoRA's adapters */
const tt_model *tt_run_trained(const tt_run *r);
/* The trained model's weights whole (the model's, or under LoRA the
 * adapters') for rank 0 to read (every rank calls it): the run's own state
 * when it is not sharded, else a params-only state made in *gathered from
 * every rank's slices (free it with tt_state_free when *whole is gathered).
 * *whole is NULL on the other ranks. */
tt_err tt_run_whole_trained(tt_run *r, tt_train_state *gathered, tt_train_state **whole);
/* The whole model's weights for rank 0 to read, the same way: under LoRA the
 * base with its adapters merged, always made in *gathered. */
tt_err tt_run_whole_weights(tt_run *r, tt_train_state *gathered, tt_train_state **whole);
#endif

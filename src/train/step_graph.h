/* step_graph.h — the graphs a training run replays: the micro-batch step
 * (forward, backward, gradient accumulation), the optimizer step (global
 * grad norm, clipping, AdamW) and the evaluation step (forward and loss).
 * Each reads and writes the train state's buffers; the host gives a step its
 * batch and reads its loss through copies. */
#ifndef TT_STEP_GRAPH_H
#define TT_STEP_GRAPH_H
#include "graph/exec.h"
#include "graph/passes/fuse.h"
#include "graph/passes/remat.h"
#include "train/frozen.h"
#include "train/state.h"

/* The shape of a micro-step graph. */
typedef struct {
    int B, T;
    tt_dtype act_dtype; /* TT_BF16: mixed precision (bf16 activations, fp32 master weights); else TT_F32 */
    int no_fuse;        /* 1: skip the fusion passes, fuse and fold_accum (tests compare the graphs with and without) */
    /* Data parallel over more than one rank (sh->shards x sh->replicas > 1):
     * the FSDP pass and its schedule (graph/passes/fsdp.h). The gathers move
     * act_dtype (TorchTitan's param_dtype), the reductions reduce_dtype. */
    const tt_sharding *sh;
    tt_dtype reduce_dtype;
    int reshard_after_forward; /* tt_fsdp_cfg's */
    int accumulates;           /* micro-steps accumulate gradients: full gradients in the state (sharded) */
    int no_sync;               /* a micro-step before the last of an optimizer step: accumulate, do not reduce */
    int no_overlap;            /* wait for each collective right after its start (to measure what the
                                  schedule hides) */
    double ep_recv_factor;     /* expert parallelism (sh->ep > 1): the receive bound (tt_ep_cfg's recv_factor) */
    /* LoRA (lora non-NULL): the model's weights are frozen, kept as frozen->layout says (in frozen's buffer once
     * bound; sliced as frozen->sh says across ranks), and what trains, and what the state holds (and sh lays out),
     * is lora->adapters */
    const tt_lora *lora;
    const tt_frozen_base *frozen;
    /* 1: the bf16 products read the state's bf16 copy of the weights (tt_state_alloc_w16) through the weights16
     * pass, not the fp32 weights they would round (tt_step_use_weights16 sets it where it applies) */
    int weights16;
} tt_step_cfg;

/* the language-model loss, then up to two auxiliary losses an MoE layer */
#define TT_MAX_LOSSES (1 + 2 * TT_MODEL_MAX_LAYERS)

typedef struct {
    tt_graph *g;
    tt_exec *exec;
    /* inputs: ids, targets, positions, document ids (B*T) i32, the loss scale (1) f32;
     * the optimizer's hyper-parameters (2) f64 [lr, step] */
    tt_value *ids, *targets, *pos, *doc, *scale, *hp;
    tt_value *aux_scale; /* (1) f32: the weight of the micro-batch's auxiliary losses (MoE), when it has any */
    tt_value *rng;       /* (2) i64 [seed, counter]: LoRA's dropout masks, when the graph draws any */
    /* the loss roots (the main loss, then auxiliary ones): the step's loss is their sum */
    tt_value *losses[TT_MAX_LOSSES];
    int n_losses;
    tt_value *sumsq;   /* optimizer graph: (1) squared global grad norm */
    /* per MoE layer, in order: its (E+1) i32 expert row offsets, kept readable (the expert load) */
    tt_value **moe_offsets;
    int n_moe;
    tt_value **units, **grad_units; /* per model unit: the param root and the gradient accumulator root */
    tt_value **adapter_units;       /* LoRA: per unit, the adapters' root (NULL where a unit has none); units are
                                       then the frozen base's roots and grad_units the adapters' gradients' */
    int lora_applied;               /* LoRA: the matmuls that got adapters */
    tt_value **units16;             /* weights16: per unit, the root of its weights' bf16 copy (NULL where no product
                                       reads one) */
    int weights16_read;             /* weights16: the products' operands that read the copy */
    int n_units;
    tt_fsdp_result fsdp;    /* per bucket: the shard roots the FSDP pass made (when c->sh spans ranks) */
    tt_fsdp_result frozen_fsdp; /* LoRA, a sharded base: per bucket of c->frozen->sh, its shard roots */
    int distributed;        /* the FSDP pass ran: bind per bucket */
    tt_ac_mode ac;     /* activation checkpointing applied to this graph */
    tt_fuse_stats fused;    /* what the fusion pass merged */
    int folded;             /* accum nodes folded into the producers of their gradients */
    tt_remat_stats remat;   /* what it recomputes */
    size_t arena_no_ac;     /* the planned arena without it (= the arena when ac is none) */
} tt_step_graph;

typedef struct {
    double beta1, beta2, eps, weight_decay;
    double max_norm; /* gradient clipping by global norm; <= 0: none */
} tt_adamw_cfg;

/* The model whose parameters a state for c trains: the model, or LoRA's adapters */
const tt_model *tt_step_trained_model(const tt_model *m, const tt_step_cfg *c);
/* Whether a run keeps a bf16 copy of its weights for its bf16 products (tt_step_cfg.weights16): in mixed
 * precision, training the model's own weights (not LoRA's adapters, whose base is kept in bf16 already), whole on
 * every rank (FSDP's shards gather their weights in bf16, and expert parallelism moves the experts' weights). */
int tt_step_weights16_fits(tt_dtype act_dtype, int lora, int shards, int ep);
/* Where it fits c (c->sh says the mesh, NULL for one process), the copy in s, made now and kept from then on
 * (tt_state_alloc_w16), and c->weights16 set: the graphs built for c then read it. */
tt_err tt_step_use_weights16(tt_step_cfg *c, tt_train_state *s);
/* The micro-step graph with its passes applied and no memory behind it
 * (titan plan measures its memory plan): with_grad: forward + backward +
 * accumulation into the gradient buffers; else forward and loss only.
 * ac: activation checkpointing (the remat pass after autodiff; a forward-only
 * graph has nothing to recompute and ignores it). */
tt_err tt_build_micro_graph(tt_step_graph *sg, const tt_model *m, const tt_step_cfg *c, int with_grad, tt_ac_mode ac);
/* The same bound to the train state and ready to run on its backend and
 * queue; share: NULL, or an executor whose arena it may run in (the graphs of
 * one optimizer step, run one after the other). */
tt_err tt_build_micro_step(tt_step_graph *sg, const tt_model *m, tt_train_state *s, const tt_step_cfg *c,
                           int with_grad, tt_exec_mode mode, tt_ac_mode ac, tt_exec *share);
tt_err tt_build_optim_step(tt_step_graph *sg, const tt_model *m, tt_train_state *s, const tt_adamw_cfg *cfg,
                           tt_exec_mode mode);
/* One micro-step's batch, (B*T) each, its loss scale, and the weight of its auxiliary losses (the
 * micro-batches' mean: 1 / micro-batches a step, as transformers weighs them). */
tt_err tt_step_set_batch(tt_step_graph *sg, const int32_t *ids, const int32_t *targets, const int32_t *pos,
                         const int32_t *doc, float scale, float aux_scale);
/* The seed and counter the graph's dropout masks are drawn from (nothing when it draws none). */
tt_err tt_step_set_rng(tt_step_graph *sg, uint64_t seed, uint64_t counter);
/* The language-model loss of the last run (loss root 0). */
tt_err tt_step_loss(tt_step_graph *sg, double *loss);
/* The sum of its auxiliary losses (0 when it has none). */
tt_err tt_step_aux_loss(tt_step_graph *sg, double *loss);
/* The optimizer step's learning rate and step number (from 1). */
tt_err tt_optim_set_hp(tt_step_graph *sg, double lr, long step);
/* The squared global gradient norm of the last optimizer run. */
tt_err tt_optim_sumsq(tt_step_graph *sg, double *sumsq);
void tt_step_graph_free(tt_step_graph *sg);
#endif

/* step_graph.h — the graphs a training run replays: the micro-batch step
 * (forward, backward, gradient accumulation), the optimizer step (global
 * grad norm, clipping, AdamW) and the evaluation step (forward and loss). */
#ifndef TT_STEP_GRAPH_H
#define TT_STEP_GRAPH_H
#include "graph/exec.h"
#include "graph/passes/fuse.h"
#include "graph/passes/remat.h"
#include "models/model.h"

/* What lives across steps besides the weights: gradient accumulators and the
 * AdamW moments, each one buffer laid out like the model's parameters. */
typedef struct {
    float *grad, *m, *v;
    tt_tensor *t_grad, *t_m, *t_v; /* per parameter views */
} tt_optim_state;

tt_err tt_optim_state_init(tt_optim_state *s, const tt_model *m);
void tt_optim_state_free(tt_optim_state *s);

/* Host-side input buffers of a step graph, (B*T) each. */
typedef struct {
    int B, T;
    int32_t *ids, *targets, *pos, *doc;
    float scale;       /* 1 / tokens scored in the whole global batch */
    double hp[4];      /* optimizer: lr, step, max_norm, unused */
    tt_dtype act_dtype; /* TT_BF16: mixed precision (bf16 activations, fp32 master weights); else TT_F32 */
    int no_fuse;        /* 1: skip the fusion passes, fuse and fold_accum (tests compare the graphs with and without) */
} tt_step_io;

typedef struct {
    tt_graph *g;
    tt_exec *exec;
    tt_value *loss;    /* (1) */
    tt_value *sumsq;   /* optimizer graph: (1) squared global grad norm */
    tt_ac_mode ac;     /* activation checkpointing applied to this graph */
    tt_fuse_stats fused;    /* what the fusion pass merged */
    int folded;             /* accum nodes folded into the producers of their gradients */
    tt_remat_stats remat;   /* what it recomputes */
    size_t arena_no_ac;     /* the planned arena without it (= the arena when ac is none) */
} tt_step_graph;

typedef struct {
    double beta1, beta2, eps, weight_decay;
} tt_adamw_cfg;

/* with_grad: forward + backward + accumulate into s->grad; else forward only.
 * ac: activation checkpointing (the remat pass, run after autodiff; a
 * forward-only graph has nothing to recompute and ignores it). */
tt_err tt_build_micro_step(tt_step_graph *sg, const tt_model *m, tt_optim_state *s, tt_step_io *io, int with_grad,
                           const tt_backend *be, tt_exec_mode mode, tt_ac_mode ac);
/* The same graph, passes applied, without an executor (titan plan measures
 * its memory plan): grad is the gradient buffer, laid out like m->storage. */
tt_err tt_build_micro_graph(tt_step_graph *sg, const tt_model *m, float *grad, tt_step_io *io, int with_grad,
                            tt_ac_mode ac);
tt_err tt_build_optim_step(tt_step_graph *sg, const tt_model *m, tt_optim_state *s, tt_step_io *io,
                           const tt_adamw_cfg *cfg, const tt_backend *be, tt_exec_mode mode);
void tt_step_graph_free(tt_step_graph *sg);
#endif

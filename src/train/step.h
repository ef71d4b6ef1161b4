/* step.h — one optimizer step of a run: its micro-batches fetched, every
 * micro-step run (forward, backward, gradient accumulation), the loss summed
 * over the job, the optimizer applied and the experts' balance moved. */
#ifndef TT_STEP_H
#define TT_STEP_H
#include "train/hooks.h"
#include "train/run.h"

typedef struct {
    double loss, aux;      /* the global batch's loss, and its auxiliary losses' sum (MoE) */
    double grad_norm, lr;
    double flops_executed; /* model FLOPs with attention as executed (metrics.h), of the step's micro-batches */
    int64_t trained;       /* this rank's targets (the tokens the loss scores) */
    int stopping;          /* a stop request, as every rank takes it: at this step */
} tt_step_result;

/* Step `step` (r->step + 1): on success r->step is step. stop_requested: this
 * rank's request to stop after it (tt_request_stop). */
tt_err tt_train_step(tt_run *r, long step, int stop_requested, const tt_step_hook *hooks, int n_hooks,
                     tt_step_result *out);
/* The graph of micro-step a of an optimizer step: every one but the last only
 * accumulates where several ranks accumulate (train_nosync). */
tt_step_graph *tt_step_micro_graph(tt_run *r, int a);
#endif

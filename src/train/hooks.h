/* hooks.h — what runs around a training step without being part of it:
 * fault injection (comm.fault_*), profiling traces and the check of the peak
 * behind MFU. The step (step.h) and the loop (loop.h) call each hook at fixed
 * points; a hook's own time at `end` and `logged` is not training throughput. */
#ifndef TT_HOOKS_H
#define TT_HOOKS_H
#include "train/run.h"

typedef struct tt_step_hook {
    const char *name;
    void *ctx;
    /* the step's batches are fetched and its micro-steps are next */
    tt_err (*begin)(void *ctx, tt_run *r, long step);
    /* the step runs executor e next: micro-step `part` (0 .. accum_steps-1), or the optimizer (accum_steps) */
    void (*exec)(void *ctx, tt_run *r, long step, int part, tt_exec *e);
    /* the micro-steps ran: this rank's loss of the step, before the job sums it */
    void (*loss)(void *ctx, tt_run *r, long step, double *loss);
    /* the optimizer applied the step */
    tt_err (*end)(void *ctx, tt_run *r, long step);
    /* the step's metrics were logged (a log_freq step) */
    void (*logged)(void *ctx, tt_run *r, long step);
    void (*free)(void *ctx);
} tt_step_hook;

/* The hooks a training run's config asks for, in the order they run: fault
 * injection, profiling, the peak check. At most TT_MAX_HOOKS; *n set. */
#define TT_MAX_HOOKS 4
tt_err tt_step_hooks_from_config(tt_run *r, tt_step_hook *hooks, int *n);
void tt_step_hooks_free(tt_step_hook *hooks, int n);

/* One hook each (fault.c, profile.c, peak_check.c): 1 when the config asks
 * for it (h filled), 0 when not, -1 on error. */
int tt_fault_hook(tt_run *r, tt_step_hook *h);
int tt_profile_hook(tt_run *r, tt_step_hook *h);
int tt_peak_check_hook(tt_run *r, tt_step_hook *h);
#endif

/* fault.c — comm.fault_*: a rank that fails on purpose at a given step
 * (exits, hangs, or poisons its loss or a gradient) or is slow to write it
 * (slow_save), to test what the other ranks do. */
#include <math.h>
#include <unistd.h>

#include "train/hooks.h"
#include "train/parallel.h"

#define SLOW_SLICE 0.05 /* seconds of slow_save's work between two reports of progress */

static const char *fault_name(tt_fault_kind k)
{
    static const char *const names[] = {"exit", "hang", "nan", "slow_save", "nan_grad"};
    return k >= 0 && k < (int)(sizeof names / sizeof *names) ? names[k] : "?";
}

double tt_fault_slow_seconds(const tt_config *c, int rank, long step)
{
    if (c->comm.fault_kind != TT_FAULT_SLOW_SAVE || !tt_parallel_fault_now(c, rank, step)) return 0;
    return 3 * c->comm.timeout_seconds;
}

void tt_fault_slow_work(double seconds)
{
    for (double left = seconds; left > 0; left -= SLOW_SLICE) {
        usleep((useconds_t)(1e6 * (left < SLOW_SLICE ? left : SLOW_SLICE)));
        tt_work_progress(); /* a slice of slow writing done; pause() (hang) reports none */
    }
}

static tt_err fault_begin(void *ctx, tt_run *r, long step)
{
    (void)ctx;
    const tt_config *c = r->cfg;
    if (!tt_parallel_fault_now(c, r->rank, step) || c->comm.fault_kind == TT_FAULT_SLOW_SAVE) return 0;
    tt_warn("comm.fault_kind = %s at step %ld: injected", fault_name(c->comm.fault_kind), step);
    if (c->comm.fault_kind == TT_FAULT_EXIT) _exit(3);
    while (c->comm.fault_kind == TT_FAULT_HANG) pause();
    return 0;
}

static void fault_loss(void *ctx, tt_run *r, long step, double *loss)
{
    (void)ctx;
    if (tt_parallel_fault_now(r->cfg, r->rank, step) && r->cfg->comm.fault_kind == TT_FAULT_NAN) *loss = NAN;
}

/* nan_grad: the loss stays finite, so only what reads the gradients can see
 * it; the rank's first element of them (reduced, the optimizer's input) is
 * NaN, written on the queue the optimizer step runs on next. */
static void fault_exec(void *ctx, tt_run *r, long step, int part, tt_exec *e)
{
    (void)ctx, (void)e;
    const float nan = NAN;
    if (part == r->accum_steps && tt_parallel_fault_now(r->cfg, r->rank, step) &&
        r->cfg->comm.fault_kind == TT_FAULT_NAN_GRAD &&
        tt_backend_write(r->state.be, r->state.q, tt_state_mem(&r->state, TT_STATE_GRAD), &nan, sizeof nan))
        tt_warn("comm.fault_kind = nan_grad: %s", tt_last_error());
}

int tt_fault_hook(tt_run *r, tt_step_hook *h)
{
    if (r->cfg->comm.fault_rank < 0) return 0; /* no fault configured */
    *h = (tt_step_hook){.name = "fault", .begin = fault_begin, .exec = fault_exec, .loss = fault_loss};
    return 1;
}

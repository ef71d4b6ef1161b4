/* fault.c — comm.fault_*: a rank that fails on purpose at a given step
 * (exits, hangs, or poisons its loss), to test what the other ranks do. */
#include <math.h>
#include <unistd.h>

#include "train/hooks.h"
#include "train/parallel.h"

static const char *fault_name(tt_fault_kind k)
{
    return k == TT_FAULT_EXIT ? "exit" : k == TT_FAULT_HANG ? "hang" : "nan";
}

static tt_err fault_begin(void *ctx, tt_run *r, long step)
{
    (void)ctx;
    const tt_config *c = r->cfg;
    if (!tt_parallel_fault_now(c, r->rank, step)) return 0;
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

int tt_fault_hook(tt_run *r, tt_step_hook *h)
{
    if (r->cfg->comm.fault_rank < 0) return 0; /* no fault configured */
    *h = (tt_step_hook){.name = "fault", .begin = fault_begin, .loss = fault_loss};
    return 1;
}

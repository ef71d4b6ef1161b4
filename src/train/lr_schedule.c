/* lr_schedule.c — TorchTitan's linear_warmup_stable_decay, as a pure function
 * of the step so that a resumed run gets exactly the same lr sequence. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "train/lr_schedule.h"

static const double PI = 3.14159265358979323846;

tt_err tt_lr_sched_init(tt_lr_sched *s, int total_steps, int warmup_steps, double decay_ratio,
                        const char *decay_type, double min_lr_factor)
{
    memset(s, 0, sizeof *s);
    if (total_steps <= 0) return tt_errorf("lr_scheduler: training steps must be > 0, got %d", total_steps);
    if (warmup_steps < 0) return tt_errorf("lr_scheduler.warmup_steps must be >= 0, got %d", warmup_steps);
    if (!(min_lr_factor >= 0.0 && min_lr_factor <= 1.0))
        return tt_errorf("lr_scheduler.min_lr_factor must be in [0, 1], got %g", min_lr_factor);
    if (isnan(decay_ratio) || decay_ratio > 1.0)
        return tt_errorf("lr_scheduler.decay_ratio must be in [0, 1] (or unset), got %g", decay_ratio);

    if (!decay_type || strcmp(decay_type, "linear") == 0) s->decay_type = TT_DECAY_LINEAR;
    else if (strcmp(decay_type, "sqrt") == 0) s->decay_type = TT_DECAY_SQRT;
    else if (strcmp(decay_type, "cosine") == 0) s->decay_type = TT_DECAY_COSINE;
    else return tt_errorf("lr_scheduler.decay_type must be linear, sqrt or cosine, got \"%s\"", decay_type);

    if (warmup_steps > total_steps) {
        tt_warn("Warmup steps (%d) exceed total training steps (%d). Adjusting warmup steps to %d.",
                warmup_steps, total_steps, total_steps);
        warmup_steps = total_steps;
    }
    int decay_steps;
    if (decay_ratio >= 0.0) {
        /* Python's round() rounds half to even, as rint() does in the default
         * rounding mode. */
        decay_steps = (int)rint((double)total_steps * decay_ratio);
        if (warmup_steps + decay_steps > total_steps) {
            tt_warn("Warmup (%d) + decay (%d) steps exceed total training steps (%d). "
                    "Adjusting decay steps to %d.",
                    warmup_steps, decay_steps, total_steps, total_steps - warmup_steps);
            decay_steps = total_steps - warmup_steps;
        }
    } else {
        decay_steps = total_steps - warmup_steps;
    }
    s->warmup_steps = warmup_steps;
    s->decay_steps = decay_steps;
    s->total_steps = total_steps;
    s->min_lr_factor = min_lr_factor;
    return TT_OK;
}

double tt_lr_factor(const tt_lr_sched *s, long step)
{
    if (step < 1) step = 1;
    /* TorchTitan: current_step = step - 1 (LambdaLR counts from 0, and the
     * scheduler is stepped after each optimizer step). */
    long cur = step - 1;
    long warmup_stable = (long)s->total_steps + 1 - s->decay_steps; /* warmup + stable */
    if (cur < s->warmup_steps) return (double)(cur + 1) / (double)s->warmup_steps;
    if (cur < warmup_stable || s->decay_steps == 0) return 1.0;

    double progress = (double)(cur + 1 - warmup_stable) / (double)s->decay_steps;
    if (progress > 1.0) progress = 1.0; /* past the end of training: stay at the floor */
    double f;
    switch (s->decay_type) {
    case TT_DECAY_SQRT: f = 1.0 - sqrt(progress); break;
    case TT_DECAY_COSINE: f = 0.5 * (1.0 + cos(PI * progress)); break;
    default: f = 1.0 - progress; break;
    }
    return s->min_lr_factor + (1.0 - s->min_lr_factor) * f;
}

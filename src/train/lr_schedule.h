/* lr_schedule.h — TorchTitan's linear_warmup_stable_decay learning-rate
 * schedule: linear warmup, a stable phase, then linear/sqrt/cosine decay. */
#ifndef TT_LR_SCHEDULE_H
#define TT_LR_SCHEDULE_H

#include "titan/titan.h"

enum { TT_DECAY_LINEAR = 0, TT_DECAY_SQRT = 1, TT_DECAY_COSINE = 2 };

/* The resolved schedule (after TorchTitan's clamping). Steps after warmup and
 * before decay are stable; stable_steps = total_steps + 1 - warmup - decay
 * (TorchTitan's "virtual last step", so the lr never reaches min_lr inside
 * training). */
typedef struct {
    int warmup_steps;
    int decay_steps;
    int total_steps;
    int decay_type;       /* TT_DECAY_* */
    double min_lr_factor; /* lr floor as a fraction of the peak lr, in [0, 1] */
} tt_lr_sched;

/* Resolve a schedule exactly as TorchTitan's build_lr_schedulers does:
 *   warmup_steps > total_steps      -> warn, warmup_steps = total_steps
 *   decay_ratio < 0 (unset)         -> decay_steps = total_steps - warmup_steps
 *   else decay_steps = round_half_even(total_steps * decay_ratio), and if
 *   warmup + decay > total          -> warn, decay_steps = total - warmup.
 * decay_type: "linear", "sqrt" or "cosine" (NULL = "linear"). */
tt_err tt_lr_sched_init(tt_lr_sched *s, int total_steps, int warmup_steps, double decay_ratio,
                        const char *decay_type, double min_lr_factor);

/* The lr multiplier for 1-based training step `step` (the lr the optimizer
 * uses in that step). Step s is LambdaLR's current_step s-1:
 *   s <= warmup:                 s / warmup
 *   s <= total + 1 - decay:      1
 *   else progress = (s - (total + 1 - decay)) / decay, clamped to [0, 1],
 *        factor = min + (1 - min) * {1 - p | 1 - sqrt(p) | (1 + cos(pi p)) / 2}.
 * Steps < 1 are treated as step 1; with decay_steps = 0 the lr stays at 1
 * after warmup, for every step. */
double tt_lr_factor(const tt_lr_sched *s, long step);

#endif

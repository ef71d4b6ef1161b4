/* test_lr_schedule.c — the lr schedule against hand-computed TorchTitan values. */
#include <string.h>

#include "core/core.h"
#include "harness.h"
#include "train/lr_schedule.h"

static const double tol = 1e-12;

int main(void)
{
    tt_lr_sched s;

    /* total 10, warmup 2, decay_ratio unset: decay = 8, stable = 10+1-2-8 = 1,
     * so steps 1..2 warm up, step 3 is stable, decay progress at step s is (s-3)/8. */
    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "linear", 0.0) == 0);
    CHECK(s.warmup_steps == 2 && s.decay_steps == 8 && s.total_steps == 10 && s.decay_type == TT_DECAY_LINEAR);
    CHECK_NEAR(tt_lr_factor(&s, 1), 0.5, tol);
    CHECK_NEAR(tt_lr_factor(&s, 2), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 3), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 4), 0.875, tol);
    CHECK_NEAR(tt_lr_factor(&s, 7), 0.5, tol);
    CHECK_NEAR(tt_lr_factor(&s, 10), 0.125, tol); /* the last step never reaches 0 */
    CHECK_NEAR(tt_lr_factor(&s, 11), 0.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 50), 0.0, tol);   /* past the end: clamped at the floor */
    CHECK_NEAR(tt_lr_factor(&s, 0), 0.5, tol);    /* before step 1: as step 1 */

    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "sqrt", 0.0) == 0);
    CHECK(s.decay_type == TT_DECAY_SQRT);
    CHECK_NEAR(tt_lr_factor(&s, 1), 0.5, tol);
    CHECK_NEAR(tt_lr_factor(&s, 4), 0.64644660940672627, 1e-12); /* 1 - sqrt(1/8) */
    CHECK_NEAR(tt_lr_factor(&s, 7), 0.29289321881345254, 1e-12); /* 1 - sqrt(1/2) */

    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "cosine", 0.0) == 0);
    CHECK(s.decay_type == TT_DECAY_COSINE);
    CHECK_NEAR(tt_lr_factor(&s, 4), 0.96193976625564337, 1e-12); /* (1 + cos(pi/8)) / 2 */
    CHECK_NEAR(tt_lr_factor(&s, 7), 0.5, 1e-12);
    CHECK_NEAR(tt_lr_factor(&s, 10), 0.03806023374435663, 1e-12); /* (1 + cos(7pi/8)) / 2 */

    /* min_lr_factor scales the decay range: 0.1 + 0.9 * f */
    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "linear", 0.1) == 0);
    CHECK_NEAR(tt_lr_factor(&s, 10), 0.1 + 0.9 * 0.125, tol);
    CHECK_NEAR(tt_lr_factor(&s, 11), 0.1, tol);
    CHECK_NEAR(tt_lr_factor(&s, 1), 0.5, tol); /* warmup ignores the floor */

    /* total 100, warmup 10, decay_ratio 0.2: decay = 20, warmup + stable = 81 */
    CHECK(tt_lr_sched_init(&s, 100, 10, 0.2, "cosine", 0.0) == 0);
    CHECK(s.warmup_steps == 10 && s.decay_steps == 20);
    CHECK_NEAR(tt_lr_factor(&s, 1), 0.1, tol);
    CHECK_NEAR(tt_lr_factor(&s, 5), 0.5, tol);
    CHECK_NEAR(tt_lr_factor(&s, 10), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 50), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 81), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 91), 0.5, 1e-12);
    CHECK_NEAR(tt_lr_factor(&s, 100), 0.0061558297024311148, 1e-12); /* (1 + cos(0.95 pi)) / 2 */
    CHECK(tt_lr_sched_init(&s, 100, 10, 0.2, "linear", 0.0) == 0);
    CHECK_NEAR(tt_lr_factor(&s, 82), 0.95, tol);
    CHECK_NEAR(tt_lr_factor(&s, 91), 0.5, tol);

    /* decay_ratio 0: no decay, the lr is constant after warmup (resume tests rely on it) */
    CHECK(tt_lr_sched_init(&s, 20, 4, 0.0, "cosine", 0.0) == 0);
    CHECK(s.decay_steps == 0);
    CHECK_NEAR(tt_lr_factor(&s, 1), 0.25, tol);
    CHECK_NEAR(tt_lr_factor(&s, 3), 0.75, tol);
    int constant = 1;
    for (long st = 4; st <= 40; st++) constant &= tt_lr_factor(&s, st) == 1.0;
    CHECK(constant);

    /* no warmup: step 1 already runs at the full lr */
    CHECK(tt_lr_sched_init(&s, 4, 0, -1.0, "linear", 0.0) == 0);
    CHECK(s.decay_steps == 4);
    CHECK_NEAR(tt_lr_factor(&s, 1), 1.0, tol);
    CHECK_NEAR(tt_lr_factor(&s, 2), 0.75, tol);
    CHECK_NEAR(tt_lr_factor(&s, 4), 0.25, tol);

    /* TorchTitan's adjustments: warmup clamped to total, then decay shrunk */
    CHECK(tt_lr_sched_init(&s, 5, 10, -1.0, "linear", 0.0) == 0);
    CHECK(s.warmup_steps == 5 && s.decay_steps == 0);
    CHECK_NEAR(tt_lr_factor(&s, 3), 0.6, tol);
    CHECK_NEAR(tt_lr_factor(&s, 5), 1.0, tol);
    CHECK(tt_lr_sched_init(&s, 10, 3, 0.9, "linear", 0.0) == 0);
    CHECK(s.warmup_steps == 3 && s.decay_steps == 7);

    /* Python's round(): half to even */
    CHECK(tt_lr_sched_init(&s, 10, 0, 0.25, "linear", 0.0) == 0);
    CHECK(s.decay_steps == 2);
    CHECK(tt_lr_sched_init(&s, 30, 0, 0.25, "linear", 0.0) == 0);
    CHECK(s.decay_steps == 8);

    /* bad input */
    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "exponential", 0.0) != 0);
    CHECK(strstr(tt_last_error(), "decay_type") != NULL);
    CHECK(tt_lr_sched_init(&s, 0, 2, -1.0, "linear", 0.0) != 0);
    CHECK(tt_lr_sched_init(&s, 10, -1, -1.0, "linear", 0.0) != 0);
    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, "linear", 1.5) != 0);
    CHECK(tt_lr_sched_init(&s, 10, 2, 1.5, "linear", 0.0) != 0);
    CHECK(tt_lr_sched_init(&s, 10, 2, -1.0, NULL, 0.0) == 0 && s.decay_type == TT_DECAY_LINEAR);

    return th_done("test_lr_schedule");
}

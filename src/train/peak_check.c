/* peak_check.c — a logged step did more model FLOPs per second than the peak
 * behind MFU: the peak is wrong (a noisy measurement cached, or the machine
 * moved). Measure it again once a run (the backend caches the new figure) and
 * state MFU against it from now on, if it now lies above what the step did. A
 * configured peak (metrics.peak_tflops) is the user's: the notes already say
 * it looks wrong. */
#include <stdlib.h>
#include <string.h>

#include "train/hooks.h"

static void remeasure_peak(tt_run *r)
{
    tt_metrics *m = &r->metrics;
    const tt_dtype dt = r->step_cfg.act_dtype;
    if (r->peak_source && !strcmp(r->peak_source, "config")) return;
    tt_log("the peak (%.0f GFLOP/s %s, %s) is below the %.0f GFLOP/s step %ld did: measuring it again", r->peak_gflops,
           tt_dtype_name(dt), r->peak_source ? r->peak_source : "?", m->peak_wrong_gflops, m->peak_wrong_step);
    tt_backend_peak pk;
    if (r->be->peak(1.0, &pk)) {
        tt_warn("measuring the peak again failed: %s", tt_last_error());
        return;
    }
    const double g = pk.gflops[dt] > 0 ? pk.gflops[dt] : pk.gflops[TT_F32];
    if (g > r->peak_gflops) {
        r->peak_gflops = m->peak_gflops = g;
        r->peak_source = m->peak_source = "re-measured";
    }
    tt_log("peak measured again: %.0f GFLOP/s %s%s", g, tt_dtype_name(dt),
           g > m->peak_wrong_gflops ? "; MFU is against it from now on (and in summary.json)"
                                    : "; still below what the run did: MFU stays unstated");
}

static void peak_logged(void *ctx, tt_run *r, long step)
{
    int *rechecked = ctx;
    if (r->metrics.peak_wrong_step != step || *rechecked) return;
    *rechecked = 1; /* once a run: a second measurement that disagrees would not settle it */
    remeasure_peak(r);
}

int tt_peak_check_hook(tt_run *r, tt_step_hook *h)
{
    (void)r;
    int *rechecked = calloc(1, sizeof *rechecked);
    if (!rechecked) return tt_errorf("out of memory");
    *h = (tt_step_hook){.name = "peak check", .ctx = rechecked, .logged = peak_logged, .free = free};
    return 1;
}

/* profile.c — profiling.enable_profiling: every profile_freq steps the
 * executors time each node of the step (every micro-step's graph run, then
 * the optimizer's), and the step is written as a Chrome trace (trace.h) that
 * `titan report` reads. */
#include <stdlib.h>

#include "formats/safetensors.h"
#include "train/hooks.h"
#include "train/step.h"
#include "train/trace.h"

typedef struct {
    double *start, *dur;  /* accum micro-steps of the train graph's nodes, then the optimizer's */
    tt_trace_part *parts; /* the trace: one part a micro-step, then the optimizer */
    int n_train, n_optim, accum;
} step_timing;

static int profiled(const tt_run *r, long step) { return step % r->cfg->profiling.profile_freq == 0; }

/* The executor of part a times its nodes into its share of the arrays. */
static void profile_exec(void *ctx, tt_run *r, long step, int part, tt_exec *e)
{
    step_timing *t = ctx;
    if (!profiled(r, step)) return;
    const size_t off = (size_t)part * t->n_train;
    tt_exec_set_timing(e, t->start + off, t->dur + off);
}

static tt_err write_step_trace(tt_run *r, step_timing *t, long step)
{
    const tt_config *c = r->cfg;
    const char *folder = c->profiling.save_traces_folder;
    char dir[2 * TT_CONFIG_PATH_MAX + 48], path[sizeof dir + 32];
    if (folder[0] == '/') /* an absolute folder stands alone */
        snprintf(dir, sizeof dir, "%s/iteration_%ld", folder, step);
    else
        snprintf(dir, sizeof dir, "%s/%s/iteration_%ld", c->job.dump_folder, folder, step);
    snprintf(path, sizeof path, "%s/rank%d_trace.json", dir, r->rank);
    tt_trace_part *parts = t->parts;
    double in_nodes = 0;
    for (int a = 0; a <= t->accum; a++) {
        const int optim = a == t->accum, n = optim ? t->n_optim : t->n_train;
        const size_t off = (size_t)a * t->n_train;
        parts[a] = (tt_trace_part){optim ? r->optim.exec : tt_step_micro_graph(r, a)->exec, t->start + off,
                                   t->dur + off, optim ? "optimizer" : "train_step", optim || t->accum == 1 ? -1 : a};
        for (int i = 0; i < n; i++) in_nodes += t->dur[off + i];
    }
    if (tt_mkdir_p(dir) || tt_trace_write(path, parts, t->accum + 1)) return tt_error_prefix("profiling step %ld: ", step);
    tt_log("profiling: step %ld traced to %s (%.1f ms in its nodes; open it in https://ui.perfetto.dev)", step, path,
           1e3 * in_nodes);
    return 0;
}

/* The executors stop timing, and the step is written; a trace that cannot be
 * written stops no run. */
static tt_err profile_end(void *ctx, tt_run *r, long step)
{
    step_timing *t = ctx;
    if (!profiled(r, step)) return 0;
    tt_exec_set_timing(r->train.exec, NULL, NULL);
    if (r->train_nosync.exec) tt_exec_set_timing(r->train_nosync.exec, NULL, NULL);
    tt_exec_set_timing(r->optim.exec, NULL, NULL);
    if (write_step_trace(r, t, step)) tt_warn("%s (training goes on)", tt_last_error());
    return 0;
}

static void profile_free(void *ctx)
{
    step_timing *t = ctx;
    if (!t) return;
    free(t->start);
    free(t->dur);
    free(t->parts);
    free(t);
}

int tt_profile_hook(tt_run *r, tt_step_hook *h)
{
    if (!r->cfg->profiling.enable_profiling) return 0;
    step_timing *t = calloc(1, sizeof *t);
    if (!t) return tt_errorf("profiling: out of memory");
    t->n_train = r->train.g->n_nodes, t->n_optim = r->optim.g->n_nodes, t->accum = r->accum_steps;
    size_t n = (size_t)t->accum * t->n_train + t->n_optim;
    t->start = calloc(n, sizeof *t->start);
    t->dur = calloc(n, sizeof *t->dur);
    t->parts = calloc((size_t)t->accum + 1, sizeof *t->parts);
    if (!t->start || !t->dur || !t->parts) {
        profile_free(t);
        return tt_errorf("profiling: out of memory for %zu node timings", n);
    }
    *h = (tt_step_hook){.name = "profile", .ctx = t, .exec = profile_exec, .end = profile_end, .free = profile_free};
    return 1;
}

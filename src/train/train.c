/* train.c — the training loop: data, micro-steps with gradient accumulation,
 * the optimizer step, metrics (with the peak measured again when a step beats
 * it), profiling traces, validation, checkpoints, preemption. */
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "train/parallel.h"
#include "train/run.h"
#include "train/trace.h"

/* Set by tt_request_stop (from a signal handler of the program's): the loop
 * finishes its step, saves and returns. */
static volatile sig_atomic_t stop_requested;
void tt_request_stop(void) { stop_requested = 1; }

/* Debug mode found a NaN or Inf in a node's output: the run's message with
 * the step, and the node the executor named. */
static tt_err nonfinite_error(long step, const char *where)
{
    return tt_error_prefix("step %ld: non-finite values in %s, stopping before the optimizer applies them (lower "
                           "optimizer.lr, or set training.max_norm); the first: ",
                           step, where);
}

tt_err tt_run_validate(tt_run *r, double *loss_out, long *tokens_out)
{
    tt_loader_reset(r->val_loader);
    double sum = 0;
    long tokens = 0;
    int limit = r->cfg->validation.steps;
    for (int b = 0; limit < 0 || b < limit; b++) {
        int more = tt_loader_next(r->val_loader, r->val_batch);
        if (more < 0) return -1;
        if (!more) break;
        const tt_batch *b = r->val_batch;
        double loss; /* scale 1: the sum of token losses, divided by the count below */
        if (tt_step_set_batch(&r->eval, b->inputs, b->targets, b->positions, b->doc_ids, 1.0f, 0.0f) ||
            tt_exec_run(r->eval.exec) || tt_step_loss(&r->eval, &loss))
            return tt_error_prefix("validation: ");
        sum += loss;
        tokens += (long)r->val_batch->n_scored;
    }
    if (r->world > 1) { /* every rank scored its part of each batch */
        double t[2] = {sum, (double)tokens};
        if (tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, t, 2, TT_F64, TT_REDUCE_SUM, "the validation loss"))
            return tt_error_prefix("validation: ");
        sum = t[0], tokens = (long)t[1];
    }
    *loss_out = tokens ? sum / (double)tokens : NAN;
    *tokens_out = tokens;
    return 0;
}

/* The graph of micro-step a of an optimizer step: every one but the last only
 * accumulates where several ranks accumulate (train_nosync). */
static tt_step_graph *micro_graph(tt_run *r, int a)
{
    return r->train_nosync.g && a < r->accum_steps - 1 ? &r->train_nosync : &r->train;
}

/* ---- profiling.enable_profiling --------------------------------------------
 * Every profile_freq steps the executors time each node of the step (every
 * micro-step's graph run, then the optimizer's), and the step is written as a
 * Chrome trace (trace.h) that `titan report` reads. */
typedef struct {
    double *start, *dur; /* accum micro-steps of the train graph's nodes, then the optimizer's */
    tt_trace_part *parts; /* the trace: one part a micro-step, then the optimizer */
    int n_train, n_optim, accum;
} step_timing;

static tt_err timing_alloc(step_timing *t, const tt_run *r)
{
    t->n_train = r->train.g->n_nodes, t->n_optim = r->optim.g->n_nodes, t->accum = r->accum_steps;
    size_t n = (size_t)t->accum * t->n_train + t->n_optim;
    t->start = calloc(n, sizeof *t->start);
    t->dur = calloc(n, sizeof *t->dur);
    t->parts = calloc((size_t)t->accum + 1, sizeof *t->parts);
    return t->start && t->dur && t->parts ? 0 : tt_errorf("profiling: out of memory for %zu node timings", n);
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
        parts[a] = (tt_trace_part){optim ? r->optim.exec : micro_graph(r, a)->exec, t->start + off, t->dur + off,
                                   optim ? "optimizer" : "train_step", optim || t->accum == 1 ? -1 : a};
        for (int i = 0; i < n; i++) in_nodes += t->dur[off + i];
    }
    if (tt_mkdir_p(dir) || tt_trace_write(path, parts, t->accum + 1)) return tt_error_prefix("profiling step %ld: ", step);
    tt_log("profiling: step %ld traced to %s (%.1f ms in its nodes; open it in https://ui.perfetto.dev)", step, path,
           1e3 * in_nodes);
    return 0;
}

/* A logged step did more model FLOPs per second than the peak: the peak is
 * wrong (a noisy measurement cached, or the machine moved). Measure it again
 * once (the backend caches the new figure) and state MFU against it from now
 * on, if it now lies above what the step did. A configured peak
 * (metrics.peak_tflops) is the user's: the notes already say it looks wrong. */
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

tt_err tt_train(const tt_config *cfg)
{
    tt_run r;
    stop_requested = 0; /* a request belongs to one run; the program sets it again for the next */
    int stopping = 0;   /* the request, as every rank takes it: at the same step */
    if (tt_run_open(&r, cfg, TT_RUN_TRAIN)) return -1;
    const tt_config *c = r.cfg;
    int accum = r.accum_steps;
    long steps = c->training.steps;
    int tokens_per_micro = c->training.local_batch_size * c->training.seq_len;
    double t_start = tt_now(), t_last = t_start, last_loss = NAN, val_loss = NAN;
    long last_logged = r.step, tokens_seen = 0;
    /* model FLOPs with attention as executed since the last logged step (metrics.h) */
    double flops_executed = 0;
    int peak_rechecked = 0;
    step_timing timing = {0};
    tt_err rc = c->profiling.enable_profiling ? timing_alloc(&timing, &r) : 0;

    if (r.step >= steps) tt_log("checkpoint is already at step %ld of %ld: nothing to train", r.step, steps);
    while (r.step < steps && !rc) {
        long step = r.step + 1;
        /* Fetch every micro-batch first: the loss is scaled by the tokens of
         * the whole global batch, so accumulation equals one large batch. */
        int64_t scored = 0;
        for (int a = 0; a < accum && !rc; a++) {
            if (tt_loader_next(r.train_loader, r.micro[a]) != 1) rc = -1;
            else scored += r.micro[a]->n_scored;
        }
        if (!rc && r.world > 1) /* the global batch's: every rank scales by it, so the reduced gradient is its mean */
            rc = tt_dist_all_reduce(r.dist, TT_GROUP_WORLD, &scored, 1, TT_I64, TT_REDUCE_SUM, "the scored tokens");
        if (rc) break;
        if (tt_parallel_fault_now(c, r.rank, step)) { /* comm.fault_*: tests of what the other ranks do */
            tt_warn("comm.fault_kind = %s at step %ld: injected", c->comm.fault_kind == TT_FAULT_EXIT   ? "exit"
                                                                 : c->comm.fault_kind == TT_FAULT_HANG ? "hang"
                                                                                                       : "nan",
                    step);
            if (c->comm.fault_kind == TT_FAULT_EXIT) _exit(3);
            while (c->comm.fault_kind == TT_FAULT_HANG) pause();
        }
        const int profile = c->profiling.enable_profiling && step % c->profiling.profile_freq == 0;
        double loss = 0, aux = 0;
        for (int a = 0; a < accum && !rc; a++) {
            const tt_batch *b = r.micro[a];
            tt_step_graph *mg = micro_graph(&r, a);
            double l = 0, al = 0;
            flops_executed += tt_batch_flops_attention_executed(&r.model->cfg, &r.ext, r.flops_per_token, b->doc_ids,
                                                                b->B, b->T);
            if (profile) {
                const size_t off = (size_t)a * timing.n_train;
                tt_exec_set_timing(mg->exec, timing.start + off, timing.dur + off);
            }
            if (tt_step_set_batch(mg, b->inputs, b->targets, b->positions, b->doc_ids,
                                  scored ? 1.0f / (float)scored : 0.0f, 1.0f / (float)(accum * r.world)) ||
                tt_exec_run(mg->exec) || tt_step_loss(mg, &l) || tt_step_aux_loss(mg, &al) ||
                tt_moe_balance_add(&r.balance, mg)) {
                rc = tt_exec_nonfinite(mg->exec) ? nonfinite_error(step, "the micro-step")
                                                     : tt_error_prefix("step %ld: ", step);
            }
            loss += l;
            aux += al;
        }
        if (rc) break;
        if (tt_parallel_fault_now(c, r.rank, step) && c->comm.fault_kind == TT_FAULT_NAN) loss = NAN;
        /* the global batch's loss on every rank, so a NaN on any rank stops them all; and a stop request
         * (a signal reaches the ranks at different moments) taken by all at this step */
        stopping = stop_requested;
        if (r.world > 1) {
            double t[3] = {loss, stopping, aux}; /* aux: each rank's weighed 1 / ranks, so the sum is the mean */
            if (tt_dist_all_reduce(r.dist, TT_GROUP_WORLD, t, 3, TT_F64, TT_REDUCE_SUM, "the loss")) {
                rc = tt_error_prefix("step %ld: ", step);
                break;
            }
            loss = t[0], stopping = t[1] > 0, aux = t[2];
        }
        if (!isfinite(loss)) {
            rc = tt_errorf("step %ld: loss is %s; stopping before the optimizer applies it (lower optimizer.lr, "
                           "or set training.max_norm)", step, isnan(loss) ? "NaN" : "Inf");
            break;
        }
        double lr = c->optimizer.lr * tt_lr_factor(&r.sched, step), sumsq = 0;
        const size_t opt_off = (size_t)accum * timing.n_train;
        if (profile) tt_exec_set_timing(r.optim.exec, timing.start + opt_off, timing.dur + opt_off);
        tt_err opt_rc = tt_optim_set_hp(&r.optim, lr, step) || tt_exec_run(r.optim.exec);
        if (profile) {
            tt_exec_set_timing(r.train.exec, NULL, NULL);
            if (r.train_nosync.exec) tt_exec_set_timing(r.train_nosync.exec, NULL, NULL);
            tt_exec_set_timing(r.optim.exec, NULL, NULL);
        }
        if (opt_rc || tt_optim_sumsq(&r.optim, &sumsq)) {
            rc = tt_exec_nonfinite(r.optim.exec) ? nonfinite_error(step, "the optimizer step")
                                                 : tt_error_prefix("step %ld: ", step);
            break;
        }
        if (r.balance.n) { /* the experts' selection biases move toward the mean load */
            const tt_param_store ps = tt_state_store(&r.state, TT_STATE_PARAM);
            if (tt_moe_balance_step(&r.balance, r.model, &ps, r.world > 1 ? r.dist : NULL)) {
                rc = tt_error_prefix("step %ld: ", step);
                break;
            }
        }
        double gnorm = sqrt(sumsq);
        if (!isfinite(gnorm)) {
            rc = tt_errorf("step %ld: gradient norm is %s", step, isnan(gnorm) ? "NaN" : "Inf");
            break;
        }
        r.step = step;
        last_loss = loss;
        tokens_seen += (long)tokens_per_micro * accum;

        if (profile) { /* writing the trace is not training throughput; a trace that cannot be written stops no run */
            double t0 = tt_now();
            if (write_step_trace(&r, &timing, step)) tt_warn("%s (training goes on)", tt_last_error());
            t_last += tt_now() - t0;
        }
        if (!rc && (step % c->metrics.log_freq == 0 || step == steps || step == 1)) {
            double now = tt_now(), tokens = (double)tokens_per_micro * accum * (double)(step - last_logged);
            const double wait = r.world > 1 ? tt_dist_take_wait_seconds(r.dist) : NAN;
            const double ep_wait = r.world > 1 ? tt_dist_take_expert_wait_seconds(r.dist) : NAN;
            tt_metrics_step ms = {.step = step, .loss = loss, .grad_norm = gnorm, .lr = lr,
                                  .tokens_per_sec = tokens / (now - t_last), .peak_rss_bytes = tt_peak_rss_bytes(),
                                  .arena_bytes = r.arena_bytes, .elapsed_sec = now - t_start,
                                  .flops_per_token_executed = flops_executed / tokens,
                                  .world = r.world, .comm_wait_frac = wait / (now - t_last),
                                  .has_aux = r.train.n_losses > 1, .aux_loss = aux, .moe_layers = r.balance.n, .moe_load_max = r.balance.load_max,
                                  .moe_load_min = r.balance.load_min, .moe_bias_spread = r.balance.bias_spread,
                                  .ep = r.balance.ep, .ep_recv_max_over_mean = r.balance.recv_max_over_mean,
                                  .ep_wait_frac = ep_wait / (now - t_last)};
            if (tt_metrics_log_step(&r.metrics, &ms)) rc = -1;
            t_last = now;
            last_logged = step;
            flops_executed = 0;
            if (!rc && r.metrics.peak_wrong_step == step && !peak_rechecked) {
                peak_rechecked = 1; /* once a run: a second measurement that disagrees would not settle it */
                remeasure_peak(&r);
                t_last = tt_now(); /* nor is measuring the peak */
            }
        }
        if (!rc && r.val_loader && c->validation.freq > 0 && (step % c->validation.freq == 0 || step == steps)) {
            long vt;
            double t0 = tt_now();
            if (tt_run_validate(&r, &val_loss, &vt) || tt_metrics_log_val(&r.metrics, step, val_loss, vt, tt_now() - t_start))
                rc = -1;
            t_last += tt_now() - t0; /* validation time is not training throughput */
        }
        int save = c->checkpoint.enable && (step % c->checkpoint.interval == 0 || step == steps || stopping);
        if (!rc && save && tt_run_save(&r)) rc = -1;
        if (stopping && !rc) {
            tt_log("stop requested (signal): saved step %ld, exiting", step);
            break;
        }
    }
    if (!rc && !stopping && r.step >= steps && tokens_seen > 0) {
        double wall = tt_now() - t_start;
        tt_run_summary s = {
            .steps = r.step, .params = (long)r.model->numel, .final_train_loss = last_loss,
            .final_val_loss = val_loss, .builtin_corpus = r.builtin_corpus, .floor_nats = r.corpus.floor_nats,
            .unigram_nats = r.corpus.unigram_nats, .total_tokens = tokens_seen, .wall_seconds = wall,
            .mean_tokens_per_sec = (double)tokens_seen / wall, .flops_per_token = r.flops_per_token,
            .peak_source = r.peak_source, .world = r.world, .train_state_bytes = r.state_bytes,
        };
        tt_metrics_summarize_mfu(&r.metrics, &s, tt_dtype_name(r.step_cfg.act_dtype));
        if (r.rank == 0 && tt_metrics_write_summary(c->job.dump_folder, &s)) rc = -1;
        else if (r.builtin_corpus && isfinite(val_loss))
            tt_log("validation loss %.4f | corpus floor %.4f, unigram %.4f | gap closed %.1f%% | val/floor %.3f",
                   val_loss, r.corpus.floor_nats, r.corpus.unigram_nats,
                   100 * (r.corpus.unigram_nats - val_loss) / (r.corpus.unigram_nats - r.corpus.floor_nats),
                   val_loss / r.corpus.floor_nats);
    }
    if (!rc && !stopping && r.step >= steps && c->checkpoint.last_save_in_hf) {
        char dir[TT_CONFIG_PATH_MAX + 8];
        snprintf(dir, sizeof dir, "%s/hf", c->job.dump_folder);
        rc = tt_run_export_hf(&r, dir);
    }
    /* the closing sample fits itself to the model, and never fails a run that trained */
    if (!rc && !stopping && r.step >= steps && c->generate.max_new_tokens > 0 && tt_run_sample(&r, stdout))
        tt_warn("no closing sample: %s", tt_last_error());
    free(timing.start);
    free(timing.dur);
    free(timing.parts);
    tt_run_close(&r);
    return rc;
}

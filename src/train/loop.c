/* loop.c — the training loop: steps (step.h) with their hooks, metrics,
 * validation, checkpoints and preemption between them, and the run's summary
 * at the end. */
#include <math.h>
#include <signal.h>

#include "train/checkpoint.h"
#include "train/loop.h"
#include "train/step.h"
#include "train/validate.h"

/* Set by tt_request_stop (from a signal handler of the program's): the loop
 * finishes its step, saves and returns. */
static volatile sig_atomic_t stop_requested;
void tt_request_stop(void) { stop_requested = 1; }

/* The hooks' time at a point of the loop, which is not training throughput. */
static double hooks_end(const tt_step_hook *hooks, int n, tt_run *r, long step, tt_err *rc)
{
    double t0 = tt_now();
    for (int i = 0; i < n && !*rc; i++)
        if (hooks[i].end && hooks[i].end(hooks[i].ctx, r, step)) *rc = -1;
    return tt_now() - t0;
}

static double hooks_logged(const tt_step_hook *hooks, int n, tt_run *r, long step)
{
    double t0 = tt_now();
    for (int i = 0; i < n; i++)
        if (hooks[i].logged) hooks[i].logged(hooks[i].ctx, r, step);
    return tt_now() - t0;
}

static tt_err write_summary(tt_run *r, double last_loss, double val_loss, long tokens_seen, double wall)
{
    const tt_config *c = r->cfg;
    tt_run_summary s = {
        .steps = r->step, .params = (long)r->model->numel, .final_train_loss = last_loss,
        .final_val_loss = val_loss, .builtin_corpus = r->builtin_corpus, .floor_nats = r->corpus.floor_nats,
        .unigram_nats = r->corpus.unigram_nats, .total_tokens = tokens_seen, .wall_seconds = wall,
        .mean_tokens_per_sec = (double)tokens_seen / wall, .flops_per_token = r->flops_per_token,
        .peak_source = r->peak_source, .world = r->world, .train_state_bytes = r->state_bytes,
        .description = c->job.description,
    };
    tt_metrics_summarize_mfu(&r->metrics, &s, tt_dtype_name(r->step_cfg.act_dtype));
    if (r->rank == 0 && tt_metrics_write_summary(c->job.dump_folder, &s)) return -1;
    if (r->builtin_corpus && isfinite(val_loss))
        tt_log("validation loss %.4f | corpus floor %.4f, unigram %.4f | gap closed %.1f%% | val/floor %.3f",
               val_loss, r->corpus.floor_nats, r->corpus.unigram_nats,
               100 * (r->corpus.unigram_nats - val_loss) / (r->corpus.unigram_nats - r->corpus.floor_nats),
               val_loss / r->corpus.floor_nats);
    return 0;
}

tt_err tt_train_loop(tt_run *r, const tt_step_hook *hooks, int n_hooks, tt_loop_result *out)
{
    const tt_config *c = r->cfg;
    stop_requested = 0; /* a request belongs to one run; the program sets it again for the next */
    const int accum = r->accum_steps;
    const long steps = c->training.steps;
    const int tokens_per_micro = c->training.local_batch_size * c->training.seq_len;
    double t_start = tt_now(), t_last = t_start, last_loss = NAN, val_loss = NAN;
    long last_logged = r->step, tokens_seen = 0;
    int64_t trained = 0; /* targets since the last logged step */
    const int chat = tt_loader_chat_stats_of(r->train_loader, NULL);
    /* model FLOPs with attention as executed since the last logged step (metrics.h) */
    double flops_executed = 0;
    int stopping = 0;
    tt_err rc = 0;
    *out = (tt_loop_result){0};

    if (r->step >= steps) tt_log("checkpoint is already at step %ld of %ld: nothing to train", r->step, steps);
    while (r->step < steps && !rc) {
        const long step = r->step + 1;
        tt_step_result sr;
        if (tt_train_step(r, step, stop_requested, hooks, n_hooks, &sr)) {
            rc = -1;
            break;
        }
        stopping = sr.stopping;
        flops_executed += sr.flops_executed;
        trained += sr.trained;
        last_loss = sr.loss;
        tokens_seen += (long)tokens_per_micro * accum;
        t_last += hooks_end(hooks, n_hooks, r, step, &rc);
        if (!rc && (step % c->metrics.log_freq == 0 || step == steps || step == 1)) {
            double now = tt_now(), tokens = (double)tokens_per_micro * accum * (double)(step - last_logged);
            const double wait = r->world > 1 ? tt_dist_take_wait_seconds(r->dist) : NAN;
            const double ep_wait = r->world > 1 ? tt_dist_take_expert_wait_seconds(r->dist) : NAN;
            tt_metrics_step ms = {.step = step, .loss = sr.loss, .grad_norm = sr.grad_norm, .lr = sr.lr,
                                  .tokens_per_sec = tokens / (now - t_last), .peak_rss_bytes = tt_peak_rss_bytes(),
                                  .trained_per_sec = chat ? (double)trained / (now - t_last) : 0,
                                  .arena_bytes = r->arena_bytes, .elapsed_sec = now - t_start,
                                  .flops_per_token_executed = flops_executed / tokens,
                                  .world = r->world, .comm_wait_frac = wait / (now - t_last),
                                  .has_aux = r->train.n_losses > 1, .aux_loss = sr.aux, .moe_layers = r->balance.n,
                                  .moe_load_max = r->balance.load_max, .moe_load_min = r->balance.load_min,
                                  .moe_bias_spread = r->balance.bias_spread, .ep = r->balance.ep,
                                  .ep_recv_max_over_mean = r->balance.recv_max_over_mean,
                                  .ep_wait_frac = ep_wait / (now - t_last)};
            if (tt_metrics_log_step(&r->metrics, &ms)) rc = -1;
            t_last = now;
            last_logged = step;
            flops_executed = 0;
            trained = 0;
            if (!rc) t_last += hooks_logged(hooks, n_hooks, r, step);
        }
        if (!rc && r->val_loader && c->validation.freq > 0 && (step % c->validation.freq == 0 || step == steps)) {
            long vt;
            double t0 = tt_now();
            if (tt_run_validate(r, &val_loss, &vt) ||
                tt_metrics_log_val(&r->metrics, step, val_loss, vt, tt_now() - t_start))
                rc = -1;
            t_last += tt_now() - t0; /* validation time is not training throughput */
        }
        int save = c->checkpoint.enable && (step % c->checkpoint.interval == 0 || step == steps || stopping);
        if (!rc && save && tt_run_save(r)) rc = -1;
        if (stopping && !rc) {
            tt_log("stop requested (signal): saved step %ld, exiting", step);
            break;
        }
    }
    if (rc) return rc;
    out->completed = !stopping && r->step >= steps;
    if (out->completed && tokens_seen > 0) rc = write_summary(r, last_loss, val_loss, tokens_seen, tt_now() - t_start);
    return rc;
}

/* train.c — the training loop: data, micro-steps with gradient accumulation,
 * the optimizer step, metrics, validation, checkpoints, preemption. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/run.h"

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
        if (tt_step_set_batch(&r->eval, b->inputs, b->targets, b->positions, b->doc_ids, 1.0f) ||
            tt_exec_run(r->eval.exec) || tt_step_loss(&r->eval, &loss))
            return tt_error_prefix("validation: ");
        sum += loss;
        tokens += (long)r->val_batch->n_scored;
    }
    *loss_out = tokens ? sum / (double)tokens : NAN;
    *tokens_out = tokens;
    return 0;
}

tt_err tt_train(const tt_config *cfg)
{
    tt_run r;
    stop_requested = 0; /* a request belongs to one run; the program sets it again for the next */
    if (tt_run_open(&r, cfg, TT_RUN_TRAIN)) return -1;
    const tt_config *c = r.cfg;
    int accum = r.accum_steps;
    long steps = c->training.steps;
    int tokens_per_micro = c->training.local_batch_size * c->training.seq_len;
    double t_start = tt_now(), t_last = t_start, last_loss = NAN, val_loss = NAN;
    long last_logged = r.step, tokens_seen = 0;
    tt_err rc = 0;

    if (r.step >= steps) tt_log("checkpoint is already at step %ld of %ld: nothing to train", r.step, steps);
    while (r.step < steps && !rc) {
        long step = r.step + 1;
        /* Fetch every micro-batch first: the loss is scaled by the tokens of
         * the whole global batch, so accumulation equals one large batch. */
        long scored = 0;
        for (int a = 0; a < accum && !rc; a++) {
            if (tt_loader_next(r.train_loader, r.micro[a]) != 1) rc = -1;
            else scored += (long)r.micro[a]->n_scored;
        }
        if (rc) break;
        double loss = 0;
        for (int a = 0; a < accum && !rc; a++) {
            const tt_batch *b = r.micro[a];
            double l = 0;
            if (tt_step_set_batch(&r.train, b->inputs, b->targets, b->positions, b->doc_ids,
                                  scored ? 1.0f / (float)scored : 0.0f) ||
                tt_exec_run(r.train.exec) || tt_step_loss(&r.train, &l)) {
                rc = tt_exec_nonfinite(r.train.exec) ? nonfinite_error(step, "the micro-step")
                                                     : tt_error_prefix("step %ld: ", step);
            }
            loss += l;
        }
        if (rc) break;
        if (!isfinite(loss)) {
            rc = tt_errorf("step %ld: loss is %s; stopping before the optimizer applies it (lower optimizer.lr, "
                           "or set training.max_norm)", step, isnan(loss) ? "NaN" : "Inf");
            break;
        }
        double lr = c->optimizer.lr * tt_lr_factor(&r.sched, step), sumsq = 0;
        if (tt_optim_set_hp(&r.optim, lr, step) || tt_exec_run(r.optim.exec) || tt_optim_sumsq(&r.optim, &sumsq)) {
            rc = tt_exec_nonfinite(r.optim.exec) ? nonfinite_error(step, "the optimizer step")
                                                 : tt_error_prefix("step %ld: ", step);
            break;
        }
        double gnorm = sqrt(sumsq);
        if (!isfinite(gnorm)) {
            rc = tt_errorf("step %ld: gradient norm is %s", step, isnan(gnorm) ? "NaN" : "Inf");
            break;
        }
        r.step = step;
        last_loss = loss;
        tokens_seen += (long)tokens_per_micro * accum;

        if (step % c->metrics.log_freq == 0 || step == steps || step == 1) {
            double now = tt_now();
            tt_metrics_step ms = {step, loss, gnorm, lr,
                                  (double)tokens_per_micro * accum * (double)(step - last_logged) / (now - t_last),
                                  tt_peak_rss_bytes(), r.arena_bytes, now - t_start};
            if (tt_metrics_log_step(&r.metrics, &ms)) rc = -1;
            t_last = now;
            last_logged = step;
        }
        if (!rc && r.val_loader && c->validation.freq > 0 && (step % c->validation.freq == 0 || step == steps)) {
            long vt;
            double t0 = tt_now();
            if (tt_run_validate(&r, &val_loss, &vt) || tt_metrics_log_val(&r.metrics, step, val_loss, vt, tt_now() - t_start))
                rc = -1;
            t_last += tt_now() - t0; /* validation time is not training throughput */
        }
        int save = c->checkpoint.enable && (step % c->checkpoint.interval == 0 || step == steps || stop_requested);
        if (!rc && save && tt_run_save(&r)) rc = -1;
        if (stop_requested && !rc) {
            tt_log("stop requested (signal): saved step %ld, exiting", step);
            break;
        }
    }
    if (!rc && !stop_requested && r.step >= steps && tokens_seen > 0) {
        double wall = tt_now() - t_start;
        tt_run_summary s = {
            .steps = r.step, .params = (long)r.model->numel, .final_train_loss = last_loss,
            .final_val_loss = val_loss, .builtin_corpus = r.builtin_corpus, .floor_nats = r.corpus.floor_nats,
            .unigram_nats = r.corpus.unigram_nats, .total_tokens = tokens_seen, .wall_seconds = wall,
            .mean_tokens_per_sec = (double)tokens_seen / wall, .flops_per_token = r.flops_per_token,
            .mfu_mean = tt_metrics_mean_mfu(&r.metrics), .peak_source = r.peak_source,
        };
        if (tt_metrics_write_summary(c->job.dump_folder, &s)) rc = -1;
        else if (r.builtin_corpus && isfinite(val_loss))
            tt_log("validation loss %.4f | corpus floor %.4f, unigram %.4f | gap closed %.1f%% | val/floor %.3f",
                   val_loss, r.corpus.floor_nats, r.corpus.unigram_nats,
                   100 * (r.corpus.unigram_nats - val_loss) / (r.corpus.unigram_nats - r.corpus.floor_nats),
                   val_loss / r.corpus.floor_nats);
    }
    if (!rc && !stop_requested && r.step >= steps && c->checkpoint.last_save_in_hf) {
        char dir[TT_CONFIG_PATH_MAX + 8];
        snprintf(dir, sizeof dir, "%s/hf", c->job.dump_folder);
        rc = tt_run_export_hf(&r, dir);
    }
    /* the closing sample fits itself to the model, and never fails a run that trained */
    if (!rc && !stop_requested && r.step >= steps && c->generate.max_new_tokens > 0 && tt_run_sample(&r, stdout))
        tt_warn("no closing sample: %s", tt_last_error());
    tt_run_close(&r);
    return rc;
}

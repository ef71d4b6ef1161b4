/* metrics.h — training metrics: one console line and one metrics.jsonl record
 * per logged step (and the same figures as TensorBoard scalars when enabled),
 * validation results, the end-of-run summary.json, and the FLOP/MFU
 * arithmetic behind them. */
#ifndef TT_METRICS_H
#define TT_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "data/corpus.h"
#include "formats/tfevents.h"
#include "titan/config.h"
#include "titan/titan.h"

/* ---- FLOPs and MFU ------------------------------------------------------- */
/* (Model FLOPs per token come from the model: tt_model_flops_per_token.) */
/* Achieved TFLOP/s for a token rate. */
double tt_tflops(double tokens_per_sec, double flops_per_token);
/* Model FLOPs utilisation in percent of peak_gflops (GFLOP/s); 0 if the peak is unknown (<= 0). */
double tt_mfu_percent(double tokens_per_sec, double flops_per_token, double peak_gflops);
/* "h:mm:ss" (hours unbounded), or "?" for a negative or non-finite time. Returns buf. */
char *tt_format_eta(double seconds, char *buf, size_t n);

/* ---- per-step logger ------------------------------------------------------
 * Train records and validation records are separate lines of metrics.jsonl:
 *   {"step","loss","grad_norm","lr","tokens_per_sec","tflops","mfu",
 *    "peak_rss_bytes","arena_bytes","elapsed_sec","eta_sec"}
 *   {"step","val_loss","val_ppl","val_tokens","elapsed_sec"}
 * so a record has "val_loss" exactly when it is a validation result. mfu is in
 * percent. Non-finite numbers are written as null. Each line is flushed when
 * written, so a killed run leaves only whole lines. */
typedef struct {
    FILE *jsonl;            /* NULL when there is no dump folder */
    double flops_per_token;
    double peak_gflops;     /* <= 0: unknown, mfu is reported as 0 */
    long start_step;        /* the step this process resumed from (0 = fresh): for the ETA */
    long total_steps;
    long n_records;         /* train records logged, and the sums for their means */
    double sum_tps, sum_mfu;
    tt_tb_writer *tb;       /* NULL unless metrics.enable_tensorboard */
    int has_floor;          /* the built-in corpus: its floors go to TensorBoard beside the losses */
    double floor_train, floor_val;
} tt_metrics;

typedef struct {
    long step;                     /* 1-based training step */
    double loss, grad_norm, lr;    /* grad_norm NaN = not computed */
    double tokens_per_sec;         /* over the interval since the last record */
    size_t peak_rss_bytes, arena_bytes;
    double elapsed_sec;            /* since this process began training (at start_step) */
} tt_metrics_step;

/* dump_folder NULL or "": console only. Otherwise the folder is created if
 * needed and metrics.jsonl is truncated, or appended to when `append` is set
 * (a resumed run). */
tt_err tt_metrics_open(tt_metrics *m, const char *dump_folder, int append, double flops_per_token,
                       double peak_gflops, long start_step, long total_steps);
/* With metrics.enable_tensorboard (else nothing): open a new event file in
 * <job.dump_folder>/<metrics.save_tb_folder>/ and begin it with a SessionLog
 * START at start_step + 1, so TensorBoard drops what earlier files of the
 * folder logged from that step on (the steps a crashed run logged after the
 * checkpoint this one resumed from). corpus: the built-in corpus's stats, or
 * NULL when the run has none. Call after tt_metrics_open. Every later record
 * also goes to the event file as these scalars (simple_value, one Event per
 * record), tagged as TorchTitan tags them where it has the figure:
 *   train:      loss_metrics/global_avg_loss, grad_norm (when computed), lr,
 *               throughput(tps), tflops, mfu(%), memory/peak_rss(GiB),
 *               memory/arena(GiB), and with the built-in corpus
 *               loss_metrics/corpus_floor (the train split's floor)
 *   validation: validation_metrics/loss, validation_metrics/perplexity, and
 *               with the built-in corpus validation_metrics/corpus_floor */
tt_err tt_metrics_open_tensorboard(tt_metrics *m, const tt_config *c, const tt_corpus_stats *corpus);
/* Print
 *   step:  10  loss:  3.1234  grad_norm:  1.2345  lr: 3.0e-03  memory: 0.12GiB(rss) 0.05GiB(arena)  tps: 5,123  tflops: 0.04  mfu: 17.10%  eta: 0:03:12
 * and append the record (and its scalars to the event file). The ETA is
 * (total - step) * elapsed / (step - start_step). */
tt_err tt_metrics_log_step(tt_metrics *m, const tt_metrics_step *r);
/* Print "validate step: 100  loss: 1.2300  ppl: 3.42  tokens: 65,536" and append its record (and scalars). */
tt_err tt_metrics_log_val(tt_metrics *m, long step, double val_loss, long tokens, double elapsed_sec);
/* Mean tokens/s and MFU over the train records so far (0 when none). */
double tt_metrics_mean_tps(const tt_metrics *m);
double tt_metrics_mean_mfu(const tt_metrics *m);
/* Close metrics.jsonl and the event file. */
void tt_metrics_close(tt_metrics *m);

/* ---- end of run ----------------------------------------------------------- */
typedef struct {
    long steps;
    long params;
    double final_train_loss;
    double final_val_loss;          /* NaN = never evaluated */
    int builtin_corpus;             /* nonzero: write floor_nats, unigram_nats, gap_closed, val_over_floor */
    double floor_nats, unigram_nats;
    long total_tokens;
    double wall_seconds;
    double mean_tokens_per_sec;
    double flops_per_token;
    double mfu_mean;                /* percent */
    const char *peak_source;        /* "measured" | "cached" | "config" (NULL = "config") */
    const char *extra_json;         /* NULL, or any JSON text: stored parsed under "extra" */
} tt_run_summary;

/* Write <dump_folder>/summary.json atomically (tmp file, fsync, rename). With
 * the built-in corpus, gap_closed = (unigram - val) / (unigram - floor) and
 * val_over_floor = val / floor (null when there is no val loss). */
tt_err tt_metrics_write_summary(const char *dump_folder, const tt_run_summary *s);

#endif

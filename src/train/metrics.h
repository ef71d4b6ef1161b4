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
#include "models/model.h"
#include "titan/config.h"
#include "titan/titan.h"

/* ---- FLOPs and MFU ------------------------------------------------------- */
/* (Model FLOPs per token come from the model: tt_model_flops_per_token,
 * 6·N + 12·L·d·T: N the parameters that do matmuls, d = n_heads·head_dim, and
 * full, non-causal attention over T positions, forward and backward.) */
/* Achieved TFLOP/s for a token rate. */
double tt_tflops(double tokens_per_sec, double flops_per_token);
/* Model FLOPs utilisation in percent of peak_gflops (GFLOP/s); 0 if the peak is unknown (<= 0). */
double tt_mfu_percent(double tokens_per_sec, double flops_per_token, double peak_gflops);

/* Attention as executed. The formula's 12·L·d·T per token is attention over
 * all T positions (QK^T and PV: 2·d·T FLOPs each forward, twice that
 * backward). The kernels attend causally within a token's document (and within
 * the sliding window where a layer has one), so token i of a layer costs
 * 12·d·k_i, k_i the keys it attends to. */
/* Sum of k_i over a (B, T) batch: k_i = the positions j <= i of its row in the
 * same run of equal document ids (the loader's documents and padding; NULL =
 * one document a row), and with window > 0 only the last `window` of them,
 * as the attention mask has it. */
double tt_attention_keys(const int32_t *doc_ids, int B, int T, int window);
/* The batch's model FLOPs with attention as executed: flops_per_token (the
 * formula's) less its 12·L·d·T for every token, plus 12·d·k_i for every token
 * of every layer (each layer with its own window). */
double tt_batch_flops_attention_executed(const tt_model_cfg *mc, const tt_model_ext *ext, double flops_per_token,
                                         const int32_t *doc_ids, int B, int T);

/* MFU as a run states it: never above 100%. mfu (the formula's) and
 * mfu_executed (attention as executed) are percentages, NAN where not stated.
 * FLOPs done per second (attention as executed where known, else the
 * formula's) above the peak mean the peak is wrong: neither is stated
 * (peak_wrong). The formula alone above 100% while the FLOPs done are not means
 * it counts attention the kernels skip: only mfu_executed is stated. note says
 * why a figure is missing ("" otherwise). A peak <= 0 is unknown: mfu is 0, as
 * before, and mfu_executed NAN. */
typedef struct {
    double mfu, mfu_executed;
    double done_gflops; /* the FLOPs done per second the judgement used */
    int peak_wrong;
    char note[300];
} tt_mfu;
/* flops_per_token_executed <= 0: unknown. peak_source names the peak in the note ("cached", "config", ...). */
void tt_mfu_judge(double tokens_per_sec, double flops_per_token, double flops_per_token_executed, double peak_gflops,
                  const char *peak_source, tt_mfu *out);
/* "h:mm:ss" (hours unbounded), or "?" for a negative or non-finite time. Returns buf. */
char *tt_format_eta(double seconds, char *buf, size_t n);

/* ---- per-step logger ------------------------------------------------------
 * Train records and validation records are separate lines of metrics.jsonl:
 *   {"step","loss","grad_norm","lr","tokens_per_sec","tflops","mfu",
 *    ["mfu_attention_executed"], ["mfu_note"],
 *    "peak_rss_bytes","arena_bytes","elapsed_sec","eta_sec"}
 *   {"step","val_loss","val_ppl","val_tokens","elapsed_sec"}
 * so a record has "val_loss" exactly when it is a validation result. mfu is in
 * percent (tt_mfu_judge: null, with mfu_note saying why, where it is not
 * stated); mfu_attention_executed where the run counts it. Non-finite numbers
 * are written as null. Each line is flushed when written, so a killed run
 * leaves only whole lines. */
typedef struct {
    FILE *jsonl;            /* NULL when there is no dump folder */
    double flops_per_token;
    double peak_gflops;     /* <= 0: unknown, mfu is reported as 0 */
    const char *peak_source; /* where the peak came from, for the notes ("cached", "config", ...; NULL = not said) */
    long start_step;        /* the step this process resumed from (0 = fresh): for the ETA */
    long total_steps;
    long n_records;         /* train records logged, and the sums for their means */
    double sum_tps;
    double sum_tps_executed, sum_flops_executed; /* over the records that knew the FLOPs as executed: tokens/s, FLOP/s */
    long peak_wrong_step;   /* the last record whose FLOPs done per second exceeded the peak (0 = none) */
    double peak_wrong_gflops; /* what it did */
    int warned;             /* bits: the notes already logged as warnings (peak wrong 1, formula above 100% 2) */
    char mean_note[300];    /* the summary's mfu_note (tt_metrics_summarize_mfu) */
    tt_tb_writer *tb;       /* NULL unless metrics.enable_tensorboard */
    int has_floor;          /* the built-in corpus: its floors go to TensorBoard beside the losses */
    double floor_train, floor_val;
} tt_metrics;

typedef struct {
    long step;                     /* 1-based training step */
    double loss, grad_norm, lr;    /* grad_norm NaN = not computed */
    double tokens_per_sec;         /* over the interval since the last record */
    double trained_per_sec;        /* targets (trained tokens) a second over it; 0: not shown (text data) */
    size_t peak_rss_bytes, arena_bytes;
    double elapsed_sec;            /* since this process began training (at start_step) */
    double flops_per_token_executed; /* model FLOPs per token with attention as executed, over the interval; 0 = unknown */
    int world;                     /* ranks training together (0 or 1: one process); tokens and memory are this rank's */
    double comm_wait_frac;         /* world > 1: the interval's share this rank spent blocked on the others */
    /* Mixture-of-Experts, per MoE layer (moe_layers of them, 0 for a dense model), over the last optimizer
     * step: max and min tokens per expert over the mean, the balancing bias's max - min */
    int moe_layers;
    int has_aux;     /* the model has auxiliary losses (MoE): aux_loss is their sum */
    double aux_loss;
    const double *moe_load_max, *moe_load_min, *moe_bias_spread;
    /* expert parallelism (ep > 1): the most token rows a rank received for its experts over the mean, and the
     * interval's share this rank spent blocked on the token exchange (part of comm_wait_frac) */
    int ep;
    double ep_recv_max_over_mean, ep_wait_frac;
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
 * (with several ranks, "comm wait: 3.1%" before the ETA: time blocked on
 * collectives, which the overlap of communication with compute did not hide;
 * "comm_wait_frac" in the record; under expert parallelism "received 1.20x
 * mean, a2a wait 1.4%": the most token rows a rank received over the mean,
 * and the time blocked on the token exchange) and append the record (and its scalars to the event file). The ETA is
 * (total - step) * elapsed / (step - start_step). Where MFU is not stated
 * (tt_mfu_judge) the line says "mfu: n/a (the peak looks wrong)" or "mfu: n/a
 * (over 100%: full attention counted)", and the first such record also logs
 * the whole note as a warning; a peak found wrong sets peak_wrong_step, for
 * the run to measure it again. */
tt_err tt_metrics_log_step(tt_metrics *m, const tt_metrics_step *r);
/* Print "validate step: 100  loss: 1.2300  ppl: 3.42  tokens: 65,536" and append its record (and scalars). */
tt_err tt_metrics_log_val(tt_metrics *m, long step, double val_loss, long tokens, double elapsed_sec);
/* Mean tokens/s over the train records so far (0 when none). */
double tt_metrics_mean_tps(const tt_metrics *m);
/* The mean MFU figures over the train records, judged as one record against
 * the peak as it is now (a peak measured again mid-run counts for the whole
 * run): the mean of the records' MFU when the peak stayed. No records: 0. */
void tt_metrics_mean_mfu_judged(const tt_metrics *m, tt_mfu *out);
double tt_metrics_mean_mfu(const tt_metrics *m); /* its mfu */
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
    double mfu_mean;                /* percent; NAN = not stated (written as null, with mfu_note) */
    double flops_per_token_attention_executed; /* the run's mean; 0 = not counted (then the next is left out) */
    double mfu_mean_attention_executed;        /* percent; NAN = not stated */
    const char *mfu_note;           /* NULL, or why an MFU figure is not stated */
    double peak_gflops;             /* the peak MFU is against; <= 0 = unknown (left out) */
    const char *peak_source;        /* "measured" | "cached" | "re-measured" | "config" (NULL = "config") */
    const char *extra_json;         /* NULL, or any JSON text: stored parsed under "extra" */
    const char *description;        /* job.description (NULL or "": left out) */
    int world;                      /* ranks (0 or 1: one process); tokens and throughput are per rank */
    double train_state_bytes;       /* > 0: the train state's backend memory on a rank (the most of any),
                                       measured: written as train_state_bytes_per_rank */
} tt_run_summary;

/* Fill s's MFU fields (mfu_mean, the executed figures, mfu_note, peak) from
 * the records (tt_metrics_mean_mfu_judged), and log them:
 *   MFU 40.12% of the 1049 GFLOP/s bf16 peak (cached), counting 5.48 MFLOP/token (6·N + 12·L·d·T: full attention);
 *   36.20% with attention as executed (4.94 MFLOP/token: causal, within documents)
 * The note's storage is m's: write the summary before closing m. */
void tt_metrics_summarize_mfu(tt_metrics *m, tt_run_summary *s, const char *dtype);

/* Write <dump_folder>/summary.json atomically (tmp file, fsync, rename). With
 * the built-in corpus, gap_closed = (unigram - val) / (unigram - floor) and
 * val_over_floor = val / floor (null when there is no val loss). */
tt_err tt_metrics_write_summary(const char *dump_folder, const tt_run_summary *s);

#endif

/* titan.h — the public API of libtitan: what the CLI (and any C program)
 * uses to train, evaluate, generate and plan. Everything in src/ is private. */
#ifndef TITAN_H
#define TITAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int tt_err; /* 0 = ok, nonzero = error; tt_last_error() says why */

/* The message of the most recent error on this thread. */
const char *tt_last_error(void);

struct tt_config; /* titan/config.h */

/* Train as the config says: resumes from the latest checkpoint in
 * job.dump_folder, logs metrics, validates, checkpoints, and writes
 * summary.json. After tt_request_stop it finishes the step, saves and
 * returns 0. */
tt_err tt_train(const struct tt_config *cfg);
/* Ask a running tt_train to finish its current step, save a checkpoint and
 * return. Async-signal-safe: a program calls it from its SIGINT/SIGTERM
 * handler (the library installs no signal handlers). */
void tt_request_stop(void);
/* Loss and perplexity of the latest (or checkpoint.load_step) checkpoint on
 * the validation data. */
tt_err tt_eval(const struct tt_config *cfg, double *loss, double *ppl, long *tokens);
/* Generate, streaming text to out (generate.* keys): from the newest (or
 * checkpoint.load_step) checkpoint, or with from_hf from the weights of
 * model.hf_assets_path. */
tt_err tt_generate(const struct tt_config *cfg, const char *prompt, int from_hf, FILE *out);
/* Write the newest (or checkpoint.load_step) checkpoint as a Hugging Face
 * folder: config.json, model.safetensors (sharded past
 * checkpoint.hf_max_shard_mb), generation_config.json, tokenizer.json. */
tt_err tt_export(const struct tt_config *cfg, const char *out_dir);
/* Measure the peak FLOP/s of a backend's device (fp32, bf16) for about
 * `seconds` and cache it: MFU is computed against it. */
tt_err tt_bench_peak(const char *backend, double seconds, FILE *out);
/* Time the training step of a config on random tokens: tokens/s, MFU,
 * memory; with profile, the share of each op and scope (GFLOP/s, GB/s) and,
 * when trace_path is set, a Chrome trace JSON of one step. */
tt_err tt_bench_step(const struct tt_config *cfg, int steps, int warmup, int profile, const char *trace_path,
                     FILE *out);
/* Time the attention kernels, forward and backward, on a config's shapes. */
tt_err tt_bench_attention(const struct tt_config *cfg, int reps, FILE *out);
/* GFLOP/s of the GEMM beside OpenBLAS and oneDNN: on the shapes given
 * ("MxNxK" or "MxNxK:op", op = nn, nt, tn or tt), or on square sizes and the
 * products of the config's training step. dtypes: bit 0 fp32, bit 1 bf16.
 * Each figure is the best run within `seconds`. */
tt_err tt_bench_gemm(const struct tt_config *cfg, const char *const *shapes, int n_shapes, int dtypes, double seconds,
                     FILE *out);
/* titan prepare: tokenize text files into train.bin / val.bin shards. */
typedef struct {
    const char *const *inputs; /* .txt (one document each), .jsonl, .jsonl.gz, or folders of them */
    int n_inputs;
    const char *out_dir;       /* receives train.bin and val.bin */
    const char *tokenizer;     /* "byte" or a tokenizer.json path */
    const char *text_field;    /* the .jsonl field holding the text */
    double val_fraction;       /* documents held out for validation, in [0, 1) */
    uint64_t seed;             /* which documents are held out */
    int on_error_skip;         /* a malformed .jsonl line: 1 = report and skip, 0 = stop with an error */
    int progress;              /* draw a progress line on stderr */
} tt_prepare_opts;
tt_err tt_prepare(const tt_prepare_opts *opts, FILE *log);
/* Parameter count, FLOPs per token and memory estimate, allocating nothing. */
tt_err tt_plan(const struct tt_config *cfg, FILE *out);

#ifdef __cplusplus
}
#endif
#endif

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
/* A conversation with a model (titan generate --chat, titan chat): each turn the whole history is rendered
 * with the model's chat template (model.hf_assets_path's tokenizer_config.json chat_template or
 * chat_template.jinja, or chat_template) as transformers' apply_chat_template(add_generation_prompt=True)
 * renders it, encoded without the tokenizer's own special tokens, and answered until an end-of-turn id
 * (generation_config.json's eos_token_id with config.json's and tokenizer_config.json's eos token). */
typedef struct {
    const char *system;        /* a system message first, or NULL */
    const char *chat_template; /* a template file instead of the model folder's, or NULL */
    int verbose;               /* write to log each prompt (the rendered text as a JSON string, and its ids) and
                                * each reply (its text as a JSON string, its ids and what ended it) */
} tt_chat_opts;
/* One user message answered: the reply streamed to out. The model comes as tt_generate's does. */
tt_err tt_generate_chat(const struct tt_config *cfg, const tt_chat_opts *o, const char *message, int from_hf,
                        FILE *out, FILE *log);
/* Each line of in is a user message; each reply is streamed to out with a newline and flushed, and kept in the
 * history. A line "/reset" clears the history (the system message stays); blank lines are skipped. When the
 * history and a reply of generate.max_new_tokens exceed the model's positions, the oldest exchanges are
 * dropped (the system message stays), said on log. A message that cannot be answered (the template refuses
 * the conversation, the message alone does not fit) is said on log and the chat goes on; at the end of in
 * that is an error ("N of M messages got no reply"). */
tt_err tt_chat(const struct tt_config *cfg, const tt_chat_opts *o, int from_hf, FILE *in, FILE *out, FILE *log);
/* What tt_export writes: the model as a Hugging Face folder; a LoRA run's
 * adapters as a PEFT adapter folder; or a LoRA run's model with its adapters
 * merged, as a Hugging Face folder. */
typedef enum { TT_EXPORT_HF = 0, TT_EXPORT_PEFT, TT_EXPORT_MERGED } tt_export_kind;
/* Write the newest (or checkpoint.load_step) checkpoint as a Hugging Face
 * folder: config.json, model.safetensors (sharded past
 * checkpoint.hf_max_shard_mb), generation_config.json, tokenizer.json, and for
 * a model from a Hugging Face folder that folder's tokenizer_config.json (with
 * the chat template), chat_template.jinja and special_tokens_map.json, with
 * generation_config.json listing the end-of-turn ids; or, of a LoRA run, its
 * adapters (adapter_config.json, adapter_model.safetensors, and the tokenizer
 * files) or the merged model. A LoRA run's plain export is refused, naming
 * the two. */
tt_err tt_export(const struct tt_config *cfg, tt_export_kind kind, const char *out_dir);
/* Measure the peak FLOP/s of a backend's device (fp32, bf16) for about
 * `seconds` and cache it: MFU is computed against it. */
tt_err tt_bench_peak(const char *backend, double seconds, FILE *out);
/* Time the training step of a config on random tokens: tokens/s, MFU,
 * memory; with profile, the share of each op and scope (GFLOP/s, GB/s) and,
 * when trace_path is set, a Chrome trace JSON of one step; with host_check,
 * the device's peak measured just before and just after the steps (nothing
 * cached), which tells a slow host from a slow step. */
tt_err tt_bench_step(const struct tt_config *cfg, int steps, int warmup, int profile, int host_check,
                     const char *trace_path, FILE *out);
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
    const char *const *inputs; /* .txt (one document each, or per line: split_lines), .jsonl, .jsonl.gz, or folders of them */
    int n_inputs;
    const char *out_dir;       /* receives train.bin and val.bin */
    const char *tokenizer;     /* "byte" or a tokenizer.json path */
    const char *text_field;    /* the .jsonl field holding the text */
    double val_fraction;       /* documents held out for validation, in [0, 1) */
    uint64_t seed;             /* which documents are held out */
    int on_error_skip;         /* a malformed .jsonl line: 1 = report and skip, 0 = stop with an error */
    int progress;              /* draw a progress line on stderr */
    int split_lines;           /* 1: each non-empty line of a .txt file is a document (--split-unit line) */
    /* --chat: each .jsonl line a conversation (see tt_tokenize_chat), rendered with the model's chat
     * template and written as a conversation shard (a loss mask, conversation and turn offsets) */
    int chat;
    const char *hf_dir;        /* the model folder: its tokenizer (unless tokenizer is set), template, special tokens */
    const char *chat_template; /* a template file instead of the folder's */
    int train_on_all;          /* 1: train every token (--train-on all); 0: the assistant's turns */
} tt_prepare_opts;
/* An error, and no shard written, when val_fraction > 0 holds out no document
 * or holds out every one (too few documents: one .txt file is one document). */
tt_err tt_prepare(const tt_prepare_opts *opts, FILE *log);
/* titan tokenize: text to token ids and back, one output line per input line. */
typedef struct {
    const char *tokenizer;         /* "byte" (or NULL) or a tokenizer.json path */
    const char *const *inputs;     /* files read line by line, in order ("-": the in stream); none: in */
    int n_inputs;
    int decode;                    /* 0: each line of text -> its ids separated by spaces;
                                    * 1: each line of ids (spaces or commas between) -> its text */
    int no_special;                /* encode: leave out the special tokens the tokenizer adds (BOS ...);
                                    * decode: drop special tokens from the text */
    /* --chat (tt_tokenize_chat): each line a conversation, rendered with a chat template */
    int render;                    /* print the rendered text */
    int mask;                      /* print the ids and, on the next line, the target flags */
    int train_on_all;              /* --mask: every token is trained (--train-on all) */
    int add_generation_prompt;
    const char *hf_dir;            /* the model folder: its chat template and special tokens */
    const char *chat_template;     /* a template file instead of the folder's */
} tt_tokenize_opts;
/* The '\n' ends a line and is not encoded; a decoded text holding '\n' spans
 * several output lines. Each output line is flushed, so a program can drive
 * it through pipes. Errors name the input and line: text that is not UTF-8
 * (tokenizer.json), an id outside the vocabulary, a file that cannot be
 * opened (all are opened before anything is written). */
tt_err tt_tokenize(const tt_tokenize_opts *opts, FILE *in, FILE *out);
/* titan tokenize --chat: each line of the inputs (.jsonl or .jsonl.gz; none: in) is a
 * conversation ({"messages": [...], "tools": [...]}, ShareGPT's {"conversations": [{from, value}]},
 * TRL's {"prompt": [...], "completion": [...]}, or a bare list of messages), rendered with the chat
 * template (opts->chat_template, else hf_dir's) and printed as one JSON string a line (render), as
 * its token ids with the tokenizer (opts->tokenizer), or as ids and target flags (mask: two lines a
 * sample). A conversation the template rejects prints {"error": "..."} on its line and the run goes
 * on; a line that is not JSON or not a conversation stops it, naming the file and line. Blank lines
 * are skipped. */
tt_err tt_tokenize_chat(const tt_tokenize_opts *opts, FILE *in, FILE *out);
/* The start of a program that uses the library, first thing in main: when
 * the user has set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, the program
 * is executed again (/proc/self/exe, the same argv) with titan's
 * GOMP_SPINCOUNT, so that libgomp's idle threads sleep after a short spin
 * rather than milliseconds (src/core/sys.c says why). libgomp reads these
 * once, as it is loaded, so only an exec can set them. Returns when there is
 * nothing to do, when the OpenMP runtime is not libgomp, or when the exec
 * failed (libgomp's default then stays). */
void tt_openmp_wait_default(char **argv);
/* The end of a program that used the library: ends MPI when the job runs on
 * several processes (mpirun, srun), waiting for every rank to get there.
 * Call it once before the program exits, on every path, errors included: a
 * process that exits without it makes the launcher end the whole job as
 * failed. Idempotent (later calls do nothing); after it, a job of several
 * processes can use no collective again. A plain single process may skip it. */
void tt_shutdown(void);
/* A job of several processes that failed on this rank: end every process of
 * the job now (MPI_Abort with `status`), so the others do not wait on
 * collectives until their watchdog fires. Does nothing in a plain process,
 * or before the job started MPI (the caller exits as it would). */
void tt_abort_job(int status);
/* This process's rank in the job and the job's process count: 0 and 1 for a
 * plain process; under an MPI launcher, as the launcher says even before the
 * library has started MPI (so an error that comes first can name its rank). */
int tt_process_rank(void);
int tt_process_world(void);
/* Parameter count, FLOPs per token and memory estimate, allocating nothing. */
tt_err tt_plan(const struct tt_config *cfg, FILE *out);
/* The same as JSON: what a training run writes to plan.json (format "titan-plan-1"). */
tt_err tt_plan_json(const struct tt_config *cfg, FILE *out);
/* titan report: one self-contained HTML page (inline CSS and SVG, no scripts,
 * nothing fetched) of 1 to 10 runs' dump folders, overlaid one colour per run:
 * plots of loss and validation loss (with the corpus floor), lr, grad norm,
 * tokens/s, MFU and memory over steps from metrics.jsonl; each run's
 * summary.json, plan.json and config.toml; and the per-op time of the newest
 * profile_traces/iteration_N/rank0_trace.json. A run still in progress or
 * without validation is fine; a malformed or oversized file (or line of
 * metrics.jsonl) is skipped and said so, on the page and on log (NULL:
 * quiet). An error when a folder is not a run's, or the page cannot be
 * written (atomically) to out_path. */
tt_err tt_report(const char *const *run_dirs, int n_runs, const char *out_path, FILE *log);

#ifdef __cplusplus
}
#endif
#endif

/* titan.c — the command-line interface: a thin user of the public API.
 * titan train | eval | generate | chat | plan | report | bench peak | help */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "default_config.h" /* generated from configs/default.toml */
#include "titan/config.h"
#include "titan/titan.h"

static const char *usage_text =
    "usage: titan <command> [--config FILE] [--section.key value ...]\n"
    "\n"
    "commands:\n"
    "  train      train a model (no --config: the default job, configs/default.toml)\n"
    "  eval       loss and perplexity of the latest checkpoint on the validation data\n"
    "  generate   generate text from the latest checkpoint: titan generate [--config F] \"prompt\"\n"
    "  chat       talk with a model through its chat template, one message a line on stdin\n"
    "  plan       parameters, FLOPs per token and memory of a config, without allocating it\n"
    "  report     an HTML page of runs' curves, plan, summary and profile: titan report RUN_DIR...\n"
    "  export     write a checkpoint as a Hugging Face model folder\n"
    "  prepare    tokenize .txt / .jsonl / .jsonl.gz files into token shards for training\n"
    "  tokenize   text to token ids and back, one line per line: titan tokenize [--hf DIR] < text\n"
    "  bench peak measure this machine's fp32 and bf16 peak FLOP/s (cached for MFU)\n"
    "  bench step time a config's training step; --profile: per op and scope, Chrome trace\n"
    "  bench attention  time the attention kernels on a config's shapes\n"
    "  bench gemm  GEMM GFLOP/s beside OpenBLAS and oneDNN, on a config's shapes\n"
    "  help       this text; `titan help keys` lists every config key\n"
    "\n"
    "Any config key can be set on the command line: --training.steps 40 --optimizer.lr 1e-3.\n"
    "`titan <command> --help` describes one command.\n";

static const char *command_help(const char *cmd)
{
    if (!strcmp(cmd, "train"))
        return "titan train [--config FILE] [--section.key value ...]\n"
               "  Trains as the recipe says. Resumes from the newest checkpoint in job.dump_folder;\n"
               "  SIGINT/SIGTERM finish the current step, save a checkpoint and exit.\n"
               "  Writes <dump_folder>/metrics.jsonl and summary.json, and at the start its resolved\n"
               "  config.toml and model plan.json (titan report reads them).\n";
    if (!strcmp(cmd, "eval"))
        return "titan eval [--config FILE] [--checkpoint.load_step N] [--validation.steps N]\n"
               "  Loss and perplexity of a checkpoint on the validation set.\n";
    if (!strcmp(cmd, "generate"))
        return "titan generate [--config FILE] [--hf DIR | --checkpoint step-N|PATH]\n"
               "               [--generate.max_new_tokens N] [--generate.temperature T]\n"
               "               [--generate.top_k K] [--generate.top_p P] [\"prompt\"]\n"
               "  Streams text generated with the KV cache, from the newest checkpoint of\n"
               "  job.dump_folder, a given checkpoint, or a Hugging Face model folder (--hf), until\n"
               "  an end-of-turn id (below) or generate.max_new_tokens.\n"
               "titan generate --chat [--system TEXT] [--chat-template FILE] [--verbose] [model options] [\"message\"]\n"
               "  The message (else generate.prompt) is a user's: the conversation ([system,] user) is\n"
               "  rendered with the model's chat template (the folder's chat_template.jinja, else its\n"
               "  tokenizer_config.json's chat_template; a checkpoint's folder is its run's\n"
               "  model.hf_assets_path; --chat-template FILE overrides it), encoded without the\n"
               "  tokenizer's own BOS/EOS, and only the reply is printed. The reply ends at an\n"
               "  end-of-turn id: generation_config.json's eos_token_id (one id or a list), config.json's,\n"
               "  and tokenizer_config.json's eos_token. --verbose writes the rendered prompt (a JSON\n"
               "  string, as titan tokenize --chat --render prints it) and its ids, and the reply's ids\n"
               "  and what ended it, to stderr.\n";
    if (!strcmp(cmd, "chat"))
        return "titan chat [--config FILE] [--hf DIR | --checkpoint step-N|PATH] [--system TEXT]\n"
               "           [--chat-template FILE] [--verbose] [--generate.max_new_tokens N] [--generate.* ...]\n"
               "  A conversation on stdin and stdout, with the model of titan generate --chat: each line\n"
               "  of stdin is a user message; the whole history is rendered with the chat template, the\n"
               "  reply is streamed to stdout as it comes, ends with a newline (flushed, so a program can\n"
               "  drive it through pipes) and joins the history. A line /reset clears the history (the\n"
               "  system message stays); blank lines are skipped; the end of stdin (Ctrl-D) ends the chat.\n"
               "  When the history and a reply of generate.max_new_tokens would exceed the model's\n"
               "  positions, the oldest exchanges are dropped (the system message stays), said on stderr.\n"
               "  A message that gets no reply (the template refuses it, it alone is too long) is said on\n"
               "  stderr and the chat goes on; the exit status is then 1.\n";
    if (!strcmp(cmd, "prepare"))
        return "titan prepare --out DIR [--tokenizer byte|tokenizer.json | --hf DIR] [--val-fraction F]\n"
               "              [--split-unit file|line] [--text-field text] [--on-error fail|skip] [--seed N]\n"
               "              [--no-progress] INPUT...\n"
               "  Tokenizes .txt files (one document each; with --split-unit line, one per non-empty line),\n"
               "  .jsonl and .jsonl.gz files (one document per line, in the text field), or folders of them,\n"
               "  on all cores, into DIR/train.bin and DIR/val.bin (val-fraction of the documents, in [0, 1),\n"
               "  default 0.01), for training.dataset_path and validation.dataset_path. A fraction that holds\n"
               "  out no document (one .txt file is one document) or all of them is an error. A malformed\n"
               "  line stops with its file and line number, or with --on-error skip is reported and skipped.\n"
               "titan prepare --chat --hf DIR [--chat-template FILE] [--train-on assistant|all] --out DIR FILE...\n"
               "  Conversations (.jsonl / .jsonl.gz, one a line: messages, ShareGPT or TRL prompt/completion)\n"
               "  rendered with the model's chat template, encoded with its tokenizer, and written as\n"
               "  conversation shards: the ids, which tokens are trained (by default every assistant turn's\n"
               "  reply and end-of-turn marker; all: every token), and where each conversation and turn\n"
               "  starts. A conversation with nothing to train is left out and counted; a template that\n"
               "  rewrites earlier turns (Qwen3) makes one sample per assistant turn, counted too.\n";
    if (!strcmp(cmd, "tokenize"))
        return "titan tokenize [--hf DIR | --tokenizer tokenizer.json] [--decode] [--no-special] [FILE...]\n"
               "titan tokenize --chat [--render | --mask] (--hf DIR | --chat-template FILE) [--add-generation-prompt]\n"
               "               [--train-on assistant|all] [FILE...]\n"
               "  Encodes each line of the files (or of stdin) and prints its token ids, separated by spaces,\n"
               "  one output line per input line, with a model folder's tokenizer.json (--hf), a given\n"
               "  tokenizer.json, or the byte tokenizer (the default). The special tokens the tokenizer adds\n"
               "  (BOS, ...) are included unless --no-special. --decode reads lines of ids (spaces or commas\n"
               "  between) and prints the text of each, special tokens included unless --no-special.\n"
               "  An id outside the vocabulary, or text that is not UTF-8, stops with the file and line.\n"
               "  --chat --render reads one conversation a line (.jsonl or .jsonl.gz: {\"messages\": [...],\n"
               "  \"tools\": [...]}, ShareGPT's {\"conversations\": [...]}, or TRL's prompt/completion) and\n"
               "  prints the text the model's chat template (tokenizer_config.json's chat_template or\n"
               "  chat_template.jinja of --hf DIR, or --chat-template FILE) renders, as transformers'\n"
               "  apply_chat_template does, one JSON string a line. A conversation the template rejects\n"
               "  prints {\"error\": \"...\"} on its line and the rest go on; a line that is not JSON stops.\n"
               "  --chat without --render prints each conversation's token ids (the rendered text encoded\n"
               "  without added special tokens, as transformers does); --mask prints two lines a sample:\n"
               "  the ids, then a 0/1 flag per id, 1 where the token is a training target (predicted from\n"
               "  the one before it). A conversation becomes one sample, or one per assistant turn when its\n"
               "  template rewrites earlier turns.\n";
    if (!strcmp(cmd, "export"))
        return "titan export [--config FILE] [--checkpoint step-N|PATH] --out DIR [--dtype float32|bfloat16|auto]\n"
               "             [--peft | --merge] [--checkpoint.hf_max_shard_mb MB]\n"
               "  Writes a checkpoint (default: the newest of job.dump_folder) as a Hugging Face folder:\n"
               "  config.json, model.safetensors (sharded past checkpoint.hf_max_shard_mb),\n"
               "  generation_config.json and tokenizer.json, which transformers loads. A model from a\n"
               "  Hugging Face folder also gets its tokenizer_config.json with the chat template,\n"
               "  chat_template.jinja and special_tokens_map.json (copied, or written from what the\n"
               "  folder has), and generation_config.json lists every end-of-turn id titan stops at.\n"
               "  --dtype sets checkpoint.export_dtype, the dtype of the weights written: bfloat16 rounds\n"
               "  each fp32 weight to nearest even; auto (the default) is model.hf_assets_path's dtype\n"
               "  when that is bfloat16, else float32.\n"
               "  A LoRA run's checkpoint (lora.rank > 0) is exported with --peft, its adapters as a PEFT\n"
               "  adapter folder (adapter_config.json, adapter_model.safetensors) that PeftModel loads, or\n"
               "  with --merge, the model with each adapter merged into its weight (W + alpha/r B A);\n"
               "  both carry the base folder's tokenizer files.\n";
    if (!strcmp(cmd, "report"))
        return "titan report RUN_DIR [RUN_DIR...] [--out FILE.html]\n"
               "  Writes one self-contained HTML page (no scripts, nothing fetched; default\n"
               "  RUN_DIR/report.html) of up to 10 runs' dump folders, one colour per run: plots of\n"
               "  loss and validation loss (with the corpus floor), learning rate, gradient norm,\n"
               "  tokens/s, MFU and memory over the logged steps (metrics.jsonl), and each run's\n"
               "  summary.json, plan.json, config.toml and per-op profile (the newest\n"
               "  profile_traces/iteration_N/rank0_trace.json). A run still in progress is fine;\n"
               "  what cannot be read is skipped and listed on the page.\n";
    if (!strcmp(cmd, "plan"))
        return "titan plan [--config FILE] [--json] [--section.key value ...]\n"
               "  Parameter count, FLOPs per token and the memory of params, grads, optimizer\n"
               "  state and activations (from the step graph's memory plan), without allocating.\n"
               "  --json prints the plan as the JSON a training run writes to plan.json.\n";
    if (!strcmp(cmd, "bench"))
        return "titan bench peak [--backend cpu|ref] [--seconds S]\n"
               "  Measures the device's fp32 and bf16 throughput (on the CPU: FMA and bf16 dot products\n"
               "  on all cores) and caches it;\n"
               "  MFU is computed against this peak unless metrics.peak_tflops is set. It also measures\n"
               "  the memory bandwidth (a triad over 192 MiB): with the peak, the roofline; and how\n"
               "  far apart two threads run (a cache line's round trip between them).\n"
               "titan bench step [--config FILE] [--steps N] [--warmup N] [--profile] [--trace FILE]\n"
               "                 [--host-check] [--section.key value ...]\n"
               "  Times the training step (forward, backward, AdamW) of a config on random tokens:\n"
               "  tokens/s, MFU, memory. --profile adds each op's and scope's share of the step\n"
               "  with its GFLOP/s and GB/s, each also as a fraction of the peak and of the memory\n"
               "  bandwidth (measured before the steps): the roofline; --trace writes a Chrome trace\n"
               "  JSON of one step. --host-check measures the peak loop, the memory bandwidth and\n"
               "  two threads' round trip before and after the steps (caching nothing) and prints\n"
               "  each step's time: a slow run beside slow loops is the host's.\n"
               "titan bench attention [--config FILE] [--reps N] [--section.key value ...]\n"
               "  Times the attention kernels (forward, backward) on the config's batch, sequence\n"
               "  and head shapes (bf16 when training.mixed_precision_param is bfloat16): the best\n"
               "  of N runs (5).\n"
               "titan bench gemm [--config FILE] [--dtype f32|bf16|both] [--seconds S] [MxNxK[:op] ...]\n"
               "  GFLOP/s of titan's GEMM beside OpenBLAS and oneDNN (when libdnnl is installed) on\n"
               "  square sizes and the products of the config's training step, or on the shapes\n"
               "  given (op: nn, nt, tn, tt for the transposes of A and B).\n";
    return NULL;
}

/* SIGINT and SIGTERM (Slurm's preemption) ask training to save and stop;
 * so does SIGUSR1, which mpirun forwards to every rank (on its own SIGTERM
 * mpirun ends the job instead, after a second). The ranks agree on the step. */
static void on_signal(int sig)
{
    (void)sig;
    tt_request_stop();
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

static int fail(const char *what)
{
    char rank[32] = ""; /* in a job of several processes, say which one failed */
    if (tt_process_world() > 1) snprintf(rank, sizeof rank, "rank %d: ", tt_process_rank());
    fprintf(stderr, "%stitan %s: error: %s\n", rank, what, tt_last_error());
    return 1;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--")) break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
    }
    return 0;
}

/* The config: built-in default job, then --config FILE, then overrides. */
static int load_config(tt_config *c, int argc, char **argv, int *n_rest, char **rest)
{
    int has_config = 0;
    for (int i = 0; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--config") || !strncmp(argv[i], "--config=", 9) || !strcmp(argv[i], "--job.config_file") ||
            !strncmp(argv[i], "--job.config_file=", 18))
            has_config = 1;
    tt_config_defaults(c);
    if (!has_config && tt_config_load_string(c, titan_default_config, strlen(titan_default_config),
                                             "configs/default.toml (built in)"))
        return -1;
    if (tt_config_parse_args(c, argc, argv, n_rest, rest)) return -1;
    return tt_config_finalize(c);
}

static int load_config(tt_config *c, int argc, char **argv, int *n_rest, char **rest);

/* A count option of command cmd ("bench step"): a whole number in [min, max], else an error that names it */
static int parse_count(const char *cmd, const char *flag, const char *v, int min, int max, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < min || x > max) {
        fprintf(stderr, "titan %s: %s must be a whole number in [%d, %d], got '%s'\n", cmd, flag, min, max, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int cmd_bench_step(int argc, char **argv)
{
    int steps = 10, warmup = 2, profile = 0, host_check = 0, n = 0;
    const char *trace = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    tt_config *c = calloc(1, sizeof *c);
    if (!rest || !c) return fail("bench step");
    for (int i = 0; i < argc; i++) { /* bench flags here, config keys to the config parser */
        if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (!strcmp(argv[i], "--host-check")) host_check = 1;
        else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i], profile = 1;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) {
            if (parse_count("bench step", "--steps", argv[++i], 1, 1000000, &steps)) return 2;
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            if (parse_count("bench step", "--warmup", argv[++i], 0, 1000000, &warmup)) return 2;
        } else rest[n++] = argv[i];
    }
    int rc = 0, n_rest = 0;
    if (load_config(c, n, rest, &n_rest, NULL) || tt_bench_step(c, steps, warmup, profile, host_check, trace, stdout))
        rc = fail("bench step");
    free(rest);
    free(c);
    return rc;
}

static int cmd_bench_attention(int argc, char **argv)
{
    int reps = 5, n = 0;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    tt_config *c = calloc(1, sizeof *c);
    int n_rest = 0, rc = 0;
    if (!rest || !c) rc = fail("bench attention");
    for (int i = 0; !rc && i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (parse_count("bench attention", "--reps", argv[++i], 1, 10000, &reps)) rc = 2;
        } else {
            rest[n++] = argv[i];
        }
    }
    if (!rc && (load_config(c, n, rest, &n_rest, NULL) || tt_bench_attention(c, reps, stdout))) rc = fail("bench attention");
    free(rest);
    free(c);
    return rc;
}

static int cmd_bench_gemm(int argc, char **argv)
{
    int dtypes = 3, n = 0, ns = 0;
    double seconds = 0.3;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    const char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    tt_config *c = calloc(1, sizeof *c);
    int rc = 0, n_rest = 0;
    if (!rest || !shapes || !c) rc = fail("bench gemm");
    for (int i = 0; i < argc && !rc; i++) { /* bench flags and shapes here, config keys to the config parser */
        const char *a = argv[i];
        if (!strcmp(a, "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            dtypes = !strcmp(d, "f32") ? 1 : !strcmp(d, "bf16") ? 2 : !strcmp(d, "both") ? 3 : 0;
            if (!dtypes) fprintf(stderr, "titan bench gemm: --dtype is f32, bf16 or both, not '%s'\n", d), rc = 2;
        } else if (!strcmp(a, "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0 && seconds <= 60))
                fprintf(stderr, "titan bench gemm: --seconds must be in (0, 60], got '%s'\n", argv[i]), rc = 2;
        } else if (a[0] >= '0' && a[0] <= '9') {
            shapes[ns++] = a;
        } else {
            rest[n++] = argv[i];
        }
    }
    if (!rc && (load_config(c, n, rest, &n_rest, NULL) || tt_bench_gemm(c, shapes, ns, dtypes, seconds, stdout)))
        rc = fail("bench gemm");
    free(rest);
    free(shapes);
    free(c);
    return rc;
}

static int cmd_prepare(int argc, char **argv)
{
    tt_prepare_opts o = {NULL, 0, NULL, "byte", "text", 0.01, 1234, 0, isatty(2), 0, 0, NULL, NULL, 0};
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    char tok[4200];
    const char *text_opt = NULL, *tok_opt = NULL; /* given on the command line: --chat refuses the first */
    if (!inputs) return fail("prepare");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--no-progress")) { o.progress = 0; continue; }
        if (!strcmp(a, "--chat")) { o.chat = 1; continue; }
        if (a[0] != '-' || !strcmp(a, "-")) { inputs[o.n_inputs++] = a; continue; }
        if (!v) { fprintf(stderr, "titan prepare: %s needs a value\n", a); free(inputs); return 2; }
        i++;
        if (!strcmp(a, "--out")) o.out_dir = v;
        else if (!strcmp(a, "--tokenizer")) o.tokenizer = tok_opt = v;
        else if (!strcmp(a, "--hf")) snprintf(tok, sizeof tok, "%s/tokenizer.json", v), o.tokenizer = tok, o.hf_dir = v;
        else if (!strcmp(a, "--chat-template")) o.chat_template = v;
        else if (!strcmp(a, "--train-on") && (!strcmp(v, "assistant") || !strcmp(v, "all"))) o.train_on_all = !strcmp(v, "all");
        else if (!strcmp(a, "--text-field")) o.text_field = text_opt = v;
        else if (!strcmp(a, "--val-fraction")) {
            o.val_fraction = strtod(v, &end);
            if (*end || end == v || !(o.val_fraction >= 0 && o.val_fraction < 1)) {
                fprintf(stderr, "titan prepare: --val-fraction is the share of documents held out for validation, in "
                                "[0, 1), not %s%s\n", v,
                        !*end && o.val_fraction >= 1 ? " (1 would leave nothing to train on; 0: no validation set)" : "");
                free(inputs);
                return 2;
            }
        } else if (!strcmp(a, "--split-unit") && (!strcmp(v, "file") || !strcmp(v, "line"))) o.split_lines = !strcmp(v, "line"), text_opt = a;
        else if (!strcmp(a, "--seed") && (o.seed = strtoull(v, &end, 10), !*end)) continue;
        else if (!strcmp(a, "--on-error") && (!strcmp(v, "skip") || !strcmp(v, "fail"))) o.on_error_skip = !strcmp(v, "skip");
        else {
            fprintf(stderr, "titan prepare: bad option %s %s (see titan prepare --help)\n", a, v);
            free(inputs);
            return 2;
        }
    }
    o.inputs = inputs;
    int rc = 0;
    if (o.chat) o.tokenizer = tok_opt; /* else the model folder's */
    if (!o.out_dir || !o.n_inputs) {
        fprintf(stderr, "titan prepare: needs --out DIR and at least one input (see titan prepare --help)\n");
        rc = 2;
    } else if (o.chat && text_opt) {
        fprintf(stderr, "titan prepare: --text-field and --split-unit do not go with --chat (a line is a conversation)\n");
        rc = 2;
    } else if (!o.chat && (o.chat_template || o.train_on_all)) {
        fprintf(stderr, "titan prepare: --chat-template and --train-on go with --chat\n");
        rc = 2;
    } else if (tt_prepare(&o, stdout)) {
        rc = fail("prepare");
    }
    free(inputs);
    return rc;
}

static int cmd_tokenize(int argc, char **argv)
{
    tt_tokenize_opts o = {"byte", NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL};
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    char tok[4200];
    int flags_done = 0, rc = 0, n_tok = 0, chat = 0;
    if (!inputs) return fail("tokenize");
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (flags_done || a[0] != '-' || !strcmp(a, "-")) inputs[o.n_inputs++] = a;
        else if (!strcmp(a, "--")) flags_done = 1;
        else if (!strcmp(a, "--decode")) o.decode = 1;
        else if (!strcmp(a, "--no-special")) o.no_special = 1;
        else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--render")) o.render = 1;
        else if (!strcmp(a, "--mask")) o.mask = 1;
        else if (!strcmp(a, "--train-on") && i + 1 < argc && (!strcmp(argv[i + 1], "assistant") || !strcmp(argv[i + 1], "all")))
            o.train_on_all = !strcmp(argv[++i], "all");
        else if (!strcmp(a, "--add-generation-prompt")) o.add_generation_prompt = 1;
        else if (!strcmp(a, "--chat-template") && i + 1 < argc) o.chat_template = argv[++i];
        else if ((!strcmp(a, "--hf") || !strcmp(a, "--tokenizer")) && i + 1 < argc) {
            if (!strcmp(a, "--hf")) o.hf_dir = argv[i + 1], snprintf(tok, sizeof tok, "%s/tokenizer.json", argv[++i]), o.tokenizer = tok;
            else o.tokenizer = argv[++i];
            n_tok++;
        } else {
            fprintf(stderr, "titan tokenize: %s %s (see titan tokenize --help)\n",
                    !strcmp(a, "--hf") || !strcmp(a, "--tokenizer") || !strcmp(a, "--chat-template") ? "needs a value:"
                                                                                                     : "unknown option",
                    a);
            rc = 2;
        }
    }
    if (!rc && n_tok > 1) {
        fprintf(stderr, "titan tokenize: give one tokenizer (--hf DIR or --tokenizer FILE)\n");
        rc = 2;
    }
    if (!rc && !chat && (o.render || o.mask || o.add_generation_prompt || o.chat_template || o.train_on_all)) {
        fprintf(stderr, "titan tokenize: --render, --mask, --add-generation-prompt, --chat-template and --train-on go "
                        "with --chat\n");
        rc = 2;
    }
    if (!rc && o.render && o.mask) {
        fprintf(stderr, "titan tokenize: --render prints text and --mask prints ids: give one\n");
        rc = 2;
    }
    o.inputs = inputs;
    if (!rc && chat && tt_tokenize_chat(&o, stdin, stdout)) rc = fail("tokenize");
    else if (!rc && !chat && tt_tokenize(&o, stdin, stdout)) rc = fail("tokenize");
    free(inputs);
    return rc;
}

static int cmd_report(int argc, char **argv)
{
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs), *out = NULL;
    char def[4200];
    int n = 0, rc = 0;
    if (!dirs) return fail("report");
    for (int i = 0; i < argc && !rc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-')
            fprintf(stderr, "titan report: unknown option %s (see titan help report)\n", argv[i]), rc = 2;
        else dirs[n++] = argv[i];
    }
    if (!rc && !n) fprintf(stderr, "titan report: give at least one run folder (see titan help report)\n"), rc = 2;
    if (!rc && !out) { /* RUN_DIR/report.html */
        size_t l = strlen(dirs[0]);
        snprintf(def, sizeof def, "%s%sreport.html", dirs[0], l && dirs[0][l - 1] == '/' ? "" : "/");
        out = def;
    }
    if (!rc && tt_report(dirs, n, out, stdout)) rc = fail("report");
    free(dirs);
    return rc;
}

static int cmd_bench(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "step")) return cmd_bench_step(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "attention")) return cmd_bench_attention(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "gemm")) return cmd_bench_gemm(argc - 1, argv + 1);
    if (argc < 1 || strcmp(argv[0], "peak")) {
        fprintf(stderr, "titan bench: unknown benchmark '%s' (available: peak, step, attention, gemm)\n", argc ? argv[0] : "");
        return 2;
    }
    double seconds = 1.0;
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end || !(seconds > 0 && seconds <= 60)) {
                fprintf(stderr, "titan bench peak: --seconds must be a number in (0, 60], got '%s'\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "titan bench peak: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (tt_bench_peak(backend, seconds, stdout)) return fail("bench peak");
    return 0;
}

/* --checkpoint step-N (in job.dump_folder's checkpoint folder), a path to a
 * step-N folder, or a path to a folder of them (its newest). */
static int select_checkpoint(tt_config *c, const char *arg)
{
    char buf[4096], step[32], tail;
    long n;
    if (!strchr(arg, '/')) {
        if (sscanf(arg, "step-%ld%c", &n, &tail) != 1 || n < 0)
            return tt_config_set(c, "checkpoint.load_step", arg, "--checkpoint (expected step-N or a path)");
        snprintf(step, sizeof step, "%ld", n);
        return tt_config_set(c, "checkpoint.load_step", step, "--checkpoint");
    }
    if (!realpath(arg, buf)) return tt_config_set(c, "checkpoint.load_step", arg, "--checkpoint (no such folder)");
    char *slash = strrchr(buf, '/');
    if (slash && slash != buf && sscanf(slash + 1, "step-%ld%c", &n, &tail) == 1 && n >= 0) {
        *slash = 0;
        snprintf(step, sizeof step, "%ld", n);
        if (tt_config_set(c, "checkpoint.load_step", step, "--checkpoint")) return -1;
    }
    return tt_config_set(c, "checkpoint.folder", buf, "--checkpoint");
}

static int run_command(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        if (argc >= 3 && !strcmp(argv[1], "help") && !strcmp(argv[2], "keys")) {
            tt_config_print_help(stdout);
            return 0;
        }
        if (argc >= 3 && !strcmp(argv[1], "help") && command_help(argv[2])) {
            fputs(command_help(argv[2]), stdout);
            return 0;
        }
        fputs(usage_text, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    int sub_argc = argc - 2;
    char **sub_argv = argv + 2;
    if (!command_help(cmd)) {
        fprintf(stderr, "titan: unknown command '%s'\n\n%s", cmd, usage_text);
        return 2;
    }
    if (wants_help(sub_argc, sub_argv)) {
        fputs(command_help(cmd), stdout);
        return 0;
    }
    if (!strcmp(cmd, "bench")) return cmd_bench(sub_argc, sub_argv);
    if (!strcmp(cmd, "prepare")) return cmd_prepare(sub_argc, sub_argv);
    if (!strcmp(cmd, "report")) return cmd_report(sub_argc, sub_argv);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(sub_argc, sub_argv);

    /* --hf (generate, chat), --checkpoint (generate, chat, export), --out and --dtype (export), --json
     * (plan) and the chat flags (generate, chat) are command flags, not config keys (--dtype sets
     * checkpoint.export_dtype) */
    const char *hf = NULL, *ckpt = NULL, *out_dir = NULL, *dtype = NULL;
    char **args = calloc((size_t)sub_argc + 1, sizeof *args);
    int n_args = 0, is_chat = !strcmp(cmd, "chat"), is_gen = !strcmp(cmd, "generate") || is_chat,
        is_export = !strcmp(cmd, "export"), json = 0, peft = 0, merge = 0, chat = is_chat;
    tt_chat_opts co = {NULL, NULL, 0};
    if (!args) return fail(cmd);
    for (int i = 0; i < sub_argc; i++) {
        if (is_gen && (!strcmp(sub_argv[i], "--chat") || !strcmp(sub_argv[i], "--verbose"))) {
            *(sub_argv[i][2] == 'c' ? &chat : &co.verbose) = 1;
            continue;
        }
        if (!strcmp(cmd, "plan") && !strcmp(sub_argv[i], "--json")) {
            json = 1;
            continue;
        }
        if (is_export && (!strcmp(sub_argv[i], "--peft") || !strcmp(sub_argv[i], "--merge"))) {
            *(sub_argv[i][2] == 'p' ? &peft : &merge) = 1;
            continue;
        }
        const char **slot = is_gen && !strcmp(sub_argv[i], "--hf") ? &hf
                          : (is_gen || is_export) && !strcmp(sub_argv[i], "--checkpoint") ? &ckpt
                          : is_export && !strcmp(sub_argv[i], "--out") ? &out_dir
                          : is_export && !strcmp(sub_argv[i], "--dtype") ? &dtype
                          : is_gen && !strcmp(sub_argv[i], "--system") ? &co.system
                          : is_gen && !strcmp(sub_argv[i], "--chat-template") ? &co.chat_template : NULL;
        if (!slot) {
            args[n_args++] = sub_argv[i];
        } else if (i + 1 < sub_argc) {
            *slot = sub_argv[++i];
        } else {
            fprintf(stderr, "titan %s: %s needs a value\n", cmd, sub_argv[i]);
            free(args);
            return 2;
        }
    }
    if (is_gen && !chat && (co.system || co.chat_template || co.verbose)) {
        fprintf(stderr, "titan generate: --system, --chat-template and --verbose go with --chat\n");
        free(args);
        return 2;
    }
    tt_config *c = calloc(1, sizeof *c);
    char **rest = calloc((size_t)sub_argc + 1, sizeof *rest);
    int n_rest = 0, rc = 0;
    if (!c || !rest) return fail(cmd);
    if (load_config(c, n_args, args, &n_rest, is_gen ? rest : NULL) ||
        (hf && tt_config_set(c, "model.hf_assets_path", hf, "--hf")) || (ckpt && select_checkpoint(c, ckpt)) ||
        (dtype && tt_config_set(c, "checkpoint.export_dtype", dtype, "--dtype"))) {
        rc = fail(cmd);
    } else if (!strcmp(cmd, "train")) {
        catch_stop_signals();
        if (tt_train(c)) rc = fail(cmd);
    } else if (!strcmp(cmd, "eval")) {
        double loss, ppl;
        long tokens;
        if (tt_eval(c, &loss, &ppl, &tokens)) rc = fail(cmd);
    } else if (is_chat) {
        if (n_rest) {
            fprintf(stderr, "titan chat: the messages come on stdin, one a line: unexpected argument '%s'\n", rest[0]);
            rc = 2;
        } else if (tt_chat(c, &co, hf && !ckpt, stdin, stdout, stderr)) {
            rc = fail(cmd);
        }
    } else if (!strcmp(cmd, "generate")) {
        const char *prompt = n_rest ? rest[0] : c->generate.prompt;
        if (n_rest > 1) {
            fprintf(stderr, "titan generate: give one %s (quote it), got %d arguments\n", chat ? "message" : "prompt",
                    n_rest);
            rc = 2;
        } else if (chat ? tt_generate_chat(c, &co, prompt, hf && !ckpt, stdout, stderr)
                        : tt_generate(c, prompt, hf && !ckpt, stdout)) {
            rc = fail(cmd);
        }
    } else if (is_export) {
        if (peft && merge) {
            fprintf(stderr, "titan export: --peft and --merge are two exports: give one\n");
            rc = 2;
        } else if (!out_dir) {
            fprintf(stderr, "titan export: --out DIR is required\n");
            rc = 2;
        } else if (tt_export(c, peft ? TT_EXPORT_PEFT : merge ? TT_EXPORT_MERGED : TT_EXPORT_HF, out_dir)) {
            rc = fail(cmd);
        }
    } else if (!strcmp(cmd, "plan")) {
        if (json ? tt_plan_json(c, stdout) : tt_plan(c, stdout)) rc = fail(cmd);
    }
    free(args);
    free(rest);
    free(c);
    return rc;
}

int main(int argc, char **argv)
{
    tt_openmp_wait_default(argv); /* before anything runs: it may execute titan again */
    int rc = run_command(argc, argv);
    if (rc) tt_abort_job(rc); /* under mpirun: a failure here ends the others now, not at their watchdog */
    tt_shutdown();            /* on every path: under mpirun, ends MPI on this rank */
    return rc;
}

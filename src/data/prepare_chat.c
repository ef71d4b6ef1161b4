/* prepare_chat.c — `titan prepare --chat`: conversations (.jsonl / .jsonl.gz, one a line) rendered
 * with the model's chat template, encoded, flagged (what is trained) and written as conversation
 * shards (shard.h, version 2), on all cores, in input order. Every conversation that is left out
 * is counted, and every error names the file and line. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat/chat_sample.h"
#include "chat/chat_template.h"
#include "core/core.h"
#include "data/prepare_internal.h"
#include "data/shard.h"
#include "tokenizer/tokenizer.h"

/* One input line's outcome, made on a worker thread. */
typedef struct {
    char *text;
    size_t len;
    long line;
    tt_err rc;
    char err[640];
    int raised;          /* the template's own raise_exception */
    tt_chat_samples ss;  /* its samples as text */
    tt_chat_tokens *tk;  /* (ss.n,) the same in tokens */
} conv;

typedef struct {
    const tt_prepare_opts *o;
    const tt_tokenizer *tok;
    const tt_chat_template *t;
    const tt_chat_specials *sp;
} chat_ctx;

static void conv_clear(conv *c)
{
    for (int i = 0; c->tk && i < c->ss.n; i++) tt_chat_tokens_free(&c->tk[i]);
    free(c->tk);
    tt_chat_samples_free(&c->ss);
    free(c->text);
    memset(c, 0, sizeof *c);
}

/* Parse, render, encode and flag one line (on any thread). */
static void make_conv(const chat_ctx *x, conv *c)
{
    cJSON *root = tt_chat_parse_line(c->text, c->len), *messages = NULL;
    const cJSON *tools = NULL;
    int first = 0;
    c->rc = root ? 0 : -1;
    if (!c->rc)
        c->rc = tt_chat_json_keep_numbers(root, c->text, c->len) ||
                tt_chat_conversation_of(root, &messages, &tools, &first);
    if (!c->rc)
        c->rc = tt_chat_samples_of(x->t, x->sp, messages, tools, first,
                                   x->o->train_on_all ? TT_CHAT_TRAIN_ALL : TT_CHAT_TRAIN_ASSISTANT, &c->ss, &c->raised);
    if (!c->rc && c->ss.n && !(c->tk = calloc((size_t)c->ss.n, sizeof *c->tk))) c->rc = tt_errorf("out of memory");
    for (int i = 0; !c->rc && i < c->ss.n; i++) c->rc = tt_chat_tokens_of(x->tok, &c->ss.s[i], &c->tk[i]);
    if (c->rc) snprintf(c->err, sizeof c->err, "%s", tt_last_error());
    cJSON_Delete(messages);
    cJSON_Delete(root);
}

typedef struct {
    uint64_t convs[2], samples[2], tokens[2], trained[2];
    uint64_t per_turn_convs, per_turn_samples, nothing, skipped, index;
} chat_counts;

/* Write one line's samples (in order, on the main thread): the conversation goes to train or val
 * whole, by its index. */
static tt_err write_conv(const chat_ctx *x, tt_shard_writer *w[2], const char *path, conv *c, chat_counts *k)
{
    if (c->rc) {
        const char *what = c->raised ? "the chat template raised" : "";
        if (x->o->on_error_skip) {
            fprintf(stderr, "%s%s:%ld: %s%s%s: skipped\n", x->o->progress ? "\n" : "", path, c->line, what,
                    *what ? ": " : "", c->err);
            k->skipped++;
            return 0;
        }
        return tt_errorf("%s:%ld: %s%s%s (use --on-error skip to skip such lines)", path, c->line, what,
                         *what ? ": " : "", c->err);
    }
    const int s = tt_prep_held_out(x->o, k->index++);
    if (c->ss.n == 0) {
        k->nothing++;
        return 0;
    }
    int written = 0;
    for (int i = 0; i < c->ss.n; i++) {
        const tt_chat_tokens *tk = &c->tk[i];
        if (tk->n_trained == 0) continue; /* what was trained lay in no token's first byte */
        if (tk->prefix > UINT32_MAX) return tt_errorf("%s:%ld: a system prompt of %llu tokens", path, c->line,
                                                      (unsigned long long)tk->prefix);
        if (tt_shard_writer_append_doc(w[s], tk->ids, tk->mask, tk->n, (uint32_t)tk->prefix, tk->cut, tk->n_cuts))
            return tt_error_prefix("%s:%ld: ", path, c->line);
        k->samples[s]++;
        k->tokens[s] += tk->n;
        k->trained[s] += (uint64_t)tk->n_trained;
        written++;
    }
    if (!written) { /* what it trains lay inside tokens that start before it */
        k->nothing++;
        return 0;
    }
    if (c->ss.per_turn) k->per_turn_convs++, k->per_turn_samples += (uint64_t)written;
    k->convs[s]++;
    return 0;
}

/* Read a batch of lines, make them on all cores, write them in order. */
static tt_err run_file(const chat_ctx *x, tt_shard_writer *w[2], const char *path, chat_counts *k, uint64_t base,
                       uint64_t total, double t0)
{
    enum { BATCH = 256 };
    tt_prep_reader r = {gzopen(path, "rb"), tt_prep_kind_of(path), path, 0, NULL, 0};
    if (!r.gz) return tt_errorf("%s: cannot open: %s", path, strerror(errno));
    gzbuffer(r.gz, 1 << 20);
    conv *cs = calloc(BATCH, sizeof *cs);
    tt_err rc = cs ? 0 : tt_errorf("out of memory");
    double last = 0;
    for (int more = 1; more && !rc;) {
        int n = 0;
        while (n < BATCH) {
            size_t len = 0;
            int got = tt_prep_read_line(&r, &len);
            if (got < 0) rc = -1;
            if (got <= 0) {
                more = 0;
                break;
            }
            while (len && (r.buf[len - 1] == '\r' || r.buf[len - 1] == ' ' || r.buf[len - 1] == '\t')) len--;
            if (len == 0) continue; /* blank lines are skipped */
            if (!(cs[n].text = malloc(len + 1))) {
                rc = tt_errorf("out of memory");
                break;
            }
            memcpy(cs[n].text, r.buf, len), cs[n].text[len] = 0;
            cs[n].len = len;
            cs[n].line = r.line;
            n++;
        }
#pragma omp parallel for schedule(dynamic, 1)
        for (int i = 0; i < n; i++) make_conv(x, &cs[i]);
        for (int i = 0; i < n; i++) {
            if (!rc) rc = write_conv(x, w, path, &cs[i], k);
            conv_clear(&cs[i]);
        }
        double now = tt_now();
        if (x->o->progress && now - last > 0.1) {
            tt_prep_progress(base + (uint64_t)gzoffset(r.gz), total, t0, 0);
            last = now;
        }
    }
    free(cs);
    gzclose(r.gz);
    free(r.buf);
    return rc;
}

static void report(FILE *log, const chat_counts *k, char path[2][4200])
{
    static const char *const name[2] = {"train", "val"};
    for (int s = 0; s < 2; s++)
        fprintf(log, "%-5s  %llu conversations, %llu samples, %llu tokens, %llu trained (%.1f%%) -> %s\n", name[s],
                (unsigned long long)k->convs[s], (unsigned long long)k->samples[s], (unsigned long long)k->tokens[s],
                (unsigned long long)k->trained[s], k->tokens[s] ? 100.0 * (double)k->trained[s] / (double)k->tokens[s] : 0,
                path[s]);
    if (k->per_turn_convs)
        fprintf(log, "the template rewrites earlier turns: %llu conversations became %llu samples, one per assistant "
                     "turn\n",
                (unsigned long long)k->per_turn_convs, (unsigned long long)k->per_turn_samples);
    if (k->nothing) fprintf(log, "left out %llu conversations with nothing to train\n", (unsigned long long)k->nothing);
    if (k->skipped) fprintf(log, "skipped %llu lines (listed above)\n", (unsigned long long)k->skipped);
}

tt_err tt_prepare_chat(const tt_prepare_opts *o, FILE *log)
{
    tt_prep_files fl = {0};
    tt_tokenizer *tok = NULL;
    tt_chat_template *t = NULL;
    tt_chat_specials sp = {0};
    tt_shard_writer *w[2] = {NULL, NULL};
    chat_counts k = {0};
    tt_err rc = 0;
    char tok_path[4200];
    for (int i = 0; i < o->n_inputs && !rc; i++) rc = tt_prep_add_path(&fl, o->inputs[i], 1);
    for (int f = 0; f < fl.n && !rc; f++)
        if (tt_prep_kind_of(fl.paths[f]) == 1)
            rc = tt_errorf("%s: --chat reads conversations from .jsonl or .jsonl.gz files, one a line", fl.paths[f]);
    if (!rc && fl.n == 0) rc = tt_errorf("no .jsonl or .jsonl.gz files in the inputs");
    if (!rc && !(o->val_fraction >= 0 && o->val_fraction < 1))
        rc = tt_errorf("--val-fraction %g must be in [0, 1)", o->val_fraction);
    if (!rc && !o->hf_dir && !o->tokenizer) rc = tt_errorf("--chat needs the model folder (--hf DIR) or --tokenizer");
    if (rc) goto done;
    if (o->tokenizer) snprintf(tok_path, sizeof tok_path, "%s", o->tokenizer);
    else snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", o->hf_dir);
    tok = !strcmp(tok_path, "byte") ? tt_tokenizer_byte_new() : tt_tokenizer_load(tok_path);
    if (!tok || tt_chat_template_open(o->hf_dir, o->chat_template, &t, &sp)) {
        rc = -1;
        goto done;
    }
    const int V = tt_tokenizer_vocab_size(tok), bos = tt_tokenizer_bos_id(tok), eos = tt_tokenizer_eos_id(tok);
    const uint32_t pad = (uint32_t)(bos >= 0 ? bos : eos >= 0 ? eos : 0); /* what fills a window's end */
    const uint32_t width = V <= 65536 ? 2 : 4;
    char path[2][4200];
    if (tt_prep_out_paths(o, path)) {
        rc = -1;
        goto done;
    }
    for (int s = 0; s < 2 && !rc; s++)
        if (!(w[s] = tt_shard_writer_open_chat(path[s], width, pad, (uint32_t)V))) rc = -1;
    const chat_ctx x = {o, tok, t, &sp};
    uint64_t base = 0;
    const double t0 = tt_now();
    for (int f = 0; f < fl.n && !rc; f++) {
        rc = run_file(&x, w, fl.paths[f], &k, base, fl.bytes, t0);
        struct stat st;
        if (stat(fl.paths[f], &st) == 0) base += (uint64_t)st.st_size;
    }
    if (rc) goto done;
    if (o->progress) tt_prep_progress(fl.bytes, fl.bytes, t0, 1);
    const uint64_t n = k.convs[0] + k.convs[1];
    if (n == 0) {
        rc = tt_errorf("no conversation in the inputs has anything to train (%llu left out with nothing to train, "
                       "%llu skipped)%s",
                       (unsigned long long)k.nothing, (unsigned long long)k.skipped,
                       o->train_on_all ? "" : "; --train-on all trains every token");
        goto done;
    }
    if (o->val_fraction > 0 && (k.convs[0] == 0 || k.convs[1] == 0)) {
        rc = tt_prep_split_error(o, n, k.convs[1] == 0, 0);
        goto done;
    }
    for (int s = 0; s < 2 && !rc; s++) {
        rc = tt_shard_writer_close(w[s]);
        w[s] = NULL;
    }
    if (!rc) report(log, &k, path);
done:
    for (int s = 0; s < 2; s++)
        if (w[s]) tt_shard_writer_abort(w[s]);
    tt_chat_template_free(t);
    tt_chat_specials_free(&sp);
    tt_tokenizer_free(tok);
    for (int i = 0; i < fl.n; i++) free(fl.paths[i]);
    free(fl.paths);
    return rc;
}

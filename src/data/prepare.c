/* prepare.c — `titan prepare`: tokenize users' .txt, .jsonl and .jsonl.gz
 * files (or folders of them) into token shards, on all cores, with a
 * progress line, holding out a validation fraction. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/prepare_internal.h"
#include "data/shard.h"
#include "tokenizer/tokenizer.h"
#include "titan/titan.h"
#include "core/core.h"

typedef struct {
    char *text;
    size_t len;
    long line; /* its line in the file; 0: the whole file */
} doc;

typedef struct {
    const tt_prepare_opts *o;
    long skipped;
} prep_state;

/* Append the next document of r to docs[*n]; 0 when the file is done. */
static int next_doc(prep_state *ps, tt_prep_reader *r, doc *d)
{
    while (r->kind == 1 && ps->o->split_lines) { /* each non-empty line of a .txt file is a document */
        size_t len = 0;
        int rc = tt_prep_read_line(r, &len);
        if (rc <= 0) return rc;
        if (len > 0 && r->buf[len - 1] == '\r') r->buf[--len] = 0; /* a CRLF file */
        if (len == 0) continue;
        if (!(d->text = malloc(len + 1))) return tt_errorf("out of memory");
        memcpy(d->text, r->buf, len + 1);
        d->len = len;
        d->line = r->line;
        return 1;
    }
    if (r->kind == 1) { /* a .txt file is one document */
        if (r->line < 0) return 0;
        size_t n = 0, cap = 1 << 16;
        char *t = malloc(cap);
        if (!t) return tt_errorf("out of memory");
        for (;;) {
            if (cap - n < 65536) {
                char *p = realloc(t, cap *= 2);
                if (!p) {
                    free(t);
                    return tt_errorf("out of memory reading %s", r->path);
                }
                t = p;
            }
            int got = gzread(r->gz, t + n, 65536);
            if (got < 0) {
                int err;
                free(t);
                return tt_errorf("%s: %s", r->path, gzerror(r->gz, &err));
            }
            if (got == 0) break;
            n += (size_t)got;
        }
        r->line = -1;
        d->text = t;
        d->len = n;
        d->line = 0;
        return 1;
    }
    for (;;) { /* .jsonl: one object per line, the text in its text field */
        size_t len = 0;
        int rc = tt_prep_read_line(r, &len);
        if (rc <= 0) return rc;
        if (len == 0) continue;
        cJSON *j = cJSON_ParseWithLength(r->buf, len);
        cJSON *f = j ? cJSON_GetObjectItemCaseSensitive(j, ps->o->text_field) : NULL;
        if (!cJSON_IsString(f)) {
            char why[160];
            snprintf(why, sizeof why, !j ? "malformed JSON" : !f ? "no field '%s'" : "field '%s' is not a string",
                     ps->o->text_field);
            cJSON_Delete(j);
            if (ps->o->on_error_skip) {
                fprintf(stderr, "%s%s:%ld: %s: skipped\n", ps->o->progress ? "\n" : "", r->path, r->line, why);
                ps->skipped++;
                continue;
            }
            return tt_errorf("%s:%ld: %s (use --on-error skip to skip such lines)", r->path, r->line, why);
        }
        d->len = strlen(f->valuestring);
        d->line = r->line;
        d->text = malloc(d->len + 1);
        if (d->text) memcpy(d->text, f->valuestring, d->len + 1);
        cJSON_Delete(j);
        return d->text ? 1 : tt_errorf("out of memory");
    }
}

/* ---- the whole job ------------------------------------------------------------- */
tt_err tt_prepare(const tt_prepare_opts *o, FILE *log)
{
    if (o->chat) return tt_prepare_chat(o, log);
    tt_prep_files fl = {0};
    tt_tokenizer *tok = NULL;
    tt_shard_writer *w[2] = {NULL, NULL};
    prep_state ps = {o, 0};
    tt_err rc = 0;
    for (int i = 0; i < o->n_inputs && !rc; i++) rc = tt_prep_add_path(&fl, o->inputs[i], 1);
    if (!rc && fl.n == 0) rc = tt_errorf("no .txt, .jsonl or .jsonl.gz files in the inputs");
    if (!rc && !(o->val_fraction >= 0 && o->val_fraction < 1))
        rc = tt_errorf("--val-fraction %g must be in [0, 1): %s", o->val_fraction,
                       o->val_fraction >= 1 ? "1 would leave nothing to train on" : "it is a share of the documents");
    if (rc) goto done;
    int has_txt = 0, only_txt = 1;
    for (int f = 0; f < fl.n; f++) {
        has_txt |= tt_prep_kind_of(fl.paths[f]) == 1;
        only_txt &= tt_prep_kind_of(fl.paths[f]) == 1;
    }
    if (only_txt && !o->split_lines && o->val_fraction > 0) {
        /* one document per file: the split is known before reading a byte */
        uint64_t held = 0;
        for (int f = 0; f < fl.n; f++) held += tt_prep_held_out(o, (uint64_t)f);
        if (held == 0 || held == (uint64_t)fl.n) {
            rc = tt_prep_split_error(o, (uint64_t)fl.n, held == 0, 1);
            goto done;
        }
    }
    tok = !o->tokenizer || !strcmp(o->tokenizer, "byte") ? tt_tokenizer_byte_new() : tt_tokenizer_load(o->tokenizer);
    if (!tok) {
        rc = -1;
        goto done;
    }
    int V = tt_tokenizer_vocab_size(tok), bos = tt_tokenizer_bos_id(tok), eos = tt_tokenizer_eos_id(tok);
    /* every document starts with the shard's delimiter: BOS, or EOS when the
     * tokenizer has no BOS (GPT-2's <|endoftext|>) */
    int delim = bos >= 0 ? bos : eos;
    if (delim < 0) {
        rc = tt_errorf("%s: the tokenizer has neither a BOS nor an EOS token to separate documents", o->tokenizer);
        goto done;
    }
    uint32_t width = V <= 65536 ? 2 : 4;
    char path[2][4200];
    if (tt_prep_out_paths(o, path)) {
        rc = -1;
        goto done;
    }
    for (int s = 0; s < 2; s++)
        if (!(w[s] = tt_shard_writer_open(path[s], width, (uint32_t)delim, (uint32_t)V))) {
            rc = -1;
            goto done;
        }

    /* Read a batch of documents, tokenize them on all cores, write them in order. */
    enum { BATCH = 256 };
    doc docs[BATCH];
    int32_t *ids[BATCH] = {0};
    size_t n_ids[BATCH], cap_ids[BATCH] = {0};
    tt_err doc_rc[BATCH];
    char (*doc_err)[512] = malloc(BATCH * sizeof *doc_err); /* errors happen on worker threads */
    uint64_t file_base = 0;
    if (!doc_err) {
        rc = tt_errorf("out of memory");
        goto done;
    }
    uint64_t n_docs[2] = {0, 0}, n_tokens[2] = {0, 0}, bytes_in = 0, doc_index = 0;
    double t0 = tt_now(), last = 0;
    for (int f = 0; f < fl.n && !rc; f++) {
        tt_prep_reader r = {gzopen(fl.paths[f], "rb"), tt_prep_kind_of(fl.paths[f]), fl.paths[f], 0, NULL, 0};
        if (!r.gz) {
            rc = tt_errorf("%s: cannot open", fl.paths[f]);
            break;
        }
        gzbuffer(r.gz, 1 << 20);
        for (int more = 1; more && !rc;) {
            int n = 0;
            while (n < BATCH) {
                int got = next_doc(&ps, &r, &docs[n]);
                if (got < 0) rc = -1;
                if (got <= 0) {
                    more = 0;
                    break;
                }
                n++;
            }
#pragma omp parallel for schedule(dynamic, 1)
            for (int i = 0; i < n; i++) {
                doc_rc[i] = tt_tokenizer_encode(tok, docs[i].text, docs[i].len, 0, &ids[i], &n_ids[i], &cap_ids[i]);
                if (doc_rc[i]) snprintf(doc_err[i], sizeof doc_err[i], "%s", tt_last_error());
            }
            for (int i = 0; i < n; i++) {
                if (!rc && doc_rc[i]) {
                    if (docs[i].line) rc = tt_errorf("%s:%ld: %s", fl.paths[f], docs[i].line, doc_err[i]);
                    else rc = tt_errorf("%s: %s", fl.paths[f], doc_err[i]);
                }
                if (!rc && n_ids[i] > 0) {
                    int s = tt_prep_held_out(o, doc_index);
                    int32_t d = delim;
                    rc = tt_shard_writer_append(w[s], &d, 1);
                    if (!rc) rc = tt_shard_writer_append(w[s], ids[i], n_ids[i]);
                    if (!rc && eos >= 0 && eos != delim) {
                        int32_t e = eos;
                        rc = tt_shard_writer_append(w[s], &e, 1);
                    }
                    n_docs[s]++;
                    n_tokens[s] += n_ids[i] + 1 + (eos >= 0 && eos != delim);
                }
                doc_index++;
                bytes_in += docs[i].len;
                free(docs[i].text);
            }
            double now = tt_now();
            if (o->progress && now - last > 0.1) {
                tt_prep_progress(file_base + (uint64_t)gzoffset(r.gz), fl.bytes, t0, 0);
                last = now;
            }
        }
        gzclose(r.gz);
        free(r.buf);
        struct stat st;
        if (stat(fl.paths[f], &st) == 0) file_base += (uint64_t)st.st_size;
    }
    for (int i = 0; i < BATCH; i++) free(ids[i]);
    free(doc_err);
    if (rc) goto done;
    if (o->progress) tt_prep_progress(fl.bytes, fl.bytes, t0, 1);
    /* on an error the writers are aborted: no shard is left behind */
    if (n_docs[0] + n_docs[1] == 0) {
        rc = tt_errorf("the inputs hold no text (%d files, every one empty%s)", fl.n,
                       ps.skipped ? " or skipped" : "");
        goto done;
    }
    if (o->val_fraction > 0 && (n_docs[0] == 0 || n_docs[1] == 0)) {
        rc = tt_prep_split_error(o, n_docs[0] + n_docs[1], n_docs[1] == 0, has_txt);
        goto done;
    }
    for (int s = 0; s < 2; s++) {
        rc = tt_shard_writer_close(w[s]);
        w[s] = NULL;
        if (rc) goto done;
    }
    double el = tt_now() - t0;
    fprintf(log, "prepared %d files, %.1f MB of text in %.2f s (%.1f MB/s, %d threads)\n", fl.n, bytes_in / 1e6, el,
            bytes_in / 1e6 / (el > 0 ? el : 1), tt_num_threads());
    fprintf(log, "train: %llu documents, %llu tokens, %llu bytes -> %s\n", (unsigned long long)n_docs[0],
            (unsigned long long)n_tokens[0], (unsigned long long)(32 + n_tokens[0] * width), path[0]);
    fprintf(log, "val:   %llu documents, %llu tokens, %llu bytes -> %s\n", (unsigned long long)n_docs[1],
            (unsigned long long)n_tokens[1], (unsigned long long)(32 + n_tokens[1] * width), path[1]);
    if (ps.skipped) fprintf(log, "skipped %ld malformed lines (listed above)\n", ps.skipped);
done:
    for (int s = 0; s < 2; s++)
        if (w[s]) tt_shard_writer_abort(w[s]);
    tt_tokenizer_free(tok);
    for (int i = 0; i < fl.n; i++) free(fl.paths[i]);
    free(fl.paths);
    return rc;
}

/* prepare.c — `titan prepare`: tokenize users' .txt, .jsonl and .jsonl.gz
 * files (or folders of them) into token shards, on all cores, with a
 * progress line, holding out a validation fraction. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/shard.h"
#include "tokenizer/tokenizer.h"
#include "titan/titan.h"
#include "core/core.h"

/* Documents are held out by a hash of (seed, document index): reproducible,
 * and independent of how many threads or batches there were. */
static int held_out(const tt_prepare_opts *o, uint64_t doc_index)
{
    return (double)(tt_hash64(o->seed, doc_index) >> 11) * 0x1p-53 < o->val_fraction;
}

/* A validation fraction that leaves one split empty is an error: an empty
 * val.bin fails training later, far from its cause. */
static tt_err split_error(const tt_prepare_opts *o, uint64_t n_docs, int val_empty, int has_txt)
{
    const char *unit = !has_txt ? "" : o->split_lines ? " (each line of a .txt file is one)"
                                                      : " (each .txt file is one)";
    const char *lines = has_txt && !o->split_lines ? "--split-unit line (each line of a .txt file a document), " : "";
    const char *docs = n_docs == 1 ? "document" : "documents";
    if (val_empty)
        return tt_errorf("--val-fraction %g of %llu %s%s holds out none, so val.bin would be empty: use %s"
                         "more documents, or --val-fraction 0 for no validation set",
                         o->val_fraction, (unsigned long long)n_docs, docs, unit, lines);
    return tt_errorf("--val-fraction %g of %llu %s%s holds out every one, so train.bin would be empty: use %s"
                     "more documents, or a smaller --val-fraction",
                     o->val_fraction, (unsigned long long)n_docs, docs, unit, lines);
}

/* ---- the list of input files ---------------------------------------------- */
typedef struct {
    char **paths;
    int n, cap;
    uint64_t bytes; /* on disk, for the progress bar */
} file_list;

static int kind_of(const char *p)
{
    size_t n = strlen(p);
    if (n > 9 && !strcmp(p + n - 9, ".jsonl.gz")) return 3;
    if (n > 6 && !strcmp(p + n - 6, ".jsonl")) return 2;
    if (n > 4 && !strcmp(p + n - 4, ".txt")) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static tt_err add_path(file_list *fl, const char *path, int top)
{
    struct stat st;
    if (stat(path, &st) != 0) return tt_errorf("%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return tt_errorf("%s: cannot read folder: %s", path, strerror(errno));
        char **names = NULL;
        int n = 0, cap = 0;
        tt_err rc = 0;
        for (struct dirent *e; (e = readdir(d)) && !rc;) {
            if (e->d_name[0] == '.') continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                char **p = realloc(names, (size_t)cap * sizeof *p);
                if (!p) rc = tt_errorf("out of memory");
                else names = p;
            }
            if (!rc) {
                size_t len = strlen(path) + strlen(e->d_name) + 2;
                if (!(names[n] = malloc(len))) rc = tt_errorf("out of memory");
                else snprintf(names[n++], len, "%s/%s", path, e->d_name);
            }
        }
        closedir(d);
        qsort(names, (size_t)n, sizeof *names, cmp_str); /* a stable order: the output is deterministic */
        for (int i = 0; i < n; i++) {
            if (!rc) rc = add_path(fl, names[i], 0);
            free(names[i]);
        }
        free(names);
        return rc;
    }
    if (!kind_of(path)) {
        if (top) return tt_errorf("%s: not a .txt, .jsonl or .jsonl.gz file", path);
        return 0; /* other files in a folder are not ours */
    }
    if (fl->n == fl->cap) {
        int nc = fl->cap ? 2 * fl->cap : 64;
        char **p = realloc(fl->paths, (size_t)nc * sizeof *p);
        if (!p) return tt_errorf("out of memory");
        fl->paths = p;
        fl->cap = nc;
    }
    if (!(fl->paths[fl->n] = tt_strdup(path))) return -1;
    fl->n++;
    fl->bytes += (uint64_t)st.st_size;
    return 0;
}

/* ---- reading documents ------------------------------------------------------ */
typedef struct {
    gzFile gz; /* reads .txt and .jsonl too (transparently) */
    int kind;
    const char *path;
    long line;
    char *buf;
    size_t cap;
} doc_reader;

/* The next line (without '\n') into r->buf; 0 at the end, -1 on error. */
static int read_line(doc_reader *r, size_t *len)
{
    size_t n = 0;
    for (;;) {
        if (r->cap - n < 2) {
            size_t nc = r->cap ? 2 * r->cap : 1 << 16;
            char *p = realloc(r->buf, nc);
            if (!p) return tt_errorf("out of memory reading %s", r->path);
            r->buf = p;
            r->cap = nc;
        }
        if (!gzgets(r->gz, r->buf + n, (int)(r->cap - n > (1u << 30) ? 1u << 30 : r->cap - n))) {
            int err;
            const char *msg = gzerror(r->gz, &err);
            if (err != Z_OK && err != Z_STREAM_END) return tt_errorf("%s:%ld: %s", r->path, r->line + 1, msg);
            if (n == 0) return 0;
            break;
        }
        n += strlen(r->buf + n);
        if (n > 0 && r->buf[n - 1] == '\n') {
            r->buf[--n] = 0;
            break;
        }
    }
    r->line++;
    *len = n;
    return 1;
}

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
static int next_doc(prep_state *ps, doc_reader *r, doc *d)
{
    while (r->kind == 1 && ps->o->split_lines) { /* each non-empty line of a .txt file is a document */
        size_t len = 0;
        int rc = read_line(r, &len);
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
        int rc = read_line(r, &len);
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

/* ---- progress ----------------------------------------------------------------- */
static void progress(uint64_t done, uint64_t total, double t0, int final)
{
    double el = tt_now() - t0, mbs = el > 0 ? done / el / 1e6 : 0;
    double frac = total ? (double)done / (double)total : 1;
    if (frac > 1) frac = 1;
    double eta = mbs > 0 ? (double)(total > done ? total - done : 0) / (mbs * 1e6) : 0;
    int w = 30, k = (int)(frac * w);
    char bar[64];
    for (int i = 0; i < w; i++) bar[i] = i < k ? '#' : '.';
    bar[w] = 0;
    fprintf(stderr, "\r[%s] %5.1f%%  %.1f/%.1f MB  %.1f MB/s  ETA %02d:%02d%s", bar, 100 * frac, done / 1e6,
            total / 1e6, mbs, (int)eta / 60, (int)eta % 60, final ? "\n" : "");
    fflush(stderr);
}

/* ---- the whole job ------------------------------------------------------------- */
tt_err tt_prepare(const tt_prepare_opts *o, FILE *log)
{
    file_list fl = {0};
    tt_tokenizer *tok = NULL;
    tt_shard_writer *w[2] = {NULL, NULL};
    prep_state ps = {o, 0};
    tt_err rc = 0;
    for (int i = 0; i < o->n_inputs && !rc; i++) rc = add_path(&fl, o->inputs[i], 1);
    if (!rc && fl.n == 0) rc = tt_errorf("no .txt, .jsonl or .jsonl.gz files in the inputs");
    if (!rc && !(o->val_fraction >= 0 && o->val_fraction < 1))
        rc = tt_errorf("--val-fraction %g must be in [0, 1): %s", o->val_fraction,
                       o->val_fraction >= 1 ? "1 would leave nothing to train on" : "it is a share of the documents");
    if (rc) goto done;
    int has_txt = 0, only_txt = 1;
    for (int f = 0; f < fl.n; f++) {
        has_txt |= kind_of(fl.paths[f]) == 1;
        only_txt &= kind_of(fl.paths[f]) == 1;
    }
    if (only_txt && !o->split_lines && o->val_fraction > 0) {
        /* one document per file: the split is known before reading a byte */
        uint64_t held = 0;
        for (int f = 0; f < fl.n; f++) held += held_out(o, (uint64_t)f);
        if (held == 0 || held == (uint64_t)fl.n) {
            rc = split_error(o, (uint64_t)fl.n, held == 0, 1);
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
    snprintf(path[0], sizeof path[0], "%s/train.bin", o->out_dir);
    snprintf(path[1], sizeof path[1], "%s/val.bin", o->out_dir);
    if (mkdir(o->out_dir, 0755) != 0 && errno != EEXIST) {
        rc = tt_errorf("%s: cannot create: %s", o->out_dir, strerror(errno));
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
        doc_reader r = {gzopen(fl.paths[f], "rb"), kind_of(fl.paths[f]), fl.paths[f], 0, NULL, 0};
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
                    int s = held_out(o, doc_index);
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
                progress(file_base + (uint64_t)gzoffset(r.gz), fl.bytes, t0, 0);
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
    if (o->progress) progress(fl.bytes, fl.bytes, t0, 1);
    /* on an error the writers are aborted: no shard is left behind */
    if (n_docs[0] + n_docs[1] == 0) {
        rc = tt_errorf("the inputs hold no text (%d files, every one empty%s)", fl.n,
                       ps.skipped ? " or skipped" : "");
        goto done;
    }
    if (o->val_fraction > 0 && (n_docs[0] == 0 || n_docs[1] == 0)) {
        rc = split_error(o, n_docs[0] + n_docs[1], n_docs[1] == 0, has_txt);
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

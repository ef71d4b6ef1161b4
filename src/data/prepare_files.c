/* prepare_files.c — what `titan prepare`'s text and conversation readers share: the input files (a
 * folder's in name order), their lines however long, the hash that holds documents out for
 * validation, the error for a split left empty, and the progress line. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "data/prepare_internal.h"

/* Documents are held out by a hash of (seed, document index): reproducible,
 * and independent of how many threads or batches there were. */
int tt_prep_held_out(const tt_prepare_opts *o, uint64_t doc_index)
{
    return (double)(tt_hash64(o->seed, doc_index) >> 11) * 0x1p-53 < o->val_fraction;
}

/* A validation fraction that leaves one split empty is an error: an empty
 * val.bin fails training later, far from its cause. */
tt_err tt_prep_split_error(const tt_prepare_opts *o, uint64_t n_docs, int val_empty, int has_txt)
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
int tt_prep_kind_of(const char *p)
{
    size_t n = strlen(p);
    if (n > 9 && !strcmp(p + n - 9, ".jsonl.gz")) return 3;
    if (n > 6 && !strcmp(p + n - 6, ".jsonl")) return 2;
    if (n > 4 && !strcmp(p + n - 4, ".txt")) return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

tt_err tt_prep_add_path(tt_prep_files *fl, const char *path, int top)
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
            if (!rc) rc = tt_prep_add_path(fl, names[i], 0);
            free(names[i]);
        }
        free(names);
        return rc;
    }
    if (!tt_prep_kind_of(path)) {
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
int tt_prep_read_line(tt_prep_reader *r, size_t *len)
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

/* ---- progress ----------------------------------------------------------------- */
void tt_prep_progress(uint64_t done, uint64_t total, double t0, int final)
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


tt_err tt_prep_out_paths(const tt_prepare_opts *o, char path[2][4200])
{
    snprintf(path[0], 4200, "%s/train.bin", o->out_dir);
    snprintf(path[1], 4200, "%s/val.bin", o->out_dir);
    if (mkdir(o->out_dir, 0755) != 0 && errno != EEXIST) return tt_errorf("%s: cannot create: %s", o->out_dir, strerror(errno));
    return 0;
}

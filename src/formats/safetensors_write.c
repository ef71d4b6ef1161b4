/* safetensors_write.c — the safetensors format's writer, single-file and
 * sharded with an index, and the atomic file writes it shares with the
 * checkpoint (path.tmp, fsync, rename, fsync the directory). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/safetensors.h"

/* write() until done: it may write less than asked. At most 64 MiB a call,
 * each reported as progress (tt_work_progress): a rank writing a file that
 * takes minutes keeps telling the ranks that wait for it that it is alive. */
static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n > (64u << 20) ? (64u << 20) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        tt_work_progress();
    }
    return 0;
}

tt_err tt_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return tt_errorf("%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* some filesystems cannot fsync a directory; the data files are synced */
    if (rc != 0 && e != EINVAL && e != ENOTSUP) return tt_errorf("%s: fsync: %s", dir, strerror(e));
    return TT_OK;
}

static tt_err fsync_parent(const char *path)
{
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return tt_errorf("%s: path too long", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return tt_fsync_dir(".");
    if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    return tt_fsync_dir(dir);
}

tt_err tt_mkdir_p(const char *path)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return tt_errorf("%s: path too long", path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return tt_errorf("%s: cannot create directory: %s", p, strerror(errno));
        *s = c;
        if (c == '\0') break;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return tt_errorf("%s: not a directory", path);
    return TT_OK;
}

/* Bytes to write: at p, or (p NULL) what fetch puts in a staging buffer. */
typedef struct {
    const void *p;
    size_t n;
    tt_err (*fetch)(void *ctx, void *dst, size_t bytes);
    void *ctx;
} seg;

/* The atomic-replace recipe: write path.tmp.<pid>, fsync it, rename it over
 * path, fsync the directory. Readers see the old file or the new, never half.
 * Fetched segments share one staging buffer, the size of the largest. */
static tt_err write_segments_atomic(const char *path, const seg *segs, size_t nseg)
{
    char tmp[4096];
    void *stage = NULL;
    size_t stage_cap = 0;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return tt_errorf("%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return tt_errorf("%s: cannot create: %s", tmp, strerror(errno));
    for (size_t i = 0; i < nseg; i++) {
        const void *p = segs[i].p;
        if (!segs[i].n) continue;
        if (!p) {
            if (segs[i].n > stage_cap) {
                free(stage);
                stage_cap = 0;
                if (!(stage = malloc(segs[i].n))) {
                    tt_errorf("%s: out of memory staging %zu bytes", tmp, segs[i].n);
                    goto fail;
                }
                stage_cap = segs[i].n;
            }
            if (segs[i].fetch(segs[i].ctx, stage, segs[i].n)) {
                tt_error_prefix("%s: ", path);
                goto fail;
            }
            p = stage;
        }
        if (write_all(fd, p, segs[i].n) != 0) {
            tt_errorf("%s: write failed: %s", tmp, strerror(errno));
            goto fail;
        }
    }
    free(stage);
    stage = NULL;
    if (fsync(fd) != 0) {
        tt_errorf("%s: fsync failed: %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        tt_errorf("%s: close failed: %s", tmp, strerror(errno));
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        tt_errorf("%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
        goto fail;
    }
    return fsync_parent(path);
fail:
    free(stage);
    if (fd >= 0) close(fd);
    unlink(tmp);
    return -1;
}

tt_err tt_write_file_atomic(const char *path, const void *data, size_t len)
{
    seg s = {data, len, NULL, NULL};
    return write_segments_atomic(path, &s, 1);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* ---- writing ------------------------------------------------------------ */
typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_add(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal: quote, backslash and control characters escaped. */
static void sb_json(sbuf *b, const char *s)
{
    sb_add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_add(b, e, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_add(b, (const char *)&c, 1);
        }
    }
    sb_add(b, "\"", 1);
}

static tt_err check_text(const char *path, const char *what, const char *s)
{
    if (!s) return tt_errorf("%s: %s is NULL", path, what);
    size_t n = strlen(s);
    if (tt_utf8_invalid_at(s, n) < n) return tt_errorf("%s: %s '%s' is not valid UTF-8", path, what, s);
    return TT_OK;
}

/* Check what the caller asks us to write before touching the disk. */
static tt_err check_tensors(const char *path, int n, const tt_st_tensor *ts)
{
    if (n < 0) return tt_errorf("%s: negative tensor count %d", path, n);
    for (int i = 0; i < n; i++) {
        const tt_st_tensor *t = &ts[i];
        if (check_text(path, "tensor name", t->name) != 0) return -1;
        if (strcmp(t->name, "__metadata__") == 0) return tt_errorf("%s: '__metadata__' is not a tensor name", path);
        size_t bits = tt_st_dtype_bits(t->dtype);
        if (!bits) return tt_errorf("%s: tensor '%s': unknown dtype \"%.8s\"", path, t->name, t->dtype);
        if (t->ndim < 0 || t->ndim > TT_ST_MAX_DIMS)
            return tt_errorf("%s: tensor '%s': ndim %d outside [0, %d]", path, t->name, t->ndim, TT_ST_MAX_DIMS);
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0) return tt_errorf("%s: tensor '%s': negative dimension %d", path, t->name, d);
        if (tt_st_check_size(path, t, 0, t->nbytes, bits) != 0) return -1;
        if (!t->data && !t->fetch && t->nbytes) return tt_errorf("%s: tensor '%s': data is NULL", path, t->name);
    }
    const char **names = malloc(sizeof *names * (size_t)(n + 1));
    if (!names) return tt_errorf("%s: out of memory", path);
    for (int i = 0; i < n; i++) names[i] = ts[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 1; i < n; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            tt_errorf("%s: tensor name '%s' given twice", path, names[i]);
            free(names);
            return -1;
        }
    free(names);
    return TT_OK;
}

tt_err tt_st_write(const char *path, int n, const tt_st_tensor *tensors, const char *const *meta_keys,
                   const char *const *meta_vals, int n_meta)
{
    if (check_tensors(path, n, tensors) != 0) return -1;
    int has_format = 0;
    for (int i = 0; i < n_meta; i++) {
        if (check_text(path, "metadata key", meta_keys[i]) != 0 || check_text(path, "metadata value", meta_vals[i]) != 0)
            return -1;
        for (int j = 0; j < i; j++)
            if (strcmp(meta_keys[i], meta_keys[j]) == 0)
                return tt_errorf("%s: metadata key '%s' given twice", path, meta_keys[i]);
        has_format |= strcmp(meta_keys[i], "format") == 0;
    }

    sbuf h = {0};
    sb_str(&h, "{\"__metadata__\":{");
    if (!has_format) sb_str(&h, "\"format\":\"pt\"");
    for (int i = 0; i < n_meta; i++) {
        if (i || !has_format) sb_str(&h, ",");
        sb_json(&h, meta_keys[i]);
        sb_str(&h, ":");
        sb_json(&h, meta_vals[i]);
    }
    sb_str(&h, "}");
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        const tt_st_tensor *t = &tensors[i];
        sb_str(&h, ",");
        sb_json(&h, t->name);
        sb_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", t->dtype);
        for (int d = 0; d < t->ndim; d++) sb_printf(&h, "%s%" PRId64, d ? "," : "", t->shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at, at + t->nbytes);
        at += t->nbytes;
    }
    sb_str(&h, "}");
    while (!h.oom && h.n % 8) sb_add(&h, " ", 1); /* so the data starts 8-byte aligned */
    if (h.oom) {
        free(h.p);
        return tt_errorf("%s: out of memory building the header", path);
    }
    if (h.n > TT_ST_MAX_HEADER) {
        free(h.p);
        return tt_errorf("%s: header of %zu bytes exceeds the %u-byte limit", path, h.n, TT_ST_MAX_HEADER);
    }
    uint8_t lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    seg *segs = malloc(sizeof *segs * (size_t)(n + 2));
    if (!segs) {
        free(h.p);
        return tt_errorf("%s: out of memory", path);
    }
    segs[0] = (seg){lenb, 8, NULL, NULL};
    segs[1] = (seg){h.p, h.n, NULL, NULL};
    for (int i = 0; i < n; i++)
        segs[2 + i] = (seg){tensors[i].data, tensors[i].nbytes, tensors[i].fetch, tensors[i].fetch_ctx};
    tt_err rc = write_segments_atomic(path, segs, (size_t)n + 2);
    free(segs);
    free(h.p);
    return rc;
}

static tt_err remove_if_present(const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT) return tt_errorf("%s: cannot remove stale file: %s", path, strerror(errno));
    return TT_OK;
}

tt_err tt_st_write_sharded(const char *dir, const char *basename, int n, const tt_st_tensor *tensors,
                           size_t max_shard_bytes)
{
    char single[4096], index[4096], file[4096];
    if (!basename || !*basename || strchr(basename, '/'))
        return tt_errorf("%s: shard basename '%s' must be a plain file name", dir, basename ? basename : "(null)");
    if (snprintf(single, sizeof single, "%s/%s.safetensors", dir, basename) >= (int)sizeof single ||
        snprintf(index, sizeof index, "%s/%s.safetensors.index.json", dir, basename) >= (int)sizeof index)
        return tt_errorf("%s: path too long", dir);
    if (check_tensors(dir, n, tensors) != 0 || tt_mkdir_p(dir) != 0) return -1;

    /* greedy grouping in the given order: shard s holds [first[s], first[s+1]) */
    int *first = malloc(sizeof *first * (size_t)(n + 2));
    if (!first) return tt_errorf("%s: out of memory", dir);
    int ns = 0;
    size_t cur = 0, total = 0;
    for (int i = 0; i < n; i++) {
        size_t b = tensors[i].nbytes;
        if (i == 0 || (max_shard_bytes && cur > 0 && (cur >= max_shard_bytes || b > max_shard_bytes - cur))) {
            first[ns++] = i;
            cur = 0;
        }
        cur += b;
        total += b;
    }
    if (ns == 0) first[ns++] = 0;
    first[ns] = n;
    tt_err rc = -1;
    if (ns == 1) {
        if (tt_st_write(single, n, tensors, NULL, NULL, 0) == 0 && remove_if_present(index) == 0) rc = fsync_parent(index);
        free(first);
        return rc;
    }
    if (ns > 99999) {
        free(first);
        return tt_errorf("%s: %d shards, more than the 5-digit shard numbering allows", dir, ns);
    }
    sbuf j = {0};
    sb_printf(&j, "{\n  \"metadata\": {\n    \"total_size\": %zu\n  },\n  \"weight_map\": {", total);
    for (int s = 0; s < ns; s++) {
        char name[600];
        snprintf(name, sizeof name, "%s-%05d-of-%05d.safetensors", basename, s + 1, ns);
        snprintf(file, sizeof file, "%s/%s", dir, name);
        if (tt_st_write(file, first[s + 1] - first[s], tensors + first[s], NULL, NULL, 0) != 0) goto out;
        for (int i = first[s]; i < first[s + 1]; i++) {
            sb_str(&j, i ? ",\n    " : "\n    ");
            sb_json(&j, tensors[i].name);
            sb_str(&j, ": ");
            sb_json(&j, name);
        }
    }
    sb_str(&j, "\n  }\n}\n");
    if (j.oom) {
        tt_errorf("%s: out of memory building the index", index);
        goto out;
    }
    /* the index goes last: until it is in place no reader looks at new shards */
    if (tt_write_file_atomic(index, j.p, j.n) == 0 && remove_if_present(single) == 0) rc = fsync_parent(single);
out:
    free(j.p);
    free(first);
    return rc;
}

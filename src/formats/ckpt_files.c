/* ckpt_files.c — checkpoint folders on disk: step-<N>/{state.safetensors,
 * meta.json}, written under a temporary name and renamed so that a crash never
 * leaves a half checkpoint that looks whole, and verified (sizes on open, then
 * the XXH64 of every chunk a reader takes bytes from) as a run resumes from
 * one. What goes in them is train's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "formats/ckpt_files.h"

/* ---- XXH64 (the xxHash spec, seed-able, 32-byte stripes) ----------------
 * Chosen over byte-wise FNV-1a because it runs at memory speed (a multi-GB
 * checkpoint is hashed on every save and load) and xxhsum can check it. */
static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full, P3 = 0x165667B19E3779F9ull,
                      P4 = 0x85EBCA77C2B2AE63ull, P5 = 0x27D4EB2F165667C5ull;

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}
static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline uint64_t xx_round(uint64_t acc, uint64_t in) { return rotl64(acc + in * P2, 31) * P1; }
static inline uint64_t xx_merge(uint64_t acc, uint64_t v) { return (acc ^ xx_round(0, v)) * P1 + P4; }

uint64_t tt_xxh64(const void *data, size_t len, uint64_t seed)
{
    const uint8_t *p = data, *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
        for (; end - p >= 32; p += 32) {
            v1 = xx_round(v1, rd64(p));
            v2 = xx_round(v2, rd64(p + 8));
            v3 = xx_round(v3, rd64(p + 16));
            v4 = xx_round(v4, rd64(p + 24));
        }
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xx_merge(xx_merge(xx_merge(xx_merge(h, v1), v2), v3), v4);
    } else {
        h = seed + P5;
    }
    h += (uint64_t)len;
    for (; end - p >= 8; p += 8) h = rotl64(h ^ xx_round(0, rd64(p)), 27) * P1 + P4;
    if (end - p >= 4) {
        h = rotl64(h ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
        p += 4;
    }
    for (; p < end; p++) h = rotl64(h ^ (uint64_t)*p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t tt_ckpt_chunk_size(uint64_t file_size)
{
    uint64_t c = TT_CKPT_MIN_CHUNK;
    while (file_size > c * TT_CKPT_MAX_CHUNKS) c <<= 1;
    return c;
}

static uint64_t n_chunks(uint64_t size, uint64_t chunk) { return (size + chunk - 1) / chunk; }

/* A file's checksums (size, XXH64, each chunk's), read through a mapping. */
static tt_err file_sums(const char *path, tt_ckpt_sums *s)
{
    void *m;
    size_t n;
    if (tt_map_file(path, &m, &n)) return -1;
    if (n > 0) madvise(m, n, MADV_SEQUENTIAL);
    memset(s, 0, sizeof *s);
    s->size = n;
    s->chunk = tt_ckpt_chunk_size(n);
    for (uint64_t k = 0; k < n_chunks(n, s->chunk); k++) {
        const uint64_t at = k * s->chunk;
        s->chunks[k] = tt_xxh64((const char *)m + at, n - at < s->chunk ? n - at : s->chunk, 0);
        tt_work_progress(); /* a checkpoint of many GB: the other ranks wait for the writers */
    }
    s->xxh64 = tt_xxh64(m, n, 0);
    tt_unmap_file(m, n);
    return TT_OK;
}

/* ---- folder helpers ----------------------------------------------------- */
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    tt_work_progress(); /* pruning a big checkpoint on a slow file system: the other ranks wait for rank 0 */
    return remove(p) == 0 ? 0 : -1;
}

/* rm -rf of one of our own step folders (never follows symlinks). */
static tt_err rm_rf(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? TT_OK : tt_errorf("%s: %s", path, strerror(errno));
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return tt_errorf("%s: cannot remove: %s", path, strerror(errno));
    return TT_OK;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* "<prefix><N><suffix>" with N a canonical decimal (no sign, no leading 0s). */
static int parse_step_name(const char *name, const char *prefix, const char *suffix, long *step)
{
    size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
    if (n <= np + ns || strncmp(name, prefix, np) != 0 || strcmp(name + n - ns, suffix) != 0) return 0;
    const char *d = name + np;
    size_t nd = n - np - ns;
    if (nd > 18 || (nd > 1 && d[0] == '0')) return 0;
    long v = 0;
    for (size_t i = 0; i < nd; i++) {
        if (d[i] < '0' || d[i] > '9') return 0;
        v = v * 10 + (d[i] - '0');
    }
    *step = v;
    return 1;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* All complete step-<N> folders, ascending, in a malloc'd array. */
static int scan_steps(const char *folder, long **out)
{
    *out = NULL;
    DIR *d = opendir(folder);
    if (!d) {
        if (errno == ENOENT) return 0;
        return tt_errorf("%s: cannot list checkpoints: %s", folder, strerror(errno));
    }
    long *steps = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d))) {
        long s;
        if (!parse_step_name(e->d_name, "step-", "", &s)) continue;
        /* a rename put it there whole; meta.json is checked for sanity only */
        snprintf(p, sizeof p, "%s/%s/meta.json", folder, e->d_name);
        if (!exists(p)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            long *ns = realloc(steps, sizeof *ns * (size_t)cap);
            if (!ns) {
                free(steps);
                closedir(d);
                return tt_errorf("%s: out of memory", folder);
            }
            steps = ns;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (n) qsort(steps, (size_t)n, sizeof *steps, cmp_long);
    *out = steps;
    return n;
}

int tt_ckpt_list(const char *folder, long *steps, int max)
{
    long *all;
    int n = scan_steps(folder, &all);
    if (n > 0 && steps) {
        int k = n < max ? n : max > 0 ? max : 0;
        for (int i = 0; i < k; i++) steps[i] = all[n - k + i]; /* the newest k */
        n = k;
    }
    free(all);
    return n;
}

int tt_ckpt_latest(const char *folder, long *step)
{
    long *all;
    int n = scan_steps(folder, &all);
    if (n > 0) *step = all[n - 1];
    free(all);
    return n < 0 ? -1 : n > 0;
}

tt_err tt_ckpt_prune(const char *folder, int keep_latest_k)
{
    char p[4096], old[4096];
    DIR *d = opendir(folder);
    if (!d) return errno == ENOENT ? TT_OK : tt_errorf("%s: %s", folder, strerror(errno));
    struct dirent *e;
    tt_err rc = TT_OK;
    while ((e = readdir(d))) { /* leftovers of interrupted saves and removals */
        long s;
        if (!parse_step_name(e->d_name, ".step-", ".tmp", &s) && !parse_step_name(e->d_name, ".step-", ".old", &s))
            continue;
        snprintf(p, sizeof p, "%s/%s", folder, e->d_name);
        if (rm_rf(p) != 0) rc = -1;
    }
    closedir(d);
    if (rc != 0 || keep_latest_k <= 0) return rc;
    long *steps;
    int n = scan_steps(folder, &steps);
    if (n < 0) return -1;
    for (int i = 0; i < n - keep_latest_k && rc == 0; i++) {
        /* renamed away first, so a crash mid-removal leaves no step-N that
         * looks whole but is not */
        snprintf(p, sizeof p, "%s/step-%ld", folder, steps[i]);
        snprintf(old, sizeof old, "%s/.step-%ld.old", folder, steps[i]);
        if (rename(p, old) != 0) rc = tt_errorf("%s: cannot rename to %s: %s", p, old, strerror(errno));
        else rc = rm_rf(old);
    }
    free(steps);
    return rc == 0 ? tt_fsync_dir(folder) : rc;
}

/* ---- meta.json ---------------------------------------------------------- */
static int line_of(const char *text, size_t at)
{
    int line = 1;
    for (size_t i = 0; i < at; i++) line += text[i] == '\n';
    return line;
}

static int plain_file_name(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 255 && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int is_hex16(const char *s)
{
    for (int i = 0; i < 16; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[16] == '\0';
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static tt_err check_files(const cJSON *root, const char *name)
{
    const cJSON *files = NULL;
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "files") == 0) {
            if (files) return tt_errorf("%s: \"files\" appears twice", name);
            files = e;
        }
    if (!files) return tt_errorf("%s: no \"files\" entry (not a checkpoint written by titan?)", name);
    if (!cJSON_IsObject(files)) return tt_errorf("%s: \"files\" is not a JSON object", name);
    int n = cJSON_GetArraySize(files), k = 0;
    const char **names = malloc(sizeof *names * (size_t)(n + 1));
    if (!names) return tt_errorf("%s: out of memory", name);
    tt_err rc = -1;
    for (const cJSON *f = files->child; f; f = f->next) {
        const char *fn = f->string;
        if (!plain_file_name(fn)) {
            tt_errorf("%s: files: '%s' is not a plain file name", name, fn);
            goto out;
        }
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(f, "size");
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(f, "xxh64");
        double sz = cJSON_IsNumber(size) ? size->valuedouble : -1;
        if (!cJSON_IsObject(f) || !(sz >= 0 && sz <= 9007199254740992.0) || (double)(uint64_t)sz != sz) {
            tt_errorf("%s: files: '%s' needs \"size\", a non-negative integer", name, fn);
            goto out;
        }
        if (!cJSON_IsString(sum) || !is_hex16(sum->valuestring)) {
            tt_errorf("%s: files: '%s' needs \"xxh64\", 16 lowercase hex digits", name, fn);
            goto out;
        }
        const cJSON *chunk = cJSON_GetObjectItemCaseSensitive(f, "chunk");
        const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(f, "chunks");
        if (chunk || chunks) { /* both, or neither (a checkpoint written before chunk checksums) */
            const double c = cJSON_IsNumber(chunk) ? chunk->valuedouble : 0;
            const int pow2 = c >= (double)TT_CKPT_MIN_CHUNK && c <= 9007199254740992.0 && (double)(uint64_t)c == c &&
                             !((uint64_t)c & ((uint64_t)c - 1));
            const uint64_t k = pow2 ? n_chunks((uint64_t)sz, (uint64_t)c) : 0;
            if (!pow2 || k > TT_CKPT_MAX_CHUNKS) {
                tt_errorf("%s: files: '%s' needs \"chunk\", a power of two of at least %llu bytes making at most %d "
                          "chunks", name, fn, (unsigned long long)TT_CKPT_MIN_CHUNK, TT_CKPT_MAX_CHUNKS);
                goto out;
            }
            size_t hex = 0;
            if (cJSON_IsString(chunks))
                while (chunks->valuestring[hex] && strchr("0123456789abcdef", chunks->valuestring[hex])) hex++;
            if (!cJSON_IsString(chunks) || chunks->valuestring[hex] || hex != 16 * k) {
                tt_errorf("%s: files: '%s' needs \"chunks\", %llu checksums of 16 lowercase hex digits", name, fn,
                          (unsigned long long)k);
                goto out;
            }
        }
        const size_t len = strlen(fn), ext = strlen(".safetensors");
        if (len <= ext || strcmp(fn + len - ext, ".safetensors") != 0) {
            tt_errorf("%s: files: '%s' is not a .safetensors file", name, fn);
            goto out;
        }
        names[k++] = fn;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    for (int i = 1; i < k; i++)
        if (strcmp(names[i], names[i - 1]) == 0) {
            tt_errorf("%s: files: '%s' listed twice", name, names[i]);
            goto out;
        }
    if (k == 0) {
        tt_errorf("%s: files lists no file", name);
        goto out;
    }
    rc = TT_OK;
out:
    free(names);
    return rc;
}

/* Parse text as UTF-8 JSON; errors carry the line. *root on success. */
static tt_err parse_json(const char *text, size_t len, const char *name, cJSON **root)
{
    *root = NULL;
    size_t bad = tt_utf8_invalid_at(text, len);
    if (bad < len) return tt_errorf("%s:%d: not valid UTF-8", name, line_of(text, bad));
    const char *nul = memchr(text, 0, len);
    if (nul) return tt_errorf("%s:%d: NUL byte in the text", name, line_of(text, (size_t)(nul - text)));
    char *buf = malloc(len + 1);
    if (!buf) return tt_errorf("%s: out of memory", name);
    memcpy(buf, text, len);
    buf[len] = '\0';
    const char *end = NULL;
    *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!*root) {
        size_t at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
        char near[24];
        size_t k = 0;
        for (; k < 20 && at + k < len; k++) near[k] = (buf[at + k] >= 0x20 && buf[at + k] < 0x7f) ? buf[at + k] : ' ';
        near[k] = '\0';
        if (at >= len) tt_errorf("%s:%d: invalid JSON: the text ends early (truncated?)", name, line_of(buf, at));
        else tt_errorf("%s:%d: invalid JSON near '%s'", name, line_of(buf, at), near);
    } else if (!cJSON_IsObject(*root)) {
        tt_errorf("%s: not a JSON object", name);
        cJSON_Delete(*root);
        *root = NULL;
    }
    free(buf);
    return *root ? TT_OK : -1;
}

tt_err tt_ckpt_meta_validate(const char *json_text, size_t len, const char *name_for_errors)
{
    const char *name = name_for_errors ? name_for_errors : "meta.json";
    cJSON *root;
    if (parse_json(json_text, len, name, &root) != 0) return -1;
    tt_err rc = check_files(root, name);
    cJSON_Delete(root);
    return rc;
}

/* ---- save --------------------------------------------------------------- */
/* The caller's JSON text with "files" added before its closing brace: the
 * text is not re-printed, so numbers keep every digit the caller wrote. */
static char *meta_with_files(const char *meta, int empty, int n, const char *const *files, const tt_ckpt_sums *sums)
{
    size_t len = strlen(meta);
    while (len > 0 && meta[len - 1] != '}') len--; /* it parsed as an object: ends in '}' */
    size_t keep = len - 1;
    while (keep > 0 && (meta[keep - 1] == ' ' || meta[keep - 1] == '\n' || meta[keep - 1] == '\t' || meta[keep - 1] == '\r'))
        keep--;
    size_t cap = keep + 64, at = keep;
    for (int i = 0; i < n; i++) cap += 400 + 16 * n_chunks(sums[i].size, sums[i].chunk);
    char *out = malloc(cap);
    if (!out) return NULL;
    memcpy(out, meta, keep);
    at += (size_t)snprintf(out + at, cap - at, "%s\"files\": {", empty ? "\n  " : ",\n  ");
    for (int i = 0; i < n; i++) {
        const tt_ckpt_sums *s = &sums[i];
        at += (size_t)snprintf(out + at, cap - at,
                               "%s\n    \"%s\": {\"size\": %" PRIu64 ", \"xxh64\": \"%016" PRIx64 "\", \"chunk\": %" PRIu64
                               ", \"chunks\": \"",
                               i ? "," : "", files[i], s->size, s->xxh64, s->chunk);
        for (uint64_t k = 0; k < n_chunks(s->size, s->chunk); k++)
            at += (size_t)snprintf(out + at, cap - at, "%016" PRIx64, s->chunks[k]);
        at += (size_t)snprintf(out + at, cap - at, "\"}");
    }
    snprintf(out + at, cap - at, "\n  }\n}\n");
    return out;
}

/* Put the finished tmp folder at final; an old final is swapped out whole. */
static tt_err move_into_place(const char *folder, const char *tmp, const char *final, long step)
{
    if (!exists(final)) {
        if (rename(tmp, final) != 0) return tt_errorf("%s: cannot rename %s into place: %s", final, tmp, strerror(errno));
        return tt_fsync_dir(folder);
    }
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        if (tt_fsync_dir(folder) != 0) return -1;
        return rm_rf(tmp); /* now the old checkpoint */
    }
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return tt_errorf("%s: cannot swap in %s: %s", final, tmp, strerror(errno));
#endif
    /* no atomic exchange here: move the old one aside, then the new one in */
    char old[4096];
    snprintf(old, sizeof old, "%s/.step-%ld.old", folder, step);
    if (rm_rf(old) != 0) return -1;
    if (rename(final, old) != 0) return tt_errorf("%s: cannot move aside: %s", final, strerror(errno));
    if (rename(tmp, final) != 0) return tt_errorf("%s: cannot rename %s into place: %s", final, tmp, strerror(errno));
    if (tt_fsync_dir(folder) != 0) return -1;
    return rm_rf(old);
}

static tt_err tmp_path(const char *folder, long step, char *tmp, size_t n)
{
    if (step < 0) return tt_errorf("%s: negative checkpoint step %ld", folder, step);
    if (snprintf(tmp, n, "%s/.step-%ld.tmp", folder, step) >= (int)n) return tt_errorf("%s: path too long", folder);
    return TT_OK;
}

tt_err tt_ckpt_begin(const char *folder, long step)
{
    char tmp[4096];
    if (tmp_path(folder, step, tmp, sizeof tmp) || tt_mkdir_p(folder) != 0 || rm_rf(tmp) != 0) return -1;
    if (mkdir(tmp, 0755) != 0) return tt_errorf("%s: cannot create: %s", tmp, strerror(errno));
    return TT_OK;
}

tt_err tt_ckpt_write_part(const char *folder, long step, const char *file, int n, const tt_st_tensor *tensors,
                          tt_ckpt_sums *sums)
{
    char tmp[4096], path[4400];
    if (tmp_path(folder, step, tmp, sizeof tmp)) return -1;
    if (!plain_file_name(file)) return tt_errorf("checkpoint file '%s' is not a plain file name", file);
    snprintf(path, sizeof path, "%s/%s", tmp, file);
    return tt_st_write(path, n, tensors, NULL, NULL, 0) != 0 || file_sums(path, sums) != 0 ? -1 : TT_OK;
}

void tt_ckpt_abort(const char *folder, long step)
{
    char tmp[4096];
    if (!tmp_path(folder, step, tmp, sizeof tmp)) rm_rf(tmp); /* best effort; prune removes it otherwise */
}

tt_err tt_ckpt_commit(const char *folder, long step, const char *meta_json, int n_files, const char *const *files,
                      const tt_ckpt_sums *sums)
{
    char tmp[4096], final[4096], meta_path[4200];
    if (tmp_path(folder, step, tmp, sizeof tmp)) return -1;
    snprintf(final, sizeof final, "%s/step-%ld", folder, step);
    snprintf(meta_path, sizeof meta_path, "%s/meta.json", tmp);
    if (!meta_json) meta_json = "{}";
    cJSON *root;
    if (parse_json(meta_json, strlen(meta_json), "checkpoint meta_json", &root) != 0) return -1;
    int empty = root->child == NULL, reserved = cJSON_GetObjectItemCaseSensitive(root, "files") != NULL;
    cJSON_Delete(root);
    if (reserved) return tt_errorf("checkpoint meta_json: key \"files\" is reserved (the checkpoint writes it)");
    char *meta = meta_with_files(meta_json, empty, n_files, files, sums);
    if (!meta) return tt_errorf("%s: out of memory", meta_path);
    /* what we write must be what tt_ckpt_open accepts */
    tt_err rc = tt_ckpt_meta_validate(meta, strlen(meta), meta_path) != 0 ||
                tt_write_file_atomic(meta_path, meta, strlen(meta)) != 0 || /* also fsyncs tmp */
                move_into_place(folder, tmp, final, step) != 0;
    free(meta);
    return rc ? -1 : TT_OK;
}

tt_err tt_ckpt_save(const char *folder, long step, int n, const tt_st_tensor *tensors, const char *meta_json)
{
    static const char *const file = "state.safetensors";
    tt_ckpt_sums *sums = malloc(sizeof *sums);
    if (!sums) return tt_errorf("%s: out of memory", folder);
    if (tt_ckpt_begin(folder, step)) {
        free(sums);
        return -1;
    }
    if (tt_ckpt_write_part(folder, step, file, n, tensors, sums) || tt_ckpt_commit(folder, step, meta_json, 1, &file, sums)) {
        free(sums);
        char saved[2048];
        snprintf(saved, sizeof saved, "%s", tt_last_error());
        tt_ckpt_abort(folder, step);
        tt_errorf("%s", saved);
        return -1;
    }
    free(sums);
    return TT_OK;
}

/* ---- open --------------------------------------------------------------- */
typedef struct {
    char *name;
    tt_safetensors *st;  /* parsed from the mapping */
    void *base;          /* the file, mapped */
    size_t len;
    uint64_t chunk, n_chunks; /* 0 chunks: checked whole on open */
    uint64_t *want;      /* meta.json's chunk checksums */
    unsigned char *done; /* per chunk: checked */
} ckpt_file;

struct tt_ckpt {
    char *meta;
    int n;
    ckpt_file *f; /* the files meta.json lists, in its order */
    uint64_t data_read, meta_read;
};

/* Chunks [k0, k1] of file f checked (each once), the bytes counted as data or metadata. */
static tt_err check_chunks(tt_ckpt *ck, ckpt_file *f, uint64_t k0, uint64_t k1, int metadata)
{
    for (uint64_t k = k0; k <= k1 && k < f->n_chunks; k++) {
        if (f->done[k]) continue;
        const uint64_t at = k * f->chunk, n = f->len - at < f->chunk ? f->len - at : f->chunk;
        const uint64_t got = tt_xxh64((const char *)f->base + at, n, 0);
        if (got != f->want[k])
            return tt_errorf("%s: bytes %" PRIu64 "..%" PRIu64 " (chunk %" PRIu64 ") have XXH64 %016" PRIx64
                             " but meta.json records %016" PRIx64 " (corrupt checkpoint)",
                             f->name, at, at + n, k, got, f->want[k]);
        f->done[k] = 1;
        *(metadata ? &ck->meta_read : &ck->data_read) += n;
    }
    return TT_OK;
}

/* File f of dir, as meta.json's entry e records it: its size checked, mapped; with chunk checksums its header's
 * chunks checked, else its whole XXH64; then its safetensors header parsed. */
static tt_err open_file(tt_ckpt *ck, ckpt_file *f, const char *dir, const cJSON *e)
{
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, e->string);
    const uint64_t want = (uint64_t)cJSON_GetObjectItemCaseSensitive(e, "size")->valuedouble;
    const char *want_sum = cJSON_GetObjectItemCaseSensitive(e, "xxh64")->valuestring;
    const cJSON *jc = cJSON_GetObjectItemCaseSensitive(e, "chunk"), *js = cJSON_GetObjectItemCaseSensitive(e, "chunks");
    if (!(f->name = strdup(p))) return tt_errorf("out of memory");
    if (stat(p, &sb) != 0) return tt_errorf("%s: missing, but meta.json lists it (incomplete checkpoint)", p);
    if ((uint64_t)sb.st_size != want)
        return tt_errorf("%s: size %lld but meta.json records %" PRIu64 " (%s)", p, (long long)sb.st_size, want,
                         (uint64_t)sb.st_size < want ? "truncated checkpoint" : "file changed after the checkpoint was saved");
    if (tt_map_file(p, &f->base, &f->len)) return -1;
    if (f->len != want) return tt_errorf("%s: changed while it was opened", p);
    if (!jc) { /* written before chunk checksums: the whole file, now */
        char got[17];
        snprintf(got, sizeof got, "%016" PRIx64, tt_xxh64(f->base, f->len, 0));
        ck->data_read += f->len;
        if (strcmp(got, want_sum) != 0)
            return tt_errorf("%s: XXH64 checksum %s but meta.json records %s (corrupt checkpoint)", p, got, want_sum);
    } else { /* meta_validate checked the fields */
        f->chunk = (uint64_t)jc->valuedouble;
        f->n_chunks = n_chunks(f->len, f->chunk);
        f->want = calloc(f->n_chunks + 1, sizeof *f->want);
        f->done = calloc(f->n_chunks + 1, 1);
        if (!f->want || !f->done) return tt_errorf("out of memory");
        for (uint64_t k = 0; k < f->n_chunks; k++) {
            char hex[17];
            memcpy(hex, js->valuestring + 16 * k, 16);
            hex[16] = 0;
            f->want[k] = strtoull(hex, NULL, 16);
        }
        /* the header says where every tensor lies: checked before it is believed */
        uint64_t hl = 0;
        if (f->len >= 8) memcpy(&hl, f->base, 8);
        const uint64_t end = f->len < 8 || hl > f->len - 8 ? f->len : 8 + hl;
        if (end && check_chunks(ck, f, 0, (end - 1) / f->chunk, 1)) return -1;
    }
    return tt_st_parse(f->base, f->len, p, &f->st);
}

tt_ckpt *tt_ckpt_open(const char *folder, long step)
{
    char dir[4096], p[4400];
    snprintf(dir, sizeof dir, "%s/step-%ld", folder, step);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        tt_errorf("%s: no such checkpoint", dir);
        return NULL;
    }
    snprintf(p, sizeof p, "%s/meta.json", dir);
    size_t len = 0;
    char *text = tt_read_file(p, TT_CKPT_MAX_META, &len);
    if (!text) return NULL;
    cJSON *root = NULL;
    tt_ckpt *ck = NULL;
    if (tt_ckpt_meta_validate(text, len, p) != 0) goto fail;
    if (!(root = cJSON_Parse(text))) {
        tt_errorf("%s: out of memory", p);
        goto fail;
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    const int n = cJSON_GetArraySize(files);
    if (!(ck = calloc(1, sizeof *ck)) || !(ck->f = calloc((size_t)n, sizeof *ck->f))) {
        tt_errorf("out of memory");
        goto fail;
    }
    ck->meta_read = len;
    for (const cJSON *e = files->child; e; e = e->next)
        if (open_file(ck, &ck->f[ck->n++], dir, e)) goto fail;
    ck->meta = text;
    cJSON_Delete(root);
    return ck;
fail:
    tt_ckpt_close(ck);
    cJSON_Delete(root);
    free(text);
    return NULL;
}

tt_err tt_ckpt_check(tt_ckpt *ck, const tt_safetensors *st, const void *p, size_t n)
{
    for (int i = 0; i < ck->n; i++) {
        ckpt_file *f = &ck->f[i];
        if (f->st != st) continue;
        const char *b = f->base, *q = p;
        if (q < b || q > b + f->len || n > (size_t)(b + f->len - q))
            return tt_errorf("%s: bytes outside the file asked for", f->name);
        if (!n || !f->n_chunks) return TT_OK;
        const uint64_t at = (uint64_t)(q - b);
        return check_chunks(ck, f, at / f->chunk, (at + n - 1) / f->chunk, 0);
    }
    return tt_errorf("a tensor file that is not this checkpoint's");
}

void tt_ckpt_bytes_read(const tt_ckpt *ck, uint64_t *data, uint64_t *metadata)
{
    *data = ck->data_read;
    *metadata = ck->meta_read;
}

const char *tt_ckpt_meta_json(const tt_ckpt *ck) { return ck->meta; }
const tt_safetensors *tt_ckpt_file(const tt_ckpt *ck, const char *file)
{
    for (int i = 0; i < ck->n; i++) {
        const char *slash = strrchr(ck->f[i].name, '/');
        if (strcmp(slash ? slash + 1 : ck->f[i].name, file) == 0) return ck->f[i].st;
    }
    return NULL;
}
const tt_safetensors *tt_ckpt_tensors(const tt_ckpt *ck) { return tt_ckpt_file(ck, "state.safetensors"); }

int tt_ckpt_find(const tt_ckpt *ck, const char *group, const char *name, const tt_st_tensor **t,
                 const tt_safetensors **st)
{
    const size_t len = strlen(group);
    int files = 0;
    *t = NULL, *st = NULL;
    for (int i = 0; i < ck->n; i++) {
        const char *slash = strrchr(ck->f[i].name, '/'), *file = slash ? slash + 1 : ck->f[i].name;
        if (strncmp(file, group, len) || file[len] != '.') continue; /* group.safetensors, group.part-... */
        files++;
        const tt_st_tensor *found = tt_st_find(ck->f[i].st, name);
        if (!found) continue;
        if (*t) return tt_errorf("%s: tensor '%s' is in two files of %s", file, name, group);
        *t = found, *st = ck->f[i].st;
    }
    return files;
}

void tt_ckpt_close(tt_ckpt *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n; i++) {
        tt_st_close(ck->f[i].st);
        if (ck->f[i].base) tt_unmap_file(ck->f[i].base, ck->f[i].len);
        free(ck->f[i].name);
        free(ck->f[i].want);
        free(ck->f[i].done);
    }
    free(ck->f);
    free(ck->meta);
    free(ck);
}

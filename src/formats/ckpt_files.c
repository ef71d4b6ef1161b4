/* ckpt_files.c — checkpoint folders on disk: step-<N>/{state.safetensors,
 * meta.json}, written under a temporary name and renamed so that a crash never
 * leaves a half checkpoint that looks whole, and verified (size + XXH64 of
 * every file) before a run resumes from one. What goes in them is train's. */
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

/* Size and XXH64 of a whole file, read through a mapping. */
static tt_err hash_file(const char *path, uint64_t *size, uint64_t *hash)
{
    void *m;
    size_t n;
    if (tt_map_file(path, &m, &n)) return -1;
    if (n > 0) madvise(m, n, MADV_SEQUENTIAL);
    *size = n;
    *hash = tt_xxh64(m, n, 0);
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
static char *meta_with_files(const char *meta, int empty, int n, const char *const *files, const uint64_t *sizes,
                             const uint64_t *hashes)
{
    size_t len = strlen(meta);
    while (len > 0 && meta[len - 1] != '}') len--; /* it parsed as an object: ends in '}' */
    size_t keep = len - 1;
    while (keep > 0 && (meta[keep - 1] == ' ' || meta[keep - 1] == '\n' || meta[keep - 1] == '\t' || meta[keep - 1] == '\r'))
        keep--;
    size_t cap = keep + 64 + (size_t)n * 400, at = keep;
    char *out = malloc(cap);
    if (!out) return NULL;
    memcpy(out, meta, keep);
    at += (size_t)snprintf(out + at, cap - at, "%s\"files\": {", empty ? "\n  " : ",\n  ");
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s\n    \"%s\": {\"size\": %" PRIu64 ", \"xxh64\": \"%016" PRIx64 "\"}",
                               i ? "," : "", files[i], sizes[i], hashes[i]);
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
                          uint64_t *size, uint64_t *xxh64)
{
    char tmp[4096], path[4400];
    if (tmp_path(folder, step, tmp, sizeof tmp)) return -1;
    if (!plain_file_name(file)) return tt_errorf("checkpoint file '%s' is not a plain file name", file);
    snprintf(path, sizeof path, "%s/%s", tmp, file);
    return tt_st_write(path, n, tensors, NULL, NULL, 0) != 0 || hash_file(path, size, xxh64) != 0 ? -1 : TT_OK;
}

void tt_ckpt_abort(const char *folder, long step)
{
    char tmp[4096];
    if (!tmp_path(folder, step, tmp, sizeof tmp)) rm_rf(tmp); /* best effort; prune removes it otherwise */
}

tt_err tt_ckpt_commit(const char *folder, long step, const char *meta_json, int n_files, const char *const *files,
                      const uint64_t *sizes, const uint64_t *hashes)
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
    char *meta = meta_with_files(meta_json, empty, n_files, files, sizes, hashes);
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
    uint64_t size, hash;
    if (tt_ckpt_begin(folder, step)) return -1;
    if (tt_ckpt_write_part(folder, step, file, n, tensors, &size, &hash) ||
        tt_ckpt_commit(folder, step, meta_json, 1, &file, &size, &hash)) {
        char saved[2048];
        snprintf(saved, sizeof saved, "%s", tt_last_error());
        tt_ckpt_abort(folder, step);
        tt_errorf("%s", saved);
        return -1;
    }
    return TT_OK;
}

/* ---- open --------------------------------------------------------------- */
struct tt_ckpt {
    char *meta;
    int n;
    char **names;         /* the files meta.json lists, in its order */
    tt_safetensors **st;  /* each one mapped */
};

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
    root = cJSON_Parse(text);
    for (const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "files")->child; f; f = f->next) {
        uint64_t want = (uint64_t)cJSON_GetObjectItemCaseSensitive(f, "size")->valuedouble;
        const char *want_sum = cJSON_GetObjectItemCaseSensitive(f, "xxh64")->valuestring;
        snprintf(p, sizeof p, "%s/%s", dir, f->string);
        if (stat(p, &sb) != 0) {
            tt_errorf("%s: missing, but meta.json lists it (incomplete checkpoint)", p);
            goto fail;
        }
        if ((uint64_t)sb.st_size != want) {
            tt_errorf("%s: size %lld but meta.json records %" PRIu64 " (%s)", p, (long long)sb.st_size, want,
                      (uint64_t)sb.st_size < want ? "truncated checkpoint" : "file changed after the checkpoint was saved");
            goto fail;
        }
        uint64_t size, hash;
        if (hash_file(p, &size, &hash) != 0) goto fail;
        char got[17];
        snprintf(got, sizeof got, "%016" PRIx64, hash);
        if (strcmp(got, want_sum) != 0) {
            tt_errorf("%s: XXH64 checksum %s but meta.json records %s (corrupt checkpoint)", p, got, want_sum);
            goto fail;
        }
    }
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "files");
    const int n = cJSON_GetArraySize(files);
    if (!(ck = calloc(1, sizeof *ck)) || !(ck->names = calloc((size_t)n, sizeof *ck->names)) ||
        !(ck->st = calloc((size_t)n, sizeof *ck->st))) {
        tt_errorf("out of memory");
        goto fail;
    }
    for (const cJSON *f = files->child; f; f = f->next) {
        snprintf(p, sizeof p, "%s/%s", dir, f->string);
        if (!(ck->names[ck->n] = strdup(f->string))) {
            tt_errorf("out of memory");
            goto fail;
        }
        if (!(ck->st[ck->n++] = tt_st_open(p))) goto fail;
    }
    ck->meta = text;
    cJSON_Delete(root);
    return ck;
fail:
    tt_ckpt_close(ck);
    cJSON_Delete(root);
    free(text);
    return NULL;
}

const char *tt_ckpt_meta_json(const tt_ckpt *ck) { return ck->meta; }
const tt_safetensors *tt_ckpt_file(const tt_ckpt *ck, const char *file)
{
    for (int i = 0; i < ck->n; i++)
        if (strcmp(ck->names[i], file) == 0) return ck->st[i];
    return NULL;
}
const tt_safetensors *tt_ckpt_tensors(const tt_ckpt *ck) { return tt_ckpt_file(ck, "state.safetensors"); }

void tt_ckpt_close(tt_ckpt *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n; i++) {
        tt_st_close(ck->st[i]);
        free(ck->names[i]);
    }
    free(ck->st);
    free(ck->names);
    free(ck->meta);
    free(ck);
}

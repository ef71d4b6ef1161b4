/* safetensors.c — the safetensors format's reader: it validates a file the way
 * the reference (Rust) implementation does and then hands out pointers into an
 * mmap of it, one file or the shards an index names; and the dtypes. The
 * writer is safetensors_write.c. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "formats/safetensors.h"

/* ---- dtypes: every dtype the reference implementation knows ------------- */
static const struct { const char *name; unsigned bits; } st_dtypes[] = {
    {"BOOL", 8},     {"U8", 8},       {"I8", 8},       {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8},  {"F4", 4},       {"F6_E2M3", 6},  {"F6_E3M2", 6}, {"I16", 16},
    {"U16", 16},     {"F16", 16},     {"BF16", 16},    {"I32", 32},    {"U32", 32},
    {"F32", 32},     {"I64", 64},     {"U64", 64},     {"F64", 64},    {"C64", 64},
};

size_t tt_st_dtype_bits(const char *dtype)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(dtype, st_dtypes[i].name) == 0) return st_dtypes[i].bits;
    return 0;
}

static const char *const tt_to_st[TT_DTYPE_COUNT] = {
    [TT_F32] = "F32", [TT_BF16] = "BF16", [TT_F16] = "F16", [TT_I32] = "I32", [TT_I64] = "I64", [TT_F64] = "F64",
};

const char *tt_st_dtype_from_tt(tt_dtype t) { return (unsigned)t < TT_DTYPE_COUNT ? tt_to_st[t] : "?"; }

int tt_st_dtype_to_tt(const char *dtype, tt_dtype *out)
{
    for (int i = 0; i < TT_DTYPE_COUNT; i++)
        if (strcmp(dtype, tt_to_st[i]) == 0) {
            *out = (tt_dtype)i;
            return 0;
        }
    return tt_errorf("safetensors dtype '%s' has no titan equivalent", dtype);
}

/* ---- small shared helpers ----------------------------------------------- */
size_t tt_utf8_invalid_at(const void *s, size_t len)
{
    const uint8_t *p = s;
    size_t i = 0;
    while (i < len) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f, min = 0x80;
        else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f, min = 0x800;
        else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07, min = 0x10000;
        else return i;
        if (len - i < n) return i;
        for (size_t k = 1; k < n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += n;
    }
    return len;
}


char *tt_read_file(const char *path, size_t limit, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tt_errorf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    char *buf = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        tt_errorf("%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)sb.st_size > limit) {
        tt_errorf("%s: %lld bytes, more than the %zu-byte limit for this kind of file", path, (long long)sb.st_size, limit);
        goto out;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    if (!(buf = malloc(n + 1))) {
        tt_errorf("%s: out of memory", path);
        goto out;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            tt_errorf("%s: read failed after %zu of %zu bytes%s", path, got, n, r < 0 ? "" : " (file shrank)");
            free(buf);
            buf = NULL;
            goto out;
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
out:
    close(fd);
    return buf;
}

/* ---- the opened set of tensors ------------------------------------------ */
typedef struct { void *base; size_t len; } st_map;

struct tt_safetensors {
    tt_st_tensor *t; /* n tensors, file order */
    int *shard;      /* shard index of each tensor */
    int n, cap;
    char **shard_name; /* for error messages and index checks */
    int n_shards;
    st_map *maps; /* mmaps we own (none for tt_st_parse) */
    int n_maps;
    char **meta_k, **meta_v;
    int n_meta;
    int *slot;     /* open-addressing hash of names: tensor index + 1, 0 = empty */
    size_t n_slot; /* power of two, >= 2n */
    int hole;      /* the last shard failed on data bytes no tensor claims (a tensor missing from its header) */
};

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Rebuild the name index; a second tensor of the same name is an error. */
static tt_err st_rehash(tt_safetensors *st)
{
    size_t want = 16;
    while (want < 2 * (size_t)st->n) want *= 2;
    free(st->slot);
    st->slot = calloc(want, sizeof *st->slot);
    st->n_slot = want;
    if (!st->slot) return tt_errorf("out of memory indexing %d tensors", st->n);
    for (int i = 0; i < st->n; i++) {
        size_t h = (size_t)name_hash(st->t[i].name) & (want - 1);
        while (st->slot[h]) {
            int j = st->slot[h] - 1;
            if (strcmp(st->t[j].name, st->t[i].name) == 0) {
                if (st->shard[i] == st->shard[j])
                    return tt_errorf("%s: tensor '%s' appears twice in the header", st->shard_name[st->shard[i]],
                                     st->t[i].name);
                return tt_errorf("%s: tensor '%s' is also in %s", st->shard_name[st->shard[i]], st->t[i].name,
                                 st->shard_name[st->shard[j]]);
            }
            h = (h + 1) & (want - 1);
        }
        st->slot[h] = i + 1;
    }
    return TT_OK;
}

static void fmt_shape(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* A JSON number that is an exact non-negative integer. Doubles hold integers
 * exactly only up to 2^53, which bounds every real offset and dimension. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0 && d <= 9007199254740992.0)) return -1;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return -1;
    *out = u;
    return 0;
}

/* The writer checks the tensors it is given the same way (safetensors_write.c). */
tt_err tt_st_check_size(const char *file, const tt_st_tensor *t, uint64_t begin, uint64_t end, size_t bits)
{
    char shp[256];
    fmt_shape(shp, sizeof shp, t->shape, t->ndim);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t dim = (uint64_t)t->shape[d];
        if (dim != 0 && numel > UINT64_MAX / dim)
            return tt_errorf("%s: tensor '%s': shape %s overflows (more than 2^64 elements)", file, t->name, shp);
        numel *= dim;
    }
    if (numel > UINT64_MAX / bits)
        return tt_errorf("%s: tensor '%s': shape %s x %s overflows (more than 2^64 bits)", file, t->name, shp, t->dtype);
    uint64_t nbits = numel * bits;
    if (nbits % 8)
        return tt_errorf("%s: tensor '%s': shape %s x %s is not a whole number of bytes", file, t->name, shp, t->dtype);
    if (end - begin != nbits / 8)
        return tt_errorf("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") but shape %s x %s needs %" PRIu64
                         " bytes",
                         file, t->name, begin, end, shp, t->dtype, nbits / 8);
    return TT_OK;
}

static tt_err parse_tensor(const char *file, const cJSON *e, tt_st_tensor *t, uint64_t *begin, uint64_t *end)
{
    const char *nm = t->name;
    if (!cJSON_IsObject(e)) return tt_errorf("%s: tensor '%s': entry is not a JSON object", file, nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return tt_errorf("%s: tensor '%s': missing or non-string \"dtype\"", file, nm);
    size_t bits = tt_st_dtype_bits(dt->valuestring);
    if (!bits) return tt_errorf("%s: tensor '%s': unknown dtype \"%.32s\"", file, nm, dt->valuestring);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
    if (!cJSON_IsArray(sh)) return tt_errorf("%s: tensor '%s': missing or non-array \"shape\"", file, nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > TT_ST_MAX_DIMS)
        return tt_errorf("%s: tensor '%s': %d dimensions, more than the %d supported", file, nm, nd, TT_ST_MAX_DIMS);
    t->ndim = 0;
    for (const cJSON *d = sh->child; d; d = d->next) {
        uint64_t v;
        if (json_uint(d, &v) != 0)
            return tt_errorf("%s: tensor '%s': shape[%d] is not an integer in [0, 2^53]", file, nm, t->ndim);
        t->shape[t->ndim++] = (int64_t)v;
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2)
        return tt_errorf("%s: tensor '%s': \"data_offsets\" must be an array [begin, end]", file, nm);
    if (json_uint(off->child, begin) != 0 || json_uint(off->child->next, end) != 0)
        return tt_errorf("%s: tensor '%s': data_offsets must be integers in [0, 2^53]", file, nm);
    if (*end < *begin)
        return tt_errorf("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") end before they begin", file, nm,
                         *begin, *end);
    return tt_st_check_size(file, t, *begin, *end, bits);
}

static tt_err parse_metadata(tt_safetensors *st, const char *file, const cJSON *m)
{
    if (!cJSON_IsObject(m)) return tt_errorf("%s: \"__metadata__\" is not a JSON object", file);
    int first = st->n_meta; /* this shard's keys start here */
    int cnt = cJSON_GetArraySize(m);
    char **k = realloc(st->meta_k, sizeof *k * (size_t)(st->n_meta + cnt + 1));
    if (k) st->meta_k = k;
    char **v = realloc(st->meta_v, sizeof *v * (size_t)(st->n_meta + cnt + 1));
    if (v) st->meta_v = v;
    if (!k || !v) return tt_errorf("%s: out of memory", file);
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return tt_errorf("%s: \"__metadata__\" value of key '%s' is not a string", file, e->string);
        for (int i = 0; i < st->n_meta; i++)
            if (strcmp(st->meta_k[i], e->string) == 0) {
                if (i >= first) return tt_errorf("%s: \"__metadata__\" has key '%s' twice", file, e->string);
                goto next; /* an earlier shard set it: first one wins */
            }
        st->meta_k[st->n_meta] = tt_strdup(e->string);
        st->meta_v[st->n_meta] = tt_strdup(e->valuestring);
        if (!st->meta_k[st->n_meta] || !st->meta_v[st->n_meta]) {
            free(st->meta_k[st->n_meta]);
            free(st->meta_v[st->n_meta]);
            return tt_errorf("%s: out of memory", file);
        }
        st->n_meta++;
    next:;
    }
    return TT_OK;
}

typedef struct { uint64_t begin, end; int i; } span; /* one tensor's data_offsets */

/* Bytes [b, e) of the data section that no tensor claims: most often a tensor
 * missing from the header, whose data is still there. prev / next: the
 * tensors on either side (NULL at the start / end of the data section). */
static tt_err unclaimed(const char *file, uint64_t b, uint64_t e, const char *prev, const span *ps, const char *next,
                        const span *ns)
{
    char before[400] = "", after[400] = "";
    if (prev) snprintf(before, sizeof before, " after tensor '%s' [%" PRIu64 ", %" PRIu64 ")", prev, ps->begin, ps->end);
    if (next) snprintf(after, sizeof after, "%s before tensor '%s' [%" PRIu64 ", %" PRIu64 ")", prev ? " and" : "", next,
                       ns->begin, ns->end);
    return tt_errorf("%s: bytes [%" PRIu64 ", %" PRIu64 ") of the data section belong to no tensor: a tensor is missing "
                     "from the header%s%s%s (or %s)",
                     file, b, e, prev || next ? "" : ", which lists none", before, after,
                     !next ? "the file has stray bytes at its end" : prev ? "their data_offsets are wrong"
                                                                          : "its data_offsets are wrong");
}

static int by_offset(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Validate one file image and append its tensors (in file order) to st. */
static tt_err st_add_shard(tt_safetensors *st, const uint8_t *buf, size_t len, const char *file)
{
    char **sn = realloc(st->shard_name, sizeof *sn * (size_t)(st->n_shards + 1));
    if (!sn) return tt_errorf("%s: out of memory", file);
    st->shard_name = sn;
    if (!(sn[st->n_shards] = tt_strdup(file))) return -1;
    int shard = st->n_shards++;

    if (len < 8) return tt_errorf("%s: file is %zu bytes, too short for the 8-byte header length", file, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i]; /* little-endian */
    if (hlen > TT_ST_MAX_HEADER)
        return tt_errorf("%s: header length %" PRIu64 " exceeds the %u-byte limit (not a safetensors file?)", file, hlen,
                         TT_ST_MAX_HEADER);
    if (hlen > len - 8)
        return tt_errorf("%s: header length %" PRIu64 " but only %zu bytes follow the length field (truncated file?)",
                         file, hlen, len - 8);
    if (hlen == 0) return tt_errorf("%s: empty header", file);
    const uint8_t *hdr = buf + 8;
    size_t bad = tt_utf8_invalid_at(hdr, (size_t)hlen);
    if (bad < hlen) return tt_errorf("%s: header is not valid UTF-8 (byte %zu of the header)", file, bad);
    const uint8_t *nul = memchr(hdr, 0, (size_t)hlen);
    if (nul) return tt_errorf("%s: header has a NUL byte at byte %td", file, nul - hdr);
    if (hdr[0] != '{') return tt_errorf("%s: header does not start with '{' (it must be a JSON object)", file);

    char *text = malloc((size_t)hlen + 1);
    if (!text) return tt_errorf("%s: out of memory for a %" PRIu64 "-byte header", file, hlen);
    memcpy(text, hdr, (size_t)hlen);
    text[hlen] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    int rc = -1;
    span *off = NULL;
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        tt_errorf("%s: header is not valid JSON (near byte %zu of the header)", file, at);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        tt_errorf("%s: header is not a JSON object", file);
        goto out;
    }

    int cnt = cJSON_GetArraySize(root), base = st->n;
    if (st->n + cnt > st->cap) {
        int cap = st->n + cnt;
        tt_st_tensor *t = realloc(st->t, sizeof *t * (size_t)cap);
        if (t) st->t = t;
        int *s = realloc(st->shard, sizeof *s * (size_t)cap);
        if (s) st->shard = s;
        if (!t || !s) {
            tt_errorf("%s: out of memory for %d tensors", file, cnt);
            goto out;
        }
        st->cap = cap;
    }
    if (!(off = malloc(sizeof *off * (size_t)(cnt + 1)))) {
        tt_errorf("%s: out of memory", file);
        goto out;
    }
    int k = 0, seen_meta = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_meta++) {
                tt_errorf("%s: \"__metadata__\" appears twice in the header", file);
                goto out;
            }
            if (parse_metadata(st, file, e) != 0) goto out;
            continue;
        }
        tt_st_tensor *t = &st->t[st->n];
        memset(t, 0, sizeof *t);
        if (!(t->name = tt_strdup(e->string))) goto out;
        st->shard[st->n++] = shard;
        off[k].i = k;
        if (parse_tensor(file, e, t, &off[k].begin, &off[k].end) != 0) goto out;
        k++;
    }
    /* names first: a duplicate is a clearer error than the overlap it causes */
    if (st_rehash(st) != 0) goto out;

    /* Sorted by offset, the tensors must tile the data section exactly. */
    uint64_t data_len = len - 8 - hlen, pos = 0;
    qsort(off, (size_t)k, sizeof *off, by_offset);
    for (int i = 0; i < k; i++) {
        uint64_t b = off[i].begin, e = off[i].end;
        const char *nm = st->t[base + off[i].i].name, *prev = i ? st->t[base + off[i - 1].i].name : NULL;
        if (b < pos) {
            tt_errorf("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 ") overlap tensor '%s' [%" PRIu64
                      ", %" PRIu64 ")",
                      file, nm, b, e, prev, off[i - 1].begin, pos);
            goto out;
        }
        if (b > pos) {
            st->hole = 1;
            unclaimed(file, pos, b, prev, i ? &off[i - 1] : NULL, nm, &off[i]);
            goto out;
        }
        pos = e;
    }
    if (pos < data_len) {
        st->hole = 1;
        unclaimed(file, pos, data_len, k ? st->t[base + off[k - 1].i].name : NULL, k ? &off[k - 1] : NULL, NULL, NULL);
        goto out;
    }
    if (pos != data_len) {
        tt_errorf("%s: tensors end at byte %" PRIu64 " of the data section, but it has %" PRIu64
                  " bytes (file %zu = 8 + header %" PRIu64 " + data)%s",
                  file, pos, data_len, len, hlen,
                  pos > data_len ? " (truncated file?)" : " (stray bytes after the last tensor)");
        goto out;
    }

    /* Store this shard's tensors in file order, pointing into the buffer. */
    tt_st_tensor *tmp = malloc(sizeof *tmp * (size_t)(k + 1));
    if (!tmp) {
        tt_errorf("%s: out of memory", file);
        goto out;
    }
    for (int i = 0; i < k; i++) {
        tmp[i] = st->t[base + off[i].i];
        tmp[i].data = buf + 8 + hlen + off[i].begin;
        tmp[i].nbytes = (size_t)(off[i].end - off[i].begin);
    }
    if (k) memcpy(st->t + base, tmp, sizeof *tmp * (size_t)k);
    free(tmp);
    rc = st_rehash(st);
out:
    free(off);
    cJSON_Delete(root);
    free(text);
    return rc;
}

static tt_safetensors *st_new(void)
{
    tt_safetensors *st = calloc(1, sizeof *st);
    if (!st) tt_errorf("out of memory");
    return st;
}

void tt_st_close(tt_safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->n; i++) free((void *)st->t[i].name);
    for (int i = 0; i < st->n_shards; i++) free(st->shard_name[i]);
    for (int i = 0; i < st->n_maps; i++)
        tt_unmap_file(st->maps[i].base, st->maps[i].len);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_k[i]);
        free(st->meta_v[i]);
    }
    free(st->t);
    free(st->shard);
    free(st->shard_name);
    free(st->maps);
    free(st->meta_k);
    free(st->meta_v);
    free(st->slot);
    free(st);
}

tt_err tt_st_parse(const void *buf, size_t len, const char *name_for_errors, tt_safetensors **out)
{
    *out = NULL;
    tt_safetensors *st = st_new();
    if (!st) return -1;
    if (st_add_shard(st, buf, len, name_for_errors ? name_for_errors : "<memory>") != 0) {
        tt_st_close(st);
        return -1;
    }
    *out = st;
    return TT_OK;
}

/* mmap path read-only and parse it into st as one more shard. */
static tt_err st_map_shard(tt_safetensors *st, const char *path)
{
    st_map *m = realloc(st->maps, sizeof *m * (size_t)(st->n_maps + 1));
    if (!m) return tt_errorf("%s: out of memory", path);
    st->maps = m;
    void *base;
    size_t len;
    if (tt_map_file(path, &base, &len)) return -1;
    st->maps[st->n_maps++] = (st_map){base, len};
    return st_add_shard(st, base, len, path);
}

tt_safetensors *tt_st_open(const char *path)
{
    tt_safetensors *st = st_new();
    if (st && st_map_shard(st, path) != 0) {
        tt_st_close(st);
        return NULL;
    }
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A shard name from an index: relative, and never climbing out of its folder. */
static int safe_rel_path(const char *f)
{
    if (!*f || f[0] == '/') return 0;
    for (const char *s = f; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
        s += n + (e != NULL);
    }
    return 1;
}

/* A shard failed on data bytes no tensor claims: if weight_map puts a tensor
 * in it that its header lacks (its names are indexed before the data
 * checks), that is the missing tensor: name it in front of the error. */
static void name_missing(const tt_safetensors *st, const cJSON *wm, const char *file, const char *path)
{
    const char *first = NULL;
    int n = 0;
    for (const cJSON *e = wm->child; e; e = e->next)
        if (strcmp(e->valuestring, file) == 0 && !tt_st_find(st, e->string) && n++ == 0) first = e->string;
    if (n == 1) tt_error_prefix("%s: tensor '%s' is missing from the header of %s, where weight_map puts it: ", path, first, file);
    else if (n > 1)
        tt_error_prefix("%s: tensor '%s' and %d more are missing from the header of %s, where weight_map puts them: ",
                        path, first, n - 1, file);
}

static tt_safetensors *open_index(const char *path)
{
    size_t len = 0;
    char *text = tt_read_file(path, TT_ST_MAX_HEADER, &len);
    if (!text) return NULL;
    tt_safetensors *st = NULL;
    cJSON *root = NULL;
    const char **files = NULL;
    char dir[4096], shard[8192];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");

    size_t bad = tt_utf8_invalid_at(text, len);
    if (bad < len) {
        tt_errorf("%s: not valid UTF-8 (byte %zu)", path, bad);
        goto fail;
    }
    if (strlen(text) != len) {
        tt_errorf("%s: has a NUL byte at byte %zu", path, strlen(text));
        goto fail;
    }
    if (!(root = cJSON_Parse(text))) {
        tt_errorf("%s: not valid JSON", path);
        goto fail;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        tt_errorf("%s: expected a JSON object with a \"weight_map\" object", path);
        goto fail;
    }
    int cnt = cJSON_GetArraySize(wm), nf = 0;
    if (!(files = malloc(sizeof *files * (size_t)(cnt + 1)))) {
        tt_errorf("%s: out of memory", path);
        goto fail;
    }
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !safe_rel_path(e->valuestring)) {
            tt_errorf("%s: weight_map entry '%s' is not a relative file name inside the folder", path, e->string);
            goto fail;
        }
        files[nf++] = e->valuestring;
    }
    if (nf == 0) {
        tt_errorf("%s: weight_map is empty", path);
        goto fail;
    }
    /* shard files in name order ("-00001-of-", "-00002-of-", ...), each once */
    qsort(files, (size_t)nf, sizeof *files, cmp_str);
    if (!(st = st_new())) goto fail;
    for (int i = 0; i < nf; i++) {
        if (i && strcmp(files[i], files[i - 1]) == 0) continue;
        snprintf(shard, sizeof shard, "%s/%s", dir, files[i]);
        if (st_map_shard(st, shard) != 0) {
            if (st->hole) name_missing(st, wm, files[i], path);
            goto fail;
        }
    }
    /* every weight_map entry must be where the index says it is */
    for (const cJSON *e = wm->child; e; e = e->next) {
        const tt_st_tensor *t = tt_st_find(st, e->string);
        snprintf(shard, sizeof shard, "%s/%s", dir, e->valuestring);
        if (!t) {
            tt_errorf("%s: weight_map puts tensor '%s' in %s, which has no such tensor", path, e->string, e->valuestring);
            goto fail;
        }
        const char *in = st->shard_name[st->shard[t - st->t]];
        if (strcmp(in, shard) != 0) {
            tt_errorf("%s: weight_map puts tensor '%s' in %s, but it is in %s", path, e->string, e->valuestring, in);
            goto fail;
        }
    }
    free(files);
    cJSON_Delete(root);
    free(text);
    return st;
fail:
    tt_st_close(st);
    free(files);
    cJSON_Delete(root);
    free(text);
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

tt_safetensors *tt_st_open_dir(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        tt_errorf("%s: %s", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (stat(p, &sb) == 0) return open_index(p);
        snprintf(p, sizeof p, "%s/model.safetensors", path);
        if (stat(p, &sb) == 0) return tt_st_open(p);
        tt_errorf("%s: no model.safetensors or model.safetensors.index.json in this folder", path);
        return NULL;
    }
    return ends_with(path, ".index.json") ? open_index(path) : tt_st_open(path);
}

int tt_st_count(const tt_safetensors *st) { return st->n; }

const tt_st_tensor *tt_st_get(const tt_safetensors *st, int i)
{
    return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const tt_st_tensor *tt_st_find(const tt_safetensors *st, const char *name)
{
    if (!st->slot) return NULL;
    for (size_t h = (size_t)name_hash(name) & (st->n_slot - 1); st->slot[h]; h = (h + 1) & (st->n_slot - 1))
        if (strcmp(st->t[st->slot[h] - 1].name, name) == 0) return &st->t[st->slot[h] - 1];
    return NULL;
}

const char *tt_st_metadata(const tt_safetensors *st, const char *key)
{
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_k[i], key) == 0) return st->meta_v[i];
    return NULL;
}

int tt_st_metadata_count(const tt_safetensors *st) { return st->n_meta; }

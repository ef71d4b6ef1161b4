/* shard.c — writing and memory-mapping token shard files, with every header
 * field and token checked before the loader may trust it. */
#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

struct tt_shard_writer {
    char *path, *tmp;
    FILE *f;
    tt_shard_header hdr;
    uint8_t buf[1 << 16];
    size_t used;
    int failed;
    /* version 2: the sections after the tokens, written at close */
    uint8_t *mask;
    uint64_t *doc_off, *cuts;
    uint32_t *doc_prefix;
    size_t mask_cap, doc_cap, cut_cap;
};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static size_t header_bytes(uint32_t version)
{
    return version == TT_SHARD_VERSION_CHAT ? TT_SHARD_HEADER_BYTES_CHAT : TT_SHARD_HEADER_BYTES;
}

static void encode_header(const tt_shard_header *h, uint8_t out[TT_SHARD_HEADER_BYTES_CHAT])
{
    memset(out, 0, TT_SHARD_HEADER_BYTES_CHAT);
    memcpy(out, TT_SHARD_MAGIC, 8); /* includes the NUL */
    put_u32(out + 8, h->version);
    put_u32(out + 12, h->token_width);
    put_u32(out + 16, h->bos_id);
    put_u32(out + 20, h->vocab_size);
    put_u64(out + 24, h->token_count);
    put_u64(out + 32, h->doc_count);
    put_u64(out + 40, h->cut_count);
}

static tt_shard_writer *writer_open(const char *path, uint32_t version, uint32_t token_width, uint32_t bos_id,
                                    uint32_t vocab_size)
{
    if (token_width != 2 && token_width != 4) {
        tt_errorf("%s: token width must be 2 or 4 bytes, not %u", path, token_width);
        return NULL;
    }
    if (vocab_size == 0 || (token_width == 2 && vocab_size > 65536)) {
        tt_errorf("%s: vocab size %u does not fit %u-byte tokens", path, vocab_size, token_width);
        return NULL;
    }
    if (bos_id >= vocab_size) {
        tt_errorf("%s: bos id %u is not below vocab size %u", path, bos_id, vocab_size);
        return NULL;
    }
    tt_shard_writer *w = tt_alloc(sizeof *w);
    if (!w) return NULL;
    size_t n = strlen(path) + 32;
    w->path = tt_strdup(path);
    w->tmp = malloc(n);
    if (!w->path || !w->tmp) {
        tt_errorf("%s: out of memory", path);
        goto fail;
    }
    snprintf(w->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    w->f = fopen(w->tmp, "wb");
    if (!w->f) {
        tt_errorf("%s: cannot create: %s", w->tmp, strerror(errno));
        goto fail;
    }
    w->hdr = (tt_shard_header){version, token_width, bos_id, vocab_size, 0, 0, 0};
    uint8_t h[TT_SHARD_HEADER_BYTES_CHAT];
    encode_header(&w->hdr, h); /* counts are patched at close */
    if (fwrite(h, 1, header_bytes(version), w->f) != header_bytes(version)) {
        tt_errorf("%s: write failed: %s", w->tmp, strerror(errno));
        fclose(w->f);
        unlink(w->tmp);
        goto fail;
    }
    return w;
fail:
    free(w->path);
    free(w->tmp);
    tt_free(w);
    return NULL;
}

tt_shard_writer *tt_shard_writer_open(const char *path, uint32_t token_width, uint32_t bos_id, uint32_t vocab_size)
{
    return writer_open(path, TT_SHARD_VERSION, token_width, bos_id, vocab_size);
}

tt_shard_writer *tt_shard_writer_open_chat(const char *path, uint32_t token_width, uint32_t pad_id, uint32_t vocab_size)
{
    tt_shard_writer *w = writer_open(path, TT_SHARD_VERSION_CHAT, token_width, pad_id, vocab_size);
    if (w && !(w->doc_off = calloc(1, sizeof *w->doc_off))) { /* doc_off[0] = 0 */
        tt_errorf("%s: out of memory", path);
        tt_shard_writer_abort(w);
        return NULL;
    }
    return w;
}

static tt_err flush_buf(tt_shard_writer *w)
{
    if (w->used && fwrite(w->buf, 1, w->used, w->f) != w->used) {
        w->failed = 1;
        return tt_errorf("%s: write failed: %s", w->tmp, strerror(errno));
    }
    w->used = 0;
    return TT_OK;
}

static tt_err append_tokens(tt_shard_writer *w, const int32_t *tokens, size_t n)
{
    if (w->failed) return tt_errorf("%s: an earlier write failed", w->path);
    const uint32_t width = w->hdr.token_width;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= w->hdr.vocab_size) {
            w->failed = 1;
            return tt_errorf("%s: token %d (appended as number %llu) is outside the vocabulary [0, %u)", w->path,
                             tokens[i], (unsigned long long)(w->hdr.token_count + i), w->hdr.vocab_size);
        }
        if (w->used + width > sizeof w->buf && flush_buf(w) != TT_OK) return -1;
        uint32_t v = (uint32_t)tokens[i];
        for (uint32_t b = 0; b < width; b++) w->buf[w->used++] = (uint8_t)(v >> (8 * b));
    }
    w->hdr.token_count += n;
    return TT_OK;
}

tt_err tt_shard_writer_append(tt_shard_writer *w, const int32_t *tokens, size_t n)
{
    if (w->hdr.version != TT_SHARD_VERSION) return tt_errorf("%s: a conversation shard takes whole documents", w->path);
    return append_tokens(w, tokens, n);
}

/* grow *p (elements of size elem, capacity *cap) to hold need */
static tt_err grow(void **p, size_t *cap, size_t need, size_t elem, const char *path)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return tt_errorf("%s: out of memory holding the loss mask and documents (%zu entries)", path, need);
    *p = q;
    *cap = c;
    return 0;
}

tt_err tt_shard_writer_append_doc(tt_shard_writer *w, const int32_t *tokens, const uint8_t *mask, size_t n,
                                  uint32_t prefix, const uint64_t *cuts, int n_cuts)
{
    if (w->hdr.version != TT_SHARD_VERSION_CHAT) return tt_errorf("%s: a text shard has no documents", w->path);
    if (n == 0 || prefix >= n || mask[0]) return tt_errorf("%s: bad document (%zu tokens, prefix %u)", w->path, n, prefix);
    for (int k = 0; k < n_cuts; k++)
        if (cuts[k] <= prefix || cuts[k] >= n || (k && cuts[k] <= cuts[k - 1]))
            return tt_errorf("%s: cut %llu of a document of %zu tokens is out of order", w->path,
                             (unsigned long long)cuts[k], n);
    const uint64_t at = w->hdr.token_count, d = w->hdr.doc_count;
    if (grow((void **)&w->mask, &w->mask_cap, at + n, 1, w->path) ||
        grow((void **)&w->doc_off, &w->doc_cap, d + 2, sizeof *w->doc_off, w->path) ||
        grow((void **)&w->cuts, &w->cut_cap, w->hdr.cut_count + (size_t)n_cuts, sizeof *w->cuts, w->path))
        return -1;
    uint32_t *pre = realloc(w->doc_prefix, sizeof *pre * (size_t)w->doc_cap);
    if (!pre) return tt_errorf("%s: out of memory", w->path);
    w->doc_prefix = pre;
    if (append_tokens(w, tokens, n)) return -1;
    for (size_t i = 0; i < n; i++) w->mask[at + i] = mask[i] != 0;
    for (int k = 0; k < n_cuts; k++) w->cuts[w->hdr.cut_count++] = at + cuts[k];
    w->doc_prefix[d] = prefix;
    w->doc_off[d + 1] = at + n;
    w->hdr.doc_count++;
    return TT_OK;
}

uint64_t tt_shard_writer_count(const tt_shard_writer *w) { return w->hdr.token_count; }

static void writer_free(tt_shard_writer *w)
{
    free(w->mask), free(w->doc_off), free(w->cuts), free(w->doc_prefix);
    free(w->path);
    free(w->tmp);
    tt_free(w);
}

void tt_shard_writer_abort(tt_shard_writer *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    unlink(w->tmp);
    writer_free(w);
}

/* fsync the directory holding path so the rename itself is durable */
static void sync_parent_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* the bytes that pad n to a multiple of 8 */
static size_t pad8(uint64_t n) { return (size_t)((8 - n % 8) % 8); }

static tt_err put_bytes(tt_shard_writer *w, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        if (w->used == sizeof w->buf && flush_buf(w)) return -1;
        size_t k = sizeof w->buf - w->used < n ? sizeof w->buf - w->used : n;
        memcpy(w->buf + w->used, b, k);
        w->used += k, b += k, n -= k;
    }
    return TT_OK;
}

static tt_err put_pad(tt_shard_writer *w, uint64_t n)
{
    static const uint8_t zero[8];
    return put_bytes(w, zero, pad8(n));
}

/* version 2's sections after the tokens, little-endian whatever the host */
static tt_err write_sections(tt_shard_writer *w)
{
    const tt_shard_header *h = &w->hdr;
    uint8_t v[8];
    if (put_pad(w, h->token_count * h->token_width) || put_bytes(w, w->mask, (size_t)h->token_count) ||
        put_pad(w, h->token_count))
        return -1;
    for (uint64_t d = 0; d <= h->doc_count; d++)
        if ((put_u64(v, w->doc_off[d]), put_bytes(w, v, 8))) return -1;
    for (uint64_t d = 0; d < h->doc_count; d++)
        if ((put_u32(v, w->doc_prefix[d]), put_bytes(w, v, 4))) return -1;
    if (put_pad(w, 4 * h->doc_count)) return -1;
    for (uint64_t k = 0; k < h->cut_count; k++)
        if ((put_u64(v, w->cuts[k]), put_bytes(w, v, 8))) return -1;
    return TT_OK;
}

tt_err tt_shard_writer_close(tt_shard_writer *w)
{
    if (w->failed || (w->hdr.version == TT_SHARD_VERSION_CHAT && write_sections(w)) || flush_buf(w) != TT_OK) goto fail;
    uint8_t h[TT_SHARD_HEADER_BYTES_CHAT];
    encode_header(&w->hdr, h);
    const size_t hb = header_bytes(w->hdr.version);
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, hb, w->f) != hb || fflush(w->f) != 0 ||
        fsync(fileno(w->f)) != 0) {
        tt_errorf("%s: write failed: %s", w->tmp, strerror(errno));
        goto fail;
    }
    if (fclose(w->f) != 0) {
        w->f = NULL;
        tt_errorf("%s: close failed: %s", w->tmp, strerror(errno));
        goto fail;
    }
    w->f = NULL;
    if (rename(w->tmp, w->path) != 0) {
        tt_errorf("%s: cannot rename %s into place: %s", w->path, w->tmp, strerror(errno));
        goto fail;
    }
    sync_parent_dir(w->path);
    writer_free(w);
    return TT_OK;
fail:
    tt_shard_writer_abort(w);
    return -1;
}

/* Where version 2's sections start, and the whole size; 0 if the counts are beyond any file (2^48
 * each: with that bound no sum below can wrap, however a header is crafted). */
typedef struct {
    size_t mask, doc_off, doc_prefix, cuts, end;
} shard_layout;

static int layout_of(const tt_shard_header *h, shard_layout *L)
{
    size_t body, x;
    const uint64_t most = (uint64_t)1 << 48;
    if (h->token_count > most || h->doc_count > most || h->cut_count > most ||
        tt_mul_size((size_t)h->token_count, h->token_width, &body))
        return 0;
    size_t at = header_bytes(h->version) + body;
    if (h->version != TT_SHARD_VERSION_CHAT) {
        L->end = at;
        return 1;
    }
    L->mask = at += pad8(body);
    L->doc_off = at += (size_t)h->token_count + pad8(h->token_count);
    L->doc_prefix = at += 8 * ((size_t)h->doc_count + 1);
    L->cuts = at += 4 * (size_t)h->doc_count + pad8(4 * h->doc_count);
    return !tt_mul_size((size_t)h->cut_count, 8, &x) && x <= SIZE_MAX - at && (L->end = at + x, 1);
}

/* version 2: documents tile the tokens, prefixes fit, masks are flags that skip each document's
 * first token, and cuts lie inside documents after their prefix, in order */
static tt_err validate_sections(const uint8_t *p, const tt_shard_header *h, const shard_layout *L, const char *name)
{
    const uint8_t *mask = p + L->mask, *off = p + L->doc_off, *pre = p + L->doc_prefix, *cut = p + L->cuts;
    if (h->doc_count == 0 && h->token_count) return tt_errorf("%s: tokens but no documents", name);
    if (tt_shard_le64(off) != 0 || tt_shard_le64(off + 8 * h->doc_count) != h->token_count)
        return tt_errorf("%s: the document offsets do not span the %llu tokens", name, (unsigned long long)h->token_count);
    uint64_t k = 0;
    for (uint64_t d = 0; d < h->doc_count; d++) {
        uint64_t a = tt_shard_le64(off + 8 * d), b = tt_shard_le64(off + 8 * (d + 1));
        uint32_t pr = get_u32(pre + 4 * d);
        if (b <= a || b > h->token_count)
            return tt_errorf("%s: document %llu is [%llu, %llu): empty or out of order", name, (unsigned long long)d,
                             (unsigned long long)a, (unsigned long long)b);
        if (pr >= b - a)
            return tt_errorf("%s: document %llu repeats a prefix of %u tokens but has %llu", name,
                             (unsigned long long)d, pr, (unsigned long long)(b - a));
        if (mask[a]) return tt_errorf("%s: document %llu's first token is flagged as a target", name, (unsigned long long)d);
        for (uint64_t i = a; i < a + pr; i++) /* a later piece repeats the prefix: it trains nothing */
            if (mask[i])
                return tt_errorf("%s: token %llu of document %llu's repeated prefix is flagged as a target", name,
                                 (unsigned long long)(i - a), (unsigned long long)d);
        for (uint64_t c; k < h->cut_count && (c = tt_shard_le64(cut + 8 * k)) < b; k++)
            if (c <= a + pr || (k && c <= tt_shard_le64(cut + 8 * (k - 1))))
                return tt_errorf("%s: cut %llu (token %llu) is not inside document %llu after its prefix, in order",
                                 name, (unsigned long long)k, (unsigned long long)c, (unsigned long long)d);
    }
    if (k != h->cut_count) return tt_errorf("%s: cut %llu lies past the last document", name, (unsigned long long)k);
    for (uint64_t i = 0; i < h->token_count; i++)
        if (mask[i] > 1) return tt_errorf("%s: the mask of token %llu is %u, not 0 or 1", name, (unsigned long long)i, mask[i]);
    return TT_OK;
}

tt_err tt_shard_validate(const void *data, size_t size, const char *name, tt_shard_header *out)
{
    const uint8_t *p = data;
    if (size < TT_SHARD_HEADER_BYTES)
        return tt_errorf("%s: not a token shard: %zu bytes is shorter than the %d-byte header", name, size,
                         TT_SHARD_HEADER_BYTES);
    if (memcmp(p, TT_SHARD_MAGIC, 8) != 0) return tt_errorf("%s: not a token shard: bad magic (want \"TTSHARD\\0\")", name);
    tt_shard_header h = {get_u32(p + 8), get_u32(p + 12), get_u32(p + 16), get_u32(p + 20), get_u64(p + 24), 0, 0};
    if (h.version != TT_SHARD_VERSION && h.version != TT_SHARD_VERSION_CHAT)
        return tt_errorf("%s: unsupported shard version %u (this build reads versions %d and %d)", name, h.version,
                         TT_SHARD_VERSION, TT_SHARD_VERSION_CHAT);
    if (h.version == TT_SHARD_VERSION_CHAT) {
        if (size < TT_SHARD_HEADER_BYTES_CHAT)
            return tt_errorf("%s: truncated: %zu bytes is shorter than the %d-byte header", name, size,
                             TT_SHARD_HEADER_BYTES_CHAT);
        h.doc_count = get_u64(p + 32), h.cut_count = get_u64(p + 40);
        for (int i = 48; i < TT_SHARD_HEADER_BYTES_CHAT; i++)
            if (p[i]) return tt_errorf("%s: header byte %d is %u, not 0", name, i, p[i]);
    }
    if (h.token_width != 2 && h.token_width != 4)
        return tt_errorf("%s: bad token width %u (must be 2 or 4)", name, h.token_width);
    if (h.vocab_size == 0) return tt_errorf("%s: vocab size is 0", name);
    if (h.bos_id >= h.vocab_size)
        return tt_errorf("%s: bos id %u is not below vocab size %u", name, h.bos_id, h.vocab_size);
    shard_layout L;
    if (!layout_of(&h, &L))
        return tt_errorf("%s: header says %llu tokens of %u bytes, %llu documents and %llu cuts, which overflows", name,
                         (unsigned long long)h.token_count, h.token_width, (unsigned long long)h.doc_count,
                         (unsigned long long)h.cut_count);
    size_t want = L.end;
    if (size < want)
        return tt_errorf("%s: truncated: header says %llu tokens (%zu bytes) but file has %zu bytes", name,
                         (unsigned long long)h.token_count, want, size);
    if (size > want)
        return tt_errorf("%s: %zu trailing bytes: header says %llu tokens (%zu bytes) but file has %zu bytes", name,
                         size - want, (unsigned long long)h.token_count, want, size);
    const uint8_t *t = p + header_bytes(h.version);
    for (uint64_t i = 0; i < h.token_count; i++) {
        const uint8_t *q = t + i * h.token_width;
        uint32_t v = h.token_width == 2 ? (uint32_t)q[0] | (uint32_t)q[1] << 8 : get_u32(q);
        if (v >= h.vocab_size)
            return tt_errorf("%s: token %llu is %u, not below vocab size %u", name, (unsigned long long)i, v,
                             h.vocab_size);
    }
    if (h.version == TT_SHARD_VERSION_CHAT && validate_sections(p, &h, &L, name)) return -1;
    if (out) *out = h;
    return TT_OK;
}

tt_shard *tt_shard_open(const char *path)
{
    void *map;
    size_t size;
    if (tt_map_file(path, &map, &size)) return NULL;
    tt_shard_header h;
    static const uint8_t empty[1];
    if (tt_shard_validate(map ? map : empty, size, path, &h) != TT_OK) {
        tt_unmap_file(map, size);
        return NULL;
    }
    tt_shard *s = tt_alloc(sizeof *s);
    if (!s || !(s->path = tt_strdup(path))) {
        tt_free(s);
        tt_unmap_file(map, size);
        return NULL;
    }
    s->hdr = h;
    s->map = map;
    s->map_bytes = size;
    s->tokens = (const uint8_t *)map + header_bytes(h.version);
    shard_layout L;
    if (h.version == TT_SHARD_VERSION_CHAT && layout_of(&h, &L)) {
        s->mask = (const uint8_t *)map + L.mask;
        s->doc_off = (const uint8_t *)map + L.doc_off;
        s->doc_prefix = (const uint8_t *)map + L.doc_prefix;
        s->cuts = (const uint8_t *)map + L.cuts;
    }
    return s;
}

void tt_shard_close(tt_shard *s)
{
    if (!s) return;
    tt_unmap_file(s->map, s->map_bytes);
    free(s->path);
    tt_free(s);
}

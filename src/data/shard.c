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

static void encode_header(const tt_shard_header *h, uint8_t out[TT_SHARD_HEADER_BYTES])
{
    memcpy(out, TT_SHARD_MAGIC, 8); /* includes the NUL */
    put_u32(out + 8, h->version);
    put_u32(out + 12, h->token_width);
    put_u32(out + 16, h->bos_id);
    put_u32(out + 20, h->vocab_size);
    put_u64(out + 24, h->token_count);
}

tt_shard_writer *tt_shard_writer_open(const char *path, uint32_t token_width, uint32_t bos_id, uint32_t vocab_size)
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
    w->hdr = (tt_shard_header){TT_SHARD_VERSION, token_width, bos_id, vocab_size, 0};
    uint8_t h[TT_SHARD_HEADER_BYTES];
    encode_header(&w->hdr, h); /* count is patched at close */
    if (fwrite(h, 1, sizeof h, w->f) != sizeof h) {
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

static tt_err flush_buf(tt_shard_writer *w)
{
    if (w->used && fwrite(w->buf, 1, w->used, w->f) != w->used) {
        w->failed = 1;
        return tt_errorf("%s: write failed: %s", w->tmp, strerror(errno));
    }
    w->used = 0;
    return TT_OK;
}

tt_err tt_shard_writer_append(tt_shard_writer *w, const int32_t *tokens, size_t n)
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

uint64_t tt_shard_writer_count(const tt_shard_writer *w) { return w->hdr.token_count; }

static void writer_free(tt_shard_writer *w)
{
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

tt_err tt_shard_writer_close(tt_shard_writer *w)
{
    if (w->failed || flush_buf(w) != TT_OK) goto fail;
    uint8_t h[TT_SHARD_HEADER_BYTES];
    encode_header(&w->hdr, h);
    if (fseek(w->f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, w->f) != sizeof h || fflush(w->f) != 0 ||
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

tt_err tt_shard_validate(const void *data, size_t size, const char *name, tt_shard_header *out)
{
    const uint8_t *p = data;
    if (size < TT_SHARD_HEADER_BYTES)
        return tt_errorf("%s: not a token shard: %zu bytes is shorter than the %d-byte header", name, size,
                         TT_SHARD_HEADER_BYTES);
    if (memcmp(p, TT_SHARD_MAGIC, 8) != 0) return tt_errorf("%s: not a token shard: bad magic (want \"TTSHARD\\0\")", name);
    tt_shard_header h = {get_u32(p + 8), get_u32(p + 12), get_u32(p + 16), get_u32(p + 20), get_u64(p + 24)};
    if (h.version != TT_SHARD_VERSION)
        return tt_errorf("%s: unsupported shard version %u (this build reads version %d)", name, h.version,
                         TT_SHARD_VERSION);
    if (h.token_width != 2 && h.token_width != 4)
        return tt_errorf("%s: bad token width %u (must be 2 or 4)", name, h.token_width);
    if (h.vocab_size == 0) return tt_errorf("%s: vocab size is 0", name);
    if (h.bos_id >= h.vocab_size)
        return tt_errorf("%s: bos id %u is not below vocab size %u", name, h.bos_id, h.vocab_size);
    size_t body;
    if (h.token_count > SIZE_MAX || tt_mul_size((size_t)h.token_count, h.token_width, &body) != 0 ||
        body > SIZE_MAX - TT_SHARD_HEADER_BYTES)
        return tt_errorf("%s: header says %llu tokens of %u bytes, which overflows", name,
                         (unsigned long long)h.token_count, h.token_width);
    size_t want = body + TT_SHARD_HEADER_BYTES;
    if (size < want)
        return tt_errorf("%s: truncated: header says %llu tokens (%zu bytes) but file has %zu bytes", name,
                         (unsigned long long)h.token_count, want, size);
    if (size > want)
        return tt_errorf("%s: %zu trailing bytes: header says %llu tokens (%zu bytes) but file has %zu bytes", name,
                         size - want, (unsigned long long)h.token_count, want, size);
    const uint8_t *t = p + TT_SHARD_HEADER_BYTES;
    for (uint64_t i = 0; i < h.token_count; i++) {
        const uint8_t *q = t + i * h.token_width;
        uint32_t v = h.token_width == 2 ? (uint32_t)q[0] | (uint32_t)q[1] << 8 : get_u32(q);
        if (v >= h.vocab_size)
            return tt_errorf("%s: token %llu is %u, not below vocab size %u", name, (unsigned long long)i, v,
                             h.vocab_size);
    }
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
    s->tokens = (const uint8_t *)map + TT_SHARD_HEADER_BYTES;
    return s;
}

void tt_shard_close(tt_shard *s)
{
    if (!s) return;
    tt_unmap_file(s->map, s->map_bytes);
    free(s->path);
    tt_free(s);
}

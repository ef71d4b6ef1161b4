/* shard.h — token shard files: a 32-byte little-endian header (magic
 * "TTSHARD\0", version, token width, BOS id, vocab size, token count) followed
 * by the tokens. Written in one stream, read by mmap with every field checked. */
#ifndef TT_SHARD_H
#define TT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

#define TT_SHARD_MAGIC "TTSHARD" /* plus its terminating NUL: 8 bytes */
#define TT_SHARD_VERSION 1
#define TT_SHARD_HEADER_BYTES 32

typedef struct {
    uint32_t version;
    uint32_t token_width; /* bytes per token: 2 or 4 */
    uint32_t bos_id;      /* every document starts with it */
    uint32_t vocab_size;  /* every token is < vocab_size */
    uint64_t token_count;
} tt_shard_header;

/* ---- writer: tokens stream to "<path>.tmp.<pid>", which close() fsyncs and
 * renames to path, so a crash never leaves a whole-looking partial shard. */
typedef struct tt_shard_writer tt_shard_writer;
tt_shard_writer *tt_shard_writer_open(const char *path, uint32_t token_width, uint32_t bos_id, uint32_t vocab_size);
tt_err tt_shard_writer_append(tt_shard_writer *w, const int32_t *tokens, size_t n);
uint64_t tt_shard_writer_count(const tt_shard_writer *w);
/* Finish (header, fsync, rename) and free the writer, even on error. */
tt_err tt_shard_writer_close(tt_shard_writer *w);
/* Drop the temporary file and free the writer (for error paths). */
void tt_shard_writer_abort(tt_shard_writer *w);

/* ---- reader ------------------------------------------------------------- */
typedef struct {
    char *path;
    tt_shard_header hdr;
    const uint8_t *tokens; /* (token_count,) of token_width bytes, little-endian */
    void *map;
    size_t map_bytes;
} tt_shard;

/* Check a whole shard image in memory: header fields, exact size, and every
 * token < vocab_size. name goes into error messages. tt_shard_open uses it. */
tt_err tt_shard_validate(const void *data, size_t size, const char *name, tt_shard_header *out);
/* mmap and validate; NULL + error naming the file on any problem. */
tt_shard *tt_shard_open(const char *path);
void tt_shard_close(tt_shard *s);
/* Token i (caller keeps i < hdr.token_count). */
static inline uint32_t tt_shard_token(const tt_shard *s, uint64_t i)
{
    const uint8_t *p = s->tokens + i * s->hdr.token_width;
    if (s->hdr.token_width == 2) return (uint32_t)p[0] | (uint32_t)p[1] << 8;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif

/* shard.h — token shard files, little-endian, written in one stream and read by mmap with every
 * field checked.
 *
 * Version 1 (plain text): a 32-byte header (magic "TTSHARD\0", version, token width, BOS id, vocab
 * size, token count) and the tokens; documents start at each BOS id.
 *
 * Version 2 (conversations, `titan prepare --chat`): a 64-byte header (the same fields, then the
 * document count and the cut count, then 16 zero bytes) and five sections, each starting at a
 * multiple of 8 bytes (zero padding between):
 *   tokens       (token_count,) of token_width bytes
 *   mask         (token_count,) bytes, 1 when the token is a training target (never a document's first)
 *   doc_off      (doc_count + 1,) u64: document d is tokens [doc_off[d], doc_off[d+1]); 0 first, token_count last
 *   doc_prefix   (doc_count,) u32: tokens at a document's start that every later piece of it repeats
 *   cuts         (cut_count,) u64, increasing: token offsets inside documents (after their prefix) where a
 *                piece may start, the start of a user turn
 * Document boundaries are explicit, so they no longer depend on a BOS id. */
#ifndef TT_SHARD_H
#define TT_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

#define TT_SHARD_MAGIC "TTSHARD" /* plus its terminating NUL: 8 bytes */
#define TT_SHARD_VERSION 1      /* plain text */
#define TT_SHARD_VERSION_CHAT 2 /* with a loss mask and explicit documents */
#define TT_SHARD_HEADER_BYTES 32
#define TT_SHARD_HEADER_BYTES_CHAT 64

typedef struct {
    uint32_t version;
    uint32_t token_width; /* bytes per token: 2 or 4 */
    uint32_t bos_id;      /* every document starts with it */
    uint32_t vocab_size;  /* every token is < vocab_size */
    uint64_t token_count;
    uint64_t doc_count, cut_count; /* version 2 */
} tt_shard_header;

/* ---- writer: tokens stream to "<path>.tmp.<pid>", which close() fsyncs and
 * renames to path, so a crash never leaves a whole-looking partial shard. */
typedef struct tt_shard_writer tt_shard_writer;
tt_shard_writer *tt_shard_writer_open(const char *path, uint32_t token_width, uint32_t bos_id, uint32_t vocab_size);
tt_err tt_shard_writer_append(tt_shard_writer *w, const int32_t *tokens, size_t n);
uint64_t tt_shard_writer_count(const tt_shard_writer *w);
/* Finish (header, fsync, rename) and free the writer, even on error. */
tt_err tt_shard_writer_close(tt_shard_writer *w);
/* A version 2 writer: documents come whole through tt_shard_writer_append_doc, and bos_id is what
 * pads a window. The mask, documents and cuts are held in memory (a byte a token) until close. */
tt_shard_writer *tt_shard_writer_open_chat(const char *path, uint32_t token_width, uint32_t pad_id, uint32_t vocab_size);
/* One document of n tokens: its target flags (mask[0] must be 0), the tokens at its start that later
 * pieces repeat, and its cuts (offsets into the document, increasing, in (prefix, n)). */
tt_err tt_shard_writer_append_doc(tt_shard_writer *w, const int32_t *tokens, const uint8_t *mask, size_t n,
                                  uint32_t prefix, const uint64_t *cuts, int n_cuts);
/* Drop the temporary file and free the writer (for error paths). */
void tt_shard_writer_abort(tt_shard_writer *w);

/* ---- reader ------------------------------------------------------------- */
typedef struct {
    char *path;
    tt_shard_header hdr;
    const uint8_t *tokens; /* (token_count,) of token_width bytes, little-endian */
    const uint8_t *mask;   /* version 2: (token_count,) 0/1; NULL in version 1 */
    const uint8_t *doc_off, *doc_prefix, *cuts; /* version 2: the sections, read with the accessors below */
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

static inline uint64_t tt_shard_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
/* version 2: document d's first token (d <= doc_count), its repeated prefix, cut k */
static inline uint64_t tt_shard_doc_start(const tt_shard *s, uint64_t d) { return tt_shard_le64(s->doc_off + 8 * d); }
static inline uint32_t tt_shard_doc_prefix(const tt_shard *s, uint64_t d)
{
    const uint8_t *p = s->doc_prefix + 4 * d;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tt_shard_cut(const tt_shard *s, uint64_t k) { return tt_shard_le64(s->cuts + 8 * k); }

#endif

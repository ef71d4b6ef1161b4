/* safetensors.h — read (zero-copy, mmap: safetensors.c) and write
 * (safetensors_write.c) Hugging Face safetensors files, single or sharded with
 * model.safetensors.index.json. */
#ifndef TT_SAFETENSORS_H
#define TT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#define TT_ST_MAX_DIMS 8
/* The reference (Rust) implementation's limit on the JSON header. */
#define TT_ST_MAX_HEADER (100u * 1000u * 1000u)

/* One tensor. On read, name and data point into the opened object (data into
 * the file mapping: no copy; it is only as aligned as its offset in the file,
 * which is a multiple of 8 from the data start for files tt_st_write wrote with
 * 8-byte-multiple tensors before it). On write, the caller owns everything,
 * and a tensor whose bytes are not in host memory (a backend buffer) has
 * data NULL and a fetch that copies them into the writer's staging buffer. */
typedef struct {
    const char *name;
    char dtype[8];                  /* safetensors spelling: "F32", "BF16", "I64", ... */
    int ndim;                       /* 0 (scalar) .. TT_ST_MAX_DIMS */
    int64_t shape[TT_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;                  /* numel x dtype size, checked */
    tt_err (*fetch)(void *ctx, void *dst, size_t nbytes); /* write only, when data is NULL */
    void *fetch_ctx;
} tt_st_tensor;

typedef struct tt_safetensors tt_safetensors; /* opaque */

/* ---- reading ------------------------------------------------------------ */
/* Open one .safetensors file (mmap). NULL + error naming the file/tensor. */
tt_safetensors *tt_st_open(const char *path);
/* Open a model: a directory (its model.safetensors.index.json if present,
 * else its model.safetensors), an *.index.json file (all shards it names), or
 * a single .safetensors file. Tensors of all shards appear as one set. */
tt_safetensors *tt_st_open_dir(const char *path);
/* Parse a whole file image already in memory (len bytes). Tensors point into
 * buf, which must outlive *out. name_for_errors prefixes error messages. */
tt_err tt_st_parse(const void *buf, size_t len, const char *name_for_errors, tt_safetensors **out);

/* Tensors in file order (sorted by data offset; shard by shard). */
int tt_st_count(const tt_safetensors *st);
const tt_st_tensor *tt_st_get(const tt_safetensors *st, int i);
const tt_st_tensor *tt_st_find(const tt_safetensors *st, const char *name); /* NULL if absent */
/* A "__metadata__" value (for sharded sets: the first shard that has the key). */
const char *tt_st_metadata(const tt_safetensors *st, const char *key);
int tt_st_metadata_count(const tt_safetensors *st);
void tt_st_close(tt_safetensors *st);

/* ---- writing ------------------------------------------------------------ */
/* Write n tensors in the order given (data offsets contiguous from 0). The
 * header JSON is padded with spaces to a multiple of 8 bytes, and its
 * "__metadata__" holds {"format": "pt"} (unless meta_keys sets "format") plus
 * the given string pairs. Written to path.tmp, fsynced, renamed over path,
 * and the directory fsynced: a crash leaves the old file or the new one. */
tt_err tt_st_write(const char *path, int n, const tt_st_tensor *tensors, const char *const *meta_keys,
                   const char *const *meta_vals, int n_meta);
/* Write <dir>/<basename>.safetensors when all tensors fit in max_shard_bytes
 * (0 = no limit), else <basename>-0000i-of-0000n.safetensors shards (greedy, in
 * order; a tensor larger than the limit gets a shard of its own) plus
 * <basename>.safetensors.index.json, written last. Creates dir if needed and
 * removes a stale single file / index of the other form so readers never mix. */
tt_err tt_st_write_sharded(const char *dir, const char *basename, int n, const tt_st_tensor *tensors,
                           size_t max_shard_bytes);

/* ---- dtypes ------------------------------------------------------------- */
/* Bits per element of a safetensors dtype string ("F32" -> 32), 0 if unknown.
 * All dtypes of the reference implementation are known, sub-byte ones too. */
size_t tt_st_dtype_bits(const char *dtype);
/* Map to/from the library's dtypes: "F32" <-> TT_F32 etc. */
int tt_st_dtype_to_tt(const char *dtype, tt_dtype *out); /* -1 + error if no match */
const char *tt_st_dtype_from_tt(tt_dtype t);            /* "?" if none */
/* Does tensor t's byte range [begin, end) match its shape x dtype (of bits per
 * element)? An overflow is an error too; the message names file and tensor. */
tt_err tt_st_check_size(const char *file, const tt_st_tensor *t, uint64_t begin, uint64_t end, size_t bits);

/* ---- helpers shared with the checkpoint and JSON readers ---------------- */
/* Offset of the first byte that is not valid UTF-8 (overlongs, surrogates and
 * code points above U+10FFFF are invalid), or len when all of it is valid. */
size_t tt_utf8_invalid_at(const void *s, size_t len);
/* Write a whole buffer to path atomically: path.tmp, fsync, rename, fsync dir. */
tt_err tt_write_file_atomic(const char *path, const void *data, size_t len);
/* fsync a directory (so a rename inside it is durable). */
tt_err tt_fsync_dir(const char *dir);
/* mkdir -p */
tt_err tt_mkdir_p(const char *path);
/* Read a whole regular file of at most limit bytes into a NUL-terminated
 * malloc'd buffer (free() it); NULL + error naming the file. */
char *tt_read_file(const char *path, size_t limit, size_t *len);

#endif

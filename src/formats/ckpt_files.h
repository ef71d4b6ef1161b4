/* ckpt_files.h — the native checkpoint directory layout: <folder>/step-<N>/
 * holding state.safetensors (or a file per shard, or per part of either written by a rank: see tt_ckpt_find) and
 * meta.json, saved atomically, listed, pruned,
 * and checked for truncation and corruption: sizes on open, then the XXH64 of each chunk a reader
 * takes bytes from (a checkpoint written before chunk checksums: each file's XXH64 on open). */
#ifndef TT_CKPT_FILES_H
#define TT_CKPT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "formats/safetensors.h"

/* Largest meta.json we read back. */
#define TT_CKPT_MAX_META (64u << 20)

/* A file's checksums: its size and XXH64, and the XXH64 of each chunk of `chunk` bytes (a power of two, at least
 * TT_CKPT_MIN_CHUNK, the least that makes at most TT_CKPT_MAX_CHUNKS), so that a process reading part of a file
 * (a rank's slices of a resharded checkpoint) checks the bytes it reads, and no others. */
#define TT_CKPT_MIN_CHUNK ((uint64_t)4 << 10) /* a page: a rank reads little more than its slices */
#define TT_CKPT_MAX_CHUNKS 4096
typedef struct {
    uint64_t size, xxh64, chunk;
    uint64_t chunks[TT_CKPT_MAX_CHUNKS]; /* the first ceil(size / chunk) */
} tt_ckpt_sums;
uint64_t tt_ckpt_chunk_size(uint64_t file_size);

/* Save tensors (weights, optimizer moments, ...) and the caller's meta_json,
 * a JSON object, as <folder>/step-<step>/. Its text is kept byte for byte (so
 * 64-bit integers survive) with one key added, "files", which records each
 * file's size, XXH64 and chunk checksums; "files" is therefore reserved. Everything is
 * written into <folder>/.step-<step>.tmp/, fsynced, then renamed into place;
 * an existing step-<step> is swapped out atomically and removed. Creates
 * folder. One writer per folder at a time (rank 0). */
tt_err tt_ckpt_save(const char *folder, long step, int n, const tt_st_tensor *tensors, const char *meta_json);

/* A checkpoint several processes write together, each its own file, into the
 * same temporary folder (a file system they share): one begins it (an empty
 * <folder>/.step-<step>.tmp/), every writer adds its file (written and
 * fsynced, its checksums returned), and once all have (the caller's
 * barrier) one commits it: meta.json with every file's checksums,
 * then the rename that makes step-<step> appear whole. tt_ckpt_save is the
 * one-file case (state.safetensors). abort removes what a failed save left. */
tt_err tt_ckpt_begin(const char *folder, long step);
tt_err tt_ckpt_write_part(const char *folder, long step, const char *file, int n, const tt_st_tensor *tensors,
                          tt_ckpt_sums *sums);
tt_err tt_ckpt_commit(const char *folder, long step, const char *meta_json, int n_files, const char *const *files,
                      const tt_ckpt_sums *sums);
void tt_ckpt_abort(const char *folder, long step);

/* Complete checkpoints in folder (step-<N> directories; leftovers of
 * interrupted saves are ignored). Fills steps with the newest min(count, max)
 * of them, ascending, and returns how many it filled; with steps == NULL it
 * returns the count. 0 if folder does not exist; -1 + error if it cannot be
 * read. */
int tt_ckpt_list(const char *folder, long *steps, int max);
/* The newest complete step: 1 and *step set, 0 if there is none, -1 on error. */
int tt_ckpt_latest(const char *folder, long *step);
/* Remove all but the newest keep_latest_k checkpoints (k <= 0 keeps all) and
 * every leftover of an interrupted save or removal. */
tt_err tt_ckpt_prune(const char *folder, int keep_latest_k);

typedef struct tt_ckpt tt_ckpt; /* opaque */
/* Open <folder>/step-<step>: validate meta.json, check each recorded file's
 * size, map every file and check its safetensors header's chunks (a file
 * without chunk checksums: its whole XXH64). NULL + error naming the file
 * (e.g. "... state.safetensors: size 1234 but meta.json records 5678
 * (truncated checkpoint)"). */
tt_ckpt *tt_ckpt_open(const char *folder, long step);
/* Before a reader uses the bytes [p, p + n) of file st (a tensor's data, or part of it): every chunk they touch
 * checked against meta.json, once. Error naming the file, the chunk and its bytes (corrupt checkpoint). */
tt_err tt_ckpt_check(tt_ckpt *ck, const tt_safetensors *st, const void *p, size_t n);
/* The bytes this reader has read: of the files' data (the chunks checked; a file without chunk checksums, whole)
 * and of the metadata (meta.json and the chunks of the safetensors headers) */
void tt_ckpt_bytes_read(const tt_ckpt *ck, uint64_t *data, uint64_t *metadata);
const char *tt_ckpt_meta_json(const tt_ckpt *ck); /* the whole meta.json, "files" included */
const tt_safetensors *tt_ckpt_tensors(const tt_ckpt *ck); /* state.safetensors, or NULL (a sharded checkpoint) */
const tt_safetensors *tt_ckpt_file(const tt_ckpt *ck, const char *file); /* NULL when it has no such file */
/* A state saved in parts: the files of group G are G.safetensors, or G.part-<k>-of-<P>.safetensors when the ranks
 * that hold the same bytes each wrote a part of them. The tensor `name` in group's files: *t and the file *st (both
 * NULL when none holds it). Returns how many files the group has (0: none), or -1 + error when two hold name. */
int tt_ckpt_find(const tt_ckpt *ck, const char *group, const char *name, const tt_st_tensor **t,
                 const tt_safetensors **st);
void tt_ckpt_close(tt_ckpt *ck);

/* Structural check of a meta.json text (len bytes, need not be NUL-terminated):
 * UTF-8, a JSON object, and a "files" object naming .safetensors files whose
 * entries are {"size": integer, "xxh64": 16 hex digits} with plain file names.
 * Errors name name_for_errors and the line. */
tt_err tt_ckpt_meta_validate(const char *json_text, size_t len, const char *name_for_errors);

/* XXH64 (seed 0), the checksum recorded in meta.json; any xxhsum -H64 agrees. */
uint64_t tt_xxh64(const void *data, size_t len, uint64_t seed);

#endif

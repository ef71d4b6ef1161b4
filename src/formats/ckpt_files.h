/* ckpt_files.h — the native checkpoint directory layout: <folder>/step-<N>/
 * holding state.safetensors (or a file per shard) and meta.json, saved atomically, listed, pruned,
 * and on open checked for truncation and corruption (size + XXH64 per file). */
#ifndef TT_CKPT_FILES_H
#define TT_CKPT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "formats/safetensors.h"

/* Largest meta.json we read back. */
#define TT_CKPT_MAX_META (64u << 20)

/* Save tensors (weights, optimizer moments, ...) and the caller's meta_json,
 * a JSON object, as <folder>/step-<step>/. Its text is kept byte for byte (so
 * 64-bit integers survive) with one key added, "files", which records each
 * file's size and XXH64 checksum; "files" is therefore reserved. Everything is
 * written into <folder>/.step-<step>.tmp/, fsynced, then renamed into place;
 * an existing step-<step> is swapped out atomically and removed. Creates
 * folder. One writer per folder at a time (rank 0). */
tt_err tt_ckpt_save(const char *folder, long step, int n, const tt_st_tensor *tensors, const char *meta_json);

/* A checkpoint several processes write together, each its own file, into the
 * same temporary folder (a file system they share): one begins it (an empty
 * <folder>/.step-<step>.tmp/), every writer adds its file (written and
 * fsynced, its size and XXH64 returned), and once all have (the caller's
 * barrier) one commits it: meta.json with every file's size and checksum,
 * then the rename that makes step-<step> appear whole. tt_ckpt_save is the
 * one-file case (state.safetensors). abort removes what a failed save left. */
tt_err tt_ckpt_begin(const char *folder, long step);
tt_err tt_ckpt_write_part(const char *folder, long step, const char *file, int n, const tt_st_tensor *tensors,
                          uint64_t *size, uint64_t *xxh64);
tt_err tt_ckpt_commit(const char *folder, long step, const char *meta_json, int n_files, const char *const *files,
                      const uint64_t *sizes, const uint64_t *xxh64s);
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
 * size and checksum, then map every file. NULL + error naming the file
 * (e.g. "... state.safetensors: size 1234 but meta.json records 5678
 * (truncated checkpoint)"). */
tt_ckpt *tt_ckpt_open(const char *folder, long step);
const char *tt_ckpt_meta_json(const tt_ckpt *ck); /* the whole meta.json, "files" included */
const tt_safetensors *tt_ckpt_tensors(const tt_ckpt *ck); /* state.safetensors, or NULL (a sharded checkpoint) */
const tt_safetensors *tt_ckpt_file(const tt_ckpt *ck, const char *file); /* NULL when it has no such file */
void tt_ckpt_close(tt_ckpt *ck);

/* Structural check of a meta.json text (len bytes, need not be NUL-terminated):
 * UTF-8, a JSON object, and a "files" object naming .safetensors files whose
 * entries are {"size": integer, "xxh64": 16 hex digits} with plain file names.
 * Errors name name_for_errors and the line. */
tt_err tt_ckpt_meta_validate(const char *json_text, size_t len, const char *name_for_errors);

/* XXH64 (seed 0), the checksum recorded in meta.json; any xxhsum -H64 agrees. */
uint64_t tt_xxh64(const void *data, size_t len, uint64_t seed);

#endif

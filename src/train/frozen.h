/* frozen.h — the frozen base of a LoRA run: the base model's weights in one
 * backend buffer, laid out in their storage dtypes (tt_frozen_layout), never
 * trained, and reached by the host through copies as a parameter store.
 *
 * Under FSDP the base is sharded as the trained state is, but in its own
 * dtypes: its layout's bytes, read as 4-byte words, are a flat layout of
 * units (the base's, each a multiple of 64 bytes), grouped into buckets and
 * sliced over the shard group (tt_sharding_init_ranges). A rank holds its
 * slice of every bucket, a bf16 base half the bytes of fp32 weights; the
 * step graph gathers a bucket's words as they are (no cast: a word may hold
 * two bf16 weights) and reduces nothing. */
#ifndef TT_FROZEN_H
#define TT_FROZEN_H
#include "backend/backend.h"
#include "models/lora.h"
#include "train/sharding.h"

typedef struct {
    const tt_backend *be;
    tt_queue *q;
    const tt_model *base;
    tt_frozen_layout layout;
    tt_sharding sh; /* the layout's words over the shard group (sh.shards 1: every rank holds the whole base) */
    tt_buf *buf;    /* the layout's bytes, or this rank's slices of every bucket end to end (sh.numel words) */
} tt_frozen_base;

/* The layout of base's weights (its linear weights in linear_dtype) and how the ranks of `mesh` slice it (its
 * shards, replicas and this rank's shard; NULL: one process), units merged into buckets up to bucket_bytes:
 * what `titan plan` reads. No memory. */
tt_err tt_frozen_plan(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_sharding *mesh,
                      size_t bucket_bytes);
/* The same with its buffer (zeroed): the whole base, or this rank's slices of it. */
tt_err tt_frozen_init_sharded(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_sharding *mesh,
                              size_t bucket_bytes, const tt_backend *be, tt_queue *q);
/* The whole base in one process. */
tt_err tt_frozen_init(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_backend *be, tt_queue *q);
void tt_frozen_free(tt_frozen_base *f);
/* Whether a rank holds only slices of the base (a shard group of more than one). */
int tt_frozen_is_sharded(const tt_frozen_base *f);
/* The bytes this rank's buffer holds. */
size_t tt_frozen_rank_bytes(const tt_frozen_base *f);
/* Where base unit k's weights start (a whole base), or bucket b's slice (a sharded one). */
tt_mem tt_frozen_unit_mem(const tt_frozen_base *f, int unit);
tt_mem tt_frozen_bucket_mem(const tt_frozen_base *f, int b);
/* The weights one parameter at a time in fp32: a write rounds a bf16-stored one to nearest even, a read widens it.
 * On a sharded base a write keeps this rank's slices of the parameter, and a read is collective over the shard
 * group (every rank of it reads the same parameter). Points at f: keep it where it is. */
tt_param_store tt_frozen_store(tt_frozen_base *f);
/* A hash of every stored byte (FNV-1a over the layout's 8-byte words, in order): what a LoRA checkpoint records of
 * its base, so that a resume on another base is refused. The same for any number of ranks; collective over the
 * shard group when the base is sharded. */
tt_err tt_frozen_hash(tt_frozen_base *f, uint64_t *hash);
#endif

/* sharding.h — how the model's flat layout is split over the ranks of a
 * shard group (FSDP): whole units grouped into buckets (each bucket one
 * gather and one reduction per micro-step), each bucket padded so it splits
 * evenly, and every rank holding the same slice of every bucket. A rank's
 * train state is its slices laid end to end: its shard buffer. With one shard
 * the layout is the model's own (buckets unpadded, shard offset = flat
 * offset), which data parallelism and single-process runs share. */
#ifndef TT_SHARDING_H
#define TT_SHARDING_H
#include "graph/passes/fsdp.h"
#include "models/model.h"

typedef struct {
    int shards, replicas;  /* the shard group's size and the replicate group's (world = shards x replicas) */
    int shard_rank;        /* this rank's index in its shard group */
    int n_buckets;
    tt_fsdp_bucket *buckets;
    int64_t *shard_offset; /* per bucket: where its slice starts in a rank's shard buffer */
    int64_t numel;         /* a rank's shard buffer: the sum of padded / shards */
    int64_t *unit_offset;  /* per unit: its first element in the flat layout */
} tt_sharding;

/* bucket_bytes: units are merged into a bucket while it stays within this
 * many fp32 bytes (0: one unit a bucket). */
tt_err tt_sharding_init(tt_sharding *s, const tt_model *m, int shards, int replicas, int shard_rank,
                        size_t bucket_bytes);
void tt_sharding_free(tt_sharding *s);
/* The elements of b's slice on shard rank r: the flat range [*lo, *hi) (the
 * padding past the bucket's end excluded). */
void tt_sharding_slice(const tt_sharding *s, int b, int r, int64_t *lo, int64_t *hi);
/* Call fn for each piece of the flat range [lo, hi) that shard rank r holds:
 * flat is the piece's first element in the flat layout, at offset `at` of
 * rank r's shard buffer, n elements long. Stops at fn's first error. */
typedef tt_err (*tt_shard_piece_fn)(void *ctx, int64_t flat, int64_t at, int64_t n);
tt_err tt_sharding_pieces(const tt_sharding *s, int r, int64_t lo, int64_t hi, tt_shard_piece_fn fn, void *ctx);
/* The pass's view of it. */
tt_fsdp_cfg tt_sharding_fsdp_cfg(const tt_sharding *s);

#endif

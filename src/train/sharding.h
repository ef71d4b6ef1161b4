/* sharding.h — how the model's flat layout is split over the ranks of a
 * shard group (FSDP): whole units grouped into buckets (each bucket one
 * gather and one reduction per micro-step), each bucket padded so it splits
 * evenly, and every rank holding the same slice of every bucket. A rank's
 * train state is its slices laid end to end: its shard buffer. With one shard
 * the layout is the model's own (buckets unpadded, shard offset = flat
 * offset), which data parallelism and single-process runs share.
 *
 * Expert parallelism (ep > 1) splits each MoE block into two buckets: the
 * block without its routed experts, sliced over the shard group as any
 * unit, and the experts of this rank's place in its expert group (ep
 * consecutive ranks of the shard group; place e holds experts [e E/ep, (e+1)
 * E/ep)), sliced over the shard / ep ranks that share that place. A shard
 * rank s is place s % ep of expert group s / ep, and holds slice s / ep of
 * its experts' bucket. */
#ifndef TT_SHARDING_H
#define TT_SHARDING_H
#include "graph/passes/fsdp.h"
#include "models/model.h"

typedef struct {
    int shards, replicas;  /* the shard group's size and the replicate group's (world = shards x replicas) */
    int shard_rank;        /* this rank's index in its shard group */
    int ep;                /* the expert parallel degree (1: none) */
    int place;             /* this rank's place in its expert group: shard_rank % ep */
    int n_buckets;
    tt_fsdp_bucket *buckets; /* an expert bucket's pieces are this rank's experts' */
    int64_t *shard_offset; /* per bucket: where its slice starts in a rank's shard buffer */
    int64_t numel;         /* a rank's shard buffer: the sum of padded / its group's size */
    int64_t *unit_offset;  /* per unit: its first element in the flat layout */
} tt_sharding;

/* bucket_bytes: units are merged into a bucket while it stays within this
 * many fp32 bytes (0: one unit a bucket; an MoE block split by expert
 * parallelism is never merged). */
tt_err tt_sharding_init(tt_sharding *s, const tt_model *m, int shards, int replicas, int shard_rank, int ep,
                        size_t bucket_bytes);
/* The same over a layout of n_units plain ranges (unit u: numel[u] elements from offset[u], end to end in
 * order), with no experts to split: LoRA's frozen base, its bytes as 4-byte words (train/frozen.h). */
tt_err tt_sharding_init_ranges(tt_sharding *s, int n_units, const int64_t *offset, const int64_t *numel, int shards,
                               int replicas, int shard_rank, size_t bucket_bytes);
void tt_sharding_free(tt_sharding *s);
/* How many ranks slice bucket b (the shard group's size, or the expert
 * shard group's), and shard rank r's slice index among them. */
int tt_sharding_group_size(const tt_sharding *s, int b);
int tt_sharding_slice_index(const tt_sharding *s, int b, int r);
/* Call fn for each piece of the flat layout in bucket b's slice on shard
 * rank r (the padding left out): flat is the piece's first element in the
 * flat layout, `at` its offset in the slice, n its length. Stops at fn's
 * first error. */
typedef tt_err (*tt_shard_piece_fn)(void *ctx, int64_t flat, int64_t at, int64_t n);
tt_err tt_sharding_slice_pieces(const tt_sharding *s, int b, int r, tt_shard_piece_fn fn, void *ctx);
/* Call fn for each piece of the flat range [lo, hi) that shard rank r holds:
 * flat is the piece's first element in the flat layout, at offset `at` of
 * rank r's shard buffer, n elements long. Stops at fn's first error. */
tt_err tt_sharding_pieces(const tt_sharding *s, int r, int64_t lo, int64_t hi, tt_shard_piece_fn fn, void *ctx);
/* The pass's view of it. */
tt_fsdp_cfg tt_sharding_fsdp_cfg(const tt_sharding *s);

#endif

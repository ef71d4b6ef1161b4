/* sharding.c — the buckets and slices of an FSDP layout (see sharding.h). */
#include <stdlib.h>
#include <string.h>

#include "train/sharding.h"

/* Slices start on 64-byte boundaries: each is a multiple of 16 floats. */
#define SLICE_ALIGN 16

tt_err tt_sharding_init(tt_sharding *s, const tt_model *m, int shards, int replicas, int shard_rank,
                        size_t bucket_bytes)
{
    memset(s, 0, sizeof *s);
    if (shards < 1 || replicas < 1 || shard_rank < 0 || shard_rank >= shards)
        return tt_errorf("sharding: %d shards x %d replicas, shard rank %d", shards, replicas, shard_rank);
    s->shards = shards, s->replicas = replicas, s->shard_rank = shard_rank;
    const int nu = m->n_units;
    s->buckets = calloc((size_t)nu + 1, sizeof *s->buckets);
    s->shard_offset = calloc((size_t)nu + 1, sizeof *s->shard_offset);
    s->unit_offset = calloc((size_t)nu + 1, sizeof *s->unit_offset);
    if (!s->buckets || !s->shard_offset || !s->unit_offset) {
        tt_sharding_free(s);
        return tt_errorf("out of memory laying out %d shards", shards);
    }
    for (int u = 0; u < nu; u++) {
        s->unit_offset[u] = m->units[u].offset;
        tt_fsdp_bucket *b = s->n_buckets ? &s->buckets[s->n_buckets - 1] : NULL;
        const size_t bytes = (size_t)((b ? b->numel : 0) + m->units[u].numel) * sizeof(float);
        if (b && bytes <= bucket_bytes) { /* merged into the open bucket */
            b->n_units++;
            b->numel += m->units[u].numel;
            continue;
        }
        s->buckets[s->n_buckets++] = (tt_fsdp_bucket){u, 1, m->units[u].offset, m->units[u].numel, 0};
    }
    const int64_t mult = shards > 1 ? (int64_t)shards * SLICE_ALIGN : 1;
    for (int b = 0; b < s->n_buckets; b++) {
        tt_fsdp_bucket *bk = &s->buckets[b];
        bk->padded = (bk->numel + mult - 1) / mult * mult;
        if (bk->padded == 0 && shards > 1) bk->padded = mult; /* an empty unit still has a slice */
        s->shard_offset[b] = s->numel;
        s->numel += bk->padded / shards;
    }
    return 0;
}

void tt_sharding_free(tt_sharding *s)
{
    free(s->buckets);
    free(s->shard_offset);
    free(s->unit_offset);
    memset(s, 0, sizeof *s);
}

void tt_sharding_slice(const tt_sharding *s, int b, int r, int64_t *lo, int64_t *hi)
{
    const tt_fsdp_bucket *bk = &s->buckets[b];
    const int64_t n = bk->padded / s->shards, end = bk->offset + bk->numel;
    int64_t a = bk->offset + (int64_t)r * n, z = a + n;
    if (z > end) z = end;
    if (a > z) a = z;
    *lo = a, *hi = z;
}

tt_err tt_sharding_pieces(const tt_sharding *s, int r, int64_t lo, int64_t hi, tt_shard_piece_fn fn, void *ctx)
{
    for (int b = 0; b < s->n_buckets; b++) {
        int64_t a, z;
        tt_sharding_slice(s, b, r, &a, &z);
        if (a < lo) a = lo;
        if (z > hi) z = hi;
        if (a >= z) continue;
        const int64_t start = s->buckets[b].offset + (int64_t)r * (s->buckets[b].padded / s->shards);
        if (fn(ctx, a, s->shard_offset[b] + (a - start), z - a)) return -1;
    }
    return 0;
}

tt_fsdp_cfg tt_sharding_fsdp_cfg(const tt_sharding *s)
{
    return (tt_fsdp_cfg){.shards = s->shards, .replicas = s->replicas, .n_buckets = s->n_buckets,
                         .buckets = s->buckets, .unit_offset = s->unit_offset, .param_dtype = TT_F32,
                         .reduce_dtype = TT_F32, .reshard_after_forward = 1, .reduce = 1};
}

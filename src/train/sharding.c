/* sharding.c — the buckets and slices of an FSDP layout (see sharding.h). */
#include <stdlib.h>
#include <string.h>

#include "train/sharding.h"

/* Slices start on 64-byte boundaries: each is a multiple of 16 floats. */
#define SLICE_ALIGN 16

static tt_fsdp_bucket one_range(int u, int64_t off, int64_t n)
{
    return (tt_fsdp_bucket){.first_unit = u, .n_units = 1, .offset = off, .numel = n, .n_segs = 1, .seg = {{off, n}}};
}

/* Unit u's two buckets under expert parallelism: the block without its
 * routed experts, and the experts of place `place` of the expert group (a
 * rank at place e holds the pieces (e - place) x ep_stride further on). */
static tt_err split_experts(const tt_model *m, int u, int ep, int place, tt_fsdp_bucket *rest, tt_fsdp_bucket *mine)
{
    const tt_unit *un = &m->units[u];
    if (un->n_experts % ep)
        return tt_errorf("parallelism.expert_parallel_degree = %d does not divide the %d experts of %s", ep,
                         un->n_experts, un->name);
    const int El = un->n_experts / ep;
    *rest = one_range(u, un->offset, 0);
    *mine = one_range(u, un->expert_offset[0], 0);
    rest->n_segs = mine->n_segs = 0, mine->expert = 1;
    int64_t at = un->offset; /* the block's elements before the next expert range */
    for (int k = 0; k < un->n_expert_ranges; k++) {
        const int64_t xo = un->expert_offset[k], xn = un->expert_numel[k];
        if (mine->n_segs == TT_FSDP_MAX_SEGS) return tt_errorf("%s: its experts lie in too many ranges", un->name);
        mine->seg[mine->n_segs] = (tt_fsdp_seg){xo + place * El * xn, El * xn};
        mine->ep_stride[mine->n_segs++] = El * xn;
        mine->numel += El * xn;
        if (xo > at) {
            if (rest->n_segs == TT_FSDP_MAX_SEGS) return tt_errorf("%s: its experts split it in too many pieces", un->name);
            rest->seg[rest->n_segs++] = (tt_fsdp_seg){at, xo - at};
            rest->numel += xo - at;
        }
        at = xo + un->n_experts * xn;
    }
    if (un->offset + un->numel > at) {
        if (rest->n_segs == TT_FSDP_MAX_SEGS) return tt_errorf("%s: its experts split it in too many pieces", un->name);
        rest->seg[rest->n_segs++] = (tt_fsdp_seg){at, un->offset + un->numel - at};
        rest->numel += un->offset + un->numel - at;
    }
    rest->offset = rest->n_segs ? rest->seg[0].flat : un->offset;
    mine->offset = mine->seg[0].flat;
    return 0;
}

/* The buckets of nu units (unit u: numel[u] elements from off[u]; under expert parallelism, m's MoE blocks split
 * in two), each padded so that the ranks that slice it hold equal slices. */
static tt_err init(tt_sharding *s, const tt_model *m, int nu, const int64_t *off, const int64_t *numel, int shards,
                   int replicas, int shard_rank, int ep, size_t bucket_bytes)
{
    memset(s, 0, sizeof *s);
    if (shards < 1 || replicas < 1 || shard_rank < 0 || shard_rank >= shards || ep < 1 || shards % ep)
        return tt_errorf("sharding: %d shards x %d replicas, shard rank %d, experts over %d", shards, replicas,
                         shard_rank, ep);
    s->shards = shards, s->replicas = replicas, s->shard_rank = shard_rank, s->ep = ep, s->place = shard_rank % ep;
    s->buckets = calloc(2 * (size_t)nu + 1, sizeof *s->buckets);
    s->shard_offset = calloc(2 * (size_t)nu + 1, sizeof *s->shard_offset);
    s->unit_offset = calloc((size_t)nu + 1, sizeof *s->unit_offset);
    if (!s->buckets || !s->shard_offset || !s->unit_offset) {
        tt_sharding_free(s);
        return tt_errorf("out of memory laying out %d shards", shards);
    }
    int open = 0; /* the last bucket may take the next unit */
    for (int u = 0; u < nu; u++) {
        s->unit_offset[u] = off[u];
        if (ep > 1 && m && m->units[u].n_experts > 0) {
            if (split_experts(m, u, ep, s->place, &s->buckets[s->n_buckets], &s->buckets[s->n_buckets + 1])) {
                tt_sharding_free(s);
                return -1;
            }
            s->n_buckets += 2;
            open = 0;
            continue;
        }
        tt_fsdp_bucket *b = open ? &s->buckets[s->n_buckets - 1] : NULL;
        const size_t bytes = (size_t)((b ? b->numel : 0) + numel[u]) * sizeof(float);
        if (b && bytes <= bucket_bytes) { /* merged into the open bucket */
            b->n_units++;
            b->numel += numel[u];
            b->seg[0].n = b->numel;
            continue;
        }
        s->buckets[s->n_buckets++] = one_range(u, off[u], numel[u]);
        open = 1;
    }
    for (int b = 0; b < s->n_buckets; b++) {
        tt_fsdp_bucket *bk = &s->buckets[b];
        const int g = tt_sharding_group_size(s, b);
        const int64_t mult = shards > 1 ? (int64_t)g * SLICE_ALIGN : 1;
        bk->padded = (bk->numel + mult - 1) / mult * mult;
        if (bk->padded == 0 && shards > 1) bk->padded = mult; /* an empty unit still has a slice */
        s->shard_offset[b] = s->numel;
        s->numel += bk->padded / g;
    }
    return 0;
}

tt_err tt_sharding_init(tt_sharding *s, const tt_model *m, int shards, int replicas, int shard_rank, int ep,
                        size_t bucket_bytes)
{
    const int nu = m->n_units;
    int64_t *off = malloc(((size_t)nu + 1) * sizeof *off), *numel = malloc(((size_t)nu + 1) * sizeof *numel);
    tt_err rc = off && numel ? 0 : tt_errorf("out of memory laying out %d shards", shards);
    for (int u = 0; u < nu && !rc; u++) off[u] = m->units[u].offset, numel[u] = m->units[u].numel;
    if (!rc) rc = init(s, m, nu, off, numel, shards, replicas, shard_rank, ep, bucket_bytes);
    free(off);
    free(numel);
    return rc;
}

tt_err tt_sharding_init_ranges(tt_sharding *s, int n_units, const int64_t *offset, const int64_t *numel, int shards,
                               int replicas, int shard_rank, size_t bucket_bytes)
{
    return init(s, NULL, n_units, offset, numel, shards, replicas, shard_rank, 1, bucket_bytes);
}

void tt_sharding_free(tt_sharding *s)
{
    free(s->buckets);
    free(s->shard_offset);
    free(s->unit_offset);
    memset(s, 0, sizeof *s);
}

int tt_sharding_group_size(const tt_sharding *s, int b) { return s->buckets[b].expert ? s->shards / s->ep : s->shards; }

int tt_sharding_slice_index(const tt_sharding *s, int b, int r) { return s->buckets[b].expert ? r / s->ep : r; }

tt_err tt_sharding_slice_pieces(const tt_sharding *s, int b, int r, tt_shard_piece_fn fn, void *ctx)
{
    const tt_fsdp_bucket *bk = &s->buckets[b];
    const int64_t n = bk->padded / tt_sharding_group_size(s, b);
    const int64_t lo = (int64_t)tt_sharding_slice_index(s, b, r) * n, hi = lo + n; /* in the bucket's order */
    const int place = bk->expert ? r % s->ep - s->place : 0; /* relative to this rank's pieces */
    int64_t at = 0; /* the bucket's order at segment k's start */
    for (int k = 0; k < bk->n_segs; k++) {
        const int64_t a = lo > at ? lo : at, z = hi < at + bk->seg[k].n ? hi : at + bk->seg[k].n;
        if (a < z && fn(ctx, bk->seg[k].flat + place * bk->ep_stride[k] + (a - at), a - lo, z - a)) return -1;
        at += bk->seg[k].n;
    }
    return 0;
}

/* Clips each piece of a slice to [lo, hi) and moves it into the shard buffer. */
typedef struct {
    int64_t lo, hi, base;
    tt_shard_piece_fn fn;
    void *ctx;
} clip_ctx;

static tt_err clip_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const clip_ctx *c = ctx;
    const int64_t a = flat > c->lo ? flat : c->lo, z = flat + n < c->hi ? flat + n : c->hi;
    return a < z ? c->fn(c->ctx, a, c->base + at + (a - flat), z - a) : 0;
}

tt_err tt_sharding_pieces(const tt_sharding *s, int r, int64_t lo, int64_t hi, tt_shard_piece_fn fn, void *ctx)
{
    for (int b = 0; b < s->n_buckets; b++) {
        clip_ctx c = {lo, hi, s->shard_offset[b], fn, ctx};
        if (tt_sharding_slice_pieces(s, b, r, clip_piece, &c)) return -1;
    }
    return 0;
}

tt_fsdp_cfg tt_sharding_fsdp_cfg(const tt_sharding *s)
{
    return (tt_fsdp_cfg){.shards = s->shards, .replicas = s->replicas, .expert_shards = s->shards / s->ep,
                         .n_buckets = s->n_buckets, .buckets = s->buckets, .unit_offset = s->unit_offset,
                         .param_dtype = TT_F32, .reduce_dtype = TT_F32, .reshard_after_forward = 1, .reduce = 1};
}

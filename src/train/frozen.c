/* frozen.c — the frozen base of a LoRA run (see frozen.h). */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "train/frozen.h"

#define WORD 4 /* the layout's bytes are sharded as 4-byte words */

tt_err tt_frozen_plan(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_sharding *mesh,
                      size_t bucket_bytes)
{
    memset(f, 0, sizeof *f);
    f->base = base;
    if (tt_frozen_layout_new(base, linear_dtype, &f->layout)) return -1;
    const int nu = base->n_units;
    int64_t *off = malloc(((size_t)nu + 1) * sizeof *off), *words = malloc(((size_t)nu + 1) * sizeof *words);
    tt_err rc = off && words ? 0 : tt_errorf("out of memory");
    /* a unit's bytes are a multiple of 64 (tt_frozen_layout), so every unit is whole words */
    for (int u = 0; u < nu && !rc; u++)
        off[u] = (int64_t)(f->layout.unit_offset[u] / WORD), words[u] = (int64_t)(f->layout.unit_bytes[u] / WORD);
    if (!rc)
        rc = tt_sharding_init_ranges(&f->sh, nu, off, words, mesh ? mesh->shards : 1, mesh ? mesh->replicas : 1,
                                     mesh ? mesh->shard_rank : 0, bucket_bytes);
    free(off);
    free(words);
    if (rc) tt_frozen_free(f);
    return rc;
}

tt_err tt_frozen_init_sharded(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_sharding *mesh,
                              size_t bucket_bytes, const tt_backend *be, tt_queue *q)
{
    if (tt_frozen_plan(f, base, linear_dtype, mesh, bucket_bytes)) return -1;
    f->be = be, f->q = q;
    const size_t held = tt_frozen_rank_bytes(f), bytes = held ? held : 1;
    if (tt_mem_check(bytes, "the frozen base of LoRA (%zu parameters, linear weights in %s%s)", base->numel,
                     tt_dtype_name(linear_dtype), tt_frozen_is_sharded(f) ? "; this rank's slices" : "") ||
        !(f->buf = be->alloc(bytes)) || be->zero(q, (tt_mem){f->buf, 0}, bytes) || be->finish(q)) {
        tt_frozen_free(f);
        return tt_error_prefix("the frozen base (%zu bytes): ", bytes);
    }
    return 0;
}

tt_err tt_frozen_init(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_backend *be, tt_queue *q)
{
    return tt_frozen_init_sharded(f, base, linear_dtype, NULL, 0, be, q);
}

void tt_frozen_free(tt_frozen_base *f)
{
    if (f->buf) f->be->free(f->buf);
    tt_frozen_layout_free(&f->layout);
    tt_sharding_free(&f->sh);
    memset(f, 0, sizeof *f);
}

int tt_frozen_is_sharded(const tt_frozen_base *f) { return f->sh.shards > 1; }

size_t tt_frozen_rank_bytes(const tt_frozen_base *f)
{
    return tt_frozen_is_sharded(f) ? (size_t)f->sh.numel * WORD : f->layout.bytes;
}

tt_mem tt_frozen_unit_mem(const tt_frozen_base *f, int unit) { return (tt_mem){f->buf, f->layout.unit_offset[unit]}; }

tt_mem tt_frozen_bucket_mem(const tt_frozen_base *f, int b)
{
    return (tt_mem){f->buf, (size_t)f->sh.shard_offset[b] * WORD};
}

/* ---- the parameter store ------------------------------------------------------------------------------------- */

/* Parameter i's bytes: its place in the layout, and how many (rounded up to whole words) */
static size_t param_at(const tt_frozen_base *f, const tt_model *m, int i)
{
    return f->layout.unit_offset[m->params[i].unit] + f->layout.offset[i];
}
static size_t param_words(const tt_frozen_base *f, const tt_model *m, int i)
{
    return ((size_t)tt_param_numel(&m->params[i]) * tt_dtype_size(f->layout.dtype[i]) + WORD - 1) / WORD;
}

/* A piece of this rank's slices <-> a host copy of the words from `first` on */
typedef struct {
    tt_frozen_base *f;
    uint32_t *words;
    int64_t first;
} piece;

static tt_err read_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const piece *p = ctx;
    return tt_backend_read(p->f->be, p->f->q, p->words + (flat - p->first), (tt_mem){p->f->buf, (size_t)at * WORD},
                           (size_t)n * WORD);
}

static tt_err write_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const piece *p = ctx;
    return tt_backend_write(p->f->be, p->f->q, (tt_mem){p->f->buf, (size_t)at * WORD}, p->words + (flat - p->first),
                            (size_t)n * WORD);
}

/* Parameter i's stored words into w (param_words of them). A sharded base: each rank's pieces, zeros elsewhere,
 * summed over the shard group as integers (each word is one rank's, so the sum is its bits exactly). */
static tt_err read_words(tt_frozen_base *f, const tt_model *m, int i, uint32_t *w)
{
    const size_t nw = param_words(f, m, i);
    if (!tt_frozen_is_sharded(f))
        return tt_backend_read(f->be, f->q, w, (tt_mem){f->buf, param_at(f, m, i)}, nw * WORD);
    tt_dist *d = tt_dist_get();
    if (!d) return tt_errorf("'%s' is sharded, and this process is not in a job", m->params[i].name);
    memset(w, 0, nw * WORD);
    piece p = {f, w, (int64_t)(param_at(f, m, i) / WORD)};
    if (tt_sharding_pieces(&f->sh, f->sh.shard_rank, p.first, p.first + (int64_t)nw, read_piece, &p) ||
        tt_dist_all_reduce(d, TT_GROUP_SHARD, w, nw, TT_I32, TT_REDUCE_SUM, m->params[i].name))
        return tt_error_prefix("reading the sharded '%s': ", m->params[i].name);
    return 0;
}

static tt_err store_read(void *ctx, const tt_model *m, int i, float *dst)
{
    tt_frozen_base *f = ctx;
    const size_t n = (size_t)tt_param_numel(&m->params[i]), nw = param_words(f, m, i);
    uint32_t *w = malloc((nw ? nw : 1) * WORD);
    tt_err rc = w ? read_words(f, m, i, w) : tt_errorf("out of memory reading '%s'", m->params[i].name);
    if (!rc && f->layout.dtype[i] == TT_F32) memcpy(dst, w, n * sizeof(float));
    else if (!rc) {
        const uint16_t *h = (const uint16_t *)w;
        for (size_t k = 0; k < n; k++) dst[k] = tt_bf16_to_f32(h[k]);
    }
    free(w);
    return rc;
}

static tt_err store_write(void *ctx, const tt_model *m, int i, const float *src)
{
    tt_frozen_base *f = ctx;
    const size_t n = (size_t)tt_param_numel(&m->params[i]), nw = param_words(f, m, i);
    uint32_t *w = calloc(nw ? nw : 1, WORD); /* a bf16 parameter of odd length: its last word's padding half zero */
    if (!w) return tt_errorf("out of memory writing '%s'", m->params[i].name);
    if (f->layout.dtype[i] == TT_F32) memcpy(w, src, n * sizeof(float));
    else {
        uint16_t *h = (uint16_t *)w;
        for (size_t k = 0; k < n; k++) h[k] = tt_f32_to_bf16(src[k]);
    }
    tt_err rc;
    if (!tt_frozen_is_sharded(f)) {
        rc = tt_backend_write(f->be, f->q, (tt_mem){f->buf, param_at(f, m, i)}, w,
                              n * tt_dtype_size(f->layout.dtype[i]));
    } else {
        piece p = {f, w, (int64_t)(param_at(f, m, i) / WORD)};
        rc = tt_sharding_pieces(&f->sh, f->sh.shard_rank, p.first, p.first + (int64_t)nw, write_piece, &p);
    }
    free(w);
    return rc;
}

tt_param_store tt_frozen_store(tt_frozen_base *f) { return (tt_param_store){f, store_read, store_write}; }

/* ---- the hash ------------------------------------------------------------------------------------------------ */

/* FNV-1a over 8-byte words (a unit's bytes are a multiple of 64): a base of gigabytes hashes at start-up in about
 * a second. Over the units in order, so that it does not depend on how the units are bucketed or sliced. */
static uint64_t fnv_words(uint64_t h, const unsigned char *b, size_t n)
{
    for (size_t k = 0; k + 8 <= n; k += 8) {
        uint64_t w;
        memcpy(&w, b + k, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

static tt_err hash_whole(tt_frozen_base *f, uint64_t *hash)
{
    size_t most = 1;
    for (int u = 0; u < f->base->n_units; u++)
        if (f->layout.unit_bytes[u] > most) most = f->layout.unit_bytes[u];
    unsigned char *b = malloc(most);
    tt_err rc = b ? 0 : tt_errorf("out of memory hashing the frozen base");
    for (int u = 0; u < f->base->n_units && !rc; u++) {
        const size_t n = f->layout.unit_bytes[u];
        if (!(rc = tt_backend_read(f->be, f->q, b, tt_frozen_unit_mem(f, u), n))) *hash = fnv_words(*hash, b, n);
    }
    free(b);
    return rc;
}

/* A bucket at a time, gathered from the shard group: its units' bytes, in order, lead the gathered slices. */
static tt_err hash_sharded(tt_frozen_base *f, uint64_t *hash)
{
    const tt_sharding *sh = &f->sh;
    tt_dist *d = tt_dist_get();
    int64_t most = 0;
    for (int b = 0; b < sh->n_buckets; b++)
        if (sh->buckets[b].padded > most) most = sh->buckets[b].padded;
    unsigned char *all = malloc((size_t)most * WORD), *mine = malloc((size_t)most / (size_t)sh->shards * WORD + 1);
    tt_err rc = !d ? tt_errorf("the frozen base is sharded, and this process is not in a job")
                : all && mine ? 0
                              : tt_errorf("out of memory hashing the frozen base");
    for (int b = 0; b < sh->n_buckets && !rc; b++) {
        const tt_fsdp_bucket *bk = &sh->buckets[b];
        const size_t n = (size_t)(bk->padded / sh->shards);
        tt_coll_req *req = NULL;
        tt_coll c = {.kind = TT_COLL_ALL_GATHER, .group = TT_GROUP_SHARD, .send = mine, .recv = all, .count = n,
                     .dtype = TT_I32, .what = "hashing the frozen base"};
        rc = tt_backend_read(f->be, f->q, mine, tt_frozen_bucket_mem(f, b), n * WORD);
        if (!rc && !(rc = tt_coll_start(d, &c, &req))) rc = tt_coll_wait(d, req);
        if (!rc) *hash = fnv_words(*hash, all, (size_t)bk->numel * WORD);
    }
    free(all);
    free(mine);
    return rc;
}

tt_err tt_frozen_hash(tt_frozen_base *f, uint64_t *hash)
{
    *hash = 1469598103934665603ull;
    return tt_frozen_is_sharded(f) ? hash_sharded(f, hash) : hash_whole(f, hash);
}

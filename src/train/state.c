/* state.c — the train state's buffers and the copies that reach them. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "dist/dist.h"
#include "train/state.h"

tt_err tt_state_init(tt_train_state *s, const tt_model *m, const tt_backend *be, tt_queue *q, int with_optim)
{
    return tt_state_init_sharded(s, m, NULL, be, q, with_optim);
}

tt_err tt_state_init_sharded(tt_train_state *s, const tt_model *m, const tt_sharding *sh, const tt_backend *be,
                             tt_queue *q, int with_optim)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    s->q = q;
    s->model = m;
    s->sh = sh;
    s->numel = sh ? sh->numel : (int64_t)m->numel;
    const size_t bytes = (s->numel ? (size_t)s->numel : 1) * sizeof(float);
    /* all the buffers against the memory there is, before the first is
     * allocated (the host backends allocate host memory) */
    const int kinds = with_optim ? TT_STATE_KINDS : 1;
    size_t total;
    const tt_model_cfg *c = &m->cfg;
    if (tt_mul_size(bytes, (size_t)kinds, &total))
        return tt_errorf("train state: %d x %zu bytes overflow", kinds, bytes);
    if (tt_mem_check(total,
                     "train state: %s of %sthe model's %zu parameters (dim %d, n_layers %d, ffn_dim %d, "
                     "vocab_size %d)",
                     with_optim ? "fp32 weights, gradients and two AdamW moments" : "the fp32 weights",
                     tt_state_is_sharded(s) ? "this rank's shard of " : "", m->numel, c->dim, c->n_layers, c->ffn_dim,
                     c->vocab_size))
        return -1;
    for (int k = 0; k < kinds; k++) {
        if (!(s->buf[k] = be->alloc(bytes)) || (k > 0 && be->zero(q, (tt_mem){s->buf[k], 0}, bytes))) {
            tt_state_free(s);
            return tt_error_prefix("train state (%s, %zu bytes): ", k ? tt_state_kind_prefix((tt_state_kind)k) : "weights",
                                   bytes);
        }
        s->store[k] = (tt_state_store_ctx){s, (tt_state_kind)k};
    }
    return be->finish(q);
}

static int64_t full_offset(const tt_sharding *sh, int b)
{
    int64_t off = 0;
    for (int k = 0; k < b; k++) off += sh->buckets[k].padded;
    return off;
}

tt_err tt_state_alloc_grad_full(tt_train_state *s)
{
    const size_t bytes = (size_t)full_offset(s->sh, s->sh->n_buckets) * sizeof(float);
    if (tt_mem_check(bytes, "the full gradients a rank accumulates over micro-steps (training.global_batch_size "
                            "above local_batch_size x ranks)"))
        return -1;
    if (!(s->grad_full = s->be->alloc(bytes ? bytes : 1)) || s->be->zero(s->q, (tt_mem){s->grad_full, 0}, bytes))
        return tt_error_prefix("full gradients (%zu bytes): ", bytes);
    return 0;
}

tt_mem tt_state_grad_full_mem(const tt_train_state *s, int b)
{
    return (tt_mem){s->grad_full, (size_t)full_offset(s->sh, b) * sizeof(float)};
}

/* Weights [at, at + n) of the state's buffer, from src, rounded to bf16 into the copy; a chunk at a time. */
static tt_err write_w16(tt_train_state *s, int64_t at, const float *src, int64_t n)
{
    const int64_t chunk = n < (1 << 20) ? n : (1 << 20);
    uint16_t *h = malloc((size_t)(chunk ? chunk : 1) * sizeof *h);
    tt_err rc = h ? 0 : tt_errorf("out of memory rounding the weights to bf16");
    for (int64_t a = 0; a < n && !rc; a += chunk) {
        const int64_t k = n - a < chunk ? n - a : chunk;
        for (int64_t i = 0; i < k; i++) h[i] = tt_f32_to_bf16(src[a + i]);
        rc = tt_backend_write(s->be, s->q, (tt_mem){s->w16, (size_t)(at + a) * sizeof *h}, h, (size_t)k * sizeof *h);
    }
    free(h);
    return rc;
}

/* Elements [at, at + n) of a kind's buffer from src; the weights' bf16 copy with them. */
static tt_err write_at(tt_train_state *s, tt_state_kind kind, int64_t at, const float *src, int64_t n)
{
    tt_err rc = tt_backend_write(s->be, s->q, (tt_mem){s->buf[kind], (size_t)at * sizeof(float)}, src,
                                 (size_t)n * sizeof(float));
    return rc || kind != TT_STATE_PARAM || !s->w16 ? rc : write_w16(s, at, src, n);
}

tt_err tt_state_alloc_w16(tt_train_state *s)
{
    if (tt_state_is_sharded(s))
        return tt_errorf("a bf16 copy of the weights is kept by a whole state, not by this rank's shard of one");
    if (s->w16) return 0;
    const size_t bytes = (s->numel ? (size_t)s->numel : 1) * sizeof(uint16_t);
    if (tt_mem_check(bytes, "the weights rounded to bf16 for the bf16 products (%lld parameters)", (long long)s->numel))
        return -1;
    if (!(s->w16 = s->be->alloc(bytes))) return tt_error_prefix("the weights' bf16 copy (%zu bytes): ", bytes);
    /* from the weights there are now, through the host a chunk at a time */
    const int64_t chunk = s->numel < (1 << 20) ? s->numel : (1 << 20);
    float *f = malloc((size_t)(chunk ? chunk : 1) * sizeof *f);
    tt_err rc = f ? 0 : tt_errorf("out of memory rounding the weights to bf16");
    for (int64_t a = 0; a < s->numel && !rc; a += chunk) {
        const int64_t k = s->numel - a < chunk ? s->numel - a : chunk;
        if (!(rc = tt_backend_read(s->be, s->q, f, (tt_mem){s->buf[TT_STATE_PARAM], (size_t)a * sizeof *f},
                                   (size_t)k * sizeof *f)))
            rc = write_w16(s, a, f, k);
    }
    free(f);
    if (rc) {
        s->be->free(s->w16);
        s->w16 = NULL;
    }
    return rc;
}

tt_mem tt_state_w16_mem(const tt_train_state *s) { return (tt_mem){s->w16, 0}; }
tt_mem tt_state_w16_unit_mem(const tt_train_state *s, int unit)
{
    return (tt_mem){s->w16, (size_t)s->model->units[unit].offset * sizeof(uint16_t)};
}

void tt_state_free(tt_train_state *s)
{
    if (s->w16) s->be->free(s->w16);
    if (s->grad_full) s->be->free(s->grad_full);
    for (int k = 0; k < TT_STATE_KINDS; k++)
        if (s->buf[k]) s->be->free(s->buf[k]);
    memset(s, 0, sizeof *s);
}

int tt_state_is_sharded(const tt_train_state *s) { return s->sh && s->sh->shards > 1; }

tt_mem tt_state_mem(const tt_train_state *s, tt_state_kind kind) { return (tt_mem){s->buf[kind], 0}; }
tt_mem tt_state_bucket_mem(const tt_train_state *s, tt_state_kind kind, int b)
{
    return (tt_mem){s->buf[kind], (size_t)s->sh->shard_offset[b] * sizeof(float)};
}
tt_mem tt_state_param_mem(const tt_train_state *s, tt_state_kind kind, int param)
{
    return (tt_mem){s->buf[kind], (size_t)s->model->params[param].offset * sizeof(float)};
}
tt_mem tt_state_unit_mem(const tt_train_state *s, tt_state_kind kind, int unit)
{
    return (tt_mem){s->buf[kind], (size_t)s->model->units[unit].offset * sizeof(float)};
}

/* A piece of a host copy of the flat range that starts at `first`. */
typedef struct {
    tt_train_state *s;
    tt_state_kind kind;
    float *dst;
    const float *src;
    int64_t first;
} piece;

static tt_err read_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const piece *p = ctx;
    return tt_backend_read(p->s->be, p->s->q, p->dst + (flat - p->first),
                           (tt_mem){p->s->buf[p->kind], (size_t)at * sizeof(float)}, (size_t)n * sizeof(float));
}

/* On a sharded state every rank of a shard group reads together: the pieces
 * it holds, zeros elsewhere, summed over the group (each element is one
 * rank's). Meant for small parameters (the balancing bias). */
static tt_err store_read(void *ctx, const tt_model *m, int i, float *dst)
{
    const tt_state_store_ctx *c = ctx;
    const int64_t n = tt_param_numel(&m->params[i]);
    if (!tt_state_is_sharded(c->s))
        return tt_backend_read(c->s->be, c->s->q, dst, tt_state_param_mem(c->s, c->kind, i), (size_t)n * sizeof(float));
    tt_dist *d = tt_dist_get();
    if (!d) return tt_errorf("'%s' is sharded, and this process is not in a job", m->params[i].name);
    memset(dst, 0, (size_t)n * sizeof(float));
    piece p = {c->s, c->kind, dst, NULL, m->params[i].offset};
    if (tt_sharding_pieces(c->s->sh, c->s->sh->shard_rank, p.first, p.first + n, read_piece, &p) ||
        tt_dist_all_reduce(d, TT_GROUP_SHARD, dst, (size_t)n, TT_F32, TT_REDUCE_SUM, m->params[i].name))
        return tt_error_prefix("reading the sharded '%s': ", m->params[i].name);
    return 0;
}

static tt_err write_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const piece *w = ctx;
    return write_at(w->s, w->kind, at, w->src + (flat - w->first), n);
}

tt_err tt_state_write_range(tt_train_state *s, tt_state_kind kind, int64_t first, int64_t n, const float *src)
{
    if (!s->sh) return write_at(s, kind, first, src, n); /* the model's own layout */
    piece w = {s, kind, NULL, src, first};
    return tt_sharding_pieces(s->sh, s->sh->shard_rank, first, first + n, write_piece, &w);
}

static tt_err store_write(void *ctx, const tt_model *m, int i, const float *src)
{
    const tt_state_store_ctx *c = ctx;
    return tt_state_write_range(c->s, c->kind, m->params[i].offset, tt_param_numel(&m->params[i]), src);
}

tt_param_store tt_state_store(tt_train_state *s, tt_state_kind kind)
{
    return (tt_param_store){&s->store[kind], store_read, store_write};
}

tt_err tt_state_download(tt_train_state *s, tt_state_kind kind, float *dst)
{
    return tt_backend_read(s->be, s->q, dst, tt_state_mem(s, kind), (size_t)s->numel * sizeof(float));
}
tt_err tt_state_upload(tt_train_state *s, tt_state_kind kind, const float *src)
{
    return write_at(s, kind, 0, src, s->numel);
}

/* Shard rank r's slice of a bucket (at `from`) into its places in the flat layout. */
typedef struct {
    float *dst;
    const float *from;
} place_ctx;

static tt_err place_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const place_ctx *p = ctx;
    memcpy(p->dst + flat, p->from + at, (size_t)n * sizeof(float));
    return 0;
}

tt_err tt_state_gather(tt_train_state *s, tt_state_kind kind, float *dst)
{
    if (!tt_state_is_sharded(s))
        return tt_backend_read(s->be, s->q, dst, tt_state_mem(s, kind), s->model->numel * sizeof(float));
    const tt_sharding *sh = s->sh;
    tt_dist *d = tt_dist_get();
    int64_t most = 0; /* the largest slice */
    for (int b = 0; b < sh->n_buckets; b++)
        if (sh->buckets[b].padded / tt_sharding_group_size(sh, b) > most)
            most = sh->buckets[b].padded / tt_sharding_group_size(sh, b);
    float *all = malloc((size_t)most * (size_t)sh->shards * sizeof *all), *mine = malloc((size_t)most * sizeof *mine);
    tt_err rc = d && all && mine ? 0 : tt_errorf("out of memory gathering the model (%lld floats)",
                                                 (long long)most * sh->shards);
    /* one bucket at a time: every shard rank's slice, each then put where its
     * pieces belong (an expert bucket's slices hold different experts) */
    for (int b = 0; b < sh->n_buckets && !rc; b++) {
        const size_t n = (size_t)(sh->buckets[b].padded / tt_sharding_group_size(sh, b));
        tt_coll_req *req = NULL;
        tt_coll c = {.kind = TT_COLL_ALL_GATHER, .group = TT_GROUP_SHARD, .send = mine, .recv = all, .count = n,
                     .dtype = TT_F32, .what = "gathering the model"};
        rc = tt_backend_read(s->be, s->q, mine, tt_state_bucket_mem(s, kind, b), n * sizeof(float));
        if (!rc && !(rc = tt_coll_start(d, &c, &req))) rc = tt_coll_wait(d, req);
        for (int r = 0; r < sh->shards && !rc; r++) {
            place_ctx p = {dst, all + (size_t)r * n};
            rc = tt_sharding_slice_pieces(sh, b, r, place_piece, &p);
        }
    }
    free(all);
    free(mine);
    return rc;
}

const char *tt_state_kind_prefix(tt_state_kind kind)
{
    static const char *const p[] = {"", "grad.", "optim.exp_avg.", "optim.exp_avg_sq."};
    return (unsigned)kind < TT_STATE_KINDS ? p[kind] : "?";
}

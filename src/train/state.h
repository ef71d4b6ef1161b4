/* state.h — the train state that lives across steps, in the backend's memory:
 * the fp32 master weights, the gradient accumulators and the two AdamW
 * moments, each one buffer in the model's flat layout (unit after unit). The
 * host reaches them only through the backend's copies. */
#ifndef TT_STATE_H
#define TT_STATE_H
#include "backend/backend.h"
#include "models/model.h"
#include "train/sharding.h"

typedef enum { TT_STATE_PARAM = 0, TT_STATE_GRAD, TT_STATE_EXP_AVG, TT_STATE_EXP_AVG_SQ, TT_STATE_KINDS } tt_state_kind;

typedef struct tt_train_state tt_train_state;
typedef struct {
    tt_train_state *s;
    tt_state_kind kind;
} tt_state_store_ctx;

struct tt_train_state {
    const tt_backend *be;
    tt_queue *q;                 /* the run's queue: graphs and copies of the state are ordered on it */
    const tt_model *model;
    const tt_sharding *sh;       /* the layout of a sharded state (NULL: the whole model) */
    int64_t numel;               /* floats in each buffer: the model's, or this rank's shard buffer */
    tt_buf *buf[TT_STATE_KINDS]; /* only params without the optimizer */
    tt_buf *grad_full;           /* sharded, accumulating micro-steps: every bucket's full gradients */
    tt_buf *w16;                 /* the weights rounded to bf16 for the bf16 products (tt_state_alloc_w16), or NULL */
    tt_state_store_ctx store[TT_STATE_KINDS];
};

/* with_optim: also gradients and moments (zeroed). */
tt_err tt_state_init(tt_train_state *s, const tt_model *m, const tt_backend *be, tt_queue *q, int with_optim);
/* The same holding this rank's slices of sh (kept by the caller while s lives). */
tt_err tt_state_init_sharded(tt_train_state *s, const tt_model *m, const tt_sharding *sh, const tt_backend *be,
                             tt_queue *q, int with_optim);
void tt_state_free(tt_train_state *s);
/* Whether the state holds only a slice of each unit (a shard group of more than one). */
int tt_state_is_sharded(const tt_train_state *s);
/* Where parameter / unit k / the whole buffer of a kind lives (param and
 * unit: the whole model's layout, not a sharded state). */
tt_mem tt_state_param_mem(const tt_train_state *s, tt_state_kind kind, int param);
tt_mem tt_state_unit_mem(const tt_train_state *s, tt_state_kind kind, int unit);
tt_mem tt_state_mem(const tt_train_state *s, tt_state_kind kind);
/* Where bucket b's slice lives in a state laid out by a sharding. */
tt_mem tt_state_bucket_mem(const tt_train_state *s, tt_state_kind kind, int b);
/* The full gradients a sharded state accumulates over the micro-steps of an
 * optimizer step (every bucket padded, end to end; zeroed): allocated once,
 * by the run that accumulates. And where bucket b's are. */
tt_err tt_state_alloc_grad_full(tt_train_state *s);
tt_mem tt_state_grad_full_mem(const tt_train_state *s, int b);
/* A copy of the weights rounded to bf16 (numel bf16 values in the same layout), made now from the weights and
 * kept equal to them from then on: every write of weights through this module writes their rounding too, and
 * the optimizer graph's AdamW writes it beside the weights (tt_build_optim_step). The bf16 products of the
 * micro-steps read it, so that they round no weight themselves (tt_step_cfg.weights16). A whole state only:
 * this rank's slices of a sharded one are gathered in bf16 anyway. And where it, and unit k's part of it, are. */
tt_err tt_state_alloc_w16(tt_train_state *s);
tt_mem tt_state_w16_mem(const tt_train_state *s);
tt_mem tt_state_w16_unit_mem(const tt_train_state *s, int unit);
/* A store over one kind (parameters for Hugging Face loading and export and
 * the balancing bias, moments for checkpoints). Writing a parameter to a
 * sharded state keeps the rank's slices of it; reading one is collective
 * over the shard group (each rank's pieces, summed): every rank of the group
 * reads the same parameter, a small one (the whole model: tt_state_gather).
 * The store points at s: keep s where it is. */
tt_param_store tt_state_store(tt_train_state *s, tt_state_kind kind);
/* The flat layout's elements [first, first + n) of a kind, from a host copy
 * of them at src: the part this rank holds (its slices of them, or all of
 * them in the whole model's layout). */
tt_err tt_state_write_range(tt_train_state *s, tt_state_kind kind, int64_t first, int64_t n, const float *src);
/* The whole buffer of a kind (s->numel floats) to or from the host. */
tt_err tt_state_download(tt_train_state *s, tt_state_kind kind, float *dst);
tt_err tt_state_upload(tt_train_state *s, tt_state_kind kind, const float *src);
/* The whole model's values of a kind (m->numel floats in the flat layout)
 * on every rank, gathered from the shard group's slices: a collective every
 * rank of the group calls. */
tt_err tt_state_gather(tt_train_state *s, tt_state_kind kind, float *dst);
const char *tt_state_kind_prefix(tt_state_kind kind); /* "", "grad.", "optim.exp_avg.", "optim.exp_avg_sq." */
#endif

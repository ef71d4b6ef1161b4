/* state.h — the train state that lives across steps, in the backend's memory:
 * the fp32 master weights, the gradient accumulators and the two AdamW
 * moments, each one buffer in the model's flat layout (unit after unit). The
 * host reaches them only through the backend's copies. */
#ifndef TT_STATE_H
#define TT_STATE_H
#include "backend/backend.h"
#include "models/model.h"

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
    tt_buf *buf[TT_STATE_KINDS]; /* each model->numel floats; only params without the optimizer */
    tt_state_store_ctx store[TT_STATE_KINDS];
};

/* with_optim: also gradients and moments (zeroed). */
tt_err tt_state_init(tt_train_state *s, const tt_model *m, const tt_backend *be, tt_queue *q, int with_optim);
void tt_state_free(tt_train_state *s);
/* Where parameter / unit k / the whole buffer of a kind lives. */
tt_mem tt_state_param_mem(const tt_train_state *s, tt_state_kind kind, int param);
tt_mem tt_state_unit_mem(const tt_train_state *s, tt_state_kind kind, int unit);
tt_mem tt_state_mem(const tt_train_state *s, tt_state_kind kind);
/* A store over one kind (parameters for Hugging Face loading and export,
 * moments for checkpoints). The store points at s: keep s where it is. */
tt_param_store tt_state_store(tt_train_state *s, tt_state_kind kind);
/* The whole flat buffer of a kind to or from the host (m->numel floats). */
tt_err tt_state_download(tt_train_state *s, tt_state_kind kind, float *dst);
tt_err tt_state_upload(tt_train_state *s, tt_state_kind kind, const float *src);
const char *tt_state_kind_prefix(tt_state_kind kind); /* "", "grad.", "optim.exp_avg.", "optim.exp_avg_sq." */
#endif

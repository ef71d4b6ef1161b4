/* state.c — the train state's buffers and the copies that reach them. */
#include <string.h>

#include "core/core.h"
#include "train/state.h"

tt_err tt_state_init(tt_train_state *s, const tt_model *m, const tt_backend *be, tt_queue *q, int with_optim)
{
    memset(s, 0, sizeof *s);
    s->be = be;
    s->q = q;
    s->model = m;
    const size_t bytes = (m->numel ? m->numel : 1) * sizeof(float);
    /* all the buffers against the memory there is, before the first is
     * allocated (the host backends allocate host memory) */
    const int kinds = with_optim ? TT_STATE_KINDS : 1;
    size_t total;
    const tt_model_cfg *c = &m->cfg;
    if (tt_mul_size(bytes, (size_t)kinds, &total))
        return tt_errorf("train state: %d x %zu bytes overflow", kinds, bytes);
    if (tt_mem_check(total,
                     "train state: %s of the model's %zu parameters (dim %d, n_layers %d, ffn_dim %d, vocab_size %d)",
                     with_optim ? "fp32 weights, gradients and two AdamW moments" : "the fp32 weights", m->numel,
                     c->dim, c->n_layers, c->ffn_dim, c->vocab_size))
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

void tt_state_free(tt_train_state *s)
{
    for (int k = 0; k < TT_STATE_KINDS; k++)
        if (s->buf[k]) s->be->free(s->buf[k]);
    memset(s, 0, sizeof *s);
}

tt_mem tt_state_mem(const tt_train_state *s, tt_state_kind kind) { return (tt_mem){s->buf[kind], 0}; }
tt_mem tt_state_param_mem(const tt_train_state *s, tt_state_kind kind, int param)
{
    return (tt_mem){s->buf[kind], (size_t)s->model->params[param].offset * sizeof(float)};
}
tt_mem tt_state_unit_mem(const tt_train_state *s, tt_state_kind kind, int unit)
{
    return (tt_mem){s->buf[kind], (size_t)s->model->units[unit].offset * sizeof(float)};
}

static tt_err store_read(void *ctx, const tt_model *m, int i, float *dst)
{
    const tt_state_store_ctx *c = ctx;
    return tt_backend_read(c->s->be, c->s->q, dst, tt_state_param_mem(c->s, c->kind, i),
                           (size_t)tt_param_numel(&m->params[i]) * sizeof(float));
}
static tt_err store_write(void *ctx, const tt_model *m, int i, const float *src)
{
    const tt_state_store_ctx *c = ctx;
    return tt_backend_write(c->s->be, c->s->q, tt_state_param_mem(c->s, c->kind, i), src,
                            (size_t)tt_param_numel(&m->params[i]) * sizeof(float));
}
tt_param_store tt_state_store(tt_train_state *s, tt_state_kind kind)
{
    return (tt_param_store){&s->store[kind], store_read, store_write};
}

tt_err tt_state_download(tt_train_state *s, tt_state_kind kind, float *dst)
{
    return tt_backend_read(s->be, s->q, dst, tt_state_mem(s, kind), s->model->numel * sizeof(float));
}
tt_err tt_state_upload(tt_train_state *s, tt_state_kind kind, const float *src)
{
    return tt_backend_write(s->be, s->q, tt_state_mem(s, kind), src, s->model->numel * sizeof(float));
}

const char *tt_state_kind_prefix(tt_state_kind kind)
{
    static const char *const p[] = {"", "grad.", "optim.exp_avg.", "optim.exp_avg_sq."};
    return (unsigned)kind < TT_STATE_KINDS ? p[kind] : "?";
}

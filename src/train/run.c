/* run.c — closing a run, and the whole model's weights of a (possibly
 * sharded) run for rank 0. */
#include <stdlib.h>
#include <string.h>

#include "train/run.h"

void tt_run_close(tt_run *r)
{
    tt_metrics_close(&r->metrics);
    tt_step_graph_free(&r->train_nosync); /* before train: it may run in train's arena */
    tt_step_graph_free(&r->train);
    tt_step_graph_free(&r->optim);
    tt_step_graph_free(&r->eval);
    if (r->micro)
        for (int a = 0; a < r->accum_steps; a++) tt_batch_free(r->micro[a]);
    free(r->micro);
    tt_batch_free(r->val_batch);
    tt_loader_close(r->train_loader);
    tt_loader_close(r->val_loader);
    if (r->state.be) tt_state_free(&r->state);
    if (r->frozen.buf) tt_frozen_free(&r->frozen);
    tt_lora_free(&r->lora);
    if (r->q) r->be->queue_free(r->q);
    tt_model_free(r->model);
    tt_moe_balance_free(&r->balance);
    tt_sharding_free(&r->sh);
    memset(r, 0, sizeof *r);
}

const tt_model *tt_run_trained(const tt_run *r) { return r->has_lora ? r->lora.adapters : r->model; }

/* The base's weights with every adapter merged in (W + s B A), one parameter at a time. */
static tt_err merged_weights(tt_run *r, tt_train_state *out)
{
    const tt_model *m = r->model, *a = r->lora.adapters;
    int64_t most = 1;
    for (int i = 0; i < m->n_params; i++)
        if (tt_param_numel(&m->params[i]) > most) most = tt_param_numel(&m->params[i]);
    for (int i = 0; i < a->n_params; i++)
        if (tt_param_numel(&a->params[i]) > most) most = tt_param_numel(&a->params[i]);
    float *w = malloc((size_t)most * sizeof *w), *A = malloc((size_t)most * sizeof *A), *B = malloc((size_t)most * sizeof *B);
    tt_err rc = w && A && B ? tt_state_init(out, m, r->be, r->q, 0) : tt_errorf("out of memory merging the adapters");
    const tt_param_store base = tt_frozen_store(&r->frozen), ad = tt_state_store(&r->state, TT_STATE_PARAM);
    const tt_param_store dst = tt_state_store(out, TT_STATE_PARAM);
    for (int i = 0; i < m->n_params && !rc; i++) {
        const int t = tt_lora_target_of(&r->lora, i);
        if ((rc = base.read(base.ctx, m, i, w))) break;
        if (t >= 0) {
            const tt_lora_target *x = &r->lora.targets[t];
            if ((rc = ad.read(ad.ctx, a, x->a, A)) || (rc = ad.read(ad.ctx, a, x->b, B))) break;
            tt_lora_merge(w, A, B, m->params[i].shape[0], m->params[i].shape[1], r->lora.rank, r->lora.scale);
        }
        rc = dst.write(dst.ctx, m, i, w);
    }
    if (rc && out->be) tt_state_free(out);
    free(w);
    free(A);
    free(B);
    return rc;
}

tt_err tt_run_whole_weights(tt_run *r, tt_train_state *gathered, tt_train_state **whole)
{
    *whole = NULL;
    memset(gathered, 0, sizeof *gathered);
    if (r->has_lora) { /* one process: the merged model */
        if (merged_weights(r, gathered)) return -1;
        *whole = gathered;
        return 0;
    }
    if (!tt_state_is_sharded(&r->state)) {
        *whole = r->rank == 0 ? &r->state : NULL;
        return 0;
    }
    float *flat = malloc((r->model->numel ? r->model->numel : 1) * sizeof *flat);
    tt_err rc = flat ? tt_state_gather(&r->state, TT_STATE_PARAM, flat)
                     : tt_errorf("out of memory for the whole model (%zu floats)", r->model->numel);
    if (!rc && r->rank == 0) {
        if (!(rc = tt_state_init(gathered, r->model, r->be, r->q, 0)) &&
            !(rc = tt_state_upload(gathered, TT_STATE_PARAM, flat)))
            *whole = gathered;
        else if (gathered->be)
            tt_state_free(gathered);
    }
    free(flat);
    return rc;
}

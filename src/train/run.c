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

tt_err tt_run_whole_trained(tt_run *r, tt_train_state *gathered, tt_train_state **whole)
{
    *whole = NULL;
    memset(gathered, 0, sizeof *gathered);
    if (!tt_state_is_sharded(&r->state)) {
        *whole = r->rank == 0 ? &r->state : NULL;
        return 0;
    }
    const tt_model *m = tt_run_trained(r);
    float *flat = malloc((m->numel ? m->numel : 1) * sizeof *flat);
    tt_err rc = flat ? tt_state_gather(&r->state, TT_STATE_PARAM, flat)
                     : tt_errorf("out of memory for the whole model (%zu floats)", m->numel);
    if (!rc && r->rank == 0) {
        if (!(rc = tt_state_init(gathered, m, r->be, r->q, 0)) &&
            !(rc = tt_state_upload(gathered, TT_STATE_PARAM, flat)))
            *whole = gathered;
        else if (gathered->be)
            tt_state_free(gathered);
    }
    free(flat);
    return rc;
}

/* The base's weights with every adapter merged in (W + s B A), one parameter at a time, into *out on rank 0 (the
 * rank given the whole adapters, ad). Every rank reads the base with it where the base is sliced over the ranks
 * (each read is collective). */
static tt_err merged_weights(tt_run *r, tt_train_state *ad, tt_train_state *out)
{
    const tt_model *m = r->model, *a = r->lora.adapters;
    if (!ad && !tt_frozen_is_sharded(&r->frozen)) return 0; /* rank 0 reads its own whole base */
    int64_t most = 1;
    for (int i = 0; i < m->n_params; i++)
        if (tt_param_numel(&m->params[i]) > most) most = tt_param_numel(&m->params[i]);
    for (int i = 0; i < a->n_params; i++)
        if (tt_param_numel(&a->params[i]) > most) most = tt_param_numel(&a->params[i]);
    float *w = malloc((size_t)most * sizeof *w), *A = malloc((size_t)most * sizeof *A), *B = malloc((size_t)most * sizeof *B);
    tt_err rc = !w || !A || !B ? tt_errorf("out of memory merging the adapters")
                : ad           ? tt_state_init(out, m, r->be, r->q, 0)
                               : 0;
    const tt_param_store base = tt_frozen_store(&r->frozen);
    const tt_param_store src = ad ? tt_state_store(ad, TT_STATE_PARAM) : (tt_param_store){0};
    const tt_param_store dst = ad && !rc ? tt_state_store(out, TT_STATE_PARAM) : (tt_param_store){0};
    for (int i = 0; i < m->n_params && !rc; i++) {
        if ((rc = base.read(base.ctx, m, i, w)) || !ad) continue;
        int64_t row0;
        const int t = tt_lora_target_of(&r->lora, m, i, &row0);
        if (t >= 0) { /* B's rows from row0 are this weight's (GPT-2's c_attn: q, k, v in one adapter) */
            const tt_lora_target *x = &r->lora.targets[t];
            if ((rc = src.read(src.ctx, a, x->a, A)) || (rc = src.read(src.ctx, a, x->b, B))) break;
            tt_lora_merge(w, A, B + row0 * r->lora.rank, m->params[i].shape[0], m->params[i].shape[1], r->lora.rank,
                          r->lora.scale);
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
    if (!r->has_lora) return tt_run_whole_trained(r, gathered, whole);
    /* the adapters whole on rank 0, merged there into the base every rank helps read */
    tt_train_state ag, *ad;
    *whole = NULL;
    memset(gathered, 0, sizeof *gathered);
    if (tt_run_whole_trained(r, &ag, &ad)) return -1;
    tt_err rc = merged_weights(r, ad, gathered);
    if (!rc && ad) *whole = gathered;
    if (ad == &ag) tt_state_free(&ag);
    return rc;
}

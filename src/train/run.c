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
    if (r->q) r->be->queue_free(r->q);
    tt_model_free(r->model);
    tt_moe_balance_free(&r->balance);
    tt_sharding_free(&r->sh);
    memset(r, 0, sizeof *r);
}

tt_err tt_run_whole_weights(tt_run *r, tt_train_state *gathered, tt_train_state **whole)
{
    *whole = NULL;
    memset(gathered, 0, sizeof *gathered);
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

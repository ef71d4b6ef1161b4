/* validate.c — the loss of a run's model on its validation data: the eval
 * graph over the validation batches, summed over every rank of the job. */
#include <math.h>

#include "train/validate.h"

tt_err tt_run_validate(tt_run *r, double *loss_out, long *tokens_out)
{
    tt_loader_reset(r->val_loader);
    double sum = 0;
    long tokens = 0;
    int limit = r->cfg->validation.steps;
    for (int b = 0; limit < 0 || b < limit; b++) {
        int more = tt_loader_next(r->val_loader, r->val_batch);
        if (more < 0) return -1;
        if (!more) break;
        const tt_batch *b = r->val_batch;
        double loss; /* scale 1: the sum of token losses, divided by the count below */
        if (tt_step_set_batch(&r->eval, b->inputs, b->targets, b->positions, b->doc_ids, 1.0f, 0.0f) ||
            tt_exec_run(r->eval.exec) || tt_step_loss(&r->eval, &loss))
            return tt_error_prefix("validation: ");
        sum += loss;
        tokens += (long)r->val_batch->n_scored;
    }
    if (r->world > 1) { /* every rank scored its part of each batch */
        double t[2] = {sum, (double)tokens};
        if (tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, t, 2, TT_F64, TT_REDUCE_SUM, "the validation loss"))
            return tt_error_prefix("validation: ");
        sum = t[0], tokens = (long)t[1];
    }
    *loss_out = tokens ? sum / (double)tokens : NAN;
    *tokens_out = tokens;
    return 0;
}

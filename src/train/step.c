/* step.c — one optimizer step: the global batch's micro-batches, the
 * micro-steps with gradient accumulation, the loss summed over the job (so a
 * NaN on any rank stops them all), the optimizer, the experts' balance. */
#include <math.h>

#include "train/step.h"

/* Debug mode found a NaN or Inf in a node's output: the run's message with
 * the step, and the node the executor named. */
static tt_err nonfinite_error(long step, const char *where)
{
    return tt_error_prefix("step %ld: non-finite values in %s, stopping before the optimizer applies them (lower "
                           "optimizer.lr, or set training.max_norm); the first: ",
                           step, where);
}

tt_step_graph *tt_step_micro_graph(tt_run *r, int a)
{
    return r->train_nosync.g && a < r->accum_steps - 1 ? &r->train_nosync : &r->train;
}

static void hooks_exec(const tt_step_hook *hooks, int n, tt_run *r, long step, int part, tt_exec *e)
{
    for (int i = 0; i < n; i++)
        if (hooks[i].exec) hooks[i].exec(hooks[i].ctx, r, step, part, e);
}

tt_err tt_train_step(tt_run *r, long step, int stop_requested, const tt_step_hook *hooks, int n_hooks,
                     tt_step_result *out)
{
    const int accum = r->accum_steps;
    *out = (tt_step_result){0};
    /* Fetch every micro-batch first: the loss is scaled by the tokens of
     * the whole global batch, so accumulation equals one large batch. */
    int64_t scored = 0;
    for (int a = 0; a < accum; a++) {
        if (tt_loader_next(r->train_loader, r->micro[a]) != 1) return -1;
        scored += r->micro[a]->n_scored;
    }
    out->trained = scored;
    /* the global batch's: every rank scales by it, so the reduced gradient is its mean */
    if (r->world > 1 &&
        tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, &scored, 1, TT_I64, TT_REDUCE_SUM, "the scored tokens"))
        return -1;
    for (int i = 0; i < n_hooks; i++)
        if (hooks[i].begin && hooks[i].begin(hooks[i].ctx, r, step)) return -1;
    double loss = 0, aux = 0;
    for (int a = 0; a < accum; a++) {
        const tt_batch *b = r->micro[a];
        tt_step_graph *mg = tt_step_micro_graph(r, a);
        double l = 0, al = 0;
        out->flops_executed += tt_batch_flops_attention_executed(&r->model->cfg, &r->ext, r->flops_per_token,
                                                                 b->doc_ids, b->B, b->T);
        hooks_exec(hooks, n_hooks, r, step, a, mg->exec);
        /* LoRA's dropout masks: drawn from the seed and the micro-batch's place in the run, so a resume draws the
         * same ones. Micro-batch a of rank r is micro-batch a x ranks + r of one process with the same local batch
         * accumulating ranks times as many (the loader gives it the same windows), so it draws that one's masks:
         * any ranks x accumulation of one local batch size trains the same way. */
        const uint64_t micro = ((uint64_t)step * (uint64_t)accum + (uint64_t)a) * (uint64_t)r->world + (uint64_t)r->rank;
        if (tt_step_set_batch(mg, b->inputs, b->targets, b->positions, b->doc_ids,
                              scored ? 1.0f / (float)scored : 0.0f, 1.0f / (float)(accum * r->world)) ||
            tt_step_set_rng(mg, (uint64_t)r->cfg->training.seed, micro) ||
            tt_exec_run(mg->exec) || tt_step_loss(mg, &l) || tt_step_aux_loss(mg, &al) ||
            tt_moe_balance_add(&r->balance, mg))
            return tt_exec_nonfinite(mg->exec) ? nonfinite_error(step, "the micro-step")
                                               : tt_error_prefix("step %ld: ", step);
        loss += l;
        aux += al;
    }
    for (int i = 0; i < n_hooks; i++)
        if (hooks[i].loss) hooks[i].loss(hooks[i].ctx, r, step, &loss);
    /* the global batch's loss on every rank, so a NaN on any rank stops them all; and a stop request
     * (a signal reaches the ranks at different moments) taken by all at this step */
    int stopping = stop_requested;
    if (r->world > 1) {
        double t[3] = {loss, stopping, aux}; /* aux: each rank's weighed 1 / ranks, so the sum is the mean */
        if (tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, t, 3, TT_F64, TT_REDUCE_SUM, "the loss"))
            return tt_error_prefix("step %ld: ", step);
        loss = t[0], stopping = t[1] > 0, aux = t[2];
    }
    if (!isfinite(loss))
        return tt_errorf("step %ld: loss is %s; stopping before the optimizer applies it (lower optimizer.lr, "
                         "or set training.max_norm)", step, isnan(loss) ? "NaN" : "Inf");
    double lr = r->cfg->optimizer.lr * tt_lr_factor(&r->sched, step), sumsq = 0;
    hooks_exec(hooks, n_hooks, r, step, accum, r->optim.exec);
    if (tt_optim_set_hp(&r->optim, lr, step) || tt_exec_run(r->optim.exec) || tt_optim_sumsq(&r->optim, &sumsq))
        return tt_exec_nonfinite(r->optim.exec) ? nonfinite_error(step, "the optimizer step")
                                                : tt_error_prefix("step %ld: ", step);
    if (r->balance.n) { /* the experts' selection biases move toward the mean load */
        /* (the bias is the base's under LoRA, where nothing moves it: it is read for the log) */
        const tt_param_store ps = r->has_lora ? tt_frozen_store(&r->frozen) : tt_state_store(&r->state, TT_STATE_PARAM);
        if (tt_moe_balance_step(&r->balance, r->model, &ps, r->world > 1 ? r->dist : NULL))
            return tt_error_prefix("step %ld: ", step);
    }
    double gnorm = sqrt(sumsq);
    if (!isfinite(gnorm)) return tt_errorf("step %ld: gradient norm is %s", step, isnan(gnorm) ? "NaN" : "Inf");
    r->step = step;
    out->loss = loss, out->aux = aux, out->grad_norm = gnorm, out->lr = lr, out->stopping = stopping;
    return 0;
}

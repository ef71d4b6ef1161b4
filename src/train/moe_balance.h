/* moe_balance.h — the expert load of a Mixture-of-Experts run, and
 * DeepSeek-V3's auxiliary-loss-free balancing as TorchTitan does it: each
 * MoE layer's tokens per expert, summed over the micro-steps of an optimizer
 * step; after the optimizer step every expert's selection bias moves by
 * coeff * sign(mean - count), centred to zero mean. The bias is a parameter
 * of the model (no gradient, no weight decay: AdamW leaves it), so it is
 * checkpointed with the weights and a resumed run continues bitwise. */
#ifndef TT_MOE_BALANCE_H
#define TT_MOE_BALANCE_H

#include "dist/dist.h"
#include "models/model.h"
#include "train/step_graph.h"

typedef struct {
    int n;            /* MoE layers */
    int E;            /* experts per layer */
    int *layer;       /* (n) the model layer of each */
    int *bias;        /* (n) the parameter index of its bias, -1 when it has none */
    double coeff;     /* the bias step; 0: no balancing */
    double *counts;   /* (n, E) tokens per expert since the last optimizer step */
    /* the last optimizer step's, per MoE layer: max and min tokens per expert over the mean, bias max - min */
    double *load_max, *load_min, *bias_spread;
    /* expert parallelism (ep > 1; this rank at `place` of its expert group holds experts [place E/ep, + E/ep)):
     * the last optimizer step's token rows the rank received for its experts, summed over the layers, and
     * the most any rank received over the mean */
    int ep, place;
    double recv_rows, recv_max_over_mean;
    double *group_counts; /* (n, E) ep > 1: the expert group's counts */
} tt_moe_balance;

/* Nothing to do (n = 0) for a dense model. ep, place: the expert parallel
 * degree (1: none) and this rank's place in its expert group. */
tt_err tt_moe_balance_init(tt_moe_balance *b, const tt_model *m, double coeff, int ep, int place);
/* After a micro-step: add the tokens per expert it routed (sg's MoE layers, in order). */
tt_err tt_moe_balance_add(tt_moe_balance *b, tt_step_graph *sg);
/* After the optimizer step: under expert parallelism the rows each rank
 * received (its expert group's counts for its experts), then the counts
 * summed over the job's data-parallel ranks (d: NULL for one process), the
 * load statistics, then each bias moved (the same on every rank) and written
 * through `params`; the counts start again from zero. Collective: every rank
 * calls it. */
tt_err tt_moe_balance_step(tt_moe_balance *b, const tt_model *m, const tt_param_store *params, tt_dist *d);
void tt_moe_balance_free(tt_moe_balance *b);

#endif

/* moe_balance.c — expert load statistics and the balancing bias update
 * (moe_balance.h). The update runs on the host: E numbers a layer, read and
 * written through the parameter store once an optimizer step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/moe_balance.h"

tt_err tt_moe_balance_init(tt_moe_balance *b, const tt_model *m, double coeff, int ep, int place)
{
    memset(b, 0, sizeof *b);
    b->ep = ep, b->place = place;
    const tt_model_cfg *c = &m->cfg;
    if (c->moe.n_experts <= 0) return 0;
    for (int l = 0; l < c->n_layers; l++) b->n += tt_model_layer_is_moe(c, l);
    b->E = c->moe.n_experts;
    b->coeff = coeff;
    const size_t n = (size_t)b->n, ne = n * (size_t)b->E;
    b->layer = calloc(n, sizeof *b->layer);
    b->bias = calloc(n, sizeof *b->bias);
    b->counts = calloc(ne, sizeof *b->counts);
    b->group_counts = ep > 1 ? calloc(ne, sizeof *b->group_counts) : NULL;
    b->load_max = calloc(n, sizeof(double));
    b->load_min = calloc(n, sizeof(double));
    b->bias_spread = calloc(n, sizeof(double));
    if (!b->layer || !b->bias || !b->counts || !b->load_max || !b->load_min || !b->bias_spread ||
        (ep > 1 && !b->group_counts)) {
        tt_moe_balance_free(b);
        return tt_errorf("out of memory for the expert load of %d MoE layers", (int)n);
    }
    for (int l = 0, i = 0; l < c->n_layers; l++) {
        if (!tt_model_layer_is_moe(c, l)) continue;
        char name[96];
        snprintf(name, sizeof name, "layers.%d.moe.expert_bias", l);
        b->layer[i] = l;
        b->bias[i++] = tt_model_find(m, name);
    }
    return 0;
}

tt_err tt_moe_balance_add(tt_moe_balance *b, tt_step_graph *sg)
{
    if (b->n == 0) return 0;
    if (sg->n_moe != b->n) return tt_errorf("moe: the step graph has %d MoE layers, the model %d", sg->n_moe, b->n);
    int32_t off[TT_MOE_MAX_EXPERTS + 1];
    for (int i = 0; i < b->n; i++) {
        if (tt_exec_read(sg->exec, sg->moe_offsets[i], off, sizeof(int32_t) * ((size_t)b->E + 1)))
            return tt_error_prefix("moe: layer %d's tokens per expert: ", b->layer[i]);
        for (int e = 0; e < b->E; e++) b->counts[(size_t)i * b->E + e] += off[e + 1] - off[e];
    }
    return 0;
}

/* The token rows this rank received for its experts over the step (its
 * expert group's counts of them), before the counts are summed over the job. */
static tt_err received(tt_moe_balance *b, tt_dist *d)
{
    const size_t ne = (size_t)b->n * (size_t)b->E;
    memcpy(b->group_counts, b->counts, ne * sizeof *b->counts);
    if (tt_dist_all_reduce(d, TT_GROUP_EXPERT, b->group_counts, ne, TT_F64, TT_REDUCE_SUM, "the rows each rank receives"))
        return -1;
    const int El = b->E / b->ep;
    b->recv_rows = 0;
    for (int i = 0; i < b->n; i++)
        for (int e = b->place * El; e < (b->place + 1) * El; e++) b->recv_rows += b->group_counts[(size_t)i * b->E + e];
    return 0;
}

tt_err tt_moe_balance_step(tt_moe_balance *b, const tt_model *m, const tt_param_store *params, tt_dist *d)
{
    const int E = b->E;
    const int ep = b->n && d && b->ep > 1;
    if (ep && received(b, d)) return tt_error_prefix("moe: ");
    if (b->n && d && tt_dist_all_reduce(d, TT_GROUP_WORLD, b->counts, (size_t)b->n * (size_t)E, TT_F64, TT_REDUCE_SUM,
                                        "the tokens per expert"))
        return tt_error_prefix("moe: ");
    if (ep) { /* every row a rank sent was received once: the mean over ranks is the job's rows over the world */
        double most = b->recv_rows, rows = 0;
        for (size_t i = 0; i < (size_t)b->n * (size_t)E; i++) rows += b->counts[i];
        if (tt_dist_all_reduce(d, TT_GROUP_WORLD, &most, 1, TT_F64, TT_REDUCE_MAX, "the rows ranks receive"))
            return tt_error_prefix("moe: ");
        const double mean = rows / tt_dist_world(d);
        b->recv_max_over_mean = mean > 0 ? most / mean : 0;
    }
    float bias[TT_MOE_MAX_EXPERTS];
    double delta[TT_MOE_MAX_EXPERTS];
    for (int i = 0; i < b->n; i++) {
        double *cnt = b->counts + (size_t)i * E, total = 0, mx = 0, mn = INFINITY;
        for (int e = 0; e < E; e++) total += cnt[e], mx = fmax(mx, cnt[e]), mn = fmin(mn, cnt[e]);
        const double mean = total / E;
        b->load_max[i] = mean > 0 ? mx / mean : 0;
        b->load_min[i] = mean > 0 ? mn / mean : 0;
        b->bias_spread[i] = 0;
        const int p = b->bias[i];
        if (p >= 0) {
            if (params->read(params->ctx, m, p, bias)) return tt_error_prefix("moe: layer %d's bias: ", b->layer[i]);
            if (b->coeff > 0 && total > 0) {
                /* toward the mean: up for an expert below it, down above it; centred so the biases keep their mean */
                double dmean = 0;
                for (int e = 0; e < E; e++) {
                    delta[e] = b->coeff * (cnt[e] < mean ? 1.0 : cnt[e] > mean ? -1.0 : 0.0);
                    dmean += delta[e] / E;
                }
                for (int e = 0; e < E; e++) bias[e] = (float)(bias[e] + (delta[e] - dmean));
                if (params->write(params->ctx, m, p, bias)) return tt_error_prefix("moe: layer %d's bias: ", b->layer[i]);
            }
            float bmx = bias[0], bmn = bias[0];
            for (int e = 1; e < E; e++) bmx = fmaxf(bmx, bias[e]), bmn = fminf(bmn, bias[e]);
            b->bias_spread[i] = (double)bmx - bmn;
        }
        memset(cnt, 0, sizeof(double) * (size_t)E);
    }
    return 0;
}

void tt_moe_balance_free(tt_moe_balance *b)
{
    free(b->layer);
    free(b->bias);
    free(b->counts);
    free(b->group_counts);
    free(b->load_max);
    free(b->load_min);
    free(b->bias_spread);
    memset(b, 0, sizeof *b);
}

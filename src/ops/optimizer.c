/* optimizer.c — what the optimizer graph is made of: gradient accumulation, the
 * sum of squares of the gradients, the clipping factor, and AdamW. */
#include "ops/ops_internal.h"

void tt_accum(tt_graph *g, tt_value *acc, tt_value *grad)
{
    if (g->failed) return;
    if (!acc || !grad || !same_shape(acc, grad)) {
        tt_graph_fail(g, "gradient accumulation: shapes of '%s' differ", acc ? acc->name : "?");
        return;
    }
    tt_value *in[] = {acc, grad};
    tt_op_node(g, TT_OP_ACCUM, 2, in, 0, NULL, NULL);
}

tt_value *tt_sumsq(tt_graph *g, tt_value *grad, tt_value *prev)
{
    NEED(grad, "sumsq: no input");
    tt_value *y = tt_op_act(g, TT_F32, 1, 1, 0, 0);
    tt_value *in[] = {grad, prev};
    return tt_op_node(g, TT_OP_SUMSQ, prev ? 2 : 1, in, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_clip_coef_of(tt_graph *g, tt_value *sumsq, double max_norm)
{
    NEED(sumsq && tt_value_numel(sumsq) == 1 && sumsq->dtype == TT_F32, "clip: needs the (1) f32 sum of squares");
    tt_value *y = tt_op_act(g, TT_F32, 1, 1, 0, 0);
    tt_clip_attrs at = {max_norm};
    return tt_op_node(g, TT_OP_CLIP_COEF, 1, &sumsq, 1, &y, &at) ? y : NULL;
}

void tt_adamw(tt_graph *g, tt_value *p, tt_value *grad, tt_value *m, tt_value *v, tt_value *clip, tt_value *hp,
              tt_value *decay, tt_value *p16, double beta1, double beta2, double eps, double weight_decay)
{
    if (g->failed) return;
    if (!p || !grad || !m || !v || !clip || !hp || !same_shape(p, grad) || !same_shape(p, m) || !same_shape(p, v) ||
        tt_value_numel(clip) != 1 || clip->dtype != TT_F32 || tt_value_numel(hp) != 2 || hp->dtype != TT_F64) {
        tt_graph_fail(g, "adamw: state of '%s' does not match", p ? p->name : "?");
        return;
    }
    if (decay && (decay->dtype != TT_I64 || decay->ndim != 2 || decay->shape[1] != 2)) {
        tt_graph_fail(g, "adamw: the decay ranges of '%s' must be (S, 2) i64", p->name);
        return;
    }
    /* the copy is an output, not an input written in place: it is bf16 where p is fp32, so the reference
     * backend widens it and rounds it back as it does every bf16 output */
    if (p16 && (p16->dtype != TT_BF16 || p->dtype != TT_F32 || tt_value_numel(p16) != tt_value_numel(p) ||
                p16->role == TT_ROLE_ACT)) {
        tt_graph_fail(g, "adamw: the bf16 copy of '%s' must be a persistent bf16 value of its fp32 weights' size",
                      p->name);
        return;
    }
    tt_adamw_attrs at = {beta1, beta2, eps, weight_decay};
    tt_value *in[] = {p, grad, m, v, clip, hp, decay};
    tt_op_node(g, TT_OP_ADAMW, decay ? 7 : 6, in, p16 ? 1 : 0, p16 ? &p16 : NULL, &at);
}

static double fl_adamw(const tt_node *n) { return 12.0 * numel(n->in[0]); }

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_accum = {.writes_ins = 1, .flops = fl_in0};
const tt_op_def tt_op_def_sumsq = {.flops = fl_in0};
const tt_op_def tt_op_def_adamw = {.writes_ins = 1 | 2 | 4 | 8, .flops = fl_adamw};
const tt_op_def tt_op_def_clip_coef = {.flops = fl_zero};

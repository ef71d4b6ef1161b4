/* loss.c — the fused linear + cross-entropy loss, whose chunk loop makes its
 * input gradients too when it is the loss autodiff starts from. */
#include "ops/ops_internal.h"

tt_value *tt_ce_linear(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale, int ignore_index)
{
    return tt_ce_linear_capped(g, h, w, targets, scale, ignore_index, 0);
}

tt_value *tt_ce_linear_capped(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale,
                              int ignore_index, double softcap)
{
    NEED(h && w && targets && scale && h->ndim == 2 && w->ndim == 2 && cols(h) == cols(w) && meet(h, w) &&
             tt_value_numel(targets) == rows(h) && targets->dtype == TT_I32,
         "cross-entropy: hidden (N, D), head (V, D) and N targets needed");
    NEED(softcap >= 0 && isfinite(softcap), "cross-entropy: the soft-cap must be 0 (none) or a positive finite number");
    tt_value *loss = tt_op_act(g, h->dtype == TT_F64 ? TT_F64 : TT_F32, 1, 1, 0, 0);
    tt_ce_attrs at = {ignore_index, softcap};
    tt_value *in[] = {h, w, targets, scale};
    return tt_op_node(g, TT_OP_CE_LINEAR, 4, in, 1, &loss, &at) ? loss : NULL;
}

static double fl_ce(const tt_node *n)
{
    double f = 2.0 * n_rows(n->in[0]) * n_cols(n->in[0]) * n_rows(n->in[1]);
    return n->n_out == 3 ? 3.0 * f : f; /* with its gradients */
}

static void bw_ce(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* The loss's upstream gradient is the seed (1), so the forward chunk loop
     * produces dh and dW itself: add those outputs to the forward node. */
    if (gout[0] != &tt_loss_seed) {
        tt_graph_fail(g, "cross-entropy: only differentiable as the loss itself");
        return;
    }
    /* a frozen head (LoRA) gets no dW: the op then makes dh alone */
    const int dw = trains(n->in[1]);
    if (n->n_out == 1 &&
        (tt_node_add_output(g, n, tt_value_new(g, TT_ROLE_ACT, n->in[0]->dtype, n->in[0]->ndim, n->in[0]->shape)) ||
         (dw && tt_node_add_output(g, n, tt_value_new(g, TT_ROLE_ACT, n->in[1]->dtype, n->in[1]->ndim, n->in[1]->shape)))))
        return;
    gin[0] = n->out[1];
    gin[1] = n->n_out > 2 ? n->out[2] : NULL;
}

/* the op's facts: flags, accumulable outputs, FLOPs, backward rule */
const tt_op_def tt_op_def_ce_linear = {.flags = TT_OPF_LOSS, .acc_outs = 4, .flops = fl_ce, .backward = bw_ce};

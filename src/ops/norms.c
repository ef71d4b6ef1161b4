/* norms.c — RMSNorm (whole rows or groups of features), LayerNorm, and the
 * residual add fused with the RMSNorm after it, each with its backward op. */
#include "ops/ops_internal.h"

tt_value *tt_rmsnorm_groups(tt_graph *g, tt_value *x, tt_value *w, double eps, int group)
{
    NEED(x && w && x->ndim == 2 && w->ndim == 1 && group > 0 && w->shape[0] == group && cols(x) % group == 0 &&
             meet(x, w),
         "rmsnorm: weight of %lld for rows of %lld", w ? (long long)w->shape[0] : -1LL, x ? (long long)cols(x) : -1LL);
    tt_value *out[] = {tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0),
                       tt_op_act(g, stat_dtype(x->dtype), 1, tt_value_numel(x) / group, 0, 0)};
    tt_norm_attrs at = {group, eps};
    tt_value *in[] = {x, w};
    return tt_op_node(g, TT_OP_RMSNORM, 2, in, 2, out, &at) ? out[0] : NULL;
}

tt_value *tt_rmsnorm(tt_graph *g, tt_value *x, tt_value *w, double eps)
{
    NEED(x && x->ndim == 2, "rmsnorm: needs a 2-D input");
    return tt_rmsnorm_groups(g, x, w, eps, (int)cols(x));
}

tt_value *tt_layernorm(tt_graph *g, tt_value *x, tt_value *w, tt_value *b, double eps)
{
    NEED(x && w && b && x->ndim == 2 && w->shape[0] == x->shape[1] && b->shape[0] == x->shape[1] && meet(x, w) &&
             meet(x, b),
         "layernorm: weight/bias do not match rows");
    tt_dtype sd = stat_dtype(x->dtype);
    tt_value *out[] = {tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0), tt_op_act(g, sd, 1, x->shape[0], 0, 0),
                       tt_op_act(g, sd, 1, x->shape[0], 0, 0)};
    tt_norm_attrs at = {(int)x->shape[1], eps};
    tt_value *in[] = {x, w, b};
    return tt_op_node(g, TT_OP_LAYERNORM, 3, in, 3, out, &at) ? out[0] : NULL;
}

tt_value *tt_add_rmsnorm(tt_graph *g, tt_value *x, tt_value *d, tt_value *w, double eps, tt_value **y_out)
{
    NEED(x && d && w && same_shape(x, d) && x->dtype == d->dtype && x->ndim == 2 && w->ndim == 1 &&
             w->shape[0] == cols(x) && meet(x, w),
         "add + rmsnorm: shapes differ");
    tt_value *out[] = {tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0), tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0),
                       tt_op_act(g, stat_dtype(x->dtype), 1, x->shape[0], 0, 0)};
    tt_norm_attrs at = {(int)cols(x), eps};
    tt_value *in[] = {x, d, w};
    if (!tt_op_node(g, TT_OP_ADD_RMSNORM, 3, in, 3, out, &at)) return NULL;
    if (y_out) *y_out = out[0];
    return out[1];
}

static double fl_norm(const tt_node *n) { return 4.0 * numel(n->in[0]); }

static double fl_add_norm(const tt_node *n) { return 5.0 * numel(n->in[0]); }

static void bw_rmsnorm(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], n->in[1], n->out[1], gout[0]};
    tt_value *like[] = {n->in[0], n->in[1]};
    tt_op_emitn(g, TT_OP_RMSNORM_BWD, 4, in, 2, like, gin, n->attrs);
}

static void bw_layernorm(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], n->in[1], n->out[1], n->out[2], gout[0]};
    tt_value *like[] = {n->in[0], n->in[1], n->in[2]};
    tt_op_emitn(g, TT_OP_LAYERNORM_BWD, 5, in, 3, like, gin, n->attrs);
}

static void bw_add_rmsnorm(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* y = x + d feeds the norm and whatever reads y: its gradient is the
     * norm's dx plus gout[0], summed inside rmsnorm_bwd (no separate add) */
    if (gout[1]) {
        tt_value *in[] = {n->out[0], n->in[2], n->out[2], gout[1], gout[0]};
        tt_value *like[] = {n->out[0], n->in[2]}, *g2[2] = {0};
        tt_op_emitn(g, TT_OP_RMSNORM_BWD, gout[0] ? 5 : 4, in, 2, like, g2, n->attrs);
        gin[0] = gin[1] = g2[0];
        gin[2] = g2[1];
    } else {
        gin[0] = gin[1] = gout[0];
    }
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_rmsnorm = {.flags = TT_OPF_PURE, .flops = fl_norm, .backward = bw_rmsnorm};
const tt_op_def tt_op_def_rmsnorm_bwd = {.flops = fl_norm};
const tt_op_def tt_op_def_layernorm = {.flags = TT_OPF_PURE, .flops = fl_norm, .backward = bw_layernorm};
const tt_op_def tt_op_def_layernorm_bwd = {.flops = fl_norm};
const tt_op_def tt_op_def_add_rmsnorm = {.flags = TT_OPF_PURE, .flops = fl_add_norm, .backward = bw_add_rmsnorm};

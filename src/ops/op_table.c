/* op_table.c — per-op FLOP counts and backward rules: the op table. A coarse
 * op's backward is its own backward op, fed what the forward saved. */
#include <stdio.h>

#include "ops/ops_internal.h"

static double n_rows(const tt_value *v) { return v->ndim == 1 ? 1.0 : (double)v->shape[0]; }
static double n_cols(const tt_value *v) { return (double)v->shape[v->ndim - 1]; }
static double numel(const tt_value *v) { return (double)tt_value_numel(v); }

/* ---- FLOPs ---------------------------------------------------------------- */
static double fl_zero(const tt_node *n) { (void)n; return 0; }
static double fl_matmul(const tt_node *n)
{
    double K = TT_ATTRS(n, tt_matmul_attrs)->ta ? (double)n->in[0]->shape[0] : (double)n->in[0]->shape[1];
    return 2.0 * numel(n->out[0]) * K;
}
static double fl_out(const tt_node *n) { return numel(n->out[0]); }
static double fl_norm(const tt_node *n) { return 4.0 * numel(n->in[0]); }
static double fl_attn(const tt_node *n)
{
    /* causal: QK^T and PV over half the T x T square */
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    return 2.0 * 2.0 * a->B * a->H * (double)a->T * a->T * a->hd * 0.5;
}
static double fl_attn_bwd(const tt_node *n) { return 2.0 * fl_attn(n); }
static double fl_attn_kv(const tt_node *n)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    return 4.0 * a->B * a->H * (double)a->T * a->hd * a->Tmax * 0.5;
}
static double fl_ce(const tt_node *n)
{
    double f = 2.0 * n_rows(n->in[0]) * n_cols(n->in[0]) * n_rows(n->in[1]);
    return n->n_out == 3 ? 3.0 * f : f; /* with its gradients */
}
static double fl_in0(const tt_node *n) { return numel(n->in[0]); }
static double fl_add_norm(const tt_node *n) { return 5.0 * numel(n->in[0]); }
static double fl_adamw(const tt_node *n) { return 12.0 * numel(n->in[0]); }
/* every row times its expert's matrix: the FLOPs of the active experts only */
static double fl_grouped(const tt_node *n)
{
    return 2.0 * numel(n->out[0]) * (double)n->in[0]->shape[1];
}
static double fl_wgrad(const tt_node *n) { return 2.0 * numel(n->out[0]) / n->out[0]->shape[0] * n_rows(n->in[0]); }

/* ---- backward rules ---------------------------------------------------- */
typedef void bwd_fn(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin);

static void bw_embedding(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0]};
    gin[1] = tt_op_emit1(g, TT_OP_EMBEDDING_BWD, 2, in, n->in[1], NULL);
}

static void bw_matmul(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* C = op(A) op(B).  dA = dC op(B)^T, dB = op(A)^T dC, written back in A's and B's storage layouts. */
    tt_value *A = n->in[0], *B = n->in[1], *dC = gout[0];
    const int ta = TT_ATTRS(n, tt_matmul_attrs)->ta, tb = TT_ATTRS(n, tt_matmul_attrs)->tb;
    /* each gradient has its input's dtype: bf16 for activations, fp32 for weights */
    gin[0] = ta ? tt_matmul_to(g, B, dC, tb, 1, A->dtype) : tt_matmul_to(g, dC, B, 0, !tb, A->dtype);
    gin[1] = tb ? tt_matmul_to(g, dC, A, 1, ta, B->dtype) : tt_matmul_to(g, A, dC, !ta, 0, B->dtype);
}

static void bw_bias_add(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = gout[0];
    gin[1] = tt_op_emit1(g, TT_OP_BIAS_GRAD, 1, gout, n->in[1], NULL);
}

static void bw_add(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    (void)g;
    (void)n;
    gin[0] = gin[1] = gout[0];
}

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

static void bw_rope(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* a rotation's transpose is the rotation by the opposite angle */
    tt_rope_attrs a = *TT_ATTRS(n, tt_rope_attrs);
    a.inverse = !a.inverse;
    tt_value *in[] = {gout[0], n->in[1], n->in[2]};
    gin[0] = tt_op_emit1(g, TT_OP_ROPE, 3, in, n->in[0], &a);
}

static void bw_attention(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], n->in[1], n->in[2], n->in[3], n->out[0], n->out[1], gout[0]};
    tt_value *like[] = {n->in[0], n->in[1], n->in[2]};
    tt_op_emitn(g, TT_OP_ATTENTION_BWD, 7, in, 3, like, gin, n->attrs);
}

static void bw_swiglu(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    if (tt_swiglu_is_fused(n)) { /* gate and up in one value: one gradient of its shape (over the same rows) */
        tt_value *in[] = {n->in[0], gout[0], n->n_in > 1 ? n->in[1] : NULL};
        gin[0] = tt_op_emit1(g, TT_OP_SWIGLU_BWD, n->n_in > 1 ? 3 : 2, in, n->in[0], NULL);
        return;
    }
    tt_value *in[] = {n->in[0], n->in[1], gout[0]};
    tt_value *like[] = {n->in[0], n->in[1]};
    tt_op_emitn(g, TT_OP_SWIGLU_BWD, 3, in, 2, like, gin, NULL);
}

static void bw_attention_qkv(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* in: qkv, doc, o, lse, do [, pos, inv_freq] */
    tt_value *in[] = {n->in[0], n->in[1], n->out[0], n->out[1], gout[0], n->n_in > 2 ? n->in[2] : NULL,
                      n->n_in > 2 ? n->in[3] : NULL};
    gin[0] = tt_op_emit1(g, TT_OP_ATTENTION_QKV_BWD, n->n_in > 2 ? 7 : 5, in, n->in[0], n->attrs);
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

static void bw_gelu(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0]};
    gin[0] = tt_op_emit1(g, TT_OP_GELU_BWD, 2, in, n->in[0], NULL);
}

static void bw_ce(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* The loss's upstream gradient is the seed (1), so the forward chunk loop
     * produces dh and dW itself: add those outputs to the forward node. */
    if (gout[0] != &tt_loss_seed) {
        tt_graph_fail(g, "cross-entropy: only differentiable as the loss itself");
        return;
    }
    if (n->n_out == 1 &&
        (tt_node_add_output(g, n, tt_value_new(g, TT_ROLE_ACT, n->in[0]->dtype, n->in[0]->ndim, n->in[0]->shape)) ||
         tt_node_add_output(g, n, tt_value_new(g, TT_ROLE_ACT, n->in[1]->dtype, n->in[1]->ndim, n->in[1]->shape))))
        return;
    gin[0] = n->out[1];
    gin[1] = n->out[2];
}

/* ---- per-head column moves: each is another's transpose ----------------------- */
static void bw_head_slice(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = tt_head_place(g, gout[0], TT_ATTRS(n, tt_head_attrs));
}

static void bw_head_place(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    gin[0] = tt_head_slice(g, gout[0], a->H, a->w, a->c0, a->cw, a->sum_heads, a->deinterleave);
}

static void bw_head_concat(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    const int w = a->wa + a->wb;
    gin[0] = tt_head_slice(g, gout[0], a->H, w, 0, a->wa, 0, 0);
    gin[1] = tt_head_slice(g, gout[0], a->H, w, a->wa, a->wb, a->bcast, 0); /* a shared b: the heads' sum */
}

/* ---- Mixture-of-Experts ---------------------------------------------------- */

static void bw_moe_route(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    if (!gout[0]) {
        tt_graph_fail(g, "moe_route: differentiated without its gate weights");
        return;
    }
    /* the scores' own gradient (an auxiliary loss reads them) joins the weights' before the softmax or sigmoid */
    tt_value *in[] = {n->out[2], n->out[1], gout[0], gout[2]};
    gin[0] = tt_op_emit1(g, TT_OP_MOE_ROUTE_BWD, gout[2] ? 4 : 3, in, n->in[0], n->attrs);
}

static void bw_moe_aux(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* as ce_linear: the loss node computes its input's gradient itself */
    if (gout[0] != &tt_loss_seed) {
        tt_graph_fail(g, "moe_aux_loss: only differentiable as a loss itself");
        return;
    }
    if (n->n_out == 1 && tt_node_add_output(g, n, tt_value_new(g, TT_ROLE_ACT, n->in[0]->dtype, 2, n->in[0]->shape))) return;
    gin[0] = n->out[1];
}

/* permute and combine are each other's transpose: the rows' gradient of one
 * is the other applied to the upstream gradient, and the gate weights'
 * gradient a dot product of the rows a weight multiplied */
static void bw_moe_reorder(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const int k = TT_ATTRS(n, tt_moe_attrs)->k, permute = n->op == TT_OP_MOE_PERMUTE;
    tt_value *w = n->n_in > 3 ? n->in[3] : NULL;
    gin[0] = permute ? tt_moe_combine(g, gout[0], n->in[1], n->in[2], w, k)
                     : tt_moe_permute(g, gout[0], n->in[1], n->in[2], w, k);
    if (w) gin[3] = permute ? tt_moe_rowdot(g, n->in[0], gout[0], n->in[2], k, w->dtype)
                            : tt_moe_rowdot(g, gout[0], n->in[0], n->in[2], k, w->dtype);
}

static void bw_grouped_matmul(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *x = n->in[0], *w = n->in[1], *off = n->in[2];
    const int tb = TT_ATTRS(n, tt_matmul_attrs)->tb, E = (int)w->shape[0];
    gin[0] = tt_grouped_matmul(g, gout[0], w, off, !tb);
    gin[1] = tb ? tt_grouped_matmul_wgrad(g, gout[0], x, off, E, w->dtype)
                : tt_grouped_matmul_wgrad(g, x, gout[0], off, E, w->dtype);
}

/* idx and inv are each other's partial inverse: the gather's transpose is the gather by inv */
static void bw_row_gather(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = tt_row_gather(g, gout[0], n->in[2], n->in[1]);
}

/* ---- collectives ------------------------------------------------------------- */

/* the wait only makes its start's output valid: the gradient passes to it (the inputs it keeps alive get none) */
static void bw_comm_wait(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    (void)g;
    (void)n;
    gin[0] = gout[0];
}

/* An exchange's transpose is the reverse exchange: each rank sends back what it received, from where it landed,
 * to where it came from. Elements of x that no rank received get a zero gradient (the receive buffer's zeros). */
static void bw_all_to_allv(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const tt_comm_attrs *a = TT_ATTRS(n, tt_comm_attrs);
    char what[sizeof a->what];
    snprintf(what, sizeof what, "%.42s grad", a->what);
    tt_value *y = tt_all_to_allv(g, gout[0], n->in[3], n->in[4], n->in[1], n->in[2], tt_value_numel(n->in[0]),
                                 a->group, what);
    gin[0] = y ? tt_comm_wait(g, y) : NULL;
}

/* Flags: P pure (recomputable), K kept by selective checkpointing, C a collective. */
#define P TT_OPF_PURE
#define K TT_OPF_KEEP_SELECTIVE
#define C TT_OPF_COMM
#define A(type) sizeof(type)

/*                                  name                 flags   acc  writes  -inf  attrs                  flops        backward */
const tt_op_def tt_ops[TT_OP_COUNT] = {
    [TT_OP_EMBEDDING] =           {"embedding",          P | K,  0,   0,      0,    0,                     fl_zero,     bw_embedding},
    [TT_OP_EMBEDDING_BWD] =       {"embedding_bwd",      0,      1,   0,      0,    0,                     fl_zero,     NULL},
    [TT_OP_MATMUL] =              {"matmul",             P | K,  1,   0,      0,    A(tt_matmul_attrs),    fl_matmul,   bw_matmul},
    [TT_OP_BIAS_ADD] =            {"bias_add",           P,      0,   0,      0,    0,                     fl_out,      bw_bias_add},
    [TT_OP_BIAS_GRAD] =           {"bias_grad",          0,      0,   0,      0,    0,                     fl_in0,      NULL},
    [TT_OP_ADD] =                 {"add",                P,      0,   0,      0,    0,                     fl_out,      bw_add},
    [TT_OP_RMSNORM] =             {"rmsnorm",            P,      0,   0,      0,    A(tt_norm_attrs),      fl_norm,     bw_rmsnorm},
    [TT_OP_RMSNORM_BWD] =         {"rmsnorm_bwd",        0,      0,   0,      0,    A(tt_norm_attrs),      fl_norm,     NULL},
    [TT_OP_LAYERNORM] =           {"layernorm",          P,      0,   0,      0,    A(tt_norm_attrs),      fl_norm,     bw_layernorm},
    [TT_OP_LAYERNORM_BWD] =       {"layernorm_bwd",      0,      0,   0,      0,    A(tt_norm_attrs),      fl_norm,     NULL},
    [TT_OP_ROPE] =                {"rope",               P,      0,   0,      0,    A(tt_rope_attrs),      fl_out,      bw_rope},
    [TT_OP_ATTENTION] =           {"attention",          P | K,  0,   0,      2,    A(tt_attn_attrs),      fl_attn,     bw_attention},
    [TT_OP_ATTENTION_BWD] =       {"attention_bwd",      0,      0,   0,      0,    A(tt_attn_attrs),      fl_attn_bwd, NULL},
    [TT_OP_ATTENTION_KV] =        {"attention_kv",       0,      0,   8 | 16, 2,    A(tt_attn_attrs),      fl_attn_kv,  NULL},
    [TT_OP_SWIGLU] =              {"swiglu",             P,      0,   0,      0,    0,                     fl_out,      bw_swiglu},
    [TT_OP_SWIGLU_BWD] =          {"swiglu_bwd",         0,      0,   0,      0,    0,                     fl_in0,      NULL},
    [TT_OP_GELU] =                {"gelu",               P,      0,   0,      0,    0,                     fl_out,      bw_gelu},
    [TT_OP_GELU_BWD] =            {"gelu_bwd",           0,      0,   0,      0,    0,                     fl_in0,      NULL},
    [TT_OP_CE_LINEAR] =           {"ce_linear",          TT_OPF_LOSS, 4, 0,   0,    A(tt_ce_attrs),        fl_ce,       bw_ce},
    [TT_OP_ACCUM] =               {"accum",              0,      0,   1,      0,    0,                     fl_in0,      NULL},
    [TT_OP_SUMSQ] =               {"sumsq",              0,      0,   0,      0,    0,                     fl_in0,      NULL},
    [TT_OP_ATTENTION_QKV] =       {"attention_qkv",      P | K,  0,   0,      2,    A(tt_attn_attrs),      fl_attn,     bw_attention_qkv},
    [TT_OP_ATTENTION_QKV_BWD] =   {"attention_qkv_bwd",  0,      0,   0,      0,    A(tt_attn_attrs),      fl_attn_bwd, NULL},
    [TT_OP_ADD_RMSNORM] =         {"add_rmsnorm",        P,      0,   0,      0,    A(tt_norm_attrs),      fl_add_norm, bw_add_rmsnorm},
    [TT_OP_ADAMW] =               {"adamw",              0,      0,   1 | 2 | 4 | 8, 0, A(tt_adamw_attrs), fl_adamw,    NULL},
    [TT_OP_CLIP_COEF] =           {"clip_coef",          0,      0,   0,      0,    A(tt_clip_attrs),      fl_zero,     NULL},
    [TT_OP_CAST] =                {"cast",               P,      0,   0,      0,    0,                     fl_zero,     NULL},
    [TT_OP_ZERO] =                {"zero",               0,      0,   0,      0,    0,                     fl_zero,     NULL},
    [TT_OP_HEAD_SLICE] =          {"head_slice",         P,      0,   0,      0,    A(tt_head_attrs),      fl_zero,     bw_head_slice},
    [TT_OP_HEAD_PLACE] =          {"head_place",         P,      0,   0,      0,    A(tt_head_attrs),      fl_zero,     bw_head_place},
    [TT_OP_HEAD_CONCAT] =         {"head_concat",        P,      0,   0,      0,    A(tt_head_attrs),      fl_zero,     bw_head_concat},
    [TT_OP_MOE_ROUTE] =           {"moe_route",          P | K,  0,   0,      0,    A(tt_moe_attrs),       fl_in0,      bw_moe_route},
    [TT_OP_MOE_ROUTE_BWD] =       {"moe_route_bwd",      0,      0,   0,      0,    A(tt_moe_attrs),       fl_in0,      NULL},
    [TT_OP_MOE_AUX_LOSS] =        {"moe_aux_loss",       TT_OPF_LOSS, 0, 0,   0,    A(tt_moe_aux_attrs),   fl_in0,      bw_moe_aux},
    [TT_OP_MOE_SORT] =            {"moe_sort",           P | K,  0,   0,      0,    A(tt_moe_attrs),       fl_zero,     NULL},
    [TT_OP_MOE_PERMUTE] =         {"moe_permute",        P,      0,   0,      0,    A(tt_moe_attrs),       fl_out,      bw_moe_reorder},
    [TT_OP_MOE_COMBINE] =         {"moe_combine",        P,      0,   0,      0,    A(tt_moe_attrs),       fl_in0,      bw_moe_reorder},
    [TT_OP_MOE_ROWDOT] =          {"moe_rowdot",         0,      0,   0,      0,    A(tt_moe_attrs),       fl_zero,     NULL},
    [TT_OP_GROUPED_MATMUL] =      {"grouped_matmul",     P | K,  0,   0,      0,    A(tt_matmul_attrs),    fl_grouped,  bw_grouped_matmul},
    [TT_OP_GROUPED_MATMUL_WGRAD] = {"grouped_matmul_wgrad", 0,   1,   0,      0,    0,                     fl_wgrad,    NULL},
    [TT_OP_ROW_GATHER] =          {"row_gather",         P,      0,   0,      0,    0,                     fl_zero,     bw_row_gather},
    [TT_OP_MOE_EP_PLAN] =         {"moe_ep_plan",        P | K,  0,   0,      0,    A(tt_moe_ep_attrs),    fl_zero,     NULL},
    [TT_OP_ALL_GATHER] =          {"all_gather",         C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     NULL},
    [TT_OP_REDUCE_SCATTER] =      {"reduce_scatter",     C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     NULL},
    [TT_OP_ALL_REDUCE] =          {"all_reduce",         C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     NULL},
    [TT_OP_BROADCAST] =           {"broadcast",          C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     NULL},
    [TT_OP_ALL_TO_ALLV] =         {"all_to_allv",        C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     bw_all_to_allv},
    [TT_OP_COMM_WAIT] =           {"comm_wait",          C,      0,   0,      0,    A(tt_comm_attrs),      fl_zero,     bw_comm_wait},
};
#undef P
#undef K
#undef C
#undef A

const char *tt_op_name(int op) { return op >= 0 && op < TT_OP_COUNT ? tt_ops[op].name : "?"; }

/* matmul.c — matmul (either operand transposed, the output dtype named or
 * implied), linear, and the bias add with its gradient. */
#include "ops/ops_internal.h"

tt_value *tt_matmul_to(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb, tt_dtype out)
{
    NEED(a && b && a->ndim == 2 && b->ndim == 2 && meet(a, b) &&
             (a->dtype == TT_F64 ? out == TT_F64 : out == TT_F32 || out == TT_BF16),
         "matmul: needs two 2-D values of one float dtype (or fp32 and bf16)");
    int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
    int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
    NEED(K == Kb, "matmul: inner dimensions %lld and %lld differ", (long long)K, (long long)Kb);
    tt_value *y = tt_op_act(g, out, 2, M, N, 0);
    tt_matmul_attrs at = {ta, tb};
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_MATMUL, 2, in, 1, &y, &at) ? y : NULL;
}

tt_value *tt_matmul(tt_graph *g, tt_value *a, tt_value *b, int ta, int tb)
{
    NEED(a && b, "matmul: missing operand");
    return tt_matmul_to(g, a, b, ta, tb, a->dtype == TT_BF16 || b->dtype == TT_BF16 ? TT_BF16 : a->dtype);
}

tt_value *tt_bias_add(tt_graph *g, tt_value *y, tt_value *b)
{
    NEED(y && b && y->ndim == 2 && b->ndim == 1 && b->shape[0] == cols(y) && meet(y, b),
         "linear: bias has %lld entries, output has %lld columns", b ? (long long)b->shape[0] : -1LL,
         y ? (long long)cols(y) : -1LL);
    tt_value *z = tt_op_act(g, y->dtype, 2, y->shape[0], y->shape[1], 0);
    tt_value *in[] = {y, b};
    return tt_op_node(g, TT_OP_BIAS_ADD, 2, in, 1, &z, NULL) ? z : NULL;
}

tt_value *tt_linear(tt_graph *g, tt_value *x, tt_value *w, tt_value *b)
{
    tt_value *y = tt_matmul(g, x, w, 0, 1);
    return y && b ? tt_bias_add(g, y, b) : y;
}

static double fl_matmul(const tt_node *n)
{
    double K = TT_ATTRS(n, tt_matmul_attrs)->ta ? (double)n->in[0]->shape[0] : (double)n->in[0]->shape[1];
    return 2.0 * numel(n->out[0]) * K;
}

static void bw_matmul(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* C = op(A) op(B).  dA = dC op(B)^T, dB = op(A)^T dC, written back in A's and B's storage layouts. */
    tt_value *A = n->in[0], *B = n->in[1], *dC = gout[0];
    const int ta = TT_ATTRS(n, tt_matmul_attrs)->ta, tb = TT_ATTRS(n, tt_matmul_attrs)->tb;
    /* each gradient has its input's dtype: bf16 for activations, fp32 for weights */
    gin[0] = ta ? tt_matmul_to(g, B, dC, tb, 1, A->dtype) : tt_matmul_to(g, dC, B, 0, !tb, A->dtype);
    if (trains(B)) gin[1] = tb ? tt_matmul_to(g, dC, A, 1, ta, B->dtype) : tt_matmul_to(g, A, dC, !ta, 0, B->dtype);
}

static void bw_bias_add(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = gout[0];
    if (trains(n->in[1])) gin[1] = tt_op_emit1(g, TT_OP_BIAS_GRAD, 1, gout, n->in[1], NULL);
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_matmul = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .acc_outs = 1,
    .flops = fl_matmul,
    .backward = bw_matmul,
};
const tt_op_def tt_op_def_bias_add = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_bias_add};
const tt_op_def tt_op_def_bias_grad = {.flops = fl_in0};

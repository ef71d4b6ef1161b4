/* moe_ops.c — the Mixture-of-Experts op builders: routing, the sort of
 * (token, slot) assignments by expert, the permutation of rows into expert
 * order and the combine back, and the grouped matmul of all experts. Their
 * backward rules are in op_table.c with every other op's. */
#include <string.h>

#include "ops/ops_internal.h"


tt_err tt_moe_check_offsets(const int32_t *off, int E, int64_t M)
{
    if (off[0] != 0 || off[E] != M) return tt_errorf("grouped_matmul: expert rows span [%d, %d), not [0, %lld)", off[0], off[E], (long long)M);
    for (int e = 0; e < E; e++)
        if (off[e + 1] < off[e]) return tt_errorf("grouped_matmul: expert %d has rows [%d, %d)", e, off[e], off[e + 1]);
    return 0;
}

tt_value *tt_moe_route(tt_graph *g, tt_value *logits, tt_value *bias, const tt_moe_attrs *a, tt_value **expert,
                       tt_value **scores)
{
    NEED(logits && logits->ndim == 2 && (logits->dtype == TT_F32 || logits->dtype == TT_F64),
         "moe_route: needs fp32 (N, E) router logits");
    const int64_t N = logits->shape[0], E = logits->shape[1];
    NEED(E <= TT_MOE_MAX_EXPERTS, "moe_route: %lld experts (at most %d)", (long long)E, TT_MOE_MAX_EXPERTS);
    NEED(a->E == E && a->k >= 1 && a->k <= E, "moe_route: top-%d of %lld experts (attrs say %d)", a->k, (long long)E,
         a->E);
    NEED(a->n_group <= 1 || (E % a->n_group == 0 && a->topk_group >= 1 && a->topk_group <= a->n_group &&
                             (int64_t)a->topk_group * (E / a->n_group) >= a->k),
         "moe_route: %d groups of %lld experts cannot give top-%d from %d groups", a->n_group,
         a->n_group > 0 ? (long long)(E / a->n_group) : 0LL, a->k, a->topk_group);
    NEED(!bias || (bias->ndim == 1 && bias->shape[0] == E && tt_op_is_float(bias->dtype)),
         "moe_route: the balancing bias must have one entry per expert (%lld)", (long long)E);
    tt_value *out[] = {tt_op_act(g, logits->dtype, 2, N, a->k, 0), tt_op_act(g, TT_I32, 2, N, a->k, 0),
                       tt_op_act(g, logits->dtype, 2, N, E, 0)};
    tt_value *in[] = {logits, bias};
    if (!tt_op_node(g, TT_OP_MOE_ROUTE, bias ? 2 : 1, in, 3, out, a)) return NULL;
    if (expert) *expert = out[1];
    if (scores) *scores = out[2];
    return out[0];
}

tt_err tt_moe_sort(tt_graph *g, tt_value *expert, int E, tt_value **perm, tt_value **pos, tt_value **offsets)
{
    if (g->failed) return -1;
    if (!expert || expert->dtype != TT_I32 || expert->ndim != 2 || E < 1) {
        tt_graph_fail(g, "moe_sort: needs (N, k) i32 expert ids and at least one expert");
        return -1;
    }
    const int64_t M = tt_value_numel(expert);
    tt_moe_attrs a = {.E = E, .k = (int)expert->shape[1]};
    tt_value *out[] = {tt_op_act(g, TT_I32, 1, M, 0, 0), tt_op_act(g, TT_I32, 1, M, 0, 0), tt_op_act(g, TT_I32, 1, (int64_t)E + 1, 0, 0)};
    if (!tt_op_node(g, TT_OP_MOE_SORT, 1, &expert, 3, out, &a)) return -1;
    *perm = out[0], *pos = out[1], *offsets = out[2];
    return 0;
}

/* permute (x (N,D) -> (M,D)) and combine ((M,D) -> (N,D)) share their checks */
static tt_value *reorder(tt_graph *g, int op, tt_value *x, tt_value *perm, tt_value *pos, tt_value *weight, int k)
{
    const char *name = tt_op_name(op);
    NEED(x && perm && pos && x->ndim == 2 && tt_op_is_float(x->dtype) && perm->dtype == TT_I32 && pos->dtype == TT_I32 &&
             k >= 1 && tt_value_numel(perm) == tt_value_numel(pos),
         "%s: needs 2-D rows and i32 perm and pos", name);
    const int64_t M = tt_value_numel(perm), N = op == TT_OP_MOE_PERMUTE ? x->shape[0] : M / k;
    NEED(M == N * k && (op == TT_OP_MOE_PERMUTE ? x->shape[0] == N : x->shape[0] == M),
         "%s: %lld rows do not make %lld assignments of %d slots", name, (long long)x->shape[0], (long long)M, k);
    NEED(!weight || (weight->ndim == 2 && weight->shape[0] == N && weight->shape[1] == k && tt_op_is_float(weight->dtype)),
         "%s: the gate weights must be (%lld, %d)", name, (long long)N, k);
    tt_moe_attrs a = {.k = k};
    tt_value *y = tt_op_act(g, x->dtype, 2, op == TT_OP_MOE_PERMUTE ? M : N, x->shape[1], 0);
    tt_value *in[] = {x, perm, pos, weight};
    return tt_op_node(g, op, weight ? 4 : 3, in, 1, &y, &a) ? y : NULL;
}

tt_value *tt_moe_permute(tt_graph *g, tt_value *x, tt_value *perm, tt_value *pos, tt_value *weight, int k)
{
    return reorder(g, TT_OP_MOE_PERMUTE, x, perm, pos, weight, k);
}

tt_value *tt_moe_combine(tt_graph *g, tt_value *ys, tt_value *perm, tt_value *pos, tt_value *weight, int k)
{
    return reorder(g, TT_OP_MOE_COMBINE, ys, perm, pos, weight, k);
}

tt_value *tt_moe_rowdot(tt_graph *g, tt_value *a, tt_value *b, tt_value *pos, int k, tt_dtype out)
{
    NEED(a && b && pos && a->ndim == 2 && b->ndim == 2 && a->shape[1] == b->shape[1] && k >= 1 &&
             b->shape[0] == a->shape[0] * k && tt_value_numel(pos) == b->shape[0] && pos->dtype == TT_I32,
         "moe_rowdot: needs (N, D) and (N*k, D) rows");
    tt_moe_attrs at = {.k = k};
    tt_value *y = tt_op_act(g, out, 2, a->shape[0], k, 0);
    tt_value *in[] = {a, b, pos};
    return tt_op_node(g, TT_OP_MOE_ROWDOT, 3, in, 1, &y, &at) ? y : NULL;
}

tt_value *tt_moe_aux_loss(tt_graph *g, tt_value *in, tt_value *expert, tt_value *scale, const tt_moe_aux_attrs *a)
{
    const int z = a->kind == TT_AUX_Z;
    NEED(in && scale && in->ndim == 2 && (in->dtype == TT_F32 || in->dtype == TT_F64) && in->shape[1] == a->E &&
             (z || (expert && expert->dtype == TT_I32 && expert->ndim == 2 && expert->shape[0] == in->shape[0] &&
                    expert->shape[1] == a->k)) && tt_value_numel(scale) == 1,
         "moe_aux_loss: needs fp32 (N, %d) %s%s and a scale", a->E, z ? "logits" : "scores", z ? "" : ", (N, k) experts");
    NEED(a->kind != TT_AUX_SEQUENCE || (int64_t)a->B * a->T == in->shape[0],
         "moe_aux_loss: %lld tokens are not %d sequences of %d", (long long)in->shape[0], a->B, a->T);
    tt_value *y = tt_op_act(g, in->dtype == TT_F64 ? TT_F64 : TT_F32, 1, 1, 0, 0);
    tt_value *ins[] = {in, z ? scale : expert, scale};
    return tt_op_node(g, TT_OP_MOE_AUX_LOSS, z ? 2 : 3, ins, 1, &y, a) ? y : NULL;
}

tt_value *tt_grouped_matmul(tt_graph *g, tt_value *x, tt_value *w, tt_value *offsets, int tb)
{
    NEED(x && w && offsets && x->ndim == 2 && w->ndim == 3 && offsets->dtype == TT_I32 && offsets->ndim == 1 &&
             offsets->shape[0] == w->shape[0] + 1 && tt_op_is_float(x->dtype) && tt_op_is_float(w->dtype),
         "grouped_matmul: needs rows (M, K), weights (E, ., .) and E+1 i32 offsets");
    const int64_t K = tb ? w->shape[2] : w->shape[1], Nw = tb ? w->shape[1] : w->shape[2];
    NEED(K == x->shape[1], "grouped_matmul: rows of %lld for experts of %lld inputs", (long long)x->shape[1],
         (long long)K);
    tt_dtype dt = x->dtype == TT_BF16 || w->dtype == TT_BF16 ? TT_BF16 : x->dtype;
    tt_matmul_attrs at = {0, tb != 0};
    tt_value *y = tt_op_act(g, dt, 2, x->shape[0], Nw, 0);
    tt_value *in[] = {x, w, offsets};
    return tt_op_node(g, TT_OP_GROUPED_MATMUL, 3, in, 1, &y, &at) ? y : NULL;
}

tt_value *tt_grouped_matmul_wgrad(tt_graph *g, tt_value *a, tt_value *b, tt_value *offsets, int E, tt_dtype out)
{
    NEED(a && b && offsets && a->ndim == 2 && b->ndim == 2 && a->shape[0] == b->shape[0] && E >= 1 &&
             offsets->dtype == TT_I32 && tt_value_numel(offsets) == (int64_t)E + 1,
         "grouped_matmul_wgrad: needs two (M, .) row sets and E+1 offsets");
    tt_value *y = tt_op_act(g, out, 3, E, a->shape[1], b->shape[1]);
    tt_value *in[] = {a, b, offsets};
    return tt_op_node(g, TT_OP_GROUPED_MATMUL_WGRAD, 3, in, 1, &y, NULL) ? y : NULL;
}

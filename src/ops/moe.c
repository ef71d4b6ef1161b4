/* moe.c — the Mixture-of-Experts ops: routing, the sort of (token, slot)
 * assignments by expert, the permutation of rows into expert order and the
 * combine back, the grouped matmul of all experts, the auxiliary losses, and
 * what expert parallelism adds: the plan of the token exchange and the row
 * gather that regroups the received rows. */
#include <stdint.h>
#include <string.h>

#include "ops/ops_internal.h"

/* Rows past offsets[E] are allowed: under expert parallelism x is a receive
 * buffer sized at a bound, of which the first offsets[E] rows arrived. */
tt_err tt_moe_check_offsets(const int32_t *off, int E, int64_t M)
{
    if (off[0] != 0 || off[E] > M)
        return tt_errorf("grouped_matmul: expert rows span [%d, %d), not within [0, %lld)", off[0], off[E],
                         (long long)M);
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

tt_value *tt_grouped_bias_add(tt_graph *g, tt_value *y, tt_value *b, tt_value *offsets)
{
    NEED(y && b && offsets && y->ndim == 2 && b->ndim == 2 && b->shape[1] == y->shape[1] &&
             offsets->dtype == TT_I32 && offsets->ndim == 1 && offsets->shape[0] == b->shape[0] + 1 &&
             tt_op_is_float(y->dtype) && b->dtype == stat_dtype(y->dtype),
         "grouped_bias_add: needs rows (M, C), fp32 biases (E, C) and E+1 i32 offsets");
    tt_value *z = tt_op_act(g, y->dtype, 2, y->shape[0], y->shape[1], 0);
    tt_value *in[] = {y, b, offsets};
    return tt_op_node(g, TT_OP_GROUPED_BIAS_ADD, 3, in, 1, &z, NULL) ? z : NULL;
}

tt_err tt_row_gather_check(const int32_t *idx, int64_t R, const int32_t *inv, int64_t M)
{
    /* both directions: a gather whose inv were not its inverse would get a wrong gradient, silently */
    for (int64_t i = 0; i < R; i++) {
        if (idx[i] < -1 || idx[i] >= M)
            return tt_errorf("row_gather: index %d at %lld is outside [-1, %lld)", idx[i], (long long)i, (long long)M);
        if (idx[i] >= 0 && inv[idx[i]] != i)
            return tt_errorf("row_gather: row %lld gathers row %d, whose inverse index is %d", (long long)i, idx[i],
                             inv[idx[i]]);
    }
    for (int64_t j = 0; j < M; j++) {
        if (inv[j] < -1 || inv[j] >= R)
            return tt_errorf("row_gather: inverse index %d at %lld is outside [-1, %lld)", inv[j], (long long)j,
                             (long long)R);
        if (inv[j] >= 0 && idx[inv[j]] != j)
            return tt_errorf("row_gather: inverse index %d at %lld, but row %d gathers row %d", inv[j], (long long)j,
                             inv[j], idx[inv[j]]);
    }
    return 0;
}

tt_err tt_moe_ep_check(const int32_t *offs_all, const tt_moe_ep_attrs *a)
{
    const int E = a->E, El = a->E / a->ep;
    int64_t received = 0;
    for (int i = 0; i < a->ep; i++) {
        const int32_t *o = offs_all + (size_t)i * (E + 1);
        if (o[0] != 0) return tt_errorf("expert parallelism: rank %d's expert offsets start at %d, not 0", i, o[0]);
        for (int e = 0; e < E; e++)
            if (o[e + 1] < o[e])
                return tt_errorf("expert parallelism: rank %d's offsets fall at expert %d ([%d, %d))", i, e, o[e],
                                 o[e + 1]);
        received += o[(a->rank + 1) * El] - o[a->rank * El];
    }
    if (received > a->recv_rows)
        return tt_errorf("expert parallelism: this rank receives %lld token rows, more than its receive buffer's %lld "
                         "(raise parallelism.expert_receive_factor, or set it to 0 for the worst case)",
                         (long long)received, (long long)a->recv_rows);
    return 0;
}

tt_value *tt_row_gather(tt_graph *g, tt_value *x, tt_value *idx, tt_value *inv)
{
    NEED(x && idx && inv && x->ndim == 2 && tt_op_is_float(x->dtype) && idx->dtype == TT_I32 && idx->ndim == 1 &&
             inv->dtype == TT_I32 && inv->ndim == 1,
         "row_gather: needs rows (M, D) and 1-D i32 indices and inverse indices");
    NEED(inv->shape[0] == x->shape[0], "row_gather: %lld inverse indices for %lld rows", (long long)inv->shape[0],
         (long long)x->shape[0]);
    tt_value *y = tt_op_act(g, x->dtype, 2, idx->shape[0], x->shape[1], 0);
    tt_value *in[] = {x, idx, inv};
    return tt_op_node(g, TT_OP_ROW_GATHER, 3, in, 1, &y, NULL) ? y : NULL;
}

tt_err tt_moe_ep_plan(tt_graph *g, tt_value *offs_all, const tt_moe_ep_attrs *a, tt_value **counts,
                      tt_value **loc_off, tt_value **to_src, tt_value **to_exp)
{
    if (g->failed) return -1;
    if (a->ep < 1 || a->E < a->ep || a->E % a->ep || a->rank < 0 || a->rank >= a->ep || a->row < 1 ||
        a->recv_rows < 1 || a->recv_rows > INT32_MAX) {
        tt_graph_fail(g, "moe_ep_plan: %d experts over %d ranks (rank %d), rows of %lld, a receive buffer of %lld rows",
                      a->E, a->ep, a->rank, (long long)a->row, (long long)a->recv_rows);
        return -1;
    }
    if (!offs_all || offs_all->dtype != TT_I32 || tt_value_numel(offs_all) != (int64_t)a->ep * (a->E + 1)) {
        tt_graph_fail(g, "moe_ep_plan: needs the %d x (%d+1) i32 expert offsets of every rank", a->ep, a->E);
        return -1;
    }
    const int64_t ep = a->ep, El = a->E / a->ep, R = a->recv_rows;
    tt_value *out[] = {tt_op_act(g, TT_I64, 1, ep, 0, 0), tt_op_act(g, TT_I64, 1, ep, 0, 0),
                       tt_op_act(g, TT_I64, 1, ep, 0, 0), tt_op_act(g, TT_I64, 1, ep, 0, 0),
                       tt_op_act(g, TT_I32, 1, El + 1, 0, 0), tt_op_act(g, TT_I32, 1, R, 0, 0),
                       tt_op_act(g, TT_I32, 1, R, 0, 0)};
    if (!tt_op_node(g, TT_OP_MOE_EP_PLAN, 1, &offs_all, 7, out, a)) return -1;
    for (int k = 0; k < 4; k++) counts[k] = out[k];
    *loc_off = out[4], *to_src = out[5], *to_exp = out[6];
    return 0;
}

/* every row times its expert's matrix: the FLOPs of the active experts only */
static double fl_grouped(const tt_node *n)
{
    return 2.0 * numel(n->out[0]) * (double)n->in[0]->shape[1];
}

static double fl_wgrad(const tt_node *n) { return 2.0 * numel(n->out[0]) / n->out[0]->shape[0] * n_rows(n->in[0]); }

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
    if (!trains(w)) return; /* frozen experts (LoRA's base): no gradient to make */
    gin[1] = tb ? tt_grouped_matmul_wgrad(g, gout[0], x, off, E, w->dtype)
                : tt_grouped_matmul_wgrad(g, x, gout[0], off, E, w->dtype);
}

/* rows past offsets[E] pass unchanged, so dy is the rows' gradient everywhere; each expert's bias gathers its rows' */
static void bw_grouped_bias_add(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = gout[0];
    if (!trains(n->in[1])) return;
    tt_value *in[] = {gout[0], n->in[2]};
    gin[1] = tt_op_emit1(g, TT_OP_GROUPED_BIAS_GRAD, 2, in, n->in[1], NULL);
}

/* idx and inv are each other's partial inverse: the gather's transpose is the gather by inv */
static void bw_row_gather(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = tt_row_gather(g, gout[0], n->in[2], n->in[1]);
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_moe_route = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .flops = fl_in0,
    .backward = bw_moe_route,
};
const tt_op_def tt_op_def_moe_route_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_moe_aux_loss = {.flags = TT_OPF_LOSS, .flops = fl_in0, .backward = bw_moe_aux};
const tt_op_def tt_op_def_moe_sort = {.flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE, .flops = fl_zero};
const tt_op_def tt_op_def_moe_permute = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_moe_reorder};
const tt_op_def tt_op_def_moe_combine = {.flags = TT_OPF_PURE, .flops = fl_in0, .backward = bw_moe_reorder};
const tt_op_def tt_op_def_moe_rowdot = {.flops = fl_zero};
const tt_op_def tt_op_def_grouped_matmul = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .flops = fl_grouped,
    .backward = bw_grouped_matmul,
};
const tt_op_def tt_op_def_grouped_matmul_wgrad = {.acc_outs = 1, .flops = fl_wgrad};
const tt_op_def tt_op_def_grouped_bias_add = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_grouped_bias_add};
const tt_op_def tt_op_def_grouped_bias_grad = {.flops = fl_in0};
const tt_op_def tt_op_def_row_gather = {.flags = TT_OPF_PURE, .flops = fl_zero, .backward = bw_row_gather};
const tt_op_def tt_op_def_moe_ep_plan = {.flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE, .flops = fl_zero};

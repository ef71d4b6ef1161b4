/* comm.c — the collectives (all_gather, reduce_scatter, all_reduce, broadcast,
 * all_to_allv): each a start node and a comm_wait that makes its output valid. */
#include <stdio.h>
#include <stdlib.h>

#include "ops/ops_internal.h"

/* A collective's start node: it writes a view of `into` (or of a new
 * activation of numel elements), which its wait makes valid. The view is
 * (numel / width, width) rows when width > 0, else 1-D. */
static tt_value *comm_start(tt_graph *g, int op, int n_in, tt_value *const *in, tt_dtype dt, int64_t numel,
                            int64_t width, tt_value *into, const tt_comm_attrs *at)
{
    NEED(!into || (!into->base && into->dtype == dt && tt_value_numel(into) == numel),
         "%s: the destination must be a root of %lld %s", tt_op_name(op), (long long)numel, tt_dtype_name(dt));
    tt_value *root = into ? into : tt_value_new(g, TT_ROLE_ACT, dt, 1, &numel);
    const int64_t rows[2] = {width > 0 ? numel / width : numel, width};
    tt_value *y = root ? tt_value_view(g, root, 0, dt, width > 0 ? 2 : 1, rows) : NULL;
    return y && tt_op_node(g, op, n_in, in, 1, &y, at) ? y : NULL;
}

static tt_comm_attrs comm_attrs(int group, int reduce, int root, const char *what)
{
    tt_comm_attrs a = {group, reduce, root, ""};
    snprintf(a.what, sizeof a.what, "%s", what ? what : "");
    return a;
}

tt_value *tt_all_gather(tt_graph *g, tt_value *x, tt_value *into, int group, int group_size, const char *what)
{
    NEED(x && group_size >= 1, "all_gather: no input");
    const tt_comm_attrs at = comm_attrs(group, 0, 0, what);
    return comm_start(g, TT_OP_ALL_GATHER, 1, &x, x->dtype, tt_value_numel(x) * group_size, 0, into, &at);
}

tt_value *tt_reduce_scatter(tt_graph *g, tt_value *x, tt_value *into, int group, int group_size, const char *what)
{
    NEED(x && group_size >= 1 && tt_value_numel(x) % group_size == 0,
         "reduce_scatter: %lld elements do not split in %d", x ? (long long)tt_value_numel(x) : 0LL, group_size);
    const tt_comm_attrs at = comm_attrs(group, 0, 0, what);
    return comm_start(g, TT_OP_REDUCE_SCATTER, 1, &x, x->dtype, tt_value_numel(x) / group_size, 0, into, &at);
}

tt_value *tt_all_reduce(tt_graph *g, tt_value *x, tt_value *into, int group, int reduce, const char *what)
{
    NEED(x, "all_reduce: no input");
    const tt_comm_attrs at = comm_attrs(group, reduce, 0, what);
    return comm_start(g, TT_OP_ALL_REDUCE, 1, &x, x->dtype, tt_value_numel(x), 0, into, &at);
}

tt_value *tt_broadcast(tt_graph *g, tt_value *x, tt_value *into, int group, int root, const char *what)
{
    NEED(x && root >= 0, "broadcast: no input");
    const tt_comm_attrs at = comm_attrs(group, 0, root, what);
    return comm_start(g, TT_OP_BROADCAST, 1, &x, x->dtype, tt_value_numel(x), 0, into, &at);
}

tt_value *tt_all_to_allv(tt_graph *g, tt_value *x, tt_value *scounts, tt_value *sdispls, tt_value *rcounts,
                         tt_value *rdispls, int64_t recv, int group, const char *what)
{
    NEED(x && scounts && sdispls && rcounts && rdispls && recv >= 0 && scounts->dtype == TT_I64 &&
             sdispls->dtype == TT_I64 && rcounts->dtype == TT_I64 && rdispls->dtype == TT_I64 &&
             tt_value_numel(scounts) == tt_value_numel(rcounts) && tt_value_numel(sdispls) == tt_value_numel(scounts) &&
             tt_value_numel(rdispls) == tt_value_numel(rcounts),
         "all_to_allv: counts and displacements are one i64 per group rank");
    NEED(tt_op_is_float(x->dtype), "all_to_allv: exchanges float values, not %s", tt_dtype_name(x->dtype));
    /* rows in, rows out: (M, D) sends whole rows, so y is (recv / D, D) */
    const int64_t width = x->ndim == 2 ? x->shape[1] : 0;
    NEED(width == 0 || (width > 0 && recv % width == 0), "all_to_allv: %lld elements are no whole rows of %lld",
         (long long)recv, (long long)width);
    const tt_comm_attrs at = comm_attrs(group, 0, 0, what);
    tt_value *in[] = {x, scounts, sdispls, rcounts, rdispls};
    /* the receive buffer starts at zero: the elements no rank sends (a buffer planned at a bound) read 0 */
    tt_value *zero = tt_zeros(g, x->dtype, 1, &recv);
    return zero ? comm_start(g, TT_OP_ALL_TO_ALLV, 5, in, x->dtype, recv, width, zero, &at) : NULL;
}

/* A collective's start op: one the list marks TT_COMM, other than the wait */
static int is_start(int op)
{
    switch (op) {
#define TT_OP(ID, name, attrs_bytes)
#define TT_COMM(ID, name, attrs_bytes) case TT_OP_##ID:
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
        return op != TT_OP_COMM_WAIT;
    default:
        return 0;
    }
}

tt_value *tt_comm_wait(tt_graph *g, tt_value *started)
{
    const tt_node *s = started ? started->producer : NULL;
    NEED(s && is_start(s->op) && started->base,
         "comm wait: the value is no collective's output");
    tt_value **in = calloc((size_t)s->n_in + 2, sizeof *in);
    if (!in) return tt_graph_fail(g, "out of memory");
    in[0] = started;
    for (int k = 0; k < s->n_in; k++) in[1 + k] = s->in[k];
    tt_value *y = tt_value_view(g, started, 0, started->dtype, started->ndim, started->shape);
    tt_node *w = y ? tt_op_node(g, TT_OP_COMM_WAIT, s->n_in + 1, in, 1, &y, s->attrs) : NULL;
    free(in);
    return w ? y : NULL;
}

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

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_all_gather = {.flags = TT_OPF_COMM, .flops = fl_zero};
const tt_op_def tt_op_def_reduce_scatter = {.flags = TT_OPF_COMM, .flops = fl_zero};
const tt_op_def tt_op_def_all_reduce = {.flags = TT_OPF_COMM, .flops = fl_zero};
const tt_op_def tt_op_def_broadcast = {.flags = TT_OPF_COMM, .flops = fl_zero};
const tt_op_def tt_op_def_all_to_allv = {.flags = TT_OPF_COMM, .flops = fl_zero, .backward = bw_all_to_allv};
const tt_op_def tt_op_def_comm_wait = {.flags = TT_OPF_COMM, .flops = fl_zero, .backward = bw_comm_wait};

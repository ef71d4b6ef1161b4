/* heads.c — per-head column moves: a value (N, H*w) read as H heads of w
 * columns a row. Multi-head Latent Attention builds its queries and keys
 * from parts of different widths (a RoPE part shared by every head), and
 * these ops take such parts out of a head, put them back, and join two;
 * each one's backward is another's transpose. */
#include "ops/ops_internal.h"

/* slice (place = 0) or its transpose (place = 1) */
static tt_value *move(tt_graph *g, tt_value *x, const tt_head_attrs *a, int place)
{
    const char *name = place ? "head_place" : "head_slice";
    NEED(x && x->ndim == 2 && tt_op_is_float(x->dtype) && a->H >= 1 && a->cw >= 1 && a->c0 >= 0 && a->c0 + a->cw <= a->w &&
             (!a->deinterleave || a->cw % 2 == 0),
         "%s: columns [%d, %d) of heads of %d", name, a->c0, a->c0 + a->cw, a->w);
    const int64_t part = a->sum_heads ? a->cw : (int64_t)a->H * a->cw, whole = (int64_t)a->H * a->w;
    NEED(x->shape[1] == (place ? part : whole), "%s: %lld columns, want %lld", name, (long long)x->shape[1],
         (long long)(place ? part : whole));
    tt_value *y = tt_op_act(g, x->dtype, 2, x->shape[0], place ? whole : part, 0);
    return tt_op_node(g, place ? TT_OP_HEAD_PLACE : TT_OP_HEAD_SLICE, 1, &x, 1, &y, a) ? y : NULL;
}

tt_value *tt_head_slice(tt_graph *g, tt_value *x, int H, int w, int c0, int cw, int sum_heads, int deinterleave)
{
    const tt_head_attrs a = {.H = H, .w = w, .c0 = c0, .cw = cw, .sum_heads = sum_heads, .deinterleave = deinterleave};
    return move(g, x, &a, 0);
}

tt_value *tt_head_place(tt_graph *g, tt_value *y, const tt_head_attrs *a) { return move(g, y, a, 1); }

tt_value *tt_head_concat(tt_graph *g, tt_value *a, tt_value *b, int H, int b_bcast)
{
    NEED(a && b && a->ndim == 2 && b->ndim == 2 && a->shape[0] == b->shape[0] && a->dtype == b->dtype &&
             tt_op_is_float(a->dtype) && H >= 1 && a->shape[1] % H == 0 && (b_bcast || b->shape[1] % H == 0),
         "head_concat: two (N, .) values of one dtype, split in %d heads", H);
    const tt_head_attrs at = {.H = H, .wa = (int)(a->shape[1] / H), .wb = (int)(b_bcast ? b->shape[1] : b->shape[1] / H),
                              .bcast = b_bcast};
    tt_value *y = tt_op_act(g, a->dtype, 2, a->shape[0], (int64_t)H * (at.wa + at.wb), 0);
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_HEAD_CONCAT, 2, in, 1, &y, &at) ? y : NULL;
}

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

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_head_slice = {.flags = TT_OPF_PURE, .flops = fl_zero, .backward = bw_head_slice};
const tt_op_def tt_op_def_head_place = {.flags = TT_OPF_PURE, .flops = fl_zero, .backward = bw_head_place};
const tt_op_def tt_op_def_head_concat = {.flags = TT_OPF_PURE, .flops = fl_zero, .backward = bw_head_concat};

/* elementwise.c — the ops that work element by element: the residual add,
 * SwiGLU (and GPT-OSS's clamped one), GeGLU, GELU and soft-capping with their backwards, cast, scale and add_scaled, a value of zeros, and dropout. */
#include "ops/ops_internal.h"

tt_value *tt_add(tt_graph *g, tt_value *a, tt_value *b)
{
    NEED(a && b && same_shape(a, b) && a->dtype == b->dtype, "add: shapes differ");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, a->dtype, a->ndim, a->shape);
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_ADD, 2, in, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_swiglu(tt_graph *g, tt_value *a, tt_value *b)
{
    NEED(a && b && same_shape(a, b), "swiglu: gate and up shapes differ");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, a->dtype, a->ndim, a->shape);
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_SWIGLU, 2, in, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_swiglu_fused(tt_graph *g, tt_value *ab) { return tt_swiglu_fused_rows(g, ab, NULL); }

tt_value *tt_swiglu_fused_rows(tt_graph *g, tt_value *ab, tt_value *off)
{
    NEED(ab && ab->ndim == 2 && cols(ab) % 2 == 0, "swiglu: the fused gate/up value must be (N, 2F)");
    NEED(!off || (off->dtype == TT_I32 && off->ndim == 1 && tt_value_numel(off) >= 1),
         "swiglu: the rows' bound is a grouped matmul's i32 offsets");
    tt_value *y = tt_op_act(g, ab->dtype, 2, ab->shape[0], cols(ab) / 2, 0), *in[] = {ab, off};
    return tt_op_node(g, TT_OP_SWIGLU, off ? 2 : 1, in, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_swiglu_clamped_rows(tt_graph *g, tt_value *ab, tt_value *off, double alpha, double limit)
{
    NEED(ab && ab->ndim == 2 && cols(ab) % 2 == 0, "swiglu_clamp: the fused gate/up value must be (N, 2F)");
    NEED(!off || (off->dtype == TT_I32 && off->ndim == 1 && tt_value_numel(off) >= 1),
         "swiglu_clamp: the rows' bound is a grouped matmul's i32 offsets");
    NEED(alpha > 0 && isfinite(alpha) && limit > 0 && isfinite(limit),
         "swiglu_clamp: alpha (%g) and limit (%g) must be positive finite numbers", alpha, limit);
    const tt_swiglu_attrs at = {alpha, limit};
    tt_value *y = tt_op_act(g, ab->dtype, 2, ab->shape[0], cols(ab) / 2, 0), *in[] = {ab, off};
    return tt_op_node(g, TT_OP_SWIGLU_CLAMP, off ? 2 : 1, in, 1, &y, &at) ? y : NULL;
}

int tt_swiglu_is_fused(const tt_node *n)
{
    if (n->op == TT_OP_SWIGLU_CLAMP || n->op == TT_OP_SWIGLU_CLAMP_BWD) return 1;
    return n->op == TT_OP_SWIGLU ? n->n_in == 1 || n->in[1]->dtype == TT_I32 : n->n_out == 1;
}

tt_err tt_swiglu_rows(const tt_node *n, const int32_t *off, int64_t *rows)
{
    const int fwd = n->op == TT_OP_SWIGLU || n->op == TT_OP_SWIGLU_CLAMP;
    const int64_t N = n->in[0]->shape[0], k = fwd ? 1 : 2; /* the offsets' input, if any */
    *rows = N;
    if (n->n_in <= k) return 0;
    const int64_t last = off[tt_value_numel(n->in[k]) - 1];
    if (last < 0 || last > N) return tt_errorf("swiglu: the offsets bound %lld rows of a buffer of %lld", (long long)last,
                                               (long long)N);
    *rows = last;
    return 0;
}

tt_value *tt_geglu(tt_graph *g, tt_value *a, tt_value *b)
{
    NEED(a && b && same_shape(a, b) && a->dtype == b->dtype, "geglu: gate and up shapes differ");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, a->dtype, a->ndim, a->shape);
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_GEGLU, 2, in, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_gelu(tt_graph *g, tt_value *x)
{
    NEED(x, "gelu: no input");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, x->dtype, x->ndim, x->shape);
    return tt_op_node(g, TT_OP_GELU, 1, &x, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_softcap(tt_graph *g, tt_value *x, double cap)
{
    NEED(x && cap > 0 && isfinite(cap), "softcap: an input and a positive finite cap");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, x->dtype, x->ndim, x->shape);
    tt_scale_attrs at = {cap};
    return tt_op_node(g, TT_OP_SOFTCAP, 1, &x, 1, &y, &at) ? y : NULL;
}

tt_value *tt_cast(tt_graph *g, tt_value *x, tt_dtype to)
{
    NEED(x && (x->dtype == TT_F64 ? to == TT_F64 : (x->dtype == TT_F32 || x->dtype == TT_BF16) && (to == TT_F32 || to == TT_BF16)),
         "cast: from and to f32 or bf16 (f64 stays f64)");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, to, x->ndim, x->shape);
    return tt_op_node(g, TT_OP_CAST, 1, &x, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_zeros(tt_graph *g, tt_dtype dt, int ndim, const int64_t *shape)
{
    NEED(dt == TT_F32 || dt == TT_BF16 || dt == TT_F64, "zeros: a float dtype");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, dt, ndim, shape);
    return tt_op_node(g, TT_OP_ZERO, 0, NULL, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_scale(tt_graph *g, tt_value *x, double s)
{
    NEED(x && tt_op_is_float(x->dtype) && isfinite(s), "scale: a float value and a finite factor");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, x->dtype, x->ndim, x->shape);
    const tt_scale_attrs a = {s};
    return tt_op_node(g, TT_OP_SCALE, 1, &x, 1, &y, &a) ? y : NULL;
}

static void bw_scale(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    gin[0] = tt_scale(g, gout[0], TT_ATTRS(n, tt_scale_attrs)->s);
}

tt_value *tt_add_scaled_cols(tt_graph *g, tt_value *a, int k, tt_value *const *b, const int *c0, double s)
{
    NEED(a && a->ndim == 2 && tt_op_is_float(a->dtype) && isfinite(s) && k >= 1 && k <= TT_ADD_SCALED_MAX_PARTS,
         "add_scaled: a (N, W) float value, a finite factor and 1 to %d parts", TT_ADD_SCALED_MAX_PARTS);
    tt_add_scaled_attrs at = {.s = s, .k = k};
    tt_value *in[1 + TT_ADD_SCALED_MAX_PARTS] = {a};
    for (int i = 0; i < k; i++) {
        NEED(b[i] && b[i]->ndim == 2 && b[i]->shape[0] == a->shape[0] && tt_op_is_float(b[i]->dtype) && c0[i] >= 0 &&
                 c0[i] + b[i]->shape[1] <= cols(a) && (i == 0 || c0[i] >= c0[i - 1] + b[i - 1]->shape[1]),
             "add_scaled: part %d (%lld columns at %d) outside a's %lld columns or before the part ahead of it", i,
             b[i] ? (long long)cols(b[i]) : -1LL, c0[i], (long long)cols(a));
        in[1 + i] = b[i]->dtype == a->dtype ? b[i] : tt_cast(g, b[i], a->dtype);
        at.c0[i] = c0[i];
    }
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, a->dtype, a->ndim, a->shape);
    return tt_op_node(g, TT_OP_ADD_SCALED, 1 + k, in, 1, &y, &at) ? y : NULL;
}

tt_value *tt_add_scaled(tt_graph *g, tt_value *a, tt_value *b, double s)
{
    NEED(a && b && same_shape(a, b) && a->ndim == 2, "add_scaled: shapes differ");
    return tt_add_scaled_cols(g, a, 1, &b, (const int[]){0}, s);
}

static void bw_add_scaled(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const tt_add_scaled_attrs *at = TT_ATTRS(n, tt_add_scaled_attrs);
    const int W = (int)cols(n->in[0]);
    gin[0] = gout[0];
    for (int i = 0; i < at->k; i++) { /* s dy on the part's columns */
        const int w = (int)cols(n->in[1 + i]);
        tt_value *d = w == W ? gout[0] : tt_head_slice(g, gout[0], 1, W, at->c0[i], w, 0, 0);
        gin[1 + i] = at->s == 1.0 ? d : tt_scale(g, d, at->s);
    }
}

tt_value *tt_dropout(tt_graph *g, tt_value *x, tt_value *rng, double p, uint64_t site)
{
    NEED(x && tt_op_is_float(x->dtype), "dropout: x must be an f32, bf16 or f64 value");
    NEED(p >= 0 && p < 1, "dropout: p = %g is outside [0, 1)", p);
    if (p == 0) return x; /* the identity */
    NEED(rng && rng->dtype == TT_I64 && tt_value_numel(rng) == 2, "dropout: rng must be an i64 (2) value [seed, counter]");
    const tt_dropout_attrs a = {.p = p, .site = site};
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, x->dtype, x->ndim, x->shape), *in[] = {x, rng};
    return tt_op_node(g, TT_OP_DROPOUT, 2, in, 1, &y, &a) ? y : NULL;
}

static void bw_add(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    (void)g;
    (void)n;
    gin[0] = gin[1] = gout[0];
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

static void bw_swiglu_clamp(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0], n->n_in > 1 ? n->in[1] : NULL};
    gin[0] = tt_op_emit1(g, TT_OP_SWIGLU_CLAMP_BWD, n->n_in > 1 ? 3 : 2, in, n->in[0], n->attrs);
}

static void bw_geglu(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], n->in[1], gout[0]};
    tt_value *like[] = {n->in[0], n->in[1]};
    tt_op_emitn(g, TT_OP_GEGLU_BWD, 3, in, 2, like, gin, NULL);
}

static void bw_gelu(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0]};
    gin[0] = tt_op_emit1(g, TT_OP_GELU_BWD, 2, in, n->in[0], NULL);
}

static void bw_softcap(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    tt_value *in[] = {n->in[0], gout[0]};
    gin[0] = tt_op_emit1(g, TT_OP_SOFTCAP_BWD, 2, in, n->in[0], n->attrs);
}

/* the same mask on the gradient: the same rng value and site; rng has no gradient */
static void bw_dropout(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    const tt_dropout_attrs *a = TT_ATTRS(n, tt_dropout_attrs);
    gin[0] = tt_dropout(g, gout[0], n->in[1], a->p, a->site);
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_add = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_add};
const tt_op_def tt_op_def_swiglu = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_swiglu};
const tt_op_def tt_op_def_swiglu_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_swiglu_clamp = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_swiglu_clamp};
const tt_op_def tt_op_def_swiglu_clamp_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_gelu = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_gelu};
const tt_op_def tt_op_def_gelu_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_geglu = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_geglu};
const tt_op_def tt_op_def_geglu_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_softcap = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_softcap};
const tt_op_def tt_op_def_softcap_bwd = {.flops = fl_in0};
const tt_op_def tt_op_def_cast = {.flags = TT_OPF_PURE, .flops = fl_zero};
const tt_op_def tt_op_def_zero = {.flops = fl_zero};
const tt_op_def tt_op_def_scale = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_scale};
const tt_op_def tt_op_def_add_scaled = {.flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE, .flops = fl_out,
                                        .backward = bw_add_scaled};
const tt_op_def tt_op_def_dropout = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_dropout};

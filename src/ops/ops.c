/* ops.c — op builders: check shapes, create outputs, record the node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops_internal.h"

tt_value tt_loss_seed;

tt_value *tt_op_act(tt_graph *g, tt_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t shape[3] = {d0, d1, d2};
    return tt_value_new(g, TT_ROLE_ACT, dt, ndim, shape);
}

tt_node *tt_op_node(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                    const void *attrs)
{
    for (int i = 0; i < n_out; i++)
        if (!out[i]) return NULL;
    return tt_node_new(g, op, n_in, in, n_out, out, attrs, attrs ? tt_ops[op].attrs_size : 0);
}

static int same_shape(const tt_value *a, const tt_value *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) == 0;
}


static int64_t rows(const tt_value *v) { return v->ndim == 1 ? 1 : v->shape[0]; }

/* Statistics a kernel saves for the backward (rstd, mean, logsumexp) and
 * scalar losses stay fp32 when the activations are bf16. */
static tt_dtype stat_dtype(tt_dtype d) { return d == TT_BF16 ? TT_F32 : d; }
/* Two floating operands may meet when they have one dtype, or when they are
 * fp32 and bf16: fp32 weights (and statistics) beside bf16 activations. */
static int meet(const tt_value *a, const tt_value *b)
{
    if (a->dtype == b->dtype) return a->dtype == TT_F32 || a->dtype == TT_BF16 || a->dtype == TT_F64;
    return (a->dtype == TT_F32 || a->dtype == TT_BF16) && (b->dtype == TT_F32 || b->dtype == TT_BF16);
}
static int64_t cols(const tt_value *v) { return v->shape[v->ndim - 1]; }

tt_value *tt_embedding(tt_graph *g, tt_value *ids, tt_value *table)
{
    NEED(ids && table && ids->dtype == TT_I32 && table->ndim == 2, "embedding: needs i32 ids and a (V, D) table");
    tt_dtype dt = table->dtype == TT_F32 && g->act_dtype == TT_BF16 ? TT_BF16 : table->dtype;
    tt_value *y = tt_op_act(g, dt, 2, tt_value_numel(ids), table->shape[1], 0);
    tt_value *in[] = {ids, table};
    return tt_op_node(g, TT_OP_EMBEDDING, 2, in, 1, &y, NULL) ? y : NULL;
}

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

tt_value *tt_add(tt_graph *g, tt_value *a, tt_value *b)
{
    NEED(a && b && same_shape(a, b) && a->dtype == b->dtype, "add: shapes differ");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, a->dtype, a->ndim, a->shape);
    tt_value *in[] = {a, b};
    return tt_op_node(g, TT_OP_ADD, 2, in, 1, &y, NULL) ? y : NULL;
}

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

static tt_value *rope_node(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, int inverse,
                           double scale)
{
    NEED(x && pos && inv_freq && x->ndim == 2 && cols(x) == (int64_t)H * hd && hd % 2 == 0 &&
             tt_value_numel(pos) == rows(x) && tt_value_numel(inv_freq) == hd / 2,
         "rope: x must be (N, %d*%d) with N positions and %d frequencies", H, hd, hd / 2);
    tt_value *y = tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0);
    tt_rope_attrs at = {H, hd, inverse, scale};
    tt_value *in[] = {x, pos, inv_freq};
    return tt_op_node(g, TT_OP_ROPE, 3, in, 1, &y, &at) ? y : NULL;
}

tt_value *tt_rope(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd)
{
    return rope_node(g, x, pos, inv_freq, H, hd, 0, 1.0);
}

tt_value *tt_rope_scaled(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, double scale)
{
    return rope_node(g, x, pos, inv_freq, H, hd, 0, scale);
}

tt_value *tt_attention(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T, int H,
                       int Hk, int hd, int window)
{
    return tt_attention_scaled(g, q, k, v, doc, B, T, H, Hk, hd, window, 0);
}

tt_value *tt_attention_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T, int H,
                              int Hk, int hd, int window, double softmax_scale)
{
    /* values may be narrower or wider than queries and keys (Multi-head Latent Attention): their width is v's */
    const int64_t vw = v && Hk > 0 && cols(v) % Hk == 0 ? cols(v) / Hk : -1;
    NEED(q && k && v && doc && Hk > 0 && H % Hk == 0 && rows(q) == (int64_t)B * T &&
             cols(q) == (int64_t)H * hd && rows(k) == rows(q) && rows(v) == rows(q) && cols(k) == (int64_t)Hk * hd &&
             vw > 0 && vw <= 65536 && tt_value_numel(doc) == rows(q) && doc->dtype == TT_I32,
         "attention: q must be (%d*%d, %d*%d), k (%d*%d, %d*%d), v (%d*%d, %d heads), doc ids (%d*%d)", B, T, H, hd,
         B, T, Hk, hd, B, T, Hk, B, T);
    NEED(q->dtype == k->dtype && q->dtype == v->dtype, "attention: q, k and v have different dtypes");
    tt_value *out[] = {tt_op_act(g, q->dtype, 2, q->shape[0], (int64_t)H * vw, 0), tt_op_act(g, stat_dtype(q->dtype), 3, B, H, T)};
    tt_attn_attrs at = {B, T, H, Hk, hd, window, 0, 0, softmax_scale, vw == hd ? 0 : (int)vw};
    tt_value *in[] = {q, k, v, doc};
    return tt_op_node(g, TT_OP_ATTENTION, 4, in, 2, out, &at) ? out[0] : NULL;
}

tt_value *tt_attention_kv(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                          tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd, int window)
{
    return tt_attention_kv_scaled(g, q, k, v, cache_k, cache_v, start, B, Tq, H, Hk, hd, window, 0);
}

tt_value *tt_attention_kv_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                                 tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd, int window,
                                 double softmax_scale)
{
    const int64_t vw = v && Hk > 0 && cols(v) % Hk == 0 ? cols(v) / Hk : -1; /* the values' width */
    NEED(q && k && v && cache_k && cache_v && start && Hk > 0 && H % Hk == 0 && rows(q) == (int64_t)B * Tq &&
             cols(q) == (int64_t)H * hd && rows(k) == rows(q) && rows(v) == rows(q) && cols(k) == (int64_t)Hk * hd &&
             vw > 0 && vw <= 65536 && cache_k->ndim == 3 && cache_v->ndim == 3 && cache_k->shape[0] == B &&
             cache_v->shape[0] == B && cache_v->shape[1] == cache_k->shape[1] && cache_k->shape[2] == (int64_t)Hk * hd &&
             cache_v->shape[2] == (int64_t)Hk * vw && start->dtype == TT_I32,
         "attention with KV cache: shapes do not match");
    tt_value *out[] = {tt_op_act(g, q->dtype, 2, q->shape[0], (int64_t)H * vw, 0), tt_op_act(g, stat_dtype(q->dtype), 3, B, H, Tq)};
    tt_attn_attrs at = {B, Tq, H, Hk, hd, window, 0, (int)cache_k->shape[1], softmax_scale, vw == hd ? 0 : (int)vw};
    tt_value *in[] = {q, k, v, cache_k, cache_v, start};
    return tt_op_node(g, TT_OP_ATTENTION_KV, 6, in, 2, out, &at) ? out[0] : NULL;
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

int tt_swiglu_is_fused(const tt_node *n)
{
    return n->op == TT_OP_SWIGLU ? n->n_in == 1 || n->in[1]->dtype == TT_I32 : n->n_out == 1;
}

tt_err tt_swiglu_rows(const tt_node *n, const int32_t *off, int64_t *rows)
{
    const int64_t N = n->in[0]->shape[0], k = n->op == TT_OP_SWIGLU ? 1 : 2; /* the offsets' input, if any */
    *rows = N;
    if (n->n_in <= k) return 0;
    const int64_t last = off[tt_value_numel(n->in[k]) - 1];
    if (last < 0 || last > N) return tt_errorf("swiglu: the offsets bound %lld rows of a buffer of %lld", (long long)last,
                                               (long long)N);
    *rows = last;
    return 0;
}

tt_value *tt_attention_qkv(tt_graph *g, tt_value *qkv, tt_value *doc, tt_value *pos, tt_value *inv_freq,
                           double rope_scale, int B, int T, int H, int Hk, int hd, int window)
{
    NEED(qkv && doc && Hk > 0 && H % Hk == 0 && qkv->ndim == 2 && rows(qkv) == (int64_t)B * T &&
             cols(qkv) == (int64_t)(H + 2 * Hk) * hd && tt_value_numel(doc) == rows(qkv) && doc->dtype == TT_I32 &&
             (!pos) == (!inv_freq) && (!pos || (tt_value_numel(pos) == rows(qkv) && pos->dtype == TT_I32 && hd % 2 == 0 &&
                                                tt_value_numel(inv_freq) == hd / 2)),
         "attention: qkv must be (%d*%d, (%d+2*%d)*%d), doc ids and positions (%d*%d)", B, T, H, Hk, hd, B, T);
    tt_value *out[] = {tt_op_act(g, qkv->dtype, 2, qkv->shape[0], (int64_t)H * hd, 0),
                       tt_op_act(g, stat_dtype(qkv->dtype), 3, B, H, T)};
    tt_attn_attrs at = {B, T, H, Hk, hd, window, pos ? rope_scale : 0, 0, 0, 0};
    tt_value *in[] = {qkv, doc, pos, inv_freq};
    return tt_op_node(g, TT_OP_ATTENTION_QKV, pos ? 4 : 2, in, 2, out, &at) ? out[0] : NULL;
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

tt_value *tt_gelu(tt_graph *g, tt_value *x)
{
    NEED(x, "gelu: no input");
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, x->dtype, x->ndim, x->shape);
    return tt_op_node(g, TT_OP_GELU, 1, &x, 1, &y, NULL) ? y : NULL;
}

tt_value *tt_ce_linear(tt_graph *g, tt_value *h, tt_value *w, tt_value *targets, tt_value *scale, int ignore_index)
{
    NEED(h && w && targets && scale && h->ndim == 2 && w->ndim == 2 && cols(h) == cols(w) && meet(h, w) &&
             tt_value_numel(targets) == rows(h) && targets->dtype == TT_I32,
         "cross-entropy: hidden (N, D), head (V, D) and N targets needed");
    tt_value *loss = tt_op_act(g, h->dtype == TT_F64 ? TT_F64 : TT_F32, 1, 1, 0, 0);
    tt_ce_attrs at = {ignore_index};
    tt_value *in[] = {h, w, targets, scale};
    return tt_op_node(g, TT_OP_CE_LINEAR, 4, in, 1, &loss, &at) ? loss : NULL;
}

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
              tt_value *decay, double beta1, double beta2, double eps, double weight_decay)
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
    tt_adamw_attrs at = {beta1, beta2, eps, weight_decay};
    tt_value *in[] = {p, grad, m, v, clip, hp, decay};
    tt_op_node(g, TT_OP_ADAMW, decay ? 7 : 6, in, 0, NULL, &at);
}

tt_dtype tt_node_dtype(const tt_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        const tt_dtype d = n->in[k]->dtype;
        if (d == TT_F32 || d == TT_BF16 || d == TT_F16 || d == TT_F64) return d;
    }
    for (int k = 0; k < n->n_out; k++) {
        const tt_dtype d = n->out[k]->dtype;
        if (d == TT_F32 || d == TT_BF16 || d == TT_F16 || d == TT_F64) return d;
    }
    return TT_F32; /* integers only (moe_sort): nominally fp32 */
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

tt_value *tt_comm_wait(tt_graph *g, tt_value *started)
{
    const tt_node *s = started ? started->producer : NULL;
    NEED(s && (tt_ops[s->op].flags & TT_OPF_COMM) && s->op != TT_OP_COMM_WAIT && started->base,
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

tt_err tt_attention_kv_check(const tt_node *n, int32_t start)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    if (start < 0 || (int64_t)start + a->T > a->Tmax)
        return tt_errorf("KV cache holds %d positions; cannot write %d at %d", a->Tmax, a->T, start);
    return 0;
}

tt_err tt_check_ids(const int32_t *ids, int64_t n, int64_t V, int32_t allowed, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if ((ids[i] < 0 || ids[i] >= V) && ids[i] != allowed)
            return tt_errorf("%s %d at index %lld is outside [0, %lld)", what, ids[i], (long long)i, (long long)V);
    return 0;
}

/* ---- backward-only nodes, emitted by the rules in ops_backward.c -------- */

tt_value *tt_op_emit1(tt_graph *g, int op, int n_in, tt_value *const *in, const tt_value *like, const void *attrs)
{
    tt_value *y = tt_value_new(g, TT_ROLE_ACT, like->dtype, like->ndim, like->shape);
    return y && tt_op_node(g, op, n_in, in, 1, &y, attrs) ? y : NULL;
}

int tt_op_emitn(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *like,
                tt_value **out, const void *attrs)
{
    for (int i = 0; i < n_out; i++)
        out[i] = tt_value_new(g, TT_ROLE_ACT, like[i]->dtype, like[i]->ndim, like[i]->shape);
    return tt_op_node(g, op, n_in, in, n_out, out, attrs) ? 0 : -1;
}

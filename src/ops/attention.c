/* attention.c — RoPE and causal attention: on q, k and v, on one qkv buffer with
 * RoPE inside, and against a KV cache (generation), each with its backward op. */
#include "ops/ops_internal.h"

static tt_value *rope_node(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, int rot,
                           double scale)
{
    const int r = rot ? rot : hd;
    NEED(x && pos && inv_freq && x->ndim == 2 && cols(x) == (int64_t)H * hd && hd % 2 == 0 && r % 2 == 0 && r > 0 &&
             r <= hd && tt_value_numel(pos) == rows(x) && tt_value_numel(inv_freq) == r / 2,
         "rope: x must be (N, %d*%d) with N positions and %d frequencies (%d of %d features rotated, an even number)",
         H, hd, r / 2, r, hd);
    tt_value *y = tt_op_act(g, x->dtype, 2, x->shape[0], x->shape[1], 0);
    tt_rope_attrs at = {H, hd, 0, scale, r < hd ? r : 0};
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

tt_value *tt_rope_partial(tt_graph *g, tt_value *x, tt_value *pos, tt_value *inv_freq, int H, int hd, int rot,
                          double scale)
{
    return rope_node(g, x, pos, inv_freq, H, hd, rot, scale);
}

/* No sinks, or one logit a head in the statistics' dtype: fp32 (f64 beside f64 activations) */
static int sinks_fit(const tt_value *q, const tt_value *sinks, int H)
{
    return !sinks || (sinks->ndim == 1 && sinks->shape[0] == H && sinks->dtype == stat_dtype(q->dtype));
}

tt_value *tt_attention(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T, int H,
                       int Hk, int hd, int window)
{
    return tt_attention_scaled(g, q, k, v, doc, B, T, H, Hk, hd, window, 0, 0, NULL);
}

tt_value *tt_attention_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *doc, int B, int T, int H,
                              int Hk, int hd, int window, double softmax_scale, double softcap, tt_value *sinks)
{
    /* values may be narrower or wider than queries and keys (Multi-head Latent Attention): their width is v's */
    const int64_t vw = v && Hk > 0 && cols(v) % Hk == 0 ? cols(v) / Hk : -1;
    NEED(q && k && v && doc && Hk > 0 && H % Hk == 0 && rows(q) == (int64_t)B * T &&
             cols(q) == (int64_t)H * hd && rows(k) == rows(q) && rows(v) == rows(q) && cols(k) == (int64_t)Hk * hd &&
             vw > 0 && vw <= 65536 && tt_value_numel(doc) == rows(q) && doc->dtype == TT_I32,
         "attention: q must be (%d*%d, %d*%d), k (%d*%d, %d*%d), v (%d*%d, %d heads), doc ids (%d*%d)", B, T, H, hd,
         B, T, Hk, hd, B, T, Hk, B, T);
    NEED(q->dtype == k->dtype && q->dtype == v->dtype, "attention: q, k and v have different dtypes");
    NEED(softcap >= 0 && isfinite(softcap), "attention: the soft-cap must be 0 (none) or a positive finite number");
    NEED(sinks_fit(q, sinks, H), "attention: the sinks must be a weight of %d logits, one a head", H);
    tt_value *out[] = {tt_op_act(g, q->dtype, 2, q->shape[0], (int64_t)H * vw, 0), tt_op_act(g, stat_dtype(q->dtype), 3, B, H, T)};
    tt_attn_attrs at = {B, T, H, Hk, hd, window, 0, 0, softmax_scale, vw == hd ? 0 : (int)vw, softcap};
    tt_value *in[] = {q, k, v, doc, sinks};
    return tt_op_node(g, TT_OP_ATTENTION, sinks ? 5 : 4, in, 2, out, &at) ? out[0] : NULL;
}

tt_value *tt_attention_kv(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                          tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd, int window)
{
    return tt_attention_kv_scaled(g, q, k, v, cache_k, cache_v, start, B, Tq, H, Hk, hd, window, 0, 0, NULL);
}

tt_value *tt_attention_kv_scaled(tt_graph *g, tt_value *q, tt_value *k, tt_value *v, tt_value *cache_k,
                                 tt_value *cache_v, tt_value *start, int B, int Tq, int H, int Hk, int hd, int window,
                                 double softmax_scale, double softcap, tt_value *sinks)
{
    const int64_t vw = v && Hk > 0 && cols(v) % Hk == 0 ? cols(v) / Hk : -1; /* the values' width */
    NEED(q && k && v && cache_k && cache_v && start && Hk > 0 && H % Hk == 0 && rows(q) == (int64_t)B * Tq &&
             cols(q) == (int64_t)H * hd && rows(k) == rows(q) && rows(v) == rows(q) && cols(k) == (int64_t)Hk * hd &&
             vw > 0 && vw <= 65536 && cache_k->ndim == 3 && cache_v->ndim == 3 && cache_k->shape[0] == B &&
             cache_v->shape[0] == B && cache_v->shape[1] == cache_k->shape[1] && cache_k->shape[2] == (int64_t)Hk * hd &&
             cache_v->shape[2] == (int64_t)Hk * vw && start->dtype == TT_I32,
         "attention with KV cache: shapes do not match");
    NEED(softcap >= 0 && isfinite(softcap), "attention: the soft-cap must be 0 (none) or a positive finite number");
    NEED(sinks_fit(q, sinks, H), "attention: the sinks must be a weight of %d logits, one a head", H);
    tt_value *out[] = {tt_op_act(g, q->dtype, 2, q->shape[0], (int64_t)H * vw, 0), tt_op_act(g, stat_dtype(q->dtype), 3, B, H, Tq)};
    tt_attn_attrs at = {B, Tq, H, Hk, hd, window, 0, (int)cache_k->shape[1], softmax_scale, vw == hd ? 0 : (int)vw, softcap};
    tt_value *in[] = {q, k, v, cache_k, cache_v, start, sinks};
    return tt_op_node(g, TT_OP_ATTENTION_KV, sinks ? 7 : 6, in, 2, out, &at) ? out[0] : NULL;
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
    tt_attn_attrs at = {B, T, H, Hk, hd, window, pos ? rope_scale : 0, 0, 0, 0, 0};
    tt_value *in[] = {qkv, doc, pos, inv_freq};
    return tt_op_node(g, TT_OP_ATTENTION_QKV, pos ? 4 : 2, in, 2, out, &at) ? out[0] : NULL;
}

tt_err tt_attention_kv_check(const tt_node *n, int32_t start)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    if (start < 0 || (int64_t)start + a->T > a->Tmax)
        return tt_errorf("KV cache holds %d positions; cannot write %d at %d", a->Tmax, a->T, start);
    return 0;
}

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
    /* in: q, k, v, doc, o, lse, do [, sinks]; out: dq, dk, dv [, dsinks] */
    const int sinks = n->n_in > 4;
    tt_value *in[] = {n->in[0], n->in[1], n->in[2], n->in[3], n->out[0], n->out[1], gout[0], sinks ? n->in[4] : NULL};
    tt_value *like[] = {n->in[0], n->in[1], n->in[2], sinks ? n->in[4] : NULL};
    tt_value *g4[4] = {0};
    tt_op_emitn(g, TT_OP_ATTENTION_BWD, sinks ? 8 : 7, in, sinks ? 4 : 3, like, g4, n->attrs);
    for (int k = 0; k < 3; k++) gin[k] = g4[k];
    if (sinks && trains(n->in[4])) gin[4] = g4[3];
}

static void bw_attention_qkv(tt_graph *g, tt_node *n, tt_value *const *gout, tt_value **gin)
{
    /* in: qkv, doc, o, lse, do [, pos, inv_freq] */
    tt_value *in[] = {n->in[0], n->in[1], n->out[0], n->out[1], gout[0], n->n_in > 2 ? n->in[2] : NULL,
                      n->n_in > 2 ? n->in[3] : NULL};
    gin[0] = tt_op_emit1(g, TT_OP_ATTENTION_QKV_BWD, n->n_in > 2 ? 7 : 5, in, n->in[0], n->attrs);
}

/* the ops' facts: flags, accumulable outputs, inputs written in place, FLOPs, backward rule */
const tt_op_def tt_op_def_rope = {.flags = TT_OPF_PURE, .flops = fl_out, .backward = bw_rope};
const tt_op_def tt_op_def_attention = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .neg_inf_outs = 2,
    .flops = fl_attn,
    .backward = bw_attention,
};
const tt_op_def tt_op_def_attention_bwd = {.flops = fl_attn_bwd};
const tt_op_def tt_op_def_attention_kv = {.writes_ins = 8 | 16, .neg_inf_outs = 2, .flops = fl_attn_kv};
const tt_op_def tt_op_def_attention_qkv = {
    .flags = TT_OPF_PURE | TT_OPF_KEEP_SELECTIVE,
    .neg_inf_outs = 2,
    .flops = fl_attn,
    .backward = bw_attention_qkv,
};
const tt_op_def tt_op_def_attention_qkv_bwd = {.flops = fl_attn_bwd};

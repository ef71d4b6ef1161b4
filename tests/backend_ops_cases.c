/* backend_ops_cases.c — the cases of test_backend_ops: for each op, a function
 * that builds its forward node (and the backward its rule emits) on inputs
 * the harness fills, and the rows that give it odd and typical shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_ops.h"
#include "models/rope.h"

static tt_value *input(hc *h, const char *name, tt_dtype dt, int ndim, const int64_t *shape, fill f)
{
    tt_value *v = tt_graph_input(h->g, name, dt, ndim, shape);
    if (!v || h->n_in == MAX_VALS) return NULL;
    h->spec[h->n_in] = f;
    h->in[h->n_in++] = v;
    return v;
}
static tt_value *act_in(hc *h, const char *name, int64_t r, int64_t c, double scale)
{
    return input(h, name, h->act, 2, (int64_t[]){r, c}, (fill){F_ACT, scale, 0, 0, 0, NULL});
}
static tt_value *w_in(hc *h, const char *name, int ndim, int64_t r, int64_t c, double scale)
{
    return input(h, name, h->w, ndim, ndim == 1 ? (int64_t[]){r} : (int64_t[]){r, c}, (fill){F_W, scale, 0, 0, 0, NULL});
}
static tt_value *int_in(hc *h, const char *name, int64_t n, fill f) { return input(h, name, TT_I32, 1, &n, f); }

/* The forward node under test is the graph's last node. */
static tt_node *last(hc *h) { return h->g->n_nodes ? h->g->nodes[h->g->n_nodes - 1] : NULL; }

/* Mark every output of the node under test, then emit its backward for
 * random upstream gradients of the outputs in `mask` (a loss op: the seed)
 * and mark what it gives. */
static void forward_and_backward(hc *h, tt_node *n, unsigned mask)
{
    if (!n || h->g->failed) return;
    h->fwd = n;
    for (int k = 0; k < n->n_out; k++) tt_graph_mark_output(h->g, n->out[k]);
    if (!tt_ops[n->op]->backward || (!mask && !(tt_ops[n->op]->flags & TT_OPF_LOSS))) return;
    tt_value *gout[8] = {0};
    if (tt_ops[n->op]->flags & TT_OPF_LOSS) gout[0] = &tt_loss_seed;
    else
        for (int k = 0; k < n->n_out; k++)
            if ((mask >> k) & 1) {
                const tt_value *o = n->out[k];
                gout[k] = h->dy[k] = input(h, "dy", o->dtype, o->ndim, o->shape, (fill){F_ACT, 1, 0, 0, 0, NULL});
            }
    tt_ops[n->op]->backward(h->g, n, gout, h->gin);
    for (int k = 0; k < n->n_in; k++)
        if (h->gin[k]) tt_graph_mark_output(h->g, h->gin[k]);
    for (int k = 0; k < n->n_out; k++) tt_graph_mark_output(h->g, n->out[k]); /* a loss op added outputs */
}

/* Output k of node n adds into an accumulator instead (what the fold_accum
 * pass makes of weight gradients): a value the harness fills first. */
static void accumulate_into(hc *h, tt_node *n, int k)
{
    if (!n || h->g->failed) return;
    const tt_value *o = n->out[k];
    tt_value *acc = input(h, "acc", o->dtype, o->ndim, o->shape, (fill){F_W, 0.5, 0, 0, 0, NULL});
    if (!acc) return;
    n->out[k]->producer = NULL;
    n->out[k]->is_output = 0; /* nothing makes it now */
    for (int i = 0; i < 16; i++)
        if (h->gin[i] == n->out[k]) h->gin[i] = acc;
    n->out[k] = acc;
    acc->producer = n;
    acc->out_index = k;
    n->accumulate |= 1u << k;
}

/* ---- the cases ---------------------------------------------------------------- */

typedef struct {
    int M, N, K, ta, tb, acc;
} mm_p;
static void case_matmul(hc *h, const void *p)
{
    const mm_p *c = p;
    tt_value *A = input(h, "A", h->act, 2, c->ta ? (int64_t[]){c->K, c->M} : (int64_t[]){c->M, c->K},
                        (fill){F_ACT, 1, 0, 0, 0, NULL});
    /* B is a weight (fp32 beside bf16 activations), or an activation for a weight gradient */
    tt_dtype bdt = c->acc ? h->act : h->w;
    tt_value *B = input(h, "B", bdt, 2, c->tb ? (int64_t[]){c->N, c->K} : (int64_t[]){c->K, c->N},
                        (fill){bdt == h->act ? F_ACT : F_W, 0.5, 0, 0, 0, NULL});
    if (c->acc) { /* a weight gradient dW = A^T B into an fp32 accumulator */
        tt_matmul_to(h->g, A, B, c->ta, c->tb, h->w);
        tt_node *n = last(h);
        accumulate_into(h, n, 0);
        forward_and_backward(h, n, 0);
        return;
    }
    tt_matmul(h->g, A, B, c->ta, c->tb);
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int N, D, F, group;
} row_p;
static void case_bias_add(hc *h, const void *p)
{
    const row_p *c = p;
    tt_bias_add(h->g, act_in(h, "x", c->N, c->D, 1), w_in(h, "b", 1, c->D, 0, 1));
    forward_and_backward(h, last(h), 1);
}
static void case_add(hc *h, const void *p)
{
    const row_p *c = p;
    tt_add(h->g, act_in(h, "a", c->N, c->D, 1), act_in(h, "b", c->N, c->D, 1));
    forward_and_backward(h, last(h), 1);
}
static void case_rmsnorm(hc *h, const void *p)
{
    const row_p *c = p;
    const int G = c->group ? c->group : c->D;
    tt_rmsnorm_groups(h->g, act_in(h, "x", c->N, c->D, 1.5), w_in(h, "w", 1, G, 0, 1), 1e-5, G);
    forward_and_backward(h, last(h), 1);
}
static void case_layernorm(hc *h, const void *p)
{
    const row_p *c = p;
    tt_layernorm(h->g, act_in(h, "x", c->N, c->D, 1.5), w_in(h, "w", 1, c->D, 0, 1), w_in(h, "b", 1, c->D, 0, 1), 1e-5);
    forward_and_backward(h, last(h), 1);
}
static void case_add_rmsnorm(hc *h, const void *p)
{
    const row_p *c = p;
    tt_add_rmsnorm(h->g, act_in(h, "x", c->N, c->D, 1), act_in(h, "d", c->N, c->D, 1), w_in(h, "w", 1, c->D, 0, 1), 1e-5,
                   NULL);
    forward_and_backward(h, last(h), 1 | 2); /* the sum feeds the residual stream too */
}
static void case_swiglu(hc *h, const void *p)
{
    const row_p *c = p;
    if (c->group) tt_swiglu_fused(h->g, act_in(h, "ab", c->N, 2 * c->F, 1.5)); /* gate and up in one value */
    else tt_swiglu(h->g, act_in(h, "a", c->N, c->F, 1.5), act_in(h, "b", c->N, c->F, 1));
    forward_and_backward(h, last(h), 1);
}
/* gate and up in one value, computed over the rows a grouped matmul's offsets bound (the rest zero) */
typedef struct {
    int N, F, E;
    const double *offsets; /* E+1 */
} swiglu_rows_p;
static void case_swiglu_rows(hc *h, const void *p)
{
    const swiglu_rows_p *c = p;
    tt_value *off = int_in(h, "offsets", c->E + 1, (fill){I_FIXED, 0, 0, 0, 0, c->offsets});
    tt_swiglu_fused_rows(h->g, act_in(h, "ab", c->N, 2 * c->F, 1.5), off);
    forward_and_backward(h, last(h), 1);
}
/* GPT-OSS's clamped SwiGLU (alpha 1.702 as published; a limit of 1.2 holds on about 40% of these inputs, so that
 * both clamps and the free region are all checked), over all rows or those the offsets bound */
static void case_swiglu_clamp(hc *h, const void *p)
{
    const swiglu_rows_p *c = p;
    tt_value *off = c->offsets ? int_in(h, "offsets", c->E + 1, (fill){I_FIXED, 0, 0, 0, 0, c->offsets}) : NULL;
    tt_swiglu_clamped_rows(h->g, act_in(h, "ab", c->N, 2 * c->F, 1.5), off, 1.702, 1.2);
    forward_and_backward(h, last(h), 1);
}
static void case_geglu(hc *h, const void *p)
{
    const row_p *c = p;
    tt_geglu(h->g, act_in(h, "a", c->N, c->F, 1.5), act_in(h, "b", c->N, c->F, 1));
    forward_and_backward(h, last(h), 1);
}
static void case_scale(hc *h, const void *p)
{
    const row_p *c = p;
    tt_scale(h->g, act_in(h, "x", c->N, c->D, 1.5), -2.5);
    forward_and_backward(h, last(h), 1);
}
static void case_add_scaled(hc *h, const void *p)
{
    const row_p *c = p;
    if (!c->group) tt_add_scaled(h->g, act_in(h, "a", c->N, c->D, 1), act_in(h, "b", c->N, c->D, 1.5), 0.37);
    else { /* parts on some columns of a (a fused q/k/v with k left alone): [0, 3) and [D - 5, D) */
        tt_value *b[2] = {act_in(h, "b0", c->N, 3, 1.5), act_in(h, "b1", c->N, 5, 1)};
        tt_add_scaled_cols(h->g, act_in(h, "a", c->N, c->D, 1), 2, b, (const int[]){0, c->D - 5}, -0.6);
    }
    forward_and_backward(h, last(h), 1);
}
static void case_softcap(hc *h, const void *p)
{
    const row_p *c = p;
    tt_softcap(h->g, act_in(h, "x", c->N, c->F, 3), 2.5); /* inputs up to 3: the tanh's curve, not its line */
    forward_and_backward(h, last(h), 1);
}
static void case_gelu(hc *h, const void *p)
{
    const row_p *c = p;
    tt_gelu(h->g, act_in(h, "x", c->N, c->F, 1.5));
    forward_and_backward(h, last(h), 1);
}

/* dropout: the rng input [seed, counter] the host writes; the backward is the same mask on dy */
typedef struct {
    int N, D;
    double p;
    uint64_t site;
    const double *rng; /* seed, counter */
} dropout_p;
static void case_dropout(hc *h, const void *p)
{
    const dropout_p *c = p;
    tt_value *x = act_in(h, "x", c->N, c->D, 1);
    tt_value *rng = input(h, "rng", TT_I64, 1, (int64_t[]){2}, (fill){I_FIXED, 0, 0, 0, 0, c->rng});
    tt_dropout(h->g, x, rng, c->p, c->site);
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int B, T, H, hd;
    double scale;
    int rot; /* partial rotary: the features of a head that rotate (0: all) */
} rope_p;
static void case_rope(hc *h, const void *p)
{
    const rope_p *c = p;
    const int N = c->B * c->T, r = c->rot ? c->rot : c->hd;
    tt_value *x = act_in(h, "x", N, (int64_t)c->H * c->hd, 1);
    tt_value *pos = int_in(h, "pos", N, (fill){I_POS, 0, 0, c->B, c->T, NULL});
    tt_value *fr = input(h, "inv_freq", TT_F32, 1, (int64_t[]){r / 2}, (fill){F_FREQ, 0, 0, r, 0, NULL});
    if (c->rot) tt_rope_partial(h->g, x, pos, fr, c->H, c->hd, c->rot, c->scale);
    else tt_rope_scaled(h->g, x, pos, fr, c->H, c->hd, c->scale);
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int B, T, H, Hk, hd, window, docs, rope, Tmax, start;
} attn_p;
static tt_value *doc_in(hc *h, const attn_p *c, int docs)
{
    return int_in(h, "doc", (int64_t)c->B * c->T, (fill){I_DOC, 0, docs ? 1 : 0, c->B, c->T, NULL});
}
static void case_attention(hc *h, const void *p)
{
    const attn_p *c = p;
    const int N = c->B * c->T;
    tt_value *q = act_in(h, "q", N, (int64_t)c->H * c->hd, 1), *k = act_in(h, "k", N, (int64_t)c->Hk * c->hd, 1);
    tt_value *v = act_in(h, "v", N, (int64_t)c->Hk * c->hd, 1);
    tt_attention(h->g, q, k, v, doc_in(h, c, c->docs), c->B, c->T, c->H, c->Hk, c->hd, c->window);
    forward_and_backward(h, last(h), 1);
}
/* values of another width than queries and keys (Multi-head Latent Attention) */
typedef struct {
    int B, T, H, Hk, hd, dv, window, Tmax, start;
} attn_v_p;
/* attention (or, with a cache of Tmax positions, attention_kv) with the scores scaled by `scale`, not 1 /
 * sqrt(hd) (Multi-head Latent Attention's YaRN scale), soft-capped at cap (0: not), values c->dv wide, and
 * with a sink a head when `sinks` (GPT-OSS; logits of the scores' size, so that they take a real share) */
static void scaled_attention(hc *h, const attn_v_p *c, int docs, double scale, double cap, int sinks)
{
    const int N = c->B * c->T;
    tt_value *q = act_in(h, "q", N, (int64_t)c->H * c->hd, 1), *k = act_in(h, "k", N, (int64_t)c->Hk * c->hd, 1);
    tt_value *v = act_in(h, "v", N, (int64_t)c->Hk * c->dv, 1);
    tt_value *sk = sinks ? w_in(h, "sinks", 1, c->H, 0, 1.5) : NULL;
    if (c->Tmax) {
        tt_value *ck = input(h, "cache_k", h->act, 3, (int64_t[]){c->B, c->Tmax, (int64_t)c->Hk * c->hd},
                             (fill){F_ACT, 1, 0, 0, 0, NULL});
        tt_value *cv = input(h, "cache_v", h->act, 3, (int64_t[]){c->B, c->Tmax, (int64_t)c->Hk * c->dv},
                             (fill){F_ACT, 1, 0, 0, 0, NULL});
        tt_value *start = int_in(h, "start", 1, (fill){I_UNI, 0, 0, c->start, c->start + 1, NULL});
        tt_attention_kv_scaled(h->g, q, k, v, ck, cv, start, c->B, c->T, c->H, c->Hk, c->hd, c->window, scale, cap,
                               sk);
        forward_and_backward(h, last(h), 0);
        return;
    }
    tt_value *doc = int_in(h, "doc", (int64_t)N, (fill){I_DOC, 0, docs ? 1 : 0, c->B, c->T, NULL});
    tt_attention_scaled(h->g, q, k, v, doc, c->B, c->T, c->H, c->Hk, c->hd, c->window, scale, cap, sk);
    forward_and_backward(h, last(h), 1);
}
/* scaled_attention on an attn_p row, values as wide as keys */
static void scaled_attention_p(hc *h, const attn_p *c, double scale, double cap, int sinks)
{
    const attn_v_p v = {c->B, c->T, c->H, c->Hk, c->hd, c->hd, c->window, c->Tmax, c->start};
    scaled_attention(h, &v, c->docs, scale, cap, sinks);
}
static void case_attention_scaled(hc *h, const void *p) { scaled_attention_p(h, p, 0.61, 0, 0); }
/* Gemma 2's soft-capped scores: a cap of 1.5 bends scores of this size (|s| up to about 3) well into the tanh */
static void case_attention_capped(hc *h, const void *p) { scaled_attention_p(h, p, 0.61, 1.5, 0); }
/* GPT-OSS's sinks: alone, and with a soft-cap and another scale (the sinks' epilogue sees the capped scores) */
static void case_attention_sinks(hc *h, const void *p) { scaled_attention_p(h, p, 0, 0, 1); }
static void case_attention_sinks_capped(hc *h, const void *p) { scaled_attention_p(h, p, 0.61, 1.5, 1); }
static void case_attention_vw(hc *h, const void *p) { scaled_attention(h, p, 1, 0.45, 0, 0); }
static void case_attention_vw_sinks(hc *h, const void *p) { scaled_attention(h, p, 1, 0.45, 0, 1); }
static void case_attention_qkv(hc *h, const void *p)
{
    const attn_p *c = p;
    const int N = c->B * c->T;
    tt_value *qkv = act_in(h, "qkv", N, (int64_t)(c->H + 2 * c->Hk) * c->hd, 1), *doc = doc_in(h, c, c->docs);
    tt_value *pos = c->rope ? int_in(h, "pos", N, (fill){I_POS, 0, 0, c->B, c->T, NULL}) : NULL;
    tt_value *fr = c->rope ? input(h, "inv_freq", TT_F32, 1, (int64_t[]){c->hd / 2}, (fill){F_FREQ, 0, 0, c->hd, 0, NULL})
                           : NULL;
    tt_attention_qkv(h->g, qkv, doc, pos, fr, 0.9, c->B, c->T, c->H, c->Hk, c->hd, c->window);
    forward_and_backward(h, last(h), 1);
}
static void case_attention_kv(hc *h, const void *p)
{
    const attn_p *c = p;
    const int N = c->B * c->T;
    const int64_t cache[3] = {c->B, c->Tmax, (int64_t)c->Hk * c->hd};
    tt_value *q = act_in(h, "q", N, (int64_t)c->H * c->hd, 1), *k = act_in(h, "k", N, (int64_t)c->Hk * c->hd, 1);
    tt_value *v = act_in(h, "v", N, (int64_t)c->Hk * c->hd, 1);
    tt_value *ck = input(h, "cache_k", h->act, 3, cache, (fill){F_ACT, 1, 0, 0, 0, NULL});
    tt_value *cv = input(h, "cache_v", h->act, 3, cache, (fill){F_ACT, 1, 0, 0, 0, NULL});
    tt_value *start = int_in(h, "start", 1, (fill){I_UNI, 0, 0, c->start, c->start + 1, NULL});
    tt_attention_kv(h->g, q, k, v, ck, cv, start, c->B, c->T, c->H, c->Hk, c->hd, c->window);
    forward_and_backward(h, last(h), 0);
}

typedef struct {
    int N, D, V, acc;
    int frozen; /* the table / head is a frozen bf16 weight (LoRA's base): no gradient for it, and ce_linear makes dh
                   alone (the f64 twin keeps f64) */
    double cap; /* ce_linear: the logits' soft-cap (0: none) */
} emb_p;

/* A frozen weight of a LoRA base: bf16 where the run is not the f64 twin */
static tt_value *frozen_in(hc *h, const char *name, int64_t r, int64_t c, double scale)
{
    tt_value *v = input(h, name, h->w == TT_F64 ? TT_F64 : TT_BF16, 2, (int64_t[]){r, c}, (fill){F_W, scale, 0, 0, 0, NULL});
    if (v) v->role = TT_ROLE_FROZEN; /* filled as an input all the same */
    return v;
}
static void case_embedding(hc *h, const void *p)
{
    const emb_p *c = p;
    tt_value *ids = int_in(h, "ids", c->N, (fill){I_UNI, 0, 0, 0, c->V, NULL});
    tt_embedding(h->g, ids, c->frozen ? frozen_in(h, "table", c->V, c->D, 1) : w_in(h, "table", 2, c->V, c->D, 1));
    tt_node *n = last(h);
    forward_and_backward(h, n, 1);
    if (c->acc && h->gin[1]) accumulate_into(h, h->gin[1]->producer, 0); /* the table's gradient into an accumulator */
}
static void case_ce_linear(hc *h, const void *p)
{
    const emb_p *c = p;
    tt_value *hh = act_in(h, "h", c->N, c->D, 1);
    tt_value *W = c->frozen ? frozen_in(h, "W", c->V, c->D, 0.5) : w_in(h, "W", 2, c->V, c->D, 0.5);
    tt_value *t = int_in(h, "targets", c->N, (fill){I_TGT, 0, 0, c->V, 0, NULL});
    tt_value *scale = input(h, "scale", h->w, 1, (int64_t[]){1}, (fill){F_W, 0, 0.37, 0, 0, NULL});
    tt_ce_linear_capped(h->g, hh, W, t, scale, -100, c->cap);
    tt_node *n = last(h);
    if (n && c->frozen && n->n_out != 1) tt_graph_fail(h->g, "ce_linear: outputs before its backward");
    forward_and_backward(h, n, 1);
    if (c->acc && n && n->n_out == 3) accumulate_into(h, n, 2); /* dW into the head's accumulator */
}

typedef struct {
    int n, variant; /* accum / sumsq (variant 1: chained) / clip (variant: with clipping) / adamw (variant: decay) */
    double max_norm;
} opt_p;
static void case_accum(hc *h, const void *p)
{
    const opt_p *c = p;
    tt_value *acc = w_in(h, "acc", 2, c->n / 8, 8, 1), *g = act_in(h, "g", c->n / 8, 8, 1);
    tt_accum(h->g, acc, g);
    forward_and_backward(h, last(h), 0);
}
static void case_sumsq(hc *h, const void *p)
{
    const opt_p *c = p;
    tt_value *prev = c->variant ? input(h, "prev", TT_F32, 1, (int64_t[]){1}, (fill){F_F32, 0, 3.5, 0, 0, NULL}) : NULL;
    tt_sumsq(h->g, w_in(h, "g", 1, c->n, 0, 1), prev);
    forward_and_backward(h, last(h), 0);
}
static void case_clip_coef(hc *h, const void *p)
{
    const opt_p *c = p;
    tt_value *s = input(h, "sumsq", TT_F32, 1, (int64_t[]){1}, (fill){F_F32, 0, c->variant ? 9.0 : 0.25, 0, 0, NULL});
    tt_clip_coef_of(h->g, s, c->max_norm);
    forward_and_backward(h, last(h), 0);
}
static const double adamw_hp[2] = {1e-2, 3}, adamw_decay[4] = {10, 400, 600, 900};
static void case_adamw(hc *h, const void *p)
{
    const opt_p *c = p;
    tt_value *pp = w_in(h, "p", 1, c->n, 0, 1), *g = w_in(h, "g", 1, c->n, 0, 0.3), *m = w_in(h, "m", 1, c->n, 0, 0.1);
    tt_value *v = input(h, "v", h->w, 1, (int64_t[]){c->n}, (fill){F_W_POS, 0.01, 0, 0, 0, NULL});
    tt_value *clip = input(h, "clip", TT_F32, 1, (int64_t[]){1}, (fill){F_F32, 0, 0.7, 0, 0, NULL});
    tt_value *hp = input(h, "hp", TT_F64, 1, (int64_t[]){2}, (fill){F_F64, 0, 0, 0, 0, adamw_hp});
    tt_value *decay = c->variant ? input(h, "decay", TT_I64, 2, (int64_t[]){2, 2}, (fill){I_FIXED, 0, 0, 0, 0, adamw_decay})
                                 : NULL;
    tt_adamw(h->g, pp, g, m, v, clip, hp, decay, NULL, 0.9, 0.95, 1e-8, 0.1);
    forward_and_backward(h, last(h), 0);
}

static void case_cast(hc *h, const void *p)
{
    const row_p *c = p;
    /* fp32 to bf16, bf16 to fp32 (the f64 twin: f64 to f64) */
    const tt_dtype to = h->act == TT_F64 ? TT_F64 : h->act == TT_F32 ? TT_BF16 : TT_F32;
    tt_cast(h->g, act_in(h, "x", c->N, c->D, 3), to);
    forward_and_backward(h, last(h), 0);
}
static void case_zero(hc *h, const void *p)
{
    const row_p *c = p;
    tt_zeros(h->g, h->act, 2, (int64_t[]){c->N, c->D});
    forward_and_backward(h, last(h), 0);
}

/* ---- per-head columns ---- */
typedef struct {
    int N, H, w, c0, cw, sum_heads, deinterleave, wb, bcast; /* wb > 0: a concat of (H, w) and (H or 1, wb) */
} head_p;
static void case_head(hc *h, const void *p)
{
    const head_p *c = p;
    if (c->wb) {
        tt_value *a = act_in(h, "a", c->N, (int64_t)c->H * c->w, 1);
        tt_value *b = act_in(h, "b", c->N, (int64_t)(c->bcast ? 1 : c->H) * c->wb, 1);
        tt_head_concat(h->g, a, b, c->H, c->bcast);
    } else {
        tt_head_slice(h->g, act_in(h, "x", c->N, (int64_t)c->H * c->w, 1), c->H, c->w, c->c0, c->cw, c->sum_heads,
                      c->deinterleave);
    }
    forward_and_backward(h, last(h), 1);
}
/* the place op is the slice's backward; its own backward is the slice again: run it forward */
static void case_head_place(hc *h, const void *p)
{
    const head_p *c = p;
    const tt_head_attrs a = {.H = c->H, .w = c->w, .c0 = c->c0, .cw = c->cw, .sum_heads = c->sum_heads,
                             .deinterleave = c->deinterleave};
    tt_head_place(h->g, act_in(h, "y", c->N, (int64_t)(c->sum_heads ? 1 : c->H) * c->cw, 1), &a);
    forward_and_backward(h, last(h), 1);
}

/* ---- Mixture-of-Experts ---- */
typedef struct {
    int N, E, k, sigmoid, norm, bias, n_group, topk_group;
    double scale;
    const double *cols; /* per-expert logit offsets (NULL: none) */
    double spread;      /* the logits' normal scale */
} route_p;
static void case_moe_route(hc *h, const void *p)
{
    const route_p *c = p;
    tt_value *logits = c->cols ? input(h, "logits", h->w, 2, (int64_t[]){c->N, c->E},
                                       (fill){F_W_COLS, c->spread, 0, c->E, 0, c->cols})
                               : w_in(h, "logits", 2, c->N, c->E, c->spread);
    tt_value *bias = c->bias ? input(h, "bias", TT_F32, 1, (int64_t[]){c->E}, (fill){F_F32, 0.3, 0, 0, 0, NULL}) : NULL;
    tt_moe_attrs a = {c->E, c->k, c->sigmoid ? TT_SCORE_SIGMOID : TT_SCORE_SOFTMAX, c->norm, c->n_group, c->topk_group,
                      c->scale};
    tt_moe_route(h->g, logits, bias, &a, NULL, NULL);
    forward_and_backward(h, last(h), 1);
}

/* the router with an auxiliary loss reading its scores: the scores' gradient joins the weights' */
static void case_moe_route_scores(hc *h, const void *p)
{
    const route_p *c = p;
    tt_moe_attrs a = {c->E, c->k, c->sigmoid ? TT_SCORE_SIGMOID : TT_SCORE_SOFTMAX, c->norm, 0, 0, c->scale};
    tt_moe_route(h->g, w_in(h, "logits", 2, c->N, c->E, c->spread), NULL, &a, NULL, NULL);
    forward_and_backward(h, last(h), 1 | 4);
}

typedef struct {
    int kind, N, E, k, B;
    double coef;
} aux_p;
static void case_moe_aux(hc *h, const void *p)
{
    const aux_p *c = p;
    const int z = c->kind == TT_AUX_Z;
    tt_value *in = z ? w_in(h, "logits", 2, c->N, c->E, 1.5)
                     : input(h, "scores", h->w, 2, (int64_t[]){c->N, c->E}, (fill){F_W_POS, 1, 0, 0, 0, NULL});
    tt_value *ex = z ? NULL : input(h, "expert", TT_I32, 2, (int64_t[]){c->N, c->k}, (fill){I_UNI, 0, 0, 0, c->E, NULL});
    tt_value *scale = input(h, "scale", TT_F32, 1, (int64_t[]){1}, (fill){F_F32, 0, 0.5, 0, 0, NULL});
    tt_moe_aux_attrs a = {c->kind, c->E, c->k, c->B, c->B ? c->N / c->B : 0, c->coef};
    tt_moe_aux_loss(h->g, in, ex, scale, &a);
    forward_and_backward(h, last(h), 0);
}

typedef struct {
    int N, D, k, E, used; /* expert ids uniform in [0, used): experts past it get no row */
    int weighted;
} moe_rows_p;
/* the (N, k) expert ids and their sort: perm, pos, offsets */
static void sorted(hc *h, const moe_rows_p *c, tt_value **perm, tt_value **pos, tt_value **off)
{
    tt_value *ids = input(h, "expert", TT_I32, 2, (int64_t[]){c->N, c->k}, (fill){I_UNI, 0, 0, 0, c->used, NULL});
    tt_moe_sort(h->g, ids, c->E, perm, pos, off);
}
static void case_moe_sort(hc *h, const void *p)
{
    tt_value *perm, *pos, *off;
    sorted(h, p, &perm, &pos, &off);
    forward_and_backward(h, last(h), 0);
}
static void case_moe_permute(hc *h, const void *p)
{
    const moe_rows_p *c = p;
    tt_value *x = act_in(h, "x", c->N, c->D, 1), *perm, *pos, *off;
    tt_value *w = c->weighted ? w_in(h, "weight", 2, c->N, c->k, 1) : NULL;
    sorted(h, c, &perm, &pos, &off);
    tt_moe_permute(h->g, x, perm, pos, w, c->k);
    forward_and_backward(h, last(h), 1);
}
static void case_moe_combine(hc *h, const void *p)
{
    const moe_rows_p *c = p;
    tt_value *ys = act_in(h, "ys", (int64_t)c->N * c->k, c->D, 1), *perm, *pos, *off;
    tt_value *w = c->weighted ? w_in(h, "weight", 2, c->N, c->k, 1) : NULL;
    sorted(h, c, &perm, &pos, &off);
    tt_moe_combine(h->g, ys, perm, pos, w, c->k);
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int M, K, Nw, E, tb, acc;
    const double *offsets; /* E+1 */
} gmm_p;
static void case_grouped_matmul(hc *h, const void *p)
{
    const gmm_p *c = p;
    tt_value *x = act_in(h, "x", c->M, c->K, 1);
    tt_value *w = input(h, "w", h->w, 3, c->tb ? (int64_t[]){c->E, c->Nw, c->K} : (int64_t[]){c->E, c->K, c->Nw},
                        (fill){F_W, 0.5, 0, 0, 0, NULL});
    tt_value *off = int_in(h, "offsets", c->E + 1, (fill){I_FIXED, 0, 0, 0, 0, c->offsets});
    tt_grouped_matmul(h->g, x, w, off, c->tb);
    forward_and_backward(h, last(h), 1);
    if (c->acc && h->gin[1]) accumulate_into(h, h->gin[1]->producer, 0); /* dw into the experts' accumulator */
}

/* the experts' biases on their rows (GPT-OSS), the rows past offsets[E] passing */
static void case_grouped_bias(hc *h, const void *p)
{
    const gmm_p *c = p;
    tt_value *y = act_in(h, "y", c->M, c->Nw, 1);
    tt_value *b = input(h, "b", h->w, 2, (int64_t[]){c->E, c->Nw}, (fill){F_W, 0.5, 0, 0, 0, NULL});
    tt_value *off = int_in(h, "offsets", c->E + 1, (fill){I_FIXED, 0, 0, 0, 0, c->offsets});
    tt_grouped_bias_add(h->g, y, b, off);
    forward_and_backward(h, last(h), 1);
}

/* ---- expert parallelism ---- */
typedef struct {
    int M, R, D, kept; /* x (M, D) gathered into R rows; slots past `kept`, and every fifth, gather nothing */
    double *idx, *inv; /* R and M entries, filled by the case */
} gather_p;
/* A partial permutation: a shuffle of x's rows into the slots, some slots empty (-1) and, when R < M, some
 * rows gathered by none; inv its inverse. */
static void partial_perm(const gather_p *c)
{
    int32_t *rows = th_alloc((size_t)c->M, sizeof *rows);
    tt_rng r = {7, 0};
    for (int j = 0; j < c->M; j++) rows[j] = j, c->inv[j] = -1;
    for (int j = c->M - 1; j > 0; j--) { /* Fisher-Yates */
        const int k = (int)tt_rng_below(&r, (uint64_t)j + 1), t = rows[j];
        rows[j] = rows[k], rows[k] = t;
    }
    for (int i = 0, next = 0; i < c->R; i++) {
        c->idx[i] = i % 5 == 2 || i >= c->kept || next == c->M ? -1 : rows[next++];
        if (c->idx[i] >= 0) c->inv[(int)c->idx[i]] = i;
    }
    free(rows);
}
static void case_row_gather(hc *h, const void *p)
{
    const gather_p *c = p;
    partial_perm(c);
    tt_value *x = act_in(h, "x", c->M, c->D, 1);
    tt_value *idx = int_in(h, "idx", c->R, (fill){I_FIXED, 0, 0, 0, 0, c->idx});
    tt_value *inv = int_in(h, "inv", c->M, (fill){I_FIXED, 0, 0, 0, 0, c->inv});
    tt_row_gather(h->g, x, idx, inv);
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int E, ep, rank;
    int64_t row, recv_rows;
    const double *offs; /* ep x (E+1): every rank's moe_sort offsets */
} plan_p;
static tt_err ep_plan(hc *h, const plan_p *c, tt_value **to_src, tt_value **to_exp)
{
    tt_value *offs = int_in(h, "offs_all", (int64_t)c->ep * (c->E + 1), (fill){I_FIXED, 0, 0, 0, 0, c->offs});
    const tt_moe_ep_attrs a = {c->E, c->ep, c->rank, c->row, c->recv_rows};
    tt_value *counts[4], *loc_off;
    return tt_moe_ep_plan(h->g, offs, &a, counts, &loc_off, to_src, to_exp);
}
static void case_moe_ep_plan(hc *h, const void *p)
{
    tt_value *to_src, *to_exp;
    if (ep_plan(h, p, &to_src, &to_exp) == 0) forward_and_backward(h, last(h), 0);
}
/* what expert parallelism does with the plan: the received rows (source-major) regrouped expert-major */
static void case_ep_regroup(hc *h, const void *p)
{
    const plan_p *c = p;
    tt_value *recv = act_in(h, "recv", c->recv_rows, c->row, 1), *to_src, *to_exp;
    if (ep_plan(h, c, &to_src, &to_exp)) return;
    tt_row_gather(h->g, recv, to_src, to_exp);
    forward_and_backward(h, last(h), 1);
}

/* odd shapes: sizes that are no multiple of a vector width or a tile */
static const mm_p mm_nn = {37, 19, 23, 0, 0, 0}, mm_nt = {37, 19, 23, 0, 1, 0}, mm_tn = {37, 19, 23, 1, 0, 0},
                  mm_tt = {37, 19, 23, 1, 1, 0}, mm_acc = {19, 23, 37, 1, 0, 1},
                  /* typical: the default job's q/k/v and MLP products, 2 sequences of 256 */
                  mm_fwd = {512, 384, 128, 0, 1, 0}, mm_dx = {512, 128, 384, 0, 0, 0}, mm_dw = {384, 128, 512, 1, 0, 1};
static const row_p row_odd = {37, 19, 19, 0}, row_typ = {512, 128, 384, 0}, row_parts = {37, 19, 0, 1},
                   row_group = {37, 64, 0, 16},
                   row_fused = {37, 0, 19, 1}, row_fused_typ = {512, 0, 384, 1};
static const double rng_a[2] = {1234, 7}, rng_b[2] = {20250101, 123456};
static const dropout_p do_odd = {37, 19, 0.1, 3, rng_a}, do_half = {37, 19, 0.5, 0, rng_b},
                       do_typ = {512, 128, 0.05, 17, rng_a}, do_high = {512, 384, 0.9, 2, rng_b};
static const rope_p rope_odd = {2, 7, 3, 8, 0.75, 0}, rope_typ = {2, 256, 4, 32, 1.0, 0};
static const rope_p rope_part = {2, 7, 3, 12, 0.75, 8}, rope_part_typ = {2, 256, 4, 32, 1.0, 24};
static const attn_p at_gqa = {2, 13, 4, 2, 8, 0, 1, 0, 0, 0}, at_win = {1, 17, 3, 1, 16, 5, 1, 0, 0, 0},
                    at_plain = {1, 9, 1, 1, 6, 0, 0, 0, 0, 0}, at_typ = {2, 256, 4, 4, 32, 0, 0, 0, 0, 0},
                    qkv_rope = {2, 13, 4, 2, 8, 0, 1, 1, 0, 0}, qkv_plain = {1, 11, 2, 2, 16, 4, 1, 0, 0, 0},
                    qkv_typ = {2, 256, 4, 4, 32, 0, 0, 1, 0, 0}, kv_prefill = {1, 5, 4, 2, 8, 0, 0, 0, 16, 0},
                    kv_decode = {2, 1, 4, 2, 16, 3, 0, 0, 12, 7}, at_48 = {2, 200, 4, 2, 48, 0, 1, 0, 0, 0};
static const emb_p emb_odd = {37, 19, 23, 0, 0, 0}, emb_acc = {29, 11, 13, 1, 0, 0}, emb_typ = {512, 128, 258, 1, 0, 0},
                   ce_odd = {13, 11, 17, 0, 0, 0}, ce_acc = {9, 7, 5, 1, 0, 0}, ce_typ = {512, 128, 258, 1, 0, 0},
                   ce_frozen = {13, 11, 17, 0, 1, 0}, ce_frozen_typ = {512, 128, 258, 0, 1, 0}, emb_frozen = {37, 19, 23, 0, 1, 0},
                   ce_cap = {13, 11, 17, 0, 0, 1.5}, ce_cap_typ = {512, 128, 258, 1, 0, 2.0},
                   ce_cap_frozen = {512, 128, 258, 0, 1, 2.0};
static const opt_p acc_odd = {104, 0, 0}, sq_odd = {1001, 0, 0}, sq_big = {100003, 0, 0}, sq_chain = {37, 1, 0}, clip_no = {1, 0, 1.0},
                   clip_yes = {1, 1, 1.0}, clip_off = {1, 1, 0.0}, adam_all = {777, 0, 0}, adam_decay = {1000, 1, 0},
                   adam_typ = {100003, 1, 0};

static const double skew8[8] = {2, 2, 0, 0, -9, -9, -9, -9}, ties8[8] = {1, 1, 1, 0.5, 1, 0, 0, 0};
static const route_p rt_softmax = {37, 8, 2, 0, 1, 0, 0, 0, 1.0, NULL, 1.5},
                     rt_sigmoid = {37, 8, 3, 1, 0, 1, 0, 0, 2.5, NULL, 1.5},
                     rt_groups = {29, 16, 4, 1, 1, 1, 4, 2, 1.5, NULL, 1.5},
                     rt_skew = {37, 8, 2, 0, 0, 0, 0, 0, 1.0, skew8, 1.0},
                     rt_ties = {13, 8, 2, 0, 1, 0, 0, 0, 1.0, ties8, 0.0},
                     rt_typ = {512, 8, 2, 0, 1, 0, 0, 0, 1.0, NULL, 1.0};
static const attn_v_p av_narrow = {2, 13, 4, 2, 12, 8, 0, 0, 0}, av_wide = {1, 11, 2, 2, 8, 16, 5, 0, 0},
                      av_typ = {2, 256, 4, 4, 48, 32, 0, 0, 0}, av_kv = {2, 1, 4, 2, 16, 8, 0, 12, 7};
static const head_p hs_mid = {13, 3, 12, 8, 4, 0, 1, 0, 0}, hs_sum = {13, 3, 12, 2, 6, 1, 0, 0, 0},
                    hs_first = {13, 4, 7, 0, 5, 0, 0, 0, 0}, hc_heads = {13, 3, 5, 0, 0, 0, 0, 4, 0},
                    hc_bcast = {13, 4, 6, 0, 0, 0, 0, 2, 1}, hs_typ = {512, 4, 48, 32, 16, 0, 1, 0, 0};
static const aux_p ax_balance = {TT_AUX_BALANCE, 37, 8, 2, 0, 3.0}, ax_seq = {TT_AUX_SEQUENCE, 36, 8, 3, 3, 2.0},
                   ax_z = {TT_AUX_Z, 37, 8, 0, 0, 0.5}, ax_typ = {TT_AUX_BALANCE, 512, 8, 2, 0, 0.01};
static const moe_rows_p mr_odd = {37, 19, 2, 8, 8, 1}, mr_plain = {23, 19, 3, 8, 8, 0},
                        mr_empty = {37, 19, 2, 8, 3, 1}, mr_typ = {512, 128, 2, 8, 8, 1};
static const double off_odd[5] = {0, 10, 10, 30, 37}, off_typ[9] = {0, 100, 230, 400, 512, 512, 700, 880, 1024};
/* a receive buffer planned at a bound: rows past offsets[E] hold no expert's rows */
static const double off_tail[5] = {0, 10, 10, 22, 29}, off_typ_tail[9] = {0, 100, 230, 400, 512, 512, 700, 880, 900};
static const gmm_p gm_nt = {37, 23, 19, 4, 1, 0, off_odd}, gm_nn = {37, 23, 19, 4, 0, 0, off_odd},
                   gm_acc = {37, 23, 19, 4, 1, 1, off_odd}, gm_up = {1024, 128, 768, 8, 1, 1, off_typ},
                   gm_down = {1024, 384, 128, 8, 1, 1, off_typ}, gm_tail_nt = {40, 23, 19, 4, 1, 0, off_tail},
                   gm_tail_nn = {40, 23, 19, 4, 0, 0, off_tail}, gm_tail_acc = {40, 23, 19, 4, 1, 1, off_tail},
                   gm_tail_typ = {1024, 128, 768, 8, 1, 1, off_typ_tail};
static const swiglu_rows_p sw_tail = {40, 19, 4, off_tail}, sw_tail_typ = {1024, 384, 8, off_typ_tail},
                           sw_all = {37, 19, 0, NULL}, sw_all_typ = {512, 384, 0, NULL};
static double gi_odd[2][13], gi_more[2][16], gi_typ[2][1024];
static const gather_p ga_odd = {13, 11, 19, 11, gi_odd[0], gi_odd[1]},
                      ga_more = {11, 16, 19, 14, gi_more[0], gi_more[1]}, ga_typ = {1024, 1024, 128, 900, gi_typ[0], gi_typ[1]};
/* E = 8 experts. Over 2 ranks: expert 1 and 5 empty on rank 0, experts 0, 2, 5, 6 on rank 1. Over 4 ranks:
 * rank 2's experts (4, 5) empty everywhere, so it receives nothing. */
static const double ep2_offs[18] = {0, 3, 3, 7, 8, 8, 12, 15, 20, /* rank 1 */ 0, 0, 2, 2, 6, 9, 9, 9, 11};
static const double ep4_offs[36] = {0, 2, 5, 5, 6, 6, 6, 9, 10, /**/ 0, 0, 0, 4, 4, 4, 4, 4, 7,
                                    0, 1, 1, 3, 8, 8, 8, 8, 8,  /**/ 0, 3, 3, 3, 3, 3, 3, 5, 5};
static const plan_p pl_ep2_r0 = {8, 2, 0, 5, 20, ep2_offs}, pl_ep2_r1 = {8, 2, 1, 7, 17, ep2_offs},
                    pl_ep4_r2 = {8, 4, 2, 3, 4, ep4_offs}, pl_ep4_r3 = {8, 4, 3, 19, 12, ep4_offs},
                    pl_ep4_r0 = {8, 4, 0, 128, 40, ep4_offs};

const test_case op_cases[] = {
    {"matmul nn 37x19x23", case_matmul, &mm_nn, 1, 0},
    {"matmul nt 37x19x23", case_matmul, &mm_nt, 1, 0},
    {"matmul tn 37x19x23", case_matmul, &mm_tn, 1, 0},
    {"matmul tt 37x19x23", case_matmul, &mm_tt, 1, 0},
    {"matmul tn into an accumulator", case_matmul, &mm_acc, 0, 0},
    {"matmul nt 512x384x128 (forward)", case_matmul, &mm_fwd, 0, 0},
    {"matmul nn 512x128x384 (input gradient)", case_matmul, &mm_dx, 0, 0},
    {"matmul tn 384x128x512 (weight gradient, accumulating)", case_matmul, &mm_dw, 0, 0},
    {"bias_add 37x19", case_bias_add, &row_odd, 1, 0},
    {"bias_add 512x128", case_bias_add, &row_typ, 0, 0},
    {"add 37x19", case_add, &row_odd, 1, 0},
    {"add 512x128", case_add, &row_typ, 0, 0},
    {"rmsnorm 37x19", case_rmsnorm, &row_odd, 1, 0},
    {"rmsnorm 512x128", case_rmsnorm, &row_typ, 0, 0},
    {"rmsnorm per head 37x(4x16)", case_rmsnorm, &row_group, 1, 0},
    {"layernorm 37x19", case_layernorm, &row_odd, 1, 0},
    {"layernorm 512x128", case_layernorm, &row_typ, 0, 0},
    {"add_rmsnorm 37x19", case_add_rmsnorm, &row_odd, 1, 0},
    {"add_rmsnorm 512x128", case_add_rmsnorm, &row_typ, 0, 0},
    {"swiglu 37x19", case_swiglu, &row_odd, 1, 0},
    {"swiglu 512x384", case_swiglu, &row_typ, 0, 0},
    {"swiglu fused gate/up 37x(2x19)", case_swiglu, &row_fused, 1, 0},
    {"swiglu fused gate/up 512x(2x384)", case_swiglu, &row_fused_typ, 0, 0},
    {"scale 37x19 by -2.5", case_scale, &row_odd, 1, 0},
    {"scale 512x128 by -2.5", case_scale, &row_typ, 0, 0},
    {"add_scaled 37x19, s 0.37", case_add_scaled, &row_odd, 1, 0},
    {"add_scaled 512x128, s 0.37", case_add_scaled, &row_typ, 0, 0},
    {"add_scaled 37x19, two parts on columns [0, 3) and [14, 19)", case_add_scaled, &row_parts, 1, 0},
    {"gelu 37x19", case_gelu, &row_odd, 1, 0},
    {"geglu 37x19", case_geglu, &row_odd, 1, 0},
    {"geglu 512x384", case_geglu, &row_typ, 0, 0},
    {"gelu 512x384", case_gelu, &row_typ, 0, 0},
    {"softcap 37x19, cap 2.5", case_softcap, &row_odd, 1, 0},
    {"softcap 512x384, cap 2.5", case_softcap, &row_typ, 0, 0},
    {"rope 2x7 tokens, 3 heads of 8, scale 0.75", case_rope, &rope_odd, 1, 0},
    {"rope 2x256 tokens, 4 heads of 32", case_rope, &rope_typ, 0, 0},
    {"rope partial 2x7 tokens, 3 heads of 12, 8 rotated, scale 0.75", case_rope, &rope_part, 1, 0},
    {"rope partial 2x256 tokens, 4 heads of 32, 24 rotated", case_rope, &rope_part_typ, 0, 0},
    {"attention GQA 4:2, documents", case_attention, &at_gqa, 1, 0},
    {"attention GQA 3:1, window 5, documents, hd 16", case_attention, &at_win, 1, 0},
    {"attention one head, hd 6", case_attention, &at_plain, 1, 0},
    {"attention 2x256, 4 heads of 32", case_attention, &at_typ, 0, 0},
    {"attention 2x200, GQA 4:2, heads of 48, documents", case_attention, &at_48, 0, 0},
    {"attention scaled 0.61, GQA 4:2, documents", case_attention_scaled, &at_gqa, 1, 0},
    {"attention scaled 0.61, 2x256, 4 heads of 32", case_attention_scaled, &at_typ, 0, 0},
    {"attention_kv scaled 0.61, decode at 7 of 12", case_attention_scaled, &kv_decode, 0, 0},
    {"attention soft-capped 1.5, GQA 4:2, documents", case_attention_capped, &at_gqa, 1, 0},
    {"attention soft-capped 1.5, GQA 3:1, window 5, documents, hd 16", case_attention_capped, &at_win, 1, 0},
    {"attention soft-capped 1.5, 2x256, 4 heads of 32", case_attention_capped, &at_typ, 0, 0},
    {"attention_kv soft-capped 1.5, prefill 5 of 16", case_attention_capped, &kv_prefill, 0, 0},
    {"attention_kv soft-capped 1.5, decode at 7 of 12, window 3", case_attention_capped, &kv_decode, 0, 0},
    {"attention sinks, GQA 4:2, documents", case_attention_sinks, &at_gqa, 1, 0},
    {"attention sinks, GQA 3:1, window 5, documents, hd 16", case_attention_sinks, &at_win, 1, 0},
    {"attention sinks, soft-capped 1.5, GQA 4:2, documents", case_attention_sinks_capped, &at_gqa, 1, 0},
    {"attention sinks 2x256, 4 heads of 32", case_attention_sinks, &at_typ, 0, 0},
    {"attention sinks, soft-capped 1.5, 2x256, 4 heads of 32", case_attention_sinks_capped, &at_typ, 0, 0},
    {"attention_kv sinks, prefill 5 of 16", case_attention_sinks, &kv_prefill, 0, 0},
    {"attention_kv sinks, decode at 7 of 12, window 3", case_attention_sinks, &kv_decode, 0, 0},
    {"attention sinks, values narrower (12 q/k, 8 v), GQA, documents", case_attention_vw_sinks, &av_narrow, 1, 0},
    {"attention values narrower (12 q/k, 8 v), GQA, documents", case_attention_vw, &av_narrow, 1, 0},
    {"attention values wider (8 q/k, 16 v), window 5", case_attention_vw, &av_wide, 1, 0},
    {"attention 2x256, 4 heads of 48 q/k and 32 v", case_attention_vw, &av_typ, 0, 0},
    {"attention_kv values narrower (16 q/k, 8 v), decode at 7", case_attention_vw, &av_kv, 0, 0},
    {"attention_qkv GQA, RoPE inside, documents", case_attention_qkv, &qkv_rope, 1, 0},
    {"attention_qkv no RoPE, window 4", case_attention_qkv, &qkv_plain, 1, 0},
    {"attention_qkv 2x256, 4 heads of 32, RoPE", case_attention_qkv, &qkv_typ, 0, 0},
    {"attention_kv prefill 5 of 16", case_attention_kv, &kv_prefill, 0, 0},
    {"attention_kv decode at 7 of 12, window 3", case_attention_kv, &kv_decode, 0, 0},
    {"embedding 37 ids, 23x19 table", case_embedding, &emb_odd, 1, 0},
    {"embedding, gradient into an accumulator", case_embedding, &emb_acc, 0, 0},
    {"embedding 37 ids, frozen bf16 23x19 table", case_embedding, &emb_frozen, 0, 0},
    {"embedding 512 ids, 258x128 table", case_embedding, &emb_typ, 0, 0},
    {"ce_linear 13x11, vocabulary 17", case_ce_linear, &ce_odd, 1, 0},
    {"ce_linear, dW into an accumulator", case_ce_linear, &ce_acc, 0, 0},
    {"ce_linear 13x11, vocabulary 17, frozen bf16 head (dh alone)", case_ce_linear, &ce_frozen, 1, 0},
    {"ce_linear 512x128, vocabulary 258, frozen bf16 head", case_ce_linear, &ce_frozen_typ, 0, 0},
    {"ce_linear 512x128, vocabulary 258", case_ce_linear, &ce_typ, 0, 0},
    {"ce_linear 13x11, vocabulary 17, logits soft-capped at 1.5", case_ce_linear, &ce_cap, 1, 0},
    {"ce_linear 512x128, vocabulary 258, capped at 2, dW accumulating", case_ce_linear, &ce_cap_typ, 0, 0},
    {"ce_linear 512x128, vocabulary 258, capped at 2, frozen bf16 head", case_ce_linear, &ce_cap_frozen, 0, 0},
    {"accum 13x8", case_accum, &acc_odd, 0, 0},
    {"sumsq 1001", case_sumsq, &sq_odd, 0, 0},
    {"sumsq 100003 (the cpu kernel's blocks of 4 streams, with tails)", case_sumsq, &sq_big, 0, 0},
    {"sumsq chained", case_sumsq, &sq_chain, 0, 0},
    {"clip_coef below the norm", case_clip_coef, &clip_no, 0, 0},
    {"clip_coef above the norm", case_clip_coef, &clip_yes, 0, 0},
    {"clip_coef without clipping", case_clip_coef, &clip_off, 0, 0},
    {"adamw 777", case_adamw, &adam_all, 0, 0},
    {"adamw 1000, decay on two ranges", case_adamw, &adam_decay, 0, 0},
    {"adamw 100003, decay on two ranges", case_adamw, &adam_typ, 0, 0},
    {"cast 37x19", case_cast, &row_odd, 0, 0},
    {"cast 512x128", case_cast, &row_typ, 0, 0},
    {"zero 37x19", case_zero, &row_odd, 0, 0},
    {"dropout 37x19, p 0.1", case_dropout, &do_odd, 1, 0},
    {"dropout 37x19, p 0.5, site 0", case_dropout, &do_half, 1, 0},
    {"dropout 512x128, p 0.05", case_dropout, &do_typ, 0, 0},
    {"dropout 512x384, p 0.9", case_dropout, &do_high, 0, 0},
    {"moe_route softmax top-2 of 8, normalised", case_moe_route, &rt_softmax, 1, 0},
    {"moe_route sigmoid top-3 of 8, bias, scale 2.5", case_moe_route, &rt_sigmoid, 1, 0},
    {"moe_route sigmoid top-4 of 16 in 2 of 4 groups, bias", case_moe_route, &rt_groups, 1, 0},
    {"head_slice the last 4 of 12, deinterleaved (RoPE pairs)", case_head, &hs_mid, 1, 0},
    {"head_slice 6 of 12, summed over 3 heads", case_head, &hs_sum, 1, 0},
    {"head_slice the first 5 of 7", case_head, &hs_first, 1, 0},
    {"head_slice 512 rows, 16 of 48, deinterleaved", case_head, &hs_typ, 0, 0},
    {"head_place 4 of 12, deinterleaved", case_head_place, &hs_mid, 1, 0},
    {"head_place 6 of 12, one row for every head", case_head_place, &hs_sum, 1, 0},
    {"head_concat 3 heads of 5 + 4", case_head, &hc_heads, 1, 0},
    {"head_concat 4 heads of 6 + one shared 2", case_head, &hc_bcast, 1, 0},
    {"moe_route skewed: half the experts never chosen", case_moe_route, &rt_skew, 1, 0},
    {"moe_route ties go to the lower expert", case_moe_route, &rt_ties, 0, 0},
    {"moe_route 512 tokens, top-2 of 8", case_moe_route, &rt_typ, 0, 0},
    {"moe_route with the scores' gradient too (sigmoid)", case_moe_route_scores, &rt_sigmoid, 1, 0},
    {"moe_route with the scores' gradient too (softmax)", case_moe_route_scores, &rt_softmax, 1, 0},
    {"moe_aux_loss balance (Switch/Mixtral) 37 tokens", case_moe_aux, &ax_balance, 1, 0},
    {"moe_aux_loss sequence-wise (DeepSeek-V3) 3 x 12", case_moe_aux, &ax_seq, 1, 0},
    {"moe_aux_loss router z-loss", case_moe_aux, &ax_z, 1, 0},
    {"moe_aux_loss balance 512 tokens", case_moe_aux, &ax_typ, 0, 0},
    {"moe_sort 37x2 over 8", case_moe_sort, &mr_odd, 0, 0},
    {"moe_sort 37x2, 5 of 8 experts empty", case_moe_sort, &mr_empty, 0, 0},
    {"moe_permute 37x19, gate on the input", case_moe_permute, &mr_odd, 1, 0},
    {"moe_permute 23x19 top-3, no gate", case_moe_permute, &mr_plain, 1, 0},
    {"moe_permute 512x128, gate", case_moe_permute, &mr_typ, 0, 0},
    {"moe_combine 37x19, gate", case_moe_combine, &mr_odd, 1, 0},
    {"moe_combine 37x19, empty experts", case_moe_combine, &mr_empty, 1, 0},
    {"moe_combine 23x19 top-3, no gate", case_moe_combine, &mr_plain, 1, 0},
    {"moe_combine 512x128, gate", case_moe_combine, &mr_typ, 0, 0},
    {"grouped_matmul nt 37 rows, 4 experts, one empty", case_grouped_matmul, &gm_nt, 1, 0},
    {"grouped_matmul nn 37 rows, 4 experts, one empty", case_grouped_matmul, &gm_nn, 1, 0},
    {"grouped_matmul, weight gradient into an accumulator", case_grouped_matmul, &gm_acc, 0, 0},
    {"grouped_matmul nt 40 rows of which 29 used", case_grouped_matmul, &gm_tail_nt, 1, 0},
    {"grouped_matmul nn 40 rows of which 29 used", case_grouped_matmul, &gm_tail_nn, 1, 0},
    {"grouped_matmul 29 of 40 rows, weight gradient accumulating", case_grouped_matmul, &gm_tail_acc, 0, 0},
    {"grouped_matmul 900 of 1024 rows x128 -> 768, 8 experts", case_grouped_matmul, &gm_tail_typ, 0, 0},
    {"swiglu fused gate/up, 29 of 40 rows x(2x19)", case_swiglu_rows, &sw_tail, 1, 0},
    {"swiglu fused gate/up, 900 of 1024 rows x(2x384)", case_swiglu_rows, &sw_tail_typ, 0, 0},
    {"swiglu clamped (GPT-OSS) 37x(2x19)", case_swiglu_clamp, &sw_all, 1, 0},
    {"swiglu clamped (GPT-OSS) 512x(2x384)", case_swiglu_clamp, &sw_all_typ, 0, 0},
    {"swiglu clamped (GPT-OSS), 29 of 40 rows x(2x19)", case_swiglu_clamp, &sw_tail, 1, 0},
    {"swiglu clamped (GPT-OSS), 900 of 1024 rows x(2x384)", case_swiglu_clamp, &sw_tail_typ, 0, 0},
    {"grouped_bias_add 37 rows x19, 4 experts, one empty", case_grouped_bias, &gm_nt, 1, 0},
    {"grouped_bias_add 29 of 40 rows x19, the rest passing", case_grouped_bias, &gm_tail_nn, 1, 0},
    {"grouped_bias_add 900 of 1024 rows x768, 8 experts", case_grouped_bias, &gm_tail_typ, 0, 0},
    {"row_gather 11 of 13 rows, some empty", case_row_gather, &ga_odd, 1, 0},
    {"row_gather 16 slots from 11 rows, a zero tail", case_row_gather, &ga_more, 1, 0},
    {"row_gather 1024x128, 900 received", case_row_gather, &ga_typ, 0, 0},
    {"moe_ep_plan 8 experts over 2 ranks, rank 0", case_moe_ep_plan, &pl_ep2_r0, 0, 0},
    {"moe_ep_plan 8 experts over 2 ranks, rank 1 (a full buffer)", case_moe_ep_plan, &pl_ep2_r1, 0, 0},
    {"moe_ep_plan 8 experts over 4 ranks, rank 2 receives nothing", case_moe_ep_plan, &pl_ep4_r2, 0, 0},
    {"moe_ep_plan 8 experts over 4 ranks, rank 3", case_moe_ep_plan, &pl_ep4_r3, 0, 0},
    {"row_gather by the plan: 4 sources regrouped expert-major", case_ep_regroup, &pl_ep4_r3, 1, 0},
    {"row_gather by the plan: 2 sources, rows of 7", case_ep_regroup, &pl_ep2_r1, 1, 0},
    {"row_gather by the plan: 4 sources, rows of 128", case_ep_regroup, &pl_ep4_r0, 0, 0},
    {"grouped_matmul 1024x128 -> 768, 8 experts (gate/up)", case_grouped_matmul, &gm_up, 0, 0},
    {"grouped_matmul 1024x384 -> 128, 8 experts (down)", case_grouped_matmul, &gm_down, 0, 0},
};
const size_t n_op_cases = sizeof op_cases / sizeof op_cases[0];

/* test_backend_ops.c — every op on every registered backend, in the manner of
 * ggml's test-backend-ops. Each case builds a small graph: the op's forward
 * node on random inputs and, for an op with a backward rule, the nodes that
 * rule emits for random upstream gradients (so the op table's backward rules
 * and the backward kernels are tested together). It runs
 *   - on each backend (cpu, ref) in each dtype the backend runs (fp32; bf16
 *     activations with fp32 weights, as mixed precision runs them), and
 *   - as its f64 twin (the same graph with every float f64) on ref,
 * and every output, and every input the op writes in place, must agree with
 * the f64 twin within the dtype's tolerance. On the small ("odd") shapes the
 * f64 twin's backward is checked against central finite differences of its
 * forward, so the reference itself is checked too. Typical shapes are the
 * default job's (debugmodel: dim 128, ffn 384, 4 heads of 32, vocabulary
 * 258, sequences of 256). At the end every op must have run on every backend.
 *
 * Adding an op: its op-table entry, a kernel in each backend's table, and a
 * case here (a `case_*` function and a row in `cases`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "graph/exec.h"
#include "harness.h"
#include "models/rope.h"

#define MAX_VALS 64

/* How the harness fills an input. */
typedef enum {
    F_ACT,    /* activation dtype (f32, bf16; f64 in the twin), normal * scale */
    F_W,      /* weight dtype (f32; f64 in the twin), normal * scale */
    F_W_POS,  /* weight dtype, |normal| * scale (AdamW's second moment) */
    F_F32,    /* always f32, normal * scale (+ offset) */
    F_F64,    /* always f64: the values given in `fixed` */
    F_FREQ,   /* always f32: RoPE inverse frequencies of head dim `a` */
    I_UNI,    /* i32 uniform in [a, b) */
    I_TGT,    /* i32 targets in [0, a), one in five ignored (-100) */
    I_DOC,    /* i32 document ids of a (B = a, T = b) batch */
    I_POS,    /* i32 positions restarting at each document of a (B = a, T = b) batch */
    I_FIXED,  /* i32 / i64: the values given in `fixed` */
    F_W_COLS, /* weight dtype, normal * scale + fixed[j % a]: a per-column offset (skewed router logits) */
} fill_kind;

typedef struct {
    fill_kind kind;
    double scale, offset;
    int a, b;
    const double *fixed;
} fill;

/* One graph being built: the harness context every case writes through. */
typedef struct {
    tt_graph *g;
    tt_dtype act, w;            /* the dtypes of activations and of weights */
    tt_value *in[MAX_VALS];     /* inputs in creation order */
    fill spec[MAX_VALS];
    int n_in;
    tt_node *fwd;               /* the node under test */
    tt_value *gin[16];          /* gradients its backward rule gave, per input */
    tt_value *dy[8];            /* the upstream gradients given, per output */
    double tol;                 /* a case's own tolerance (0: the dtype's) */
} hc;

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
static void case_gelu(hc *h, const void *p)
{
    const row_p *c = p;
    tt_gelu(h->g, act_in(h, "x", c->N, c->F, 1.5));
    forward_and_backward(h, last(h), 1);
}

typedef struct {
    int B, T, H, hd;
    double scale;
} rope_p;
static void case_rope(hc *h, const void *p)
{
    const rope_p *c = p;
    const int N = c->B * c->T;
    tt_value *x = act_in(h, "x", N, (int64_t)c->H * c->hd, 1);
    tt_value *pos = int_in(h, "pos", N, (fill){I_POS, 0, 0, c->B, c->T, NULL});
    tt_value *fr = input(h, "inv_freq", TT_F32, 1, (int64_t[]){c->hd / 2}, (fill){F_FREQ, 0, 0, c->hd, 0, NULL});
    tt_rope_scaled(h->g, x, pos, fr, c->H, c->hd, c->scale);
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
 * sqrt(hd) (Multi-head Latent Attention's YaRN scale), values c->dv wide */
static void scaled_attention(hc *h, const attn_v_p *c, int docs, double scale)
{
    const int N = c->B * c->T;
    tt_value *q = act_in(h, "q", N, (int64_t)c->H * c->hd, 1), *k = act_in(h, "k", N, (int64_t)c->Hk * c->hd, 1);
    tt_value *v = act_in(h, "v", N, (int64_t)c->Hk * c->dv, 1);
    if (c->Tmax) {
        tt_value *ck = input(h, "cache_k", h->act, 3, (int64_t[]){c->B, c->Tmax, (int64_t)c->Hk * c->hd},
                             (fill){F_ACT, 1, 0, 0, 0, NULL});
        tt_value *cv = input(h, "cache_v", h->act, 3, (int64_t[]){c->B, c->Tmax, (int64_t)c->Hk * c->dv},
                             (fill){F_ACT, 1, 0, 0, 0, NULL});
        tt_value *start = int_in(h, "start", 1, (fill){I_UNI, 0, 0, c->start, c->start + 1, NULL});
        tt_attention_kv_scaled(h->g, q, k, v, ck, cv, start, c->B, c->T, c->H, c->Hk, c->hd, c->window, scale);
        forward_and_backward(h, last(h), 0);
        return;
    }
    tt_value *doc = int_in(h, "doc", (int64_t)N, (fill){I_DOC, 0, docs ? 1 : 0, c->B, c->T, NULL});
    tt_attention_scaled(h->g, q, k, v, doc, c->B, c->T, c->H, c->Hk, c->hd, c->window, scale);
    forward_and_backward(h, last(h), 1);
}
static void case_attention_scaled(hc *h, const void *p)
{
    const attn_p *c = p;
    const attn_v_p v = {c->B, c->T, c->H, c->Hk, c->hd, c->hd, c->window, c->Tmax, c->start};
    scaled_attention(h, &v, c->docs, 0.61);
}
static void case_attention_vw(hc *h, const void *p) { scaled_attention(h, p, 1, 0.45); }
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
} emb_p;
static void case_embedding(hc *h, const void *p)
{
    const emb_p *c = p;
    tt_value *ids = int_in(h, "ids", c->N, (fill){I_UNI, 0, 0, 0, c->V, NULL});
    tt_embedding(h->g, ids, w_in(h, "table", 2, c->V, c->D, 1));
    tt_node *n = last(h);
    forward_and_backward(h, n, 1);
    if (c->acc && h->gin[1]) accumulate_into(h, h->gin[1]->producer, 0); /* the table's gradient into an accumulator */
}
static void case_ce_linear(hc *h, const void *p)
{
    const emb_p *c = p;
    tt_value *hh = act_in(h, "h", c->N, c->D, 1), *W = w_in(h, "W", 2, c->V, c->D, 0.5);
    tt_value *t = int_in(h, "targets", c->N, (fill){I_TGT, 0, 0, c->V, 0, NULL});
    tt_value *scale = input(h, "scale", h->w, 1, (int64_t[]){1}, (fill){F_W, 0, 0.37, 0, 0, NULL});
    tt_ce_linear(h->g, hh, W, t, scale, -100);
    tt_node *n = last(h);
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
    tt_adamw(h->g, pp, g, m, v, clip, hp, decay, 0.9, 0.95, 1e-8, 0.1);
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

typedef struct {
    const char *name;
    void (*build)(hc *h, const void *p);
    const void *p;
    int fd;          /* check the f64 twin against finite differences (small shapes) */
    double tol_bf16; /* 0: the default */
} test_case;

/* odd shapes: sizes that are no multiple of a vector width or a tile */
static const mm_p mm_nn = {37, 19, 23, 0, 0, 0}, mm_nt = {37, 19, 23, 0, 1, 0}, mm_tn = {37, 19, 23, 1, 0, 0},
                  mm_tt = {37, 19, 23, 1, 1, 0}, mm_acc = {19, 23, 37, 1, 0, 1},
                  /* typical: the default job's q/k/v and MLP products, 2 sequences of 256 */
                  mm_fwd = {512, 384, 128, 0, 1, 0}, mm_dx = {512, 128, 384, 0, 0, 0}, mm_dw = {384, 128, 512, 1, 0, 1};
static const row_p row_odd = {37, 19, 19, 0}, row_typ = {512, 128, 384, 0}, row_group = {37, 64, 0, 16},
                   row_fused = {37, 0, 19, 1}, row_fused_typ = {512, 0, 384, 1};
static const rope_p rope_odd = {2, 7, 3, 8, 0.75}, rope_typ = {2, 256, 4, 32, 1.0};
static const attn_p at_gqa = {2, 13, 4, 2, 8, 0, 1, 0, 0, 0}, at_win = {1, 17, 3, 1, 16, 5, 1, 0, 0, 0},
                    at_plain = {1, 9, 1, 1, 6, 0, 0, 0, 0, 0}, at_typ = {2, 256, 4, 4, 32, 0, 0, 0, 0, 0},
                    qkv_rope = {2, 13, 4, 2, 8, 0, 1, 1, 0, 0}, qkv_plain = {1, 11, 2, 2, 16, 4, 1, 0, 0, 0},
                    qkv_typ = {2, 256, 4, 4, 32, 0, 0, 1, 0, 0}, kv_prefill = {1, 5, 4, 2, 8, 0, 0, 0, 16, 0},
                    kv_decode = {2, 1, 4, 2, 16, 3, 0, 0, 12, 7};
static const emb_p emb_odd = {37, 19, 23, 0}, emb_acc = {29, 11, 13, 1}, emb_typ = {512, 128, 258, 1},
                   ce_odd = {13, 11, 17, 0}, ce_acc = {9, 7, 5, 1}, ce_typ = {512, 128, 258, 1};
static const opt_p acc_odd = {104, 0, 0}, sq_odd = {1001, 0, 0}, sq_chain = {37, 1, 0}, clip_no = {1, 0, 1.0},
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
static const swiglu_rows_p sw_tail = {40, 19, 4, off_tail}, sw_tail_typ = {1024, 384, 8, off_typ_tail};
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

static const test_case cases[] = {
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
    {"gelu 37x19", case_gelu, &row_odd, 1, 0},
    {"gelu 512x384", case_gelu, &row_typ, 0, 0},
    {"rope 2x7 tokens, 3 heads of 8, scale 0.75", case_rope, &rope_odd, 1, 0},
    {"rope 2x256 tokens, 4 heads of 32", case_rope, &rope_typ, 0, 0},
    {"attention GQA 4:2, documents", case_attention, &at_gqa, 1, 0},
    {"attention GQA 3:1, window 5, documents, hd 16", case_attention, &at_win, 1, 0},
    {"attention one head, hd 6", case_attention, &at_plain, 1, 0},
    {"attention 2x256, 4 heads of 32", case_attention, &at_typ, 0, 0},
    {"attention scaled 0.61, GQA 4:2, documents", case_attention_scaled, &at_gqa, 1, 0},
    {"attention scaled 0.61, 2x256, 4 heads of 32", case_attention_scaled, &at_typ, 0, 0},
    {"attention_kv scaled 0.61, decode at 7 of 12", case_attention_scaled, &kv_decode, 0, 0},
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
    {"embedding 512 ids, 258x128 table", case_embedding, &emb_typ, 0, 0},
    {"ce_linear 13x11, vocabulary 17", case_ce_linear, &ce_odd, 1, 0},
    {"ce_linear, dW into an accumulator", case_ce_linear, &ce_acc, 0, 0},
    {"ce_linear 512x128, vocabulary 258", case_ce_linear, &ce_typ, 0, 0},
    {"accum 13x8", case_accum, &acc_odd, 0, 0},
    {"sumsq 1001", case_sumsq, &sq_odd, 0, 0},
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
#define N_CASES (sizeof cases / sizeof cases[0])

/* ---- running ------------------------------------------------------------------ */

static tt_dtype weight_dtype(tt_dtype act) { return act == TT_F64 ? TT_F64 : TT_F32; }

static int build(hc *h, const test_case *tc, tt_dtype act)
{
    memset(h, 0, sizeof *h);
    h->g = tt_graph_new();
    h->act = act;
    h->w = weight_dtype(act);
    h->g->act_dtype = act;
    tc->build(h, tc->p);
    return h->g->failed || !h->fwd ? -1 : 0;
}

static double round_to(double x, tt_dtype dt)
{
    return dt == TT_BF16 ? tt_bf16_to_f32(tt_f32_to_bf16((float)x)) : dt == TT_F32 ? (float)x : x;
}

/* The host data of every input of one (case, dtype) run, in double (ints as
 * doubles), rounded to the dtype the input has in the tested graph so both
 * graphs see the same numbers. */
static double **make_inputs(const hc *h, uint64_t seed)
{
    double **d = th_alloc((size_t)h->n_in, sizeof *d);
    tt_rng r = {seed, 0};
    for (int i = 0; i < h->n_in; i++) {
        const tt_value *v = h->in[i];
        const fill *f = &h->spec[i];
        const int64_t n = tt_value_numel(v);
        const int T = f->b > 0 ? f->b : 1;
        double *x = d[i] = th_alloc((size_t)n, sizeof(double));
        float fr[512];
        if (f->kind == F_FREQ) tt_rope_inv_freq(&(tt_rope_params){10000.0, 0, 0, 0, 0, 0}, f->a, fr);
        for (int64_t j = 0; j < n; j++) {
            const int t = (int)(j % T);
            switch (f->kind) {
            case F_ACT:
            case F_W:
            case F_F32: x[j] = f->scale * tt_rng_normal(&r) + f->offset; break;
            case F_W_POS: x[j] = f->scale * fabs(tt_rng_normal(&r)); break;
            case F_F64:
            case I_FIXED: x[j] = f->fixed[j]; break;
            case F_FREQ: x[j] = fr[j]; break;
            case F_W_COLS: x[j] = f->scale * tt_rng_normal(&r) + f->fixed[j % f->a]; break;
            case I_UNI: x[j] = f->a + (double)tt_rng_below(&r, (uint64_t)(f->b - f->a)); break;
            case I_TGT: x[j] = tt_rng_below(&r, 5) == 0 ? -100 : (double)tt_rng_below(&r, (uint64_t)f->a); break;
            case I_DOC: /* offset 1: a new document starts at a token with probability 1/4; 0: one per row */
                x[j] = t == 0 ? 100.0 * (double)(j / T) : x[j - 1] + (f->offset > 0 && tt_rng_below(&r, 4) == 0);
                break;
            case I_POS: x[j] = t == 0 || tt_rng_below(&r, 4) == 0 ? 0 : x[j - 1] + 1; break; /* restarting at documents */
            }
        }
        for (int64_t j = 0; j < n; j++) x[j] = round_to(x[j], v->dtype);
    }
    return d;
}

static void free_inputs(double **d, int n)
{
    for (int i = 0; i < n; i++) free(d[i]);
    free(d);
}

/* Host bytes of n doubles as dtype dt. */
static void *pack(const double *x, int64_t n, tt_dtype dt)
{
    void *p = th_alloc((size_t)n, tt_dtype_size(dt));
    for (int64_t j = 0; j < n; j++) switch (dt) {
        case TT_F32: ((float *)p)[j] = (float)x[j]; break;
        case TT_F64: ((double *)p)[j] = x[j]; break;
        case TT_BF16: ((uint16_t *)p)[j] = tt_f32_to_bf16((float)x[j]); break;
        case TT_I32: ((int32_t *)p)[j] = (int32_t)x[j]; break;
        case TT_I64: ((int64_t *)p)[j] = (int64_t)x[j]; break;
        default: break;
        }
    return p;
}

static double *unpack(const void *p, int64_t n, tt_dtype dt)
{
    double *x = th_alloc((size_t)n, sizeof *x);
    for (int64_t j = 0; j < n; j++)
        x[j] = dt == TT_F32    ? ((const float *)p)[j]
               : dt == TT_F64  ? ((const double *)p)[j]
               : dt == TT_BF16 ? tt_bf16_to_f32(((const uint16_t *)p)[j])
               : dt == TT_I64  ? (double)((const int64_t *)p)[j]
                               : ((const int32_t *)p)[j];
    return x;
}

static int write_inputs(tt_exec *e, const hc *h, double *const *d)
{
    int rc = 0;
    for (int i = 0; i < h->n_in && !rc; i++) {
        const tt_value *v = h->in[i];
        void *p = pack(d[i], tt_value_numel(v), v->dtype);
        rc = tt_exec_write(e, v, p, tt_value_bytes(v));
        free(p);
    }
    return rc;
}

/* What a run leaves to compare: each output of the graph and each input an
 * op writes in place, as doubles, by value id (the twin graphs' ids match). */
typedef struct {
    double *val[4096];
    int n_values;
} result;

static int is_result(const tt_graph *g, const tt_value *v)
{
    if (v->is_output) return 1;
    for (int i = 0; i < g->n_nodes; i++) { /* written in place */
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == v && ((tt_ops[n->op]->writes_ins >> k) & 1)) return 1;
    }
    return 0;
}

static int run_graph(const hc *h, const tt_backend *be, double *const *d, result *res)
{
    memset(res, 0, sizeof *res);
    res->n_values = h->g->n_values;
    tt_exec *e = tt_exec_new(h->g, be, NULL, TT_EXEC_GRAPH);
    int rc = !e || write_inputs(e, h, d) || tt_exec_run(e);
    for (int v = 0; v < h->g->n_values && !rc && v < 4096; v++) {
        const tt_value *x = h->g->values[v];
        if (!is_result(h->g, x)) continue;
        void *p = th_alloc(tt_value_bytes(x) + 1, 1);
        if (!(rc = tt_exec_read(e, x, p, tt_value_bytes(x)))) res->val[v] = unpack(p, tt_value_numel(x), x->dtype);
        free(p);
    }
    tt_exec_free(e);
    return rc;
}

static void free_result(result *r)
{
    for (int v = 0; v < r->n_values && v < 4096; v++) free(r->val[v]);
}

/* max |got - want| / max |want|: one number per value, whatever its scale;
 * the same infinity on both sides (attention's -inf logsumexp) is agreement */
static double rel_err(const double *got, const double *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t j = 0; j < n; j++) {
        if (isinf(want[j]) && got[j] == want[j]) continue;
        const double d = fabs(got[j] - want[j]);
        if (!(d <= num)) num = d; /* NaN wins */
        if (isfinite(want[j]) && fabs(want[j]) > den) den = fabs(want[j]);
    }
    return num / (den > 1e-30 ? den : 1.0);
}

static int ran[8][TT_OP_COUNT];
static const char *const backend_names[] = {"cpu", "ref"};

static int supported(const hc *h, const tt_backend *be)
{
    for (int i = 0; i < h->g->n_nodes; i++)
        if (!be->supports(h->g->nodes[i]->op, tt_node_dtype(h->g->nodes[i]))) return 0;
    return 1;
}

/* Backend be in dtype dt against the f64 twin, on the same inputs. */
static void check_backend(const test_case *tc, int bi, tt_dtype dt, double *const *d, const hc *twin, const result *want)
{
    const tt_backend *be = tt_backend_get(backend_names[bi]);
    hc h;
    CHECK_MSG(build(&h, tc, dt) == 0 && h.g->n_values == twin->g->n_values, "%s (%s): the case did not build: %s",
              tc->name, tt_dtype_name(dt), tt_last_error());
    if (h.g->failed || h.g->n_values != twin->g->n_values || !supported(&h, be)) {
        tt_graph_free(h.g);
        return;
    }
    result got;
    const int rc = run_graph(&h, be, d, &got);
    CHECK_MSG(rc == 0, "%s on %s in %s: %s", tc->name, be->name, tt_dtype_name(dt), tt_last_error());
    const double tol = dt == TT_BF16 ? (tc->tol_bf16 > 0 ? tc->tol_bf16 : 2e-2) : 2e-5;
    double worst = 0;
    for (int v = 0; !rc && v < h.g->n_values && v < 4096; v++) {
        if (!want->val[v] || !got.val[v]) continue;
        const double err = rel_err(got.val[v], want->val[v], tt_value_numel(h.g->values[v]));
        /* a bf16 value (a cast's output in an f32 case) holds what bf16 can */
        const double tol_v = h.g->values[v]->dtype == TT_BF16 && tol < 4e-3 ? 4e-3 : tol;
        char desc[96];
        CHECK_MSG(err <= tol_v, "%s on %s in %s: value %d '%s' %s differs from the f64 reference by %.3g (tolerance %.3g)",
                  tc->name, be->name, tt_dtype_name(dt), v, h.g->values[v]->name,
                  tt_value_desc(h.g->values[v], desc, sizeof desc), err, tol_v);
        if (err > worst) worst = err;
    }
    if (!rc)
        for (int i = 0; i < h.g->n_nodes; i++) ran[bi][h.g->nodes[i]->op]++;
    if (getenv("TITAN_TEST_VERBOSE"))
        printf("  %-55s %-4s %-5s max rel err %.2e\n", tc->name, be->name, tt_dtype_name(dt), worst);
    free_result(&got);
    tt_graph_free(h.g);
}

/* The f64 twin's backward against central differences of its forward:
 * L = sum over the outputs given upstream gradients of <out, dy> (a loss op:
 * the loss), at up to 12 elements of each input that has a gradient. */
static void check_fd(const test_case *tc, const hc *twin, double **d, const result *at)
{
    const tt_backend *ref = tt_backend_get("ref");
    const tt_node *n = twin->fwd;
    /* the upstream gradients' host data, by output */
    const double *dy[8] = {0};
    for (int k = 0; k < n->n_out && k < 8; k++)
        for (int i = 0; i < twin->n_in; i++)
            if (twin->dy[k] && twin->in[i] == twin->dy[k]) dy[k] = d[i];
    tt_rng pick = {77, 0};
    for (int j = 0; j < n->n_in; j++) {
        const tt_value *x = n->in[j], *gx = twin->gin[j];
        if (!gx || x->role != TT_ROLE_INPUT || x->dtype != TT_F64 || !at->val[gx->id]) continue;
        int slot = -1;
        for (int i = 0; i < twin->n_in; i++)
            if (twin->in[i] == x) slot = i;
        if (slot < 0) continue;
        const int64_t cnt = tt_value_numel(x);
        const double *an = at->val[gx->id];
        double mag = 0, err = 0;
        for (int64_t e = 0; e < cnt; e++) mag = fmax(mag, fabs(an[e]));
        for (int s = 0; s < 12 && s < cnt; s++) {
            const int64_t e = cnt <= 12 ? s : (int64_t)tt_rng_below(&pick, (uint64_t)cnt);
            const double keep = d[slot][e], eps = 1e-6;
            double L[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                d[slot][e] = keep + (sgn ? -eps : eps);
                result r;
                if (run_graph(twin, ref, d, &r)) {
                    CHECK_MSG(0, "%s: finite differences: %s", tc->name, tt_last_error());
                    free_result(&r);
                    d[slot][e] = keep;
                    return;
                }
                L[sgn] = 0;
                if (tt_ops[n->op]->flags & TT_OPF_LOSS) L[sgn] = r.val[n->out[0]->id][0];
                else
                    for (int k = 0; k < n->n_out; k++) {
                        if (!dy[k] || !r.val[n->out[k]->id]) continue;
                        const double *o = r.val[n->out[k]->id];
                        for (int64_t q = 0; q < tt_value_numel(n->out[k]); q++) L[sgn] += o[q] * dy[k][q];
                    }
                free_result(&r);
            }
            d[slot][e] = keep;
            const double diff = fabs((L[0] - L[1]) / (2 * eps) - an[e]);
            if (!(diff <= err)) err = diff;
        }
        CHECK_MSG(mag > 1e-3 && err <= 1e-6 * mag, "%s: gradient of input %d ('%s') off finite differences by %.3g "
                                                   "(max |grad| %.3g)",
                  tc->name, j, x->name, err, mag);
    }
}

static void run_case(size_t ci)
{
    const test_case *tc = &cases[ci];
    const tt_backend *ref = tt_backend_get("ref");
    static const tt_dtype dts[] = {TT_F32, TT_BF16};
    for (int di = 0; di < 2; di++) {
        const tt_dtype dt = dts[di];
        hc tested, twin;
        /* the inputs as the tested dtype rounds them, shared by both graphs */
        const int bad = build(&tested, tc, dt) | build(&twin, tc, TT_F64);
        if (bad) {
            CHECK_MSG(0, "%s (%s): the case did not build: %s", tc->name, tt_dtype_name(dt), tt_last_error());
            tt_graph_free(tested.g);
            tt_graph_free(twin.g);
            return;
        }
        double **d = make_inputs(&tested, 1000 + 17 * ci + (uint64_t)di);
        result want;
        const int rc = run_graph(&twin, ref, d, &want);
        CHECK_MSG(rc == 0, "%s: the f64 reference failed: %s", tc->name, tt_last_error());
        if (!rc)
            for (int bi = 0; bi < 2; bi++) check_backend(tc, bi, dt, d, &twin, &want);
        if (!rc && di == 0 && tc->fd) check_fd(tc, &twin, d, &want);
        free_result(&want);
        free_inputs(d, tested.n_in);
        tt_graph_free(tested.g);
        tt_graph_free(twin.g);
    }
}

/* AdamW's step 3 from m = 0.1, v = 0.01, g = 0.2 clipped by 0.5 (hand-computed:
 * mhat = 0.1 / (1 - 0.9^3), vhat = 0.01 / (1 - 0.95^3), p = 0.5 - 0.01 (mhat /
 * (sqrt(vhat) + 1e-8) + 0.1 * 0.5) = 0.48556430856999505), on each backend. */
static void test_adamw_hand(void)
{
    for (int bi = 0; bi < 2; bi++) {
        const tt_backend *be = tt_backend_get(backend_names[bi]);
        tt_graph *g = tt_graph_new();
        const int64_t one = 1, two = 2;
        tt_value *v[6];
        for (int i = 0; i < 4; i++) v[i] = tt_graph_input(g, "x", TT_F32, 1, &one);
        v[4] = tt_graph_input(g, "clip", TT_F32, 1, &one);
        v[5] = tt_graph_input(g, "hp", TT_F64, 1, &two);
        tt_adamw(g, v[0], v[1], v[2], v[3], v[4], v[5], NULL, 0.9, 0.95, 1e-8, 0.1);
        tt_exec *e = tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
        const float pgmvc[5] = {0.5f, 0.2f, 0.1f, 0.01f, 0.5f};
        const double hp[2] = {1e-2, 3};
        int rc = !e;
        for (int i = 0; i < 5 && !rc; i++) rc = tt_exec_write(e, v[i], &pgmvc[i], sizeof(float));
        float p = 0, gr = 1;
        if (!rc) rc = tt_exec_write(e, v[5], hp, sizeof hp) || tt_exec_run(e) || tt_exec_read(e, v[0], &p, sizeof p) ||
                      tt_exec_read(e, v[1], &gr, sizeof gr);
        CHECK_MSG(rc == 0, "adamw on %s: %s", be->name, tt_last_error());
        CHECK_MSG(fabs(p - 0.48556430856999505) < 1e-6, "adamw step 3 on %s: p = %.9g", be->name, p);
        CHECK_MSG(gr == 0, "adamw on %s: the gradient is not zeroed (%g)", be->name, gr);
        tt_exec_free(e);
        tt_graph_free(g);
    }
}

/* One node's graph on a backend: inputs written, run, outputs read; the run's status. */
typedef struct {
    tt_value *v;
    void *data;
} host_val;
static tt_err run_one(tt_graph *g, const tt_backend *be, const host_val *in, int n_in, const host_val *out, int n_out)
{
    for (int k = 0; k < n_out; k++) tt_graph_mark_output(g, out[k].v);
    tt_exec *e = g->failed ? NULL : tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
    tt_err rc = !e;
    for (int k = 0; k < n_in && !rc; k++) rc = tt_exec_write(e, in[k].v, in[k].data, tt_value_bytes(in[k].v));
    if (!rc) rc = tt_exec_run(e);
    for (int k = 0; k < n_out && !rc; k++) rc = tt_exec_read(e, out[k].v, out[k].data, tt_value_bytes(out[k].v));
    tt_exec_free(e);
    return rc;
}

/* moe_ep_plan on one rank of a hand-made example: E = 4 experts over 2 ranks, rows of 2 elements, a buffer of
 * 7 rows. Rank 0 has (1, 1, 0, 3) rows for experts 0..3, rank 1 (2, 1, 2, 0). Rank 0 (experts 0, 1) receives
 * source-major [s0e0, s0e1, s1e0, s1e0, s1e1]; expert-major that is [s0e0, s1e0, s1e0, s0e1, s1e1]. Rank 1
 * (experts 2, 3) receives [s0e3 x3, s1e2 x2], expert-major [s1e2 x2, s0e3 x3]. */
static const int32_t ep_hand_offs[10] = {0, 1, 2, 2, 5, /* rank 1 */ 0, 2, 3, 5, 5};
static const struct {
    int64_t counts[4][2]; /* scounts, sdispls, rcounts, rdispls */
    int32_t loc_off[3], to_src[7], to_exp[7];
} ep_hand_want[2] = {
    {{{4, 6}, {0, 4}, {4, 6}, {0, 4}}, {0, 3, 5}, {0, 2, 3, 1, 4, -1, -1}, {0, 3, 1, 2, 4, -1, -1}},
    {{{6, 4}, {0, 6}, {6, 4}, {0, 6}}, {0, 2, 5}, {3, 4, 0, 1, 2, -1, -1}, {2, 3, 4, 0, 1, -1, -1}},
};
static tt_err ep_plan_hand(const tt_backend *be, const int32_t *offs, int rank, int64_t recv_rows, int64_t counts[4][2],
                           int32_t *loc_off, int32_t *to_src, int32_t *to_exp)
{
    tt_graph *g = tt_graph_new();
    const int64_t n = 10;
    tt_value *in = tt_graph_input(g, "offs_all", TT_I32, 1, &n), *c[4] = {0}, *lo = NULL, *ts = NULL, *te = NULL;
    const tt_moe_ep_attrs a = {4, 2, rank, 2, recv_rows};
    tt_err rc = tt_moe_ep_plan(g, in, &a, c, &lo, &ts, &te);
    if (!rc) {
        const host_val ins[] = {{in, (void *)offs}};
        const host_val outs[] = {{c[0], counts[0]}, {c[1], counts[1]}, {c[2], counts[2]}, {c[3], counts[3]},
                                 {lo, loc_off}, {ts, to_src}, {te, to_exp}};
        rc = run_one(g, be, ins, 1, outs, 7);
    }
    tt_graph_free(g);
    return rc;
}

/* row_gather of x (3, 2) = {1, ..., 6} by idx (2) with inverse inv (3) into yd (2, 2): the run's status */
static tt_err row_gather_run(const tt_backend *be, const int32_t *idx, const int32_t *inv, float *yd)
{
    tt_graph *g = tt_graph_new();
    const int64_t xs[2] = {3, 2}, two = 2, three = 3;
    tt_value *x = tt_graph_input(g, "x", TT_F32, 2, xs), *vi = tt_graph_input(g, "idx", TT_I32, 1, &two);
    tt_value *vv = tt_graph_input(g, "inv", TT_I32, 1, &three), *y = tt_row_gather(g, x, vi, vv);
    const float xd[6] = {1, 2, 3, 4, 5, 6};
    const host_val ins[] = {{x, (void *)xd}, {vi, (void *)idx}, {vv, (void *)inv}};
    const host_val outs[] = {{y, yd}};
    const tt_err rc = y ? run_one(g, be, ins, 3, outs, 1) : -1;
    tt_graph_free(g);
    return rc;
}

/* Output y's node writes instead a new graph input of its shape (returned), which the host can fill first. */
static tt_value *into_input(tt_graph *g, tt_value *y, const char *name)
{
    tt_value *v = y ? tt_graph_input(g, name, y->dtype, y->ndim, y->shape) : NULL;
    if (v) {
        tt_node *n = y->producer;
        const int k = y->out_index;
        y->producer = NULL, n->out[k] = v, v->producer = n, v->out_index = k;
    }
    return v;
}

/* swiglu over the 3 rows of 5 its offsets bound, forward and backward, into outputs that held NaN: the rows
 * computed as silu(a) b and its gradient, the tail written zero (fresh memory is zero, so the harness's cases
 * alone would not see a kernel skip it), the input's tail (NaN) never read. */
static void test_swiglu_tail(void)
{
    enum { N = 5, F = 2, used = 3 };
    for (int bi = 0; bi < 2; bi++) {
        const tt_backend *be = tt_backend_get(backend_names[bi]);
        tt_graph *g = tt_graph_new();
        const int64_t abs_[2] = {N, 2 * F}, ys[2] = {N, F}, ne = 3;
        tt_value *ab = tt_graph_input(g, "ab", TT_F32, 2, abs_), *dy = tt_graph_input(g, "dy", TT_F32, 2, ys);
        tt_value *off = tt_graph_input(g, "offsets", TT_I32, 1, &ne);
        tt_value *y = tt_swiglu_fused_rows(g, ab, off);
        tt_value *gout[1] = {dy}, *gin[2] = {NULL, NULL}; /* the backward its rule emits */
        if (y) tt_ops[TT_OP_SWIGLU]->backward(g, y->producer, gout, gin);
        tt_value *dab = gin[0];
        tt_value *yb = into_input(g, y, "y"), *db = into_input(g, dab, "dab");
        float abd[N * 2 * F], dyd[N * F], yd[N * F], dd[N * 2 * F];
        const int32_t od[3] = {0, 1, used};
        for (int i = 0; i < N * 2 * F; i++) abd[i] = i < used * 2 * F ? (float)(i % 5 - 2) * 0.5f : NAN, dd[i] = NAN;
        for (int i = 0; i < N * F; i++) dyd[i] = i < used * F ? (float)(i % 3 + 1) : NAN, yd[i] = NAN;
        const host_val ins[] = {{ab, abd}, {dy, dyd}, {off, (void *)od}, {yb, yd}, {db, dd}};
        const host_val outs[] = {{yb, yd}, {db, dd}};
        const tt_err rc = yb && db ? run_one(g, be, ins, 5, outs, 2) : -1;
        CHECK_MSG(rc == 0, "swiglu over bounded rows on %s: %s", be->name, tt_last_error());
        for (int r = 0; r < N && !rc; r++)
            for (int j = 0; j < F; j++) {
                const double a = abd[r * 2 * F + j], b = abd[r * 2 * F + F + j], s = 1 / (1 + exp(-a));
                const double want = r < used ? a * s * b : 0, dwa = r < used ? dyd[r * F + j] * b * s * (1 + a * (1 - s)) : 0,
                             dwb = r < used ? dyd[r * F + j] * a * s : 0;
                CHECK_MSG(fabs(yd[r * F + j] - want) <= 1e-6 && fabs(dd[r * 2 * F + j] - dwa) <= 1e-5 &&
                              fabs(dd[r * 2 * F + F + j] - dwb) <= 1e-5,
                          "swiglu over bounded rows on %s: row %d col %d: y %g (want %g), da %g (%g), db %g (%g)",
                          be->name, r, j, yd[r * F + j], want, dd[r * 2 * F + j], dwa, dd[r * 2 * F + F + j], dwb);
            }
        tt_graph_free(g);
    }
}

/* grouped_matmul and its weight gradient on a receive buffer of 5 rows of which 3 arrived (offsets {0, 1, 3}),
 * its tail NaN (what a buffer that nothing wrote may hold): y's tail must be written zero over the NaN it held
 * (fresh memory is zero, so the harness's cases alone would not see a kernel skip it), and neither op may read
 * the tail. */
static void test_grouped_matmul_tail(void)
{
    enum { M = 5, K = 2, Nw = 3, E = 2, used = 3 };
    for (int bi = 0; bi < 2; bi++) {
        const tt_backend *be = tt_backend_get(backend_names[bi]);
        tt_graph *g = tt_graph_new();
        const int64_t xs[2] = {M, K}, ws[3] = {E, Nw, K}, ys[2] = {M, Nw}, ne = E + 1;
        tt_value *x = tt_graph_input(g, "x", TT_F32, 2, xs), *w = tt_graph_input(g, "w", TT_F32, 3, ws);
        tt_value *off = tt_graph_input(g, "offsets", TT_I32, 1, &ne), *b = tt_graph_input(g, "b", TT_F32, 2, ys);
        tt_value *y = tt_grouped_matmul(g, x, w, off, 1), *dw = tt_grouped_matmul_wgrad(g, x, b, off, E, TT_F32);
        tt_value *yb = into_input(g, y, "y"); /* y into a value the host fills with NaN first */
        float xd[M * K], wd[E * Nw * K], bd[M * Nw], yd[M * Nw], dwd[E * K * Nw];
        const int32_t od[E + 1] = {0, 1, used};
        for (int i = 0; i < M * K; i++) xd[i] = i < used * K ? (float)(i % 5 - 2) : NAN;
        for (int i = 0; i < E * Nw * K; i++) wd[i] = (float)(i % 3 + 1);
        for (int i = 0; i < M * Nw; i++) bd[i] = i < used * Nw ? (float)(i % 4 - 1) : NAN, yd[i] = NAN;
        const host_val ins[] = {{x, xd}, {w, wd}, {off, (void *)od}, {b, bd}, {yb, yd}};
        const host_val outs[] = {{yb, yd}, {dw, dwd}};
        const tt_err rc = y && dw ? run_one(g, be, ins, 5, outs, 2) : -1;
        CHECK_MSG(rc == 0, "grouped_matmul with a tail on %s: %s", be->name, tt_last_error());
        for (int r = 0; r < M && !rc; r++) { /* y[r] = x[r] w[e]^T for its expert e, zero past the rows used */
            const int e = r < od[1] ? 0 : 1;
            for (int j = 0; j < Nw; j++) {
                double want = 0;
                for (int k = 0; r < used && k < K; k++) want += (double)xd[r * K + k] * wd[(e * Nw + j) * K + k];
                CHECK_MSG(yd[r * Nw + j] == want, "grouped_matmul with a tail on %s: y[%d][%d] = %g, want %g", be->name,
                          r, j, yd[r * Nw + j], want);
            }
        }
        for (int e = 0; e < E && !rc; e++) /* dw[e] = x_e^T b_e over its rows alone */
            for (int k = 0; k < K; k++)
                for (int j = 0; j < Nw; j++) {
                    double want = 0;
                    for (int r = od[e]; r < od[e + 1]; r++) want += (double)xd[r * K + k] * bd[r * Nw + j];
                    const float got = dwd[(e * K + k) * Nw + j];
                    CHECK_MSG(got == want, "grouped_matmul_wgrad with a tail on %s: dw[%d][%d][%d] = %g, want %g",
                              be->name, e, k, j, got, want);
                }
        tt_graph_free(g);
    }
}

/* Expert parallelism's ops against numbers worked out by hand (cpu and ref agreeing with each other would not
 * catch a misunderstanding both share), and the runs that must fail. */
static void test_expert_parallel_hand(void)
{
    for (int bi = 0; bi < 2; bi++) {
        const tt_backend *be = tt_backend_get(backend_names[bi]);
        for (int r = 0; r < 2; r++) {
            int64_t counts[4][2];
            int32_t loc_off[3], to_src[7], to_exp[7];
            const tt_err rc = ep_plan_hand(be, ep_hand_offs, r, 7, counts, loc_off, to_src, to_exp);
            CHECK_MSG(rc == 0, "moe_ep_plan by hand on %s, rank %d: %s", be->name, r, tt_last_error());
            if (rc) continue;
            CHECK_MSG(memcmp(counts, ep_hand_want[r].counts, sizeof counts) == 0 &&
                          memcmp(loc_off, ep_hand_want[r].loc_off, sizeof loc_off) == 0 &&
                          memcmp(to_src, ep_hand_want[r].to_src, sizeof to_src) == 0 &&
                          memcmp(to_exp, ep_hand_want[r].to_exp, sizeof to_exp) == 0,
                      "moe_ep_plan by hand on %s, rank %d: the plan differs from the hand-worked one", be->name, r);
        }
        /* rank 1 receives 5 rows: a buffer of 4 is too small */
        int64_t counts[4][2];
        int32_t loc_off[3], to_src[4], to_exp[4];
        tt_err rc = ep_plan_hand(be, ep_hand_offs, 1, 4, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "receives 5 token rows, more than its receive buffer's 4"),
                  "moe_ep_plan on %s: an overfull buffer gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        const int32_t falling[10] = {0, 1, 2, 2, 5, 0, 3, 2, 5, 5}, late[10] = {1, 1, 2, 2, 5, 0, 2, 3, 5, 5};
        rc = ep_plan_hand(be, falling, 0, 7, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "rank 1's offsets fall at expert 1"),
                  "moe_ep_plan on %s: falling offsets gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = ep_plan_hand(be, late, 0, 7, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "rank 0's expert offsets start at 1"),
                  "moe_ep_plan on %s: offsets not starting at 0 gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        /* row_gather: an index past the rows, one below -1, an inverse that is not one */
        const int32_t past[2] = {0, 3}, below[2] = {-2, 0}, good[2] = {2, -1}, inv_good[3] = {-1, -1, 0},
                      inv_bad[3] = {-1, 1, 0}, inv0[3] = {0, -1, -1}, inv1[3] = {1, -1, -1};
        float y[4] = {-1, -1, -1, -1};
        rc = row_gather_run(be, good, inv_good, y);
        CHECK_MSG(rc == 0 && y[0] == 5 && y[1] == 6 && y[2] == 0 && y[3] == 0, "row_gather on %s: %s (%g %g %g %g)",
                  be->name, rc ? tt_last_error() : "ok", y[0], y[1], y[2], y[3]);
        rc = row_gather_run(be, past, inv0, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "index 3 at 1 is outside [-1, 3)"),
                  "row_gather on %s: index 3 of 3 rows gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = row_gather_run(be, below, inv1, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "index -2 at 0 is outside [-1, 3)"),
                  "row_gather on %s: index -2 gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = row_gather_run(be, good, inv_bad, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "inverse index 1 at 1"),
                  "row_gather on %s: a broken inverse gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
    }
}

int main(void)
{
    const double t0 = tt_now();
    for (size_t c = 0; c < N_CASES; c++) run_case(c);
    test_adamw_hand();
    test_expert_parallel_hand();
    test_grouped_matmul_tail();
    test_swiglu_tail();
    /* every op ran on every backend that has a kernel for it */
    for (int bi = 0; bi < 2; bi++) {
        const tt_backend *be = tt_backend_get(backend_names[bi]);
        for (int op = 0; op < TT_OP_COUNT; op++) {
            if (tt_ops[op]->flags & TT_OPF_COMM) continue; /* collectives run on the dist layer: test_comm_ops */
            const int has = be->supports(op, TT_F32) || be->supports(op, TT_BF16);
            CHECK_MSG(!has || ran[bi][op] > 0, "op %s never ran on backend %s: add a case", tt_op_name(op), be->name);
            CHECK_MSG(has, "backend %s has no kernel for op %s", be->name, tt_op_name(op));
        }
    }
    printf("test_backend_ops: %zu cases x {f32, bf16} x {cpu, ref} against the f64 reference, %.1f s\n", N_CASES,
           tt_now() - t0);
    return th_done("test_backend_ops");
}

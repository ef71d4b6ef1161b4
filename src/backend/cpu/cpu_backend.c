/* cpu_backend.c — the CPU backend: host memory, the synchronous queue, and
 * the kernel table, one small adapter per op id from a graph node to its
 * kernel (kernels.h). Activations are fp32 or bf16 (mixed precision);
 * weights, statistics and weight gradients fp32. */
#include <math.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "backend/host/host.h"
#include "backend/host/corelat.h"
#include "backend/host/membw.h"
#include "backend/registry.h"

static int64_t nrows(const tt_value *v) { return v->ndim == 1 ? 1 : v->shape[0]; }
static int64_t ncols(const tt_value *v) { return v->shape[v->ndim - 1]; }
static size_t numel0(const tt_node *n) { return (size_t)tt_value_numel(n->in[0]); }
static tt_dtype dt0(const tt_node *n) { return n->in[0]->dtype; }

/* ---- kernels, one per op ---------------------------------------------------- */

static tt_err k_embedding(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *tab = n->in[1];
    const int N = (int)tt_value_numel(n->in[0]), V = (int)tab->shape[0], D = (int)tab->shape[1];
    if (tt_check_ids(in[0], N, V, INT32_MIN, "token id")) return -1;
    cpu_embedding_fwd(in[0], in[1], tab->dtype, out[0], N, V, D, n->out[0]->dtype);
    return 0;
}

static tt_err k_embedding_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *dtab = n->out[0];
    cpu_embedding_bwd(in[0], in[1], out[0], (int)tt_value_numel(n->in[0]), (int)dtab->shape[0], (int)dtab->shape[1],
                      n->in[1]->dtype, n->accumulate & 1);
    return 0;
}

static tt_err k_matmul(const tt_node *n, void *const *in, void *const *out)
{
    const tt_matmul_attrs *a = TT_ATTRS(n, tt_matmul_attrs);
    const int M = (int)n->out[0]->shape[0], N = (int)n->out[0]->shape[1];
    const int K = (int)(a->ta ? n->in[0]->shape[0] : n->in[0]->shape[1]);
    return cpu_matmul(in[0], dt0(n), in[1], n->in[1]->dtype, out[0], n->out[0]->dtype, M, N, K, a->ta, a->tb,
                      n->accumulate & 1);
}

static tt_err k_bias_add(const tt_node *n, void *const *in, void *const *out)
{
    cpu_bias_add(in[0], in[1], out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]), dt0(n));
    return 0;
}

static tt_err k_bias_grad(const tt_node *n, void *const *in, void *const *out)
{
    cpu_bias_grad(in[0], out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]), dt0(n));
    return 0;
}

static tt_err k_add(const tt_node *n, void *const *in, void *const *out)
{
    cpu_add(in[0], in[1], out[0], numel0(n), dt0(n));
    return 0;
}

static tt_err k_accum(const tt_node *n, void *const *in, void *const *out)
{
    (void)out; /* acc += g, in place on the persistent accumulator */
    cpu_accum(in[0], in[1], numel0(n), n->in[1]->dtype);
    return 0;
}

static tt_err k_rmsnorm(const tt_node *n, void *const *in, void *const *out)
{
    const tt_norm_attrs *a = TT_ATTRS(n, tt_norm_attrs);
    cpu_rmsnorm_fwd(in[0], in[1], out[0], out[1], (int)(numel0(n) / (size_t)a->group), a->group, a->eps, dt0(n));
    return 0;
}

static tt_err k_rmsnorm_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int D = TT_ATTRS(n, tt_norm_attrs)->group, N = (int)(numel0(n) / (size_t)D);
    const void *dres = n->n_in > 4 ? in[4] : NULL; /* a residual gradient added to dx */
    cpu_rmsnorm_bwd(in[0], in[1], in[2], in[3], dres, out[0], out[1], N, D, dt0(n));
    return 0;
}

static tt_err k_add_rmsnorm(const tt_node *n, void *const *in, void *const *out)
{
    cpu_add_rmsnorm_fwd(in[0], in[1], in[2], out[0], out[1], out[2], (int)nrows(n->in[0]), (int)ncols(n->in[0]),
                        TT_ATTRS(n, tt_norm_attrs)->eps, dt0(n));
    return 0;
}

static tt_err k_layernorm(const tt_node *n, void *const *in, void *const *out)
{
    cpu_layernorm_fwd(in[0], in[1], in[2], out[0], out[1], out[2], (int)nrows(n->in[0]), (int)ncols(n->in[0]),
                      TT_ATTRS(n, tt_norm_attrs)->eps, dt0(n));
    return 0;
}

static tt_err k_layernorm_bwd(const tt_node *n, void *const *in, void *const *out)
{
    cpu_layernorm_bwd(in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2], (int)nrows(n->in[0]),
                      (int)ncols(n->in[0]), dt0(n));
    return 0;
}

static tt_err k_rope(const tt_node *n, void *const *in, void *const *out)
{
    const tt_rope_attrs *a = TT_ATTRS(n, tt_rope_attrs);
    cpu_rope_partial(in[0], in[1], in[2], out[0], (int)nrows(n->in[0]), a->H, a->hd, tt_rope_rot(a), a->inverse,
                     (float)a->scale, dt0(n));
    return 0;
}

/* Values not as wide as queries and keys (Multi-head Latent Attention): the
 * kernels run one head width W, the larger, so the narrower operands are
 * placed into zero-padded W-wide copies (zero columns add nothing to a score
 * or an output) and the outputs' valid columns taken back. The copies are
 * carved from the calling thread's scratch (kept between calls: no
 * allocation per step once the shapes have been seen). */
typedef struct {
    char *buf;
    size_t cap, used;
} copies;

/* room for copies of at most `elems` elements of dt in all */
static tt_err copies_init(copies *c, size_t elems, tt_dtype dt)
{
    c->cap = elems * tt_dtype_size(dt) + 8 * 64, c->used = 0;
    c->buf = tt_cpu_scratch(TT_SCRATCH_ATTN_PAD, c->cap);
    return c->buf ? 0 : tt_errorf("attention: out of memory for padded heads");
}

static void *widened(copies *c, const void *src, long rows, int heads, int w, int W, tt_dtype dt)
{
    if (w == W) return (void *)src;
    const size_t bytes = ((size_t)rows * heads * W * tt_dtype_size(dt) + 63) & ~(size_t)63;
    if (c->used + bytes > c->cap) return NULL;
    void *d = c->buf + c->used;
    c->used += bytes;
    if (src) cpu_head_move(d, (void *)src, (int)rows, heads, W, 0, w, 0, 0, 1, dt); /* placed: zeros elsewhere */
    return d;
}
static void narrowed(void *dst, const void *wide, long rows, int heads, int w, int W, tt_dtype dt)
{
    if (wide != dst) cpu_head_move((void *)wide, dst, (int)rows, heads, W, 0, w, 0, 0, 0, dt);
}

static tt_err k_attention(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *at = TT_ATTRS(n, tt_attn_attrs);
    const int hd = at->hd, vw = tt_attn_v_width(at), W = hd > vw ? hd : vw;
    const long N = (long)at->B * at->T;
    const tt_dtype dt = dt0(n);
    copies c = {0};
    if (hd != vw && copies_init(&c, (size_t)N * 2 * (at->H + at->Hk) * W, dt)) return -1;
    void *q = widened(&c, in[0], N, at->H, hd, W, dt), *k = widened(&c, in[1], N, at->Hk, hd, W, dt);
    void *v = widened(&c, in[2], N, at->Hk, vw, W, dt), *o = vw == W ? out[0] : widened(&c, NULL, N, at->H, vw, W, dt);
    if (!q || !k || !v || !o) return tt_errorf("attention: the padded copies do not fit (%d-wide heads)", W);
    const long lq = (long)at->H * W, lk = (long)at->Hk * W;
    const tt_attn a = {.B = at->B, .T = at->T, .H = at->H, .Hk = at->Hk, .hd = W, .window = at->window,
                       .dt = dt, .q = q, .k = k, .v = v, .ldq = lq, .ldk = lk, .ldv = lk,
                       .doc = in[3], .o = o, .ldo = lq, .lse = out[1], .scale = tt_attn_softmax_scale(at),
                       .softcap = at->softcap};
    const tt_err rc = cpu_attention_fwd(&a);
    if (!rc) narrowed(out[0], o, N, at->H, vw, W, dt);
    if (!rc && n->n_in > 4) cpu_attention_sinks_fwd(out[0], (long)at->H * vw, out[1], in[4], at->B, at->T, at->H, vw, dt);
    return rc;
}

static tt_err k_attention_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *at = TT_ATTRS(n, tt_attn_attrs);
    const int hd = at->hd, vw = tt_attn_v_width(at), W = hd > vw ? hd : vw;
    const long N = (long)at->B * at->T;
    const tt_dtype dt = dt0(n);
    copies c = {0};
    if (hd != vw && copies_init(&c, (size_t)N * 4 * (at->H + at->Hk) * W, dt)) return -1;
    void *q = widened(&c, in[0], N, at->H, hd, W, dt), *k = widened(&c, in[1], N, at->Hk, hd, W, dt);
    void *v = widened(&c, in[2], N, at->Hk, vw, W, dt), *o = widened(&c, in[4], N, at->H, vw, W, dt);
    void *dout = widened(&c, in[6], N, at->H, vw, W, dt);
    void *dq = hd == W ? out[0] : widened(&c, NULL, N, at->H, hd, W, dt);
    void *dk = hd == W ? out[1] : widened(&c, NULL, N, at->Hk, hd, W, dt);
    void *dv = vw == W ? out[2] : widened(&c, NULL, N, at->Hk, vw, W, dt);
    if (!q || !k || !v || !o || !dout || !dq || !dk || !dv)
        return tt_errorf("attention backward: the padded copies do not fit (%d-wide heads)", W);
    const long lq = (long)at->H * W, lk = (long)at->Hk * W;
    const tt_attn a = {.B = at->B, .T = at->T, .H = at->H, .Hk = at->Hk, .hd = W, .window = at->window,
                       .dt = dt, .q = q, .k = k, .v = v, .ldq = lq, .ldk = lk, .ldv = lk,
                       .doc = in[3], .o = o, .ldo = lq, .lse = in[5], .dout = dout, .lddo = lq,
                       .dq = dq, .dk = dk, .dv = dv, .lddq = lq, .lddk = lk, .lddv = lk,
                       .scale = tt_attn_softmax_scale(at), .softcap = at->softcap};
    const tt_err rc = cpu_attention_bwd(&a);
    if (!rc) {
        narrowed(out[0], dq, N, at->H, hd, W, dt);
        narrowed(out[1], dk, N, at->Hk, hd, W, dt);
        narrowed(out[2], dv, N, at->Hk, vw, W, dt);
    }
    /* the sinks' gradient: o and lse are the sinked ones, so dq, dk and dv above are already the sinked attention's */
    if (!rc && n->n_out > 3)
        cpu_attention_sinks_bwd(in[4], (long)at->H * vw, in[6], (long)at->H * vw, in[5], in[7], out[3], at->B, at->T,
                                at->H, vw, dt);
    return rc;
}

/* q, k and v as column ranges of one qkv buffer (row stride (H+2Hk)*hd), RoPE inside */
static tt_err attention_qkv(const tt_node *n, void *const *in, void *const *out, int bwd)
{
    const tt_attn_attrs *at = TT_ATTRS(n, tt_attn_attrs);
    const int H = at->H, Hk = at->Hk, hd = at->hd, rope = n->n_in > (bwd ? 5 : 2);
    const long ld = (long)(H + 2 * Hk) * hd, lq = (long)H * hd;
    const tt_dtype dt = dt0(n);
    const size_t es = tt_dtype_size(dt);
    char *qkv = in[0];
    tt_attn a = {.B = at->B, .T = at->T, .H = H, .Hk = Hk, .hd = hd, .window = at->window, .dt = dt, .q = qkv,
                 .k = qkv + lq * es, .v = qkv + (lq + (long)Hk * hd) * es, .ldq = ld, .ldk = ld, .ldv = ld,
                 .doc = in[1], .pos = rope ? in[bwd ? 5 : 2] : NULL, .inv_freq = rope ? in[bwd ? 6 : 3] : NULL,
                 .rope_scale = (float)at->rope_scale};
    if (!bwd) {
        a.o = out[0], a.ldo = lq, a.lse = out[1];
        return cpu_attention_fwd(&a);
    }
    char *dqkv = out[0];
    a.o = in[2], a.ldo = lq, a.lse = in[3], a.dout = in[4], a.lddo = lq;
    a.dq = dqkv, a.dk = dqkv + lq * es, a.dv = dqkv + (lq + (long)Hk * hd) * es, a.lddq = a.lddk = a.lddv = ld;
    return cpu_attention_bwd(&a);
}
static tt_err k_attention_qkv(const tt_node *n, void *const *in, void *const *out) { return attention_qkv(n, in, out, 0); }
static tt_err k_attention_qkv_bwd(const tt_node *n, void *const *in, void *const *out)
{
    return attention_qkv(n, in, out, 1);
}

static tt_err k_attention_kv(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    const int start = *(const int32_t *)in[5], hd = a->hd, vw = tt_attn_v_width(a), W = hd > vw ? hd : vw;
    if (tt_attention_kv_check(n, start)) return -1;
    const size_t row = (size_t)a->Hk * hd * sizeof(float), vrow = (size_t)a->Hk * vw * sizeof(float);
    for (int b = 0; b < a->B; b++) /* append the new keys and values to the cache */
        for (int t = 0; t < a->T; t++) {
            const size_t src = (size_t)b * a->T + t, dst = (size_t)b * a->Tmax + start + t;
            memcpy((char *)in[3] + dst * row, (const char *)in[1] + src * row, row);
            memcpy((char *)in[4] + dst * vrow, (const char *)in[2] + src * vrow, vrow);
        }
    /* values of another width than keys (MLA): W-wide padded copies of the query, the caches and the output */
    const long Nq = (long)a->B * a->T, Nc = (long)a->B * a->Tmax;
    copies c = {0};
    if (hd != vw && copies_init(&c, (size_t)(2 * Nq * a->H + 2 * Nc * a->Hk) * W, TT_F32)) return -1;
    void *q = widened(&c, in[0], Nq, a->H, hd, W, TT_F32), *ck = widened(&c, in[3], Nc, a->Hk, hd, W, TT_F32);
    void *cv = widened(&c, in[4], Nc, a->Hk, vw, W, TT_F32), *o = vw == W ? out[0] : widened(&c, NULL, Nq, a->H, vw, W, TT_F32);
    if (!q || !ck || !cv || !o) return tt_errorf("attention: the padded copies do not fit (%d-wide heads)", W);
    cpu_attention_kv(q, ck, cv, o, out[1], a->B, a->T, start + a->T, a->Tmax, start, a->H, a->Hk, W, a->window,
                     tt_attn_softmax_scale(a), a->softcap);
    narrowed(out[0], o, Nq, a->H, vw, W, TT_F32);
    if (n->n_in > 6) cpu_attention_sinks_fwd(out[0], (long)a->H * vw, out[1], in[6], a->B, a->T, a->H, vw, TT_F32);
    return 0;
}

/* A fused swiglu's rows: those before its offsets' bound computed, the rest of the output (w elements a
 * row) zeroed */
static tt_err swiglu_rows(const tt_node *n, void *const *in, void *y, int64_t w, int64_t *rows)
{
    const int k = n->op == TT_OP_SWIGLU || n->op == TT_OP_SWIGLU_CLAMP ? 1 : 2;
    if (tt_swiglu_rows(n, n->n_in > k ? in[k] : NULL, rows)) return -1;
    const size_t es = tt_dtype_size(dt0(n));
    memset((char *)y + (size_t)*rows * (size_t)w * es, 0, (size_t)(nrows(n->in[0]) - *rows) * (size_t)w * es);
    return 0;
}

static tt_err k_swiglu(const tt_node *n, void *const *in, void *const *out)
{
    if (!tt_swiglu_is_fused(n)) {
        cpu_swiglu_fwd(in[0], in[1], out[0], numel0(n), dt0(n));
        return 0;
    }
    const int F = (int)ncols(n->in[0]) / 2; /* gate and up as the halves of one value */
    int64_t rows;
    if (swiglu_rows(n, in, out[0], F, &rows)) return -1;
    cpu_swiglu_fused_fwd(in[0], out[0], (int)rows, F, dt0(n));
    return 0;
}

static tt_err k_swiglu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    if (!tt_swiglu_is_fused(n)) {
        cpu_swiglu_bwd(in[0], in[1], in[2], out[0], out[1], numel0(n), dt0(n));
        return 0;
    }
    const int F = (int)ncols(n->in[0]) / 2;
    int64_t rows;
    if (swiglu_rows(n, in, out[0], 2 * F, &rows)) return -1;
    cpu_swiglu_fused_bwd(in[0], in[1], out[0], (int)rows, F, dt0(n));
    return 0;
}

static tt_err k_swiglu_clamp(const tt_node *n, void *const *in, void *const *out)
{
    const tt_swiglu_attrs *a = TT_ATTRS(n, tt_swiglu_attrs);
    const int F = (int)ncols(n->in[0]) / 2;
    int64_t rows;
    if (swiglu_rows(n, in, out[0], F, &rows)) return -1;
    cpu_swiglu_clamp_fwd(in[0], out[0], (int)rows, F, (float)a->alpha, (float)a->limit, dt0(n));
    return 0;
}

static tt_err k_swiglu_clamp_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_swiglu_attrs *a = TT_ATTRS(n, tt_swiglu_attrs);
    const int F = (int)ncols(n->in[0]) / 2;
    int64_t rows;
    if (swiglu_rows(n, in, out[0], 2 * F, &rows)) return -1;
    cpu_swiglu_clamp_bwd(in[0], in[1], out[0], (int)rows, F, (float)a->alpha, (float)a->limit, dt0(n));
    return 0;
}

static tt_err k_gelu(const tt_node *n, void *const *in, void *const *out)
{
    cpu_gelu_fwd(in[0], out[0], numel0(n), dt0(n));
    return 0;
}

static tt_err k_geglu(const tt_node *n, void *const *in, void *const *out)
{
    cpu_geglu_fwd(in[0], in[1], out[0], numel0(n), dt0(n));
    return 0;
}

static tt_err k_geglu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    cpu_geglu_bwd(in[0], in[1], in[2], out[0], out[1], numel0(n), dt0(n));
    return 0;
}

static tt_err k_softcap(const tt_node *n, void *const *in, void *const *out)
{
    cpu_softcap_fwd(in[0], out[0], numel0(n), TT_ATTRS(n, tt_scale_attrs)->s, dt0(n));
    return 0;
}

static tt_err k_softcap_bwd(const tt_node *n, void *const *in, void *const *out)
{
    cpu_softcap_bwd(in[0], in[1], out[0], numel0(n), TT_ATTRS(n, tt_scale_attrs)->s, dt0(n));
    return 0;
}

static tt_err k_gelu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    cpu_gelu_bwd(in[0], in[1], out[0], numel0(n), dt0(n));
    return 0;
}

static tt_err k_dropout(const tt_node *n, void *const *in, void *const *out)
{
    const tt_dropout_attrs *a = TT_ATTRS(n, tt_dropout_attrs);
    const int64_t *rng = in[1]; /* seed, counter */
    cpu_dropout(in[0], out[0], numel0(n), tt_dropout_key((uint64_t)rng[0], (uint64_t)rng[1], a->site),
                tt_dropout_threshold(a->p), (float)tt_dropout_scale(a->p), dt0(n));
    return 0;
}

static tt_err k_ce_linear(const tt_node *n, void *const *in, void *const *out)
{
    const int N = (int)nrows(n->in[0]), D = (int)ncols(n->in[0]), V = (int)n->in[1]->shape[0];
    /* outputs: the loss; dh with the backward; dW too unless the head is frozen */
    const int ign = TT_ATTRS(n, tt_ce_attrs)->ignore_index, dh = n->n_out >= 2, dw = n->n_out == 3;
    if (tt_check_ids(in[2], N, V, ign, "target")) return -1;
    if (dw && !(n->accumulate & 4)) memset(out[2], 0, tt_value_bytes(n->out[2])); /* the kernel adds into dW */
    double loss;
    if (cpu_ce_linear_capped(in[0], in[1], n->in[1]->dtype, in[2], N, D, V, ign, *(const float *)in[3],
                             TT_ATTRS(n, tt_ce_attrs)->softcap, dh ? out[1] : NULL, dw ? out[2] : NULL, dt0(n), &loss))
        return -1;
    *(float *)out[0] = (float)loss;
    return 0;
}

static tt_err k_sumsq(const tt_node *n, void *const *in, void *const *out)
{
    double s = cpu_sumsq(in[0], numel0(n));
    if (n->n_in > 1) s += *(const float *)in[1];
    *(float *)out[0] = (float)s;
    return 0;
}

static tt_err k_clip_coef(const tt_node *n, void *const *in, void *const *out)
{
    *(float *)out[0] = (float)tt_clip_coef(*(const float *)in[0], TT_ATTRS(n, tt_clip_attrs)->max_norm);
    return 0;
}

static tt_err k_adamw(const tt_node *n, void *const *in, void *const *out)
{
    const tt_adamw_attrs *a = TT_ATTRS(n, tt_adamw_attrs);
    const double *hp = in[5]; /* lr, step */
    const int64_t *dr = n->n_in > 6 ? in[6] : NULL;
    cpu_adamw(in[0], in[1], in[2], in[3], n->n_out ? out[0] : NULL, numel0(n), hp[0], a->beta1, a->beta2, a->eps,
              a->weight_decay, *(const float *)in[4], (long)hp[1], dr, dr ? (int)n->in[6]->shape[0] : 0);
    /* (it also zeroes the gradient, and writes the weights' bf16 copy when the node has it as its output) */
    return 0;
}

static tt_err k_cast(const tt_node *n, void *const *in, void *const *out)
{
    const size_t cnt = numel0(n);
    if (n->in[0]->dtype == n->out[0]->dtype) memmove(out[0], in[0], tt_value_bytes(n->in[0]));
    else if (n->out[0]->dtype == TT_F32) tt_cpu_to_f32(out[0], in[0], n->in[0]->dtype, cnt);
    else tt_cpu_from_f32(out[0], n->out[0]->dtype, in[0], cnt);
    return 0;
}

static tt_err k_scale(const tt_node *n, void *const *in, void *const *out)
{
    cpu_scale(in[0], out[0], numel0(n), (float)TT_ATTRS(n, tt_scale_attrs)->s, dt0(n));
    return 0;
}

static tt_err k_add_scaled(const tt_node *n, void *const *in, void *const *out)
{
    const tt_add_scaled_attrs *a = TT_ATTRS(n, tt_add_scaled_attrs);
    _Static_assert(TT_ADD_SCALED_MAX_PARTS <= CPU_ADD_SCALED_MAX_PARTS, "the kernel's parts");
    int w[TT_ADD_SCALED_MAX_PARTS];
    for (int i = 0; i < a->k; i++) w[i] = (int)ncols(n->in[1 + i]);
    cpu_add_scaled(in[0], (const void *const *)in + 1, w, a->c0, a->k, out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]),
                   (float)a->s, dt0(n));
    return 0;
}

static tt_err k_zero(const tt_node *n, void *const *in, void *const *out)
{
    (void)in;
    memset(out[0], 0, tt_value_bytes(n->out[0]));
    return 0;
}

/* ---- per-head columns ---------------------------------------------------------- */

static tt_err head_move(const tt_node *n, void *const *in, void *const *out, int place)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    cpu_head_move(place ? out[0] : in[0], place ? in[0] : out[0], (int)nrows(n->in[0]), a->H, a->w, a->c0, a->cw,
                  a->sum_heads, a->deinterleave, place, dt0(n));
    return 0;
}
static tt_err k_head_slice(const tt_node *n, void *const *in, void *const *out) { return head_move(n, in, out, 0); }
static tt_err k_head_place(const tt_node *n, void *const *in, void *const *out) { return head_move(n, in, out, 1); }

static tt_err k_head_concat(const tt_node *n, void *const *in, void *const *out)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    cpu_head_concat(in[0], in[1], out[0], (int)nrows(n->in[0]), a->H, a->wa, a->wb, a->bcast, dt0(n));
    return 0;
}

/* ---- Mixture-of-Experts ------------------------------------------------------ */

static tt_err k_moe_route(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_attrs *a = TT_ATTRS(n, tt_moe_attrs);
    cpu_moe_route(in[0], n->n_in > 1 ? in[1] : NULL, out[0], out[1], out[2], (int)nrows(n->in[0]), a->E, a->k,
                  a->score_func == TT_SCORE_SIGMOID, a->route_norm, a->n_group, a->topk_group, (float)a->route_scale);
    return 0;
}

static tt_err k_moe_route_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_attrs *a = TT_ATTRS(n, tt_moe_attrs);
    cpu_moe_route_bwd(in[0], in[1], in[2], n->n_in > 3 ? in[3] : NULL, out[0], (int)nrows(n->in[0]), a->E, a->k,
                      a->score_func == TT_SCORE_SIGMOID, a->route_norm, (float)a->route_scale);
    return 0;
}

static tt_err k_moe_aux_loss(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_aux_attrs *a = TT_ATTRS(n, tt_moe_aux_attrs);
    const int z = a->kind == TT_AUX_Z;
    double loss = 0;
    if (cpu_moe_aux_loss(in[0], z ? NULL : in[1], *(const float *)in[z ? 1 : 2], n->n_out > 1 ? out[1] : NULL,
                         (int)nrows(n->in[0]), a->E, a->k, a->B, a->kind, a->coef, &loss))
        return -1;
    *(float *)out[0] = (float)loss;
    return 0;
}

static tt_err k_moe_sort(const tt_node *n, void *const *in, void *const *out)
{
    const int M = (int)numel0(n), E = TT_ATTRS(n, tt_moe_attrs)->E;
    if (tt_check_ids(in[0], M, E, INT32_MIN, "expert id")) return -1;
    cpu_moe_sort(in[0], M, E, out[0], out[1], out[2]);
    return 0;
}

static tt_err k_moe_permute(const tt_node *n, void *const *in, void *const *out)
{
    cpu_moe_permute(in[0], in[1], n->n_in > 3 ? in[3] : NULL, out[0], (int)nrows(n->out[0]), (int)ncols(n->in[0]),
                    TT_ATTRS(n, tt_moe_attrs)->k, dt0(n));
    return 0;
}

static tt_err k_moe_combine(const tt_node *n, void *const *in, void *const *out)
{
    cpu_moe_combine(in[0], in[2], n->n_in > 3 ? in[3] : NULL, out[0], (int)nrows(n->out[0]), (int)ncols(n->in[0]),
                    TT_ATTRS(n, tt_moe_attrs)->k, dt0(n));
    return 0;
}

static tt_err k_moe_rowdot(const tt_node *n, void *const *in, void *const *out)
{
    cpu_moe_rowdot(in[0], in[1], in[2], out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]), TT_ATTRS(n, tt_moe_attrs)->k,
                   dt0(n));
    return 0;
}

static tt_err k_grouped_matmul(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *w = n->in[1];
    const int E = (int)w->shape[0];
    if (tt_moe_check_offsets(in[2], E, nrows(n->in[0]))) return -1;
    return cpu_grouped_matmul(in[0], dt0(n), in[1], w->dtype, out[0], n->out[0]->dtype, in[2], E, (int)nrows(n->in[0]),
                              (int)ncols(n->in[0]), (int)ncols(n->out[0]), TT_ATTRS(n, tt_matmul_attrs)->tb);
}

static tt_err k_grouped_matmul_wgrad(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *dw = n->out[0];
    const int E = (int)dw->shape[0];
    if (tt_moe_check_offsets(in[2], E, nrows(n->in[0]))) return -1;
    return cpu_grouped_matmul_wgrad(in[0], in[1], dt0(n), out[0], in[2], E, (int)dw->shape[1], (int)dw->shape[2],
                                    n->accumulate & 1);
}

/* the experts' biases, one bias add (and bias gradient) per expert over its rows; rows past offsets[E] pass */
static tt_err k_grouped_bias_add(const tt_node *n, void *const *in, void *const *out)
{
    const int E = (int)n->in[1]->shape[0], C = (int)ncols(n->in[0]);
    const int32_t *off = in[2];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t row = (size_t)C * tt_dtype_size(dt0(n));
    if (out[0] != in[0])
        memcpy((char *)out[0] + off[E] * row, (const char *)in[0] + off[E] * row, (size_t)(nrows(n->in[0]) - off[E]) * row);
    for (int e = 0; e < E; e++)
        cpu_bias_add((const char *)in[0] + off[e] * row, (const float *)in[1] + (size_t)e * C,
                     (char *)out[0] + off[e] * row, off[e + 1] - off[e], C, dt0(n));
    return 0;
}

static tt_err k_grouped_bias_grad(const tt_node *n, void *const *in, void *const *out)
{
    const int E = (int)n->out[0]->shape[0], C = (int)ncols(n->in[0]);
    const int32_t *off = in[1];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t row = (size_t)C * tt_dtype_size(dt0(n));
    for (int e = 0; e < E; e++)
        cpu_bias_grad((const char *)in[0] + off[e] * row, (float *)out[0] + (size_t)e * C, off[e + 1] - off[e], C,
                      dt0(n));
    return 0;
}

/* ---- expert parallelism ------------------------------------------------------ */

static tt_err k_row_gather(const tt_node *n, void *const *in, void *const *out)
{
    const int64_t R = tt_value_numel(n->in[1]), M = nrows(n->in[0]);
    if (tt_row_gather_check(in[1], R, in[2], M)) return -1;
    cpu_row_gather(in[0], in[1], out[0], (int)R, (int)ncols(n->in[0]), dt0(n));
    return 0;
}

static tt_err k_moe_ep_plan(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_ep_attrs *a = TT_ATTRS(n, tt_moe_ep_attrs);
    if (tt_moe_ep_check(in[0], a)) return -1;
    int64_t *const counts[4] = {out[0], out[1], out[2], out[3]};
    cpu_moe_ep_plan(in[0], a->E, a->ep, a->rank, a->row, a->recv_rows, counts, out[4], out[5], out[6]);
    return 0;
}

/* one kernel per op the list says a backend runs (a missing k_<name> does not compile); none for the collectives */
static const tt_host_kernel cpu_kernels[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = k_##name,
#define TT_COMM(ID, name, attrs_bytes)
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
};

/* ---- the interface ---------------------------------------------------------- */

/* A CPU buffer is host memory: the handle is the pointer. */
static tt_buf *cpu_alloc(size_t bytes) { return (tt_buf *)tt_host_mem_alloc(bytes); }
static void cpu_free(tt_buf *b) { tt_host_mem_free(b); }
static void *cpu_ptr(tt_mem m) { return (char *)m.buf + m.off; }

static tt_queue *cpu_queue_new(void) { return tt_host_queue_new(cpu_ptr); }
static tt_err cpu_run(tt_queue *q, const tt_node *n, const tt_mem *in, const tt_mem *out)
{
    if (n->op < 0 || n->op >= TT_OP_COUNT || !cpu_kernels[n->op])
        return tt_errorf("cpu: no kernel for op %s", tt_op_name(n->op));
    return tt_host_call(q, cpu_kernels[n->op], n, in, out);
}

/* fp32 and bf16 activations; a KV-cache decode runs in fp32 */
static int cpu_supports(int op, tt_dtype dt)
{
    if (op < 0 || op >= TT_OP_COUNT || !cpu_kernels[op]) return 0;
    if (op == TT_OP_ATTENTION_KV) return dt == TT_F32;
    return dt == TT_F32 || dt == TT_BF16;
}


/* TorchTitan's mixed precision where the CPU has bf16 arithmetic. Where its
 * products are widened onto the FMAs (bf16_dot.h), bf16 activations still
 * halve the bytes a step moves: on an Intel Xeon host without AMX the
 * default job's step ran 1.09x as fast in bf16 as in fp32 (docs/performance-changes.md). */
static tt_dtype cpu_default_dtype(void) { return tt_gemm_bf16_hardware() ? TT_BF16 : TT_F32; }

static const tt_backend cpu_backend = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .bytes_in_use = tt_host_mem_in_use,
    .queue_new = cpu_queue_new,
    .queue_free = tt_host_queue_free,
    .upload = tt_host_upload,
    .download = tt_host_download,
    .copy = tt_host_copy,
    .zero = tt_host_zero,
    .run = cpu_run,
    .record = tt_host_record,
    .wait = tt_host_wait,
    .sync = tt_host_sync,
    .finish = tt_host_finish,
    .host_ptr = cpu_ptr,
    .supports = cpu_supports,
    .peak = tt_host_peak,
    .bandwidth = tt_mem_bandwidth,
    .core_round_trip = tt_core_round_trip,
    .default_dtype = cpu_default_dtype,
};

/* the constructor backend.c's table of backends calls */
const tt_backend *tt_backend_cpu_make(void) { return &cpu_backend; }

/* ref_backend.c — the reference backend: the naive kernels of ref_kernels.inc
 * behind the backend interface, one adapter per op id. It runs f64 nodes
 * (finite-difference tests) and f32 nodes directly, and a node with bf16
 * values on fp32 copies of them, rounding its bf16 outputs: so bf16 graphs
 * are checked against the same definitions as fp32 ones. Every other
 * backend is tested against this one, op by op.
 *
 * Its buffers live in host memory, but the handles it gives out are not
 * pointers to it (see ref_alloc): code above the backend that dereferenced
 * a backend buffer instead of copying it would fault here, so running the
 * train, checkpoint and generation paths on `ref` checks that nothing does. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/host/host.h"
#include "backend/host/corelat.h"
#include "backend/host/membw.h"
#include "backend/registry.h"
#include "backend/ref/ref_kernels.h"

/* Call the reference kernel `fn` (f64 or f32) with arguments written in terms of the element type T. */
#define REF(fn, ...)                                                                               \
    do {                                                                                           \
        if (is64) {                                                                                \
            typedef double T;                                                                      \
            ref_##fn##_f64(__VA_ARGS__);                                                           \
        } else {                                                                                   \
            typedef float T;                                                                       \
            ref_##fn##_f32(__VA_ARGS__);                                                           \
        }                                                                                          \
    } while (0)

static int64_t nrows(const tt_value *v) { return v->ndim == 1 ? 1 : v->shape[0]; }
static int64_t ncols(const tt_value *v) { return v->shape[v->ndim - 1]; }
static size_t numel0(const tt_node *n) { return (size_t)tt_value_numel(n->in[0]); }
/* f64 nodes run the double kernels; everything else (fp32, and bf16 widened) the float ones */
static int is_f64(const tt_node *n) { return tt_node_dtype(n) == TT_F64; }
static size_t esize(int is64) { return is64 ? sizeof(double) : sizeof(float); }

/* columns [c0, c0 + w) of an (N, ld) buffer of es-byte elements as a new contiguous (N, w) one, and back */
static void *cols_get(const void *src, int N, int ld, int c0, int w, size_t es)
{
    char *d = tt_alloc((size_t)N * w * es + 1);
    if (d)
        for (int n = 0; n < N; n++) memcpy(d + (size_t)n * w * es, (const char *)src + ((size_t)n * ld + c0) * es, (size_t)w * es);
    return d;
}
static void cols_put(void *dst, int N, int ld, int c0, int w, const void *src, size_t es)
{
    for (int n = 0; n < N; n++) memcpy((char *)dst + ((size_t)n * ld + c0) * es, (const char *)src + (size_t)n * w * es, (size_t)w * es);
}

/* ---- kernels, one per op ---------------------------------------------------- */

static tt_err k_embedding(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *tab = n->in[1];
    const int N = (int)tt_value_numel(n->in[0]), V = (int)tab->shape[0], D = (int)tab->shape[1], is64 = is_f64(n);
    if (tt_check_ids(in[0], N, V, INT32_MIN, "token id")) return -1;
    REF(embedding_fwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
    return 0;
}

static tt_err k_embedding_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *dtab = n->out[0];
    const int N = (int)tt_value_numel(n->in[0]), V = (int)dtab->shape[0], D = (int)dtab->shape[1], is64 = is_f64(n);
    if (!(n->accumulate & 1)) {
        REF(embedding_bwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
        return 0;
    }
    /* adding into an accumulator: the gradient into scratch, then the sum */
    const size_t cnt = (size_t)V * D;
    void *tmp = tt_alloc(cnt * esize(is64) + 1);
    if (!tmp) return tt_errorf("out of memory");
    REF(embedding_bwd, in[0], (const T *)in[1], (T *)tmp, N, V, D);
    REF(add, (const T *)out[0], (const T *)tmp, (T *)out[0], cnt);
    tt_free(tmp);
    return 0;
}

static tt_err k_matmul(const tt_node *n, void *const *in, void *const *out)
{
    const tt_matmul_attrs *a = TT_ATTRS(n, tt_matmul_attrs);
    const int M = (int)n->out[0]->shape[0], N = (int)n->out[0]->shape[1], is64 = is_f64(n);
    const int K = (int)(a->ta ? n->in[0]->shape[0] : n->in[0]->shape[1]);
    REF(matmul, (const T *)in[0], (const T *)in[1], (T *)out[0], M, N, K, a->ta, a->tb, n->accumulate & 1);
    return 0;
}

static tt_err k_bias_add(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(bias_add, (const T *)in[0], (const T *)in[1], (T *)out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]));
    return 0;
}

static tt_err k_bias_grad(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(bias_grad, (const T *)in[0], (T *)out[0], (int)nrows(n->in[0]), (int)ncols(n->in[0]));
    return 0;
}

static tt_err k_add(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(add, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n));
    return 0;
}

static tt_err k_accum(const tt_node *n, void *const *in, void *const *out)
{
    (void)out; /* acc += g, in place */
    const int is64 = is_f64(n);
    REF(add, (const T *)in[0], (const T *)in[1], (T *)in[0], numel0(n));
    return 0;
}

static tt_err k_rmsnorm(const tt_node *n, void *const *in, void *const *out)
{
    const tt_norm_attrs *a = TT_ATTRS(n, tt_norm_attrs);
    const int is64 = is_f64(n), N = (int)(numel0(n) / (size_t)a->group);
    REF(rmsnorm_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (T *)out[1], N, a->group, a->eps);
    return 0;
}

static tt_err k_rmsnorm_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int D = TT_ATTRS(n, tt_norm_attrs)->group, N = (int)(numel0(n) / (size_t)D), is64 = is_f64(n);
    REF(rmsnorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3], (T *)out[0],
        (T *)out[1], N, D);
    if (n->n_in > 4) REF(add, (const T *)out[0], (const T *)in[4], (T *)out[0], numel0(n)); /* the residual gradient */
    return 0;
}

static tt_err k_add_rmsnorm(const tt_node *n, void *const *in, void *const *out)
{
    const int N = (int)nrows(n->in[0]), D = (int)ncols(n->in[0]), is64 = is_f64(n);
    REF(add, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n));
    if (n->out[0]->dtype == TT_BF16) /* the norm reads the sum as stored, as the unfused ops do */
        for (size_t e = 0; e < numel0(n); e++) ((float *)out[0])[e] = tt_bf16_to_f32(tt_f32_to_bf16(((float *)out[0])[e]));
    REF(rmsnorm_fwd, (const T *)out[0], (const T *)in[2], (T *)out[1], (T *)out[2], N, D, TT_ATTRS(n, tt_norm_attrs)->eps);
    return 0;
}

static tt_err k_layernorm(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(layernorm_fwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1], (T *)out[2],
        (int)nrows(n->in[0]), (int)ncols(n->in[0]), TT_ATTRS(n, tt_norm_attrs)->eps);
    return 0;
}

static tt_err k_layernorm_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(layernorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3], (const T *)in[4],
        (T *)out[0], (T *)out[1], (T *)out[2], (int)nrows(n->in[0]), (int)ncols(n->in[0]));
    return 0;
}

static tt_err k_rope(const tt_node *n, void *const *in, void *const *out)
{
    const tt_rope_attrs *a = TT_ATTRS(n, tt_rope_attrs);
    const int is64 = is_f64(n);
    REF(rope_partial, (const T *)in[0], in[1], in[2], (T *)out[0], (int)nrows(n->in[0]), a->H, a->hd, tt_rope_rot(a),
        a->inverse, a->scale);
    return 0;
}

static tt_err k_attention(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    const int is64 = is_f64(n);
    REF(attention_fwd_v, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (T *)out[0], (T *)out[1], a->B,
        a->T, a->T, a->T, 0, a->H, a->Hk, a->hd, tt_attn_v_width(a), a->window, tt_attn_softmax_scale(a), a->softcap,
        n->n_in > 4 ? (const T *)in[4] : NULL);
    return 0;
}

static tt_err k_attention_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    const int is64 = is_f64(n);
    REF(attention_bwd_v, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (const T *)in[4],
        (const T *)in[5], (const T *)in[6], (T *)out[0], (T *)out[1], (T *)out[2], a->B, a->T, a->H, a->Hk, a->hd,
        tt_attn_v_width(a), a->window, tt_attn_softmax_scale(a), a->softcap, n->n_in > 7 ? (const T *)in[7] : NULL,
        n->n_out > 3 ? (T *)out[3] : NULL);
    return 0;
}

/* The attention of one (N, (H+2Hk)*hd) qkv buffer: q, k, v split out, q and
 * k rotated, attended; the backward (bwd) rotates the q and k gradients back
 * (the transpose of a scaled rotation is the scaled inverse rotation). */
static tt_err attention_qkv(const tt_node *n, void *const *in, void *const *out, int bwd)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    const int B = a->B, Tt = a->T, H = a->H, Hk = a->Hk, hd = a->hd, N = B * Tt, ld = (H + 2 * Hk) * hd;
    const int rope = n->n_in > (bwd ? 5 : 2), is64 = is_f64(n);
    const int32_t *pos = rope ? in[bwd ? 5 : 2] : NULL;
    const float *freq = rope ? in[bwd ? 6 : 3] : NULL;
    const size_t es = esize(is64);
    const double scale = 1.0 / sqrt((double)hd), rs = a->rope_scale;
    void *q = cols_get(in[0], N, ld, 0, H * hd, es), *k = cols_get(in[0], N, ld, H * hd, Hk * hd, es);
    void *v = cols_get(in[0], N, ld, (H + Hk) * hd, Hk * hd, es);
    void *dq = bwd ? tt_alloc((size_t)N * H * hd * es + 1) : NULL, *dk = bwd ? tt_alloc((size_t)N * Hk * hd * es + 1) : NULL;
    void *dv = bwd ? tt_alloc((size_t)N * Hk * hd * es + 1) : NULL;
    tt_err rc = 0;
    if (!q || !k || !v || (bwd && (!dq || !dk || !dv))) rc = tt_errorf("out of memory");
    if (!rc && rope) {
        REF(rope_scaled, (const T *)q, pos, freq, (T *)q, N, H, hd, 0, rs);
        REF(rope_scaled, (const T *)k, pos, freq, (T *)k, N, Hk, hd, 0, rs);
    }
    if (!rc && !bwd)
        REF(attention_fwd, (const T *)q, (const T *)k, (const T *)v, in[1], (T *)out[0], (T *)out[1], B, Tt, Tt, Tt, 0,
            H, Hk, hd, a->window, scale);
    if (!rc && bwd) {
        REF(attention_bwd, (const T *)q, (const T *)k, (const T *)v, in[1], (const T *)in[2], (const T *)in[3],
            (const T *)in[4], (T *)dq, (T *)dk, (T *)dv, B, Tt, H, Hk, hd, a->window, scale);
        if (rope) {
            REF(rope_scaled, (const T *)dq, pos, freq, (T *)dq, N, H, hd, 1, rs);
            REF(rope_scaled, (const T *)dk, pos, freq, (T *)dk, N, Hk, hd, 1, rs);
        }
        cols_put(out[0], N, ld, 0, H * hd, dq, es);
        cols_put(out[0], N, ld, H * hd, Hk * hd, dk, es);
        cols_put(out[0], N, ld, (H + Hk) * hd, Hk * hd, dv, es);
    }
    tt_free(q), tt_free(k), tt_free(v), tt_free(dq), tt_free(dk), tt_free(dv);
    return rc;
}
static tt_err k_attention_qkv(const tt_node *n, void *const *in, void *const *out) { return attention_qkv(n, in, out, 0); }
static tt_err k_attention_qkv_bwd(const tt_node *n, void *const *in, void *const *out)
{
    return attention_qkv(n, in, out, 1);
}

static tt_err k_attention_kv(const tt_node *n, void *const *in, void *const *out)
{
    const tt_attn_attrs *a = TT_ATTRS(n, tt_attn_attrs);
    const int start = *(const int32_t *)in[5], is64 = is_f64(n);
    if (tt_attention_kv_check(n, start)) return -1;
    const int vw = tt_attn_v_width(a);
    const size_t row = (size_t)a->Hk * a->hd * esize(is64), vrow = (size_t)a->Hk * vw * esize(is64);
    for (int b = 0; b < a->B; b++) /* append the new keys and values to the cache */
        for (int t = 0; t < a->T; t++) {
            const size_t src = (size_t)b * a->T + t, dst = (size_t)b * a->Tmax + start + t;
            memcpy((char *)in[3] + dst * row, (const char *)in[1] + src * row, row);
            memcpy((char *)in[4] + dst * vrow, (const char *)in[2] + src * vrow, vrow);
        }
    REF(attention_fwd_v, (const T *)in[0], (const T *)in[3], (const T *)in[4], NULL, (T *)out[0], (T *)out[1], a->B,
        a->T, start + a->T, a->Tmax, start, a->H, a->Hk, a->hd, vw, a->window, tt_attn_softmax_scale(a), a->softcap,
        n->n_in > 6 ? (const T *)in[6] : NULL);
    return 0;
}

/* swiglu of one (N, 2F) gate/up value (clamped: GPT-OSS's): its halves split out; over the rows its offsets bound,
 * the rest zero */
static tt_err swiglu_fused(const tt_node *n, void *const *in, void *const *out, int bwd)
{
    const int clamp = n->op == TT_OP_SWIGLU_CLAMP || n->op == TT_OP_SWIGLU_CLAMP_BWD;
    const tt_swiglu_attrs *sa = clamp ? TT_ATTRS(n, tt_swiglu_attrs) : NULL;
    const int Nb = (int)n->in[0]->shape[0], F = (int)n->in[0]->shape[1] / 2, is64 = is_f64(n), k = bwd ? 2 : 1;
    int64_t rows;
    if (tt_swiglu_rows(n, n->n_in > k ? in[k] : NULL, &rows)) return -1;
    const int N = (int)rows;
    const size_t es = esize(is64), cnt = (size_t)N * F, w = (size_t)(bwd ? 2 * F : F);
    memset((char *)out[0] + (size_t)N * w * es, 0, (size_t)(Nb - N) * w * es);
    void *a = cols_get(in[0], N, 2 * F, 0, F, es), *b = cols_get(in[0], N, 2 * F, F, F, es);
    void *da = bwd ? tt_alloc(cnt * es + 1) : NULL, *db = bwd ? tt_alloc(cnt * es + 1) : NULL;
    tt_err rc = 0;
    if (!a || !b || (bwd && (!da || !db))) rc = tt_errorf("out of memory");
    else if (!bwd && clamp) REF(swiglu_clamp_fwd, (const T *)a, (const T *)b, (T *)out[0], cnt, sa->alpha, sa->limit);
    else if (!bwd) REF(swiglu_fwd, (const T *)a, (const T *)b, (T *)out[0], cnt);
    else {
        if (clamp)
            REF(swiglu_clamp_bwd, (const T *)a, (const T *)b, (const T *)in[1], (T *)da, (T *)db, cnt, sa->alpha,
                sa->limit);
        else REF(swiglu_bwd, (const T *)a, (const T *)b, (const T *)in[1], (T *)da, (T *)db, cnt);
        cols_put(out[0], N, 2 * F, 0, F, da, es);
        cols_put(out[0], N, 2 * F, F, F, db, es);
    }
    tt_free(a), tt_free(b), tt_free(da), tt_free(db);
    return rc;
}

static tt_err k_swiglu(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    if (tt_swiglu_is_fused(n)) return swiglu_fused(n, in, out, 0);
    REF(swiglu_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n));
    return 0;
}

static tt_err k_swiglu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    if (tt_swiglu_is_fused(n)) return swiglu_fused(n, in, out, 1);
    REF(swiglu_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1], numel0(n));
    return 0;
}

static tt_err k_swiglu_clamp(const tt_node *n, void *const *in, void *const *out) { return swiglu_fused(n, in, out, 0); }
static tt_err k_swiglu_clamp_bwd(const tt_node *n, void *const *in, void *const *out)
{
    return swiglu_fused(n, in, out, 1);
}

static tt_err k_gelu(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(gelu_fwd, (const T *)in[0], (T *)out[0], numel0(n));
    return 0;
}

static tt_err k_geglu(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(geglu_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n));
    return 0;
}

static tt_err k_geglu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(geglu_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1], numel0(n));
    return 0;
}

static tt_err k_gelu_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(gelu_bwd, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n));
    return 0;
}

static tt_err k_softcap(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(softcap_fwd, (const T *)in[0], (T *)out[0], numel0(n), TT_ATTRS(n, tt_scale_attrs)->s);
    return 0;
}

static tt_err k_softcap_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(softcap_bwd, (const T *)in[0], (const T *)in[1], (T *)out[0], numel0(n), TT_ATTRS(n, tt_scale_attrs)->s);
    return 0;
}

static tt_err k_dropout(const tt_node *n, void *const *in, void *const *out)
{
    const tt_dropout_attrs *a = TT_ATTRS(n, tt_dropout_attrs);
    const int64_t *rng = in[1]; /* seed, counter */
    const int is64 = is_f64(n);
    REF(dropout, (const T *)in[0], (T *)out[0], numel0(n), tt_dropout_key((uint64_t)rng[0], (uint64_t)rng[1], a->site),
        a->p);
    return 0;
}

static tt_err k_ce_linear(const tt_node *n, void *const *in, void *const *out)
{
    const int N = (int)nrows(n->in[0]), D = (int)ncols(n->in[0]), V = (int)n->in[1]->shape[0], is64 = is_f64(n);
    /* outputs: the loss; dh with the backward; dW too unless the head is frozen */
    const int ign = TT_ATTRS(n, tt_ce_attrs)->ignore_index, dw = n->n_out == 3;
    const double cap = TT_ATTRS(n, tt_ce_attrs)->softcap;
    if (tt_check_ids(in[2], N, V, ign, "target")) return -1;
    if (dw && !(n->accumulate & 4)) memset(out[2], 0, (size_t)tt_value_numel(n->out[2]) * esize(is64));
    void *dh = n->n_out >= 2 ? out[1] : NULL, *dW = dw ? out[2] : NULL;
    const double scale = is64 ? *(const double *)in[3] : *(const float *)in[3];
    const double loss = is64 ? ref_ce_linear_capped_f64(in[0], in[1], in[2], N, D, V, ign, scale, cap, dh, dW)
                             : ref_ce_linear_capped_f32(in[0], in[1], in[2], N, D, V, ign, scale, cap, dh, dW);
    if (is64) *(double *)out[0] = loss;
    else *(float *)out[0] = (float)loss;
    return 0;
}

static tt_err k_sumsq(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    double s = is64 ? ref_sumsq_f64(in[0], numel0(n)) : ref_sumsq_f32(in[0], numel0(n));
    if (n->n_in > 1) s += n->in[1]->dtype == TT_F64 ? *(const double *)in[1] : *(const float *)in[1];
    if (n->out[0]->dtype == TT_F64) *(double *)out[0] = s;
    else *(float *)out[0] = (float)s;
    return 0;
}

static tt_err k_clip_coef(const tt_node *n, void *const *in, void *const *out)
{
    *(float *)out[0] = (float)tt_clip_coef(*(const float *)in[0], TT_ATTRS(n, tt_clip_attrs)->max_norm);
    return 0;
}

/* AdamW one run of constant weight decay at a time, then the gradient zeroed */
static tt_err k_adamw(const tt_node *n, void *const *in, void *const *out)
{
    const tt_adamw_attrs *at = TT_ATTRS(n, tt_adamw_attrs);
    const double *hp = in[5], clip = *(const float *)in[4]; /* lr, step */
    const size_t cnt = numel0(n);
    const int64_t *dr = n->n_in > 6 ? in[6] : NULL;
    const int nd = dr ? (int)n->in[6]->shape[0] : 0, is64 = is_f64(n);
    const size_t es = esize(is64);
    for (size_t a = 0, r = 0; a < cnt;) {
        const size_t r0 = r < (size_t)nd ? (size_t)dr[2 * r] : cnt, r1 = r < (size_t)nd ? (size_t)dr[2 * r + 1] : cnt;
        const int decayed = !dr || a >= r0;
        const size_t e = !dr ? cnt : decayed ? r1 : r0;
        char *p = (char *)in[0] + a * es, *g = (char *)in[1] + a * es, *m = (char *)in[2] + a * es, *v = (char *)in[3] + a * es;
        REF(adamw, (T *)p, (const T *)g, (T *)m, (T *)v, e - a, hp[0], at->beta1, at->beta2, at->eps,
            decayed ? at->weight_decay : 0.0, clip, (long)hp[1]);
        a = e;
        if (dr && decayed) r++;
    }
    memset(in[1], 0, cnt * es); /* the accumulator starts the next step at zero */
    if (n->n_out) memcpy(out[0], in[0], cnt * es); /* the bf16 copy (fp32 weights): widened here, rounded after */
    return 0;
}

/* bf16 sides are widened before and rounded after (ref_node), so a cast is a copy here */
static tt_err k_cast(const tt_node *n, void *const *in, void *const *out)
{
    memcpy(out[0], in[0], numel0(n) * esize(n->in[0]->dtype == TT_F64));
    return 0;
}

static tt_err k_scale(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(scale, (const T *)in[0], (T *)out[0], numel0(n), TT_ATTRS(n, tt_scale_attrs)->s);
    return 0;
}

static tt_err k_add_scaled(const tt_node *n, void *const *in, void *const *out)
{
    const tt_add_scaled_attrs *a = TT_ATTRS(n, tt_add_scaled_attrs);
    const int is64 = is_f64(n), N = (int)nrows(n->in[0]), W = (int)ncols(n->in[0]);
    for (int i = 0; i < a->k; i++) /* one part at a time, the first from a, the rest in place */
        REF(add_scaled, (const T *)(i ? out[0] : in[0]), (const T *)in[1 + i], (T *)out[0], N, W,
            (int)ncols(n->in[1 + i]), a->c0[i], a->s);
    return 0;
}

static tt_err k_zero(const tt_node *n, void *const *in, void *const *out)
{
    (void)in;
    memset(out[0], 0, (size_t)tt_value_numel(n->out[0]) * esize(n->out[0]->dtype == TT_F64));
    return 0;
}

/* ---- per-head columns ---------------------------------------------------------- */

static tt_err head_move(const tt_node *n, void *const *in, void *const *out, int place)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    const int is64 = is_f64(n);
    REF(head_move, (T *)(place ? out[0] : in[0]), (T *)(place ? in[0] : out[0]), (int)nrows(n->in[0]), a->H, a->w,
        a->c0, a->cw, a->sum_heads, a->deinterleave, place);
    return 0;
}
static tt_err k_head_slice(const tt_node *n, void *const *in, void *const *out) { return head_move(n, in, out, 0); }
static tt_err k_head_place(const tt_node *n, void *const *in, void *const *out) { return head_move(n, in, out, 1); }

static tt_err k_head_concat(const tt_node *n, void *const *in, void *const *out)
{
    const tt_head_attrs *a = TT_ATTRS(n, tt_head_attrs);
    const int is64 = is_f64(n);
    REF(head_concat, (const T *)in[0], (const T *)in[1], (T *)out[0], (int)nrows(n->in[0]), a->H, a->wa, a->wb,
        a->bcast);
    return 0;
}

/* ---- Mixture-of-Experts ------------------------------------------------------ */
_Static_assert(REF_MAX_EXPERTS == TT_MOE_MAX_EXPERTS, "the reference MoE kernels' bound is the builders'");

static tt_err k_moe_route(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_attrs *a = TT_ATTRS(n, tt_moe_attrs);
    const int N = (int)nrows(n->in[0]), is64 = is_f64(n);
    double *bias = NULL;
    if (n->n_in > 1) { /* the bias as doubles, whatever its dtype */
        if (!(bias = tt_alloc(sizeof(double) * (size_t)a->E))) return tt_errorf("out of memory");
        for (int e = 0; e < a->E; e++)
            bias[e] = n->in[1]->dtype == TT_F64 ? ((const double *)in[1])[e] : ((const float *)in[1])[e];
    }
    REF(moe_route, (const T *)in[0], bias, (T *)out[0], out[1], (T *)out[2], N, a->E, a->k,
        a->score_func == TT_SCORE_SIGMOID, a->route_norm, a->n_group, a->topk_group, a->route_scale);
    tt_free(bias);
    return 0;
}

static tt_err k_moe_route_bwd(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_attrs *a = TT_ATTRS(n, tt_moe_attrs);
    const int is64 = is_f64(n);
    REF(moe_route_bwd, (const T *)in[0], in[1], (const T *)in[2], n->n_in > 3 ? (const T *)in[3] : NULL, (T *)out[0],
        (int)nrows(n->in[0]), a->E, a->k, a->score_func == TT_SCORE_SIGMOID, a->route_norm, a->route_scale);
    return 0;
}

static tt_err k_moe_aux_loss(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_aux_attrs *a = TT_ATTRS(n, tt_moe_aux_attrs);
    const int is64 = is_f64(n), z = a->kind == TT_AUX_Z;
    const tt_value *sv = n->in[z ? 1 : 2];
    const double scale = sv->dtype == TT_F64 ? *(const double *)in[z ? 1 : 2] : *(const float *)in[z ? 1 : 2];
    const int32_t *ex = z ? NULL : in[1];
    const int N = (int)nrows(n->in[0]);
    void *grad = n->n_out > 1 ? out[1] : NULL;
    const double loss = is64 ? ref_moe_aux_loss_f64(in[0], ex, scale, grad, N, a->E, a->k, a->B, a->kind, a->coef)
                             : ref_moe_aux_loss_f32(in[0], ex, scale, grad, N, a->E, a->k, a->B, a->kind, a->coef);
    if (n->out[0]->dtype == TT_F64) *(double *)out[0] = loss;
    else *(float *)out[0] = (float)loss;
    return 0;
}

static tt_err k_moe_sort(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_attrs *a = TT_ATTRS(n, tt_moe_attrs);
    const int M = (int)tt_value_numel(n->in[0]);
    if (tt_check_ids(in[0], M, a->E, INT32_MIN, "expert id")) return -1;
    ref_moe_sort(in[0], M / a->k, a->k, a->E, out[0], out[1], out[2]);
    return 0;
}

static tt_err k_moe_permute(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(moe_permute, (const T *)in[0], in[1], n->n_in > 3 ? (const T *)in[3] : NULL, (T *)out[0],
        (int)nrows(n->out[0]), (int)ncols(n->in[0]), TT_ATTRS(n, tt_moe_attrs)->k);
    return 0;
}

static tt_err k_moe_combine(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(moe_combine, (const T *)in[0], in[2], n->n_in > 3 ? (const T *)in[3] : NULL, (T *)out[0],
        (int)nrows(n->out[0]), (int)ncols(n->in[0]), TT_ATTRS(n, tt_moe_attrs)->k);
    return 0;
}

static tt_err k_moe_rowdot(const tt_node *n, void *const *in, void *const *out)
{
    const int is64 = is_f64(n);
    REF(moe_rowdot, (const T *)in[0], (const T *)in[1], in[2], (T *)out[0], (int)nrows(n->in[0]),
        (int)ncols(n->in[0]), TT_ATTRS(n, tt_moe_attrs)->k);
    return 0;
}

/* one reference matmul per expert over its rows */
static tt_err k_grouped_matmul(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *w = n->in[1];
    const int E = (int)w->shape[0], tb = TT_ATTRS(n, tt_matmul_attrs)->tb, is64 = is_f64(n);
    const int K = (int)ncols(n->in[0]), Nw = (int)ncols(n->out[0]);
    const int32_t *off = in[2];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t es = esize(is64);
    /* the rows past offsets[E] (a receive buffer's unused tail) are zero */
    memset((char *)out[0] + (size_t)off[E] * Nw * es, 0, (size_t)(nrows(n->in[0]) - off[E]) * Nw * es);
    for (int e = 0; e < E; e++)
        REF(matmul, (const T *)((const char *)in[0] + (size_t)off[e] * K * es),
            (const T *)((const char *)in[1] + (size_t)e * K * Nw * es), (T *)((char *)out[0] + (size_t)off[e] * Nw * es),
            off[e + 1] - off[e], Nw, K, 0, tb, 0);
    return 0;
}

static tt_err k_grouped_matmul_wgrad(const tt_node *n, void *const *in, void *const *out)
{
    const tt_value *dw = n->out[0];
    const int E = (int)dw->shape[0], P = (int)dw->shape[1], Q = (int)dw->shape[2], is64 = is_f64(n);
    const int32_t *off = in[2];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t es = esize(is64);
    for (int e = 0; e < E; e++) /* dw[e] (P,Q) = a_e^T b_e over the expert's rows (none: 0, or left when adding) */
        REF(matmul, (const T *)((const char *)in[0] + (size_t)off[e] * P * es),
            (const T *)((const char *)in[1] + (size_t)off[e] * Q * es), (T *)((char *)out[0] + (size_t)e * P * Q * es),
            P, Q, off[e + 1] - off[e], 1, 0, n->accumulate & 1);
    return 0;
}

/* one reference bias add (and bias gradient) per expert over its rows; the rows past offsets[E] pass unchanged */
static tt_err k_grouped_bias_add(const tt_node *n, void *const *in, void *const *out)
{
    const int E = (int)n->in[1]->shape[0], C = (int)ncols(n->in[0]), is64 = is_f64(n);
    const int32_t *off = in[2];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t es = esize(is64);
    memcpy((char *)out[0] + (size_t)off[E] * C * es, (const char *)in[0] + (size_t)off[E] * C * es,
           (size_t)(nrows(n->in[0]) - off[E]) * C * es);
    for (int e = 0; e < E; e++)
        REF(bias_add, (const T *)((const char *)in[0] + (size_t)off[e] * C * es),
            (const T *)((const char *)in[1] + (size_t)e * C * es), (T *)((char *)out[0] + (size_t)off[e] * C * es),
            off[e + 1] - off[e], C);
    return 0;
}

static tt_err k_grouped_bias_grad(const tt_node *n, void *const *in, void *const *out)
{
    const int E = (int)n->out[0]->shape[0], C = (int)ncols(n->in[0]), is64 = is_f64(n);
    const int32_t *off = in[1];
    if (tt_moe_check_offsets(off, E, nrows(n->in[0]))) return -1;
    const size_t es = esize(is64);
    for (int e = 0; e < E; e++)
        REF(bias_grad, (const T *)((const char *)in[0] + (size_t)off[e] * C * es),
            (T *)((char *)out[0] + (size_t)e * C * es), off[e + 1] - off[e], C);
    return 0;
}

/* ---- expert parallelism ------------------------------------------------------ */

static tt_err k_row_gather(const tt_node *n, void *const *in, void *const *out)
{
    const int64_t R = tt_value_numel(n->in[1]), M = nrows(n->in[0]);
    const int is64 = is_f64(n);
    if (tt_row_gather_check(in[1], R, in[2], M)) return -1;
    REF(row_gather, (const T *)in[0], in[1], (T *)out[0], (int)R, (int)ncols(n->in[0]));
    return 0;
}

static tt_err k_moe_ep_plan(const tt_node *n, void *const *in, void *const *out)
{
    const tt_moe_ep_attrs *a = TT_ATTRS(n, tt_moe_ep_attrs);
    if (tt_moe_ep_check(in[0], a)) return -1;
    ref_moe_ep_plan(in[0], a->E, a->ep, a->rank, a->row, a->recv_rows, out[0], out[1], out[2], out[3], out[4], out[5],
                    out[6]);
    return 0;
}

/* one kernel per op the list says a backend runs (a missing k_<name> does not compile); none for the collectives */
static const tt_host_kernel ref_kernels[TT_OP_COUNT] = {
#define TT_OP(ID, name, attrs_bytes) [TT_OP_##ID] = k_##name,
#define TT_COMM(ID, name, attrs_bytes)
#include "ops/op_list.h"
#undef TT_OP
#undef TT_COMM
};

/* ---- memory: handles that are not pointers --------------------------------- */

/* A handle is the bitwise complement of the host address, which on x86-64
 * (and every 64-bit host with a user/kernel split) is a kernel-half address:
 * dereferencing one faults at once. Only this file turns it back. */
static tt_buf *ref_alloc(size_t bytes)
{
    void *p = tt_host_mem_alloc(bytes);
    return p ? (tt_buf *)~(uintptr_t)p : NULL;
}
static void *host_of(tt_buf *b) { return (void *)~(uintptr_t)b; }
static void ref_free(tt_buf *b)
{
    if (b) tt_host_mem_free(host_of(b));
}
static void *ref_ptr(tt_mem m) { return (char *)host_of(m.buf) + m.off; }

static tt_queue *ref_queue_new(void) { return tt_host_queue_new(ref_ptr); }

/* ---- bf16 nodes on fp32 copies ------------------------------------------------ */

static void widen(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = tt_bf16_to_f32(src[i]);
}
static void narrow(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = tt_f32_to_bf16(src[i]);
}

/* Every bf16 input and output replaced by an fp32 copy (an output the node
 * adds into starts as its widened contents), the fp32 kernel run, and the
 * bf16 outputs, and inputs the op writes in place, rounded back. */
static tt_err run_widened(const tt_node *n, void **in, void **out)
{
    const int total = n->n_in + n->n_out;
    float **tmp = calloc((size_t)total + 1, sizeof *tmp);
    void **win = calloc((size_t)total + 1, sizeof *win);
    tt_err rc = !tmp || !win ? tt_errorf("out of memory") : 0;
    for (int k = 0; k < total && !rc; k++) {
        const tt_value *v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
        void *p = k < n->n_in ? in[k] : out[k - n->n_in];
        win[k] = p;
        if (v->dtype != TT_BF16) continue;
        const size_t cnt = (size_t)tt_value_numel(v);
        if (!(tmp[k] = tt_alloc((cnt ? cnt : 1) * sizeof(float)))) rc = tt_errorf("out of memory");
        else widen(tmp[k], p, cnt), win[k] = tmp[k];
    }
    if (!rc) rc = ref_kernels[n->op](n, win, win + n->n_in);
    for (int k = 0; k < total && tmp; k++) {
        if (!tmp[k]) continue;
        const int is_in = k < n->n_in;
        const tt_value *v = is_in ? n->in[k] : n->out[k - n->n_in];
        if (!rc && (!is_in || ((tt_ops[n->op]->writes_ins >> k) & 1)))
            narrow(is_in ? in[k] : out[k - n->n_in], tmp[k], (size_t)tt_value_numel(v));
        tt_free(tmp[k]);
    }
    free(tmp);
    free(win);
    return rc;
}

static tt_err ref_node(const tt_node *n, void *const *in, void *const *out)
{
    for (int k = 0; k < n->n_in + n->n_out; k++)
        if ((k < n->n_in ? n->in[k] : n->out[k - n->n_in])->dtype == TT_BF16) return run_widened(n, (void **)in, (void **)out);
    return ref_kernels[n->op](n, in, out);
}

static tt_err ref_run(tt_queue *q, const tt_node *n, const tt_mem *in, const tt_mem *out)
{
    if (n->op < 0 || n->op >= TT_OP_COUNT || !ref_kernels[n->op])
        return tt_errorf("ref: no kernel for op %s", tt_op_name(n->op));
    return tt_host_call(q, ref_node, n, in, out);
}

static int ref_supports(int op, tt_dtype dt)
{
    return op >= 0 && op < TT_OP_COUNT && ref_kernels[op] && (dt == TT_F32 || dt == TT_BF16 || dt == TT_F64);
}

/* It runs on the host CPU, so MFU is against the CPU's peak: the figure says
 * how far the naive kernels are from the hardware. */
static tt_err ref_peak(double measure_seconds, tt_backend_peak *out)
{
    if (tt_host_peak(measure_seconds, out)) return -1;
    out->gflops[TT_F64] = out->gflops[TT_F32];
    const size_t n = strlen(out->device);
    snprintf(out->device + n, sizeof out->device - n, "; the ref kernels run on one thread");
    return 0;
}

/* the definitions compute in fp32 (and f64) */
static tt_dtype ref_default_dtype(void) { return TT_F32; }

static const tt_backend ref_backend = {
    .name = "ref",
    .alloc = ref_alloc,
    .free = ref_free,
    .bytes_in_use = tt_host_mem_in_use,
    .queue_new = ref_queue_new,
    .queue_free = tt_host_queue_free,
    .upload = tt_host_upload,
    .download = tt_host_download,
    .copy = tt_host_copy,
    .zero = tt_host_zero,
    .run = ref_run,
    .record = tt_host_record,
    .wait = tt_host_wait,
    .sync = tt_host_sync,
    .finish = tt_host_finish,
    .host_ptr = ref_ptr,
    .supports = ref_supports,
    .peak = ref_peak,
    .bandwidth = tt_mem_bandwidth, /* the host's memory */
    .core_round_trip = tt_core_round_trip,
    .default_dtype = ref_default_dtype,
};

/* the constructor backend.c's table of backends calls */
const tt_backend *tt_backend_ref_make(void) { return &ref_backend; }

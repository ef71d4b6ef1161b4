/* registry.c — the CPU backend: adapts each graph node to its kernel call.
 * f64 nodes (tests) always take the reference kernel; f32 and bf16 nodes take
 * the fast kernel unless the executor asks for the reference (debug mode).
 * The reference kernels are fp32/f64 only: a bf16 node in debug mode runs
 * them on fp32 copies of its bf16 inputs and rounds its bf16 outputs, so
 * debug mode checks bf16 graphs against the same reference as fp32 ones. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

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

#define I(k) ((int)n->a.i[k])

static int64_t nrows(const tt_value *v) { return v->ndim == 1 ? 1 : v->shape[0]; }
static int64_t ncols(const tt_value *v) { return v->shape[v->ndim - 1]; }

static tt_err check_ids(const int32_t *ids, int64_t n, int64_t V, int allow, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if ((ids[i] < 0 || ids[i] >= V) && ids[i] != allow)
            return tt_errorf("%s %d at index %lld is outside [0, %lld)", what, ids[i], (long long)i, (long long)V);
    return 0;
}

static int floating(tt_dtype d) { return d == TT_F32 || d == TT_BF16 || d == TT_F64; }

/* For the references of the fused ops: columns [c0, c0 + w) of an (N, ld)
 * buffer of es-byte elements as a new contiguous (N, w) one, and back. */
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

/* The attention of one (N, (H+2Hk)*hd) qkv buffer through the reference
 * kernels: q, k, v split out, q and k rotated, attended; the backward (bwd)
 * rotates the q and k gradients back and puts them into dqkv. */
static tt_err ref_attention_qkv(const tt_node *n, void *const *in, void *const *out, int is64, int bwd)
{
    const int B = I(0), Tt = I(1), H = I(2), Hk = I(3), hd = I(4), W = I(5), N = B * Tt, ld = (H + 2 * Hk) * hd;
    const int rope = n->n_in > (bwd ? 5 : 2);
    const int32_t *pos = rope ? in[bwd ? 5 : 2] : NULL;
    const float *freq = rope ? in[bwd ? 6 : 3] : NULL;
    const size_t es = is64 ? 8 : 4;
    const double scale = 1.0 / sqrt((double)hd), rs = n->a.f[0];
    void *q = cols_get(in[0], N, ld, 0, H * hd, es), *k = cols_get(in[0], N, ld, H * hd, Hk * hd, es);
    void *v = cols_get(in[0], N, ld, (H + Hk) * hd, Hk * hd, es);
    void *dq = bwd ? tt_alloc((size_t)N * H * hd * es) : NULL, *dk = bwd ? tt_alloc((size_t)N * Hk * hd * es) : NULL;
    void *dv = bwd ? tt_alloc((size_t)N * Hk * hd * es) : NULL;
    tt_err rc = 0;
    if (!q || !k || !v || (bwd && (!dq || !dk || !dv))) rc = tt_errorf("out of memory");
    if (!rc && rope) {
        REF(rope_scaled, (const T *)q, pos, freq, (T *)q, N, H, hd, 0, rs);
        REF(rope_scaled, (const T *)k, pos, freq, (T *)k, N, Hk, hd, 0, rs);
    }
    if (!rc && !bwd)
        REF(attention_fwd, (const T *)q, (const T *)k, (const T *)v, in[1], (T *)out[0], (T *)out[1], B, Tt, Tt, Tt, 0, H,
            Hk, hd, W, scale);
    if (!rc && bwd) {
        REF(attention_bwd, (const T *)q, (const T *)k, (const T *)v, in[1], (const T *)in[2], (const T *)in[3],
            (const T *)in[4], (T *)dq, (T *)dk, (T *)dv, B, Tt, H, Hk, hd, W, scale);
        if (rope) { /* the transpose of a scaled rotation is the scaled inverse rotation */
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

/* swiglu of one (N, 2F) gate/up value through the reference kernels */
static tt_err ref_swiglu_fused(const tt_node *n, void *const *in, void *const *out, int is64, int bwd)
{
    const int N = (int)n->in[0]->shape[0], F = (int)n->in[0]->shape[1] / 2;
    const size_t es = is64 ? 8 : 4, cnt = (size_t)N * F;
    void *a = cols_get(in[0], N, 2 * F, 0, F, es), *b = cols_get(in[0], N, 2 * F, F, F, es);
    void *da = bwd ? tt_alloc(cnt * es + 1) : NULL, *db = bwd ? tt_alloc(cnt * es + 1) : NULL;
    tt_err rc = 0;
    if (!a || !b || (bwd && (!da || !db))) rc = tt_errorf("out of memory");
    else if (!bwd) REF(swiglu_fwd, (const T *)a, (const T *)b, (T *)out[0], cnt);
    else {
        REF(swiglu_bwd, (const T *)a, (const T *)b, (const T *)in[1], (T *)da, (T *)db, cnt);
        cols_put(out[0], N, 2 * F, 0, F, da, es);
        cols_put(out[0], N, 2 * F, F, F, db, es);
    }
    tt_free(a), tt_free(b), tt_free(da), tt_free(db);
    return rc;
}

/* ref: run the reference kernel; all bf16 buffers have been widened to fp32 by then. */
static tt_err run(const tt_node *n, void *const *in, void *const *out, int ref)
{
    const tt_value *x0 = n->in[0];
    const tt_dtype dt = x0->dtype; /* the activation dtype of most ops: their first input's */
    int is64 = dt == TT_F64;
    if (!floating(dt) && n->op != TT_OP_EMBEDDING && n->op != TT_OP_EMBEDDING_BWD)
        return tt_errorf("cpu: %s has no kernel for %s", tt_op_name(n->op), tt_dtype_name(dt));
    ref |= is64;
    switch (n->op) {
    case TT_OP_EMBEDDING: {
        const tt_value *tab = n->in[1];
        int N = (int)tt_value_numel(x0), V = (int)tab->shape[0], D = (int)tab->shape[1];
        if (check_ids(in[0], N, V, INT32_MIN, "token id")) return -1;
        is64 = tab->dtype == TT_F64;
        if (ref || is64) REF(embedding_fwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
        else cpu_embedding_fwd(in[0], in[1], out[0], N, V, D, n->out[0]->dtype);
        return 0;
    }
    case TT_OP_EMBEDDING_BWD: {
        const tt_value *dtab = n->out[0];
        int N = (int)tt_value_numel(x0), V = (int)dtab->shape[0], D = (int)dtab->shape[1];
        is64 = dtab->dtype == TT_F64;
        if (!ref && !is64) {
            cpu_embedding_bwd(in[0], in[1], out[0], N, V, D, n->in[1]->dtype, I(0));
            return 0;
        }
        if (!I(0)) {
            REF(embedding_bwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
            return 0;
        }
        /* adding into an accumulator: the reference into scratch, then the sum */
        const size_t cnt = (size_t)V * D;
        void *tmp = tt_alloc(cnt * tt_dtype_size(dtab->dtype) + 1);
        if (!tmp) return tt_errorf("out of memory");
        REF(embedding_bwd, in[0], (const T *)in[1], (T *)tmp, N, V, D);
        REF(add, (const T *)out[0], (const T *)tmp, (T *)out[0], cnt);
        tt_free(tmp);
        return 0;
    }
    case TT_OP_MATMUL: {
        int ta = I(0), tb = I(1);
        int M = (int)n->out[0]->shape[0], N = (int)n->out[0]->shape[1];
        int K = (int)(ta ? x0->shape[0] : x0->shape[1]);
        if (ref) REF(matmul, (const T *)in[0], (const T *)in[1], (T *)out[0], M, N, K, ta, tb, I(2));
        else return cpu_matmul(in[0], dt, in[1], n->in[1]->dtype, out[0], n->out[0]->dtype, M, N, K, ta, tb, I(2));
        return 0;
    }
    case TT_OP_BIAS_ADD:
        if (ref) REF(bias_add, (const T *)in[0], (const T *)in[1], (T *)out[0], (int)nrows(x0), (int)ncols(x0));
        else cpu_bias_add(in[0], in[1], out[0], (int)nrows(x0), (int)ncols(x0), dt);
        return 0;
    case TT_OP_BIAS_GRAD:
        if (ref) REF(bias_grad, (const T *)in[0], (T *)out[0], (int)nrows(x0), (int)ncols(x0));
        else cpu_bias_grad(in[0], out[0], (int)nrows(x0), (int)ncols(x0), dt);
        return 0;
    case TT_OP_ADD:
        if (ref) REF(add, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        else cpu_add(in[0], in[1], out[0], (size_t)tt_value_numel(x0), dt);
        return 0;
    case TT_OP_ACCUM: /* acc += g, in place on the persistent accumulator */
        if (ref) REF(add, (const T *)in[0], (const T *)in[1], (T *)in[0], (size_t)tt_value_numel(x0));
        else cpu_accum(in[0], in[1], (size_t)tt_value_numel(x0), n->in[1]->dtype);
        return 0;
    case TT_OP_RMSNORM: {
        int N = (int)(tt_value_numel(x0) / I(0)), D = I(0);
        if (ref) REF(rmsnorm_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (T *)out[1], N, D, n->a.f[0]);
        else cpu_rmsnorm_fwd(in[0], in[1], out[0], out[1], N, D, n->a.f[0], dt);
        return 0;
    }
    case TT_OP_RMSNORM_BWD: {
        int N = (int)(tt_value_numel(x0) / I(0)), D = I(0);
        const void *dres = n->n_in > 4 ? in[4] : NULL; /* a residual gradient added to dx */
        if (!ref) {
            cpu_rmsnorm_bwd(in[0], in[1], in[2], in[3], dres, out[0], out[1], N, D, dt);
            return 0;
        }
        REF(rmsnorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3], (T *)out[0],
            (T *)out[1], N, D);
        if (dres) REF(add, (const T *)out[0], (const T *)dres, (T *)out[0], (size_t)tt_value_numel(x0));
        return 0;
    }
    case TT_OP_ADD_RMSNORM: {
        int N = (int)nrows(x0), D = (int)ncols(x0);
        if (ref) {
            REF(add, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
            if (n->out[0]->dtype == TT_BF16) /* the norm reads the sum as stored, as the unfused ops do */
                for (int64_t e = 0; e < tt_value_numel(x0); e++)
                    ((float *)out[0])[e] = tt_bf16_to_f32(tt_f32_to_bf16(((float *)out[0])[e]));
            REF(rmsnorm_fwd, (const T *)out[0], (const T *)in[2], (T *)out[1], (T *)out[2], N, D, n->a.f[0]);
        } else {
            cpu_add_rmsnorm_fwd(in[0], in[1], in[2], out[0], out[1], out[2], N, D, n->a.f[0], dt);
        }
        return 0;
    }
    case TT_OP_LAYERNORM:
        if (ref)
            REF(layernorm_fwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1],
                (T *)out[2], (int)nrows(x0), (int)ncols(x0), n->a.f[0]);
        else cpu_layernorm_fwd(in[0], in[1], in[2], out[0], out[1], out[2], (int)nrows(x0), (int)ncols(x0), n->a.f[0], dt);
        return 0;
    case TT_OP_LAYERNORM_BWD:
        if (ref)
            REF(layernorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3],
                (const T *)in[4], (T *)out[0], (T *)out[1], (T *)out[2], (int)nrows(x0), (int)ncols(x0));
        else
            cpu_layernorm_bwd(in[0], in[1], in[2], in[3], in[4], out[0], out[1], out[2], (int)nrows(x0),
                              (int)ncols(x0), dt);
        return 0;
    case TT_OP_ROPE: /* a.f[0]: the cos/sin scale */
        if (ref)
            REF(rope_scaled, (const T *)in[0], in[1], in[2], (T *)out[0], (int)nrows(x0), I(0), I(1), I(2), n->a.f[0]);
        else cpu_rope(in[0], in[1], in[2], out[0], (int)nrows(x0), I(0), I(1), I(2), (float)n->a.f[0], dt);
        return 0;
    case TT_OP_ATTENTION: {
        const int B = I(0), Tt = I(1), H = I(2), Hk = I(3), hd = I(4);
        if (ref) {
            REF(attention_fwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (T *)out[0], (T *)out[1],
                B, Tt, Tt, Tt, 0, H, Hk, hd, I(5), 1.0 / sqrt((double)hd));
            return 0;
        }
        const tt_attn a = {.B = B, .T = Tt, .H = H, .Hk = Hk, .hd = hd, .window = I(5), .dt = dt,
                           .q = in[0], .k = in[1], .v = in[2], .ldq = (long)H * hd, .ldk = (long)Hk * hd,
                           .ldv = (long)Hk * hd, .doc = in[3], .o = out[0], .ldo = (long)H * hd, .lse = out[1]};
        return cpu_attention_fwd(&a);
    }
    case TT_OP_ATTENTION_BWD: {
        const int B = I(0), Tt = I(1), H = I(2), Hk = I(3), hd = I(4);
        if (ref) {
            REF(attention_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (const T *)in[4],
                (const T *)in[5], (const T *)in[6], (T *)out[0], (T *)out[1], (T *)out[2], B, Tt, H, Hk, hd, I(5),
                1.0 / sqrt((double)hd));
            return 0;
        }
        const long lq = (long)H * hd, lk = (long)Hk * hd;
        const tt_attn a = {.B = B, .T = Tt, .H = H, .Hk = Hk, .hd = hd, .window = I(5), .dt = dt,
                           .q = in[0], .k = in[1], .v = in[2], .ldq = lq, .ldk = lk, .ldv = lk, .doc = in[3],
                           .o = in[4], .ldo = lq, .lse = in[5], .dout = in[6], .lddo = lq,
                           .dq = out[0], .dk = out[1], .dv = out[2], .lddq = lq, .lddk = lk, .lddv = lk};
        return cpu_attention_bwd(&a);
    }
    case TT_OP_ATTENTION_QKV:
    case TT_OP_ATTENTION_QKV_BWD: {
        const int bwd = n->op == TT_OP_ATTENTION_QKV_BWD;
        if (ref) return ref_attention_qkv(n, in, out, is64, bwd);
        const int H = I(2), Hk = I(3), hd = I(4), rope = n->n_in > (bwd ? 5 : 2);
        const long ld = (long)(H + 2 * Hk) * hd, lq = (long)H * hd;
        const size_t es = tt_dtype_size(dt);
        char *qkv = in[0];
        tt_attn a = {.B = I(0), .T = I(1), .H = H, .Hk = Hk, .hd = hd, .window = I(5), .dt = dt, .q = qkv,
                     .k = qkv + lq * es, .v = qkv + (lq + (long)Hk * hd) * es, .ldq = ld, .ldk = ld, .ldv = ld,
                     .doc = in[1], .pos = rope ? in[bwd ? 5 : 2] : NULL, .inv_freq = rope ? in[bwd ? 6 : 3] : NULL,
                     .rope_scale = (float)n->a.f[0]};
        if (!bwd) {
            a.o = out[0], a.ldo = lq, a.lse = out[1];
            return cpu_attention_fwd(&a);
        }
        char *dqkv = out[0];
        a.o = in[2], a.ldo = lq, a.lse = in[3], a.dout = in[4], a.lddo = lq;
        a.dq = dqkv, a.dk = dqkv + lq * es, a.dv = dqkv + (lq + (long)Hk * hd) * es, a.lddq = a.lddk = a.lddv = ld;
        return cpu_attention_bwd(&a);
    }
    case TT_OP_ATTENTION_KV: {
        int B = I(0), Tq = I(1), Hk = I(3), hd = I(4), Tmax = I(6);
        int start = *(const int32_t *)in[5];
        if (start < 0 || start + Tq > Tmax)
            return tt_errorf("KV cache holds %d positions; cannot write %d at %d", Tmax, Tq, start);
        size_t row = (size_t)Hk * hd * (is64 ? sizeof(double) : sizeof(float));
        for (int b = 0; b < B; b++) /* append the new keys and values to the cache */
            for (int t = 0; t < Tq; t++) {
                size_t src = ((size_t)b * Tq + t) * row, dst = ((size_t)b * Tmax + start + t) * row;
                memcpy((char *)in[3] + dst, (const char *)in[1] + src, row);
                memcpy((char *)in[4] + dst, (const char *)in[2] + src, row);
            }
        double scale = 1.0 / sqrt((double)hd);
        if (ref)
            REF(attention_fwd, (const T *)in[0], (const T *)in[3], (const T *)in[4], NULL, (T *)out[0], (T *)out[1],
                B, Tq, start + Tq, Tmax, start, I(2), Hk, hd, I(5), scale);
        else if (dt != TT_F32)
            return tt_errorf("cpu: attention with a KV cache runs in fp32, not %s", tt_dtype_name(dt));
        else
            cpu_attention_kv(in[0], in[3], in[4], out[0], out[1], B, Tq, start + Tq, Tmax, start, I(2), Hk, hd, I(5),
                             scale);
        return 0;
    }
    case TT_OP_SWIGLU:
        if (n->n_in == 1) { /* gate and up as the halves of one value */
            if (ref) return ref_swiglu_fused(n, in, out, is64, 0);
            cpu_swiglu_fused_fwd(in[0], out[0], (int)nrows(x0), (int)ncols(x0) / 2, dt);
            return 0;
        }
        if (ref) REF(swiglu_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        else cpu_swiglu_fwd(in[0], in[1], out[0], (size_t)tt_value_numel(x0), dt);
        return 0;
    case TT_OP_SWIGLU_BWD:
        if (n->n_in == 2) {
            if (ref) return ref_swiglu_fused(n, in, out, is64, 1);
            cpu_swiglu_fused_bwd(in[0], in[1], out[0], (int)nrows(x0), (int)ncols(x0) / 2, dt);
            return 0;
        }
        if (ref)
            REF(swiglu_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1],
                (size_t)tt_value_numel(x0));
        else cpu_swiglu_bwd(in[0], in[1], in[2], out[0], out[1], (size_t)tt_value_numel(x0), dt);
        return 0;
    case TT_OP_GELU:
        if (ref) REF(gelu_fwd, (const T *)in[0], (T *)out[0], (size_t)tt_value_numel(x0));
        else cpu_gelu_fwd(in[0], out[0], (size_t)tt_value_numel(x0), dt);
        return 0;
    case TT_OP_GELU_BWD:
        if (ref) REF(gelu_bwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        else cpu_gelu_bwd(in[0], in[1], out[0], (size_t)tt_value_numel(x0), dt);
        return 0;
    case TT_OP_CE_LINEAR: {
        int N = (int)nrows(x0), D = (int)ncols(x0), V = (int)n->in[1]->shape[0], ign = I(0);
        if (check_ids(in[2], N, V, ign, "target")) return -1;
        int grads = n->n_out == 3;
        if (grads && !I(2)) memset(out[2], 0, tt_value_bytes(n->out[2])); /* the kernel accumulates dW */
        double scale = is64 ? *(const double *)in[3] : *(const float *)in[3];
        void *dh = grads ? out[1] : NULL, *dW = grads ? out[2] : NULL;
        double loss;
        if (is64) loss = ref_ce_linear_f64(in[0], in[1], in[2], N, D, V, ign, scale, dh, dW);
        else if (ref) loss = ref_ce_linear_f32(in[0], in[1], in[2], N, D, V, ign, scale, dh, dW);
        else if (isnan(loss = cpu_ce_linear(in[0], in[1], in[2], N, D, V, ign, scale, dh, dW, dt))) return -1;
        if (n->out[0]->dtype == TT_F64) *(double *)out[0] = loss;
        else *(float *)out[0] = (float)loss;
        return 0;
    }
    case TT_OP_SUMSQ: {
        size_t cnt = (size_t)tt_value_numel(x0);
        double s = is64 ? ref_sumsq_f64(in[0], cnt) : ref ? ref_sumsq_f32(in[0], cnt) : cpu_sumsq(in[0], cnt);
        if (n->n_in > 1) s += *(const float *)in[1];
        *(float *)out[0] = (float)s;
        return 0;
    }
    case TT_OP_ADAMW: {
        const double *hp = in[5]; /* lr, step, max_norm */
        double norm = sqrt(*(const float *)in[4]);
        double clip = hp[2] > 0 && norm > hp[2] ? hp[2] / (norm + 1e-6) : 1.0;
        const size_t cnt = (size_t)tt_value_numel(x0);
        const int64_t *dr = n->n_in > 6 ? in[6] : NULL;
        const int nd = dr ? (int)n->in[6]->shape[0] : 0;
        if (!ref) { /* also zeroes the gradient */
            cpu_adamw(in[0], in[1], in[2], in[3], cnt, hp[0], n->a.f[0], n->a.f[1], n->a.f[2], n->a.f[3], clip,
                      (long)hp[1], dr, nd);
            return 0;
        }
        /* the reference, one run of constant decay at a time */
        const size_t es = tt_dtype_size(x0->dtype);
        for (size_t a = 0, r = 0; a < cnt;) {
            const size_t r0 = r < (size_t)nd ? (size_t)dr[2 * r] : cnt, r1 = r < (size_t)nd ? (size_t)dr[2 * r + 1] : cnt;
            const int decayed = !dr || a >= r0;
            const size_t e = !dr ? cnt : decayed ? r1 : r0;
            char *p = (char *)in[0] + a * es, *g = (char *)in[1] + a * es, *m = (char *)in[2] + a * es, *v = (char *)in[3] + a * es;
            REF(adamw, (T *)p, (const T *)g, (T *)m, (T *)v, e - a, hp[0], n->a.f[0], n->a.f[1], n->a.f[2],
                decayed ? n->a.f[3] : 0.0, clip, (long)hp[1]);
            a = e;
            if (dr && decayed) r++;
        }
        memset(in[1], 0, cnt * es); /* the accumulator starts the next step at zero */
        return 0;
    }
    }
    return tt_errorf("cpu: no kernel for op %s", tt_op_name(n->op));
}

/* A node with bf16 values, in debug mode: the reference kernel on fp32 copies. */
static tt_err run_widened(const tt_node *n, void *const *in, void *const *out)
{
    void *win[TT_MAX_IN] = {0}, *wout[TT_MAX_OUT] = {0};
    float *tmp_in[TT_MAX_IN] = {0}, *tmp_out[TT_MAX_OUT] = {0};
    tt_err rc = 0;
    for (int k = 0; k < n->n_in && !rc; k++) {
        win[k] = in[k];
        if (n->in[k]->dtype != TT_BF16) continue;
        size_t cnt = (size_t)tt_value_numel(n->in[k]);
        if (!(tmp_in[k] = tt_alloc((cnt ? cnt : 1) * sizeof(float)))) rc = tt_errorf("out of memory");
        else tt_cpu_to_f32(tmp_in[k], in[k], TT_BF16, cnt), win[k] = tmp_in[k];
    }
    for (int k = 0; k < n->n_out && !rc; k++) {
        wout[k] = out[k];
        if (n->out[k]->dtype != TT_BF16) continue;
        size_t cnt = (size_t)tt_value_numel(n->out[k]);
        if (!(tmp_out[k] = tt_alloc((cnt ? cnt : 1) * sizeof(float)))) rc = tt_errorf("out of memory");
        else tt_cpu_to_f32(tmp_out[k], out[k], TT_BF16, cnt), wout[k] = tmp_out[k]; /* a kernel may add into it */
    }
    if (!rc) rc = run(n, win, wout, 1);
    for (int k = 0; k < n->n_out; k++)
        if (tmp_out[k]) {
            if (!rc) tt_cpu_from_f32(out[k], TT_BF16, tmp_out[k], (size_t)tt_value_numel(n->out[k]));
            tt_free(tmp_out[k]);
        }
    for (int k = 0; k < n->n_in; k++)
        if (tmp_in[k]) { /* inputs a kernel writes in place (accumulators) go back too */
            if (!rc && (n->op == TT_OP_ACCUM || n->op == TT_OP_ADAMW || n->op == TT_OP_ATTENTION_KV))
                tt_cpu_from_f32(in[k], TT_BF16, tmp_in[k], (size_t)tt_value_numel(n->in[k]));
            tt_free(tmp_in[k]);
        }
    return rc;
}

static tt_err cpu_run(const tt_node *n, void *const *in, void *const *out, int reference)
{
    if (reference) {
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->dtype == TT_BF16) return run_widened(n, in, out);
        for (int k = 0; k < n->n_out; k++)
            if (n->out[k]->dtype == TT_BF16) return run_widened(n, in, out);
    }
    return run(n, in, out, reference);
}

const tt_backend tt_backend_cpu = {"cpu", cpu_run, tt_alloc, tt_free};

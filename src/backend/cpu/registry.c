/* registry.c — the CPU backend: adapts each graph node to its kernel call.
 * f64 nodes (tests) always take the reference kernel; f32 nodes take the fast
 * kernel unless the executor asks for the reference (debug mode). */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"

/* Call the kernel `fn` with arguments written in terms of the element type T. */
#define DISPATCH(fn, ...)                                                                          \
    do {                                                                                           \
        if (is64) {                                                                                \
            typedef double T;                                                                      \
            ref_##fn##_f64(__VA_ARGS__);                                                           \
        } else if (reference) {                                                                    \
            typedef float T;                                                                       \
            ref_##fn##_f32(__VA_ARGS__);                                                           \
        } else {                                                                                   \
            typedef float T;                                                                       \
            cpu_##fn(__VA_ARGS__);                                                                 \
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

static tt_err cpu_run(const tt_node *n, void *const *in, void *const *out, int reference)
{
    const tt_value *x0 = n->in[0];
    int is64 = x0->dtype == TT_F64; /* the first input's type picks the kernel */
    if (!is64 && x0->dtype != TT_F32 && n->op != TT_OP_EMBEDDING && n->op != TT_OP_EMBEDDING_BWD)
        return tt_errorf("cpu: %s has no kernel for %s", tt_op_name(n->op), tt_dtype_name(x0->dtype));
    switch (n->op) {
    case TT_OP_EMBEDDING: {
        const tt_value *tab = n->in[1];
        int N = (int)tt_value_numel(x0), V = (int)tab->shape[0], D = (int)tab->shape[1];
        if (check_ids(in[0], N, V, INT32_MIN, "token id")) return -1;
        is64 = tab->dtype == TT_F64;
        DISPATCH(embedding_fwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
        return 0;
    }
    case TT_OP_EMBEDDING_BWD: {
        const tt_value *dt = n->out[0];
        int N = (int)tt_value_numel(x0), V = (int)dt->shape[0], D = (int)dt->shape[1];
        DISPATCH(embedding_bwd, in[0], (const T *)in[1], (T *)out[0], N, V, D);
        return 0;
    }
    case TT_OP_MATMUL: {
        int ta = I(0), tb = I(1);
        int M = (int)n->out[0]->shape[0], N = (int)n->out[0]->shape[1];
        int K = (int)(ta ? x0->shape[0] : x0->shape[1]);
        if (I(2) && !reference && !is64) /* mixed precision: bf16 panels packed from the fp32 operands */
            return tt_gemm(TT_BF16, in[0], TT_F32, ta ? M : K, in[1], TT_F32, tb ? K : N, out[0], N, M, N, K, ta, tb, 0);
        DISPATCH(matmul, (const T *)in[0], (const T *)in[1], (T *)out[0], M, N, K, ta, tb, 0);
        return 0;
    }
    case TT_OP_BIAS_ADD:
        DISPATCH(bias_add, (const T *)in[0], (const T *)in[1], (T *)out[0], (int)nrows(x0), (int)ncols(x0));
        return 0;
    case TT_OP_BIAS_GRAD:
        DISPATCH(bias_grad, (const T *)in[0], (T *)out[0], (int)nrows(x0), (int)ncols(x0));
        return 0;
    case TT_OP_ADD:
        DISPATCH(add, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_ACCUM: /* acc += g, in place on the persistent accumulator */
        DISPATCH(add, (const T *)in[0], (const T *)in[1], (T *)in[0], (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_RMSNORM:
        DISPATCH(rmsnorm_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (T *)out[1],
                 (int)(tt_value_numel(x0) / I(0)), I(0), n->a.f[0]);
        return 0;
    case TT_OP_RMSNORM_BWD:
        DISPATCH(rmsnorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3], (T *)out[0],
                 (T *)out[1], (int)(tt_value_numel(x0) / I(0)), I(0));
        return 0;
    case TT_OP_LAYERNORM:
        DISPATCH(layernorm_fwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1],
                 (T *)out[2], (int)nrows(x0), (int)ncols(x0), n->a.f[0]);
        return 0;
    case TT_OP_LAYERNORM_BWD:
        DISPATCH(layernorm_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (const T *)in[3],
                 (const T *)in[4], (T *)out[0], (T *)out[1], (T *)out[2], (int)nrows(x0), (int)ncols(x0));
        return 0;
    case TT_OP_ROPE:
        DISPATCH(rope_scaled, (const T *)in[0], in[1], in[2], (T *)out[0], (int)nrows(x0), I(0), I(1), I(2),
                 n->a.f[0]); /* a.f[0]: the cos/sin scale */
        return 0;
    case TT_OP_ATTENTION: {
        int B = I(0), Tt = I(1);
        double scale = 1.0 / sqrt((double)I(4));
        DISPATCH(attention_fwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (T *)out[0],
                 (T *)out[1], B, Tt, Tt, Tt, 0, I(2), I(3), I(4), I(5), scale);
        return 0;
    }
    case TT_OP_ATTENTION_BWD: {
        double scale = 1.0 / sqrt((double)I(4));
        DISPATCH(attention_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], in[3], (const T *)in[4],
                 (const T *)in[5], (const T *)in[6], (T *)out[0], (T *)out[1], (T *)out[2], I(0), I(1), I(2), I(3),
                 I(4), I(5), scale);
        return 0;
    }
    case TT_OP_ATTENTION_KV: {
        int B = I(0), Tq = I(1), Hk = I(3), hd = I(4), Tmax = I(6);
        int start = *(const int32_t *)in[5];
        if (start < 0 || start + Tq > Tmax)
            return tt_errorf("KV cache holds %d positions; cannot write %d at %d", Tmax, Tq, start);
        size_t row = (size_t)Hk * hd * tt_dtype_size(x0->dtype);
        for (int b = 0; b < B; b++) /* append the new keys and values to the cache */
            for (int t = 0; t < Tq; t++) {
                size_t src = ((size_t)b * Tq + t) * row, dst = ((size_t)b * Tmax + start + t) * row;
                memcpy((char *)in[3] + dst, (const char *)in[1] + src, row);
                memcpy((char *)in[4] + dst, (const char *)in[2] + src, row);
            }
        double scale = 1.0 / sqrt((double)hd);
        DISPATCH(attention_fwd, (const T *)in[0], (const T *)in[3], (const T *)in[4], NULL, (T *)out[0], (T *)out[1],
                 B, Tq, start + Tq, Tmax, start, I(2), Hk, hd, I(5), scale);
        return 0;
    }
    case TT_OP_SWIGLU:
        DISPATCH(swiglu_fwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_SWIGLU_BWD:
        DISPATCH(swiglu_bwd, (const T *)in[0], (const T *)in[1], (const T *)in[2], (T *)out[0], (T *)out[1],
                 (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_GELU:
        DISPATCH(gelu_fwd, (const T *)in[0], (T *)out[0], (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_GELU_BWD:
        DISPATCH(gelu_bwd, (const T *)in[0], (const T *)in[1], (T *)out[0], (size_t)tt_value_numel(x0));
        return 0;
    case TT_OP_CE_LINEAR: {
        int N = (int)nrows(x0), D = (int)ncols(x0), V = (int)n->in[1]->shape[0], ign = I(0);
        if (check_ids(in[2], N, V, ign, "target")) return -1;
        int grads = n->n_out == 3;
        if (grads) memset(out[2], 0, tt_value_bytes(n->out[2])); /* the kernel accumulates dW */
        double scale = is64 ? *(const double *)in[3] : *(const float *)in[3];
        double loss;
        if (is64) loss = ref_ce_linear_f64(in[0], in[1], in[2], N, D, V, ign, scale, grads ? out[1] : NULL, grads ? out[2] : NULL);
        else if (reference) loss = ref_ce_linear_f32(in[0], in[1], in[2], N, D, V, ign, scale, grads ? out[1] : NULL, grads ? out[2] : NULL);
        else loss = cpu_ce_linear(in[0], in[1], in[2], N, D, V, ign, scale, grads ? out[1] : NULL, grads ? out[2] : NULL);
        if (n->out[0]->dtype == TT_F64) *(double *)out[0] = loss;
        else *(float *)out[0] = (float)loss;
        return 0;
    }
    case TT_OP_SUMSQ: {
        size_t cnt = (size_t)tt_value_numel(x0);
        double s = is64 ? ref_sumsq_f64(in[0], cnt) : reference ? ref_sumsq_f32(in[0], cnt) : cpu_sumsq(in[0], cnt);
        if (n->n_in > 1) s += *(const float *)in[1];
        *(float *)out[0] = (float)s;
        return 0;
    }
    case TT_OP_ADAMW: {
        const double *hp = in[5]; /* lr, step, max_norm */
        double norm = sqrt(*(const float *)in[4]);
        double clip = hp[2] > 0 && norm > hp[2] ? hp[2] / (norm + 1e-6) : 1.0;
        size_t cnt = (size_t)tt_value_numel(x0);
        DISPATCH(adamw, (T *)in[0], (const T *)in[1], (T *)in[2], (T *)in[3], cnt, hp[0], n->a.f[0], n->a.f[1],
                 n->a.f[2], n->a.f[3], clip, (long)hp[1]);
        memset(in[1], 0, cnt * tt_dtype_size(x0->dtype)); /* the accumulator starts the next step at zero */
        return 0;
    }
    }
    return tt_errorf("cpu: no kernel for op %s", tt_op_name(n->op));
}

const tt_backend tt_backend_cpu = {"cpu", cpu_run, tt_alloc, tt_free};

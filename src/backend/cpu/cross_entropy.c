/* cross_entropy.c — fused linear + cross-entropy. The logits h W^T are made
 * one block of rows at a time (all of the vocabulary for R rows) and never
 * held whole; the loss and the softmax gradient come from that block, and dh
 * and dW from two more products with it, so each block costs exactly three
 * GEMMs. With bf16 activations the products run on bf16 panels and the
 * gradient of the logits is kept in bf16, written over the first half of its
 * own row of fp32 logits (half the bytes for the two GEMMs that read it, and
 * no second buffer); the logits, the softmax and every sum stay fp32. A
 * row without soft-cap is cross_entropy_avx512.c's where the CPU has
 * AVX-512. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "ops/ops.h"

/* Logits per block: 64M floats (256 MB). Every block reads the whole head
 * three times (once a product) and reads and writes the whole fp32 dW once,
 * so fewer, bigger blocks move fewer bytes: at GPT-2's vocabulary a step's
 * 1,024 rows are one block, not two (measured: ce_linear 5% faster on the
 * Zen 4 host, docs/performance-changes.md). The whole [N, V] logits that
 * PyTorch materialises are several times larger. */
#define CE_BLOCK TT_CE_BLOCK_LOGITS

/* The logits a block holds: CE_BLOCK, or what cpu_ce_set_block set (tests) */
static size_t g_ce_block = CE_BLOCK;

void cpu_ce_set_block(size_t logits) { __atomic_store_n(&g_ce_block, logits ? logits : CE_BLOCK, __ATOMIC_RELAXED); }

/* cpu_ce_set_avx512's switch */
static int g_ce_avx512 = 1;

void cpu_ce_set_avx512(int on) { __atomic_store_n(&g_ce_avx512, on != 0, __ATOMIC_RELAXED); }

static inline int ce_valid(int t, int V, int ignore_index) { return t != ignore_index && t >= 0 && t < V; }

/* Values per step of the in-place bf16 store (see ce_row_body) */
#define CE_STORE_CHUNK 256

/* One row of logits z (V): returns logsumexp - z[t]; with grad, writes
 * dlogits = scale (softmax - onehot) over z: fp32, or with bf16 as V bf16
 * values in the row's first 2V bytes. Those are written CE_STORE_CHUNK at a
 * time through a buffer, each chunk after all of its logits are read: chunk
 * j0's bytes hold logits below j0 / 2 + CE_STORE_CHUNK / 2, all read by then.
 * With cap > 0 the logits are soft-capped first, z -> cap tanh(z / cap)
 * (Gemma 2), and the gradient takes the cap's derivative 1 - tanh^2: z keeps
 * the capped logits then, and each exponential is taken again for it. */
TT_INLINE double ce_row_body(float *z, int V, int t, float scale, float cap, int grad, int bf16, const float *next)
{
    const float inv = cap > 0 ? 1.0f / cap : 0.0f;
    if (cap > 0) {
        #pragma omp simd
        for (int j = 0; j < V; j++) z[j] = cap * tt_tanhf(z[j] * inv);
    }
    float m = -INFINITY;
    #pragma omp simd reduction(max : m)
    for (int j = 0; j < V; j++) m = z[j] > m ? z[j] : m;
    const float zt = z[t];
    const int keep = grad && !(cap > 0); /* exp(z - m) kept in z: it becomes the gradient below */
    double sum = 0;
    for (int j0 = 0; j0 < V; j0 += CPU_CE_SUM_CHUNK) {
        const int j1 = j0 + CPU_CE_SUM_CHUNK < V ? j0 + CPU_CE_SUM_CHUNK : V;
        float part = 0;
        /* the next row's lines, while this one's exponentials (in L2 by now) keep the core busy: its max
         * pass then reads from L2, not memory */
        if (next)
            for (int j = j0; j < j1; j += 16) __builtin_prefetch(next + j, 0, 2);
        if (keep) {
            #pragma omp simd reduction(+ : part)
            for (int j = j0; j < j1; j++) {
                z[j] = tt_expf(z[j] - m);
                part += z[j];
            }
        } else {
            #pragma omp simd reduction(+ : part)
            for (int j = j0; j < j1; j++) part += tt_expf(z[j] - m);
        }
        sum += part;
    }
    const double lse = (double)m + log(sum);
    if (!grad) return lse - (double)zt;
    const float a = (float)(scale / sum);
    /* the target's gradient, before its logit may be overwritten */
    const float ut = zt * inv, gt = cap > 0 ? (tt_expf(zt - m) * a - scale) * (1.0f - ut * ut) : z[t] * a - scale;
    if (!bf16) {
        if (cap > 0) {
            #pragma omp simd
            for (int j = 0; j < V; j++) {
                const float u = z[j] * inv;
                z[j] = tt_expf(z[j] - m) * a * (1.0f - u * u);
            }
        } else {
            #pragma omp simd
            for (int j = 0; j < V; j++) z[j] *= a;
        }
        z[t] = gt;
        return lse - (double)zt;
    }
    uint16_t buf[CE_STORE_CHUNK];
    for (int j0 = 0; j0 < V; j0 += CE_STORE_CHUNK) {
        const int n = V - j0 < CE_STORE_CHUNK ? V - j0 : CE_STORE_CHUNK;
        const float *zj = z + j0;
        if (cap > 0) {
            #pragma omp simd
            for (int j = 0; j < n; j++) {
                const float u = zj[j] * inv;
                buf[j] = tt_bf16_bits(tt_expf(zj[j] - m) * a * (1.0f - u * u));
            }
        } else {
            #pragma omp simd
            for (int j = 0; j < n; j++) buf[j] = tt_bf16_bits(zj[j] * a);
        }
        memcpy((char *)z + (size_t)j0 * 2, buf, (size_t)n * 2);
    }
    const uint16_t bt = tt_bf16_bits(gt);
    memcpy((char *)z + (size_t)t * 2, &bt, 2);
    return lse - (double)zt;
}
TT_CLONES static double ce_row(float *z, int V, int t, float scale, float cap, int grad, int bf16, const float *next)
{
    return ce_row_body(z, V, t, scale, cap, grad, bf16, next);
}

/* Rows are processed in blocks, one after the other; each block's three
 * products are large GEMMs spread over the cores, and the row-wise softmax in
 * between is an OpenMP loop. Every output element has one owner and a fixed
 * summation order, so the result is deterministic for a thread count. */
tt_err cpu_ce_linear(const void *h, const void *W, tt_dtype wdt, const int32_t *targets, int N, int D, int V, int ignore_index,
                     double scale, void *dh, float *dW, tt_dtype dt, double *loss)
{
    return cpu_ce_linear_capped(h, W, wdt, targets, N, D, V, ignore_index, scale, 0, dh, dW, dt, loss);
}

tt_err cpu_ce_linear_capped(const void *h, const void *W, tt_dtype wdt, const int32_t *targets, int N, int D, int V,
                            int ignore_index, double scale, double softcap, void *dh, float *dW, tt_dtype dt,
                            double *loss)
{
    *loss = 0;
    if (N <= 0) return 0;
    const size_t esz = tt_dtype_size(dt);
    if (D <= 0 || V <= 0) { /* logits are all zero (or there is no class to be right about) */
        if (dh && D > 0) memset(dh, 0, (size_t)N * D * esz);
        long valid = 0;
        for (int n = 0; n < N; n++) valid += ce_valid(targets[n], V, ignore_index);
        *loss = valid ? scale * valid * log((double)V) : 0.0;
        return 0;
    }
    const int grads = dh || dW, bf = dt == TT_BF16;
    const tt_dtype compute = bf ? TT_BF16 : TT_F32, gdt = bf && grads ? TT_BF16 : TT_F32;
    if (gdt == TT_BF16 && V > INT_MAX / 2) return tt_errorf("cross-entropy: a vocabulary of %d is too large", V);
    const int R = tt_ce_block_rows(N, V, __atomic_load_n(&g_ce_block, __ATOMIC_RELAXED));
    /* z (R, V) fp32 logits, then their gradient: fp32 in place, or bf16 rows of stride 2V over the first half of
     * each row; rowloss (N) */
    const size_t zb = ((size_t)R * V * sizeof(float) + 63) & ~(size_t)63;
    char *buf = tt_cpu_scratch(TT_SCRATCH_CE, zb + (size_t)N * sizeof(double));
    if (!buf) return tt_error_prefix("cross-entropy: %d x %d block of logits: ", R, V);
    float *z = (float *)buf;
    double *rowloss = (double *)(buf + zb);
    const int ldg = gdt == TT_BF16 ? 2 * V : V; /* the gradient's row stride, in its own elements */
    /* without soft-cap: cross_entropy_avx512.c's row where the CPU has it */
    const int row_avx = !(softcap > 0) && __atomic_load_n(&g_ce_avx512, __ATOMIC_RELAXED) && tt_cpu_avx512();
    const float fscale = (float)scale;
    for (int r0 = 0; r0 < N; r0 += R) {
        const int nr = N - r0 < R ? N - r0 : R;
        const void *hb = (const char *)h + (size_t)r0 * D * esz;
        int any = 0;
        for (int r = 0; r < nr; r++) any |= ce_valid(targets[r0 + r], V, ignore_index);
        if (!any) { /* nothing scored here: no loss, no gradient */
            for (int r = 0; r < nr; r++) rowloss[r0 + r] = 0;
            if (dh) memset((char *)dh + (size_t)r0 * D * esz, 0, (size_t)nr * D * esz);
            continue;
        }
        /* logits (nr, V) = h_block (nr, D) W^T */
        if (tt_gemm(&(tt_gemm_args){.compute = compute, .A = hb, .adt = dt, .lda = D, .B = W, .bdt = wdt,
                                    .ldb = D, .tb = 1, .C = z, .cdt = TT_F32, .ldc = V, .M = nr, .N = V, .K = D}))
            return -1;
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < nr; r++) {
            float *zr = z + (size_t)r * V;
            const int t = targets[r0 + r];
            if (!ce_valid(t, V, ignore_index)) {
                rowloss[r0 + r] = 0;
                if (grads) memset(zr, 0, (size_t)V * tt_dtype_size(gdt));
                continue;
            }
            const float *next = r + 1 < nr ? zr + V : NULL;
            rowloss[r0 + r] = row_avx ? cpu_ce_row_avx512(zr, V, t, fscale, grads, gdt == TT_BF16, next)
                                      : ce_row(zr, V, t, fscale, (float)softcap, grads, gdt == TT_BF16, next);
        }
        /* dh_block (nr, D) = dlogits (nr, V) W (V, D) */
        if (dh && tt_gemm(&(tt_gemm_args){.compute = compute, .A = z, .adt = gdt, .lda = ldg, .B = W, .bdt = wdt,
                                          .ldb = D, .C = (char *)dh + (size_t)r0 * D * esz, .cdt = dt, .ldc = D,
                                          .M = nr, .N = D, .K = V}))
            return -1;
        /* dW (V, D) += dlogits^T (V, nr) h_block (nr, D) */
        if (dW && tt_gemm(&(tt_gemm_args){.compute = compute, .A = z, .adt = gdt, .lda = ldg, .ta = 1, .B = hb,
                                          .bdt = dt, .ldb = D, .C = dW, .cdt = TT_F32, .ldc = D, .M = V, .N = D,
                                          .K = nr, .accumulate = 1}))
            return -1;
    }
    double total = 0;
    for (int n = 0; n < N; n++) total += rowloss[n];
    *loss = scale * total; /* NaN or Inf here is the model's, for the run to report */
    return 0;
}

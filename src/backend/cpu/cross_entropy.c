/* cross_entropy.c — fused linear + cross-entropy. The logits h W^T are made
 * one block of rows at a time (all of the vocabulary for R rows) and never
 * held whole; the loss and the softmax gradient come from that block, and dh
 * and dW from two more products with it, so each block costs exactly three
 * GEMMs. With bf16 activations the products run on bf16 panels and the
 * gradient of the logits is kept in bf16 (half the bytes for the two GEMMs
 * that read it); the logits, the softmax and every sum stay fp32. */
#include <math.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

/* Logits per block: 32M floats (128 MB). Big blocks keep the dW product
 * (K = rows of the block) efficient; the whole [N, V] logits that PyTorch
 * materialises are several times larger. */
#define CE_BLOCK (32u << 20)
#define CE_MIN_ROWS 64

static inline int ce_valid(int t, int V, int ignore_index) { return t != ignore_index && t >= 0 && t < V; }

/* Terms per partial sum of a row's exponentials: fp32 sums of this many,
 * added up in double, keep the softmax's denominator accurate for any
 * vocabulary and however the compiler vectorises (a plain fp32 running sum
 * over 70,000 terms drifts by ~1e-3). */
#define CE_SUM_CHUNK 256

/* One row of logits z (V): returns logsumexp - z[t]; with grads, writes
 * dlogits = scale (softmax - onehot) to g (fp32, may be z) or gb (bf16).
 * With cap > 0 the logits are soft-capped first, z -> cap tanh(z / cap)
 * (Gemma 2), and the gradient takes the cap's derivative 1 - tanh^2: z keeps
 * the capped logits then, and each exponential is taken again for it. */
TT_INLINE double ce_row_body(float *z, int V, int t, float scale, float cap, float *g, uint16_t *gb, const float *next)
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
    const int keep = (g || gb) && !(cap > 0); /* exp(z - m) kept in z: it becomes the gradient below */
    double sum = 0;
    for (int j0 = 0; j0 < V; j0 += CE_SUM_CHUNK) {
        const int j1 = j0 + CE_SUM_CHUNK < V ? j0 + CE_SUM_CHUNK : V;
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
    const float a = (float)(scale / sum);
    if (cap > 0 && (g || gb)) {
        const float tt = zt * inv, gt = (tt_expf(zt - m) * a - scale) * (1.0f - tt * tt);
        #pragma omp simd
        for (int j = 0; j < V; j++) {
            const float u = z[j] * inv, d = tt_expf(z[j] - m) * a * (1.0f - u * u);
            if (gb) gb[j] = tt_bf16_bits(d);
            else g[j] = d;
        }
        if (gb) gb[t] = tt_bf16_bits(gt);
        else g[t] = gt;
    } else if (gb) {
        for (int j = 0; j < V; j++) gb[j] = tt_bf16_bits(z[j] * a);
        gb[t] = tt_bf16_bits(z[t] * a - scale);
    } else if (g) {
        for (int j = 0; j < V; j++) g[j] = z[j] * a;
        g[t] -= scale;
    }
    return (double)m + log(sum) - (double)zt;
}
TT_CLONES static double ce_row(float *z, int V, int t, float scale, float cap, float *g, uint16_t *gb,
                               const float *next)
{
    return ce_row_body(z, V, t, scale, cap, g, gb, next);
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
    int R = (int)(CE_BLOCK / (size_t)V);
    if (R < CE_MIN_ROWS) R = CE_MIN_ROWS;
    if (R > N) R = N;
    R = (N + (N + R - 1) / R - 1) / ((N + R - 1) / R); /* even blocks: no sliver at the end */
    /* z (R, V) fp32 logits; gz (R, V) their gradient in bf16 (else in z); rowloss (N) */
    const size_t zb = ((size_t)R * V * sizeof(float) + 63) & ~(size_t)63;
    const size_t gb = gdt == TT_BF16 ? ((size_t)R * V * 2 + 63) & ~(size_t)63 : 0;
    char *buf = tt_cpu_scratch(TT_SCRATCH_CE, zb + gb + (size_t)N * sizeof(double));
    if (!buf) return tt_error_prefix("cross-entropy: %d x %d block of logits: ", R, V);
    float *z = (float *)buf;
    uint16_t *gz16 = gb ? (uint16_t *)(buf + zb) : NULL;
    double *rowloss = (double *)(buf + zb + gb);
    const void *gz = gz16 ? (const void *)gz16 : (const void *)z;
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
                if (gz16) memset(gz16 + (size_t)r * V, 0, (size_t)V * 2);
                else if (grads) memset(zr, 0, (size_t)V * sizeof(float));
                continue;
            }
            rowloss[r0 + r] = ce_row(zr, V, t, fscale, (float)softcap, grads && !gz16 ? zr : NULL,
                                     gz16 ? gz16 + (size_t)r * V : NULL, r + 1 < nr ? zr + V : NULL);
        }
        /* dh_block (nr, D) = dlogits (nr, V) W (V, D) */
        if (dh && tt_gemm(&(tt_gemm_args){.compute = compute, .A = gz, .adt = gdt, .lda = V, .B = W, .bdt = wdt,
                                          .ldb = D, .C = (char *)dh + (size_t)r0 * D * esz, .cdt = dt, .ldc = D,
                                          .M = nr, .N = D, .K = V}))
            return -1;
        /* dW (V, D) += dlogits^T (V, nr) h_block (nr, D) */
        if (dW && tt_gemm(&(tt_gemm_args){.compute = compute, .A = gz, .adt = gdt, .lda = V, .ta = 1, .B = hb,
                                          .bdt = dt, .ldb = D, .C = dW, .cdt = TT_F32, .ldc = D, .M = V, .N = D,
                                          .K = nr, .accumulate = 1}))
            return -1;
    }
    double total = 0;
    for (int n = 0; n < N; n++) total += rowloss[n];
    *loss = scale * total; /* NaN or Inf here is the model's, for the run to report */
    return 0;
}

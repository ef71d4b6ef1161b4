/* cross_entropy.c — fused linear + cross-entropy in fp32. The logits h W^T
 * are made one block of rows at a time (all of the vocabulary for R rows,
 * R*V at most CE_BLOCK floats) and never held whole; the loss and the
 * softmax gradient come from that block, and dh and dW from two more
 * products with it, so each block costs exactly three GEMMs. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/vmath.h"
#include "core/core.h"

#define CE_BLOCK (4u << 20) /* floats of logits per block: 16 MB */

static inline int ce_valid(int t, int V, int ignore_index)
{
    return t != ignore_index && t >= 0 && t < V;
}

/* Rows are processed in blocks, one after the other; each block's three
 * products are large GEMMs that OpenBLAS spreads over the cores, and the
 * row-wise softmax in between is an OpenMP loop. Every output element has one
 * owner and a fixed summation order, so the result is deterministic for a
 * thread count. Returns NAN (with the error set) only if the block cannot be
 * allocated. */
double cpu_ce_linear(const float *h, const float *W, const int32_t *targets, int N, int D, int V,
                     int ignore_index, double scale, float *dh, float *dW)
{
    if (N <= 0) return 0;
    if (D <= 0 || V <= 0) { /* logits are all zero (or there is no class to be right about) */
        if (dh && D > 0) memset(dh, 0, (size_t)N * D * sizeof(float));
        long valid = 0;
        for (int n = 0; n < N; n++) valid += ce_valid(targets[n], V, ignore_index);
        return valid ? scale * valid * log((double)V) : 0.0;
    }
    int R = (int)(CE_BLOCK / (size_t)V);
    if (R < 16) R = 16;
    if (R > N) R = N;
    float *z = tt_alloc((size_t)R * V * sizeof(float)); /* (R, V) */
    double *rowloss = tt_alloc((size_t)N * sizeof(double));
    if (!z || !rowloss) {
        tt_free(z);
        tt_free(rowloss);
        tt_errorf("cpu_ce_linear: out of memory for a %d x %d block of logits", R, V);
        return NAN;
    }
    int grads = dh || dW;
    float fscale = (float)scale;
    for (int r0 = 0; r0 < N; r0 += R) {
        int nr = N - r0 < R ? N - r0 : R, any = 0;
        for (int r = 0; r < nr; r++) any |= ce_valid(targets[r0 + r], V, ignore_index);
        if (!any) { /* nothing scored here: no loss, no gradient */
            for (int r = 0; r < nr; r++) rowloss[r0 + r] = 0;
            if (dh) memset(dh + (size_t)r0 * D, 0, (size_t)nr * D * sizeof(float));
            continue;
        }
        /* logits (nr, V) = h_block (nr, D) W^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, V, D, 1.0f, h + (size_t)r0 * D, D, W, D, 0.0f, z, V);
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < nr; r++) {
            float *zr = z + (size_t)r * V;
            int t = targets[r0 + r];
            if (!ce_valid(t, V, ignore_index)) {
                rowloss[r0 + r] = 0;
                if (grads) memset(zr, 0, (size_t)V * sizeof(float));
                continue;
            }
            float m = -INFINITY, zt = zr[t];
            for (int j = 0; j < V; j++) m = zr[j] > m ? zr[j] : m;
            float sum = 0;
            if (grads) { /* keep exp(z - m): it becomes the gradient below */
                #pragma omp simd reduction(+ : sum)
                for (int j = 0; j < V; j++) {
                    zr[j] = tt_expf(zr[j] - m);
                    sum += zr[j];
                }
                float a = fscale / sum; /* dlogits = scale (softmax - onehot) */
                #pragma omp simd
                for (int j = 0; j < V; j++) zr[j] *= a;
                zr[t] -= fscale;
            } else {
                #pragma omp simd reduction(+ : sum)
                for (int j = 0; j < V; j++) sum += tt_expf(zr[j] - m);
            }
            rowloss[r0 + r] = (double)m + log((double)sum) - (double)zt;
        }
        if (dh) /* dh_block (nr, D) = dlogits (nr, V) W (V, D) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, V, 1.0f, z, V, W, D, 0.0f,
                        dh + (size_t)r0 * D, D);
        if (dW) /* dW (V, D) += dlogits^T (V, nr) h_block (nr, D) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, D, nr, 1.0f, z, V, h + (size_t)r0 * D, D, 1.0f,
                        dW, D);
    }
    double total = 0;
    for (int n = 0; n < N; n++) total += rowloss[n];
    tt_free(z);
    tt_free(rowloss);
    return scale * total;
}

/* cross_entropy.c — fused linear + cross-entropy in fp32. The logits h W^T are
 * made CE_ROWS x CE_COLS at a time by cblas_sgemm into a per-thread buffer and
 * never held whole; the loss, dh and dW come out of two sweeps over them. */
#include <cblas.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/cpu/kernels.h"
#include "core/core.h"

#define CE_ROWS 64  /* rows of h per block */
#define CE_COLS 512 /* vocabulary entries per chunk */

static inline int ce_valid(int t, int V, int ignore_index)
{
    return t != ignore_index && t >= 0 && t < V;
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Sweep 1, parallel over row blocks (each owns its rows of dh): an online
 * logsumexp over the vocabulary chunks. dh is accumulated alongside as
 * sum_v exp(z_v - m) W_v, rescaled whenever the running max m moves, exactly
 * as attention accumulates its output, so dh needs no second sweep.
 * Sweep 2, parallel over vocabulary chunks (each owns its rows of dW):
 * the logits again, now with the final logsumexp, give dW.
 * Blocks and chunks have fixed sizes and each output row has one owner that
 * sums in a fixed order, so the result is deterministic. Returns NAN (with
 * the error set) only if the scratch cannot be allocated. */
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
    int nt = tt_num_threads();
    size_t per = (size_t)CE_ROWS * CE_COLS;
    float *buf = tt_alloc(((size_t)nt * per + (size_t)N) * sizeof(float));
    double *rowloss = tt_alloc((size_t)N * sizeof(double));
    if (!buf || !rowloss) {
        tt_free(buf);
        tt_free(rowloss);
        tt_errorf("cpu_ce_linear: out of memory for the logits chunks (N=%d, %d threads)", N, nt);
        return NAN;
    }
    float *lse = buf + (size_t)nt * per; /* (N) */
    float fscale = (float)scale;

    int nrb = (N + CE_ROWS - 1) / CE_ROWS;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int rb = 0; rb < nrb; rb++) {
        int r0 = rb * CE_ROWS, nr = N - r0 < CE_ROWS ? N - r0 : CE_ROWS;
        float *lg = buf + (size_t)thread_id() * per; /* (nr, nc) */
        float m[CE_ROWS], l[CE_ROWS], zt[CE_ROWS];
        for (int r = 0; r < nr; r++) m[r] = -INFINITY, l[r] = 0, zt[r] = 0;
        if (dh) memset(dh + (size_t)r0 * D, 0, (size_t)nr * D * sizeof(float));
        for (int c0 = 0; c0 < V; c0 += CE_COLS) {
            int nc = V - c0 < CE_COLS ? V - c0 : CE_COLS;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, D, 1.0f, h + (size_t)r0 * D,
                        D, W + (size_t)c0 * D, D, 0.0f, lg, nc);
            for (int r = 0; r < nr; r++) {
                float *z = lg + (size_t)r * nc;
                int t = targets[r0 + r];
                if (!ce_valid(t, V, ignore_index)) { /* contributes nothing to dh */
                    memset(z, 0, (size_t)nc * sizeof(float));
                    continue;
                }
                if (t >= c0 && t < c0 + nc) zt[r] = z[t - c0];
                float bm = -INFINITY, sum = 0;
                for (int j = 0; j < nc; j++) bm = z[j] > bm ? z[j] : bm;
                float mn = bm > m[r] ? bm : m[r];
                float corr = expf(m[r] - mn); /* 0 on the first chunk */
                for (int j = 0; j < nc; j++) z[j] = expf(z[j] - mn);
                #pragma omp simd reduction(+ : sum)
                for (int j = 0; j < nc; j++) sum += z[j];
                l[r] = l[r] * corr + sum;
                m[r] = mn;
                if (dh && corr != 1.0f) {
                    float *dr = dh + (size_t)(r0 + r) * D;
                    #pragma omp simd
                    for (int d = 0; d < D; d++) dr[d] *= corr;
                }
            }
            if (dh) /* dh (nr, D) += exp(z - m) (nr, nc) W_chunk (nc, D) */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, D, nc, 1.0f, lg, nc,
                            W + (size_t)c0 * D, D, 1.0f, dh + (size_t)r0 * D, D);
        }
        for (int r = 0; r < nr; r++) {
            int n = r0 + r, t = targets[n];
            if (!ce_valid(t, V, ignore_index)) {
                rowloss[n] = 0;
                lse[n] = 0;
                continue;
            }
            lse[n] = m[r] + logf(l[r]);
            rowloss[n] = (double)m[r] + log((double)l[r]) - (double)zt[r];
            if (dh) { /* dh = scale (softmax W - W_target) */
                float *dr = dh + (size_t)n * D, a = fscale / l[r];
                const float *wt = W + (size_t)t * D;
                #pragma omp simd
                for (int d = 0; d < D; d++) dr[d] = a * dr[d] - fscale * wt[d];
            }
        }
    }

    if (dW) {
        int ncb = (V + CE_COLS - 1) / CE_COLS;
        #pragma omp parallel for schedule(dynamic, 1)
        for (int cb = 0; cb < ncb; cb++) {
            int c0 = cb * CE_COLS, nc = V - c0 < CE_COLS ? V - c0 : CE_COLS;
            float *lg = buf + (size_t)thread_id() * per;
            for (int r0 = 0; r0 < N; r0 += CE_ROWS) {
                int nr = N - r0 < CE_ROWS ? N - r0 : CE_ROWS, any = 0;
                for (int r = 0; r < nr; r++) any |= ce_valid(targets[r0 + r], V, ignore_index);
                if (!any) continue;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, D, 1.0f,
                            h + (size_t)r0 * D, D, W + (size_t)c0 * D, D, 0.0f, lg, nc);
                for (int r = 0; r < nr; r++) { /* dlogits = scale (softmax - onehot) */
                    float *z = lg + (size_t)r * nc;
                    int t = targets[r0 + r];
                    if (!ce_valid(t, V, ignore_index)) {
                        memset(z, 0, (size_t)nc * sizeof(float));
                        continue;
                    }
                    float L = lse[r0 + r];
                    for (int j = 0; j < nc; j++) z[j] = fscale * expf(z[j] - L);
                    if (t >= c0 && t < c0 + nc) z[t - c0] -= fscale;
                }
                /* dW_chunk (nc, D) += dlogits^T (nc, nr) h_block (nr, D) */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, D, nr, 1.0f, lg, nc,
                            h + (size_t)r0 * D, D, 1.0f, dW + (size_t)c0 * D, D);
            }
        }
    }

    double total = 0;
    for (int n = 0; n < N; n++) total += rowloss[n];
    tt_free(buf);
    tt_free(rowloss);
    return scale * total;
}

/* kernels.c — fast fp32 CPU kernels for the elementwise, bias, embedding and
 * normalisation ops: OpenMP over rows, contiguous inner loops gcc vectorises.
 * Sums over rows (bias and norm weight gradients) run over column blocks, each
 * summed by one thread in row order, so they need no scratch and give the
 * same bits on any thread count. Outputs may alias their inputs (in place),
 * so they carry no restrict; `omp simd` states what restrict would (not on
 * loops that call libm, which neither compiler vectorises without -ffast-math). */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"

/* Columns per block in the column-parallel reductions over rows. */
#define COLS 64

void cpu_add(const float *a, const float *b, float *y, size_t n)
{
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void cpu_bias_add(const float *x, const float *b, float *y, int N, int D)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * D;
        float *yr = y + (size_t)n * D;
        #pragma omp simd
        for (int d = 0; d < D; d++) yr[d] = xr[d] + b[d];
    }
}

void cpu_bias_grad(const float *restrict dy, float *restrict db, int N, int D)
{
    int nblk = (D + COLS - 1) / COLS;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
        float acc[COLS] = {0};
        for (int n = 0; n < N; n++) {
            const float *restrict r = dy + (size_t)n * D + d0;
            for (int d = 0; d < nd; d++) acc[d] += r[d];
        }
        memcpy(db + d0, acc, (size_t)nd * sizeof(float));
    }
}

/* An id outside [0, V) is a caller error; it reads as a zero row. */
void cpu_embedding_fwd(const int32_t *ids, const float *table, float *out, int N, int V, int D)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        int id = ids[n];
        if (id >= 0 && id < V) memcpy(out + (size_t)n * D, table + (size_t)id * D, (size_t)D * sizeof(float));
        else memset(out + (size_t)n * D, 0, (size_t)D * sizeof(float));
    }
}

/* Repeated ids make a row-parallel scatter race, so each thread owns a slice
 * of columns and walks all rows in order: deterministic and race-free. */
void cpu_embedding_bwd(const int32_t *ids, const float *restrict dout, float *restrict dtable, int N,
                       int V, int D)
{
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (int v = 0; v < V; v++) memset(dtable + (size_t)v * D, 0, (size_t)D * sizeof(float));
        int nblk = (D + COLS - 1) / COLS;
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            for (int n = 0; n < N; n++) {
                int id = ids[n];
                if (id < 0 || id >= V) continue;
                float *restrict dst = dtable + (size_t)id * D + d0;
                const float *restrict src = dout + (size_t)n * D + d0;
                for (int d = 0; d < nd; d++) dst[d] += src[d];
            }
        }
    }
}

/* As Hugging Face's LlamaRMSNorm in fp32: y = w * (x * rstd). */
void cpu_rmsnorm_fwd(const float *x, const float *w, float *y,
                     float *rstd, int N, int D, double eps)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * D;
        float *yr = y + (size_t)n * D;
        float ss = 0;
        #pragma omp simd reduction(+ : ss)
        for (int d = 0; d < D; d++) ss += xr[d] * xr[d];
        float r = 1.0f / sqrtf(ss / (float)D + (float)eps);
        #pragma omp simd
        for (int d = 0; d < D; d++) yr[d] = w[d] * (xr[d] * r);
        rstd[n] = r;
    }
}

void cpu_rmsnorm_bwd(const float *x, const float *w, const float *rstd, const float *dy, float *dx,
                     float *dw, int N, int D)
{
    int nblk = (D + COLS - 1) / COLS;
    #pragma omp parallel
    {
        /* dw first, so that dx may overwrite dy in place */
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            float acc[COLS] = {0};
            for (int n = 0; n < N; n++) {
                const float *xr = x + (size_t)n * D + d0, *dyr = dy + (size_t)n * D + d0;
                float r = rstd[n];
                #pragma omp simd
                for (int d = 0; d < nd; d++) acc[d] += dyr[d] * xr[d] * r;
            }
            memcpy(dw + d0, acc, (size_t)nd * sizeof(float));
        }
        #pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * D, *dyr = dy + (size_t)n * D;
            float *dxr = dx + (size_t)n * D;
            float r = rstd[n], dot = 0;
            #pragma omp simd reduction(+ : dot)
            for (int d = 0; d < D; d++) dot += dyr[d] * w[d] * xr[d];
            float c = r * r * r * dot / (float)D;
            #pragma omp simd
            for (int d = 0; d < D; d++) dxr[d] = r * w[d] * dyr[d] - c * xr[d];
        }
    }
}

void cpu_layernorm_fwd(const float *x, const float *w, const float *b,
                       float *y, float *mean, float *rstd, int N, int D,
                       double eps)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * D;
        float *yr = y + (size_t)n * D;
        float s = 0, v = 0;
        #pragma omp simd reduction(+ : s)
        for (int d = 0; d < D; d++) s += xr[d];
        float mu = s / (float)D;
        /* two passes: the variance of centred values loses nothing to cancellation */
        #pragma omp simd reduction(+ : v)
        for (int d = 0; d < D; d++) v += (xr[d] - mu) * (xr[d] - mu);
        float r = 1.0f / sqrtf(v / (float)D + (float)eps);
        #pragma omp simd
        for (int d = 0; d < D; d++) yr[d] = (xr[d] - mu) * r * w[d] + b[d];
        mean[n] = mu;
        rstd[n] = r;
    }
}

void cpu_layernorm_bwd(const float *x, const float *w, const float *mean, const float *rstd,
                       const float *dy, float *dx, float *dw, float *db, int N, int D)
{
    int nblk = (D + COLS - 1) / COLS;
    #pragma omp parallel
    {
        /* dw and db first, so that dx may overwrite dy in place */
        #pragma omp for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int d0 = blk * COLS, nd = D - d0 < COLS ? D - d0 : COLS;
            float aw[COLS] = {0}, ab[COLS] = {0};
            for (int n = 0; n < N; n++) {
                const float *xr = x + (size_t)n * D + d0, *dyr = dy + (size_t)n * D + d0;
                float mu = mean[n], r = rstd[n];
                #pragma omp simd
                for (int d = 0; d < nd; d++) {
                    aw[d] += dyr[d] * (xr[d] - mu) * r;
                    ab[d] += dyr[d];
                }
            }
            memcpy(dw + d0, aw, (size_t)nd * sizeof(float));
            memcpy(db + d0, ab, (size_t)nd * sizeof(float));
        }
        #pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *xr = x + (size_t)n * D, *dyr = dy + (size_t)n * D;
            float *dxr = dx + (size_t)n * D;
            float mu = mean[n], r = rstd[n], mg = 0, mgx = 0;
            #pragma omp simd reduction(+ : mg, mgx)
            for (int d = 0; d < D; d++) {
                float g = dyr[d] * w[d];
                mg += g;
                mgx += g * (xr[d] - mu) * r;
            }
            mg /= (float)D;
            mgx /= (float)D;
            #pragma omp simd
            for (int d = 0; d < D; d++)
                dxr[d] = r * (dyr[d] * w[d] - mg - (xr[d] - mu) * r * mgx);
        }
    }
}

void cpu_swiglu_fwd(const float *a, const float *b, float *y, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

void cpu_swiglu_bwd(const float *a, const float *b, const float *dy,
                    float *da, float *db, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = a[i], s = 1.0f / (1.0f + expf(-x));
        da[i] = dy[i] * b[i] * s * (1.0f + x * (1.0f - s));
        db[i] = dy[i] * x * s;
    }
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

void cpu_gelu_fwd(const float *x, float *y, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
    }
}

void cpu_gelu_bwd(const float *x, const float *dy, float *dx, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float v = x[i], t = tanhf(GELU_C * (v + 0.044715f * v * v * v));
        float g = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
        dx[i] = dy[i] * g;
    }
}

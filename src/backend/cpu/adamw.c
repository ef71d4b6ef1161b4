/* adamw.c — the fp32 optimizer kernels: AdamW on one tensor and the sum of
 * squares that gradient clipping takes its norm from. */
#include <math.h>

#include "backend/cpu/kernels.h"

/* Chunks of the sum of squares: a fixed count, so the partial sums and the
 * order they are added in do not depend on the thread count. */
#define SUMSQ_CHUNKS 64

double cpu_sumsq(const float *g, size_t n)
{
    double part[SUMSQ_CHUNKS];
    size_t chunk = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < SUMSQ_CHUNKS; c++) {
        size_t a = (size_t)c * chunk, e = a + chunk < n ? a + chunk : n;
        double s = 0;
        #pragma omp simd reduction(+ : s)
        for (size_t i = a; i < e; i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double total = 0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++) total += part[c];
    return total;
}

/* The bias corrections are folded into two scalars, as torch.optim.AdamW does:
 * mhat / (sqrt(vhat) + eps) = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps). */
void cpu_adamw(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
               size_t n, double lr, double b1, double b2, double eps, double wd, double clip,
               long step)
{
    double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    float fb1 = (float)b1, fb2 = (float)b2, a1 = (float)(1.0 - b1), a2 = (float)(1.0 - b2);
    float c = (float)clip, ibc1 = (float)(1.0 / bc1), isbc2 = (float)(1.0 / sqrt(bc2));
    float flr = (float)lr, fwd = (float)wd, feps = (float)eps;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * c;
        float mi = fb1 * m[i] + a1 * gi;
        float vi = fb2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= flr * (mi * ibc1 / (sqrtf(vi) * isbc2 + feps) + fwd * p[i]);
    }
}

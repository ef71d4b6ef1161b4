/* adamw.c — the optimizer kernels: a multi-tensor AdamW that updates every
 * parameter of a model in one pass over its flat buffers (weights, gradient,
 * moments), and the sum of squares that gradient clipping takes its norm
 * from. Both are memory-bound: each touches a byte of memory a few times at
 * most, so they are single fused passes, vectorised (simd.h). */
#include <math.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

/* Chunks of the sum of squares: a fixed count, so the partial sums and the
 * order they are added in do not depend on the thread count. */
#define SUMSQ_CHUNKS 64

/* Streams a thread reads at once: one sequential read stream a core gets
 * about 10 GB/s from memory here (the sum ran at 18-23 GB/s on 2 cores,
 * where AdamW's eight streams move 50), so the range is cut in SUMSQ_STREAMS
 * parts read side by side. */
#define SUMSQ_STREAMS 4

/* Both passes stream buffers far larger than the caches, and a core moves
 * only as many bytes as it has cache misses in flight: the hardware
 * prefetchers alone left the sum at 26 GB/s on 2 cores of the Intel Xeon
 * host. So the loops run in blocks of STREAM_BLOCK elements (4 cache lines
 * of fp32), and each block first asks for the lines STREAM_AHEAD bytes
 * further on, in every stream it reads, where those lie in the range the
 * loop walks (a prefetch would not fault past it, but the address would
 * point outside the buffer). */
#define STREAM_BLOCK 64
#define STREAM_AHEAD 2048
#define AHEAD_FLOATS (STREAM_AHEAD / (int)sizeof(float))

TT_CLONES static double sumsq_run(const float *g, size_t n)
{
    const size_t q = n / SUMSQ_STREAMS;
    const float *g0 = g, *g1 = g + q, *g2 = g + 2 * q, *g3 = g + 3 * q;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t b = 0; b < q; b += STREAM_BLOCK) {
        const size_t e = b + STREAM_BLOCK < q ? b + STREAM_BLOCK : q, f = b + AHEAD_FLOATS;
        if (f + STREAM_BLOCK <= q) {
            const size_t bytes = STREAM_BLOCK * sizeof(float);
            tt_prefetch(g0 + f, bytes), tt_prefetch(g1 + f, bytes), tt_prefetch(g2 + f, bytes), tt_prefetch(g3 + f, bytes);
        }
        #pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (size_t i = b; i < e; i++) {
            s0 += (double)g0[i] * g0[i];
            s1 += (double)g1[i] * g1[i];
            s2 += (double)g2[i] * g2[i];
            s3 += (double)g3[i] * g3[i];
        }
    }
    double s = 0;
    for (size_t i = 4 * q; i < n; i++) s += (double)g[i] * g[i];
    return s0 + s1 + s2 + s3 + s;
}

double cpu_sumsq(const float *g, size_t n)
{
    double part[SUMSQ_CHUNKS];
    const size_t chunk = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < SUMSQ_CHUNKS; c++) {
        const size_t a = (size_t)c * chunk, e = a + chunk < n ? a + chunk : n;
        part[c] = a < e ? sumsq_run(g + a, e - a) : 0;
    }
    double total = 0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++) total += part[c];
    return total;
}

/* The step's constants. The bias corrections are folded into two scalars, as
 * torch.optim.AdamW does: mhat / (sqrt(vhat) + eps) = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps). */
typedef struct {
    float b1, b2, a1, a2, clip, ibc1, isbc2, lr, eps;
} adamw_k;

/* n elements with weight decay wd; the gradient is read once and zeroed for
 * the next step's accumulation. With p16 the new weights also go there,
 * rounded to bf16 as the GEMM's packers round them: the bf16 products read
 * that copy, so a product on it equals one on the fp32 weights bit for bit. */
TT_INLINE void adamw_body(float *restrict p, float *restrict g, float *restrict m, float *restrict v,
                          uint16_t *restrict p16, size_t n, const adamw_k *k, float wd, int copy)
{
    const adamw_k c = *k;
    for (size_t b = 0; b < n; b += STREAM_BLOCK) {
        const size_t e = b + STREAM_BLOCK < n ? b + STREAM_BLOCK : n, f = b + AHEAD_FLOATS;
        if (f + STREAM_BLOCK <= n)
            for (size_t l = 0; l < STREAM_BLOCK; l += 16) { /* all four are written: asked for to write */
                __builtin_prefetch(p + f + l, 1), __builtin_prefetch(g + f + l, 1);
                __builtin_prefetch(m + f + l, 1), __builtin_prefetch(v + f + l, 1);
            }
        for (size_t i = b; i < e; i++) {
            const float gi = g[i] * c.clip;
            const float mi = c.b1 * m[i] + c.a1 * gi;
            const float vi = c.b2 * v[i] + c.a2 * gi * gi;
            m[i] = mi;
            v[i] = vi;
            const float pi = p[i] - c.lr * (mi * c.ibc1 / (sqrtf(vi) * c.isbc2 + c.eps) + wd * p[i]);
            p[i] = pi;
            if (copy) p16[i] = tt_bf16_bits(pi);
            g[i] = 0;
        }
    }
}
TT_CLONES static void adamw_run(float *restrict p, float *restrict g, float *restrict m, float *restrict v, size_t n,
                                const adamw_k *k, float wd)
{
    adamw_body(p, g, m, v, NULL, n, k, wd, 0);
}
TT_CLONES static void adamw_run16(float *restrict p, float *restrict g, float *restrict m, float *restrict v,
                                  uint16_t *restrict p16, size_t n, const adamw_k *k, float wd)
{
    adamw_body(p, g, m, v, p16, n, k, wd, 1);
}

/* [a, e) of every buffer, with weight decay wd */
static void adamw_range(float *p, float *g, float *m, float *v, uint16_t *p16, size_t a, size_t e, const adamw_k *k,
                        float wd)
{
    if (p16) adamw_run16(p + a, g + a, m + a, v + a, p16 + a, e - a, k, wd);
    else adamw_run(p + a, g + a, m + a, v + a, e - a, k, wd);
}

/* Elements per task: big enough to stream, small enough to spread evenly. */
#define ADAMW_CHUNK 32768

void cpu_adamw(float *p, float *g, float *m, float *v, uint16_t *p16, size_t n, double lr, double b1, double b2,
               double eps, double wd, double clip, long step, const int64_t *decay, int n_decay)
{
    const double bc1 = 1.0 - pow(b1, (double)step), bc2 = 1.0 - pow(b2, (double)step);
    const adamw_k k = {(float)b1, (float)b2, (float)(1.0 - b1), (float)(1.0 - b2), (float)clip, (float)(1.0 / bc1),
                       (float)(1.0 / sqrt(bc2)), (float)lr, (float)eps};
    const long nc = (long)((n + ADAMW_CHUNK - 1) / ADAMW_CHUNK);
    #pragma omp parallel for schedule(static)
    for (long c = 0; c < nc; c++) {
        size_t a = (size_t)c * ADAMW_CHUNK;
        const size_t e = a + ADAMW_CHUNK < n ? a + ADAMW_CHUNK : n;
        if (!decay) {
            adamw_range(p, g, m, v, p16, a, e, &k, (float)wd);
            continue;
        }
        /* the chunk in runs of constant decay: the first range ending after a, by bisection */
        int lo = 0, hi = n_decay;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if ((size_t)decay[2 * mid + 1] <= a) lo = mid + 1;
            else hi = mid;
        }
        for (int r = lo; a < e; r++) {
            const size_t r0 = r < n_decay ? (size_t)decay[2 * r] : e, r1 = r < n_decay ? (size_t)decay[2 * r + 1] : e;
            const size_t gap = r0 < e ? r0 : e; /* [a, gap): no decay */
            if (a < gap) adamw_range(p, g, m, v, p16, a, gap, &k, 0.0f), a = gap;
            const size_t end = r1 < e ? r1 : e; /* [a, end): decay */
            if (a < end) adamw_range(p, g, m, v, p16, a, end, &k, (float)wd), a = end;
        }
    }
}

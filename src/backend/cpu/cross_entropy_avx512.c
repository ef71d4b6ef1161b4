/* cross_entropy_avx512.c — one row of the fused linear + cross-entropy in
 * AVX-512, without soft-cap: the loss, and the gradient of the logits in
 * fp32 or bf16. It does what cross_entropy.c's ce_row_body does for those,
 * pass for pass (the row's max; each exp(z - max) kept in z and summed, in
 * fp32 partial sums of CPU_CE_SUM_CHUNK values added up in double, while the
 * next row is asked for; the gradient scale (softmax - onehot), in place, or
 * rounded to bf16 over the first half of the row), with two differences: the
 * exponential is exp16_maskz on FMAs (relative error 3e-7, as tt_expf's
 * 2e-7, where tt_expf is 15 multiplies and adds C11 never contracts), and
 * the bf16 values go straight into the row, 32 at a time, each store after
 * the 32 logits it covers and every logit below them are read. The sums'
 * order and the exponential's last bits differ from the portable body's, so
 * the loss moves in its last digits, an fp32 gradient in its last bits and a
 * bf16 one, rarely, by one ulp (tests/test_cpu_kernels.c compares them). */
#include <math.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "backend/cpu/avx512_util.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl")))

TGT double cpu_ce_row_avx512(float *z, int V, int t, float scale, int grad, int bf16, const float *next)
{
    /* the row's max */
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < V; j += 16) {
        const __mmask16 k = mask16(V - j);
        mv = _mm512_mask_max_ps(mv, k, mv, _mm512_maskz_loadu_ps(k, z + j));
    }
    const float m = _mm512_reduce_max_ps(mv), zt = z[t];
    const __m512 mm = _mm512_set1_ps(m);
    /* exp(z - m) into z, and their sum */
    double sum = 0;
    for (int j0 = 0; j0 < V; j0 += CPU_CE_SUM_CHUNK) {
        const int j1 = j0 + CPU_CE_SUM_CHUNK < V ? j0 + CPU_CE_SUM_CHUNK : V;
        /* the next row's lines, while this one's exponentials (in L2 by now) keep the core busy */
        if (next)
            for (int j = j0; j < j1; j += 16) _mm_prefetch((const char *)(next + j), _MM_HINT_T1);
        __m512 part = _mm512_setzero_ps();
        for (int j = j0; j < j1; j += 16) {
            const __mmask16 k = mask16(j1 - j);
            const __m512 e = exp16_maskz(k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, z + j), mm));
            _mm512_mask_storeu_ps(z + j, k, e);
            part = _mm512_add_ps(part, e);
        }
        sum += _mm512_reduce_add_ps(part);
    }
    const double lse = (double)m + log(sum);
    if (!grad) return lse - (double)zt;
    const float a = (float)(scale / sum);
    const float gt = z[t] * a - scale; /* the target's gradient, before its logit is overwritten */
    const __m512 av = _mm512_set1_ps(a);
    if (!bf16) {
        for (int j = 0; j < V; j += 16) {
            const __mmask16 k = mask16(V - j);
            _mm512_mask_storeu_ps(z + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, z + j), av));
        }
        z[t] = gt;
        return lse - (double)zt;
    }
    /* the gradient as bf16 over the row's first 2V bytes: values [j0, j0 + 32) land on the fp32 slots
     * [j0 / 2, j0 / 2 + 16), all read by then */
    uint16_t *g = (uint16_t *)z;
    for (int j0 = 0; j0 < V; j0 += 32) {
        const __mmask16 k0 = mask16(V - j0), k1 = mask16(V - j0 - 16);
        const __m512 v0 = _mm512_maskz_loadu_ps(k0, z + j0), v1 = _mm512_maskz_loadu_ps(k1, z + j0 + 16);
        _mm256_mask_storeu_epi16(g + j0, k0, bf16x16_exact(_mm512_mul_ps(v0, av)));
        _mm256_mask_storeu_epi16(g + j0 + 16, k1, bf16x16_exact(_mm512_mul_ps(v1, av)));
    }
    g[t] = tt_bf16_bits(gt);
    return lse - (double)zt;
}

#else /* not x86-64 with GNU C: the portable body only (this is never called: tt_cpu_avx512 says 0) */
double cpu_ce_row_avx512(float *z, int V, int t, float scale, int grad, int bf16, const float *next)
{
    (void)z, (void)V, (void)t, (void)scale, (void)grad, (void)bf16, (void)next;
    return 0;
}
#endif

/* rope.c — rotary position embedding: the fp32 kernel and the inverse
 * frequencies, computed in fp32 exactly as Hugging Face transformers does. */
#include <math.h>

#include "backend/cpu/kernels.h"

/* Frequencies per block: their cos and sin are made once per row and used by
 * every head. */
#define RB 64

/* x and y may be the same buffer (each pair is read before it is written). */
void cpu_rope(const float *x, const int32_t *pos, const float *inv_freq, float *y, int N, int H,
              int hd, int inverse)
{
    int half = hd / 2;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float c[RB], s[RB];
        for (int i0 = 0; i0 < half; i0 += RB) {
            int ni = half - i0 < RB ? half - i0 : RB;
            for (int i = 0; i < ni; i++) {
                float ang = (float)pos[n] * inv_freq[i0 + i]; /* fp32, as transformers */
                c[i] = cosf(ang);
                s[i] = inverse ? -sinf(ang) : sinf(ang);
            }
            for (int h = 0; h < H; h++) {
                const float *x1 = x + ((size_t)n * H + h) * hd + i0, *x2 = x1 + half;
                float *y1 = y + ((size_t)n * H + h) * hd + i0, *y2 = y1 + half;
                #pragma omp simd
                for (int i = 0; i < ni; i++) {
                    float a = x1[i], b = x2[i];
                    y1[i] = a * c[i] - b * s[i];
                    y2[i] = b * c[i] + a * s[i];
                }
            }
        }
        if (hd % 2) /* an odd last feature has no partner: it passes through */
            for (int h = 0; h < H; h++) y[((size_t)n * H + h) * hd + hd - 1] = x[((size_t)n * H + h) * hd + hd - 1];
    }
}

/* Mirrors transformers' _compute_default_rope_parameters and
 * _compute_llama3_parameters operation by operation in fp32. Python scalars
 * meet fp32 tensors as fp32 values, and `scalar / tensor` is evaluated by
 * torch as tensor.reciprocal() * scalar, so it is written that way here. */
void tt_rope_inv_freq(const tt_rope_params *p, int hd, float *inv_freq)
{
    int half = hd / 2;
    float base = (float)p->theta;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)hd;     /* arange(0, dim, 2).float() / dim */
        inv_freq[i] = 1.0f / powf(base, e);       /* 1.0 / (base ** e) */
    }
    if (!p->llama3) return;
    double old = p->original_max_pos;
    float factor = (float)p->factor, lo = (float)p->low_freq_factor;
    float low_wl = (float)(old / p->low_freq_factor);   /* python floats, compared as fp32 */
    float high_wl = (float)(old / p->high_freq_factor);
    float span = (float)(p->high_freq_factor - p->low_freq_factor);
    float two_pi = (float)(2.0 * 3.14159265358979323846), oldf = (float)old;
    for (int i = 0; i < half; i++) {
        float f = inv_freq[i];
        float wl = (1.0f / f) * two_pi;                      /* 2 * math.pi / inv_freq */
        float fl = wl > low_wl ? f / factor : f;             /* long wavelengths: / factor */
        float sm = ((1.0f / wl) * oldf - lo) / span;         /* smooth_factor */
        float smoothed = (1.0f - sm) * fl / factor + sm * fl;
        int medium = !(wl < high_wl) && !(wl > low_wl);
        inv_freq[i] = medium ? smoothed : fl;
    }
}

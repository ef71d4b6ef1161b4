/* rope.c — RoPE inverse frequencies (default, llama3, linear, YaRN, LongRoPE) and
 * YaRN's cos/sin scale, mirroring transformers' modeling_rope_utils.py. */
#include <math.h>
#include <stddef.h>

#include "models/rope.h"

/* YaRN's inverse dimension formula: the dimension whose wavelength turns
 * num_rot times over the pretraining context (transformers' find_correction_dim). */
static double yarn_correction_dim(double num_rot, int dim, double base, double max_pos)
{
    return (dim * log(max_pos / (num_rot * 2 * 3.14159265358979323846))) / (2 * log(base));
}

/* Mirrors transformers' _compute_default_rope_parameters, _compute_llama3_parameters,
 * _compute_linear_scaling_rope_parameters and _compute_yarn_parameters operation by
 * operation in fp32. Python scalars meet fp32 tensors as fp32 values, and
 * `scalar / tensor` is evaluated by torch as tensor.reciprocal() * scalar, so it
 * is written that way here; the Python-float arithmetic stays in double. */
void tt_rope_inv_freq(const tt_rope_params *p, int hd, float *inv_freq)
{
    tt_rope_inv_freq_ext(p, NULL, hd, inv_freq);
}

void tt_rope_inv_freq_ext(const tt_rope_params *p, const tt_rope_ext *x, int hd, float *inv_freq)
{
    tt_rope_inv_freq_at(p, x, hd, 0, inv_freq);
}

void tt_rope_inv_freq_at(const tt_rope_params *p, const tt_rope_ext *x, int hd, long positions, float *inv_freq)
{
    int half = hd / 2;
    if (x && x->longrope) { /* _compute_longrope_parameters: 1.0 / (ext_factors * base ** (arange(0, dim, 2) / dim)) */
        const float *f = positions > p->original_max_pos ? x->long_factor : x->short_factor;
        for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / (f[i] * powf((float)p->theta, (float)(2 * i) / (float)hd));
        return;
    }
    float base = (float)p->theta;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)hd;     /* arange(0, dim, 2).float() / dim */
        inv_freq[i] = 1.0f / powf(base, e);       /* 1.0 / (base ** e) */
    }
    if (x && x->linear) {
        for (int i = 0; i < half; i++) inv_freq[i] /= (float)p->factor; /* inv_freq /= factor */
        return;
    }
    if (x && x->yarn) {
        double bf = x->beta_fast ? x->beta_fast : 32, bs = x->beta_slow ? x->beta_slow : 1;
        double lo = yarn_correction_dim(bf, hd, p->theta, p->original_max_pos);
        double hi = yarn_correction_dim(bs, hd, p->theta, p->original_max_pos);
        if (!x->yarn_no_truncate) {
            lo = floor(lo);
            hi = ceil(hi);
        }
        lo = lo > 0 ? lo : 0;
        hi = hi < hd - 1 ? hi : hd - 1;
        if (lo == hi) hi += 0.001; /* prevent a zero-width ramp */
        float flo = (float)lo, span = (float)(hi - lo), factor = (float)p->factor;
        for (int i = 0; i < half; i++) {
            float pf = powf(base, (float)(2 * i) / (float)hd);     /* pos_freqs */
            float extra = 1.0f / pf, inter = 1.0f / (factor * pf);
            float ramp = ((float)i - flo) / span;
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            float ext_f = 1.0f - ramp;                             /* inv_freq_extrapolation_factor */
            inv_freq[i] = inter * (1.0f - ext_f) + extra * ext_f;
        }
        return;
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

double tt_rope_attention_scale(const tt_rope_params *p, const tt_rope_ext *x)
{
    if (!x) return 1.0;
    if (x->attention_factor > 0) return x->attention_factor;
    if (x->yarn && p->factor > 1) return 0.1 * log(p->factor) + 1.0; /* get_mscale(factor) */
    return 1.0;
}

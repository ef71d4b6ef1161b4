/* mxfp4.c — MXFP4 (blocks + E8M0 scales) to fp32 or bf16: see mxfp4.h. */
#include <math.h>
#include <string.h>

#include "formats/mxfp4.h"

/* E2M1: sign, two exponent bits, one mantissa bit; code c's value (transformers' FP4_VALUES) */
static const float fp4_value[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

tt_err tt_mxfp4_shape(const char *file, const tt_st_tensor *blocks, const tt_st_tensor *scales, int64_t *lead,
                      int64_t *R, int64_t *G, int *ndim, int64_t out_shape[TT_ST_MAX_DIMS])
{
    const int nb = blocks->ndim, ns = scales->ndim;
    int ok = !strcmp(blocks->dtype, "U8") && !strcmp(scales->dtype, "U8") && nb >= 3 && ns == nb - 1 &&
             blocks->shape[nb - 1] == 16;
    for (int d = 0; ok && d < ns; d++) ok = blocks->shape[d] == scales->shape[d] && scales->shape[d] > 0;
    if (!ok)
        return tt_errorf("%s: MXFP4 tensors '%s' and '%s' do not pair: the blocks must be U8 (..., R, G, 16) and the "
                         "scales U8 (..., R, G)", file, blocks->name, scales->name);
    *lead = 1;
    for (int d = 0; d < ns - 2; d++) {
        if (*lead > INT64_MAX / scales->shape[d]) return tt_errorf("%s: MXFP4 tensor '%s' is too large", file, blocks->name);
        *lead *= scales->shape[d];
        out_shape[d] = scales->shape[d];
    }
    *R = scales->shape[ns - 2], *G = scales->shape[ns - 1];
    out_shape[ns - 2] = *G * 32, out_shape[ns - 1] = *R;
    *ndim = ns;
    return 0;
}

tt_err tt_mxfp4_dequant(const char *file, const tt_st_tensor *blocks, const tt_st_tensor *scales, void *out,
                        tt_dtype dt)
{
    int64_t lead, R, G, shape[TT_ST_MAX_DIMS];
    int ndim;
    if (tt_mxfp4_shape(file, blocks, scales, &lead, &R, &G, &ndim, shape)) return -1;
    if (dt != TT_F32 && dt != TT_BF16) return tt_errorf("MXFP4: dequantizes to fp32 or bf16, not %s", tt_dtype_name(dt));
    const uint8_t *b = blocks->data, *s = scales->data;
    const int64_t C = G * 32; /* the values of a row: the output's rows */
    for (int64_t e = 0; e < lead; e++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t g = 0; g < G; g++) {
                const int64_t k = (e * R + r) * G + g;
                if (s[k] == 255)
                    return tt_errorf("%s: MXFP4 scale '%s' [%lld, %lld, %lld] is 255, E8M0's NaN", file, scales->name,
                                     (long long)e, (long long)r, (long long)g);
                const float p = ldexpf(1.0f, (int)s[k] - 127); /* 2^-127 .. 2^127: subnormal at the bottom, exact */
                for (int i = 0; i < 32; i++) {
                    const uint8_t byte = b[k * 16 + i / 2];
                    const float v = fp4_value[i % 2 ? byte >> 4 : byte & 15] * p;
                    if (!isfinite(v))
                        return tt_errorf("%s: MXFP4 tensor '%s' [%lld, %lld, %lld]: a value times 2^%d is past fp32's "
                                         "range", file, blocks->name, (long long)e, (long long)r, (long long)g,
                                         (int)s[k] - 127);
                    /* value g*32 + i of row r lands at (e, g*32 + i, r): the last two axes swapped */
                    const size_t at = ((size_t)e * C + (size_t)(g * 32 + i)) * (size_t)R + (size_t)r;
                    if (dt == TT_F32) ((float *)out)[at] = v;
                    else ((uint16_t *)out)[at] = tt_f32_to_bf16(v);
                }
            }
    return 0;
}

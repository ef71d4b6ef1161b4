/* vmath.h — an exp (and a tanh from it) that vectorises: plain arithmetic and integer bit moves
 * only, so `#pragma omp simd` loops over it become AVX-512 / AVX2 code
 * (libm's expf does not vectorise without -fno-math-errno style flags).
 * Relative error below 2e-7 on the range softmax uses; exp(-inf) = 0;
 * exp(NaN) = NaN. */
#ifndef TT_VMATH_H
#define TT_VMATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float tt_expf(float x)
{
    /* exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2 / 2 */
    x = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x; /* keeps 2^n a normal float; -inf -> ~1e-38 */
    /* round to nearest by the 1.5 * 2^23 trick: no libm call, so it vectorises */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f; /* ln 2 in two parts, so r is exact enough */
    r = r - n * -2.12194440e-4f;
    /* Taylor-like minimax polynomial for exp(r) on [-ln2/2, ln2/2] (Cephes expf) */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* n is in [-126, 128] here, or NaN when x is (converting NaN to an integer
     * is undefined behaviour): then the exponent is taken as 0 and p carries
     * the NaN out */
    const int32_t ni = n == n ? (int32_t)n : 0;
    const uint32_t e = (uint32_t)(ni + 127) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return p * scale;
}

/* tanh(x): Cephes' odd polynomial below |x| = 0.625, where 1 - 2 / (exp(2|x|) + 1) would cancel, and that form
 * above it; relative error about 2e-7. tanh(+-inf) = +-1, tanh(NaN) = NaN. */
#pragma omp declare simd notinbranch
static inline float tt_tanhf(float x)
{
    const float z = x * x, ax = x < 0 ? -x : x;
    const float p = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) *
                         z - 3.33332819422e-1f) * z * x + x;
    const float e = 1.0f - 2.0f / (tt_expf(2.0f * ax) + 1.0f);
    return ax < 0.625f ? p : x < 0 ? -e : e;
}

#endif

/* rope.c — the rotary position embedding kernel (fp32 and bf16 activations). */
#include <math.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

/* Frequencies per block: their cos and sin are made once per row and used by
 * every head. */
#define RB 64

/* Rows [n0, n1): each pair (i, i + rot/2) of each head rotated by pos * inv_freq[i]; the features past the first
 * rot (partial rotary; an odd last one) pass through. */
TT_INLINE void rope_body(const void *x, const int32_t *pos, const float *inv_freq, void *y, int n0, int n1, int H,
                         int hd, int rot, int inverse, float scale, int bf)
{
    const int half = rot / 2;
    float c[RB], s[RB];
    for (int n = n0; n < n1; n++) {
        for (int i0 = 0; i0 < half; i0 += RB) {
            const int ni = half - i0 < RB ? half - i0 : RB;
            for (int i = 0; i < ni; i++) {
                const float ang = (float)pos[n] * inv_freq[i0 + i]; /* fp32, as transformers */
                c[i] = cosf(ang) * scale;
                s[i] = (inverse ? -sinf(ang) : sinf(ang)) * scale;
            }
            for (int h = 0; h < H; h++) {
                const size_t o = ((size_t)n * H + h) * hd + i0;
                for (int i = 0; i < ni; i++) {
                    const float a = tt_ld(x, o + i, bf), b = tt_ld(x, o + half + i, bf);
                    tt_st(y, o + i, a * c[i] - b * s[i], bf);
                    tt_st(y, o + half + i, b * c[i] + a * s[i], bf);
                }
            }
        }
        if (2 * half < hd)
            for (int h = 0; h < H; h++)
                for (int i = 2 * half; i < hd; i++) {
                    const size_t o = ((size_t)n * H + h) * hd + i;
                    tt_st(y, o, tt_ld(x, o, bf), bf);
                }
    }
}
TT_CLONES static void rope_f32(const void *x, const int32_t *pos, const float *inv_freq, void *y, int n0, int n1, int H,
                               int hd, int rot, int inverse, float scale)
{
    rope_body(x, pos, inv_freq, y, n0, n1, H, hd, rot, inverse, scale, 0);
}
TT_CLONES static void rope_bf16(const void *x, const int32_t *pos, const float *inv_freq, void *y, int n0, int n1,
                                int H, int hd, int rot, int inverse, float scale)
{
    rope_body(x, pos, inv_freq, y, n0, n1, H, hd, rot, inverse, scale, 1);
}

/* x and y may be the same buffer (each pair is read before it is written).
 * cos and sin are scaled in fp32 as transformers scales its cos/sin cache. */
void cpu_rope(const void *x, const int32_t *pos, const float *inv_freq, void *y, int N, int H, int hd, int inverse,
              float scale, tt_dtype dt)
{
    cpu_rope_partial(x, pos, inv_freq, y, N, H, hd, hd - hd % 2, inverse, scale, dt);
}

void cpu_rope_partial(const void *x, const int32_t *pos, const float *inv_freq, void *y, int N, int H, int hd, int rot,
                      int inverse, float scale, tt_dtype dt)
{
    const int rb = 8, nt = (N + rb - 1) / rb;
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < nt; t++)
        (dt == TT_BF16 ? rope_bf16 : rope_f32)(x, pos, inv_freq, y, t * rb, (t + 1) * rb < N ? (t + 1) * rb : N, H, hd,
                                               rot, inverse, scale);
}

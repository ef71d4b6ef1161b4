/* gemm_scalar.c — the portable GEMM path: a packer for every layout and dtype
 * (also used by the vector paths for the rare layouts they do not
 * specialise) and a plain C 4x16 microkernel the compiler vectorises with
 * whatever the baseline ISA has (SSE2 on x86-64). */
#include <string.h>

#include "backend/cpu/gemm_impl.h"

/* element (r, k) of the block, as fp32 */
static inline float pack_get(const tt_gemm_pack_args *p, int r, int k)
{
    size_t idx = p->kcontig ? (size_t)r * (size_t)p->ld + (size_t)k
                            : (size_t)k * (size_t)p->ld + (size_t)r;
    if (p->sdt == TT_BF16) return tt_bf16_to_f32(((const uint16_t *)p->src)[idx]);
    return ((const float *)p->src)[idx];
}

static inline uint16_t pack_get_bf16(const tt_gemm_pack_args *p, int r, int k)
{
    size_t idx = p->kcontig ? (size_t)r * (size_t)p->ld + (size_t)k
                            : (size_t)k * (size_t)p->ld + (size_t)r;
    if (p->sdt == TT_BF16) return ((const uint16_t *)p->src)[idx];
    return tt_f32_to_bf16(((const float *)p->src)[idx]);
}

void tt_gemm_pack_generic(void *dst, const tt_gemm_pack_args *p, int kunit)
{
    const int W = p->W, kn = p->kn, ks = (kn + kunit - 1) / kunit;
    const size_t panel = (size_t)ks * W * kunit; /* values per panel */
    for (int r0 = 0, pi = 0; r0 < p->rn; r0 += W, pi++) {
        const int w = p->rn - r0 < W ? p->rn - r0 : W;
        if (kunit == 1) {
            float *d = (float *)dst + (size_t)pi * panel; /* [ks][W] */
            if (w < W) memset(d, 0, panel * sizeof(float));
            /* walk the source in memory order: rows outer when k is contiguous */
            if (p->kcontig) {
                for (int i = 0; i < w; i++)
                    for (int k = 0; k < kn; k++) d[(size_t)k * W + i] = pack_get(p, r0 + i, k);
            } else {
                for (int k = 0; k < kn; k++)
                    for (int i = 0; i < w; i++) d[(size_t)k * W + i] = pack_get(p, r0 + i, k);
            }
            if (p->round_bf16 && p->sdt == TT_F32)
                for (size_t x = 0; x < panel; x++) d[x] = tt_bf16_to_f32(tt_f32_to_bf16(d[x]));
        } else {
            uint16_t *d = (uint16_t *)dst + (size_t)pi * panel; /* [ks][W][2] */
            memset(d, 0, panel * sizeof(uint16_t));
            for (int i = 0; i < w; i++)
                for (int k = 0; k < kn; k++)
                    d[((size_t)(k >> 1) * W + i) * 2 + (k & 1)] = pack_get_bf16(p, r0 + i, k);
        }
    }
}

static void pack_scalar(void *dst, const tt_gemm_pack_args *p) { tt_gemm_pack_generic(dst, p, 1); }

/* element (k, col) of op(B) as the fp32 value the products use */
static inline float skinny_b(const tt_gemm_skinny_args *s, int k, int col)
{
    const size_t idx = s->tb ? (size_t)col * (size_t)s->ldb + (size_t)k : (size_t)k * (size_t)s->ldb + (size_t)col;
    if (s->bdt == TT_BF16) {
        union { uint32_t u; float f; } x = {(uint32_t)((const uint16_t *)s->b)[idx] << 16};
        return x.f;
    }
    const float v = ((const float *)s->b)[idx];
    return s->round_b ? tt_gemm_round_bf16(v) : v;
}

void tt_gemm_skinny_generic(const tt_gemm_skinny_args *s, int n0, int n1)
{
    const int K = s->K;
    for (int i = 0; i < s->M; i++) {
        const float *a = s->a + (size_t)i * K;
        float *c = s->c + (size_t)i * s->ldc;
        if (s->tb) { /* B rows run along k: one dot product per column */
            for (int j = n0; j < n1; j++) {
                float acc = 0;
                for (int k = 0; k < K; k++) acc += a[k] * skinny_b(s, k, j);
                c[j] = s->accumulate ? c[j] + acc : acc;
            }
        } else { /* B rows run along the columns: C row += a[k] * B row k */
            if (!s->accumulate)
                for (int j = n0; j < n1; j++) c[j] = 0;
            for (int k = 0; k < K; k++)
                for (int j = n0; j < n1; j++) c[j] += a[k] * skinny_b(s, k, j);
        }
    }
}

#define SC_MR 4
#define SC_NR 16

/* The accumulator tile lives in a local array the compiler keeps in vector
 * registers; rows of B are read as 16 contiguous floats. */
static void kern_scalar(int ksteps, const void *ap, const void *bp, float *c, long ldc, int accumulate)
{
    const float *a = ap, *b = bp;
    float acc[SC_MR][SC_NR];
    memset(acc, 0, sizeof(acc));
    for (int s = 0; s < ksteps; s++) {
        for (int i = 0; i < SC_MR; i++) {
            const float ai = a[i];
            for (int j = 0; j < SC_NR; j++) acc[i][j] += ai * b[j];
        }
        a += SC_MR;
        b += SC_NR;
    }
    for (int i = 0; i < SC_MR; i++) {
        float *ci = c + (size_t)i * ldc;
        if (accumulate)
            for (int j = 0; j < SC_NR; j++) ci[j] += acc[i][j];
        else
            for (int j = 0; j < SC_NR; j++) ci[j] = acc[i][j];
    }
}

static const tt_gemm_impl scalar_impl = {
    .name = "scalar-f32", .mr = SC_MR, .nr = SC_NR, .kunit = 1, .esize = 4,
    .mc = 128, .kc = 256, .nc = 1024, .kern = kern_scalar, .pack = pack_scalar,
    .skinny = tt_gemm_skinny_generic,
};

const tt_gemm_impl *tt_gemm_impl_scalar(void) { return &scalar_impl; }

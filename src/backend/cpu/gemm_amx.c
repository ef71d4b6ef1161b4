/* gemm_amx.c — the AMX GEMM path for bf16 products (Intel Sapphire Rapids
 * and later): a 32x32 tile of C held in four AMX tiles and its packers; few
 * rows take the AVX-512 path's skinny kernels. Compiled into every build
 * through target attributes; gemm.c only calls it after tt_amx_usable().
 *
 * One tdpbf16ps multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile of B
 * and adds the 16 x 16 fp32 product to a tile of C: 16,384 FLOPs, which an
 * AVX-512 core needs 256 vdpbf16ps for. Like vdpbf16ps it flushes denormal
 * inputs and results to zero and sums in fp32. */
#include "backend/cpu/gemm_impl.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/avx512_util.h"
#include "backend/host/amx.h"

#define TT_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

/* Panels. The tile of C is MR x NR = 32 x 32, four 16 x 16 fp32 tiles
 * (tmm0..3); each k block of 32 values loads two A tiles (tmm4, 5: rows 0-15
 * and 16-31) and two B tiles (tmm6, 7: columns 0-15 and 16-31), for four
 * products: 4 KB loaded for 64 Ki FLOPs. Panels are padded with zeros to a
 * whole number of k blocks (gemm_impl.h's kgran):
 *   B panel: the common pair layout [k/2][32 columns][2] (32-bit words), so a
 *            k block is 16 rows of 128 bytes and a B tile is its left or
 *            right half: exactly AMX's B layout (pairs of k, "VNNI").
 *   A panel: [k/32][32 rows][32 k] bf16, so an A tile is 16 rows of 64
 *            bytes, each row 32 consecutive k values of one row of A. */
#define MR 32
#define NR 32
#define KB 32 /* k values a tile product consumes */

/* The pieces of a tile. A is a packed panel (lda 0: each k block 32 rows of
 * 64 bytes), or read in place: row i at a + i * lda 32-bit words (pairs of
 * bf16), k running along it. A k block of A is then astride bytes a row and
 * astep bytes from the last; of B, always 16 rows of 128 bytes. */
static inline long a_stride(long lda) { return lda ? lda * 4 : 64; }
static inline long a_step(long lda) { return lda ? 64 : MR * KB * 2; }

/* tmm0-3 += A B over nkb k blocks */
TT_AMX static inline __attribute__((always_inline)) void tile_products(int nkb, const char *ap, long lda, const char *bp)
{
    const long astride = a_stride(lda), a1 = 16 * astride, astep = a_step(lda);
    for (int kb = 0; kb < nkb; kb++) {
        _tile_loadd(4, ap, astride);  /* A rows 0-15 */
        _tile_loadd(5, ap + a1, astride); /* A rows 16-31 */
        _tile_loadd(6, bp, 128);      /* B columns 0-15: 16 pairs of k x 16 */
        _tile_loadd(7, bp + 64, 128); /* B columns 16-31 */
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        ap += astep;
        bp += NR * KB * 2;
    }
}

/* C may lie in memory (the head's logits and weight gradient: 32 rows, each
 * in its own lines), so a tile asks for C's lines first, sums into zeroed
 * tiles, and only then stores them, or adds C (by then in cache) with
 * AVX-512. Against loading C into the tiles up front, over llama_768's step
 * products (titan bench gemm), this is faster where C is in memory and a few
 * percent slower where it is in cache: about even in all. */
TT_AMX static inline __attribute__((always_inline)) void prefetch_c(const float *c, long ldc)
{
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + (long)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (long)i * ldc + 16), _MM_HINT_T0);
    }
}

/* tmm0-3 to C: stored, or added to C's old value (accumulate) */
TT_AMX static inline __attribute__((always_inline)) void tile_out(float *c, long ldc, int accumulate)
{
    float t[MR * NR] __attribute__((aligned(64)));
    float *dst = accumulate ? t : c;
    const long ld = accumulate ? NR * 4 : ldc * 4;
    _tile_stored(0, dst, ld);
    _tile_stored(1, dst + 16, ld);
    _tile_stored(2, (char *)dst + 16 * ld, ld);
    _tile_stored(3, (char *)dst + 16 * ld + 64, ld);
    if (!accumulate) return;
    for (int i = 0; i < MR; i++) {
        float *ci = c + (long)i * ldc;
        _mm512_storeu_ps(ci, _mm512_add_ps(_mm512_loadu_ps(ci), _mm512_load_ps(t + i * NR)));
        _mm512_storeu_ps(ci + 16, _mm512_add_ps(_mm512_loadu_ps(ci + 16), _mm512_load_ps(t + i * NR + 16)));
    }
}

/* One tile over `ksteps` pairs of k (a multiple of 16): its whole k block
 * at once, the sums in the four tiles until the end. 2b25b8c took up to four
 * tiles down a B panel through k in chunks of 128 pairs instead, their sums
 * parked in L1 between chunks so that each 16 KB chunk of B came from L2
 * once for all four (measured across binaries on an AMX host of model
 * 167). On this host (model 207), alternated call by call in one binary,
 * the whole k block at once ran llama_768's step products 0.98-1.06x as
 * fast, 1.01-1.03x taken together (K 768 and 1,024 had taken three and
 * four chunks), and llama_288's and an MoE expert's 1.00-1.16x (K 288: a
 * chunk of 128 pairs and one of 16); performance-changes.md. */
TT_AMX static inline __attribute__((always_inline)) void tile_amx(int ksteps, const char *ap, long lda,
                                                                  const char *bp, float *c, long ldc,
                                                                  int accumulate)
{
    prefetch_c(c, ldc);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    tile_products(ksteps / (KB / 2), ap, lda, bp);
    tile_out(c, ldc, accumulate);
}

TT_AMX static void kern_amx(int ksteps, const void *a, const void *b, float *c, long ldc, int accumulate)
{
    tile_amx(ksteps, a, 0, b, c, ldc, accumulate);
}
TT_AMX static void kern_amx_rows(int ksteps, const void *a, long lda, const void *b, float *c, long ldc,
                                 int accumulate)
{
    tile_amx(ksteps, a, lda, b, c, ldc, accumulate);
}

/* ---- packing ---------------------------------------------------------------- */

/* 32 k values of row r from k0 of a k-contiguous source as bf16 (zero past kn) */
TT_AMX static inline __m512i row_k32(const tt_gemm_pack_args *p, int r, int k0)
{
    const int kleft = p->kn - k0;
    const size_t off = (size_t)r * (size_t)p->ld + (size_t)k0;
    if (p->sdt == TT_BF16) return _mm512_maskz_loadu_epi16(mask32(kleft), (const uint16_t *)p->src + off);
    const float *s = (const float *)p->src + off;
    const __m512 lo = _mm512_maskz_loadu_ps(mask16(kleft), s), hi = _mm512_maskz_loadu_ps(mask16(kleft - 16), s + 16);
    return bf16x32(lo, hi);
}

/* rows [r0, r0 + 16) of k value k from a row-contiguous source as bf16 (zero
 * past rn, and for k past kn) */
TT_AMX static inline __m256i col_r16(const tt_gemm_pack_args *p, int k, int r0)
{
    const __mmask16 m = k < p->kn ? mask16(p->rn - r0) : 0;
    const size_t off = (size_t)k * (size_t)p->ld + (size_t)r0;
    if (p->sdt == TT_BF16) return _mm256_maskz_loadu_epi16(m, (const uint16_t *)p->src + off);
    return bf16x16(_mm512_maskz_loadu_ps(m, (const float *)p->src + off));
}

/* A panels: [kpad/32][32 rows][32 k]. A k-contiguous source is copied 32 k
 * values at a time; a row-contiguous one (A transposed) is gathered as 16 k
 * pairs x 16 rows of 32-bit words and transposed in registers. */
TT_AMX static void pack_a_amx(void *dst, const tt_gemm_pack_args *p)
{
    const int nkb = p->kpad / KB;
    const size_t panel = (size_t)nkb * MR * KB; /* bf16 values */
    const size_t esz = p->sdt == TT_BF16 ? 2 : 4; /* bytes of a source value */
    for (int r0 = 0, pi = 0; r0 < p->rn; r0 += MR, pi++) {
        uint16_t *d = (uint16_t *)dst + (size_t)pi * panel;
        for (int kb = 0; kb < nkb; kb++) {
            uint16_t *db = d + (size_t)kb * MR * KB;
            const int k0 = kb * KB;
            if (p->kcontig) {
                for (int i = 0; i < MR; i++)
                    _mm512_storeu_si512(db + i * KB, r0 + i < p->rn ? row_k32(p, r0 + i, k0) : _mm512_setzero_si512());
                continue;
            }
            for (int g = 0; g < MR; g += 16) {
                __m512i t[16];
                /* the next panel's line of each of these 32 k rows: they lie ld apart, a stride the hardware
                 * prefetcher does not follow */
                if (g == 0 && r0 + MR < p->rn)
                    for (int u = 0; u < KB && k0 + u < p->kn; u++)
                        _mm_prefetch((const char *)p->src + ((size_t)(k0 + u) * (size_t)p->ld + (size_t)(r0 + MR)) * esz,
                                     _MM_HINT_T0);
                for (int u = 0; u < 16; u++) {
                    const __m256i ev = col_r16(p, k0 + 2 * u, r0 + g), od = col_r16(p, k0 + 2 * u + 1, r0 + g);
                    t[u] = pair_words(ev, od);
                }
                transpose16(t); /* t[i]: row g + i's 16 pairs */
                for (int i = 0; i < 16; i++) _mm512_storeu_si512(db + (g + i) * KB, t[i]);
            }
        }
    }
}

/* B panels: the AVX-512 path's pair packer (the same layout), with each
 * panel's k steps padded with zeros to kpad / 2 when kn is not a whole
 * number of k blocks (then panel by panel, each at its padded place). */
static void pack_b_amx(void *dst, const tt_gemm_pack_args *p)
{
    const tt_gemm_pack_fn pack = tt_gemm_impl_avx512_bf16()->pack;
    const int ks = (p->kn + 1) / 2, kps = p->kpad / 2;
    if (ks == kps) {
        pack(dst, p);
        return;
    }
    const size_t esz = p->sdt == TT_F32 ? 4 : 2;
    for (int r0 = 0, pi = 0; r0 < p->rn; r0 += NR, pi++) {
        tt_gemm_pack_args q = *p;
        q.rn = p->rn - r0 < NR ? p->rn - r0 : NR;
        q.src = (const char *)p->src + esz * (p->kcontig ? (size_t)r0 * (size_t)p->ld : (size_t)r0);
        int32_t *d = (int32_t *)dst + (size_t)pi * kps * NR;
        pack(d, &q);
        memset(d + (size_t)ks * NR, 0, (size_t)(kps - ks) * NR * sizeof(int32_t));
    }
}

/* A K up to this many values is one k block where A is not transposed (the
 * forward products and the input gradients): cut in kc blocks, a bf16 C's
 * partial sums go out to fp32 scratch and come back once a block. On the
 * Intel Xeon host (bench_gemm_blocks --a-kc-blocks, performance-changes.md),
 * one block ran llama_768's qkv input gradient (K 2,304) 1.08-1.12x and its
 * down forward (2,048) 1.03-1.23x as fast, llama_288's gate/up input
 * gradient (1,536) 1.17-1.25x, an MoE expert's 1.15x, and the fp32 squares
 * of 1,536 and 2,048 1.10-1.14x; llama_288's weight gradients (A
 * transposed, K 2,048 tokens) ran 0.89-1.04x in one block, and the gate/up
 * input gradient (K 4,096) 0.84-0.86x in two of 2,048 against four of 1,024. */
#define KC_WHOLE 2560

/* Rows ahead that B's pair packer (the AVX-512 one) asks for a
 * row-contiguous source, into L1. Measured on the Intel Xeon host with the
 * operands from memory: the llama_768 step's input gradients (B the
 * weights' bf16 copy) ran 1.00-1.07x as fast and its weight gradients (B
 * the activations) 1.00-1.05x, where the forward products, which it does
 * not touch, read 0.98-1.03x; in cache all 0.99-1.02x (bench_gemm_blocks
 * --a-no-pack-prefetch, performance-changes.md). The AVX-512 paths ask for
 * twice as many rows into L2, measured on Zen 4; that was not measured here. */
#define PAIR_PF_ROWS 8

/* Cache blocks. A 32 x 32 tile of products takes 64 cycles and 4 KB of A and
 * B, more than L2 feeds a core in that time, so the kernel runs well below
 * the tile peak whatever the blocking; what the blocks still decide is
 * how often C travels: each k block writes every tile of C once (and reads it
 * back after the first), and C is mostly beyond L2. So k blocks are long:
 * over llama_768's step products (titan bench gemm --config
 * configs/llama_768.toml, an Intel Xeon with AMX) kc 1024 took clearly less
 * time than 512, and 2048 no less than 1024. */
static const tt_gemm_impl amx_bf16 = {
    .name = "amx-bf16", .mr = MR, .nr = NR, .kunit = 2, .kgran = KB, .esize = 2,
    .mc = 256, .kc = 1024, .nc = 3072, .kc_whole = KC_WHOLE,
    .kern = kern_amx, .kern_rows = kern_amx_rows,
    .pack = pack_b_amx, .pack_a = pack_a_amx, .pack_prefetch = PAIR_PF_ROWS,
    .skinny = tt_gemm_skinny_avx512, .begin = tt_amx_tiles_16x64, .end = tt_amx_release,
};

const tt_gemm_impl *tt_gemm_impl_amx_bf16(void)
{
    return tt_gemm_impl_avx512_bf16() && tt_amx_usable() ? &amx_bf16 : NULL;
}

#else /* not x86-64 with GNU C: no AMX path */
const tt_gemm_impl *tt_gemm_impl_amx_bf16(void) { return NULL; }
#endif

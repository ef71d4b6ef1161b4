/* gemm_impl.h — what each GEMM code path (gemm_avx512.c, gemm_avx2.c,
 * gemm_scalar.c) hands the driver in gemm.c: a register-tile microkernel, a
 * packing routine and its cache-block sizes. Private to the GEMM files. */
#ifndef TT_GEMM_IMPL_H
#define TT_GEMM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* Packed panels. One operand block (A: rows = M, B: rows = N; both with a
 * k range) is cut into panels of W rows (W = MR for A, NR for B; the last
 * panel zero-padded). A panel is k-major: step s holds W entries, and each
 * entry is `kunit` consecutive k values:
 *   kunit 1: fp32 values, panel = [ksteps][W] floats
 *   kunit 2: bf16 pairs (k even, k odd) in one 32-bit word, panel =
 *            [ksteps][W][2] bf16, k padded with zero to an even count.
 * So a microkernel reads a vector of B entries and broadcasts A entries. */
typedef struct {
    const void *src;  /* element (r, k) of the block: src[kcontig ? r*ld + k : k*ld + r] */
    tt_dtype sdt;     /* TT_F32 or TT_BF16 */
    long ld;
    int kcontig;      /* 1: k runs along memory (A without ta, B with tb) */
    int rn, kn;       /* rows and k values to pack */
    int kpad;         /* k values a panel holds: kn rounded up to the impl's kgran, zero past kn */
    int W;            /* panel width */
    int round_bf16;   /* kunit 1 only: round fp32 values to bf16 first (bf16 compute without bf16 hardware) */
    int prefetch;     /* a row-contiguous source's rows this far ahead are asked for as its panels are
                         packed (the AVX-512 packers: wide panels, W >= 16; the AVX2 one: all) (the impl's
                         pack_prefetch; 0: none, and always 0 after tt_gemm_set_pack_prefetch(0)) */
    int prefetch_l2;  /* those go to L2 (prefetcht1), not L1 (the impl's pack_prefetch_l2) */
} tt_gemm_pack_args;

/* Computes the MR x NR tile sum over `ksteps` steps of a[s][i] * b[s][j] and
 * stores it to c (row stride ldc), adding c's old value when `accumulate`. */
typedef void (*tt_gemm_kern_fn)(int ksteps, const void *a, const void *b, float *c, long ldc,
                                int accumulate);
/* The same with A read in place: row i of the tile at a + i*lda elements of
 * the packed type (fp32 values, or bf16 pairs as 32-bit words). */
typedef void (*tt_gemm_kern_rows_fn)(int ksteps, const void *a, long lda, const void *b, float *c, long ldc,
                                     int accumulate);
/* The kernel's full tile of a bf16 C in its last k block: the sums, plus
 * part's fp32 partial sums of earlier k blocks (row stride ldp; NULL: none),
 * plus c's old values when `accumulate`, rounded once to bf16 into c (row
 * stride ldc) as tt_bf16_bits rounds. A packed when lda is 0, else rows in
 * place with stride lda words. */
typedef void (*tt_gemm_kern_out16_fn)(int ksteps, const void *a, long lda, const void *b, uint16_t *c, long ldc,
                                      const float *part, long ldp, int accumulate);
/* Packs p->rn rows into ceil(rn / W) panels at dst, each kpad * W values. */
typedef void (*tt_gemm_pack_fn)(void *dst, const tt_gemm_pack_args *p);

/* The skinny path, for C with few rows (decode-time matrix-vector products):
 * B is read in place, no packing, one pass; fp32 arithmetic (bf16 values are
 * exact in fp32, so bf16 compute only needs its operands rounded). */
typedef struct {
    const float *a;   /* op(A) as (M, K) fp32, already rounded to bf16 for bf16 compute */
    const void *b;    /* element (k, col) of op(B) at b[tb ? col*ldb + k : k*ldb + col] */
    tt_dtype bdt;     /* TT_F32 or TT_BF16 */
    long ldb;
    int tb;
    int round_b;      /* round fp32 B values to bf16 (bf16 compute) */
    float *c;
    long ldc;
    int M, K, accumulate;
} tt_gemm_skinny_args;
/* Columns [n0, n1) of C. */
typedef void (*tt_gemm_skinny_fn)(const tt_gemm_skinny_args *s, int n0, int n1);

typedef struct {
    const char *name;
    int mr, nr;     /* register tile (rows of C, columns of C) */
    int kunit;      /* 1: fp32 panels, 2: bf16 pair panels */
    int kgran;      /* panels hold a multiple of this many k values, zero-padded (0: kunit) */
    int esize;      /* bytes of one packed value: 4 or 2 */
    int mc, kc, nc; /* cache blocks: multiples of mr, kunit, nr */
    int kc_whole;   /* an A stored k-contiguous (not transposed) with K up to this many values is summed in one
                       k block, not cut in kc blocks, whatever the L2 (0: always kc blocks;
                       tt_gemm_set_kc_whole(0) too) */
    int l2_kb;      /* the per-core L2 (KB) kc and the A block were tuned for; on a CPU with at
                       least twice as much both double (tt_gemm_block_scale). 0: they stay */
    tt_gemm_kern_fn kern;
    tt_gemm_kern_rows_fn kern_rows; /* NULL: A is always packed; else A is read in place below gemm.c's
                                       A_PACK_MIN_COLS columns of C a thread */
    tt_gemm_kern_rows_fn kern_cols; /* NULL: a transposed A is always packed; else an fp32 one is read in place,
                                       step s's mr values at a + s*lda (gemm.c's A_COLS) */
    tt_gemm_kern_out16_fn kern_out16; /* NULL: a bf16 C's last k block summed in scratch, rounded after */
    tt_gemm_pack_fn pack;
    tt_gemm_pack_fn pack_a; /* NULL: A panels as B's, by pack (with W = mr) */
    int pack_prefetch;      /* rows ahead the packer asks for a row-contiguous source (tt_gemm_pack_args' prefetch) */
    int pack_prefetch_l2;   /* into L2, not L1 (tt_gemm_pack_args' prefetch_l2) */
    tt_gemm_skinny_fn skinny;
    /* NULL, or called on each thread before its first and after its last
     * microkernel of a GEMM (AMX: configure the tiles, release them) */
    void (*begin)(void), (*end)(void);
} tt_gemm_impl;

/* The portable packer (every layout, dtype and kunit, any W). */
void tt_gemm_pack_generic(void *dst, const tt_gemm_pack_args *p, int kunit);
/* The portable skinny path, and the AVX-512 one (call only where the CPU has AVX-512). */
void tt_gemm_skinny_generic(const tt_gemm_skinny_args *s, int n0, int n1);
void tt_gemm_skinny_avx512(const tt_gemm_skinny_args *s, int n0, int n1);

/* fp32 -> bf16 -> fp32, round to nearest even, NaN kept quiet: the same
 * rounding as tt_f32_to_bf16, inline for the packing loops. */
static inline float tt_gemm_round_bf16(float f)
{
    union { float f; uint32_t u; } x = {f};
    if ((x.u & 0x7fffffffu) > 0x7f800000u) x.u |= 0x00400000u;
    else x.u += 0x7fffu + ((x.u >> 16) & 1u);
    x.u &= 0xffff0000u;
    return x.f;
}

/* ---- the packers' prefetches ahead (gemm_avx512.c, gemm_avx2.c) ----------
 * A row-contiguous source is packed k by k across the block (by the AVX-512
 * packers its wide panels, by the AVX2 one every panel): each source row's
 * stretch is a fresh stream that the hardware prefetchers find late, so the
 * packers ask for the row p->prefetch ahead themselves. */

/* the bytes [a, a + bytes) asked for, a cache line at a time, into L2 or L1 */
static inline void tt_gemm_prefetch_span(const char *a, size_t bytes, int l2)
{
    for (size_t o = 0; o < bytes; o += 64) {
        if (l2) __builtin_prefetch(a + o, 0, 2); /* prefetcht1 on x86 */
        else __builtin_prefetch(a + o, 0, 3);    /* prefetcht0 */
    }
}

/* where row r of a row-contiguous source block starts, or NULL when the
 * packer asks for nothing ahead or r lies past the block */
static inline const char *tt_gemm_row_ahead(const tt_gemm_pack_args *p, int r, size_t esz)
{
    return p->prefetch && r < p->kn ? (const char *)p->src + (size_t)r * (size_t)p->ld * esz : NULL;
}

/* panel pi's stretch of the row at ahead (NULL: none) asked for: its W
 * values, fewer in a ragged last panel, so nothing past the block */
static inline void tt_gemm_prefetch_stretch(const tt_gemm_pack_args *p, const char *ahead, int pi, size_t esz)
{
    if (!ahead) return;
    const int r0 = pi * p->W, w = p->rn - r0 < p->W ? p->rn - r0 : p->W;
    tt_gemm_prefetch_span(ahead + (size_t)r0 * esz, (size_t)w * esz, p->prefetch_l2);
}

/* Each returns NULL when this build or CPU cannot run it. */
const tt_gemm_impl *tt_gemm_impl_scalar(void);
const tt_gemm_impl *tt_gemm_impl_avx2_f32(void);
const tt_gemm_impl *tt_gemm_impl_avx512_f32(void);
const tt_gemm_impl *tt_gemm_impl_avx512_f32_8x48(void); /* the same with an 8x48 tile */
const tt_gemm_impl *tt_gemm_impl_avx512_f32_6x64(void); /* and with a 6x64 one */
const tt_gemm_impl *tt_gemm_impl_avx512_bf16(void);
const tt_gemm_impl *tt_gemm_impl_avx512_bf16_8x48(void);
const tt_gemm_impl *tt_gemm_impl_amx_bf16(void);

#endif

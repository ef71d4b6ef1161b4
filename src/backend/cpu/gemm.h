/* gemm.h — titan's own packed, cache-blocked GEMM for the CPU: fp32, and bf16
 * (bf16 operands, fp32 accumulation), with the code path (AMX tiles for
 * bf16, AVX-512 (+ BF16), AVX2 + FMA, portable C) chosen at run time so one
 * binary runs on any x86-64.
 *
 * Every entry computes, row-major,
 *     C (M,N) = op(A) op(B)  (+ C if accumulate)
 * where op(A) is (M,K): A is (M,K), or (K,M) if ta; op(B) is (K,N): B is (K,N),
 * or (N,K) if tb. K == 0 gives C = 0 (or leaves C when accumulating).
 *
 * Threads: one OpenMP parallel region per call over omp_get_max_threads()
 * threads, or the calling thread alone when called inside a parallel region
 * or for a product under ~0.5M multiply-adds. C with few rows (up to 32; 8
 * for bf16 on AVX512_BF16 or AMX), as in decoding, takes a path that reads B in
 * place instead of packing it. A path without bf16 products (AVX2, or
 * AVX-512 where FMAs outrun vdpbf16ps: Intel without AMX) computes bf16 as
 * fp32 products of the bf16-rounded values: the same numbers up to the order
 * of the sums. */
#ifndef TT_GEMM_H
#define TT_GEMM_H

#include <stdint.h>

#include "core/core.h"

/* fp32: the same contract as cpu_matmul in kernels.h. These return -1 only
 * for negative or huge sizes, or when the scratch buffer (packed blocks, kept
 * per calling thread and reused) cannot be allocated. */
tt_err tt_gemm_f32(const float *A, const float *B, float *C, int M, int N, int K, int ta, int tb,
                   int accumulate);

/* bf16 A and B (raw bf16 bits), fp32 C; products summed in fp32. */
tt_err tt_gemm_bf16(const uint16_t *A, const uint16_t *B, float *C, int M, int N, int K, int ta,
                    int tb, int accumulate);

/* The general form, one struct so that calls name what they pass:
 *
 *   tt_gemm(&(tt_gemm_args){.compute = TT_BF16, .A = x, .adt = TT_BF16, .lda = D,
 *                           .B = w, .bdt = TT_F32, .ldb = D, .tb = 1,
 *                           .C = y, .cdt = TT_BF16, .ldc = N, .M = M, .N = N, .K = D});
 *
 * A, B are TT_F32 or TT_BF16, each with its own leading dimension (the
 * distance between consecutive rows as stored: lda >= K for A (M,K), >= M
 * for A (K,M) when ta; likewise ldb; ldc >= N). C is TT_F32 or TT_BF16;
 * a bf16 C is rounded once, from the fp32 sum (partial sums over k blocks
 * stay in fp32 scratch). `compute` says how the products are formed:
 *   TT_BF16: every operand is rounded to bf16 (round to nearest even) while it
 *            is packed, products of bf16 summed in fp32 — the mixed-precision
 *            path: fp32 master weights in, bf16 panels, fp32 sums.
 *   TT_F32:  bf16 operands are widened to fp32 (exactly), fp32 FMAs.
 * Returns -1 (tt_last_error says why) for a bad dtype, a negative size or a
 * leading dimension that is too small. */
typedef struct {
    tt_dtype compute;
    const void *A;
    tt_dtype adt;
    int lda, ta;
    const void *B;
    tt_dtype bdt;
    int ldb, tb;
    void *C;
    tt_dtype cdt;
    int ldc;
    int M, N, K;
    int accumulate; /* C += op(A) op(B) instead of C = */
} tt_gemm_args;

tt_err tt_gemm(const tt_gemm_args *g);

/* n independent products (a grouped GEMM: the experts of an MoE layer, each
 * on its own rows) in one parallel region, the whole team on each product in
 * turn; empty ones cost nothing. Each as tt_gemm, except that few rows do
 * not take the skinny path. */
tt_err tt_gemm_grouped(const tt_gemm_args *g, int n);

/* Code paths. TT_GEMM_ISA_AUTO is the best this CPU runs: AMX for bf16 where
 * usable, else vdpbf16ps where the CPU issues it faster than FMAs
 * (tt_bf16_dot_preferred: AMD), else AVX-512 FMAs with bf16 widened; the
 * environment variable TITAN_GEMM_ISA=amx|avx512bf16|avx512|avx2|scalar
 * names the path instead, or, where the CPU lacks that one, the best of those
 * below it (read on the first call, and again by
 * tt_gemm_set_isa(TT_GEMM_ISA_AUTO)). */
typedef enum {
    TT_GEMM_ISA_AUTO = 0,
    TT_GEMM_ISA_SCALAR,     /* portable C */
    TT_GEMM_ISA_AVX2,       /* AVX2 + FMA; bf16 is widened to fp32 */
    TT_GEMM_ISA_AVX512,     /* AVX-512F(+BW/VL) FMAs; bf16 is widened to fp32 */
    TT_GEMM_ISA_AVX512BF16, /* bf16 as vdpbf16ps (AVX512_BF16); fp32 as AVX512 */
    TT_GEMM_ISA_AMX,        /* bf16 on AMX tiles (tdpbf16ps); fp32 as AVX512 */
} tt_gemm_isa;

/* 1 if this CPU runs `isa` (AUTO and SCALAR always). */
int tt_gemm_isa_supported(tt_gemm_isa isa);
/* Force a path for the whole process (tests, benchmarks); AUTO goes back to
 * the default. Returns -1 if the CPU lacks it. Not to be called while another
 * thread is inside a GEMM. */
tt_err tt_gemm_set_isa(tt_gemm_isa isa);
/* The path the next call will take for `compute` (TT_F32 or TT_BF16), as a
 * name: "amx-bf16", "avx512-bf16", "avx512-f32", "avx2-f32", "scalar-f32". */
const char *tt_gemm_path_name(tt_dtype compute);
/* 1 when this CPU has bf16 arithmetic (AVX512_BF16, and AMX where it has
 * that) and the path is AVX-512 or AMX: bf16 products then cost no more than
 * fp32 ones, on whichever kernel they take. */
int tt_gemm_bf16_hardware(void);
/* Cache blocks follow the per-core L2: the AVX-512 paths' k block and A
 * block, tuned on Zen 4's 1 MB, double where the L2 is 2 MB or more. The L2
 * is the CPU's (sysconf), or TITAN_GEMM_L2 (bytes, or with a K or M suffix;
 * read on the first call), or the one tt_gemm_set_l2 gives (0: back to the
 * CPU's or the variable's; not while another thread is inside a GEMM). */
void tt_gemm_set_l2(long bytes);
/* The factor the next call's path applies to its k and A blocks: 1 or 2. */
int tt_gemm_block_scale(tt_dtype compute);
/* The AVX-512 fp32 kernel's register tile (fp32 products, and bf16 ones
 * widened onto the FMAs): 12 rows x 32 columns, 8 x 48 or 6 x 64; "auto"
 * takes on Intel CPUs the widest whose width divides N, and 12x32 elsewhere.
 * The AVX-512 bf16 kernel's: 12x32, or 8x48 in mode "8x48", and in "auto"
 * for an A read in place whose rows all fall in one L1 set where 48 divides
 * N ("6x64" keeps 12x32 for bf16). TITAN_GEMM_TILE names the mode ("auto",
 * "12x32", "8x48", "6x64"; read on the first call), or tt_gemm_set_tile does
 * (NULL: back to the variable's or auto; not while another thread is inside
 * a GEMM). */
tt_err tt_gemm_set_tile(const char *name);
/* How the threads share a product: "own" (each computes its own band of C,
 * packing for itself what it reads), "shared" (they pack each block together
 * and deal out its tiles), or "auto" (own bands where the panels divide
 * evenly among the threads and the copy is small beside the work, else
 * shared). TITAN_GEMM_SPLIT names the mode (read on the
 * first call), or tt_gemm_set_split does (NULL: back to the variable's or
 * auto; not while another thread is inside a GEMM). */
tt_err tt_gemm_set_split(const char *name);
/* Either way each thread's share (its band of C, or its run of a block's
 * tiles) is claimed as it goes, and a thread done with its own claims what
 * the others have left, so one the host slows hands its work over (own bands
 * whose claims would pack the operand both bands read once more are claimed
 * whole). Testing: tt_gemm_test_idle(t) has thread t of the next products
 * wait, before each share it would take, until the others have claimed all
 * of it (-1: none; not while another thread is inside a GEMM);
 * tt_gemm_units_stolen counts the units (tiles, or panels of an own band)
 * claimed from another thread's share since the program started. */
void tt_gemm_test_idle(int thread);
long tt_gemm_units_stolen(void);
/* A bf16 C is summed in fp32 and rounded once. Where the path's kernel can
 * (the AVX-512 and AVX2 paths), a whole tile's last k block is rounded into
 * C by the kernel; tt_gemm_set_out16(0) sums every tile into scratch first and rounds
 * it after, as the other paths do (the same bits: for tests and benchmarks;
 * not while another thread is inside a GEMM). */
void tt_gemm_set_out16(int on);
/* A stored as the kernel reads it is read in place, not packed, where the
 * threads have few columns of C each: fewer than 1,024 (gemm.c's
 * A_PACK_MIN_COLS), or than `cols` after tt_gemm_set_a_pack_cols(cols) (0:
 * 1,024 again; for benchmarks; not while another thread is inside a GEMM). */
void tt_gemm_set_a_pack_cols(int cols);
/* On the fp32 AVX-512 tiles a transposed fp32 A (stored k-major, as a weight
 * gradient's output gradient is) of at least 64 MiB (gemm.c's
 * A_COLS_MIN_BYTES), or `min_bytes` after tt_gemm_set_a_cols(min_bytes) (0:
 * 64 MiB again; SIZE_MAX: never), is read in place under the same figure of
 * columns (the same bits: for tests and benchmarks; not while another thread
 * is inside a GEMM). */
void tt_gemm_set_a_cols(size_t min_bytes);
/* On the paths whose packers prefetch a row-contiguous source's next rows
 * (AMX and AVX-512), tt_gemm_set_pack_prefetch(0) turns that off (the same
 * bits: for benchmarks; not while another thread is inside a GEMM). */
void tt_gemm_set_pack_prefetch(int on);
/* On the paths that take a k-contiguous A's K in one k block up to a figure
 * of their own (AMX, the AVX-512 bf16 tiles and the 12x32 fp32 one),
 * tt_gemm_set_kc_whole(0) cuts every K in kc blocks instead (the sums then
 * add in another order: for benchmarks; not while another thread is inside
 * a GEMM). */
void tt_gemm_set_kc_whole(int on);
/* Whether tt_gemm(g) would read A in place rather than pack it, on the
 * current path with the threads it would take: 1 (its rows), 2 (a transposed
 * A's k steps) or 0, -1 on a bad argument (for tests). */
int tt_gemm_reads_a_in_place(const tt_gemm_args *g);
/* The k values of the blocks tt_gemm(g) would cut K in (the last may be
 * shorter), on the current path with the threads it would take; 0 where it
 * cuts none (no product, or few rows), -1 on a bad argument (for tests). */
int tt_gemm_k_block(const tt_gemm_args *g);
/* The register tile (rows x columns of C) a product of N columns computed
 * in `compute` takes next. */
void tt_gemm_tile(tt_dtype compute, int N, int *mr, int *nr);

#endif

/* gemm_choice.h — the run-time choices gemm_choice.c makes for gemm.c's
 * loop nest. Private to the GEMM files. */
#ifndef TT_GEMM_CHOICE_H
#define TT_GEMM_CHOICE_H

#include "backend/cpu/gemm_impl.h"
#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TT_GEMM_X86 1
#endif

/* The implementation for `compute` and N columns of C on the current code
 * path; *round says whether fp32 operands must be rounded to bf16 while
 * packing (bf16 compute on fp32 hardware). */
const tt_gemm_impl *tt_gemm_pick_impl(tt_dtype compute, int N, int *round);

/* The implementation to take in place of im for an A read in place whose
 * rows all fall in one L1 set (gemm.c's L1_SET_STRIDE) with N columns of C:
 * on the AVX-512 bf16 path, in the automatic tile mode and where 48 divides
 * N, the 8x48 tile, whose 8 rows fit the L1's ways; else im. */
const tt_gemm_impl *tt_gemm_one_set_impl(const tt_gemm_impl *im, int N);

/* How the threads share a product (tt_gemm_set_split, TITAN_GEMM_SPLIT) */
enum { TT_GEMM_SPLIT_AUTO, TT_GEMM_SPLIT_SHARED, TT_GEMM_SPLIT_OWN };
int tt_gemm_current_split(void);

/* 2 where the L2 holds at least twice the one im's kc and A block were tuned for, else 1 */
int tt_gemm_impl_block_scale(const tt_gemm_impl *im);

#endif

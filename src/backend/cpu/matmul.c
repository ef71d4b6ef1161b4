/* matmul.c — the matmul op on the CPU: titan's own GEMM (gemm.h) for every
 * dtype mix, row-major, transposes by flag, accumulation into C. */
#include <stdio.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"

tt_err cpu_matmul(const void *A, tt_dtype adt, const void *B, tt_dtype bdt, void *C, tt_dtype cdt, int M, int N,
                  int K, int ta, int tb, int accumulate)
{
    const tt_dtype compute = adt == TT_BF16 || bdt == TT_BF16 ? TT_BF16 : TT_F32;
    return tt_gemm(&(tt_gemm_args){.compute = compute, .A = A, .adt = adt, .lda = ta ? M : K, .ta = ta,
                                   .B = B, .bdt = bdt, .ldb = tb ? K : N, .tb = tb,
                                   .C = C, .cdt = cdt, .ldc = N, .M = M, .N = N, .K = K, .accumulate = accumulate});
}

const char *cpu_matmul_path(tt_dtype adt, tt_dtype bdt, int M, int N, int K, int ta, int tb)
{
    (void)M, (void)N, (void)K, (void)ta, (void)tb;
    static _Thread_local char name[64];
    snprintf(name, sizeof name, "titan %s", tt_gemm_path_name(adt == TT_BF16 || bdt == TT_BF16 ? TT_BF16 : TT_F32));
    return name;
}

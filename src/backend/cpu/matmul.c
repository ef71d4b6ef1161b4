/* matmul.c — the fp32 matmul through OpenBLAS (the OpenMP build, which shares
 * our thread pool). Row-major, transposes by flag, accumulation through beta. */
#include <cblas.h>
#include <string.h>

#include "backend/cpu/kernels.h"

void cpu_matmul(const float *A, const float *B, float *C, int M, int N, int K, int ta, int tb,
                int accumulate)
{
    if (M <= 0 || N <= 0) return;
    if (K <= 0) { /* an empty sum: BLAS would reject the zero leading dimensions */
        if (!accumulate) memset(C, 0, (size_t)M * N * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, accumulate ? 1.0f : 0.0f, C, N);
}

/* bench_grouped.h — `titan bench gemm`'s grouped GEMM table. */
#ifndef TT_BENCH_GROUPED_H
#define TT_BENCH_GROUPED_H
#include <stdio.h>

#include "titan/config.h"

/* The grouped GEMM table for an MoE config; nothing for a dense one. */
tt_err tt_bench_grouped_gemm(const tt_config *c, int dtypes, double seconds, double peak_f32, double peak_bf16,
                             FILE *out);
#endif

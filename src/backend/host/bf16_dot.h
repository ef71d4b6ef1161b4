/* bf16_dot.h — whether bf16 products should run as AVX512_BF16 dot products
 * (vdpbf16ps) on this CPU, or as fp32 FMAs of the bf16 values widened to fp32
 * (exact: a bf16 is the top half of an fp32).
 *
 * Having the instruction is not enough. vdpbf16ps does two multiply-adds per
 * fp32 lane, so it doubles the FMA's rate where it issues as fast: on AMD's
 * Zen 4 and Zen 5. The Intel Xeons this VM has run on (CPU family 6, models
 * 167 and 207) issue it at a quarter of their FMA rate (`TITAN_BF16_DOT=1
 * TITAN_AMX=0 titan bench peak`: 239 GFLOP/s bf16 dot against 471 fp32 FMA;
 * 168 against 331), so there the widened products are twice as fast;
 * where the CPU has AMX, the tiles take the bf16 products anyway. The choice
 * goes by cpuid's vendor: a rule, not a measurement, so that one machine
 * always computes the same numbers. */
#ifndef TT_HOST_BF16_DOT_H
#define TT_HOST_BF16_DOT_H

/* 1 when the CPU has AVX512_BF16 and the OS the AVX-512 state. */
int tt_bf16_dot_supported(void);

/* 1 when bf16 products should take vdpbf16ps here: the CPU has it
 * (tt_bf16_dot_supported) and its vendor is not Intel. The environment
 * variable TITAN_BF16_DOT=1 or 0 says so instead (1 only where supported;
 * read on the first call). */
int tt_bf16_dot_preferred(void);

#endif

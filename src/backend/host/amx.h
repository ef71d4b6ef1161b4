/* amx.h — Intel AMX (Advanced Matrix Extensions) on the host CPU: whether
 * this CPU and kernel run the bf16 tile instructions, and the one tile
 * configuration every AMX user in titan shares.
 *
 * AMX holds eight tile registers of up to 16 rows x 64 bytes; tdpbf16ps adds
 * the product of a 16 x 32 bf16 tile and a 32 x 16 bf16 tile (the latter in
 * pairs of k, "VNNI" layout) to a 16 x 16 fp32 tile: 16,384 FLOPs in one
 * instruction, ~16 times what an AVX-512 core does in the same cycles. Linux
 * hands the tile state to a process only on request (arch_prctl
 * ARCH_REQ_XCOMP_PERM); without it the first tile instruction is SIGILL. */
#ifndef TT_HOST_AMX_H
#define TT_HOST_AMX_H

/* 1 when tdpbf16ps may run in this process: cpuid reports AMX-TILE and
 * AMX-BF16, the kernel granted the tile data state (asked for once, on the
 * first call; thread-safe), and TITAN_AMX is not "0". */
int tt_amx_usable(void);

/* Configure the calling thread's tiles as eight tiles of 16 rows x 64 bytes
 * (the only configuration titan uses), and release them (back to the init
 * state, which context switches then need not save). Other code in the
 * process (oneDNN, OpenBLAS) configures and releases tiles of its own, so a
 * configuration lasts only within one of titan's calls: each GEMM configures
 * on entry and releases on exit, on each of its threads. Only after
 * tt_amx_usable() said 1. */
void tt_amx_tiles_16x64(void);
void tt_amx_release(void);

#endif

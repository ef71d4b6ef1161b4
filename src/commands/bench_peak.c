/* bench_peak.c — `titan bench peak`: a backend measures its device's peak
 * FLOP/s per dtype now and caches it for MFU, and its memory bandwidth: the
 * two limits of the roofline. */
#include <stdio.h>

#include "backend/backend.h"

tt_err tt_bench_peak(const char *backend, double seconds, FILE *out)
{
    const tt_backend *be = tt_backend_get(backend);
    tt_backend_peak pk;
    if (!be || be->peak(seconds, &pk)) return -1;
    fprintf(out, "backend  %s\ndevice   %s\npath     %s\nfp32     %.1f GFLOP/s\n", be->name, pk.device, pk.path,
            pk.gflops[TT_F32]);
    if (pk.gflops[TT_BF16] > 0)
        fprintf(out, "bf16     %.1f GFLOP/s%s\n", pk.gflops[TT_BF16],
                pk.gflops[TT_BF16] == pk.gflops[TT_F32] ? " (on the fp32 path: bf16 values widened to fp32)" : "");
    else fprintf(out, "bf16     unsupported on this device\n");
    double gbps;
    if (be->bandwidth(seconds > 0 ? seconds / 4 : 0, &gbps)) return -1;
    fprintf(out, "memory   %.1f GB/s (triad over 192 MiB, bytes read and written)\n", gbps);
    double rt = 0;
    if (be->core_round_trip && be->core_round_trip(&rt)) return -1;
    if (rt > 0) fprintf(out, "cores    %.0f ns a cache line's round trip between two threads\n", rt);
    return 0;
}

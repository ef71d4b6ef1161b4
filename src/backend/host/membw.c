/* membw.c — the host's memory bandwidth, the roofline's second limit: a
 * STREAM-style triad (a = b + s c) over buffers far past the caches, on all
 * threads, the best of its rounds. Counted as STREAM counts it: the bytes the
 * program reads and writes (12 a float), not the write-allocate reads the
 * hardware adds. */
#include <stdlib.h>
#include <string.h>

#include "backend/host/membw.h"
#include "core/core.h"

/* Three buffers of 64 MiB: well past the last-level cache a core of this
 * machine's hosts reaches (a Zen 4 or Zen 5 CCD has 32 MiB), so the triad
 * streams from memory, and under a second of work on any of them. */
#define MEMBW_FLOATS ((size_t)16 << 20)

static volatile float membw_sink; /* keeps the compiler from dropping the stores */

/* One pass of the triad, threads splitting the elements evenly */
static void triad(float *a, const float *b, const float *c, size_t n, float s)
{
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) a[i] = b[i] + s * c[i];
}

tt_err tt_mem_bandwidth(double seconds, double *gbps)
{
    *gbps = 0;
    const size_t n = MEMBW_FLOATS, bytes = n * sizeof(float);
    float *a = tt_alloc(bytes), *b = tt_alloc(bytes), *c = tt_alloc(bytes);
    if (!a || !b || !c) {
        tt_free(a), tt_free(b), tt_free(c);
        return tt_errorf("memory bandwidth: out of memory for 3 x %zu MiB", bytes >> 20);
    }
    /* first touch by the threads that will stream them (their pages land near them) */
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) a[i] = 0, b[i] = (float)(i & 1023), c[i] = 1.0f;
    triad(a, b, c, n, 0.5f); /* warm: page tables, frequency */
    double best = 0;
    const double t_end = tt_now() + (seconds > 0 ? seconds : 0.25);
    int rounds = 0;
    do { /* at least 3 rounds; a round slowed by other work never speeds another, so keep the best */
        const double t0 = tt_now();
        triad(a, b, c, n, 0.5f + (float)rounds);
        const double dt = tt_now() - t0, rate = dt > 0 ? 3.0 * (double)bytes / dt / 1e9 : 0;
        if (rate > best) best = rate;
        rounds++;
    } while (rounds < 3 || tt_now() < t_end);
    membw_sink = a[n / 2];
    tt_free(a), tt_free(b), tt_free(c);
    *gbps = best;
    return 0;
}

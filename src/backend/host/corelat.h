/* corelat.h — how far apart the host places two of the program's threads:
 * the round trip of one cache line between them. */
#ifndef TT_CORELAT_H
#define TT_CORELAT_H

#include "core/core.h"

/* The median of a few timings of a cache line passed from the first thread to
 * the second and back, in ns a round trip; 0 with fewer than two threads.
 * Cores sharing a last-level cache hand a line over in tens of ns; across
 * chiplets or sockets it takes hundreds. A VM's vCPUs can sit either way
 * and move between runs, and threads that share the GEMM's packed panels
 * feel it (docs/performance.md). */
tt_err tt_core_round_trip(double *ns);

#endif

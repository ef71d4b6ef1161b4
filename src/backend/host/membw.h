/* membw.h — the host's measured memory bandwidth (GB/s), for the roofline
 * `titan bench peak` and `bench step --profile` report. */
#ifndef TT_MEMBW_H
#define TT_MEMBW_H

#include "core/core.h"

/* The best of at least three passes of a triad over 192 MiB on tt_num_threads() threads, for about `seconds`
 * (0: a quarter second): *gbps, bytes read and written a second / 1e9. */
tt_err tt_mem_bandwidth(double seconds, double *gbps);

#endif

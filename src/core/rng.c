/* rng.c — counter-based random numbers: each draw hashes (seed, counter) (tt_hash64, inline in core.h). */
#include <math.h>

#include "core.h"

uint64_t tt_rng_u64(tt_rng *r) { return tt_hash64(r->seed, r->counter++); }

double tt_rng_uniform(tt_rng *r) { return (double)(tt_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double tt_rng_normal(tt_rng *r)
{
    double u1 = tt_rng_uniform(r), u2 = tt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t tt_rng_below(tt_rng *r, uint64_t n)
{
    if (n <= 1) return 0;
    /* rejection keeps it exactly uniform */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = tt_rng_u64(r);
    while (x >= lim);
    return x % n;
}

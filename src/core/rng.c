/* rng.c — counter-based random numbers: each draw hashes (seed, counter). */
#include <math.h>

#include "core.h"

/* splitmix64's finaliser applied twice over the pair: cheap, well mixed, and
 * stateless, which is what makes the stream reproducible anywhere. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t tt_hash64(uint64_t seed, uint64_t counter)
{
    return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (counter * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
}

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

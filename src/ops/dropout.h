/* dropout.h — dropout's mask: which elements a dropout node keeps, a pure function of (seed, counter, site,
 * element). Every backend's kernel draws it from here, so that all keep the same elements; it needs only core. */
#ifndef TT_OPS_DROPOUT_H
#define TT_OPS_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "core/core.h"

/* Element i of a node's run draws
 *   u(i) = (tt_hash64(key, i) >> 40) * 2^-24,   key = tt_hash64(tt_hash64(seed ^ TT_DROPOUT_DOMAIN, counter), site)
 * and is kept when u(i) >= p. seed and counter are the node's rng input (the host writes them before each run: the
 * trainer's training.seed and its micro-step), site the node's attribute (one per call site). A key derived from
 * (seed, counter, site) rather than one hashed counter word counter * K + site + i, because 64 bits do not hold the
 * three exactly (an element index wants up to 40 bits, a long run's micro-steps 30, the sites more), and an additive
 * offset lets one run's range of elements overlap another's. Here the element index enters whole, so no two elements
 * of one run share a draw; two (counter, site) pairs share a key only when two 64-bit hashes collide (among n pairs,
 * some two do with probability about n^2 / 2^65: 1e8 pairs, 3e-4), and then only those two masks coincide. The domain
 * constant keeps these keys apart from the other streams keyed by tt_hash64(seed, ...) (parameter initialisation,
 * the data loader). */
#define TT_DROPOUT_DOMAIN 0x64726f706f7574ull /* "dropout" */

static inline uint64_t tt_dropout_key(uint64_t seed, uint64_t counter, uint64_t site)
{
    return tt_hash64(tt_hash64(seed ^ TT_DROPOUT_DOMAIN, counter), site);
}

/* u(i) >= p exactly when the top 24 bits are >= ceil(p * 2^24) (p * 2^24 is exact in double), so the kernels
 * compare integers: no rounding can make two backends disagree. p in [0, 1) gives a threshold in [0, 2^24]. */
static inline uint32_t tt_dropout_threshold(double p) { return (uint32_t)ceil(p * 16777216.0); }

static inline int tt_dropout_keep(uint64_t key, uint64_t i, uint32_t threshold)
{
    return (uint32_t)(tt_hash64(key, i) >> 40) >= threshold;
}

/* what a kept element is multiplied by: 1 / (1 - p), so the expectation is x */
static inline double tt_dropout_scale(double p) { return 1.0 / (1.0 - p); }

#endif

/* sampler.h — pick the next token from logits: greedy, temperature, top-k and
 * top-p (nucleus), with the draw taken from the deterministic tt_rng. */
#ifndef TT_SAMPLER_H
#define TT_SAMPLER_H

#include "core/core.h"

/* A reusable workspace: tt_sample never allocates, except to grow the buffer
 * the first time it sees a larger vocabulary than any before. */
typedef struct {
    struct tt_sample_cand *cand; /* (cap,) probability + token id pairs */
    int cap;
} tt_sampler;

/* max_vocab may be 0 (the buffer then grows on first use). */
tt_err tt_sampler_init(tt_sampler *s, int max_vocab);
void tt_sampler_free(tt_sampler *s);

/* Choose a token from logits (V,) and store it in *out_token.
 *   temperature: 0 = greedy argmax (the lowest id among equal maxima); > 0
 *                divides the logits before the softmax.
 *   top_k:       0 = off; else keep the k most probable tokens.
 *   top_p:       1 = off; else keep the smallest set of most probable tokens
 *                (after top_k, renormalised) whose cumulative probability is
 *                >= top_p. Must be in (0, 1].
 * Ties in probability are ordered by token id, so the result is a pure
 * function of (logits, settings, rng state). A non-greedy call (temperature >
 * 0, top_k != 1, V > 1) consumes exactly one tt_rng_uniform draw; a greedy one
 * consumes none. NaN or +Inf logits, or all logits -Inf, are errors; -Inf is a
 * masked token. */
tt_err tt_sample(tt_sampler *s, const float *logits, int V, float temperature, int top_k, float top_p,
                 tt_rng *rng, int *out_token);

#endif

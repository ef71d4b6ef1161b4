/* accum.h — folds gradient accumulation into the nodes that make the
 * gradients: a weight-gradient matmul (or embedding backward, or the loss's
 * head gradient) writes into the persistent accumulator with its own
 * accumulate flag instead of into an activation that an accum node then adds. */
#ifndef TT_ACCUM_H
#define TT_ACCUM_H
#include "ops/ops.h"

/* Every accum(acc, g) whose g has no other reader and is made by a matmul,
 * an embedding backward or ce_linear's dW (or is the sum of two such, as for
 * tied embeddings) loses its accum node: the producers write into acc,
 * accumulating. Saves a pass over every gradient per micro-step and the
 * gradient activations' share of the arena. Returns how many were folded
 * in *folded (may be NULL). */
tt_err tt_fold_accum(tt_graph *g, int *folded);

#endif

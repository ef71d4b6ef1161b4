/* remat.h — activation checkpointing as a graph pass: clones a transformer
 * block's forward nodes into the backward so the forward's activations die
 * early and the memory plan needs a smaller arena. */
#ifndef TT_REMAT_H
#define TT_REMAT_H
#include "ops/ops.h"
#include "titan/modes.h"

typedef struct {
    int blocks;         /* transformer blocks that recompute something */
    int nodes;          /* forward nodes cloned into the backward */
    double flops;       /* FLOPs of one run of those clones */
    double graph_flops; /* FLOPs of one run of the graph before the pass */
} tt_remat_stats;

/* g holds a train graph as autodiff leaves it: nodes [0, n_fwd) are the
 * forward, the rest read what it saved (backward, gradient accumulation).
 * For each transformer block (the nodes whose unit the model declared a
 * block, tt_graph_add_unit), the activations the backward reads are
 * recomputed there instead of kept from the forward:
 *   TT_AC_FULL       everything the block computes, from its input
 *                    (and whatever else flows into it from outside);
 *   TT_AC_SELECTIVE  everything but the outputs of matmul and attention,
 *                    which stay saved (TorchTitan's "op" policy).
 * Clones run the same op with the same attributes on the same (or cloned)
 * inputs, so they give bitwise the forward's values; they get the scope
 * "<forward scope>.remat" and go right before the first node that reads
 * them, and the backward is rewired to read them. Ops the op table does not
 * mark pure (KV-cache attention, cross-entropy, optimizer ops) are never
 * recomputed. TT_AC_NONE leaves g as it is. stats may be NULL. */
tt_err tt_remat(tt_graph *g, int n_fwd, tt_ac_mode mode, tt_remat_stats *stats);

const char *tt_ac_mode_name(tt_ac_mode mode); /* "none", "selective", "full" */
#endif

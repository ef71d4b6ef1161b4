/* ep.h — expert parallelism as a graph pass: each MoE layer of a forward
 * graph, built for one process, is rewritten so that its dispatched rows go
 * to the ranks of the expert group that hold their experts and come back
 * computed, as the FSDP pass rewrites units. */
#ifndef TT_EP_H
#define TT_EP_H
#include "ops/ops.h"

typedef struct {
    int ep;             /* ranks of the expert group (the expert parallel degree), > 1 */
    int rank;           /* this rank's place in it: it holds experts [rank E/ep, (rank+1) E/ep) of each layer */
    int group;          /* the tt_group_id of dist/dist.h the rows travel over */
    double recv_factor; /* the receive buffer: at most this x the rank's own rows (0: the worst case, ep x) */
} tt_ep_cfg;

/* g: a forward graph whose MoE layers carry the marks of models/moe.h (a
 * dispatch, its offsets and a combine in each MoE block's unit). For each
 * layer, after the dispatched rows xs (M, D) are made:
 *   all_gather(offsets) over the group ─► moe_ep_plan (the exchanges' counts,
 *   the received rows' offsets by local expert, to_src / to_exp)
 *   all_to_allv(xs) ─► (R, D) by source rank; row_gather(to_src) ─► by expert
 *   ─► the layer's experts, on this rank's experts' weights and R rows
 *   ─► row_gather(to_exp) ─► all_to_allv back ─► (M, D): what the combine reads.
 * R is ep x M, or recv_factor x M when smaller (a run fails, naming
 * parallelism.expert_receive_factor, when a rank would receive more). The
 * nodes between the dispatch and the experts that do not depend on them (the
 * shared experts) are placed between the dispatch's start and its wait, so
 * they compute while the rows travel. Runs before autodiff: the backward of
 * the exchanges is their backward rules'. */
tt_err tt_ep(tt_graph *g, const tt_ep_cfg *c);

#endif

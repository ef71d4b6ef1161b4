/* fsdp.h — FSDP as a graph pass, the SimpleFSDP way: the step graph of one
 * process is rewritten so that each bucket of units (a transformer block,
 * the embeddings, the head; or several small ones merged) is gathered from
 * the shards the ranks hold before its first use, its gradients are reduced
 * and scattered back to the shards after their last contribution, and all of
 * it is collectives inside the graph that the schedule pass can move for
 * overlap and the memory plan can place. */
#ifndef TT_FSDP_H
#define TT_FSDP_H
#include "ops/ops.h"

/* The most pieces of the flat layout a bucket joins (a rank's routed experts: one a range of them, as many as
 * TT_MAX_EXPERT_RANGES). */
#define TT_FSDP_MAX_SEGS 4

/* A piece of the model's flat layout: [flat, flat + n) elements. */
typedef struct {
    int64_t flat, n;
} tt_fsdp_seg;

/* A bucket: from the units [first_unit, first_unit + n_units), the pieces
 * seg[0..n_segs) of the model's flat layout laid end to end (numel elements
 * in all; one contiguous range starting at `offset` unless expert
 * parallelism splits an MoE block), padded to `padded` (a multiple of its
 * group's size) so every rank of the group holds padded / group size.
 * Under expert parallelism an MoE block is two buckets: the block without
 * its routed experts, over the shard group, and this rank's experts
 * (`expert`), over the expert shard group: each next rank of the expert
 * group holds the pieces ep_stride[k] further on. */
typedef struct {
    int first_unit, n_units;
    int64_t offset, numel, padded;
    int n_segs;
    tt_fsdp_seg seg[TT_FSDP_MAX_SEGS];
    int expert;
    int64_t ep_stride[TT_FSDP_MAX_SEGS];
} tt_fsdp_bucket;

/* Where element `flat` of the layout is in the bucket's own order (its
 * gathered buffer), or -1 when the bucket does not hold it. */
static inline int64_t tt_fsdp_bucket_pos(const tt_fsdp_bucket *b, int64_t flat)
{
    int64_t at = 0;
    for (int k = 0; k < b->n_segs; k++) {
        if (flat >= b->seg[k].flat && flat < b->seg[k].flat + b->seg[k].n) return at + flat - b->seg[k].flat;
        at += b->seg[k].n;
    }
    return -1;
}

typedef struct {
    int shards, replicas;      /* the shard and replicate groups' sizes (HSDP; shards 1 = data parallel) */
    int expert_shards;         /* the expert shard group's size (shards / expert parallel degree) */
    int n_buckets;
    const tt_fsdp_bucket *buckets;
    const int64_t *unit_offset; /* per unit: its first element in the flat layout */
    tt_dtype param_dtype;      /* what the gathers move (bf16 under mixed precision); weights are fp32 after */
    tt_dtype reduce_dtype;     /* what the reductions move (training.mixed_precision_reduce) */
    int reshard_after_forward; /* free the gathered weights after the forward and gather again for the
                                  backward: 0 never, 1 all but the last bucket the forward uses (its
                                  backward comes right after), 2 always */
    int reduce;                /* this graph ends an optimizer step: it reduces the gradients */
    int grads_persistent;      /* shards > 1 and micro-steps accumulate: the full gradients live in state
                                  buffers across the graphs of one optimizer step */
    int frozen;                /* the units are a frozen base (LoRA's): their shards are TT_ROLE_FROZEN roots,
                                  gathered as the words they are (param_dtype is not applied: a word may hold
                                  two bf16 weights), and nothing is reduced (grads must be NULL) */
} tt_fsdp_cfg;

/* What the caller binds: per bucket, the root the rank's parameter shard is
 * read from (shards > 1), the root of its gradient shard (f32 [padded /
 * shards]) and, with grads_persistent, of its full gradients (f32 [padded]).
 * Unused entries are NULL. */
typedef struct {
    tt_value **param_shard, **grad_shard, **grad_full;
    int gathers, reductions;   /* collectives inserted */
    int n_fwd;                 /* the forward's nodes in the new order (up to its last original node): what a
                                  second pass over the same graph takes as n_fwd */
} tt_fsdp_result;

/* g: a step graph as the earlier passes leave it, its nodes [0, n_fwd) the
 * forward; units[u]: the param root of unit u (its parameters are views of
 * it), grads[u]: the gradient root of unit u (NULL in a forward-only graph).
 * With shards 1 nothing is gathered (the units stay bound to whole weights)
 * and the gradients are all-reduced over the replicas. A unit root may be
 * NULL (a unit with nothing in it: LoRA's adapters of the embeddings). The
 * pass may run twice on one graph, on two sets of units (LoRA: the frozen
 * base, then the adapters), the second taking result->n_fwd of the first. The unit gradient
 * roots are left unread: the gradients go to the roots of the result. result's arrays are
 * allocated here (tt_fsdp_result_free). */
tt_err tt_fsdp(tt_graph *g, int n_fwd, tt_value *const *units, tt_value *const *grads, int n_units,
               const tt_fsdp_cfg *c, tt_fsdp_result *result);
void tt_fsdp_result_free(tt_fsdp_result *r);

/* The schedule pass: moves each gather's start one bucket ahead of its first
 * reader (forward in bucket order, backward in reverse), so unit i+1's
 * weights travel while unit i computes, and each reduction's wait one bucket
 * after its start, so unit i's gradients travel while unit i-1's backward
 * computes; an exchange of expert parallelism (on the expert group) is
 * waited for as late as its readers allow. */
tt_err tt_fsdp_schedule(tt_graph *g);
/* The opposite, to measure what the schedule hides (comm.overlap = false):
 * every collective waited for right after its start. */
tt_err tt_fsdp_serialize(tt_graph *g);

#endif

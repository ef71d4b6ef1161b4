/* moe.h — the Mixture-of-Experts block that model files call: its parameters
 * (router, selection bias, routed experts, shared experts), its Hugging Face
 * names, and the layer: route, sort, permute, grouped experts, combine, the
 * shared experts and the balancing losses. The layer is one process's math;
 * it marks its dispatch and combine for the expert-parallel pass
 * (graph/passes/ep.c), which turns them into exchanges between ranks. */
#ifndef TT_MOE_H
#define TT_MOE_H

#include "models/model.h"

/* Where each of the block's parameters is, counted from its first (-1:
 * absent): the router (E, D), the selection bias (E), the experts' w1 and w3
 * (expert 0's w1, w3, then expert 1's, ...: one (E, 2F, D) block), every
 * w2 (one (E, D, F) block), the shared experts' w1, w3, w2 and their gate;
 * GPT-OSS's router bias (E) and the experts' biases, b1 and b3 in pairs (one
 * (E, 2F) block) and every b2 (one (E, D) block); n in all. */
typedef struct {
    int router, bias, w13, w2, sh1, sh3, sh2, sgate, n;
    int rbias, b13, b2;
} tt_moe_slots;
tt_moe_slots tt_moe_slots_of(const tt_moe_cfg *e);

/* Declare the block's parameters in unit `unit`, named "<prefix>.router.weight",
 * "<prefix>.experts.<x>.w1.weight", ...; weights drawn with std (out_std for
 * the output projections). */
tt_err tt_moe_declare(tt_model *m, int unit, const char *prefix, double std, double out_std);

/* The layer on h (N, D), N = B*T tokens: p holds the block's parameter values
 * from its first (tt_moe_slots). aux_scale (1) f32, or NULL: the auxiliary
 * losses the config asks for are built (named by tt_moe_name_aux_loss) when
 * it is given. (N, D). */
tt_value *tt_moe_layer(tt_graph *g, const tt_moe_cfg *e, tt_value *const *p, tt_value *h, int B, int T,
                       tt_value *aux_scale);

/* The Hugging Face tensor of the block's parameter k (counted from its first)
 * in layer l: Qwen2/3-MoE, OLMoE and DeepSeek-V3 names, Mixtral's
 * (m->ext.hf_mixtral), or every family's experts packed in two tensors
 * (m->ext.hf_packed_experts, transformers 5). */
tt_err tt_moe_hf_slot(const tt_model *m, int l, int k, tt_hf_slot *s);

/* What the expert-parallel pass reads of a layer, one of each per MoE block's
 * unit: the dispatch, the rows xs (M, D) that leave for their experts, sorted
 * by expert (M = N*k); the rows' offsets by expert (tt_moe_name_offsets); and
 * the combine, the rows ys (M, D) the experts give back in the same order.
 * The nodes between (the routed experts) read only xs, the offsets, values
 * made between, and stacks of all E experts' weights ((E, r, c) views); each
 * makes rows (M, .) and computes over the rows the offsets cover, so the pass
 * may run them on other rows (the ones a rank receives) and fewer experts. */
void tt_moe_mark_dispatch(tt_value *xs);
int tt_moe_is_dispatch(const tt_value *v);
void tt_moe_mark_combine(tt_value *ys);
int tt_moe_is_combine(const tt_value *v);

#endif

/* mla.h — Multi-head Latent Attention (DeepSeek-V2/V3), the block that model
 * files call: its parameters, their Hugging Face names, and the attention as
 * graph ops (low-rank queries, keys and values, a RoPE key part that every
 * head shares, values of their own width). */
#ifndef TT_MLA_H
#define TT_MLA_H

#include "models/model.h"

/* Where each of the block's parameters is, counted from its first (-1:
 * absent): the query's compression wq_a (q_lora_rank, D), its norm and its
 * expansion wq_b (H*(qk_nope+qk_rope), q_lora_rank), present when
 * q_lora_rank > 0 (else the model's wq gives the queries); the keys' and
 * values' compression wkv_a (kv_lora_rank + qk_rope, D), its norm and
 * expansion wkv_b (H*(qk_nope+v_head), kv_lora_rank); n in all. */
typedef struct {
    int qa, qan, qb, kva, kvan, kvb, n;
} tt_mla_slots;
tt_mla_slots tt_mla_slots_of(const tt_mla_cfg *a);

/* Declare the block's parameters in unit `unit`, named "<prefix>.wq_a.weight", ... */
tt_err tt_mla_declare(tt_model *m, int unit, const char *prefix, double std);

/* The attention of layer l on h (N, D): p holds the block's parameter values
 * from its first, wq the model's query projection (used when q_lora_rank is
 * 0); RoPE from inv_freq scaled by rope_scale; DeepSeek's softmax scale.
 * (N, H*v_head), before the output projection. */
tt_value *tt_mla_attention(tt_graph *g, const tt_model *m, tt_value *const *p, tt_value *wq, tt_value *h,
                           const tt_fwd_inputs *in, tt_value *inv_freq, double rope_scale, int l);

/* The Hugging Face name of the block's parameter k (counted from its first),
 * after "model.layers.<l>.self_attn.". */
const char *tt_mla_hf_name(const tt_mla_cfg *a, int k);

#endif

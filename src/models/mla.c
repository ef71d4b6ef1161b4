/* mla.c — Multi-head Latent Attention (see mla.h): its parameters, their
 * Hugging Face names, and the attention as graph ops. */
#include <math.h>
#include <stdio.h>

#include "models/mla.h"

tt_mla_slots tt_mla_slots_of(const tt_mla_cfg *a)
{
    tt_mla_slots s = {-1, -1, -1, 0, 1, 2, 3};
    if (a->q_lora_rank > 0) s = (tt_mla_slots){0, 1, 2, 3, 4, 5, 6};
    return s;
}

tt_err tt_mla_declare(tt_model *m, int unit, const char *prefix, double std)
{
    const tt_model_cfg *c = &m->cfg;
    const tt_mla_cfg *a = &c->mla;
    const int64_t D = c->dim, H = c->n_heads, qk = a->qk_nope + a->qk_rope;
    const struct { const char *n; int64_t r, k; tt_init_kind init; } s[] = {
        {"wq_a.weight", a->q_lora_rank, D, TT_INIT_NORMAL},
        {"q_a_norm.weight", a->q_lora_rank, 0, TT_INIT_ONES},
        {"wq_b.weight", H * qk, a->q_lora_rank, TT_INIT_NORMAL},
        {"wkv_a.weight", a->kv_lora_rank + a->qk_rope, D, TT_INIT_NORMAL},
        {"kv_a_norm.weight", a->kv_lora_rank, 0, TT_INIT_ONES},
        {"wkv_b.weight", H * (a->qk_nope + a->v_head), a->kv_lora_rank, TT_INIT_NORMAL},
    };
    char name[96];
    for (size_t i = a->q_lora_rank > 0 ? 0 : 3; i < sizeof s / sizeof s[0]; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, s[i].n);
        if (tt_model_declare(m, unit, name, s[i].k ? 2 : 1, (int64_t[]){s[i].r, s[i].k}, s[i].init,
                             s[i].init == TT_INIT_NORMAL ? std : 0, s[i].init == TT_INIT_ONES))
            return -1;
    }
    return 0;
}

/* Queries and keys of H heads [nope | rope], the RoPE key part shared by
 * every head, values from the same compressed projection, v_head wide. */
tt_value *tt_mla_attention(tt_graph *g, const tt_model *m, tt_value *const *p, tt_value *wq, tt_value *h,
                           const tt_fwd_inputs *in, tt_value *inv_freq, double rope_scale, int l)
{
    const tt_model_cfg *c = &m->cfg;
    const tt_mla_cfg *a = &c->mla;
    const tt_mla_slots s = tt_mla_slots_of(a);
    const tt_attn_dims ad = tt_model_attn_dims(c);
    const int H = c->n_heads, dn = a->qk_nope, dr = a->qk_rope, dv = a->v_head, kvr = a->kv_lora_rank;
    tt_value *q = s.qa >= 0 ? tt_linear(g, tt_rmsnorm(g, tt_linear(g, h, p[s.qa], NULL), p[s.qan], 1e-6), p[s.qb], NULL)
                            : tt_linear(g, h, wq, NULL);                           // (N, H*(dn+dr))
    tt_value *kva = tt_linear(g, h, p[s.kva], NULL);                               // (N, kvr + dr): latent, then k_pe
    tt_value *kv = tt_linear(g, tt_rmsnorm(g, tt_head_slice(g, kva, 1, kvr + dr, 0, kvr, 0, 0), p[s.kvan], 1e-6),
                             p[s.kvb], NULL);                                      // (N, H*(dn+dv))
    /* RoPE on the rope parts, in rotate-half order (interleaved pairs taken apart first) */
    tt_value *q_pe = tt_rope_scaled(g, tt_head_slice(g, q, H, dn + dr, dn, dr, 0, a->rope_interleave), in->pos, inv_freq,
                                    H, dr, rope_scale);                            // (N, H*dr)
    tt_value *k_pe = tt_rope_scaled(g, tt_head_slice(g, kva, 1, kvr + dr, kvr, dr, 0, a->rope_interleave), in->pos,
                                    inv_freq, 1, dr, rope_scale);                  // (N, dr), every head's
    tt_value *qf = tt_head_concat(g, tt_head_slice(g, q, H, dn + dr, 0, dn, 0, 0), q_pe, H, 0);   // (N, H*(dn+dr))
    tt_value *kf = tt_head_concat(g, tt_head_slice(g, kv, H, dn + dv, 0, dn, 0, 0), k_pe, H, 1); // k_pe in every head
    tt_value *v = tt_head_slice(g, kv, H, dn + dv, dn, dv, 0, 0);                  // (N, H*dv)
    const int hd = ad.hd; /* the queries' and keys' width in the kernels: qk, or v when wider */
    const int64_t N = (int64_t)in->B * in->T;
    if (ad.qk < hd) { /* values wider than queries and keys: pad these (zeros add nothing to a score) */
        qf = tt_head_concat(g, qf, tt_zeros(g, g->act_dtype, 2, (int64_t[]){N, (int64_t)H * (hd - ad.qk)}), H, 0);
        kf = tt_head_concat(g, kf, tt_zeros(g, g->act_dtype, 2, (int64_t[]){N, (int64_t)H * (hd - ad.qk)}), H, 0);
    }
    /* scores scaled as DeepSeek does: qk^-1/2, times YaRN's mscale(factor, mscale_all_dim)^2 */
    double scale = 1.0 / sqrt((double)ad.qk);
    if (m->ext.rope.yarn && m->ext.rope.mscale_all_dim > 0 && c->rope.factor > 1) {
        const double ms = 0.1 * m->ext.rope.mscale_all_dim * log(c->rope.factor) + 1.0;
        scale *= ms * ms;
    }
    const int window = tt_model_layer_window(c, &m->ext, l);
    /* values dv wide: the attention ops take them as they are */
    return in->cache_k ? tt_attention_kv_scaled(g, qf, kf, v, in->cache_k[l], in->cache_v[l], in->start, in->B, in->T, H,
                                                H, hd, window, scale, m->ext.attn_softcap, NULL)
                       : tt_attention_scaled(g, qf, kf, v, in->doc, in->B, in->T, H, H, hd, window, scale,
                                             m->ext.attn_softcap, NULL); // (N, H*dv)
}

const char *tt_mla_hf_name(const tt_mla_cfg *a, int k)
{
    const tt_mla_slots s = tt_mla_slots_of(a);
    return k == s.qa     ? "q_a_proj.weight"
           : k == s.qan  ? "q_a_layernorm.weight"
           : k == s.qb   ? "q_b_proj.weight"
           : k == s.kva  ? "kv_a_proj_with_mqa.weight"
           : k == s.kvan ? "kv_a_layernorm.weight"
                         : "kv_b_proj.weight";
}

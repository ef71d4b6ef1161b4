/* model_parts.c — what an architecture's code (llama.c, gpt2.c) calls while
 * it declares and builds a model: declaring a parameter, the per-layer facts
 * (sliding window, MoE), the attention dims, the RoPE table and the names of
 * MoE's values. Apart from model.c, which calls the architectures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

tt_err tt_model_declare(tt_model *m, int unit, const char *name, int ndim, const int64_t *shape, tt_init_kind init,
                        double std, int no_decay)
{
    if (m->n_params == m->cap_params) {
        int nc = m->cap_params ? 2 * m->cap_params : 64;
        tt_param *p = realloc(m->params, (size_t)nc * sizeof *p);
        if (!p) return tt_errorf("out of memory declaring parameters");
        m->params = p;
        m->cap_params = nc;
    }
    if (ndim < 1 || ndim > 2) return tt_errorf("model: parameter '%s' has %d dims", name, ndim);
    if (m->n_params && unit < m->params[m->n_params - 1].unit)
        return tt_errorf("model: parameter '%s' declared after a later unit's", name);
    tt_param *p = &m->params[m->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i];
    p->unit = unit;
    p->init = init;
    p->std = std;
    p->no_decay = no_decay;
    return 0;
}

int tt_model_layer_window(const tt_model_cfg *c, const tt_model_ext *x, int layer)
{
    if (x && layer >= 0 && layer < TT_MODEL_MAX_LAYERS && x->full_attention[layer]) return 0;
    return c->window;
}

int tt_model_layer_is_moe(const tt_model_cfg *c, int l)
{
    const int step = c->moe.sparse_step > 0 ? c->moe.sparse_step : 1;
    return c->moe.n_experts > 0 && l >= c->moe.n_dense_layers && (l + 1) % step == 0 &&
           !(l < TT_MODEL_MAX_LAYERS && c->moe.mlp_only[l]);
}

int tt_model_has_moe_layer(const tt_model_cfg *c)
{
    if (c->moe.n_experts <= 0) return 0;
    const int head = c->n_layers < TT_MODEL_MAX_LAYERS ? c->n_layers : TT_MODEL_MAX_LAYERS;
    for (int l = 0; l < head; l++)
        if (tt_model_layer_is_moe(c, l)) return 1;
    /* past mlp_only's layers and the dense ones the sparse step alone decides: the first layer l >= lo
     * with (l + 1) % step == 0 is MoE, and is there when it is below n_layers */
    const int64_t step = c->moe.sparse_step > 0 ? c->moe.sparse_step : 1;
    const int64_t lo = TT_MODEL_MAX_LAYERS > c->moe.n_dense_layers ? TT_MODEL_MAX_LAYERS : c->moe.n_dense_layers;
    return (lo + step) / step * step - 1 < c->n_layers;
}

tt_attn_dims tt_model_attn_dims(const tt_model_cfg *c)
{
    if (c->mla.kv_lora_rank <= 0) return (tt_attn_dims){c->head_dim, c->head_dim, c->n_kv_heads, c->head_dim};
    const int qk = c->mla.qk_nope + c->mla.qk_rope, v = c->mla.v_head;
    return (tt_attn_dims){qk, v, c->n_heads, qk > v ? qk : v};
}

int tt_model_rope_rot(const tt_model *m) { return m->ext.rope_rot > 0 ? m->ext.rope_rot : m->cfg.head_dim; }

tt_value *tt_rope_table(tt_graph *g, const tt_rope_params *p, const tt_rope_ext *x, int rot, long positions)
{
    void *data;
    int64_t n = rot / 2;
    tt_value *v = tt_graph_const(g, TT_F32, 1, &n, &data);
    if (v) tt_rope_inv_freq_at(p, x, rot, positions, data);
    return v;
}

tt_value *tt_model_rope_table(tt_graph *g, const tt_model *m, long positions)
{
    return tt_rope_table(g, &m->cfg.rope, &m->ext.rope, tt_model_rope_rot(m), positions);
}

#define MOE_OFFSETS_NAME "moe.tokens_per_expert"
void tt_moe_name_offsets(tt_value *offsets)
{
    if (offsets) snprintf(offsets->name, sizeof offsets->name, MOE_OFFSETS_NAME);
}
int tt_moe_is_offsets(const tt_value *v) { return strcmp(v->name, MOE_OFFSETS_NAME) == 0; }
#define MOE_AUX_NAME "moe.aux_loss"
void tt_moe_name_aux_loss(tt_value *loss)
{
    if (loss) snprintf(loss->name, sizeof loss->name, MOE_AUX_NAME);
}
int tt_moe_is_aux_loss(const tt_value *v) { return strcmp(v->name, MOE_AUX_NAME) == 0; }

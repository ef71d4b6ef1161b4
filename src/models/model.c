/* model.c — parameter declaration, storage and initialisation shared by all
 * architectures, and the FLOPs/parameter arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/model.h"

static const tt_arch_impl *arch_impl(tt_arch_id a)
{
    return a == TT_ARCH_LLAMA ? &tt_arch_llama : a == TT_ARCH_GPT2 ? &tt_arch_gpt2 : NULL;
}

const char *tt_arch_name(tt_arch_id a)
{
    const tt_arch_impl *impl = arch_impl(a);
    return impl ? impl->name : "?";
}

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
    tt_param *p = &m->params[m->n_params++];
    memset(p, 0, sizeof *p);
    snprintf(p->t.name, sizeof p->t.name, "%s", name);
    p->t.dtype = TT_F32;
    p->t.ndim = ndim;
    for (int i = 0; i < ndim; i++) p->t.shape[i] = shape[i];
    p->unit = unit;
    p->init = init;
    p->std = std;
    p->no_decay = no_decay;
    return 0;
}

static tt_err check_cfg(const tt_model_cfg *c)
{
    if (c->dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->vocab_size <= 0 || c->ffn_dim <= 0)
        return tt_errorf("model: dim, n_layers, n_heads, ffn_dim and vocab_size must be positive");
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads)
        return tt_errorf("model: n_heads (%d) must be a multiple of n_kv_heads (%d)", c->n_heads, c->n_kv_heads);
    if (c->head_dim <= 0 || c->head_dim % 2)
        return tt_errorf("model: head_dim must be positive and even (got %d)", c->head_dim);
    if (c->window < 0) return tt_errorf("model: the sliding window must be 0 (none) or positive (got %d)", c->window);
    return 0;
}

int tt_model_layer_window(const tt_model_cfg *c, const tt_model_ext *x, int layer)
{
    if (x && layer >= 0 && layer < TT_MODEL_MAX_LAYERS && x->full_attention[layer]) return 0;
    return c->window;
}

tt_model *tt_model_new(const tt_model_cfg *cfg)
{
    return tt_model_new_ext(cfg, NULL);
}

tt_model *tt_model_new_ext(const tt_model_cfg *cfg, const tt_model_ext *ext)
{
    const tt_arch_impl *impl = arch_impl(cfg->arch);
    if (!impl) {
        tt_errorf("unknown model architecture %d", (int)cfg->arch);
        return NULL;
    }
    if (check_cfg(cfg)) return NULL;
    tt_model *m = calloc(1, sizeof *m);
    if (!m) {
        tt_errorf("out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    if (ext) m->ext = *ext;
    if (impl->declare(m)) {
        tt_model_free(m);
        return NULL;
    }
    size_t total = 0;
    for (int i = 0; i < m->n_params; i++) total += (size_t)tt_numel(m->params[i].t.ndim, m->params[i].t.shape);
    /* params are declared unit by unit, so each unit is one contiguous range */
    m->storage = tt_alloc(total * sizeof(float));
    if (!m->storage) {
        tt_model_free(m);
        return NULL;
    }
    m->numel = total;
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        m->params[i].t.data = m->storage + off;
        off += (size_t)tt_numel(m->params[i].t.ndim, m->params[i].t.shape);
    }
    return m;
}

void tt_model_free(tt_model *m)
{
    if (!m) return;
    tt_free(m->storage);
    free(m->params);
    free(m);
}

void tt_model_init_weights(tt_model *m, uint64_t seed)
{
    for (int i = 0; i < m->n_params; i++) {
        tt_param *p = &m->params[i];
        float *w = p->t.data;
        int64_t n = tt_numel(p->t.ndim, p->t.shape);
        tt_rng r = {tt_hash64(seed, (uint64_t)i), 0}; /* one stream per parameter */
        for (int64_t k = 0; k < n; k++)
            w[k] = p->init == TT_INIT_ONES ? 1.0f : p->init == TT_INIT_ZEROS ? 0.0f : (float)(p->std * tt_rng_normal(&r));
    }
}

int tt_model_find(const tt_model *m, const char *name)
{
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].t.name, name) == 0) return i;
    return -1;
}

tt_err tt_model_bind(tt_graph *g, const tt_model *m, tt_value **vals)
{
    for (int i = 0; i < m->n_params; i++)
        if (!(vals[i] = tt_graph_bind(g, TT_ROLE_PARAM, &m->params[i].t))) return -1;
    return 0;
}

tt_value *tt_model_forward(tt_graph *g, const tt_model *m, tt_value *const *vals, const tt_fwd_inputs *in,
                           tt_value **head)
{
    return arch_impl(m->cfg.arch)->forward(g, m, vals, in, head);
}

tt_err tt_model_hf_slot(const tt_model *m, int i, tt_hf_slot *out)
{
    memset(out, 0, sizeof *out);
    out->n_parts = 1;
    if (i < 0 || i >= m->n_params) return tt_errorf("model: parameter index %d out of range", i);
    return arch_impl(m->cfg.arch)->hf_slot(m, i, out);
}

const char *tt_model_hf_optional_prefix(const tt_model *m)
{
    return arch_impl(m->cfg.arch)->hf_optional_prefix;
}

int tt_model_hf_ignorable(const tt_model *m, const char *name)
{
    return arch_impl(m->cfg.arch)->hf_ignorable(m, name);
}

tt_value *tt_model_rope_table(tt_graph *g, const tt_model *m)
{
    void *data;
    int64_t n = m->cfg.head_dim / 2;
    tt_value *v = tt_graph_const(g, TT_F32, 1, &n, &data);
    if (v) tt_rope_inv_freq_ext(&m->cfg.rope, &m->ext.rope, m->cfg.head_dim, data);
    return v;
}

tt_err tt_model_declare_only(const tt_model_cfg *cfg, tt_model *m)
{
    const tt_arch_impl *impl = arch_impl(cfg->arch);
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (!impl) return tt_errorf("unknown model architecture %d", (int)cfg->arch);
    if (check_cfg(cfg) || impl->declare(m)) {
        free(m->params);
        m->params = NULL;
        return -1;
    }
    return 0;
}

void tt_model_place(tt_model *m, float *storage)
{
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        m->params[i].t.data = storage + off;
        off += (size_t)tt_numel(m->params[i].t.ndim, m->params[i].t.shape);
    }
    m->storage = storage;
    m->numel = off;
}

int64_t tt_model_count_params(const tt_model_cfg *cfg, int64_t *matmul_params)
{
    tt_model m;
    int64_t total = 0, mm = 0;
    if (tt_model_declare_only(cfg, &m) == 0)
        for (int i = 0; i < m.n_params; i++) {
            int64_t n = tt_numel(m.params[i].t.ndim, m.params[i].t.shape);
            total += n;
            if (!m.params[i].embedding_only) mm += n;
        }
    free(m.params);
    if (matmul_params) *matmul_params = mm;
    return total;
}

double tt_model_flops_per_token(const tt_model_cfg *cfg, int seq_len)
{
    int64_t mm = 0;
    tt_model_count_params(cfg, &mm);
    return 6.0 * (double)mm + 12.0 * cfg->n_layers * (double)cfg->n_heads * cfg->head_dim * seq_len;
}

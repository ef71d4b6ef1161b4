/* lora.c — LoRA's adapters on a base model (see lora.h): the targets a list
 * of PEFT module names picks, the adapter model, the frozen base's layout
 * and the merge. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/lora.h"

double tt_lora_scale(const tt_lora_spec *s)
{
    return s->use_rslora ? s->alpha / sqrt((double)s->rank) : s->alpha / s->rank;
}

tt_err tt_lora_module_name(const tt_model *base, int i, char *module, size_t cap, int *adaptable, int *parts)
{
    const tt_param *p = &base->params[i];
    *adaptable = 0;
    if (parts) *parts = 1;
    module[0] = 0;
    /* a linear layer of a block: 2-D, in a transformer block (not the embeddings or the head), not a routed
     * expert's slice of a packed tensor */
    if (p->ndim != 2 || !base->units[p->unit].block || !tt_param_numel(p)) return 0;
    tt_hf_slot s;
    if (tt_model_hf_slot(base, i, &s)) return -1;
    const size_t n = strlen(s.name);
    if (n < 8 || strcmp(s.name + n - 7, ".weight")) return 0;
    if (n - 7 >= cap) return tt_errorf("lora: the module name of '%s' is too long", s.name);
    memcpy(module, s.name, n - 7);
    module[n - 7] = 0;
    if (p->routed || s.stacked) {
        *adaptable = p->routed ? -2 : -1;
        return 0;
    }
    if (s.n_parts == 1) {
        *adaptable = 1;
        return 0;
    }
    /* GPT-2's c_attn holds q, k and v as parts of one Conv1D, and one PEFT adapter covers the three: the module
     * is its first part's, with the parts after it */
    if (s.part != 0) return 0;
    for (int k = 1; k < s.n_parts; k++) {
        tt_hf_slot t;
        const tt_param *q = i + k < base->n_params ? &base->params[i + k] : NULL;
        if (!q || tt_model_hf_slot(base, i + k, &t) || strcmp(t.name, s.name) || t.part != k || q->ndim != 2 ||
            q->shape[1] != p->shape[1] || q->unit != p->unit)
            return tt_errorf("lora: the %d parts of '%s' are not consecutive weights of one input size", s.n_parts,
                             s.name);
    }
    *adaptable = 1;
    if (parts) *parts = s.n_parts;
    return 0;
}

/* PEFT's match: the module's name equals the target or ends with "." target */
static int match_one(const char *target, const char *module)
{
    const size_t n = strlen(module), k = strlen(target);
    return !strcmp(module, target) || (n > k && module[n - k - 1] == '.' && !strcmp(module + n - k, target));
}

static int matches(const tt_lora_spec *s, const char *module)
{
    if (s->all_linear) return 1;
    for (int t = 0; t < s->n_targets; t++)
        if (match_one(s->targets[t], module)) return 1;
    return 0;
}

const char *tt_lora_module_leaf(const char *module)
{
    const char *d = strrchr(module, '.');
    return d ? d + 1 : module;
}

/* The modules a target list could name, for the error of one that names none: "q_proj, k_proj, ..." */
static void module_leaves(const tt_model *base, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = 0;
    char m[128];
    for (int i = 0; i < base->n_params && k + 1 < cap; i++) {
        int ok;
        if (tt_lora_module_name(base, i, m, sizeof m, &ok, NULL) || ok != 1) continue;
        char item[136]; /* " q_proj," against " " + the list so far */
        snprintf(item, sizeof item, " %s,", tt_lora_module_leaf(m));
        char seen[1100];
        snprintf(seen, sizeof seen, " %s", buf);
        if (strstr(seen, item)) continue;
        k += (size_t)snprintf(buf + k, cap - k, "%s, ", tt_lora_module_leaf(m));
    }
    if (k >= 2 && k < cap) buf[k - 2] = 0;
}

typedef struct {
    const tt_model *base;
    const tt_lora_spec *spec;
    tt_lora *l;
} decl_ctx;

/* Per base unit: the A of every target, then every B, so the A's of q, k and v (and of gate and up) lie back to
 * back as their weights do. */
static tt_err declare(tt_model *m, void *ctx)
{
    const decl_ctx *c = ctx;
    const tt_model *b = c->base;
    const int r = c->spec->rank;
    for (int u = 0; u < b->n_units; u++)
        for (int half = 0; half < 2; half++)
            for (int t = 0; t < c->l->n_targets; t++) {
                tt_lora_target *x = &c->l->targets[t];
                const tt_param *p = &b->params[x->base];
                if (p->unit != u) continue;
                int64_t rows = 0;
                for (int k = 0; k < x->n_parts; k++) rows += b->params[x->base + k].shape[0];
                /* named after the weight ("layers.0.attn.q_proj.lora_A"), or after the module when it holds
                 * several ("h.0.attn.c_attn.lora_A") */
                const char *dot = strrchr(p->name, '.');
                const int stem = dot && !strcmp(dot, ".weight") ? (int)(dot - p->name) : (int)strlen(p->name);
                const char *up = memrchr(p->name, '.', (size_t)stem);
                const int keep = up ? (int)(up - p->name) + 1 : 0;
                char name[160];
                if (x->n_parts == 1) snprintf(name, sizeof name, "%.*s.lora_%c", stem, p->name, half ? 'B' : 'A');
                else snprintf(name, sizeof name, "%.*s%s.lora_%c", keep, p->name, tt_lora_module_leaf(x->module),
                              half ? 'B' : 'A');
                const int64_t shape[2] = {half ? rows : r, half ? r : p->shape[1]};
                /* A: Kaiming-uniform with a = sqrt(5), as PEFT (bound 1 / sqrt(in)); B: zeros, so a new adapter
                 * leaves the base's outputs as they are */
                if (tt_model_declare(m, u, name, 2, shape, half ? TT_INIT_ZEROS : TT_INIT_UNIFORM,
                                     half ? 0 : 1.0 / sqrt((double)p->shape[1]), 0))
                    return -1;
                *(half ? &x->b : &x->a) = m->n_params - 1;
            }
    return 0;
}

tt_err tt_lora_new(const tt_model *base, const tt_lora_spec *spec, tt_lora *out)
{
    memset(out, 0, sizeof *out);
    if (spec->rank <= 0) return tt_errorf("lora.rank must be positive to adapt a model (got %d)", spec->rank);
    if (!(spec->dropout >= 0 && spec->dropout < 1)) return tt_errorf("lora.dropout must be in [0, 1) (got %g)", spec->dropout);
    if (!isfinite(spec->alpha)) return tt_errorf("lora.alpha must be a number");
    if (!spec->all_linear && !spec->n_targets) return tt_errorf("lora.target_modules is empty");
    if (!(out->targets = calloc((size_t)base->n_params + 1, sizeof *out->targets))) return tt_errorf("out of memory");
    out->rank = spec->rank;
    out->scale = tt_lora_scale(spec);
    out->dropout = spec->dropout;
    int used[TT_LORA_MAX_TARGETS] = {0};
    char m[128];
    for (int i = 0; i < base->n_params; i++) {
        int ok, parts;
        if (tt_lora_module_name(base, i, m, sizeof m, &ok, &parts)) goto fail;
        if (!ok || !matches(spec, m)) continue;
        if (ok == -2 && !spec->all_linear) {
            tt_errorf("lora: '%s' is a routed expert's weight, and LoRA on routed experts is not supported: target "
                      "the attention and the shared experts",
                      m);
            goto fail;
        }
        if (ok == -1 && !spec->all_linear) {
            tt_errorf("lora: '%s' is one of several weights stacked in one tensor, which titan cannot adapt: target "
                      "the other modules",
                      m);
            goto fail;
        }
        if (ok < 0) continue; /* all-linear takes what it can adapt */
        for (int t = 0; t < spec->n_targets; t++) used[t] |= match_one(spec->targets[t], m);
        tt_lora_target *x = &out->targets[out->n_targets++];
        x->base = i;
        x->n_parts = parts;
        snprintf(x->module, sizeof x->module, "%s", m);
    }
    for (int t = 0; t < spec->n_targets; t++)
        if (!used[t]) {
            char names[1024];
            module_leaves(base, names, sizeof names);
            tt_errorf("lora.target_modules: '%s' matches no linear layer of the model (its modules: %s)",
                      spec->targets[t], names);
            goto fail;
        }
    if (!out->n_targets) {
        tt_errorf("lora: the model has no linear layer to adapt");
        goto fail;
    }
    decl_ctx c = {base, spec, out};
    if (!(out->adapters = tt_model_new_declared(base, declare, &c))) goto fail;
    return 0;
fail:
    tt_lora_free(out);
    return -1;
}

void tt_lora_free(tt_lora *l)
{
    tt_model_free(l->adapters);
    free(l->targets);
    memset(l, 0, sizeof *l);
}

int tt_lora_target_of(const tt_lora *l, const tt_model *base, int base_param, int64_t *row0)
{
    for (int t = 0; t < l->n_targets; t++) {
        const tt_lora_target *x = &l->targets[t];
        if (base_param < x->base || base_param >= x->base + x->n_parts) continue;
        if (row0) {
            *row0 = 0;
            for (int i = x->base; i < base_param; i++) *row0 += base->params[i].shape[0];
        }
        return t;
    }
    return -1;
}

tt_err tt_frozen_layout_new(const tt_model *b, tt_dtype linear_dtype, tt_frozen_layout *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = calloc((size_t)b->n_params + 1, sizeof *out->dtype);
    out->offset = calloc((size_t)b->n_params + 1, sizeof *out->offset);
    out->unit_offset = calloc((size_t)b->n_units + 1, sizeof *out->unit_offset);
    out->unit_bytes = calloc((size_t)b->n_units + 1, sizeof *out->unit_bytes);
    if (!out->dtype || !out->offset || !out->unit_offset || !out->unit_bytes) {
        tt_frozen_layout_free(out);
        return tt_errorf("out of memory");
    }
    size_t at = 0;
    for (int u = 0; u < b->n_units; u++) {
        out->unit_offset[u] = at;
        size_t in_unit = 0;
        for (int i = b->units[u].first_param; i < b->n_params && b->params[i].unit == u; i++) {
            /* the 2-D weights (linear layers, embedding tables, the head, the routed experts') in either dtype: their
             * kernels read both; norms and biases fp32 */
            out->dtype[i] = b->params[i].ndim == 2 ? linear_dtype : TT_F32;
            out->offset[i] = in_unit;
            /* each on a 64-byte boundary, but the routed experts' parameters back to back: the MoE block reads each
             * range of them as one stack (GPT-OSS's biases of 24 floats would leave gaps) */
            const size_t bytes = (size_t)tt_param_numel(&b->params[i]) * tt_dtype_size(out->dtype[i]);
            const int stacked = b->params[i].routed && i + 1 < b->n_params && b->params[i + 1].routed &&
                                b->params[i + 1].unit == u;
            in_unit += stacked ? bytes : (bytes + 63) / 64 * 64;
        }
        out->unit_bytes[u] = in_unit;
        at += in_unit;
    }
    out->bytes = at;
    return 0;
}

void tt_frozen_layout_free(tt_frozen_layout *l)
{
    free(l->dtype);
    free(l->offset);
    free(l->unit_offset);
    free(l->unit_bytes);
    memset(l, 0, sizeof *l);
}

/* A root of n bytes (f32 words: the layouts are 64-byte aligned) named after unit k */
static tt_value *root(tt_graph *g, const tt_model *m, int k, tt_role role, size_t bytes)
{
    const int64_t n = (int64_t)(bytes / sizeof(float));
    tt_value *u = tt_value_new(g, role, TT_F32, 1, &n);
    if (u) {
        u->unit = k;
        snprintf(u->name, sizeof u->name, "%s%s", m->units[k].name, role == TT_ROLE_FROZEN ? "" : ".lora");
    }
    return u;
}

tt_err tt_lora_bind(tt_graph *g, const tt_model *base, const tt_frozen_layout *fl, const tt_lora *l,
                    tt_value **base_vals, tt_value **base_units, tt_value **adapter_vals, tt_value **adapter_units)
{
    if (g->n_units) return tt_errorf("lora: the graph already has units");
    const tt_model *a = l->adapters;
    for (int k = 0; k < base->n_units; k++) {
        if (tt_graph_add_unit(g, base->units[k].name, base->units[k].block) != k) return -1;
        tt_value *fu = fl->unit_bytes[k] ? root(g, base, k, TT_ROLE_FROZEN, fl->unit_bytes[k]) : NULL;
        tt_value *au = a->units[k].numel ? root(g, a, k, TT_ROLE_PARAM, (size_t)a->units[k].numel * sizeof(float)) : NULL;
        if (base_units) base_units[k] = fu;
        if (adapter_units) adapter_units[k] = au;
        for (int i = base->units[k].first_param; i < base->n_params && base->params[i].unit == k; i++) {
            const tt_param *p = &base->params[i];
            if (!(base_vals[i] = tt_value_view(g, fu, fl->offset[i], fl->dtype[i], p->ndim, p->shape))) return -1;
            snprintf(base_vals[i]->name, sizeof base_vals[i]->name, "%s", p->name);
        }
        for (int i = a->units[k].first_param; i < a->n_params && a->params[i].unit == k; i++) {
            const tt_param *p = &a->params[i];
            const size_t off = (size_t)(p->offset - a->units[k].offset) * sizeof(float);
            if (!(adapter_vals[i] = tt_value_view(g, au, off, TT_F32, p->ndim, p->shape))) return -1;
            snprintf(adapter_vals[i]->name, sizeof adapter_vals[i]->name, "%s", p->name);
        }
    }
    return g->failed ? -1 : 0;
}

double tt_lora_flops_per_token(double fpt, int64_t matmul_params, int64_t adapter_params)
{
    return fpt - 2.0 * (double)matmul_params + 6.0 * (double)adapter_params;
}

void tt_lora_merge(float *W, const float *A, const float *B, int64_t out, int64_t in, int r, double scale)
{
    /* as PEFT in fp32: delta = (B A) scale, the product's sums in fp32 (fused multiply-adds in k's order, as a
     * GEMM's), then W + delta: a bf16 base merged this way and rounded is PEFT's bf16 merge bit for bit */
    const float s = (float)scale;
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            float d = 0;
            for (int k = 0; k < r; k++) d = fmaf(B[o * r + k], A[(int64_t)k * in + i], d);
            const float delta = d * s; /* rounded apart from the sum below (no contraction into one fma) */
            W[o * in + i] += delta;
        }
}

/* peft_adapter.c — PEFT LoRA adapter folders in and out (see peft_adapter.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "hf/peft.h"
#include "hf/peft_adapter.h"

tt_err tt_peft_adapter_spec(const char *dir, tt_lora_spec *spec)
{
    tt_peft_config pc;
    if (tt_peft_config_read(dir, &pc)) return -1;
    memset(spec, 0, sizeof *spec);
    spec->rank = pc.r, spec->alpha = pc.alpha, spec->dropout = pc.dropout, spec->use_rslora = pc.use_rslora;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    tt_safetensors *st = tt_st_open(path);
    if (!st) return -1;
    tt_err rc = 0;
    for (int i = 0; i < tt_st_count(st) && !rc; i++) {
        char module[256];
        int b;
        if ((rc = tt_peft_tensor_parse(tt_st_get(st, i)->name, module, sizeof module, &b))) {
            rc = tt_error_prefix("%s: ", path);
            break;
        }
        const char *leaf = tt_lora_module_leaf(module);
        int seen = 0;
        for (int t = 0; t < spec->n_targets && !seen; t++) seen = !strcmp(spec->targets[t], leaf);
        if (seen) continue;
        if (spec->n_targets == TT_LORA_MAX_TARGETS || strlen(leaf) >= sizeof spec->targets[0])
            rc = tt_errorf("%s: more than %d kinds of module, or a module name of %zu characters ('%s')", path,
                           TT_LORA_MAX_TARGETS, strlen(leaf), leaf);
        else memcpy(spec->targets[spec->n_targets++], leaf, strlen(leaf) + 1);
    }
    if (!rc && !spec->n_targets) rc = tt_errorf("%s: no LoRA tensors", path);
    tt_st_close(st);
    return rc;
}

/* tensor t as fp32 into dst, its shape (rows, cols) checked */
static tt_err read_f32(const tt_st_tensor *t, const char *path, int64_t rows, int64_t cols, float *dst)
{
    if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
        return tt_errorf("%s: tensor '%s' has shape (%lld, %lld), the model's adapter (%lld, %lld)", path, t->name,
                         (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 1), (long long)rows,
                         (long long)cols);
    const int kind = !strcmp(t->dtype, "F32") ? 0 : !strcmp(t->dtype, "BF16") ? 1 : !strcmp(t->dtype, "F16") ? 2 : -1;
    if (kind < 0) return tt_errorf("%s: tensor '%s' has dtype %s (F32, BF16 or F16 expected)", path, t->name, t->dtype);
    const unsigned char *src = t->data;
    for (int64_t k = 0; k < rows * cols; k++) {
        uint16_t h;
        if (kind == 0) memcpy(&dst[k], src + 4 * k, 4);
        else {
            memcpy(&h, src + 2 * k, 2);
            dst[k] = kind == 1 ? tt_bf16_to_f32(h) : tt_f16_to_f32(h);
        }
    }
    return 0;
}

tt_err tt_peft_adapter_load(const char *dir, const tt_lora *l, const tt_param_store *dst)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    tt_safetensors *st = tt_st_open(path);
    if (!st) return -1;
    const tt_model *a = l->adapters;
    int64_t most = 1;
    for (int i = 0; i < a->n_params; i++)
        if (tt_param_numel(&a->params[i]) > most) most = tt_param_numel(&a->params[i]);
    float *buf = malloc((size_t)most * sizeof *buf);
    tt_err rc = buf ? 0 : tt_errorf("out of memory reading %s", path);
    int used = 0;
    for (int t = 0; t < l->n_targets && !rc; t++)
        for (int half = 0; half < 2 && !rc; half++) {
            char name[300];
            const int p = half ? l->targets[t].b : l->targets[t].a;
            if ((rc = tt_peft_tensor_name(l->targets[t].module, half, name, sizeof name))) break;
            const tt_st_tensor *x = tt_st_find(st, name);
            if (!x) {
                rc = tt_errorf("%s: tensor '%s' is missing (the adapter does not cover the model's %s)", path, name,
                               l->targets[t].module);
                break;
            }
            used++;
            if (!(rc = read_f32(x, path, a->params[p].shape[0], a->params[p].shape[1], buf)))
                rc = dst->write(dst->ctx, a, p, buf);
        }
    for (int i = 0; i < tt_st_count(st) && !rc && used != tt_st_count(st); i++) { /* name what is left over */
        char module[256];
        int b;
        tt_peft_tensor_parse(tt_st_get(st, i)->name, module, sizeof module, &b);
        int known = 0;
        for (int t = 0; t < l->n_targets && !known; t++) known = !strcmp(l->targets[t].module, module);
        if (!known)
            rc = tt_errorf("%s: tensor '%s' adapts '%s', which is not one of the model's linear layers here", path,
                           tt_st_get(st, i)->name, module);
    }
    if (!rc && used != tt_st_count(st)) rc = tt_errorf("%s: %d tensors, of which %d are the model's adapters", path,
                                                        tt_st_count(st), used);
    free(buf);
    tt_st_close(st);
    return rc;
}

typedef struct {
    const tt_param_store *src;
    const tt_model *a;
    int param;
} fetch_ctx;

static tt_err fetch(void *ctx, void *dst, size_t bytes)
{
    const fetch_ctx *f = ctx;
    (void)bytes;
    return f->src->read(f->src->ctx, f->a, f->param, dst);
}

tt_err tt_peft_adapter_save(const char *dir, const tt_model *base, const tt_lora *l, const tt_lora_spec *spec,
                            const char *base_model, const tt_param_store *src)
{
    const int n = 2 * l->n_targets;
    tt_st_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    fetch_ctx *fc = calloc((size_t)n + 1, sizeof *fc);
    char(*names)[300] = calloc((size_t)n + 1, sizeof *names);
    tt_err rc = ts && fc && names ? tt_mkdir_p(dir) : tt_errorf("out of memory writing the adapter");
    for (int t = 0; t < l->n_targets && !rc; t++)
        for (int half = 0; half < 2 && !rc; half++) {
            const int k = 2 * t + half, p = half ? l->targets[t].b : l->targets[t].a;
            const tt_param *q = &l->adapters->params[p];
            rc = tt_peft_tensor_name(l->targets[t].module, half, names[k], sizeof names[k]);
            fc[k] = (fetch_ctx){src, l->adapters, p};
            ts[k] = (tt_st_tensor){.name = names[k], .dtype = "F32", .ndim = 2, .shape = {q->shape[0], q->shape[1]},
                                   .nbytes = (size_t)tt_param_numel(q) * sizeof(float), .fetch = fetch, .fetch_ctx = &fc[k]};
        }
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (!rc) rc = tt_st_write(path, n, ts, NULL, NULL, 0);
    tt_peft_config pc;
    memset(&pc, 0, sizeof pc);
    pc.r = l->rank, pc.alpha = spec->alpha, pc.dropout = spec->dropout, pc.use_rslora = spec->use_rslora;
    pc.fan_in_fan_out = base->cfg.arch == TT_ARCH_GPT2; /* Conv1D weights are stored (in, out) */
    snprintf(pc.base_model, sizeof pc.base_model, "%s", base_model ? base_model : "");
    for (int t = 0; t < l->n_targets && !rc; t++) { /* the modules' last names, once each */
        const char *leaf = tt_lora_module_leaf(l->targets[t].module);
        int seen = 0;
        for (int k = 0; k < pc.n_targets && !seen; k++) seen = !strcmp(pc.targets[k], leaf);
        if (seen) continue;
        if (pc.n_targets == TT_PEFT_MAX_TARGETS || strlen(leaf) >= sizeof pc.targets[0])
            rc = tt_errorf("more than %d kinds of adapted module, or a name of %zu characters", TT_PEFT_MAX_TARGETS,
                           strlen(leaf));
        else memcpy(pc.targets[pc.n_targets++], leaf, strlen(leaf) + 1);
    }
    if (!rc) rc = tt_peft_config_write(dir, &pc);
    free(ts);
    free(fc);
    free(names);
    return rc ? tt_error_prefix("writing the adapter to %s: ", dir) : 0;
}

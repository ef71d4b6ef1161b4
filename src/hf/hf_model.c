/* hf_model.c — Hugging Face folders in and out: tensors are matched to titan
 * parameters through the architecture's name map (tt_model_hf_slot), with
 * GPT-2's Conv1D transposes and fused q/k/v split or re-fused, every dtype
 * converted to the fp32 master copy on the way in, and fp32 or bf16 out. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hf/hf_model.h"
#include "formats/mxfp4.h"
#include "formats/safetensors.h"

/* ---- which file holds a tensor (for error messages) ---------------------- */
typedef struct {
    const char *dir;
    cJSON *weight_map; /* from model.safetensors.index.json; NULL for one file */
    cJSON *index;
} hf_files;

static void files_open(hf_files *f, const char *dir)
{
    char path[4200];
    memset(f, 0, sizeof *f);
    f->dir = dir;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, R_OK) != 0) return;
    size_t len;
    char *text = tt_read_file(path, 256u << 20, &len); /* already read once by tt_st_open_dir */
    if (!text) return;
    f->index = cJSON_ParseWithLength(text, len);
    free(text);
    f->weight_map = f->index ? cJSON_GetObjectItemCaseSensitive(f->index, "weight_map") : NULL;
}

static const char *file_of(const hf_files *f, const char *tensor, char *buf, size_t cap)
{
    const cJSON *e = tensor && f->weight_map ? cJSON_GetObjectItemCaseSensitive(f->weight_map, tensor) : NULL;
    if (cJSON_IsString(e)) snprintf(buf, cap, "%s/%s", f->dir, e->valuestring);
    else snprintf(buf, cap, "%s/%s", f->dir, f->weight_map ? "model.safetensors.index.json" : "model.safetensors");
    return buf;
}

/* ---- layouts ----------------------------------------------------------------
 * The HF tensor of a slot, seen as (rows, cols): titan (r, c) sits at
 * (r, part*pc + c), or at (c, part*pr + r) when transposed. */
static tt_err hf_shape(const tt_param *p, const tt_hf_slot *s, int *nd, int64_t sh[3])
{
    if (s->stacked) { /* the tensor's own shape; the parameter is one of its n_parts equal blocks */
        *nd = s->hf_ndim;
        memcpy(sh, s->hf_shape, sizeof s->hf_shape);
        if (tt_numel(*nd, sh) != tt_param_numel(p) * s->n_parts)
            return tt_errorf("%s: %d parameters of its size do not fill the Hugging Face tensor", p->name, s->n_parts);
        return 0;
    }
    if (s->hf_rows > 0) { /* a block of rows of a taller tensor */
        if (s->row0 < 0 || s->row0 + p->shape[0] > s->hf_rows || p->ndim > 2)
            return tt_errorf("%s: rows [%lld, %lld) outside the Hugging Face tensor's %lld", p->name,
                             (long long)s->row0, (long long)(s->row0 + p->shape[0]), (long long)s->hf_rows);
        *nd = p->ndim;
        sh[0] = s->hf_rows;
        if (p->ndim == 2) sh[1] = p->shape[1];
        return 0;
    }
    if (p->ndim == 1) {
        *nd = 1;
        sh[0] = p->shape[0] * s->n_parts;
        return 0;
    }
    if (p->ndim != 2) return tt_errorf("%s: %d-D parameters have no Hugging Face layout", p->name, p->ndim);
    *nd = 2;
    sh[0] = s->transpose ? p->shape[1] : p->shape[0];
    sh[1] = (s->transpose ? p->shape[0] : p->shape[1]) * s->n_parts;
    return 0;
}

/* Offset in the HF tensor of titan element (r, c). */
static inline size_t hf_index(const tt_param *p, const tt_hf_slot *s, int64_t hf_cols, int64_t r, int64_t c)
{
    if (s->stacked) { /* block part / ilv, values interleaved ilv at a time; its (c, r) when transposed */
        const int64_t ilv = s->ilv > 1 ? s->ilv : 1, n = tt_param_numel(p) * ilv, C = p->shape[p->ndim - 1];
        const int64_t R = p->ndim == 2 ? p->shape[0] : 1, at = p->ndim == 2 && s->transpose ? c * R + r : r * C + c;
        return (size_t)(s->part / ilv * n + at * ilv + s->part % ilv);
    }
    if (s->hf_rows > 0) return (size_t)(p->ndim == 1 ? s->row0 + c : (s->row0 + r) * p->shape[1] + c);
    if (p->ndim == 1) return (size_t)(s->part * p->shape[0] + c);
    if (s->transpose) return (size_t)(c * hf_cols + s->part * p->shape[0] + r);
    return (size_t)(r * hf_cols + s->part * p->shape[1] + c);
}

static void fmt_shape(char *buf, size_t cap, int nd, const int64_t *sh)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && at < cap; i++) at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)sh[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* Copy one HF tensor (F32, BF16 or F16; data maybe unaligned) into dst, in
 * the parameter's own layout. */
static tt_err load_param(const tt_param *p, const tt_hf_slot *s, const tt_st_tensor *t, const char *file, float *dst)
{
    int nd = 0;
    int64_t sh[3] = {0, 0, 0};
    char want[64], got[64];
    if (hf_shape(p, s, &nd, sh)) return -1;
    fmt_shape(want, sizeof want, nd, sh);
    fmt_shape(got, sizeof got, t->ndim, t->shape);
    int same = t->ndim == nd;
    for (int d = 0; d < nd && same; d++) same = t->shape[d] == sh[d];
    if (!same)
        return tt_errorf("%s: tensor '%s' has shape %s, but the config gives %s (titan parameter '%s')", file, t->name,
                         got, want, p->name);
    int kind = strcmp(t->dtype, "F32") == 0 ? 0 : strcmp(t->dtype, "BF16") == 0 ? 1 : strcmp(t->dtype, "F16") == 0 ? 2 : -1;
    if (kind < 0)
        return tt_errorf("%s: tensor '%s' has dtype %s; only F32, BF16 and F16 weights can be loaded", file, t->name,
                         t->dtype);
    int64_t rows = p->ndim == 1 ? 1 : p->shape[0], cols = p->shape[p->ndim - 1];
    int64_t hf_cols = nd == 2 ? sh[1] : sh[0];
    const unsigned char *src = t->data;
    #pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            size_t k = hf_index(p, s, hf_cols, r, c);
            float v;
            uint16_t h;
            if (kind == 0) memcpy(&v, src + 4 * k, 4);
            else {
                memcpy(&h, src + 2 * k, 2);
                v = kind == 1 ? tt_bf16_to_f32(h) : tt_f16_to_f32(h);
            }
            dst[r * cols + c] = v;
        }
    return 0;
}

/* Effective RoPE scaling equality (zero YaRN betas mean transformers' 32 and 1). */
static int same_rope(const tt_rope_params *p, const tt_rope_ext *px, const tt_rope_params *q, const tt_rope_ext *qx)
{
    if (p->theta != q->theta || !p->llama3 != !q->llama3 || !px->linear != !qx->linear || !px->yarn != !qx->yarn)
        return 0;
    if ((p->llama3 || px->linear || px->yarn) && p->factor != q->factor) return 0;
    if (p->llama3 && (p->low_freq_factor != q->low_freq_factor || p->high_freq_factor != q->high_freq_factor))
        return 0;
    if ((p->llama3 || px->yarn) && p->original_max_pos != q->original_max_pos) return 0;
    if (px->yarn && ((px->beta_fast ? px->beta_fast : 32) != (qx->beta_fast ? qx->beta_fast : 32) ||
                     (px->beta_slow ? px->beta_slow : 1) != (qx->beta_slow ? qx->beta_slow : 1) ||
                     !px->yarn_no_truncate != !qx->yarn_no_truncate))
        return 0;
    return tt_rope_attention_scale(p, px) == tt_rope_attention_scale(q, qx);
}

/* The folder's config.json must describe the model's math: its tensors alone
 * cannot show a different rope_theta, norm epsilon, window or tied head. A
 * folder without config.json is taken as weights only. */
static tt_err check_config(const tt_model *m, const char *dir)
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path) return tt_errorf("%s: path too long", dir);
    if (access(path, F_OK) != 0) return 0;
    tt_hf_config h;
    if (tt_hf_config_read(dir, &h)) return -1;
    const tt_model_cfg *a = &h.model, *b = &m->cfg;
    const tt_model_ext *ax = &h.ext, *bx = &m->ext;
    int gpt2 = b->arch == TT_ARCH_GPT2;
    if (a->arch != b->arch)
        return tt_errorf("%s: describes a %s, but the model is a %s", path, tt_hf_family_architecture(h.family),
                         tt_arch_name(b->arch));
    const struct { const char *key; int want, have; } ints[] = {
        {gpt2 ? "n_embd" : "hidden_size", a->dim, b->dim},
        {gpt2 ? "n_layer" : "num_hidden_layers", a->n_layers, b->n_layers},
        {gpt2 ? "n_head" : "num_attention_heads", a->n_heads, b->n_heads},
        {"num_key_value_heads", a->n_kv_heads, b->n_kv_heads},
        {"head_dim", a->head_dim, b->head_dim},
        {gpt2 ? "n_inner" : "intermediate_size", a->ffn_dim, b->ffn_dim},
        {"vocab_size", a->vocab_size, b->vocab_size},
        {"n_positions", gpt2 ? a->max_seq_len : 0, gpt2 ? b->max_seq_len : 0}, /* only GPT-2 learns positions */
        {"tie_word_embeddings", a->tie_embeddings, b->tie_embeddings},
        {"q/k/v projection biases", a->qkv_bias, b->qkv_bias},
        {"o_proj bias (attention_bias)", ax->o_bias, bx->o_bias},
        {"mlp_bias", ax->mlp_bias, bx->mlp_bias},
        {"q_norm/k_norm", a->qk_norm, b->qk_norm},
        {"q_norm/k_norm over all heads", ax->qk_norm_full, bx->qk_norm_full},
        {"num_experts", a->moe.n_experts, b->moe.n_experts},
        {"num_experts_per_tok", a->moe.top_k, b->moe.top_k},
        {"the experts' intermediate size", a->moe.ffn_dim, b->moe.ffn_dim},
        {"norm_topk_prob", a->moe.route_norm, b->moe.route_norm},
        {"shared_expert_intermediate_size", a->moe.n_shared ? a->moe.shared_ffn : 0, b->moe.n_shared ? b->moe.shared_ffn : 0},
        {"decoder_sparse_step", a->moe.sparse_step, b->moe.sparse_step},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].want != ints[i].have)
            return tt_errorf("%s: %s is %d, but the model has %d", path, ints[i].key, ints[i].want, ints[i].have);
    for (int l = 0; l < a->n_layers && l < b->n_layers; l++)
        if (tt_model_layer_is_moe(a, l) != tt_model_layer_is_moe(b, l))
            return tt_errorf("%s: layer %d is %s, but the model's is %s", path, l,
                             tt_model_layer_is_moe(a, l) ? "Mixture-of-Experts" : "dense",
                             tt_model_layer_is_moe(b, l) ? "Mixture-of-Experts" : "dense");
    if (a->norm_eps != b->norm_eps)
        return tt_errorf("%s: %s is %g, but the model has %g", path, gpt2 ? "layer_norm_epsilon" : "rms_norm_eps",
                         a->norm_eps, b->norm_eps);
    if (!gpt2 && !same_rope(&a->rope, &ax->rope, &b->rope, &bx->rope))
        return tt_errorf("%s: rope_theta / rope_scaling differ from the model's RoPE (theta %g vs %g)", path,
                         a->rope.theta, b->rope.theta);
    for (int l = 0; l < a->n_layers; l++)
        if (tt_model_layer_window(a, ax, l) != tt_model_layer_window(b, bx, l))
            return tt_errorf("%s: layer %d has sliding window %d, but the model's has %d", path, l,
                             tt_model_layer_window(a, ax, l), tt_model_layer_window(b, bx, l));
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The largest parameter: the staging buffer of one at a time. */
static size_t max_param_bytes(const tt_model *m)
{
    int64_t mx = 1;
    for (int i = 0; i < m->n_params; i++)
        if (tt_param_numel(&m->params[i]) > mx) mx = tt_param_numel(&m->params[i]);
    return (size_t)mx * sizeof(float);
}

/* A Gemma3ForConditionalGeneration checkpoint (ext.hf_vlm) keeps its language model's tensors of canonical names
 * model.X and lm_head.weight as language_model.model.X and language_model.lm_head.weight (the published layout,
 * which save_pretrained writes), or as model.language_model.X and lm_head.weight (transformers 5's own); its vision
 * tower and projector are skipped. */
static const char *const vlm_towers[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                         "model.multi_modal_projector."};

static int has_prefix(const char *s, const char *pre) { return strncmp(s, pre, strlen(pre)) == 0; }

/* Where canonical name canon is in the checkpoint (saved: the published layout) */
static const char *vlm_name(int saved, const char *canon, char *buf, size_t cap)
{
    if (saved) snprintf(buf, cap, "language_model.%s", canon);
    else if (has_prefix(canon, "model.")) snprintf(buf, cap, "model.language_model.%s", canon + 6);
    else snprintf(buf, cap, "%s", canon);
    return buf;
}

/* A checkpoint tensor's canonical name; 1 when it is the vision tower's or projector's (skipped), -1 when it is
 * neither the language model's nor theirs */
static int vlm_canon(int saved, const char *name, char *buf, size_t cap)
{
    for (size_t i = 0; i < sizeof vlm_towers / sizeof vlm_towers[0]; i++)
        if (has_prefix(name, vlm_towers[i])) return 1;
    if (saved ? !has_prefix(name, "language_model.") : has_prefix(name, "language_model."))
        return -1;
    if (saved) snprintf(buf, cap, "%s", name + strlen("language_model."));
    else if (has_prefix(name, "model.language_model.")) snprintf(buf, cap, "model.%s", name + strlen("model.language_model."));
    else if (!strcmp(name, "lm_head.weight")) snprintf(buf, cap, "%s", name);
    else return -1;
    return 0;
}

/* An MXFP4 checkpoint's expert tensor `name` (GPT-OSS): none by that name, but name_blocks and name_scales. The last
 * one read is kept dequantized (bf16, where each value is exact) for the parameters that follow from it. */
typedef struct {
    char name[600];
    tt_st_tensor t; /* the dequantized tensor, its data buf */
    uint16_t *buf;
    int n;          /* the tensors dequantized */
} mx_cache;

/* *out: name's dequantized tensor, or NULL when the pair is absent; -1 + error when it does not dequantize */
static tt_err mxfp4_tensor(mx_cache *c, const tt_safetensors *st, const hf_files *fl, const char *name,
                           const tt_st_tensor **out)
{
    *out = NULL;
    if (!strcmp(c->name, name)) {
        *out = &c->t;
        return 0;
    }
    char bn[620], sn[620], file[4400];
    snprintf(bn, sizeof bn, "%s_blocks", name);
    snprintf(sn, sizeof sn, "%s_scales", name);
    const tt_st_tensor *b = tt_st_find(st, bn), *s = tt_st_find(st, sn);
    if (!b || !s) return 0;
    int64_t lead, R, G;
    tt_st_tensor t = {.name = c->name, .dtype = "BF16"};
    file_of(fl, bn, file, sizeof file);
    if (tt_mxfp4_shape(file, b, s, &lead, &R, &G, &t.ndim, t.shape)) return -1;
    if ((uint64_t)lead * (uint64_t)R * (uint64_t)G > ((uint64_t)1 << 40) / 64)
        return tt_errorf("%s: MXFP4 tensor '%s' is too large", file, bn);
    t.nbytes = (size_t)(lead * R * G * 32) * sizeof(uint16_t);
    tt_free(c->buf);
    c->name[0] = 0;
    if (!(c->buf = tt_alloc(t.nbytes))) return tt_errorf("%s: out of memory dequantizing '%s'", file, bn);
    if (tt_mxfp4_dequant(file, b, s, c->buf, TT_BF16)) return -1;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->n++;
    t.data = c->buf;
    c->t = t;
    *out = &c->t;
    return 0;
}

/* Whether checkpoint tensor `key` is an MXFP4 half (_blocks, _scales) of a tensor the model used */
static int mxfp4_part_used(const char *key, const char **used, int n_used)
{
    const size_t n = strlen(key);
    if (n < 8 || (strcmp(key + n - 7, "_blocks") && strcmp(key + n - 7, "_scales"))) return 0;
    char base[600];
    snprintf(base, sizeof base, "%.*s", (int)(n - 7), key);
    const char *b = base;
    return bsearch(&b, used, (size_t)n_used, sizeof *used, cmp_str) != NULL;
}

tt_err tt_hf_load_weights(const tt_model *m, const char *dir, const tt_param_store *dst)
{
    if (check_config(m, dir)) return -1;
    tt_safetensors *st = tt_st_open_dir(dir);
    if (!st) return -1;
    hf_files fl;
    files_open(&fl, dir);
    const char *pre = tt_model_hf_optional_prefix(m);
    size_t plen = pre ? strlen(pre) : 0;
    int prefixed = 1; /* whether this checkpoint's names carry the optional prefix */
    if (pre) {
        prefixed = 0;
        for (int k = 0; k < tt_st_count(st) && !prefixed; k++) prefixed = strncmp(tt_st_get(st, k)->name, pre, plen) == 0;
    }
    /* a Gemma 3 vision-language checkpoint: which layout its language model's names follow */
    int vlm_saved = 0, n_tower = 0;
    for (int k = 0; m->ext.hf_vlm && k < tt_st_count(st) && !vlm_saved; k++)
        vlm_saved = has_prefix(tt_st_get(st, k)->name, "language_model.");
    char file[4400], vname[600];
    tt_err rc = 0;
    tt_hf_slot *slots = calloc((size_t)m->n_params, sizeof *slots);
    const char **used = calloc((size_t)m->n_params, sizeof *used);
    float *stage = tt_alloc(max_param_bytes(m));
    int n_used = 0, n_mtp = 0;
    mx_cache mx = {0};
    if (!slots || !used || !stage) rc = tt_errorf("out of memory");
    for (int i = 0; i < m->n_params && !rc; i++) {
        const tt_param *p = &m->params[i];
        if (tt_param_numel(p) == 0) continue; /* an optional weight this config does not have */
        if (tt_model_hf_slot(m, i, &slots[i])) {
            rc = -1;
            break;
        }
        const char *name = slots[i].name;
        if (!prefixed && strncmp(name, pre, plen) == 0) name += plen;
        if (m->ext.hf_vlm) name = vlm_name(vlm_saved, name, vname, sizeof vname);
        const tt_st_tensor *t = tt_st_find(st, name);
        if (!t && m->ext.hf_mxfp4 && (rc = mxfp4_tensor(&mx, st, &fl, name, &t))) break;
        if (!t) rc = tt_errorf("%s: tensor '%s' is missing (titan parameter '%s')", file_of(&fl, NULL, file, sizeof file),
                               name, p->name);
        else if (!(rc = load_param(p, &slots[i], t, file_of(&fl, name, file, sizeof file), stage)))
            rc = dst->write(dst->ctx, m, i, stage);
        used[n_used++] = slots[i].name;
    }
    if (!rc) qsort(used, (size_t)n_used, sizeof *used, cmp_str);
    for (int k = 0; k < tt_st_count(st) && !rc; k++) {
        const char *name = tt_st_get(st, k)->name, *key = name;
        char canon[512];
        if (!prefixed) {
            snprintf(canon, sizeof canon, "%s%s", pre, name);
            key = canon;
        }
        if (m->ext.hf_vlm) {
            const int v = vlm_canon(vlm_saved, name, canon, sizeof canon);
            n_tower += v == 1;
            if (v == 1) continue;
            if (v < 0) {
                rc = tt_errorf("%s: unexpected tensor '%s' (neither Gemma 3's language model, under %s, nor its vision "
                               "tower or projector)", file_of(&fl, name, file, sizeof file), name,
                               vlm_saved ? "language_model." : "model.language_model.");
                break;
            }
            key = canon;
        }
        int layer = -1;
        if (tt_model_hf_ignorable(m, key)) { /* multi-token-prediction layers (after the last) are counted */
            n_mtp += sscanf(key, "model.layers.%d.", &layer) == 1 && layer >= m->cfg.n_layers;
            continue;
        }
        if (bsearch(&key, used, (size_t)n_used, sizeof *used, cmp_str)) continue;
        if (m->ext.hf_mxfp4 && mxfp4_part_used(key, used, n_used)) continue;
        rc = tt_errorf("%s: unexpected tensor '%s' (a %s model with this config has no such weight)",
                       file_of(&fl, name, file, sizeof file), name, tt_arch_name(m->cfg.arch));
    }
    if (!rc && m->ext.hf_vlm)
        tt_warn("%s: a Gemma3ForConditionalGeneration folder: its language model loaded, the %d tensors of its vision "
               "tower and projector skipped (titan trains and exports the text model, as Gemma3ForCausalLM)", dir, n_tower);
    if (!rc && mx.n)
        tt_warn("%s: its %d MXFP4 expert tensors dequantized to bf16 (titan trains them so; an export writes them "
                "unquantized, without quantization_config)", dir, mx.n);
    if (!rc && n_mtp)
        tt_warn("%s: skipped %d tensors of %d multi-token-prediction layer(s): titan trains the main layers only", dir,
                n_mtp, m->ext.n_mtp_layers);
    free(slots);
    free(used);
    tt_free(stage);
    tt_free(mx.buf);
    cJSON_Delete(fl.index);
    tt_st_close(st);
    return rc;
}

void tt_hf_detect_layout(const char *dir, const tt_model_cfg *c, tt_model_ext *x)
{
    int l = 0;
    while (l < c->n_layers && !tt_model_layer_is_moe(c, l)) l++;
    if (l == c->n_layers || x->hf_gpt_oss) return; /* GPT-OSS packs its experts always, in its own layout */
    tt_safetensors *st = tt_st_open_dir(dir);
    if (!st) return; /* no weights to look at: the loader says so when it needs them */
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj", l);
    x->hf_packed_experts = tt_st_find(st, name) != NULL;
    tt_st_close(st);
}

tt_dtype tt_hf_weights_dtype(const char *dir, const char *torch_dtype)
{
    static const struct { const char *torch, *st; tt_dtype t; } known[] = {
        {"float32", "F32", TT_F32}, {"bfloat16", "BF16", TT_BF16}, {"float16", "F16", TT_F16}};
    for (size_t k = 0; torch_dtype && k < sizeof known / sizeof known[0]; k++)
        if (!strcmp(torch_dtype, known[k].torch)) return known[k].t;
    tt_safetensors *st = tt_st_open_dir(dir);
    if (!st) return TT_F32; /* no weights to look at */
    tt_dtype t = TT_F32;
    int found = 0;
    for (int i = 0; i < tt_st_count(st) && !found; i++)
        for (size_t k = 0; k < sizeof known / sizeof known[0] && !found; k++)
            if ((found = !strcmp(tt_st_get(st, i)->dtype, known[k].st))) t = known[k].t;
    tt_st_close(st);
    return t;
}

tt_model *tt_hf_load(const char *dir, tt_hf_config *cfg_out, float **weights)
{
    tt_hf_config c;
    if (tt_hf_config_read(dir, &c)) return NULL;
    tt_hf_detect_layout(dir, &c.model, &c.ext);
    tt_model *m = tt_model_new_ext(&c.model, &c.ext);
    if (!m) {
        tt_error_prefix("%s/config.json: ", dir);
        return NULL;
    }
    float *w = weights ? tt_alloc(m->numel * sizeof(float) + 1) : NULL;
    tt_param_store host = tt_model_host_store(w);
    if (weights && (!w || tt_hf_load_weights(m, dir, &host))) {
        tt_free(w);
        tt_model_free(m);
        return NULL;
    }
    if (weights) *weights = w;
    if (cfg_out) *cfg_out = c;
    return m;
}

/* ---- export ------------------------------------------------------------- */
tt_hf_export_opts tt_hf_export_defaults(void)
{
    tt_hf_export_opts o;
    memset(&o, 0, sizeof o);
    o.family = TT_HF_AUTO;
    o.bos_token_id = -1;
    o.dtype = TT_F32;
    return o;
}

tt_hf_export_opts tt_hf_export_opts_of(const tt_hf_config *src)
{
    tt_hf_export_opts o = tt_hf_export_defaults();
    o.family = src->family;
    o.bos_token_id = src->bos_token_id;
    o.has_pad = src->has_pad, o.pad_token_id = src->pad_token_id;
    o.n_eos = src->n_eos;
    memcpy(o.eos_token_ids, src->eos_token_ids, sizeof o.eos_token_ids);
    return o;
}

static tt_err write_text(const char *dir, const char *name, const char *text)
{
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return tt_errorf("%s: path too long", dir);
    return tt_write_file_atomic(path, text, strlen(text));
}

static tt_err write_generation_config(const char *dir, const tt_hf_config *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddTrueToObject(j, "_from_model_config");
    if (c->bos_token_id >= 0) cJSON_AddNumberToObject(j, "bos_token_id", c->bos_token_id);
    if (c->n_eos == 1) cJSON_AddNumberToObject(j, "eos_token_id", c->eos_token_ids[0]);
    else if (c->n_eos > 1) cJSON_AddItemToObject(j, "eos_token_id", cJSON_CreateIntArray(c->eos_token_ids, c->n_eos));
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    tt_err rc = text ? write_text(dir, "generation_config.json", text) : tt_errorf("out of memory");
    free(text);
    return rc;
}

static tt_err copy_file(const char *src, const char *dir, const char *name)
{
    size_t len;
    char *data = tt_read_file(src, 1u << 30, &len), path[4200];
    if (!data) return -1;
    tt_err rc = snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path
                    ? tt_errorf("%s: path too long", dir)
                    : tt_write_file_atomic(path, data, len);
    free(data);
    return rc;
}

/* One HF tensor being assembled: straight from a parameter (fetched from the
 * store as the writer reaches it), or (transposed or fused) into its own
 * buffer. A bf16 export reads the fp32 values (into the shared stage when
 * they come from the store) and rounds them into the writer's buffer. */
typedef struct {
    tt_st_tensor t;
    float *buf;   /* (numel) fp32, in the HF layout; NULL: the parameter itself */
    const tt_param_store *src;
    const tt_model *m;
    int param;
    float *stage; /* bf16 from a parameter: its fp32 values go here first */
} out_tensor;

static tt_err fetch_param(void *ctx, void *dst, size_t bytes)
{
    const out_tensor *ot = ctx;
    (void)bytes;
    return ot->src->read(ot->src->ctx, ot->m, ot->param, dst);
}

static tt_err fetch_bf16(void *ctx, void *dst, size_t bytes)
{
    const out_tensor *ot = ctx;
    const float *v = ot->buf;
    if (!v) {
        if (ot->src->read(ot->src->ctx, ot->m, ot->param, ot->stage)) return -1;
        v = ot->stage;
    }
    uint16_t *h = dst;
    size_t n = bytes / sizeof *h;
    #pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t k = 0; k < n; k++) h[k] = tt_f32_to_bf16(v[k]);
    return 0;
}

tt_err tt_hf_export(const tt_model *m, const char *dir, const tt_hf_export_opts *o, const tt_param_store *src)
{
    tt_hf_export_opts def = tt_hf_export_defaults();
    if (!o) o = &def;
    if (o->n_eos < 0 || o->n_eos > TT_HF_MAX_EOS) return tt_errorf("export: n_eos must be 0..%d", TT_HF_MAX_EOS);
    if (o->dtype != TT_F32 && o->dtype != TT_BF16)
        return tt_errorf("export to %s: weights are written as f32 or bf16, not %s", dir, tt_dtype_name(o->dtype));
    const int bf16 = o->dtype == TT_BF16;
    tt_hf_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.torch_dtype, sizeof c.torch_dtype, "%s", bf16 ? "bfloat16" : "float32");
    c.model = m->cfg;
    c.ext = m->ext;
    c.family = o->family == TT_HF_AUTO ? tt_hf_family_for(&m->cfg, &m->ext) : o->family;
    if (c.family == TT_HF_AUTO || tt_hf_family_check(c.family, &m->cfg, &m->ext))
        return tt_error_prefix("export to %s: ", dir);
    c.bos_token_id = o->bos_token_id;
    c.has_pad = o->has_pad, c.pad_token_id = o->pad_token_id;
    c.n_eos = o->n_eos;
    memcpy(c.eos_token_ids, o->eos_token_ids, sizeof c.eos_token_ids);
    char *config = tt_hf_config_to_json(&c);
    if (!config) return tt_error_prefix("export to %s: ", dir);
    if (m->ext.hf_mxfp4)
        tt_warn("export to %s: the MXFP4 experts of the source are written unquantized (%s), without its "
                "quantization_config", dir, bf16 ? "bf16" : "fp32");
    /* the tensors under the names of the family written (Mixtral's MoE names differ) */
    tt_model named = *m;
    named.ext.hf_mixtral = c.family == TT_HF_MIXTRAL;
    named.ext.hf_phi3 = c.family == TT_HF_PHI3;

    out_tensor *out = calloc((size_t)m->n_params, sizeof *out);
    char (*names)[128] = calloc((size_t)m->n_params, sizeof *names);
    float *stage = tt_alloc(max_param_bytes(m));
    int n_out = 0;
    tt_err rc = out && names && stage ? 0 : tt_errorf("out of memory");
    for (int i = 0; i < m->n_params && !rc; i++) {
        const tt_param *p = &m->params[i];
        if (tt_param_numel(p) == 0) continue;
        tt_hf_slot s;
        if ((rc = tt_model_hf_slot(&named, i, &s))) break;
        int k = 0;
        while (k < n_out && strcmp(names[k], s.name)) k++;
        out_tensor *ot = &out[k];
        int nd = 0;
        int64_t sh[3] = {0, 0, 0};
        if ((rc = hf_shape(p, &s, &nd, sh))) break;
        if (k == n_out) { /* first part of this HF tensor */
            n_out++;
            snprintf(names[k], sizeof names[k], "%s", s.name);
            ot->t.name = names[k];
            snprintf(ot->t.dtype, sizeof ot->t.dtype, "%s", bf16 ? "BF16" : "F32");
            ot->t.ndim = nd;
            memcpy(ot->t.shape, sh, sizeof sh);
            size_t numel = (size_t)tt_numel(nd, sh);
            ot->t.nbytes = numel * (bf16 ? sizeof(uint16_t) : sizeof(float));
            ot->t.fetch = bf16 ? fetch_bf16 : fetch_param;
            ot->t.fetch_ctx = ot;
            if (!s.transpose && s.n_parts == 1) { /* same layout: fetched when written */
                ot->src = src, ot->m = m, ot->param = i, ot->stage = stage;
                continue;
            }
            if (!(ot->buf = tt_alloc(numel * sizeof(float)))) {
                rc = -1;
                break;
            }
            if (!bf16) ot->t.data = ot->buf, ot->t.fetch = NULL; /* written as it is */
        }
        int fits = ot->buf && ot->t.ndim == nd;
        for (int d = 0; d < nd && fits; d++) fits = ot->t.shape[d] == sh[d];
        if (!fits) {
            rc = tt_errorf("export: parameter '%s' does not fit HF tensor '%s'", p->name, s.name);
            break;
        }
        if ((rc = src->read(src->ctx, m, i, stage))) break;
        int64_t rows = p->ndim == 1 ? 1 : p->shape[0], cols = p->shape[p->ndim - 1];
        for (int64_t r = 0; r < rows; r++)
            for (int64_t cc = 0; cc < cols; cc++) ot->buf[hf_index(p, &s, nd == 2 ? sh[1] : sh[0], r, cc)] = stage[r * cols + cc];
    }
    tt_st_tensor *ts = rc ? NULL : calloc((size_t)n_out + 1, sizeof *ts);
    if (!rc && !ts) rc = tt_errorf("out of memory");
    for (int k = 0; k < n_out && !rc; k++) ts[k] = out[k].t;
    if (!rc) rc = tt_st_write_sharded(dir, "model", n_out, ts, o->max_shard_bytes);
    if (!rc && o->tokenizer_json) rc = copy_file(o->tokenizer_json, dir, "tokenizer.json");
    if (!rc && !(o->files && tt_hf_files_find(o->files, "generation_config.json"))) rc = write_generation_config(dir, &c);
    if (!rc && o->files) rc = tt_hf_files_write(dir, o->files);
    if (!rc) rc = write_text(dir, "config.json", config); /* last: a folder with config.json is whole */
    free(ts);
    tt_free(stage);
    for (int k = 0; out && k < n_out; k++) tt_free(out[k].buf);
    free(out);
    free(names);
    free(config);
    return rc;
}

/* llama.c — Llama 2/3 style decoder (also Mistral, Qwen2 with q/k/v bias,
 * Qwen3 with per-head q/k RMSNorm, SmolLM3 with RoPE on some layers only,
 * OLMo 2 with its norms after each branch, Granite 3 with its multipliers):
 * RMSNorm, RoPE, GQA, SwiGLU, an optional sliding window per layer; Mixture-of-Experts MLPs (Mixtral,
 * Qwen-MoE, OLMoE, DeepSeek: models/moe.c) and DeepSeek's Multi-head Latent
 * Attention (models/mla.c) in place of the dense ones; and its Hugging Face
 * tensor names. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/mla.h"
#include "models/model.h"
#include "models/moe.h"

/* Parameter order within a block; the forward reads them by these offsets.
 * BO (o_bias) and B1, B2, B3 (mlp_bias) follow FFN_NORM only when enabled, so
 * configurations without them keep the original names and order. The order
 * is also the storage order: wq, wk, wv (and their biases) and w1, w3 lie
 * back to back, so the fusion pass can run each group as one matmul. */
enum { WQ, WK, WV, WO, BQ, BK, BV, QN, KN, ATTN_NORM, W1, W3, W2, FFN_NORM, PER_BLOCK };

/* One declared parameter of a block: rows, cols (0 = 1-D), init, std, no_decay. */
typedef struct { const char *n; int64_t r, k; tt_init_kind init; double sd; int nd; } slot_decl;

/* Parameters per block and the offsets of the optional extras in a block:
 * after the dense slots (base of them), an MLA block's parameters (mla), then
 * an MoE block's (moe), which keeps the dense MLP's slots with no elements.
 * Blocks differ in size, so each starts at its own index. */
typedef struct {
    int stride, bo, b1, b2, b3;
    int pa, pf;   /* Gemma 3's norms after the attention and after the MLP (-1: absent) */
    int sinks;    /* GPT-OSS's attention sinks (-1: absent) */
    int base;     /* the slots above: dense attention and MLP, norms, extras */
    int mla, moe; /* the first parameter of the MLA and the MoE block (-1: absent) */
} block_layout;

static block_layout layout(const tt_model *m, int l)
{
    block_layout b = {PER_BLOCK, -1, -1, -1, -1, -1, -1, -1, 0, -1, -1};
    if (m->ext.o_bias) b.bo = b.stride++;
    if (m->ext.gemma) b.pa = b.stride++, b.pf = b.stride++;
    if (m->ext.mlp_bias) b.b1 = b.stride++, b.b2 = b.stride++, b.b3 = b.stride++;
    if (m->ext.attn_sinks) b.sinks = b.stride++;
    b.base = b.stride;
    if (m->cfg.mla.kv_lora_rank > 0) b.mla = b.stride, b.stride += tt_mla_slots_of(&m->cfg.mla).n;
    if (tt_model_layer_is_moe(&m->cfg, l)) b.moe = b.stride, b.stride += tt_moe_slots_of(&m->cfg.moe).n;
    return b;
}

/* The index of block l's first parameter (of the final norm for l = n_layers) */
static int block_start(const tt_model *m, int l) { return m->units[l + 1].first_param; }

static tt_err declare(tt_model *m)
{
    const tt_model_cfg *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, V = c->vocab_size, hd = c->head_dim;
    int64_t q = c->n_heads * hd, kv = c->n_kv_heads * hd;
    double std = 0.02, out_std = 0.02 / sqrt(2.0 * c->n_layers);
    /* a norm's weight: 1, or 0 where the norm scales by (1 + w) (Gemma 3) */
    const tt_init_kind norm_init = m->ext.gemma ? TT_INIT_ZEROS : TT_INIT_ONES;
    char name[96];
    int64_t s2[2];
    if (tt_model_declare(m, 0, "tok_embeddings.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0)) return -1;
    m->params[0].embedding_only = !c->tie_embeddings;
    const tt_mla_cfg *mla = &c->mla;
    const tt_attn_dims ad = tt_model_attn_dims(c);
    if (mla->kv_lora_rank > 0) /* MLA: wq (no q compression) gives H heads of qk_nope + qk_rope; no wk, wv */
        q = mla->q_lora_rank > 0 ? 0 : (int64_t)c->n_heads * ad.qk, kv = 0;
    const int64_t o_in = (int64_t)c->n_heads * ad.v;
    for (int l = 0; l < c->n_layers; l++) {
        int u = l + 1;
        block_layout bl = layout(m, l);
        F = bl.moe >= 0 ? 0 : c->ffn_dim; /* an MoE block keeps the dense MLP's slots, empty */
        /* every block declares the same slots; absent optional ones get 0 elements */
        slot_decl p[PER_BLOCK + 7] = {
            [WQ] = {"attention.wq.weight", q, D, TT_INIT_NORMAL, std, 0},
            [WK] = {"attention.wk.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WV] = {"attention.wv.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WO] = {"attention.wo.weight", D, o_in, TT_INIT_NORMAL, out_std, 0},
            [BQ] = {"attention.wq.bias", c->qkv_bias ? q : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BK] = {"attention.wk.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BV] = {"attention.wv.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [QN] = {"attention.q_norm.weight", c->qk_norm ? (m->ext.qk_norm_full ? q : hd) : 0, 0, norm_init, 0, 1},
            [KN] = {"attention.k_norm.weight", c->qk_norm ? (m->ext.qk_norm_full ? kv : hd) : 0, 0, norm_init, 0, 1},
            [ATTN_NORM] = {"attention_norm.weight", D, 0, norm_init, 0, 1},
            [W1] = {"feed_forward.w1.weight", F, D, TT_INIT_NORMAL, std, 0},
            [W2] = {"feed_forward.w2.weight", D, F, TT_INIT_NORMAL, out_std, 0},
            [W3] = {"feed_forward.w3.weight", F, D, TT_INIT_NORMAL, std, 0},
            [FFN_NORM] = {"ffn_norm.weight", D, 0, norm_init, 0, 1},
        };
        if (bl.moe >= 0) p[W2].r = 0; /* (D, 0) would read as a 1-D slot of D */
        if (bl.bo >= 0) p[bl.bo] = (slot_decl){"attention.wo.bias", D, 0, TT_INIT_ZEROS, 0, 1};
        if (bl.pa >= 0) {
            p[bl.pa] = (slot_decl){"attention_post_norm.weight", D, 0, norm_init, 0, 1};
            p[bl.pf] = (slot_decl){"ffn_post_norm.weight", D, 0, norm_init, 0, 1};
        }
        if (bl.sinks >= 0) p[bl.sinks] = (slot_decl){"attention.sinks", c->n_heads, 0, TT_INIT_NORMAL, std, 1};
        if (bl.b1 >= 0) {
            p[bl.b1] = (slot_decl){"feed_forward.w1.bias", F, 0, TT_INIT_ZEROS, 0, 1};
            p[bl.b2] = (slot_decl){"feed_forward.w2.bias", D, 0, TT_INIT_ZEROS, 0, 1};
            p[bl.b3] = (slot_decl){"feed_forward.w3.bias", F, 0, TT_INIT_ZEROS, 0, 1};
        }
        for (int i = 0; i < bl.base; i++) {
            snprintf(name, sizeof name, "layers.%d.%s", l, p[i].n);
            s2[0] = p[i].r;
            s2[1] = p[i].k;
            if (tt_model_declare(m, u, name, p[i].k ? 2 : 1, s2, p[i].init, p[i].sd, p[i].nd)) return -1;
        }
        snprintf(name, sizeof name, "layers.%d.attention", l);
        if (bl.mla >= 0 && tt_mla_declare(m, u, name, std)) return -1;
        snprintf(name, sizeof name, "layers.%d.moe", l);
        if (bl.moe >= 0 && tt_moe_declare(m, u, name, std, out_std)) return -1;
    }
    int fu = c->n_layers + 1;
    if (tt_model_declare(m, fu, "norm.weight", 1, &D, norm_init, 0, 1)) return -1;
    if (!c->tie_embeddings && tt_model_declare(m, fu, "output.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0))
        return -1;
    return 0;
}

/* What a forward shares between its blocks: the RoPE tables (the sliding layers' own under Gemma 3) and the
 * ones that turn a norm's w into Gemma's 1 + w, one a width */
typedef struct {
    tt_value *inv_freq, *inv_freq_local;
    tt_value *ones_dim, *ones_head; /* Gemma 3's: of a norm's width and of a head's */
} fwd_shared;

/* A constant (n) of ones in dt */
static tt_value *ones_const(tt_graph *g, tt_dtype dt, int64_t n)
{
    void *data;
    tt_value *v = tt_graph_const(g, dt, 1, &n, &data);
    for (int64_t i = 0; v && i < n; i++)
        if (dt == TT_BF16) ((uint16_t *)data)[i] = tt_f32_to_bf16(1.0f);
        else ((float *)data)[i] = 1.0f;
    return v;
}

/* A norm's scale: w, or 1 + w (Gemma 3: its norms' weights start at 0; the sum is fp32, as transformers forms it)
 * with the forward's constant of ones of w's width (made with the RoPE tables, before the blocks) */
static tt_value *norm_scale(tt_graph *g, const tt_model *m, fwd_shared *sh, tt_value *w)
{
    if (!m->ext.gemma || !w) return w;
    /* its q/k norms are per head: head_dim wide; the others dim wide */
    return tt_add(g, w, tt_value_numel(w) == m->cfg.head_dim ? sh->ones_head : sh->ones_dim);
}

static tt_value *rms(tt_graph *g, const tt_model *m, fwd_shared *sh, tt_value *x, tt_value *w)
{
    return tt_rmsnorm(g, x, norm_scale(g, m, sh, w), m->cfg.norm_eps);
}

/* Grouped-query attention of one block on h (N, D): (N, H*hd) before the output projection */
static tt_value *gqa_attention(tt_graph *g, const tt_model *m, tt_value *const *b, tt_value *h, const tt_fwd_inputs *in,
                               fwd_shared *sh, double rope_scale, int l)
{
    const int si = layout(m, l).sinks;
    tt_value *sinks = si >= 0 ? b[si] : NULL; /* GPT-OSS */
    const tt_model_cfg *c = &m->cfg;
    const int H = c->n_heads, Hk = c->n_kv_heads, hd = c->head_dim, window = tt_model_layer_window(c, &m->ext, l);
    tt_value *q = tt_linear(g, h, b[WQ], c->qkv_bias ? b[BQ] : NULL); // (N, H*hd)
    tt_value *k = tt_linear(g, h, b[WK], c->qkv_bias ? b[BK] : NULL); // (N, Hk*hd)
    tt_value *v = tt_linear(g, h, b[WV], c->qkv_bias ? b[BV] : NULL); // (N, Hk*hd)
    if (c->qk_norm && q && k) { /* per head (Qwen3), or over all heads at once (OLMoE) */
        q = tt_rmsnorm_groups(g, q, norm_scale(g, m, sh, b[QN]), c->norm_eps, m->ext.qk_norm_full ? H * hd : hd);
        k = tt_rmsnorm_groups(g, k, norm_scale(g, m, sh, b[KN]), c->norm_eps, m->ext.qk_norm_full ? Hk * hd : hd);
    }
    if (!(l < TT_MODEL_MAX_LAYERS && m->ext.no_rope[l])) { /* partial rotary: rot < hd */
        const int rot = tt_model_rope_rot(m);
        /* Gemma 3's sliding layers turn by their own base */
        tt_value *inv_freq = window > 0 && sh->inv_freq_local ? sh->inv_freq_local : sh->inv_freq;
        q = tt_rope_partial(g, q, in->pos, inv_freq, H, hd, rot < hd ? rot : 0, rope_scale);
        k = tt_rope_partial(g, k, in->pos, inv_freq, Hk, hd, rot < hd ? rot : 0, rope_scale);
    }
    /* 0: 1 / sqrt(hd); Granite's multiplier; Gemma 3's query_pre_attn_scalar^-1/2 */
    const double scale = m->ext.gemma ? 1.0 / sqrt(m->ext.query_pre_attn_scalar) : m->ext.attn_mult;
    const double cap = m->ext.attn_softcap; /* Gemma 2 */
    return in->cache_k ? tt_attention_kv_scaled(g, q, k, v, in->cache_k[l], in->cache_v[l], in->start, in->B, in->T, H,
                                                Hk, hd, window, scale, cap, sinks)
                       : tt_attention_scaled(g, q, k, v, in->doc, in->B, in->T, H, Hk, hd, window, scale, cap, sinks);
}

/* The residual stream after a branch: x + d; with a norm after the branch (OLMo 2's, in place of the one before;
 * Gemma 3's, beside it), x + rmsnorm(d); Granite's x + residual_mult d */
static tt_value *residual(tt_graph *g, const tt_model *m, fwd_shared *sh, tt_value *x, tt_value *d, tt_value *post)
{
    if (post) d = rms(g, m, sh, d, post);
    return m->ext.residual_mult ? tt_add_scaled(g, x, d, m->ext.residual_mult) : tt_add(g, x, d);
}

/* A branch's input: rmsnorm(x), or x itself where the norm comes after the branch (OLMo 2) */
static tt_value *branch_input(tt_graph *g, const tt_model *m, fwd_shared *sh, tt_value *x, tt_value *norm)
{
    return m->ext.post_norms ? x : rms(g, m, sh, x, norm);
}

static tt_value *forward(tt_graph *g, const tt_model *m, tt_value *const *w, const tt_fwd_inputs *in, tt_value **head)
{
    const tt_model_cfg *c = &m->cfg;
    double rope_scale = tt_rope_attention_scale(&c->rope, &m->ext.rope); /* YaRN scales cos and sin */
    tt_graph_set_unit(g, 0);
    tt_graph_set_scope(g, "tok_embeddings");
    tt_value *x = tt_embedding(g, in->ids, w[0]); // (B*T, D)
    if (m->ext.embed_mult) x = tt_scale(g, x, m->ext.embed_mult);
    if (m->ext.gemma) x = tt_scale(g, x, (float)sqrt((double)c->dim)); /* hidden_size ** 0.5, as an fp32 tensor */
    /* the positions this graph sees: its tokens, or the KV cache's rows */
    const long positions = in->cache_k ? (long)in->cache_k[0]->shape[1] : (long)in->T;
    fwd_shared sh = {tt_model_rope_table(g, m, positions), NULL, NULL, NULL};
    tt_value *inv_freq = sh.inv_freq;
    if (m->ext.rope_local_theta > 0) /* Gemma 3's sliding layers: plain RoPE of their own base */
        sh.inv_freq_local = tt_rope_table(g, &(tt_rope_params){.theta = m->ext.rope_local_theta}, NULL,
                                          tt_model_rope_rot(m), positions);
    if (m->ext.gemma) { /* the ones of 1 + w: the norms' width and the q/k norms' (a head's) */
        const tt_dtype dt = w[block_start(m, 0) + ATTN_NORM]->dtype; /* the norms' weights' */
        sh.ones_dim = ones_const(g, dt, c->dim);
        sh.ones_head = ones_const(g, dt, c->head_dim);
    }
    for (int l = 0; l < c->n_layers; l++) {
        tt_value *const *b = w + block_start(m, l);
        const block_layout bl = layout(m, l);
        tt_graph_set_unit(g, l + 1);
        tt_graph_set_scope(g, "layers.%d.attention", l);
        /* the norms after each branch: OLMo 2's (the same weights, not used before it) or Gemma 3's own */
        tt_value *post_a = m->ext.post_norms ? b[ATTN_NORM] : bl.pa >= 0 ? b[bl.pa] : NULL;
        tt_value *post_f = m->ext.post_norms ? b[FFN_NORM] : bl.pf >= 0 ? b[bl.pf] : NULL;
        tt_value *h = branch_input(g, m, &sh, x, b[ATTN_NORM]);
        tt_value *a = bl.mla >= 0 ? tt_mla_attention(g, m, b + bl.mla, b[WQ], h, in, inv_freq, rope_scale, l)
                                  : gqa_attention(g, m, b, h, in, &sh, rope_scale, l);
        x = residual(g, m, &sh, x, tt_linear(g, a, b[WO], bl.bo >= 0 ? b[bl.bo] : NULL), post_a);
        h = branch_input(g, m, &sh, x, b[FFN_NORM]);
        if (bl.moe >= 0) {
            tt_graph_set_scope(g, "layers.%d.moe", l);
            x = residual(g, m, &sh, x, tt_moe_layer(g, &c->moe, b + bl.moe, h, in->B, in->T, in->aux_scale), post_f);
            continue;
        }
        tt_graph_set_scope(g, "layers.%d.feed_forward", l);
        tt_value *gate = tt_linear(g, h, b[W1], bl.b1 >= 0 ? b[bl.b1] : NULL);
        tt_value *up = tt_linear(g, h, b[W3], bl.b3 >= 0 ? b[bl.b3] : NULL);
        tt_value *ff = m->ext.gemma ? tt_geglu(g, gate, up) : tt_swiglu(g, gate, up); /* Gemma 3: GeGLU */
        x = residual(g, m, &sh, x, tt_linear(g, ff, b[W2], bl.b2 >= 0 ? b[bl.b2] : NULL), post_f);
    }
    tt_graph_set_unit(g, c->n_layers + 1);
    tt_graph_set_scope(g, "norm");
    tt_value *const *f = w + block_start(m, c->n_layers);
    *head = c->tie_embeddings ? w[0] : f[1];
    tt_graph_set_scope(g, "output");
    tt_value *out = rms(g, m, &sh, x, f[0]);
    return m->ext.logits_div ? tt_scale(g, out, 1.0 / m->ext.logits_div) : out; /* Granite: logits / logits_scaling */
}

/* ---- Hugging Face names (LlamaForCausalLM and its relatives) ------------- */


static tt_err hf_slot(const tt_model *m, int i, tt_hf_slot *s)
{
    const tt_model_cfg *c = &m->cfg;
    int nb = block_start(m, c->n_layers) - 1;
    if (i == 0) {
        snprintf(s->name, sizeof s->name, "model.embed_tokens.weight");
        return 0;
    }
    if (i > nb) {
        snprintf(s->name, sizeof s->name, "%s", i == nb + 1 ? "model.norm.weight" : "lm_head.weight");
        return 0;
    }
    const int l = m->params[i].unit - 1;
    const block_layout bl = layout(m, l);
    const int k = i - block_start(m, l);
    if (bl.moe >= 0 && k >= bl.moe) return tt_moe_hf_slot(m, l, k - bl.moe, s);
    if (bl.mla >= 0 && k >= bl.mla) { /* DeepSeek's names */
        snprintf(s->name, sizeof s->name, "model.layers.%d.self_attn.%s", l, tt_mla_hf_name(&m->cfg.mla, k - bl.mla));
        return 0;
    }
    if (m->ext.hf_phi3 && (k == WQ || k == WK || k == WV || k == W1 || k == W3)) {
        /* Phi-3: q, k, v the rows of one qkv_proj; gate and up those of one gate_up_proj */
        const int64_t q = m->params[i - k + WQ].shape[0], kv = m->params[i - k + WK].shape[0];
        const int64_t f = m->params[i - k + W1].shape[0];
        const int attn = k == WQ || k == WK || k == WV;
        s->part = k == WQ || k == W1 ? 0 : k == WK || k == W3 ? 1 : 2;
        s->n_parts = attn ? 3 : 2;
        s->row0 = attn ? (k == WQ ? 0 : k == WK ? q : q + kv) : (k == W1 ? 0 : f);
        s->hf_rows = attn ? q + 2 * kv : 2 * f;
        snprintf(s->name, sizeof s->name, "model.layers.%d.%s", l, attn ? "self_attn.qkv_proj.weight"
                                                                         : "mlp.gate_up_proj.weight");
        return 0;
    }
    static const char *const base[PER_BLOCK] = {
        [WQ] = "self_attn.q_proj.weight", [WK] = "self_attn.k_proj.weight", [WV] = "self_attn.v_proj.weight",
        [WO] = "self_attn.o_proj.weight", [BQ] = "self_attn.q_proj.bias",   [BK] = "self_attn.k_proj.bias",
        [BV] = "self_attn.v_proj.bias",   [QN] = "self_attn.q_norm.weight", [KN] = "self_attn.k_norm.weight",
        [ATTN_NORM] = "input_layernorm.weight", [W1] = "mlp.gate_proj.weight", [W2] = "mlp.down_proj.weight",
        [W3] = "mlp.up_proj.weight", [FFN_NORM] = "post_attention_layernorm.weight",
    };
    const char *n = m->ext.post_norms && k == ATTN_NORM ? "post_attention_layernorm.weight" /* OLMo 2 */
                    : m->ext.post_norms && k == FFN_NORM ? "post_feedforward_layernorm.weight"
                    : m->ext.gemma && k == FFN_NORM      ? "pre_feedforward_layernorm.weight" /* Gemma 3 */
                    : k == bl.pa                         ? "post_attention_layernorm.weight"
                    : k == bl.pf                         ? "post_feedforward_layernorm.weight"
                    : k < PER_BLOCK                      ? base[k]
                    : k == bl.bo  ? "self_attn.o_proj.bias"
                    : k == bl.sinks ? "self_attn.sinks"
                    : k == bl.b1  ? "mlp.gate_proj.bias"
                    : k == bl.b2  ? "mlp.down_proj.bias"
                                  : "mlp.up_proj.bias";
    snprintf(s->name, sizeof s->name, "model.layers.%d.%s", l, n);
    return 0;
}

/* Older checkpoints saved the rotary inverse frequencies as a buffer; a tied
 * model may still carry a copy of the embeddings as lm_head. */
static int hf_ignorable(const tt_model *m, const char *name)
{
    int l, end = 0;
    if (m->cfg.tie_embeddings && strcmp(name, "lm_head.weight") == 0) return 1;
    /* DeepSeek's multi-token-prediction layers follow the last layer: titan does not train them */
    if (m->ext.n_mtp_layers > 0 && sscanf(name, "model.layers.%d.%n", &l, &end) == 1 && end > 0 &&
        l >= m->cfg.n_layers && l < m->cfg.n_layers + m->ext.n_mtp_layers)
        return 1;
    return sscanf(name, "model.layers.%d.self_attn.rotary_emb.inv_freq%n", &l, &end) == 1 && end > 0 &&
           name[end] == '\0';
}

const tt_arch_impl tt_arch_llama = {"llama", declare, forward, hf_slot, NULL, hf_ignorable};

/* llama.c — Llama 2/3 style decoder (also Mistral, Qwen2 with q/k/v bias,
 * Qwen3 with per-head q/k RMSNorm, SmolLM): RMSNorm, RoPE, GQA, SwiGLU. */
#include <math.h>
#include <stdio.h>

#include "models/model.h"

/* Parameter order within a block; the forward reads them by these offsets. */
enum { WQ, WK, WV, WO, BQ, BK, BV, QN, KN, ATTN_NORM, W1, W2, W3, FFN_NORM, PER_BLOCK };

static tt_err declare(tt_model *m)
{
    const tt_model_cfg *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, V = c->vocab_size, hd = c->head_dim;
    int64_t q = c->n_heads * hd, kv = c->n_kv_heads * hd;
    double std = 0.02, out_std = 0.02 / sqrt(2.0 * c->n_layers);
    char name[96];
    int64_t s2[2];
    if (tt_model_declare(m, 0, "tok_embeddings.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0)) return -1;
    m->params[0].embedding_only = !c->tie_embeddings;
    for (int l = 0; l < c->n_layers; l++) {
        int u = l + 1;
        /* every block declares the same slots; absent optional ones get 0 elements */
        struct { const char *n; int64_t r, k; tt_init_kind init; double sd; int nd; } p[PER_BLOCK] = {
            [WQ] = {"attention.wq.weight", q, D, TT_INIT_NORMAL, std, 0},
            [WK] = {"attention.wk.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WV] = {"attention.wv.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WO] = {"attention.wo.weight", D, q, TT_INIT_NORMAL, out_std, 0},
            [BQ] = {"attention.wq.bias", c->qkv_bias ? q : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BK] = {"attention.wk.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BV] = {"attention.wv.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [QN] = {"attention.q_norm.weight", c->qk_norm ? hd : 0, 0, TT_INIT_ONES, 0, 1},
            [KN] = {"attention.k_norm.weight", c->qk_norm ? hd : 0, 0, TT_INIT_ONES, 0, 1},
            [ATTN_NORM] = {"attention_norm.weight", D, 0, TT_INIT_ONES, 0, 1},
            [W1] = {"feed_forward.w1.weight", F, D, TT_INIT_NORMAL, std, 0},
            [W2] = {"feed_forward.w2.weight", D, F, TT_INIT_NORMAL, out_std, 0},
            [W3] = {"feed_forward.w3.weight", F, D, TT_INIT_NORMAL, std, 0},
            [FFN_NORM] = {"ffn_norm.weight", D, 0, TT_INIT_ONES, 0, 1},
        };
        for (int i = 0; i < PER_BLOCK; i++) {
            snprintf(name, sizeof name, "layers.%d.%s", l, p[i].n);
            s2[0] = p[i].r;
            s2[1] = p[i].k;
            if (tt_model_declare(m, u, name, p[i].k ? 2 : 1, s2, p[i].init, p[i].sd, p[i].nd)) return -1;
        }
    }
    int fu = c->n_layers + 1;
    if (tt_model_declare(m, fu, "norm.weight", 1, &D, TT_INIT_ONES, 0, 1)) return -1;
    if (!c->tie_embeddings && tt_model_declare(m, fu, "output.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0))
        return -1;
    return 0;
}

static tt_value *forward(tt_graph *g, const tt_model *m, tt_value *const *w, const tt_fwd_inputs *in, tt_value **head)
{
    const tt_model_cfg *c = &m->cfg;
    int H = c->n_heads, Hk = c->n_kv_heads, hd = c->head_dim;
    tt_graph_set_scope(g, "tok_embeddings");
    tt_value *x = tt_embedding(g, in->ids, w[0]); // (B*T, D)
    tt_value *inv_freq = tt_model_rope_table(g, c);
    for (int l = 0; l < c->n_layers; l++) {
        tt_value *const *b = w + 1 + l * PER_BLOCK;
        tt_graph_set_scope(g, "layers.%d.attention", l);
        tt_value *h = tt_rmsnorm(g, x, b[ATTN_NORM], c->norm_eps);
        tt_value *q = tt_linear(g, h, b[WQ], c->qkv_bias ? b[BQ] : NULL); // (N, H*hd)
        tt_value *k = tt_linear(g, h, b[WK], c->qkv_bias ? b[BK] : NULL); // (N, Hk*hd)
        tt_value *v = tt_linear(g, h, b[WV], c->qkv_bias ? b[BV] : NULL); // (N, Hk*hd)
        if (c->qk_norm && q && k) {
            q = tt_rmsnorm_groups(g, q, b[QN], c->norm_eps, hd); /* per head */
            k = tt_rmsnorm_groups(g, k, b[KN], c->norm_eps, hd);
        }
        q = tt_rope(g, q, in->pos, inv_freq, H, hd);
        k = tt_rope(g, k, in->pos, inv_freq, Hk, hd);
        tt_value *a = in->cache_k
            ? tt_attention_kv(g, q, k, v, in->cache_k[l], in->cache_v[l], in->start, in->B, in->T, H, Hk, hd, c->window)
            : tt_attention(g, q, k, v, in->doc, in->B, in->T, H, Hk, hd, c->window);
        x = tt_add(g, x, tt_linear(g, a, b[WO], NULL));
        tt_graph_set_scope(g, "layers.%d.feed_forward", l);
        h = tt_rmsnorm(g, x, b[FFN_NORM], c->norm_eps);
        tt_value *ff = tt_swiglu(g, tt_linear(g, h, b[W1], NULL), tt_linear(g, h, b[W3], NULL));
        x = tt_add(g, x, tt_linear(g, ff, b[W2], NULL));
    }
    tt_graph_set_scope(g, "norm");
    tt_value *const *f = w + 1 + c->n_layers * PER_BLOCK;
    *head = c->tie_embeddings ? w[0] : f[1];
    tt_graph_set_scope(g, "output");
    return tt_rmsnorm(g, x, f[0], c->norm_eps);
}

const tt_arch_impl tt_arch_llama = {"llama", declare, forward};

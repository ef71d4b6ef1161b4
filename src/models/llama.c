/* llama.c — Llama 2/3 style decoder (also Mistral, Qwen2 with q/k/v bias,
 * Qwen3 with per-head q/k RMSNorm, SmolLM): RMSNorm, RoPE, GQA, SwiGLU, an
 * optional sliding window per layer; Mixture-of-Experts MLPs (Mixtral,
 * Qwen-MoE, OLMoE, DeepSeek) and DeepSeek's Multi-head Latent Attention
 * (models/mla.c); and its Hugging Face tensor names. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/mla.h"
#include "models/model.h"

/* Parameter order within a block; the forward reads them by these offsets.
 * BO (o_bias) and B1, B2, B3 (mlp_bias) follow FFN_NORM only when enabled, so
 * configurations without them keep the original names and order. The order
 * is also the storage order: wq, wk, wv (and their biases) and w1, w3 lie
 * back to back, so the fusion pass can run each group as one matmul. */
enum { WQ, WK, WV, WO, BQ, BK, BV, QN, KN, ATTN_NORM, W1, W3, W2, FFN_NORM, PER_BLOCK };

/* One declared parameter of a block: rows, cols (0 = 1-D), init, std, no_decay. */
typedef struct { const char *n; int64_t r, k; tt_init_kind init; double sd; int nd; } slot_decl;

/* Parameters per block and the offsets of the optional extras in a block.
 * An MoE block declares the dense MLP's slots with no elements, then its
 * router, selection bias, experts (w1, w3 of expert 0, of expert 1, ...:
 * one (E, 2F, D) gate/up block; then every w2: one (E, D, F) block) and
 * shared experts. Blocks differ in size, so each starts at its own index. */
typedef struct {
    int stride, bo, b1, b2, b3;
    int base;                                      /* the slots above: dense attention and MLP, norms, extras */
    int mla;                                       /* the first MLA parameter (-1: absent) */
    int moe, router, bias, w13, w2, sh1, sh3, sh2, sgate; /* -1: absent */
} block_layout;

static block_layout layout(const tt_model *m, int l)
{
    block_layout b = {PER_BLOCK, -1, -1, -1, -1, 0, -1, 0, -1, -1, -1, -1, -1, -1, -1, -1};
    if (m->ext.o_bias) b.bo = b.stride++;
    if (m->ext.mlp_bias) {
        b.b1 = b.stride++;
        b.b2 = b.stride++;
        b.b3 = b.stride++;
    }
    b.base = b.stride;
    /* the low-rank projections and their norms (wq, wk, wv stay, empty or not) */
    if (m->cfg.mla.kv_lora_rank > 0) b.mla = b.stride, b.stride += tt_mla_slots_of(&m->cfg.mla).n;
    const tt_moe_cfg *e = &m->cfg.moe;
    if (!tt_model_layer_is_moe(&m->cfg, l)) return b;
    b.moe = 1;
    b.router = b.stride++;
    if (e->has_bias) b.bias = b.stride++;
    b.w13 = b.stride, b.stride += 2 * e->n_experts;
    b.w2 = b.stride, b.stride += e->n_experts;
    const int shared = e->n_shared > 0 && e->shared_ffn > 0;
    if (shared) b.sh1 = b.stride++, b.sh3 = b.stride++, b.sh2 = b.stride++;
    if (shared && e->shared_gate) b.sgate = b.stride++;
    return b;
}

/* The index of block l's first parameter (of the final norm for l = n_layers) */
static int block_start(const tt_model *m, int l) { return m->units[l + 1].first_param; }

/* The MoE slots of block l (after its attention and norms). */
static tt_err declare_moe(tt_model *m, int l, double std, double out_std)
{
    const tt_moe_cfg *e = &m->cfg.moe;
    const int64_t D = m->cfg.dim, F = e->ffn_dim, E = e->n_experts, Fs = e->n_shared ? e->shared_ffn : 0;
    const int u = l + 1, first = m->n_params;
    char name[96];
#define DECL(nd, r, k, init, sd, no_decay, ...)                                                               \
    do {                                                                                                      \
        snprintf(name, sizeof name, __VA_ARGS__);                                                             \
        if (tt_model_declare(m, u, name, nd, (int64_t[]){r, k}, init, sd, no_decay)) return -1;               \
    } while (0)
    DECL(2, E, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.router.weight", l);
    if (e->has_bias) DECL(1, E, 0, TT_INIT_ZEROS, 0, 1, "layers.%d.moe.expert_bias", l);
    const int experts = m->n_params;
    for (int x = 0; x < E; x++) {
        DECL(2, F, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.experts.%d.w1.weight", l, x);
        DECL(2, F, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.experts.%d.w3.weight", l, x);
    }
    for (int x = 0; x < E; x++) DECL(2, D, F, TT_INIT_NORMAL, out_std, 0, "layers.%d.moe.experts.%d.w2.weight", l, x);
    for (int i = experts; i < m->n_params; i++) { /* two ranges of expert blocks: gate/up, then down */
        m->params[i].routed = 1;
        m->params[i].expert = i - experts < 2 * E ? (i - experts) / 2 : i - experts - 2 * E;
    }
    if (Fs) {
        DECL(2, Fs, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.shared_experts.w1.weight", l);
        DECL(2, Fs, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.shared_experts.w3.weight", l);
        DECL(2, D, Fs, TT_INIT_NORMAL, out_std, 0, "layers.%d.moe.shared_experts.w2.weight", l);
        if (e->shared_gate) DECL(2, 1, D, TT_INIT_NORMAL, std, 0, "layers.%d.moe.shared_expert_gate.weight", l);
    }
#undef DECL
    return m->n_params - first == layout(m, l).stride - layout(m, l).router ? 0 : tt_errorf("model: MoE layout");
}

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
    const tt_mla_cfg *mla = &c->mla;
    const tt_attn_dims ad = tt_model_attn_dims(c);
    if (mla->kv_lora_rank > 0) /* MLA: wq (no q compression) gives H heads of qk_nope + qk_rope; no wk, wv */
        q = mla->q_lora_rank > 0 ? 0 : (int64_t)c->n_heads * ad.qk, kv = 0;
    const int64_t o_in = (int64_t)c->n_heads * ad.v;
    for (int l = 0; l < c->n_layers; l++) {
        int u = l + 1;
        block_layout bl = layout(m, l);
        if (bl.moe) F = 0; /* the dense MLP's slots stay, empty */
        else F = c->ffn_dim;
        /* every block declares the same slots; absent optional ones get 0 elements */
        slot_decl p[PER_BLOCK + 4] = {
            [WQ] = {"attention.wq.weight", q, D, TT_INIT_NORMAL, std, 0},
            [WK] = {"attention.wk.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WV] = {"attention.wv.weight", kv, D, TT_INIT_NORMAL, std, 0},
            [WO] = {"attention.wo.weight", D, o_in, TT_INIT_NORMAL, out_std, 0},
            [BQ] = {"attention.wq.bias", c->qkv_bias ? q : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BK] = {"attention.wk.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [BV] = {"attention.wv.bias", c->qkv_bias ? kv : 0, 0, TT_INIT_ZEROS, 0, 1},
            [QN] = {"attention.q_norm.weight", c->qk_norm ? (m->ext.qk_norm_full ? q : hd) : 0, 0, TT_INIT_ONES, 0, 1},
            [KN] = {"attention.k_norm.weight", c->qk_norm ? (m->ext.qk_norm_full ? kv : hd) : 0, 0, TT_INIT_ONES, 0, 1},
            [ATTN_NORM] = {"attention_norm.weight", D, 0, TT_INIT_ONES, 0, 1},
            [W1] = {"feed_forward.w1.weight", F, D, TT_INIT_NORMAL, std, 0},
            [W2] = {"feed_forward.w2.weight", D, F, TT_INIT_NORMAL, out_std, 0},
            [W3] = {"feed_forward.w3.weight", F, D, TT_INIT_NORMAL, std, 0},
            [FFN_NORM] = {"ffn_norm.weight", D, 0, TT_INIT_ONES, 0, 1},
        };
        if (bl.moe) p[W2].r = 0; /* (D, 0) would read as a 1-D slot of D */
        if (bl.bo >= 0) p[bl.bo] = (slot_decl){"attention.wo.bias", D, 0, TT_INIT_ZEROS, 0, 1};
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
        if (bl.moe && declare_moe(m, l, std, out_std)) return -1;
    }
    int fu = c->n_layers + 1;
    if (tt_model_declare(m, fu, "norm.weight", 1, &D, TT_INIT_ONES, 0, 1)) return -1;
    if (!c->tie_embeddings && tt_model_declare(m, fu, "output.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0))
        return -1;
    return 0;
}

/* A view of `n` consecutive parameters starting at b[i] as one (n, r, k) value */
static tt_value *stacked(tt_graph *g, tt_value *const *b, int i, int64_t n, int64_t r, int64_t k)
{
    return b[i] ? tt_value_view(g, b[i]->base, b[i]->offset, TT_F32, 3, (int64_t[]){n, r, k}) : NULL;
}

/* The shared experts of one block on h (N, D), gated by Qwen2-MoE's
 * sigmoid(h . gate) where it has one (a route to one expert with sigmoid
 * scores); NULL where the block has none. */
static tt_value *shared_experts(tt_graph *g, tt_value *const *b, const block_layout *bl, tt_value *h)
{
    if (bl->sh1 < 0) return NULL;
    tt_value *sh = tt_linear(g, tt_swiglu(g, tt_linear(g, h, b[bl->sh1], NULL), tt_linear(g, h, b[bl->sh3], NULL)),
                             b[bl->sh2], NULL); // (N, D)
    if (bl->sgate < 0) return sh;
    const tt_moe_attrs ga = {1, 1, TT_SCORE_SIGMOID, 0, 0, 0, 1.0};
    tt_value *one = NULL, *p1 = NULL, *q1 = NULL, *o1 = NULL;
    tt_value *s = tt_moe_route(g, tt_matmul_to(g, h, b[bl->sgate], 0, 1, TT_F32), NULL, &ga, &one, NULL);
    if (tt_moe_sort(g, one, 1, &p1, &q1, &o1)) return NULL;
    return tt_moe_combine(g, sh, p1, q1, s, 1);
}

/* Every expert's SwiGLU over its rows xs (M, D) (sorted by expert, off its
 * offsets) as two grouped matmuls: the experts [first, first + n). In a
 * buffer planned larger than its rows (expert parallelism's receive buffer:
 * `tail`), the SwiGLU computes only the rows the offsets cover. */
static tt_value *expert_mlps(tt_graph *g, const tt_model *m, tt_value *const *b, const block_layout *bl, tt_value *xs,
                             tt_value *off, int first, int n, int tail)
{
    const int64_t D = m->cfg.dim, F = m->cfg.moe.ffn_dim;
    tt_value *ab = tt_grouped_matmul(g, xs, stacked(g, b, bl->w13 + 2 * first, n, 2 * F, D), off, 1); // (M, 2F)
    tt_value *act = tail ? tt_swiglu_fused_rows(g, ab, off) : tt_swiglu_fused(g, ab);                 // (M, F)
    return tt_grouped_matmul(g, act, stacked(g, b, bl->w2 + first, n, D, F), off, 1);                 // (M, D)
}

/* Expert parallelism: the rows xs (N*k, D), sorted by expert (off: (E+1)
 * offsets), go to the ranks of the expert group that hold their experts and
 * come back computed, in the same order. Every rank first learns every
 * rank's offsets (an all-gather of E+1 numbers), which gives each exchange's
 * counts and the order the received rows are regrouped into by expert; the
 * rows then travel by all-to-all (in the activation dtype), are regrouped,
 * run through this rank's experts, put back in arrival order and travel
 * back. The backward of each exchange is the reverse exchange (autodiff).
 * The shared experts (*shared) are built while the rows travel, so they
 * compute then. */
static tt_value *expert_parallel(tt_graph *g, const tt_model *m, tt_value *const *b, const block_layout *bl,
                                 tt_value *h, tt_value *xs, tt_value *off, const tt_fwd_inputs *in, tt_value **shared)
{
    const int E = m->cfg.moe.n_experts, ep = in->ep, El = E / ep;
    const int64_t D = m->cfg.dim, rows = xs->shape[0];
    /* the receive buffer: the worst case (every rank's rows all for this rank's experts), or the bound */
    int64_t recv = (int64_t)ep * rows;
    if (in->ep_recv_factor > 0 && (int64_t)ceil(in->ep_recv_factor * (double)rows) < recv)
        recv = (int64_t)ceil(in->ep_recv_factor * (double)rows);
    char what[48];
    snprintf(what, sizeof what, "%.36s counts", g->scope);
    tt_value *offs = tt_all_gather(g, off, NULL, in->ep_group, ep, what);
    tt_value *offs_all = offs ? tt_comm_wait(g, offs) : NULL; // (ep*(E+1)) i32
    const tt_moe_ep_attrs pa = {E, ep, in->ep_rank, D, recv};
    tt_value *cnt[4] = {0}, *loc_off = NULL, *to_src = NULL, *to_exp = NULL;
    if (!offs_all || tt_moe_ep_plan(g, offs_all, &pa, cnt, &loc_off, &to_src, &to_exp)) return NULL;
    snprintf(what, sizeof what, "%.34s dispatch", g->scope);
    tt_value *sent = tt_all_to_allv(g, xs, cnt[0], cnt[1], cnt[2], cnt[3], recv * D, in->ep_group, what);
    *shared = shared_experts(g, b, bl, h); /* while the rows travel */
    tt_value *xr = sent ? tt_comm_wait(g, sent) : NULL;                    // (recv, D) by source rank
    tt_value *xe = tt_row_gather(g, xr, to_src, to_exp);                   // (recv, D) by local expert
    tt_value *ye = expert_mlps(g, m, b, bl, xe, loc_off, in->ep_rank * El, El, 1);
    tt_value *yr = tt_row_gather(g, ye, to_exp, to_src);                   // (recv, D) by source rank again
    snprintf(what, sizeof what, "%.35s combine", g->scope);
    tt_value *back = tt_all_to_allv(g, yr, cnt[2], cnt[3], cnt[0], cnt[1], rows * D, in->ep_group, what);
    return back ? tt_comm_wait(g, back) : NULL;                            // (N*k, D) as xs
}

/* The MoE MLP of one block on h (N, D): route each token to its top-k
 * experts, sort the (token, slot) assignments by expert, run every expert's
 * SwiGLU over its rows as two grouped matmuls (on the ranks that hold them,
 * under expert parallelism), and sum each token's k gated outputs back in
 * slot order; plus the shared experts. */
static tt_value *moe_mlp(tt_graph *g, const tt_model *m, tt_value *const *b, const block_layout *bl, tt_value *h,
                         const tt_fwd_inputs *in)
{
    const tt_moe_cfg *e = &m->cfg.moe;
    const int E = e->n_experts, k = e->top_k;
    const tt_moe_attrs ra = {E, k, e->score_func, e->route_norm, e->n_group, e->topk_group, e->route_scale};
    tt_value *logits = tt_matmul_to(g, h, b[bl->router], 0, 1, TT_F32); // (N, E), scored in fp32
    tt_value *expert = NULL, *perm = NULL, *pos = NULL, *off = NULL, *scores = NULL;
    tt_value *gate = tt_moe_route(g, logits, bl->bias >= 0 ? b[bl->bias] : NULL, &ra, &expert, &scores); // (N, k)
    if (in->aux_scale && e->aux_coef > 0) { /* load balancing, per batch or per sequence */
        const tt_moe_aux_attrs aa = {e->aux_seq ? TT_AUX_SEQUENCE : TT_AUX_BALANCE, E, k, in->B, in->T, e->aux_coef};
        tt_moe_name_aux_loss(tt_moe_aux_loss(g, scores, expert, in->aux_scale, &aa));
    }
    if (in->aux_scale && e->z_coef > 0) {
        const tt_moe_aux_attrs za = {TT_AUX_Z, E, k, in->B, in->T, e->z_coef};
        tt_moe_name_aux_loss(tt_moe_aux_loss(g, logits, NULL, in->aux_scale, &za));
    }
    if (tt_moe_sort(g, expert, E, &perm, &pos, &off)) return NULL;
    tt_moe_name_offsets(off);
    tt_value *xs = tt_moe_permute(g, h, perm, pos, e->score_before ? gate : NULL, k); // (N*k, D)
    tt_value *sh = NULL;
    tt_value *ys = in->ep > 1 ? expert_parallel(g, m, b, bl, h, xs, off, in, &sh)     // (N*k, D)
                              : expert_mlps(g, m, b, bl, xs, off, 0, E, 0);
    if (in->ep <= 1) sh = shared_experts(g, b, bl, h);
    tt_value *y = tt_moe_combine(g, ys, perm, pos, e->score_before ? NULL : gate, k); // (N, D)
    return bl->sh1 < 0 ? y : tt_add(g, y, sh);
}

/* Grouped-query attention of one block on h (N, D): (N, H*hd) before the output projection */
static tt_value *gqa_attention(tt_graph *g, const tt_model *m, tt_value *const *b, tt_value *h, const tt_fwd_inputs *in,
                               tt_value *inv_freq, double rope_scale, int l)
{
    const tt_model_cfg *c = &m->cfg;
    const int H = c->n_heads, Hk = c->n_kv_heads, hd = c->head_dim, window = tt_model_layer_window(c, &m->ext, l);
    tt_value *q = tt_linear(g, h, b[WQ], c->qkv_bias ? b[BQ] : NULL); // (N, H*hd)
    tt_value *k = tt_linear(g, h, b[WK], c->qkv_bias ? b[BK] : NULL); // (N, Hk*hd)
    tt_value *v = tt_linear(g, h, b[WV], c->qkv_bias ? b[BV] : NULL); // (N, Hk*hd)
    if (c->qk_norm && q && k) { /* per head (Qwen3), or over all heads at once (OLMoE) */
        q = tt_rmsnorm_groups(g, q, b[QN], c->norm_eps, m->ext.qk_norm_full ? H * hd : hd);
        k = tt_rmsnorm_groups(g, k, b[KN], c->norm_eps, m->ext.qk_norm_full ? Hk * hd : hd);
    }
    q = tt_rope_scaled(g, q, in->pos, inv_freq, H, hd, rope_scale);
    k = tt_rope_scaled(g, k, in->pos, inv_freq, Hk, hd, rope_scale);
    return in->cache_k
        ? tt_attention_kv(g, q, k, v, in->cache_k[l], in->cache_v[l], in->start, in->B, in->T, H, Hk, hd, window)
        : tt_attention(g, q, k, v, in->doc, in->B, in->T, H, Hk, hd, window);
}

static tt_value *forward(tt_graph *g, const tt_model *m, tt_value *const *w, const tt_fwd_inputs *in, tt_value **head)
{
    const tt_model_cfg *c = &m->cfg;
    double rope_scale = tt_rope_attention_scale(&c->rope, &m->ext.rope); /* YaRN scales cos and sin */
    tt_graph_set_unit(g, 0);
    tt_graph_set_scope(g, "tok_embeddings");
    tt_value *x = tt_embedding(g, in->ids, w[0]); // (B*T, D)
    tt_value *inv_freq = tt_model_rope_table(g, m);
    for (int l = 0; l < c->n_layers; l++) {
        tt_value *const *b = w + block_start(m, l);
        const block_layout bl = layout(m, l);
        tt_graph_set_unit(g, l + 1);
        tt_graph_set_scope(g, "layers.%d.attention", l);
        tt_value *h = tt_rmsnorm(g, x, b[ATTN_NORM], c->norm_eps);
        tt_value *a = bl.mla >= 0 ? tt_mla_attention(g, m, b + bl.mla, b[WQ], h, in, inv_freq, rope_scale, l)
                                  : gqa_attention(g, m, b, h, in, inv_freq, rope_scale, l);
        x = tt_add(g, x, tt_linear(g, a, b[WO], bl.bo >= 0 ? b[bl.bo] : NULL));
        h = tt_rmsnorm(g, x, b[FFN_NORM], c->norm_eps);
        if (bl.moe) {
            tt_graph_set_scope(g, "layers.%d.moe", l);
            x = tt_add(g, x, moe_mlp(g, m, b, &bl, h, in));
            continue;
        }
        tt_graph_set_scope(g, "layers.%d.feed_forward", l);
        tt_value *ff = tt_swiglu(g, tt_linear(g, h, b[W1], bl.b1 >= 0 ? b[bl.b1] : NULL),
                                 tt_linear(g, h, b[W3], bl.b3 >= 0 ? b[bl.b3] : NULL));
        x = tt_add(g, x, tt_linear(g, ff, b[W2], bl.b2 >= 0 ? b[bl.b2] : NULL));
    }
    tt_graph_set_unit(g, c->n_layers + 1);
    tt_graph_set_scope(g, "norm");
    tt_value *const *f = w + block_start(m, c->n_layers);
    *head = c->tie_embeddings ? w[0] : f[1];
    tt_graph_set_scope(g, "output");
    return tt_rmsnorm(g, x, f[0], c->norm_eps);
}

/* ---- Hugging Face names (LlamaForCausalLM and its relatives) ------------- */

/* The MoE tensors of block l: Qwen2/3-MoE, OLMoE and DeepSeek-V3 names, or
 * Mixtral's; or every family's experts packed in two tensors (transformers 5). */
static tt_err hf_moe_slot(const tt_model *m, int l, const block_layout *bl, int k, tt_hf_slot *s)
{
    const int packed = m->ext.hf_packed_experts, mx = m->ext.hf_mixtral && !packed;
    const int E = m->cfg.moe.n_experts, F = m->cfg.moe.ffn_dim, D = m->cfg.dim;
    const char *blk = mx ? "block_sparse_moe" : "mlp";
    char n[96];
    if (k == bl->router) snprintf(n, sizeof n, "%s.gate.weight", blk);
    else if (k == bl->bias) snprintf(n, sizeof n, "%s.gate.e_score_correction_bias", blk);
    else if (packed && k >= bl->w13 && k < bl->w2 + E) { /* gate rows, then up rows, of each expert; then downs */
        const int up = k < bl->w2;
        snprintf(n, sizeof n, "mlp.experts.%s", up ? "gate_up_proj" : "down_proj");
        *s = (tt_hf_slot){.part = up ? k - bl->w13 : k - bl->w2, .n_parts = up ? 2 * E : E, .stacked = 1, .hf_ndim = 3,
                          .hf_shape = {E, up ? 2 * F : D, up ? D : F}};
    } else if (k >= bl->w13 && k < bl->w13 + 2 * E)
        snprintf(n, sizeof n, "%s.experts.%d.%s.weight", blk, (k - bl->w13) / 2,
                 (k - bl->w13) % 2 ? (mx ? "w3" : "up_proj") : (mx ? "w1" : "gate_proj"));
    else if (k >= bl->w2 && k < bl->w2 + E)
        snprintf(n, sizeof n, "%s.experts.%d.%s.weight", blk, k - bl->w2, mx ? "w2" : "down_proj");
    else if (k == bl->sh1 || k == bl->sh3 || k == bl->sh2)
        snprintf(n, sizeof n, "mlp.shared_expert%s.%s.weight", m->cfg.moe.shared_gate ? "" : "s",
                 k == bl->sh1 ? "gate_proj" : k == bl->sh3 ? "up_proj" : "down_proj");
    else if (k == bl->sgate) snprintf(n, sizeof n, "mlp.shared_expert_gate.weight");
    else return tt_errorf("model: layer %d has no MoE slot %d", l, k);
    snprintf(s->name, sizeof s->name, "model.layers.%d.%s", l, n);
    return 0;
}

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
    if (bl.moe && k >= bl.router) return hf_moe_slot(m, l, &bl, k, s);
    if (bl.mla >= 0 && k >= bl.mla) { /* DeepSeek's names */
        snprintf(s->name, sizeof s->name, "model.layers.%d.self_attn.%s", l, tt_mla_hf_name(&m->cfg.mla, k - bl.mla));
        return 0;
    }
    static const char *const base[PER_BLOCK] = {
        [WQ] = "self_attn.q_proj.weight", [WK] = "self_attn.k_proj.weight", [WV] = "self_attn.v_proj.weight",
        [WO] = "self_attn.o_proj.weight", [BQ] = "self_attn.q_proj.bias",   [BK] = "self_attn.k_proj.bias",
        [BV] = "self_attn.v_proj.bias",   [QN] = "self_attn.q_norm.weight", [KN] = "self_attn.k_norm.weight",
        [ATTN_NORM] = "input_layernorm.weight", [W1] = "mlp.gate_proj.weight", [W2] = "mlp.down_proj.weight",
        [W3] = "mlp.up_proj.weight", [FFN_NORM] = "post_attention_layernorm.weight",
    };
    const char *n = k < PER_BLOCK ? base[k]
                    : k == bl.bo  ? "self_attn.o_proj.bias"
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

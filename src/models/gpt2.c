/* gpt2.c — GPT-2: LayerNorm, GELU (tanh), learned positions, tied head.
 * q/k/v are kept as three (D, D) projections; HF's fused c_attn is split
 * when loading Hugging Face weights (the name map at the end). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/model.h"

/* Parameter order within a block, which is also the storage order: the q, k,
 * v weights (and their biases) lie back to back, so the fusion pass can run
 * them as one matmul, as HF's c_attn does. */
enum { LN1_W, LN1_B, WQ, WK, WV, BQ, BK, BV, WO, BO, LN2_W, LN2_B, FC_W, FC_B, PROJ_W, PROJ_B, PER_BLOCK };

static tt_err declare(tt_model *m)
{
    const tt_model_cfg *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, V = c->vocab_size;
    double std = 0.02, out_std = 0.02 / sqrt(2.0 * c->n_layers);
    if (c->n_kv_heads != c->n_heads) return tt_errorf("gpt2: n_kv_heads must equal n_heads");
    if (c->max_seq_len <= 0) return tt_errorf("gpt2: model.max_seq_len must be positive");
    if (tt_model_declare(m, 0, "wte.weight", 2, (int64_t[]){V, D}, TT_INIT_NORMAL, std, 0)) return -1;
    if (tt_model_declare(m, 0, "wpe.weight", 2, (int64_t[]){c->max_seq_len, D}, TT_INIT_NORMAL, 0.01, 0)) return -1;
    m->params[1].embedding_only = 1; /* wte does the head's matmul (tied); wpe is only looked up */
    for (int l = 0; l < c->n_layers; l++) {
        struct { const char *n; int64_t r, k; tt_init_kind init; double sd; int nd; } p[PER_BLOCK] = {
            [LN1_W] = {"ln_1.weight", D, 0, TT_INIT_ONES, 0, 1},
            [LN1_B] = {"ln_1.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [WQ] = {"attn.q_proj.weight", D, D, TT_INIT_NORMAL, std, 0},
            [BQ] = {"attn.q_proj.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [WK] = {"attn.k_proj.weight", D, D, TT_INIT_NORMAL, std, 0},
            [BK] = {"attn.k_proj.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [WV] = {"attn.v_proj.weight", D, D, TT_INIT_NORMAL, std, 0},
            [BV] = {"attn.v_proj.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [WO] = {"attn.c_proj.weight", D, D, TT_INIT_NORMAL, out_std, 0},
            [BO] = {"attn.c_proj.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [LN2_W] = {"ln_2.weight", D, 0, TT_INIT_ONES, 0, 1},
            [LN2_B] = {"ln_2.bias", D, 0, TT_INIT_ZEROS, 0, 1},
            [FC_W] = {"mlp.c_fc.weight", F, D, TT_INIT_NORMAL, std, 0},
            [FC_B] = {"mlp.c_fc.bias", F, 0, TT_INIT_ZEROS, 0, 1},
            [PROJ_W] = {"mlp.c_proj.weight", D, F, TT_INIT_NORMAL, out_std, 0},
            [PROJ_B] = {"mlp.c_proj.bias", D, 0, TT_INIT_ZEROS, 0, 1},
        };
        for (int i = 0; i < PER_BLOCK; i++) {
            char name[96];
            snprintf(name, sizeof name, "h.%d.%s", l, p[i].n);
            if (tt_model_declare(m, l + 1, name, p[i].k ? 2 : 1, (int64_t[]){p[i].r, p[i].k}, p[i].init, p[i].sd,
                                 p[i].nd))
                return -1;
        }
    }
    int fu = c->n_layers + 1;
    if (tt_model_declare(m, fu, "ln_f.weight", 1, &D, TT_INIT_ONES, 0, 1)) return -1;
    return tt_model_declare(m, fu, "ln_f.bias", 1, &D, TT_INIT_ZEROS, 0, 1);
}

static tt_value *forward(tt_graph *g, const tt_model *m, tt_value *const *w, const tt_fwd_inputs *in, tt_value **head)
{
    const tt_model_cfg *c = &m->cfg;
    int H = c->n_heads, hd = c->head_dim;
    tt_graph_set_unit(g, 0);
    tt_graph_set_scope(g, "embeddings");
    tt_value *x = tt_add(g, tt_embedding(g, in->ids, w[0]), tt_embedding(g, in->pos, w[1])); // (B*T, D)
    for (int l = 0; l < c->n_layers; l++) {
        tt_value *const *b = w + 2 + l * PER_BLOCK;
        tt_graph_set_unit(g, l + 1);
        tt_graph_set_scope(g, "h.%d.attn", l);
        tt_value *h = tt_layernorm(g, x, b[LN1_W], b[LN1_B], c->norm_eps);
        tt_value *q = tt_linear(g, h, b[WQ], b[BQ]), *k = tt_linear(g, h, b[WK], b[BK]);
        tt_value *v = tt_linear(g, h, b[WV], b[BV]);
        tt_value *a = in->cache_k
            ? tt_attention_kv(g, q, k, v, in->cache_k[l], in->cache_v[l], in->start, in->B, in->T, H, H, hd, 0)
            : tt_attention(g, q, k, v, in->doc, in->B, in->T, H, H, hd, 0);
        x = tt_add(g, x, tt_linear(g, a, b[WO], b[BO]));
        tt_graph_set_scope(g, "h.%d.mlp", l);
        h = tt_layernorm(g, x, b[LN2_W], b[LN2_B], c->norm_eps);
        x = tt_add(g, x, tt_linear(g, tt_gelu(g, tt_linear(g, h, b[FC_W], b[FC_B])), b[PROJ_W], b[PROJ_B]));
    }
    tt_value *const *f = w + 2 + c->n_layers * PER_BLOCK;
    tt_graph_set_unit(g, c->n_layers + 1);
    tt_graph_set_scope(g, "ln_f");
    *head = w[0];
    return tt_layernorm(g, x, f[0], f[1], c->norm_eps);
}

/* ---- Hugging Face names (GPT2LMHeadModel) ---------------------------------
 * Conv1D stores weights (in, out), the transpose of titan's (out, in); c_attn
 * fuses q, k, v along its output axis. Names carry "transformer.", which
 * checkpoints of the bare GPT2Model leave out. */
static tt_err hf_slot(const tt_model *m, int i, tt_hf_slot *s)
{
    const tt_model_cfg *c = &m->cfg;
    int nb = c->n_layers * PER_BLOCK;
    if (i < 2 || i >= 2 + nb) {
        static const char *const ends[4] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
        snprintf(s->name, sizeof s->name, "transformer.%s", ends[i < 2 ? i : 2 + (i - 2 - nb)]);
        return 0;
    }
    int l = (i - 2) / PER_BLOCK, k = (i - 2) % PER_BLOCK;
    static const struct { const char *n; int transpose, part; } map[PER_BLOCK] = {
        [LN1_W] = {"ln_1.weight", 0, 0},        [LN1_B] = {"ln_1.bias", 0, 0},
        [WQ] = {"attn.c_attn.weight", 1, 0},    [BQ] = {"attn.c_attn.bias", 0, 0},
        [WK] = {"attn.c_attn.weight", 1, 1},    [BK] = {"attn.c_attn.bias", 0, 1},
        [WV] = {"attn.c_attn.weight", 1, 2},    [BV] = {"attn.c_attn.bias", 0, 2},
        [WO] = {"attn.c_proj.weight", 1, 0},    [BO] = {"attn.c_proj.bias", 0, 0},
        [LN2_W] = {"ln_2.weight", 0, 0},        [LN2_B] = {"ln_2.bias", 0, 0},
        [FC_W] = {"mlp.c_fc.weight", 1, 0},     [FC_B] = {"mlp.c_fc.bias", 0, 0},
        [PROJ_W] = {"mlp.c_proj.weight", 1, 0}, [PROJ_B] = {"mlp.c_proj.bias", 0, 0},
    };
    snprintf(s->name, sizeof s->name, "transformer.h.%d.%s", l, map[k].n);
    s->transpose = map[k].transpose;
    int fused = k == WQ || k == WK || k == WV || k == BQ || k == BK || k == BV;
    s->part = map[k].part;
    s->n_parts = fused ? 3 : 1;
    return 0;
}

/* The causal-mask buffers older GPT-2 checkpoints saved, and lm_head.weight,
 * which is the tied wte. Names arrive with the "transformer." prefix. */
static int hf_ignorable(const tt_model *m, const char *name)
{
    int l, end = 0;
    (void)m;
    if (strcmp(name, "lm_head.weight") == 0) return 1;
    if (sscanf(name, "transformer.h.%d.attn.%n", &l, &end) != 1 || end == 0) return 0;
    return strcmp(name + end, "bias") == 0 || strcmp(name + end, "masked_bias") == 0;
}

const tt_arch_impl tt_arch_gpt2 = {"gpt2", declare, forward, hf_slot, "transformer.", hf_ignorable};

/* test_remat.c — activation checkpointing (the remat pass): gradients and loss
 * bitwise equal to no checkpointing in graph mode, a smaller planned arena,
 * the backward reading only what each mode saves, eager/debug modes, the
 * step graph, and the IR reorder helper refusing bad orders. Blocks are the
 * graph's units that the model declares blocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"
#include "graph/passes/remat.h"
#include "harness.h"
#include "models/model.h"
#include "train/step_graph.h"

enum { B = 2, T = 13, V = 40 };

typedef struct {
    int32_t ids[B * T], tg[B * T], pos[B * T], doc[B * T];
    float scale;
} batch;

static void make_batch(batch *b)
{
    tt_rng r = {3, 0};
    for (int i = 0; i < B * T; i++) {
        int t = i % T, d = t < 6 ? 0 : 1; /* two documents per row */
        b->ids[i] = (int32_t)tt_rng_below(&r, V);
        b->doc[i] = d;
        b->pos[i] = d ? t - 6 : t;
        b->tg[i] = (t == 5 || t == T - 1) ? -100 : (int32_t)tt_rng_below(&r, V);
    }
    b->scale = 1.0f / (B * T - 2 * B);
}

/* QWEN: llama with q/k/v biases and q/k norm; MOE: llama with 4 experts, top-2, a shared expert, the first
 * layer dense */
typedef enum { LLAMA, GPT2, QWEN, MOE } variant;
static const char *const variant_names[] = {"llama", "gpt2", "llama+qkv_bias+qk_norm", "llama+moe"};

static tt_model *make_model(variant va, float **weights)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = va == GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    c.dim = 32;
    c.n_layers = 3;
    c.n_heads = 4;
    c.n_kv_heads = va == GPT2 ? 4 : 2;
    c.head_dim = 8;
    c.ffn_dim = 48;
    c.vocab_size = V;
    c.max_seq_len = 64;
    c.norm_eps = 1e-5;
    c.rope.theta = 10000;
    c.tie_embeddings = va == GPT2;
    c.qkv_bias = va == QWEN;
    c.qk_norm = va == QWEN;
    if (va == MOE)
        c.moe = (tt_moe_cfg){.n_experts = 4, .top_k = 2, .ffn_dim = 16, .n_shared = 1, .shared_ffn = 16,
                             .n_dense_layers = 1, .route_norm = 1, .route_scale = 1.0, .has_bias = 1};
    tt_model *m = tt_model_new(&c);
    *weights = NULL;
    if (m) {
        /* the weights in host memory, flat layout */
        float *w = th_alloc(m->numel, sizeof(float));
        tt_param_store store = tt_model_host_store(w);
        CHECK_MSG(tt_model_init_weights(m, 42, &store) == 0, "%s", tt_last_error());
        *weights = w;
    }
    return m;
}

/* The harness's train graph (loss + grads as outputs) with the pass applied,
 * and what the pass reports. */
typedef struct {
    th_train_graph t;
    tt_remat_stats st;
} remat_graph;

static remat_graph build(const tt_model *m, tt_ac_mode ac)
{
    remat_graph r = {th_train_graph_build(m, B, T), {0}};
    CHECK_MSG(tt_remat(r.t.g, r.t.n_fwd, ac, &r.st) == 0, "%s", tt_last_error());
    return r;
}

/* One run's loss, flat gradients (model layout) and arena. */
typedef struct {
    float loss;
    float *grad;
    size_t arena;
    int n_nodes, ok;
} result;

/* Graph and eager modes run on the cpu backend, debug mode on the reference
 * kernels (the ref backend) with NaN/Inf checks. */
static result run(const tt_model *m, const float *weights, batch *bt, tt_ac_mode ac, tt_exec_mode mode,
                  remat_graph *keep)
{
    result res = {0, calloc(m->numel, sizeof(float)), 0, 0, 0};
    remat_graph rg = build(m, ac);
    th_train_graph *tgr = &rg.t;
    const tt_backend *be = tt_backend_get(mode == TT_EXEC_DEBUG ? "ref" : "cpu");
    CHECK_MSG(be != NULL, "%s", tt_last_error());
    tt_exec *e = be ? tt_exec_new(tgr->g, be, NULL, mode) : NULL;
    CHECK_MSG(e != NULL, "%s", tt_last_error());
    if (e && th_train_graph_upload(e, m, tgr, weights, bt->ids, bt->tg, bt->pos, bt->doc, &bt->scale) == 0 &&
        tt_exec_run(e) == 0 && tt_exec_read(e, tgr->loss, &res.loss, sizeof res.loss) == 0 &&
        th_train_graph_grads(e, m, tgr, res.grad) == 0) {
        res.ok = 1;
        res.arena = tt_exec_arena_bytes(e);
        res.n_nodes = tgr->g->n_nodes;
    } else {
        CHECK_MSG(0, "run failed: %s", tt_last_error());
    }
    tt_exec_free(e);
    if (keep) *keep = rg;
    else th_train_graph_free(tgr);
    return res;
}

/* The transformer block a node computes for: its unit when the graph's unit
 * table says that unit is a block, else -1. */
static int block_of(const tt_graph *g, const tt_node *n)
{
    return n->unit >= 0 && n->unit < g->n_units && g->units[n->unit].block ? n->unit : -1;
}

/* After the pass, what the nodes past the forward read from a block's
 * forward must be what the mode saves: under full only values that leave
 * the block in the forward (its output); under selective also matmul and
 * attention outputs. Clones carry ".remat" scopes, sit past the forward and
 * keep the unit of the node they copy. */
static void check_saved(const remat_graph *r, const tt_model *m, tt_ac_mode ac, const char *name)
{
    const th_train_graph *t = &r->t;
    const tt_graph *g = t->g;
    int bad = 0, clones = 0, bad_unit = 0;
    /* the graph's units are the model's: blocks 1..L, embeddings and head not */
    CHECK(g->n_units == m->n_units);
    for (int u = 0; u < g->n_units && u < m->n_units; u++) CHECK(!g->units[u].block == !m->units[u].block);
    int *fwd_in_block = calloc((size_t)g->n_units + 1, sizeof(int));
    for (int i = 0; i < t->n_fwd; i++) {
        const int b = block_of(g, g->nodes[i]);
        if (b >= 0) fwd_in_block[b]++;
    }
    int blocks_with_nodes = 0;
    for (int u = 0; u < g->n_units; u++) blocks_with_nodes += fwd_in_block[u] > 0;
    CHECK_MSG(blocks_with_nodes == m->cfg.n_layers, "%s %s: %d blocks have forward nodes, want %d", name,
              tt_ac_mode_name(ac), blocks_with_nodes, m->cfg.n_layers);
    free(fwd_in_block);
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        CHECK(n->id == i);
        int is_clone = strstr(n->scope, ".remat") != NULL;
        clones += is_clone;
        if (is_clone && i < t->n_fwd) bad++;
        if (is_clone && block_of(g, n) < 0) bad_unit++; /* only blocks recompute */
        if (i < t->n_fwd || is_clone) continue;
        for (int k = 0; k < n->n_in; k++) {
            const tt_value *x = n->in[k];
            const tt_node *p = x->producer;
            if (x->role != TT_ROLE_ACT || !p || p->id >= t->n_fwd || block_of(g, p) < 0) continue;
            int blk = block_of(g, p), leaves = 0;
            for (int j = 0; j < t->n_fwd && !leaves; j++)
                for (int q = 0; q < g->nodes[j]->n_in; q++)
                    if (g->nodes[j]->in[q] == x && block_of(g, g->nodes[j]) != blk) leaves = 1;
            /* selective keeps what the op table says (matmuls, attention, the MoE router, sort and grouped
             * matmuls) */
            int kept = leaves || (ac == TT_AC_SELECTIVE && (tt_ops[p->op]->flags & TT_OPF_KEEP_SELECTIVE)) ||
                       ac == TT_AC_NONE;
            if (!kept) {
                if (bad < 3)
                    fprintf(stderr, "%s %s: %s (%s) reads %s output of %s\n", name, tt_ac_mode_name(ac),
                            tt_op_name(n->op), n->scope, tt_op_name(p->op), p->scope);
                bad++;
            }
        }
    }
    CHECK_MSG(bad == 0, "%s %s: %d reads of activations the mode does not save", name, tt_ac_mode_name(ac), bad);
    CHECK_MSG(bad_unit == 0, "%s %s: %d .remat nodes outside a block unit", name, tt_ac_mode_name(ac), bad_unit);
    CHECK_MSG(clones == r->st.nodes, "%s %s: %d .remat nodes, the pass says %d", name, tt_ac_mode_name(ac), clones,
              r->st.nodes);
}

static int bitwise_equal(const float *a, const float *b, size_t n, size_t *where)
{
    for (size_t k = 0; k < n; k++)
        if (memcmp(&a[k], &b[k], sizeof *a)) {
            *where = k;
            return 0;
        }
    return 1;
}

static void test_modes_bitwise(variant va)
{
    const char *name = variant_names[va];
    float *w = NULL;
    tt_model *m = make_model(va, &w);
    CHECK_MSG(m != NULL, "%s", tt_last_error());
    if (!m) return;
    batch bt;
    make_batch(&bt);
    result r[3];
    tt_remat_stats st[3];
    for (int ac = 0; ac < 3; ac++) {
        remat_graph t;
        r[ac] = run(m, w, &bt, (tt_ac_mode)ac, TT_EXEC_GRAPH, &t);
        check_saved(&t, m, (tt_ac_mode)ac, name);
        st[ac] = t.st;
        if (ac == TT_AC_NONE) CHECK(t.st.nodes == 0 && t.st.blocks == 0 && t.st.flops == 0);
        else CHECK_MSG(t.st.blocks == m->cfg.n_layers, "%s %s: %d blocks recompute", name,
                       tt_ac_mode_name((tt_ac_mode)ac), t.st.blocks);
        th_train_graph_free(&t.t);
    }
    /* full recomputes the matmuls and attention too; selective only cheap ops */
    CHECK(st[2].nodes > st[1].nodes && st[1].nodes > 0);
    CHECK(st[2].flops > 10 * st[1].flops && st[2].flops < 0.5 * st[0].graph_flops);
    printf("%-24s arena none %zu  selective %zu  full %zu bytes; loss %.7f\n", name, r[0].arena, r[1].arena,
           r[2].arena, r[0].loss);
    CHECK(fabs(r[0].loss - log((double)V)) < 0.5); /* a fresh model is near uniform */
    for (int ac = 1; ac < 3; ac++) {
        size_t at = 0;
        CHECK_MSG(r[ac].ok && memcmp(&r[ac].loss, &r[0].loss, sizeof(float)) == 0, "%s %s: loss %.9g vs %.9g", name,
                  tt_ac_mode_name((tt_ac_mode)ac), r[ac].loss, r[0].loss);
        CHECK_MSG(bitwise_equal(r[ac].grad, r[0].grad, m->numel, &at), "%s %s: gradient %zu: %.9g vs %.9g", name,
                  tt_ac_mode_name((tt_ac_mode)ac), at, r[ac].grad[at], r[0].grad[at]);
        CHECK(r[ac].n_nodes == r[0].n_nodes + st[ac].nodes);
    }
    CHECK_MSG(r[2].arena < r[1].arena && r[1].arena < r[0].arena, "%s: arenas none %zu selective %zu full %zu", name,
              r[0].arena, r[1].arena, r[2].arena);
    for (int ac = 0; ac < 3; ac++) free(r[ac].grad);

    /* eager and debug run the recomputed graph too (debug: reference kernels, NaN checks) */
    const tt_exec_mode other[2] = {TT_EXEC_EAGER, TT_EXEC_DEBUG};
    result ref = run(m, w, &bt, TT_AC_NONE, TT_EXEC_DEBUG, NULL);
    for (int k = 0; k < 2; k++) {
        result full = run(m, w, &bt, TT_AC_FULL, other[k], NULL), none = run(m, w, &bt, TT_AC_NONE, other[k], NULL);
        CHECK(full.ok && none.ok);
        size_t at = 0;
        /* the same kernels on the same inputs: bitwise equal to the mode's own run without checkpointing */
        CHECK_MSG(memcmp(&full.loss, &none.loss, sizeof(float)) == 0 && bitwise_equal(full.grad, none.grad, m->numel, &at),
                  "%s %s: full differs from none (gradient %zu)", name, k ? "debug" : "eager", at);
        double maxd = 0, maxg = 0;
        for (size_t q = 0; q < m->numel; q++) {
            maxd = fmax(maxd, fabs(full.grad[q] - ref.grad[q]));
            maxg = fmax(maxg, fabs(ref.grad[q]));
        }
        CHECK_NEAR(full.loss, ref.loss, 1e-5);
        CHECK_MSG(maxd <= 1e-4 * maxg + 1e-7, "%s %s full: max grad difference %g from the reference", name,
                  k ? "debug" : "eager", maxd);
        free(full.grad);
        free(none.grad);
    }
    free(ref.grad);
    free(w);
    tt_model_free(m);
}

/* The run's graph (fused, in fp32 or bf16): tt_build_micro_step with each
 * mode accumulates the same gradients into the train state, and reports
 * the arena it saves. */
static void test_step_graph(variant va, tt_dtype dt)
{
    float *w = NULL;
    tt_model *m = make_model(va, &w);
    CHECK(m != NULL);
    if (!m) return;
    batch bt;
    make_batch(&bt);
    const tt_backend *be = tt_backend_get("cpu");
    tt_queue *q = be ? be->queue_new() : NULL;
    CHECK_MSG(q != NULL, "%s", tt_last_error());
    if (!q) {
        free(w);
        tt_model_free(m);
        return;
    }
    tt_step_cfg cfg = {.B = B, .T = T, .act_dtype = dt};
    float *grad[3] = {0}, loss[3] = {0};
    size_t arena[3] = {0}, arena_no_ac[3] = {0};
    for (int ac = 0; ac < 3; ac++) {
        tt_train_state st;
        tt_step_graph sg;
        int rc = tt_state_init(&st, m, be, q, 1);
        CHECK_MSG(rc == 0, "%s", tt_last_error());
        if (rc) continue;
        CHECK_MSG((rc = tt_state_upload(&st, TT_STATE_PARAM, w)) == 0, "%s", tt_last_error());
        if (!rc) {
            rc = tt_build_micro_step(&sg, m, &st, &cfg, 1, TT_EXEC_GRAPH, (tt_ac_mode)ac, NULL);
            CHECK_MSG(rc == 0, "%s", tt_last_error());
        }
        if (rc == 0) {
            double l = 0;
            CHECK(sg.ac == (tt_ac_mode)ac);
            CHECK_MSG(tt_step_set_batch(&sg, bt.ids, bt.tg, bt.pos, bt.doc, bt.scale, 1.0f) == 0, "%s", tt_last_error());
            CHECK(tt_exec_run(sg.exec) == 0 && tt_exec_run(sg.exec) == 0); /* two micro-steps accumulate */
            CHECK_MSG(tt_step_loss(&sg, &l) == 0, "%s", tt_last_error());
            loss[ac] = (float)l;
            arena[ac] = tt_exec_arena_bytes(sg.exec);
            arena_no_ac[ac] = sg.arena_no_ac;
            /* full: each block boundary's norm (the fused add_rmsnorm ending a block, read by the next)
             * is rebuilt by an rmsnorm of the saved sum, not saved: L - 1 of them (the last block's
             * norm is the head's) */
            int renorms = 0;
            for (int i = 0; i < sg.g->n_nodes; i++) {
                const tt_node *n = sg.g->nodes[i];
                renorms += n->op == TT_OP_RMSNORM && strstr(n->scope, ".remat") && n->in[0]->producer &&
                           n->in[0]->producer->op == TT_OP_ADD_RMSNORM;
            }
            const int rms = strcmp(variant_names[va], "gpt2") != 0; /* GPT-2's layernorms fuse with nothing */
            CHECK_MSG(renorms == (ac == TT_AC_FULL && rms ? m->cfg.n_layers - 1 : 0), "%s %s: %d norms rebuilt at block edges",
                      variant_names[va], tt_ac_mode_name((tt_ac_mode)ac), renorms);
            grad[ac] = th_alloc(m->numel, sizeof(float));
            CHECK_MSG(tt_state_download(&st, TT_STATE_GRAD, grad[ac]) == 0, "%s", tt_last_error());
            tt_step_graph_free(&sg);
        }
        tt_state_free(&st);
    }
    for (int ac = 1; ac < 3; ac++) {
        size_t at = 0;
        CHECK_MSG(grad[ac] && grad[0] && bitwise_equal(grad[ac], grad[0], m->numel, &at), "%s %s %s: gradient %zu differs",
                  variant_names[va], tt_dtype_name(dt), tt_ac_mode_name((tt_ac_mode)ac), at);
        CHECK(memcmp(&loss[ac], &loss[0], sizeof(float)) == 0);
        CHECK_MSG(arena_no_ac[ac] == arena[0], "arena without checkpointing %zu, none's %zu", arena_no_ac[ac], arena[0]);
        CHECK(arena[ac] < arena[0]);
    }
    CHECK(arena_no_ac[0] == arena[0]);

    /* a forward-only (eval) graph has nothing to recompute */
    tt_train_state st;
    tt_step_graph sg;
    CHECK(tt_state_init(&st, m, be, q, 1) == 0);
    CHECK(tt_build_micro_step(&sg, m, &st, &cfg, 0, TT_EXEC_GRAPH, TT_AC_FULL, NULL) == 0);
    CHECK(sg.ac == TT_AC_NONE && sg.remat.nodes == 0);
    tt_step_graph_free(&sg);
    tt_state_free(&st);
    be->queue_free(q);
    for (int ac = 0; ac < 3; ac++) free(grad[ac]);
    free(w);
    tt_model_free(m);
}

static void test_errors(void)
{
    CHECK(!strcmp(tt_ac_mode_name(TT_AC_SELECTIVE), "selective"));

    /* a tiny graph: x -> a = x + x -> b = a + a, in scope layers.0 and a block unit */
    tt_graph *g = tt_graph_new();
    int64_t four = 4;
    tt_value *x = tt_value_new(g, TT_ROLE_PARAM, TT_F32, 1, &four);
    const int u = tt_graph_add_unit(g, "layers.0", 1);
    CHECK(u == 0 && g->n_units == 1 && g->units[0].block);
    tt_graph_set_scope(g, "layers.0");
    tt_graph_set_unit(g, u);
    tt_value *a = tt_add(g, x, x), *b = tt_add(g, a, a);
    (void)b;
    CHECK(g->n_nodes == 2);
    CHECK(g->nodes[0]->unit == u && g->nodes[1]->unit == u);
    CHECK(tt_remat(g, 3, TT_AC_FULL, NULL) == -1);  /* more forward nodes than the graph has */
    CHECK(tt_remat(g, -1, TT_AC_FULL, NULL) == -1);
    CHECK(tt_remat(g, 2, (tt_ac_mode)7, NULL) == -1);
    CHECK(strstr(tt_last_error(), "mode") != NULL);
    tt_remat_stats st;
    CHECK(tt_remat(g, 2, TT_AC_FULL, &st) == 0 && st.nodes == 0); /* no backward: nothing to do */
    CHECK(g->n_nodes == 2);

    /* the reorder helper refuses a use before definition and a repeated node, leaving the order alone */
    tt_node *swapped[2] = {g->nodes[1], g->nodes[0]}, *twice[2] = {g->nodes[0], g->nodes[0]};
    tt_node *n0 = g->nodes[0], *n1 = g->nodes[1];
    CHECK(tt_graph_set_order(g, swapped) == -1 && strstr(tt_last_error(), "before it is produced"));
    CHECK(tt_graph_set_order(g, twice) == -1 && strstr(tt_last_error(), "distinct"));
    CHECK(g->nodes[0] == n0 && g->nodes[1] == n1 && n0->id == 0 && n1->id == 1);
    tt_node *same[2] = {n0, n1};
    CHECK(tt_graph_set_order(g, same) == 0);

    /* a clone: same op and attributes, fresh outputs shaped like the original's */
    tt_node *c = tt_node_clone(g, n1, (tt_value *[]){x, x});
    CHECK(c && c->op == n1->op && c->out[0] != n1->out[0] && c->out[0]->producer == c && c->in[0] == x &&
          !strcmp(c->scope, "layers.0") && c->unit == u && c->id == 2 && tt_value_numel(c->out[0]) == 4);
    tt_graph_free(g);
}

int main(void)
{
    test_errors();
    test_modes_bitwise(LLAMA);
    test_modes_bitwise(GPT2);
    test_modes_bitwise(QWEN);
    test_modes_bitwise(MOE);
    for (int va = LLAMA; va <= MOE; va++) { /* the fused step graphs of every architecture */
        test_step_graph((variant)va, TT_F32);
        test_step_graph((variant)va, TT_BF16);
    }
    return th_done("test_remat");
}

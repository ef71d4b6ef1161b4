/* test_fsdp.c — the FSDP pass and its schedule on the step graphs of small
 * models (llama, gpt2 with tied embeddings, llama with q/k/v biases and q/k
 * norms), without running them (tests/mpi_train.sh runs them on ranks):
 *   - no node reads a unit's whole weights or gradients any more: every
 *     parameter read is of a gathered bucket, every gradient goes to a
 *     bucket's buffer; each bucket is gathered once for the forward and once
 *     more for the backward where it reshards, and reduced once;
 *   - the schedule overlaps: bucket k+1's gather is issued before bucket k's
 *     first reader in the forward, and a reduction's wait comes after the
 *     next reduction's start, and the graph without the schedule waits for
 *     each collective right after starting it;
 *   - accumulating micro-steps (no reduction until the last) and data
 *     parallelism (no gathers) make the graphs they should;
 *   - the plan of a mesh: the train state of a rank shrinks as 1/N;
 *   - LoRA's graphs: the frozen base gathered as it is stored and never
 *     reduced, the adapters gathered and reduced as trained units. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "harness.h"
#include "train/model_plan.h"
#include "train/step_graph.h"

typedef enum { LLAMA, GPT2, QWEN } variant;
static const char *const variant_names[] = {"llama", "gpt2 (tied)", "llama+qkv_bias+qk_norm"};

static tt_model *make_model(variant va)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = va == GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    c.dim = 32, c.n_layers = 3, c.n_heads = 4, c.n_kv_heads = va == GPT2 ? 4 : 2, c.head_dim = 8;
    c.ffn_dim = 48, c.vocab_size = 40, c.max_seq_len = 64, c.norm_eps = 1e-5, c.rope.theta = 10000;
    c.tie_embeddings = va == GPT2;
    c.qkv_bias = c.qk_norm = va == QWEN;
    return tt_model_new(&c);
}

static int is_comm(const tt_node *n) { return (tt_ops[n->op]->flags & TT_OPF_COMM) != 0; }

/* The position of the wait of the collective started at node s. */
static int wait_of(const tt_graph *g, int s)
{
    for (int i = s + 1; i < g->n_nodes; i++)
        if (g->nodes[i]->op == TT_OP_COMM_WAIT && g->nodes[i]->in[0]->producer == g->nodes[s]) return i;
    return -1;
}

typedef struct {
    int gathers, reductions, waits_right_after;
    int overlapped_gathers; /* gathers issued before the previous bucket's gather was waited for and used */
    int overlapped_reductions;
} shape;

static shape look(const tt_step_graph *sg, const tt_model *m, const char *what)
{
    const tt_graph *g = sg->g;
    shape s = {0};
    int last_gather_wait = -1, last_red_start = -1, last_red_wait = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        /* nothing reads or writes a unit's root any more, nor the gradient roots */
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            const tt_value *r = tt_value_root(k < n->n_in ? n->in[k] : n->out[k - n->n_in]);
            for (int u = 0; u < m->n_units; u++)
                CHECK_MSG(r != sg->units[u] || sg->fsdp.param_shard[0] == NULL,
                          "%s: node %d (%s %s) touches unit %d's whole weights", what, i, tt_op_name(n->op), n->scope,
                          u);
            for (int u = 0; u < m->n_units; u++)
                CHECK_MSG(r != sg->grad_units[u], "%s: node %d (%s) touches unit %d's gradient root", what, i,
                          tt_op_name(n->op), u);
        }
        if (!is_comm(n) || n->op == TT_OP_COMM_WAIT) continue;
        const int w = wait_of(g, i);
        CHECK_MSG(w > i, "%s: the collective at node %d is never waited for", what, i);
        s.waits_right_after += w == i + 1;
        if (n->op == TT_OP_ALL_GATHER) {
            s.gathers++;
            /* issued right after the previous gather's wait (a cast to the parameter dtype between) */
            if (last_gather_wait >= 0 && i <= last_gather_wait + 2) s.overlapped_gathers++;
            last_gather_wait = w;
        } else if (n->op == TT_OP_REDUCE_SCATTER || (n->op == TT_OP_ALL_REDUCE && strcmp(n->scope, "optimizer.clip"))) {
            /* a replicate all-reduce after a reduce-scatter belongs to it */
            if (last_red_start >= 0 && n->in[0]->producer && n->in[0]->producer->op == TT_OP_COMM_WAIT) continue;
            s.reductions++;
            if (last_red_wait > i) s.overlapped_reductions++;
            last_red_start = i, last_red_wait = w;
        }
    }
    return s;
}

static void test_model(variant va)
{
    tt_model *m = make_model(va);
    CHECK(m != NULL);
    if (!m) return;
    const char *name = variant_names[va];
    for (int mode = 0; mode < 3; mode++) { /* FSDP on 4, HSDP 2 x 2, data parallel on 4 */
        const int shards = mode == 2 ? 1 : mode == 1 ? 2 : 4, replicas = 4 / shards;
        tt_sharding sh;
        CHECK(tt_sharding_init(&sh, m, shards, replicas, shards - 1, 1, 0) == 0);
        CHECK_MSG(sh.n_buckets == m->n_units, "%s: one bucket a unit by default", name);
        for (int overlap = 0; overlap < 2; overlap++)
            for (int accum = 0; accum < 2; accum++)
                for (int nosync = 0; nosync <= accum; nosync++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s, %d x %d%s%s%s", name, replicas, shards,
                             overlap ? "" : ", no overlap", accum ? ", accumulating" : "", nosync ? ", no sync" : "");
                    tt_step_cfg c = {.B = 2, .T = 16, .act_dtype = TT_BF16, .sh = &sh, .reduce_dtype = TT_BF16,
                                     .reshard_after_forward = 1, .accumulates = accum, .no_sync = nosync,
                                     .no_overlap = !overlap};
                    tt_step_graph sg;
                    int rc = tt_build_micro_graph(&sg, m, &c, 1, TT_AC_SELECTIVE);
                    CHECK_MSG(rc == 0, "%s: %s", what, tt_last_error());
                    if (rc) continue;
                    const shape s = look(&sg, m, what);
                    /* every bucket gathered for the forward, and again for the backward but the last the
                     * forward uses (the head) and the embeddings (no backward node reads a lookup table; the
                     * tied head's gradient is the loss node's, in the forward) */
                    const int want_gathers = shards == 1 ? 0 : 2 * sh.n_buckets - 2;
                    CHECK_MSG(s.gathers == want_gathers && sg.fsdp.gathers == want_gathers,
                              "%s: %d gathers (the pass says %d), want %d", what, s.gathers, sg.fsdp.gathers,
                              want_gathers);
                    const int want_red = nosync ? 0 : sh.n_buckets;
                    CHECK_MSG(s.reductions == want_red && sg.fsdp.reductions == want_red, "%s: %d reductions, want %d",
                              what, s.reductions, want_red);
                    for (int b = 0; b < sh.n_buckets; b++) {
                        CHECK(sg.fsdp.grad_shard[b] != NULL);
                        CHECK_MSG((sg.fsdp.grad_full[b] != NULL) == (accum && shards > 1),
                                  "%s: full gradients in the state exactly when a sharded run accumulates", what);
                        CHECK((sg.fsdp.param_shard[b] != NULL) == (shards > 1));
                    }
                    if (overlap && !nosync) {
                        CHECK_MSG(s.overlapped_gathers == (want_gathers ? want_gathers - 1 : 0),
                                  "%s: %d of %d gathers overlap the bucket before", what, s.overlapped_gathers,
                                  want_gathers);
                        CHECK_MSG(s.overlapped_reductions == want_red - 1,
                                  "%s: %d reductions wait after the next one started, want %d", what,
                                  s.overlapped_reductions, want_red - 1);
                    }
                    if (!overlap) {
                        CHECK_MSG(s.overlapped_gathers == 0 && s.overlapped_reductions == 0,
                                  "%s: without the schedule nothing overlaps", what);
                    }
                    tt_step_graph_free(&sg);
                }
        tt_sharding_free(&sh);
    }
    /* a forward-only graph (validation): gathers, nothing reduced */
    tt_sharding sh;
    CHECK(tt_sharding_init(&sh, m, 2, 1, 0, 1, 0) == 0);
    tt_step_cfg c = {.B = 1, .T = 8, .act_dtype = TT_F32, .sh = &sh, .reshard_after_forward = 1};
    tt_step_graph sg;
    CHECK(tt_build_micro_graph(&sg, m, &c, 0, TT_AC_NONE) == 0);
    const shape s = look(&sg, m, "forward only");
    CHECK_MSG(s.gathers == sh.n_buckets && s.reductions == 0, "%s forward only: %d gathers, %d reductions", name,
              s.gathers, s.reductions);
    tt_step_graph_free(&sg);
    tt_sharding_free(&sh);
    tt_model_free(m);
}

/* Counts how often each element of the flat layout is in a slice. */
typedef struct {
    int *seen;
    int64_t numel;
    int bad;
} cover;

static tt_err count_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    cover *c = ctx;
    (void)at;
    if (flat < 0 || n < 0 || flat + n > c->numel) c->bad++;
    else
        for (int64_t i = flat; i < flat + n; i++) c->seen[i]++;
    return 0;
}

/* Every element of the model in exactly one slice over the shard group. */
static void check_cover(const tt_model *m, int shards, int ep, size_t merge, const char *what)
{
    cover c = {calloc(m->numel + 1, sizeof(int)), (int64_t)m->numel, 0};
    int64_t numel = -1;
    for (int r = 0; r < shards && c.seen; r++) {
        tt_sharding sh;
        CHECK_MSG(tt_sharding_init(&sh, m, shards, 1, r, ep, merge) == 0, "%s: %s", what, tt_last_error());
        CHECK(numel < 0 || numel == sh.numel); /* every rank's shard buffer is the same size */
        numel = sh.numel;
        int64_t sum = 0;
        for (int b = 0; b < sh.n_buckets; b++) {
            const tt_fsdp_bucket *bk = &sh.buckets[b];
            const int gs = tt_sharding_group_size(&sh, b);
            CHECK(bk->padded % gs == 0 && bk->padded >= bk->numel);
            if (shards > 1) CHECK((bk->padded / gs) % 16 == 0);
            CHECK(gs == (bk->expert ? shards / ep : shards));
            sum += bk->padded / gs;
            tt_sharding_slice_pieces(&sh, b, r, count_piece, &c);
        }
        CHECK(sum == sh.numel);
        if (shards == 1) CHECK(sh.numel == (int64_t)m->numel); /* one shard: the model's own layout */
        tt_sharding_free(&sh);
    }
    int64_t once = 0;
    for (int64_t i = 0; c.seen && i < c.numel; i++) once += c.seen[i] == 1;
    CHECK_MSG(c.seen && !c.bad && once == c.numel, "%s: %lld of %lld elements in exactly one slice", what,
              (long long)once, (long long)c.numel);
    free(c.seen);
}

static tt_model *make_moe(int shared)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = TT_ARCH_LLAMA;
    c.dim = 32, c.n_layers = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
    c.ffn_dim = 48, c.vocab_size = 40, c.max_seq_len = 64, c.norm_eps = 1e-5, c.rope.theta = 10000;
    c.moe.n_experts = 4, c.moe.top_k = 2, c.moe.ffn_dim = 16, c.moe.score_func = TT_SCORE_SOFTMAX;
    c.moe.route_norm = 1, c.moe.route_scale = 1, c.moe.n_dense_layers = 1, c.moe.sparse_step = 1;
    if (shared) c.moe.n_shared = 1, c.moe.shared_ffn = 16;
    return tt_model_new(&c);
}

/* The layout: buckets of whole units, each slice aligned, every element of
 * the model on exactly one shard rank; merged buckets under a byte size;
 * under expert parallelism an MoE block's experts in a bucket of their own,
 * a rank's experts over the ranks that share its place in the expert group. */
static void test_sharding(void)
{
    tt_model *m = make_model(LLAMA);
    if (!m) return;
    for (int shards = 1; shards <= 8; shards *= 2)
        for (int merge = 0; merge < 2; merge++) {
            tt_sharding sh;
            CHECK(tt_sharding_init(&sh, m, shards, 1, 0, 1, merge ? 100000 : 0) == 0);
            if (merge) CHECK_MSG(sh.n_buckets < m->n_units, "units under 100 kB merge (%d buckets)", sh.n_buckets);
            for (int b = 0; b < sh.n_buckets; b++) CHECK(sh.buckets[b].offset == m->units[sh.buckets[b].first_unit].offset);
            tt_sharding_free(&sh);
            char what[64];
            snprintf(what, sizeof what, "%d shards%s", shards, merge ? ", merged" : "");
            check_cover(m, shards, 1, merge ? 100000 : 0, what);
        }
    tt_sharding bad;
    CHECK(tt_sharding_init(&bad, m, 2, 1, 2, 1, 0) != 0 && strstr(tt_last_error(), "shard rank 2"));
    tt_model_free(m);

    for (int shared = 0; shared < 2; shared++) {
        tt_model *x = make_moe(shared);
        CHECK(x != NULL);
        if (!x) continue;
        CHECK(x->units[1].n_experts == 0 && x->units[2].n_experts == 4 && x->units[2].n_expert_ranges == 2);
        static const int meshes[][2] = {{2, 2}, {4, 2}, {4, 4}, {8, 2}, {4, 1}};
        for (int k = 0; k < 5; k++) {
            char what[64];
            snprintf(what, sizeof what, "MoE%s, %d shards, experts over %d", shared ? " + shared" : "", meshes[k][0],
                     meshes[k][1]);
            check_cover(x, meshes[k][0], meshes[k][1], shared ? 100000 : 0, what);
        }
        tt_sharding sh;
        CHECK(tt_sharding_init(&sh, x, 4, 1, 3, 2, 0) == 0);
        int experts = 0;
        for (int b = 0; b < sh.n_buckets; b++) experts += sh.buckets[b].expert;
        CHECK_MSG(experts == 2 && sh.n_buckets == x->n_units + 2, "two MoE blocks, each two buckets (%d, %d)", experts,
                  sh.n_buckets);
        tt_sharding_free(&sh);
        CHECK(tt_sharding_init(&sh, x, 4, 1, 0, 3, 0) != 0);             /* 3 does not divide 4 shards */
        CHECK(tt_sharding_init(&sh, x, 8, 1, 0, 8, 0) != 0 && strstr(tt_last_error(), "does not divide the 4 experts"));
        tt_model_free(x);
    }
}

/* titan plan for a mesh: the state a rank holds is 1/N, sends are counted. */
static void test_plan(void)
{
    tt_config *c = calloc(1, sizeof *c);
    if (!c) return;
    tt_model_plan p1, p4;
    tt_config_defaults(c);
    CHECK(tt_config_finalize(c) == 0);
    CHECK(tt_model_plan_build(c, &p1) == 0);
    CHECK(p1.replicas * p1.shards == 1 && p1.rank_state_bytes == 0);
    CHECK(tt_config_set(c, "parallelism.data_parallel_shard_degree", "4", "test") == 0 && tt_config_finalize(c) == 0);
    CHECK_MSG(tt_model_plan_build(c, &p4) == 0, "%s", tt_last_error());
    /* one process in bf16 keeps a bf16 copy of its weights (2 bytes a parameter more); a shard of a mesh none */
    CHECK_MSG(p1.w16_bytes == (p1.dtype == TT_BF16 ? 2.0 * (double)p1.params : 0.0) && p4.w16_bytes == 0,
              "the bf16 weight copy: %.0f bytes in one process (%s), %.0f a rank of 4", p1.w16_bytes,
              tt_dtype_name(p1.dtype), p4.w16_bytes);
    const double whole = p1.param_bytes + p1.grad_bytes + p1.optim_bytes;
    CHECK_MSG(p4.shards == 4 && p4.rank_state_bytes * 4 >= whole && p4.rank_state_bytes * 4 <= whole * 1.01,
              "a rank of 4 holds %.0f bytes of %.0f", p4.rank_state_bytes, whole);
    CHECK(p4.gather_bytes > 0 && p4.reduce_bytes > 0);
    free(c);
}

/* Expert parallelism in the step graph of rank 3 of 4 (EP 2: experts 2-3 of
 * 4, sliced over ranks 1 and 3): each MoE layer exchanges its rows over the
 * expert group (counts, dispatch and combine forward, the two reverse
 * exchanges backward), its grouped matmuls read this rank's two experts, its
 * experts are gathered and reduced over the expert shard group; with the
 * schedule the dispatch is waited for after the shared experts, without it
 * every collective right after its start. */
static void test_expert_parallel(void)
{
    tt_model *m = make_moe(1);
    if (!m) return;
    tt_sharding sh;
    CHECK(tt_sharding_init(&sh, m, 4, 1, 3, 2, 0) == 0);
    for (int overlap = 0; overlap < 2; overlap++) {
        tt_step_cfg c = {.B = 2, .T = 16, .act_dtype = TT_BF16, .sh = &sh, .reduce_dtype = TT_F32,
                         .reshard_after_forward = 1, .no_overlap = !overlap};
        tt_step_graph sg;
        int rc = tt_build_micro_graph(&sg, m, &c, 1, TT_AC_SELECTIVE);
        CHECK_MSG(rc == 0, "EP graph: %s", tt_last_error());
        if (rc) continue;
        const tt_graph *g = sg.g;
        int a2a = 0, counts = 0, expert_gathers = 0, expert_reductions = 0, grouped = 0, local = 0, right_after = 0,
            starts = 0, hidden = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const tt_node *n = g->nodes[i];
            if (n->op == TT_OP_GROUPED_MATMUL) grouped++, local += n->in[1]->shape[0] == 2;
            if (!is_comm(n) || n->op == TT_OP_COMM_WAIT) continue;
            const int grp = TT_ATTRS(n, tt_comm_attrs)->group, w = wait_of(g, i);
            starts++;
            right_after += w == i + 1;
            a2a += n->op == TT_OP_ALL_TO_ALLV && grp == TT_GROUP_EXPERT;
            counts += n->op == TT_OP_ALL_GATHER && grp == TT_GROUP_EXPERT;
            expert_gathers += n->op == TT_OP_ALL_GATHER && grp == TT_GROUP_EXPERT_SHARD;
            expert_reductions += n->op == TT_OP_REDUCE_SCATTER && grp == TT_GROUP_EXPERT_SHARD;
            if (n->op == TT_OP_ALL_TO_ALLV && strstr(n->scope, "moe") && i < g->n_nodes && w > i) {
                int shared = 0; /* the shared experts' matmuls between the dispatch and its wait */
                for (int j = i + 1; j < w; j++) shared += g->nodes[j]->op == TT_OP_MATMUL;
                hidden += shared > 0;
            }
        }
        CHECK_MSG(a2a == 8 && counts == 2, "EP: %d exchanges (want 2 MoE layers x 4), %d count gathers (want 2)", a2a,
                  counts);
        CHECK_MSG(expert_gathers == 4 && expert_reductions == 2,
                  "EP: experts gathered %d times (forward and backward of 2 layers), reduced %d times over their group",
                  expert_gathers, expert_reductions);
        CHECK_MSG(grouped > 0 && local == grouped, "EP: %d of %d grouped matmuls read this rank's 2 experts", local,
                  grouped);
        if (overlap) CHECK_MSG(hidden >= 2, "EP: %d exchanges run while the shared experts compute", hidden);
        else CHECK_MSG(right_after == starts, "EP, no overlap: %d of %d collectives waited right after", right_after, starts);
        tt_step_graph_free(&sg);
    }
    tt_sharding_free(&sh);
    tt_model_free(m);
}

/* The collectives of EP step graphs, in order: each start's op, group, shapes,
 * scope and name, each wait's, and the count of other nodes since the one
 * before (where it sits). Expert parallelism moved from the model into a
 * graph pass (graph/passes/ep.c); the fixture holds what the model-built
 * exchanges gave (rank 3 of 4, EP 2; with and without the schedule, shared
 * experts and a receive bound), so the pass must give the same collectives in
 * the same places. TT_WRITE_FIXTURE=1 rewrites it. */
#define EP_FIXTURE TITAN_SOURCE_DIR "/tests/fixtures/ep_collectives.txt"
static void test_ep_collectives(void)
{
    static const struct { int shared, overlap; double recv_factor; } cases[] = {
        {1, 0, 0}, {1, 1, 0}, {0, 1, 0}, {1, 1, 1.25}};
    size_t cap = 1 << 20, len = 0;
    char *got = calloc(cap, 1);
    if (!got) return;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tt_model *m = make_moe(cases[k].shared);
        tt_sharding sh;
        CHECK(m && tt_sharding_init(&sh, m, 4, 1, 3, 2, 0) == 0);
        if (!m) continue;
        tt_step_cfg c = {.B = 2, .T = 16, .act_dtype = TT_BF16, .sh = &sh, .reduce_dtype = TT_F32,
                         .reshard_after_forward = 1, .no_overlap = !cases[k].overlap,
                         .ep_recv_factor = cases[k].recv_factor};
        tt_step_graph sg;
        int rc = tt_build_micro_graph(&sg, m, &c, 1, TT_AC_SELECTIVE);
        CHECK_MSG(rc == 0, "EP graph: %s", tt_last_error());
        len += (size_t)snprintf(got + len, cap - len, "# shared %d, overlap %d, receive factor %g\n",
                                cases[k].shared, cases[k].overlap, cases[k].recv_factor);
        for (int i = 0, since = 0; !rc && i < sg.g->n_nodes; i++) {
            const tt_node *n = sg.g->nodes[i];
            if (!is_comm(n)) {
                since++;
                continue;
            }
            const tt_node *s = n->op == TT_OP_COMM_WAIT ? n->in[0]->producer : n;
            char a[64], b[64];
            tt_value_desc(n->in[0], a, sizeof a), tt_value_desc(n->out[0], b, sizeof b);
            len += (size_t)snprintf(got + len, cap - len, "%d %s %s%s g%d %s -> %s @%s '%s'\n", since,
                                    tt_op_name(n->op), n == s ? "" : "of ", n == s ? "" : tt_op_name(s->op),
                                    TT_ATTRS(s, tt_comm_attrs)->group, a, b, n->scope, TT_ATTRS(s, tt_comm_attrs)->what);
            since = 0;
        }
        if (!rc) tt_step_graph_free(&sg);
        tt_sharding_free(&sh);
        tt_model_free(m);
    }
    if (getenv("TT_WRITE_FIXTURE")) {
        FILE *f = fopen(EP_FIXTURE, "w");
        CHECK(f && fwrite(got, 1, len, f) == len);
        if (f) fclose(f);
    }
    FILE *f = fopen(EP_FIXTURE, "r");
    char *want = calloc(cap, 1);
    const size_t wl = f && want ? fread(want, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    CHECK_MSG(wl > 0, "no fixture %s", EP_FIXTURE);
    if (wl > 0 && (wl != len || memcmp(want, got, len))) { /* name the first line that differs */
        size_t i = 0, line = 1;
        while (i < len && i < wl && want[i] == got[i]) line += want[i++] == '\n';
        size_t w0 = i, g0 = i;
        while (w0 > 0 && want[w0 - 1] != '\n') w0--;
        while (g0 > 0 && got[g0 - 1] != '\n') g0--;
        CHECK_MSG(0, "EP collectives differ from %s at line %zu:\n  want %.*s\n  got  %.*s", EP_FIXTURE, line,
                  (int)strcspn(want + w0, "\n"), want + w0, (int)strcspn(got + g0, "\n"), got + g0);
    }
    free(want);
    free(got);
}

/* LoRA's step graph on rank 3 of 4 (FSDP 4, HSDP 2 x 2, data parallel 4), a bf16 base: the frozen base's buckets
 * are gathered as the words they are (no cast on either side of the gather: a word holds two bf16 weights) from
 * frozen shard roots and never reduced; the adapters' buckets are gathered and reduced as trained units are (a
 * reduction a block: the embeddings' and the head's units have no adapter); no node reads a whole unit of either
 * any more; under data parallelism nothing is gathered and the adapters' gradients are all-reduced. And the plan:
 * a rank of 4 holds a quarter of the base, in its dtype, and of the adapters' state. */
static void test_lora(void)
{
    tt_model *m = make_model(LLAMA);
    tt_lora lora;
    const tt_lora_spec spec = {.rank = 4, .alpha = 8, .all_linear = 1};
    CHECK(m && tt_lora_new(m, &spec, &lora) == 0);
    if (!m) return;
    for (int mode = 0; mode < 3; mode++) {
        const int shards = mode == 2 ? 1 : mode == 1 ? 2 : 4, replicas = 4 / shards;
        tt_sharding sh;
        tt_frozen_base fb;
        CHECK(tt_sharding_init(&sh, lora.adapters, shards, replicas, shards - 1, 1, 0) == 0);
        CHECK(tt_frozen_plan(&fb, m, TT_BF16, &sh, 0) == 0);
        CHECK(tt_frozen_is_sharded(&fb) == (shards > 1) && fb.sh.n_buckets == m->n_units);
        tt_step_cfg c = {.B = 2, .T = 16, .act_dtype = TT_BF16, .sh = &sh, .reduce_dtype = TT_F32,
                         .reshard_after_forward = 1, .lora = &lora, .frozen = &fb};
        tt_step_graph sg;
        int rc = tt_build_micro_graph(&sg, m, &c, 1, TT_AC_SELECTIVE);
        CHECK_MSG(rc == 0, "LoRA %d x %d: %s", replicas, shards, tt_last_error());
        if (rc) continue;
        const tt_graph *g = sg.g;
        int frozen_gathers = 0, adapter_gathers = 0, reductions = 0, whole_reads = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const tt_node *n = g->nodes[i];
            for (int k = 0; k < n->n_in; k++)
                for (int u = 0; u < m->n_units; u++) {
                    const tt_value *r = tt_value_root(n->in[k]);
                    whole_reads += shards > 1 && r && (r == sg.units[u] || r == sg.adapter_units[u]);
                }
            if (n->op == TT_OP_ALL_GATHER) {
                const tt_value *in = n->in[0];
                if (in->role == TT_ROLE_FROZEN) {
                    frozen_gathers++;
                    const int w = wait_of(g, i);
                    int cast_after = 0;
                    for (int j = w + 1; w > 0 && j < g->n_nodes; j++)
                        cast_after |= g->nodes[j]->op == TT_OP_CAST && g->nodes[j]->in[0] == g->nodes[w]->out[0];
                    CHECK_MSG(!in->base && in->dtype == TT_F32 && !cast_after,
                              "LoRA %d x %d: a frozen bucket is gathered through a cast", replicas, shards);
                } else {
                    adapter_gathers++;
                    CHECK(in->producer && in->producer->op == TT_OP_CAST); /* the fp32 adapters in bf16 */
                }
            }
            if (n->op == TT_OP_REDUCE_SCATTER || (n->op == TT_OP_ALL_REDUCE && strcmp(n->scope, "optimizer.clip")))
                reductions += !(n->in[0]->producer && n->in[0]->producer->op == TT_OP_COMM_WAIT);
        }
        CHECK_MSG(whole_reads == 0, "LoRA %d x %d: %d reads of a whole unit", replicas, shards, whole_reads);
        /* the base: every unit forward, and again backward but the embeddings (no backward reads a frozen table)
         * and the head (the last the forward uses); the adapters: every block forward, and again but the last */
        const int L = m->cfg.n_layers;
        CHECK_MSG(frozen_gathers == (shards > 1 ? 2 * m->n_units - 2 : 0) && sg.frozen_fsdp.reductions == 0,
                  "LoRA %d x %d: %d gathers of the base", replicas, shards, frozen_gathers);
        CHECK_MSG(adapter_gathers == (shards > 1 ? 2 * L - 1 : 0), "LoRA %d x %d: %d gathers of the adapters",
                  replicas, shards, adapter_gathers);
        CHECK_MSG(reductions == L && sg.fsdp.reductions == L, "LoRA %d x %d: %d reductions, want one a block",
                  replicas, shards, reductions);
        tt_step_graph_free(&sg);
        tt_frozen_free(&fb);
        tt_sharding_free(&sh);
    }
    tt_lora_free(&lora);
    tt_model_free(m);

    tt_config *c = calloc(1, sizeof *c);
    if (!c) return;
    tt_model_plan p1, p4;
    tt_config_defaults(c);
    CHECK(tt_config_set(c, "lora.rank", "8", "test") == 0 &&
          tt_config_set(c, "lora.base_dtype", "bfloat16", "test") == 0 &&
          tt_config_set(c, "training.mixed_precision_param", "bfloat16", "test") == 0 && tt_config_finalize(c) == 0);
    CHECK_MSG(tt_model_plan_build(c, &p1) == 0, "%s", tt_last_error());
    CHECK(tt_config_set(c, "parallelism.data_parallel_shard_degree", "4", "test") == 0 && tt_config_finalize(c) == 0);
    CHECK_MSG(tt_model_plan_build(c, &p4) == 0, "%s", tt_last_error());
    const double adapters = p1.param_bytes - p1.frozen_bytes + p1.grad_bytes + p1.optim_bytes;
    CHECK_MSG(p4.rank_frozen_bytes * 4 >= p1.frozen_bytes && p4.rank_frozen_bytes * 4 <= p1.frozen_bytes * 1.01,
              "a rank of 4 holds %.0f bytes of a base of %.0f", p4.rank_frozen_bytes, p1.frozen_bytes);
    CHECK_MSG((p4.rank_state_bytes - p4.rank_frozen_bytes) * 4 >= adapters &&
                  (p4.rank_state_bytes - p4.rank_frozen_bytes) * 4 <= adapters * 1.1,
              "a rank of 4 holds %.0f bytes of the adapters' %.0f", p4.rank_state_bytes - p4.rank_frozen_bytes,
              adapters);
    free(c);
}

int main(void)
{
    test_sharding();
    test_expert_parallel();
    test_ep_collectives();
    for (int va = LLAMA; va <= QWEN; va++) test_model((variant)va);
    test_plan();
    test_lora();
    return th_done("test_fsdp");
}

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
 *   - the plan of a mesh: the train state of a rank shrinks as 1/N. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "harness.h"
#include "train/run.h"
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

static int is_comm(const tt_node *n) { return (tt_ops[n->op].flags & TT_OPF_COMM) != 0; }

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
        CHECK(tt_sharding_init(&sh, m, shards, replicas, shards - 1, 0) == 0);
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
    CHECK(tt_sharding_init(&sh, m, 2, 1, 0, 0) == 0);
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

/* The layout: buckets of whole units, each slice aligned, every element of
 * the model on exactly one shard rank; merged buckets under a byte size. */
static void test_sharding(void)
{
    tt_model *m = make_model(LLAMA);
    if (!m) return;
    for (int shards = 1; shards <= 8; shards *= 2)
        for (int merge = 0; merge < 2; merge++) {
            tt_sharding sh;
            CHECK(tt_sharding_init(&sh, m, shards, 1, 0, merge ? 100000 : 0) == 0);
            if (merge) CHECK_MSG(sh.n_buckets < m->n_units, "units under 100 kB merge (%d buckets)", sh.n_buckets);
            int64_t covered = 0, numel = 0;
            for (int b = 0; b < sh.n_buckets; b++) {
                const tt_fsdp_bucket *bk = &sh.buckets[b];
                CHECK(bk->padded % shards == 0 && bk->padded >= bk->numel);
                if (shards > 1) CHECK((bk->padded / shards) % 16 == 0);
                CHECK(bk->offset == m->units[bk->first_unit].offset);
                for (int r = 0; r < shards; r++) {
                    int64_t lo, hi;
                    tt_sharding_slice(&sh, b, r, &lo, &hi);
                    CHECK(lo >= bk->offset && hi <= bk->offset + bk->numel && lo <= hi);
                    covered += hi - lo;
                }
                numel += bk->padded / shards;
            }
            CHECK_MSG(covered == (int64_t)m->numel, "%d shards: the slices cover %lld of %zu elements", shards,
                      (long long)covered, m->numel);
            CHECK(numel == sh.numel);
            if (shards == 1) CHECK(sh.numel == (int64_t)m->numel); /* one shard: the model's own layout */
            tt_sharding_free(&sh);
        }
    tt_sharding bad;
    CHECK(tt_sharding_init(&bad, m, 2, 1, 2, 0) != 0 && strstr(tt_last_error(), "shard rank 2"));
    tt_model_free(m);
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
    const double whole = p1.param_bytes + p1.grad_bytes + p1.optim_bytes;
    CHECK_MSG(p4.shards == 4 && p4.rank_state_bytes * 4 >= whole && p4.rank_state_bytes * 4 <= whole * 1.01,
              "a rank of 4 holds %.0f bytes of %.0f", p4.rank_state_bytes, whole);
    CHECK(p4.gather_bytes > 0 && p4.reduce_bytes > 0);
    free(c);
}

int main(void)
{
    test_sharding();
    for (int va = LLAMA; va <= QWEN; va++) test_model((variant)va);
    test_plan();
    return th_done("test_fsdp");
}

/* test_lora_ranks.c — LoRA's frozen base sliced over as many processes as
 * launched the test (one under CTest's plain run; 2 and 4 under mpirun:
 * test_lora_ranks_mpi2, _mpi4), FSDP over the whole world:
 *   - a base with parameters of odd length in bf16 (a word holding half a
 *     parameter's last pair), written through the store: each rank holds its
 *     slices, about 1/N of the bytes; every parameter reads back (a read is
 *     collective) as one process's whole base holds it, bit for bit, and the
 *     hash of the sliced base is that whole base's, on every rank;
 *   - a LoRA run of the tiny Hugging Face Llama (rank 8, dropout 0.1, a bf16
 *     base, bf16 compute) trains 4 steps: every byte of every rank's slices
 *     of the base is as it was, the base's hash too, and the adapters moved
 *     (B is no longer zero). tests/mpi_lora.sh checks the losses. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "harness.h"
#include "titan/config.h"
#include "train/run_open.h"
#include "train/step.h"

static int rank, world;

/* A llama whose weights have odd lengths (dim 9, ffn 15, vocab 11): a bf16 pair straddles a parameter's end. */
static tt_model *odd_model(void)
{
    tt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = TT_ARCH_LLAMA;
    c.dim = 9, c.n_layers = 2, c.n_heads = 3, c.n_kv_heads = 3, c.head_dim = 2, c.ffn_dim = 15;
    c.vocab_size = 11, c.max_seq_len = 16, c.norm_eps = 1e-5, c.rope.theta = 10000;
    return tt_model_new(&c);
}

static void check_sliced_store(void)
{
    tt_model *m = odd_model();
    const tt_backend *be = tt_backend_get("cpu");
    tt_queue *q = be ? be->queue_new() : NULL;
    CHECK_MSG(m && q, "%s", tt_last_error());
    if (!m || !q) return;
    tt_sharding mesh;
    tt_frozen_base whole, sliced;
    CHECK(tt_sharding_init(&mesh, m, world, 1, rank, 1, 0) == 0);
    CHECK(tt_frozen_init(&whole, m, TT_BF16, be, q) == 0);
    int rc = tt_frozen_init_sharded(&sliced, m, TT_BF16, &mesh, 0, be, q);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (rc) return;
    CHECK(tt_frozen_is_sharded(&sliced) == (world > 1));
    /* each rank's slices: a 1/N share of the base, each bucket padded to a multiple of 64 bytes a rank */
    const size_t held = tt_frozen_rank_bytes(&sliced), all = whole.layout.bytes;
    CHECK_MSG(held * (size_t)world >= all && held * (size_t)world <= all + (size_t)sliced.sh.n_buckets * 64 * world,
              "rank %d holds %zu bytes of %zu", rank, held, all);
    tt_param_store ws = tt_frozen_store(&whole), ss = tt_frozen_store(&sliced), host;
    float *w = th_alloc(m->numel, sizeof *w), *a = th_alloc(m->numel, sizeof *a), *b = th_alloc(m->numel, sizeof *b);
    host = tt_model_host_store(w);
    CHECK(tt_model_init_weights(m, 7, &host) == 0);
    int odd = 0;
    for (int i = 0; i < m->n_params; i++) {
        CHECK(ws.write(ws.ctx, m, i, w + m->params[i].offset) == 0);
        CHECK(ss.write(ss.ctx, m, i, w + m->params[i].offset) == 0);
        odd += whole.layout.dtype[i] == TT_BF16 && tt_param_numel(&m->params[i]) % 2;
    }
    CHECK_MSG(odd > 0, "the model has no bf16 parameter of odd length");
    int same = 1;
    for (int i = 0; i < m->n_params; i++) {
        const size_t n = (size_t)tt_param_numel(&m->params[i]);
        CHECK(ws.read(ws.ctx, m, i, a) == 0 && ss.read(ss.ctx, m, i, b) == 0);
        same &= memcmp(a, b, n * sizeof *a) == 0;
    }
    CHECK_MSG(same, "rank %d: a parameter of the sliced base reads back other than the whole base's", rank);
    uint64_t hw = 0, hs = 1;
    CHECK(tt_frozen_hash(&whole, &hw) == 0 && tt_frozen_hash(&sliced, &hs) == 0);
    CHECK_MSG(hw == hs, "rank %d: the sliced base hashes to %016llx, the whole one to %016llx", rank,
              (unsigned long long)hs, (unsigned long long)hw);
    free(w), free(a), free(b);
    tt_frozen_free(&sliced);
    tt_frozen_free(&whole);
    tt_sharding_free(&mesh);
    be->queue_free(q);
    tt_model_free(m);
}

static int set(tt_config *c, const char *key, const char *value)
{
    int rc = tt_config_set(c, key, value, "test");
    CHECK_MSG(rc == 0, "%s = %s: %s", key, value, tt_last_error());
    return rc;
}

/* This rank's bytes of the frozen base. */
static unsigned char *frozen_bytes(tt_run *r)
{
    const size_t n = tt_frozen_rank_bytes(&r->frozen);
    unsigned char *b = th_alloc(n, 1);
    CHECK(tt_backend_read(r->be, r->q, b, (tt_mem){r->frozen.buf, 0}, n) == 0);
    return b;
}

static void check_training(const char *dump)
{
    tt_config *c = th_alloc(1, sizeof *c);
    tt_config_defaults(c);
    int rc = set(c, "job.dump_folder", dump) |
             set(c, "model.hf_assets_path", TITAN_SOURCE_DIR "/tests/fixtures/hf/llama") |
             set(c, "lora.rank", "8") | set(c, "lora.alpha", "16") | set(c, "lora.dropout", "0.1") |
             set(c, "lora.base_dtype", "bfloat16") | set(c, "training.mixed_precision_param", "bfloat16") |
             set(c, "training.seq_len", "256") | set(c, "training.local_batch_size", "1") |
             set(c, "optimizer.lr", "1e-2") | set(c, "synthetic.train_tokens", "50000") |
             set(c, "synthetic.val_tokens", "4096") | set(c, "validation.enable", "false") |
             set(c, "checkpoint.enable", "false") | set(c, "generate.max_new_tokens", "0") |
             set(c, "metrics.peak_tflops", "1") | set(c, "metrics.save_jsonl", "false");
    rc |= tt_config_finalize(c);
    CHECK_MSG(rc == 0, "config: %s", tt_last_error());
    tt_run r;
    if (rc || tt_run_open(&r, c, TT_RUN_TRAIN)) {
        CHECK_MSG(0, "opening the run: %s", tt_last_error());
        free(c);
        return;
    }
    CHECK(r.world == world && tt_frozen_is_sharded(&r.frozen) == (world > 1));
    unsigned char *before = frozen_bytes(&r);
    uint64_t h0 = 0, h1 = 1;
    CHECK(tt_frozen_hash(&r.frozen, &h0) == 0 && h0 == r.base_hash);
    for (long s = 1; s <= 4; s++) {
        tt_step_result res;
        rc = tt_train_step(&r, s, 0, NULL, 0, &res);
        CHECK_MSG(rc == 0, "step %ld: %s", s, tt_last_error());
        if (rc) break;
    }
    unsigned char *after = frozen_bytes(&r);
    CHECK_MSG(memcmp(before, after, tt_frozen_rank_bytes(&r.frozen)) == 0,
              "rank %d: training changed its slices of the frozen base", rank);
    CHECK(tt_frozen_hash(&r.frozen, &h1) == 0);
    CHECK_MSG(h0 == h1, "the base's hash moved: %016llx -> %016llx", (unsigned long long)h0, (unsigned long long)h1);
    /* the adapters trained: a B (zero at the start) is not zero any more */
    const tt_model *ad = r.lora.adapters;
    const int bi = r.lora.targets[0].b;
    float *bw = th_alloc((size_t)tt_param_numel(&ad->params[bi]), sizeof *bw);
    tt_param_store st = tt_state_store(&r.state, TT_STATE_PARAM);
    CHECK(st.read(st.ctx, ad, bi, bw) == 0);
    double sum = 0;
    for (int64_t k = 0; k < tt_param_numel(&ad->params[bi]); k++) sum += fabs(bw[k]);
    CHECK_MSG(sum > 0, "'%s' is still zero after training", ad->params[bi].name);
    printf("rank %d of %d: %zu of the base's %zu bytes, unchanged by 4 steps; hash %016llx\n", rank, world,
           tt_frozen_rank_bytes(&r.frozen), r.frozen.layout.bytes, (unsigned long long)h1);
    free(bw), free(before), free(after);
    tt_run_close(&r);
    free(c);
}

int main(void)
{
    tt_dist *d = tt_dist_get();
    CHECK_MSG(d != NULL, "tt_dist_get: %s", tt_last_error());
    if (!d) return th_done("test_lora_ranks");
    rank = tt_dist_rank(d), world = tt_dist_world(d);
    /* one folder for the job: rank 0's, named to the others */
    char dump[256] = "/tmp/titan_lora_ranks_XXXXXX";
    if (rank == 0 && !mkdtemp(dump)) dump[0] = 0;
    if (world > 1) CHECK(tt_dist_broadcast(d, TT_GROUP_WORLD, dump, sizeof dump, 0, "the test's folder") == 0);
    if (!dump[0]) return th_skip("test_lora_ranks", "no temporary folder");
    check_sliced_store();
    check_training(dump);
    if (world > 1) CHECK(tt_dist_barrier(d, "the end of the test") == 0);
    if (rank == 0) {
        char cmd[320];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dump);
        CHECK(system(cmd) == 0);
    }
    tt_dist_finalize();
    return th_done("test_lora_ranks");
}

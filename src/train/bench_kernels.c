/* bench_kernels.c — `titan bench attention`: the attention kernels, forward
 * and backward, on the shapes of a config (or given ones), in GFLOP/s. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/kernels.h"
#include "train/run.h"

static double time_it(int reps, void (*fn)(void *), void *arg)
{
    fn(arg); /* warm up caches and threads */
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = tt_now();
        fn(arg);
        double dt = tt_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

static void run_fwd(void *p)
{
    if (cpu_attention_fwd(p)) tt_warn("attention forward: %s", tt_last_error());
}

static void run_bwd(void *p)
{
    if (cpu_attention_bwd(p)) tt_warn("attention backward: %s", tt_last_error());
}

tt_err tt_bench_attention(const tt_config *c, int reps, FILE *out)
{
    const int B = c->training.local_batch_size, T = c->training.seq_len, H = c->model.n_heads,
              Hk = c->model.n_kv_heads, hd = c->model.head_dim;
    const tt_dtype dt = c->training.mixed_precision_param == TT_PARAM_BFLOAT16 ? TT_BF16 : TT_F32;
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * Hk * hd, es = tt_dtype_size(dt);
    void *bufs[8] = {0}; /* q, o, dout, dq, k, v, dk, dv */
    float *lse = NULL;
    int32_t *doc = NULL;
    tt_err rc = -1;
    for (int i = 0; i < 8; i++)
        if (!(bufs[i] = tt_alloc((i < 4 ? nq : nk) * es))) goto done;
    if (!(lse = tt_alloc((size_t)B * H * T * sizeof(float))) || !(doc = tt_alloc((size_t)B * T * sizeof(int32_t))))
        goto done;
    tt_rng r = {1, 0};
    for (int i = 0; i < 8; i++)
        for (size_t j = 0; j < (i < 4 ? nq : nk); j++) {
            const float x = (float)tt_rng_normal(&r);
            if (dt == TT_BF16) ((uint16_t *)bufs[i])[j] = tt_f32_to_bf16(x);
            else ((float *)bufs[i])[j] = x;
        }
    for (int i = 0; i < B * T; i++) doc[i] = i / T; /* causal, one document per row: the usual pretraining case */
    const long lq = (long)H * hd, lk = (long)Hk * hd;
    tt_attn a = {.B = B, .T = T, .H = H, .Hk = Hk, .hd = hd, .dt = dt, .q = bufs[0], .k = bufs[4], .v = bufs[5],
                 .ldq = lq, .ldk = lk, .ldv = lk, .doc = doc, .o = bufs[1], .ldo = lq, .lse = lse, .dout = bufs[2],
                 .lddo = lq, .dq = bufs[3], .dk = bufs[6], .dv = bufs[7], .lddq = lq, .lddk = lk, .lddv = lk};
    double flops = 4.0 * B * H * (double)T * T * hd * 0.5;
    double tf = time_it(reps, run_fwd, &a), tb = time_it(reps, run_bwd, &a);
    fprintf(out, "attention B=%d T=%d H=%d Hk=%d hd=%d causal, %s, %d threads (best of %d)\n", B, T, H, Hk, hd,
            tt_dtype_name(dt), tt_num_threads(), reps);
    fprintf(out, "forward   %8.3f ms  %7.1f GFLOP/s\n", 1e3 * tf, flops / tf / 1e9);
    fprintf(out, "backward  %8.3f ms  %7.1f GFLOP/s (2.5x the forward's FLOPs: recompute + 4 products)\n", 1e3 * tb,
            2.5 * flops / tb / 1e9);
    rc = 0;
done:
    for (int i = 0; i < 8; i++) tt_free(bufs[i]);
    tt_free(lse);
    tt_free(doc);
    return rc;
}

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

typedef struct {
    int B, T, H, Hk, hd, window;
    float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv;
    int32_t *doc;
} attn_args;

static void run_fwd(void *p)
{
    attn_args *a = p;
    cpu_attention_fwd(a->q, a->k, a->v, a->doc, a->o, a->lse, a->B, a->T, a->T, a->T, 0, a->H, a->Hk, a->hd,
                      a->window, 1.0 / sqrt((double)a->hd));
}

static void run_bwd(void *p)
{
    attn_args *a = p;
    cpu_attention_bwd(a->q, a->k, a->v, a->doc, a->o, a->lse, a->dout, a->dq, a->dk, a->dv, a->B, a->T, a->H, a->Hk,
                      a->hd, a->window, 1.0 / sqrt((double)a->hd));
}

tt_err tt_bench_attention(const tt_config *c, int reps, FILE *out)
{
    attn_args a = {c->training.local_batch_size, c->training.seq_len, c->model.n_heads, c->model.n_kv_heads,
                   c->model.head_dim, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t nq = (size_t)a.B * a.T * a.H * a.hd, nk = (size_t)a.B * a.T * a.Hk * a.hd;
    float **bufs[] = {&a.q, &a.o, &a.dout, &a.dq, &a.k, &a.v, &a.dk, &a.dv};
    tt_err rc = -1;
    for (int i = 0; i < 8; i++)
        if (!(*bufs[i] = tt_alloc((i < 4 ? nq : nk) * sizeof(float)))) goto done;
    if (!(a.lse = tt_alloc((size_t)a.B * a.H * a.T * sizeof(float))) ||
        !(a.doc = tt_alloc((size_t)a.B * a.T * sizeof(int32_t))))
        goto done;
    tt_rng r = {1, 0};
    for (int i = 0; i < 8; i++)
        for (size_t j = 0; j < (i < 4 ? nq : nk); j++) (*bufs[i])[j] = (float)tt_rng_normal(&r);
    /* causal, one document per row: the usual pretraining case */
    double flops = 4.0 * a.B * a.H * (double)a.T * a.T * a.hd * 0.5;
    double tf = time_it(reps, run_fwd, &a), tb = time_it(reps, run_bwd, &a);
    fprintf(out, "attention B=%d T=%d H=%d Hk=%d hd=%d causal, %d threads (best of %d)\n", a.B, a.T, a.H, a.Hk, a.hd,
            tt_num_threads(), reps);
    fprintf(out, "forward   %8.3f ms  %7.1f GFLOP/s\n", 1e3 * tf, flops / tf / 1e9);
    fprintf(out, "backward  %8.3f ms  %7.1f GFLOP/s (2.5x the forward's FLOPs: recompute + 4 products)\n", 1e3 * tb,
            2.5 * flops / tb / 1e9);
    rc = 0;
done:
    for (int i = 0; i < 8; i++) tt_free(*bufs[i]);
    tt_free(a.lse);
    tt_free(a.doc);
    return rc;
}

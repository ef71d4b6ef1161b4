/* bench_attention.c — `titan bench attention`: the attention op, forward and
 * backward, on the shapes of a config, in GFLOP/s, on the config's backend:
 * a two-node graph (attention, attention_bwd) run through the executor. */
#include <math.h>
#include <stdlib.h>

#include "config/resolve.h"
#include "train/run.h"

/* Random values of dtype dt into a value of the graph. */
static tt_err fill(tt_exec *e, const tt_value *v, tt_rng *r)
{
    const size_t n = (size_t)tt_value_numel(v);
    void *h = malloc(tt_value_bytes(v) + 1);
    if (!h) return tt_errorf("out of memory");
    for (size_t j = 0; j < n; j++) {
        const float x = (float)tt_rng_normal(r);
        if (v->dtype == TT_BF16) ((uint16_t *)h)[j] = tt_f32_to_bf16(x);
        else ((float *)h)[j] = x;
    }
    tt_err rc = tt_exec_write(e, v, h, tt_value_bytes(v));
    free(h);
    return rc;
}

tt_err tt_bench_attention(const tt_config *c, int reps, FILE *out)
{
    const int B = c->training.local_batch_size, T = c->training.seq_len, H = c->model.n_heads,
              Hk = c->model.n_kv_heads, hd = c->model.head_dim;
    const tt_dtype dt = tt_config_act_dtype(c);
    const tt_backend *be = tt_config_backend(c);
    if (!be) return -1;
    const int64_t N = (int64_t)B * T, q_shape[2] = {N, (int64_t)H * hd}, kv_shape[2] = {N, (int64_t)Hk * hd};
    tt_graph *g = tt_graph_new();
    tt_exec *e = NULL;
    int32_t *doc = malloc((size_t)N * sizeof *doc);
    double start[2], dur[2], best[2] = {1e30, 1e30};
    tt_err rc = -1;
    if (!g || !doc) goto done;
    tt_value *q = tt_graph_input(g, "q", dt, 2, q_shape), *k = tt_graph_input(g, "k", dt, 2, kv_shape);
    tt_value *v = tt_graph_input(g, "v", dt, 2, kv_shape), *dv = tt_graph_input(g, "dout", dt, 2, q_shape);
    tt_value *d = tt_graph_input(g, "doc", TT_I32, 1, &N);
    tt_value *o = tt_attention(g, q, k, v, d, B, T, H, Hk, hd, 0);
    if (!o) goto done;
    tt_node *fwd = g->nodes[0];
    tt_value *in[] = {q, k, v, d, o, fwd->out[1], dv}, *like[] = {q, k, v}, *grads[3];
    for (int i = 0; i < 3; i++)
        if (!(grads[i] = tt_value_new(g, TT_ROLE_ACT, dt, 2, like[i]->shape))) goto done;
    if (!tt_node_new(g, TT_OP_ATTENTION_BWD, 7, in, 3, grads, fwd->attrs, fwd->attrs_size) ||
        !(e = tt_exec_new(g, be, NULL, TT_EXEC_GRAPH)))
        goto done;
    tt_rng r = {1, 0};
    for (int64_t i = 0; i < N; i++) doc[i] = (int32_t)(i / T); /* causal, one document per row: the usual pretraining case */
    if (fill(e, q, &r) || fill(e, k, &r) || fill(e, v, &r) || fill(e, dv, &r) || tt_exec_write(e, d, doc, (size_t)N * 4) ||
        tt_exec_run(e)) /* warm up caches and threads */
        goto done;
    tt_exec_set_timing(e, start, dur);
    for (int rep = 0; rep < reps; rep++) {
        if (tt_exec_run(e)) goto done;
        for (int i = 0; i < 2; i++)
            if (dur[i] < best[i]) best[i] = dur[i];
    }
    const double flops = 4.0 * B * H * (double)T * T * hd * 0.5;
    fprintf(out, "attention B=%d T=%d H=%d Hk=%d hd=%d causal, %s, backend %s, %d threads (best of %d)\n", B, T, H, Hk,
            hd, tt_dtype_name(dt), be->name, tt_num_threads(), reps);
    fprintf(out, "forward   %8.3f ms  %7.1f GFLOP/s\n", 1e3 * best[0], flops / best[0] / 1e9);
    fprintf(out, "backward  %8.3f ms  %7.1f GFLOP/s (2.5x the forward's FLOPs: recompute + 4 products)\n",
            1e3 * best[1], 2.5 * flops / best[1] / 1e9);
    rc = 0;
done:
    tt_exec_free(e);
    tt_graph_free(g);
    free(doc);
    return rc;
}

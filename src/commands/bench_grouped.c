/* bench_grouped.c — the grouped GEMM of an MoE layer in `titan bench gemm`:
 * GFLOP/s and the share of the peak of the grouped_matmul op (every expert's
 * rows times its matrix, one node, run through the executor as the step runs
 * it) at several rows per expert, for the products of the config's experts:
 * gate/up (dim -> 2 x moe_ffn_dim), down (moe_ffn_dim -> dim) and the weight
 * gradient of gate/up. Each figure is the best of the repetitions filling the
 * time budget. */
#include <stdlib.h>
#include <string.h>

#include "commands/bench_grouped.h"
#include "config/resolve.h"
#include "graph/exec.h"

/* best seconds of one run of e over repetitions filling `seconds` (at least 3, after a warm-up) */
static double best_time(tt_exec *e, double seconds)
{
    if (tt_exec_run(e)) return -1;
    double best = 1e30, t0 = tt_now();
    for (int r = 0; r < 3 || tt_now() - t0 < seconds; r++) {
        double t = tt_now();
        if (tt_exec_run(e)) return -1;
        t = tt_now() - t;
        if (t < best) best = t;
    }
    return best;
}

/* One grouped product of E groups of m rows: y (E*m, N) = x (E*m, K) w[e]^T, or (wgrad) dw (E, N, K) from
 * (E*m, N) and (E*m, K) rows; its GFLOP/s, or -1. The weights in dt, as a bf16 step reads its weights' bf16
 * copy (tt_step_cfg.weights16) */
static double one(const tt_backend *be, tt_dtype dt, int E, int m, int N, int K, int wgrad, double seconds)
{
    tt_graph *g = tt_graph_new();
    if (!g) return -1;
    g->act_dtype = dt;
    const int64_t M = (int64_t)E * m;
    void *offs = NULL;
    tt_value *off = tt_graph_const(g, TT_I32, 1, (int64_t[]){E + 1}, &offs);
    for (int e = 0; off && e <= E; e++) ((int32_t *)offs)[e] = e * m;
    tt_value *a = tt_graph_input(g, "a", dt, 2, (int64_t[]){M, wgrad ? N : K});
    tt_value *y = wgrad ? tt_grouped_matmul_wgrad(g, a, tt_graph_input(g, "b", dt, 2, (int64_t[]){M, K}), off, E, TT_F32)
                        : tt_grouped_matmul(g, a, tt_graph_input(g, "w", dt, 3, (int64_t[]){E, N, K}), off, 1);
    if (y) tt_graph_mark_output(g, y);
    tt_exec *e = g->failed ? NULL : tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
    double gf = -1;
    if (e) { /* inputs left as the arena has them: the time of a product does not depend on the values */
        const double t = best_time(e, seconds);
        if (t > 0) gf = 2.0 * (double)M * N * K / t * 1e-9;
    }
    tt_exec_free(e);
    tt_graph_free(g);
    return gf;
}

tt_err tt_bench_grouped_gemm(const tt_config *c, int dtypes, double seconds, double peak_f32, double peak_bf16, FILE *out)
{
    tt_model_cfg mc;
    if (tt_model_cfg_from_config(c, &mc, NULL, NULL)) return -1;
    if (mc.moe.n_experts <= 0) return 0;
    const tt_backend *be = tt_config_backend(c);
    const int E = mc.moe.n_experts, D = mc.dim, F = mc.moe.ffn_dim;
    /* the step's rows per expert at an even load: B*T*k/E; around it, smaller and larger */
    const int even = (int)((int64_t)c->training.local_batch_size * c->training.seq_len * mc.moe.top_k / E);
    const int sizes[] = {16, 64, 256, even, 4 * even};
    static const struct { const char *what; int up, wgrad; } prods[] = {
        {"gate/up", 1, 0}, {"down", 0, 0}, {"gate/up dW", 1, 1}};
    fprintf(out, "\ngrouped GEMM (the grouped_matmul op, %d experts: rows per expert x (N x K); %d rows is the step's "
                 "at an even load)\n", E, even);
    for (int bf = 0; bf < 2; bf++) {
        if (!(dtypes & (1 << bf))) continue;
        const double peak = bf ? peak_bf16 : peak_f32;
        fprintf(out, "%-5s %-11s %-12s", bf ? "bf16" : "f32", "product", "N x K");
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) fprintf(out, " | %5d rows  %%pk", sizes[s]);
        fprintf(out, "\n");
        for (size_t p = 0; p < sizeof prods / sizeof prods[0]; p++) {
            const int N = prods[p].up ? 2 * F : D, K = prods[p].up ? D : F;
            char nk[32];
            snprintf(nk, sizeof nk, "%dx%d", N, K);
            fprintf(out, "%-5s %-11s %-12s", "", prods[p].what, nk);
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                const double gf = one(be, bf ? TT_BF16 : TT_F32, E, sizes[s], N, K, prods[p].wgrad, seconds);
                if (gf < 0) return tt_error_prefix("bench gemm, grouped %s: ", prods[p].what);
                fprintf(out, " | %6.0f %5.1f%%", gf, 100 * gf / peak);
            }
            fprintf(out, "\n");
            fflush(out);
        }
    }
    return 0;
}

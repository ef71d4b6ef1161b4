/* backend_ops_hand.c — test_backend_ops' checks against numbers worked out
 * by hand, on every registered backend: an AdamW step, expert parallelism's
 * plan and gathers (and the runs that must fail), and the ops that must write
 * the unused tail of a receive buffer zero without reading it. */
#include <math.h>
#include <string.h>

#include "backend_ops.h"

/* AdamW's step 3 from m = 0.1, v = 0.01, g = 0.2 clipped by 0.5 (hand-computed:
 * mhat = 0.1 / (1 - 0.9^3), vhat = 0.01 / (1 - 0.95^3), p = 0.5 - 0.01 (mhat /
 * (sqrt(vhat) + 1e-8) + 0.1 * 0.5) = 0.48556430856999505), on each backend. */
void test_adamw_hand(void)
{
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        tt_graph *g = tt_graph_new();
        const int64_t one = 1, two = 2;
        tt_value *v[6];
        for (int i = 0; i < 4; i++) v[i] = tt_graph_input(g, "x", TT_F32, 1, &one);
        v[4] = tt_graph_input(g, "clip", TT_F32, 1, &one);
        v[5] = tt_graph_input(g, "hp", TT_F64, 1, &two);
        tt_value *p16 = tt_value_new(g, TT_ROLE_STATE, TT_BF16, 1, &one); /* the weights' bf16 copy */
        tt_adamw(g, v[0], v[1], v[2], v[3], v[4], v[5], NULL, p16, 0.9, 0.95, 1e-8, 0.1);
        tt_exec *e = tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
        const float pgmvc[5] = {0.5f, 0.2f, 0.1f, 0.01f, 0.5f};
        const double hp[2] = {1e-2, 3};
        int rc = !e;
        for (int i = 0; i < 5 && !rc; i++) rc = tt_exec_write(e, v[i], &pgmvc[i], sizeof(float));
        float p = 0, gr = 1;
        uint16_t h = 0;
        if (!rc) rc = tt_exec_write(e, v[5], hp, sizeof hp) || tt_exec_run(e) || tt_exec_read(e, v[0], &p, sizeof p) ||
                      tt_exec_read(e, v[1], &gr, sizeof gr) || tt_exec_read(e, p16, &h, sizeof h);
        CHECK_MSG(rc == 0, "adamw on %s: %s", be->name, tt_last_error());
        CHECK_MSG(fabs(p - 0.48556430856999505) < 1e-6, "adamw step 3 on %s: p = %.9g", be->name, p);
        CHECK_MSG(gr == 0, "adamw on %s: the gradient is not zeroed (%g)", be->name, gr);
        CHECK_MSG(h == tt_f32_to_bf16(p), "adamw on %s: the bf16 copy is %#x, the weight %.9g rounds to %#x", be->name,
                  h, p, tt_f32_to_bf16(p));
        tt_exec_free(e);
        tt_graph_free(g);
    }
}

/* One node's graph on a backend: inputs written, run, outputs read; the run's status. */
typedef struct {
    tt_value *v;
    void *data;
} host_val;
static tt_err run_one(tt_graph *g, const tt_backend *be, const host_val *in, int n_in, const host_val *out, int n_out)
{
    for (int k = 0; k < n_out; k++) tt_graph_mark_output(g, out[k].v);
    tt_exec *e = g->failed ? NULL : tt_exec_new(g, be, NULL, TT_EXEC_GRAPH);
    tt_err rc = !e;
    for (int k = 0; k < n_in && !rc; k++) rc = tt_exec_write(e, in[k].v, in[k].data, tt_value_bytes(in[k].v));
    if (!rc) rc = tt_exec_run(e);
    for (int k = 0; k < n_out && !rc; k++) rc = tt_exec_read(e, out[k].v, out[k].data, tt_value_bytes(out[k].v));
    tt_exec_free(e);
    return rc;
}

/* moe_ep_plan on one rank of a hand-made example: E = 4 experts over 2 ranks, rows of 2 elements, a buffer of
 * 7 rows. Rank 0 has (1, 1, 0, 3) rows for experts 0..3, rank 1 (2, 1, 2, 0). Rank 0 (experts 0, 1) receives
 * source-major [s0e0, s0e1, s1e0, s1e0, s1e1]; expert-major that is [s0e0, s1e0, s1e0, s0e1, s1e1]. Rank 1
 * (experts 2, 3) receives [s0e3 x3, s1e2 x2], expert-major [s1e2 x2, s0e3 x3]. */
static const int32_t ep_hand_offs[10] = {0, 1, 2, 2, 5, /* rank 1 */ 0, 2, 3, 5, 5};
static const struct {
    int64_t counts[4][2]; /* scounts, sdispls, rcounts, rdispls */
    int32_t loc_off[3], to_src[7], to_exp[7];
} ep_hand_want[2] = {
    {{{4, 6}, {0, 4}, {4, 6}, {0, 4}}, {0, 3, 5}, {0, 2, 3, 1, 4, -1, -1}, {0, 3, 1, 2, 4, -1, -1}},
    {{{6, 4}, {0, 6}, {6, 4}, {0, 6}}, {0, 2, 5}, {3, 4, 0, 1, 2, -1, -1}, {2, 3, 4, 0, 1, -1, -1}},
};
static tt_err ep_plan_hand(const tt_backend *be, const int32_t *offs, int rank, int64_t recv_rows, int64_t counts[4][2],
                           int32_t *loc_off, int32_t *to_src, int32_t *to_exp)
{
    tt_graph *g = tt_graph_new();
    const int64_t n = 10;
    tt_value *in = tt_graph_input(g, "offs_all", TT_I32, 1, &n), *c[4] = {0}, *lo = NULL, *ts = NULL, *te = NULL;
    const tt_moe_ep_attrs a = {4, 2, rank, 2, recv_rows};
    tt_err rc = tt_moe_ep_plan(g, in, &a, c, &lo, &ts, &te);
    if (!rc) {
        const host_val ins[] = {{in, (void *)offs}};
        const host_val outs[] = {{c[0], counts[0]}, {c[1], counts[1]}, {c[2], counts[2]}, {c[3], counts[3]},
                                 {lo, loc_off}, {ts, to_src}, {te, to_exp}};
        rc = run_one(g, be, ins, 1, outs, 7);
    }
    tt_graph_free(g);
    return rc;
}

/* row_gather of x (3, 2) = {1, ..., 6} by idx (2) with inverse inv (3) into yd (2, 2): the run's status */
static tt_err row_gather_run(const tt_backend *be, const int32_t *idx, const int32_t *inv, float *yd)
{
    tt_graph *g = tt_graph_new();
    const int64_t xs[2] = {3, 2}, two = 2, three = 3;
    tt_value *x = tt_graph_input(g, "x", TT_F32, 2, xs), *vi = tt_graph_input(g, "idx", TT_I32, 1, &two);
    tt_value *vv = tt_graph_input(g, "inv", TT_I32, 1, &three), *y = tt_row_gather(g, x, vi, vv);
    const float xd[6] = {1, 2, 3, 4, 5, 6};
    const host_val ins[] = {{x, (void *)xd}, {vi, (void *)idx}, {vv, (void *)inv}};
    const host_val outs[] = {{y, yd}};
    const tt_err rc = y ? run_one(g, be, ins, 3, outs, 1) : -1;
    tt_graph_free(g);
    return rc;
}

/* Output y's node writes instead a new graph input of its shape (returned), which the host can fill first. */
static tt_value *into_input(tt_graph *g, tt_value *y, const char *name)
{
    tt_value *v = y ? tt_graph_input(g, name, y->dtype, y->ndim, y->shape) : NULL;
    if (v) {
        tt_node *n = y->producer;
        const int k = y->out_index;
        y->producer = NULL, n->out[k] = v, v->producer = n, v->out_index = k;
    }
    return v;
}

/* swiglu over the 3 rows of 5 its offsets bound, forward and backward, into outputs that held NaN: the rows
 * computed as silu(a) b and its gradient, the tail written zero (fresh memory is zero, so the harness's cases
 * alone would not see a kernel skip it), the input's tail (NaN) never read. */
void test_swiglu_tail(void)
{
    enum { N = 5, F = 2, used = 3 };
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        tt_graph *g = tt_graph_new();
        const int64_t abs_[2] = {N, 2 * F}, ys[2] = {N, F}, ne = 3;
        tt_value *ab = tt_graph_input(g, "ab", TT_F32, 2, abs_), *dy = tt_graph_input(g, "dy", TT_F32, 2, ys);
        tt_value *off = tt_graph_input(g, "offsets", TT_I32, 1, &ne);
        tt_value *y = tt_swiglu_fused_rows(g, ab, off);
        tt_value *gout[1] = {dy}, *gin[2] = {NULL, NULL}; /* the backward its rule emits */
        if (y) tt_ops[TT_OP_SWIGLU]->backward(g, y->producer, gout, gin);
        tt_value *dab = gin[0];
        tt_value *yb = into_input(g, y, "y"), *db = into_input(g, dab, "dab");
        float abd[N * 2 * F], dyd[N * F], yd[N * F], dd[N * 2 * F];
        const int32_t od[3] = {0, 1, used};
        for (int i = 0; i < N * 2 * F; i++) abd[i] = i < used * 2 * F ? (float)(i % 5 - 2) * 0.5f : NAN, dd[i] = NAN;
        for (int i = 0; i < N * F; i++) dyd[i] = i < used * F ? (float)(i % 3 + 1) : NAN, yd[i] = NAN;
        const host_val ins[] = {{ab, abd}, {dy, dyd}, {off, (void *)od}, {yb, yd}, {db, dd}};
        const host_val outs[] = {{yb, yd}, {db, dd}};
        const tt_err rc = yb && db ? run_one(g, be, ins, 5, outs, 2) : -1;
        CHECK_MSG(rc == 0, "swiglu over bounded rows on %s: %s", be->name, tt_last_error());
        for (int r = 0; r < N && !rc; r++)
            for (int j = 0; j < F; j++) {
                const double a = abd[r * 2 * F + j], b = abd[r * 2 * F + F + j], s = 1 / (1 + exp(-a));
                const double want = r < used ? a * s * b : 0, dwa = r < used ? dyd[r * F + j] * b * s * (1 + a * (1 - s)) : 0,
                             dwb = r < used ? dyd[r * F + j] * a * s : 0;
                CHECK_MSG(fabs(yd[r * F + j] - want) <= 1e-6 && fabs(dd[r * 2 * F + j] - dwa) <= 1e-5 &&
                              fabs(dd[r * 2 * F + F + j] - dwb) <= 1e-5,
                          "swiglu over bounded rows on %s: row %d col %d: y %g (want %g), da %g (%g), db %g (%g)",
                          be->name, r, j, yd[r * F + j], want, dd[r * 2 * F + j], dwa, dd[r * 2 * F + F + j], dwb);
            }
        tt_graph_free(g);
    }
}

/* grouped_matmul and its weight gradient on a receive buffer of 5 rows of which 3 arrived (offsets {0, 1, 3}),
 * its tail NaN (what a buffer that nothing wrote may hold): y's tail must be written zero over the NaN it held
 * (fresh memory is zero, so the harness's cases alone would not see a kernel skip it), and neither op may read
 * the tail. */
void test_grouped_matmul_tail(void)
{
    enum { M = 5, K = 2, Nw = 3, E = 2, used = 3 };
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        tt_graph *g = tt_graph_new();
        const int64_t xs[2] = {M, K}, ws[3] = {E, Nw, K}, ys[2] = {M, Nw}, ne = E + 1;
        tt_value *x = tt_graph_input(g, "x", TT_F32, 2, xs), *w = tt_graph_input(g, "w", TT_F32, 3, ws);
        tt_value *off = tt_graph_input(g, "offsets", TT_I32, 1, &ne), *b = tt_graph_input(g, "b", TT_F32, 2, ys);
        tt_value *y = tt_grouped_matmul(g, x, w, off, 1), *dw = tt_grouped_matmul_wgrad(g, x, b, off, E, TT_F32);
        tt_value *yb = into_input(g, y, "y"); /* y into a value the host fills with NaN first */
        float xd[M * K], wd[E * Nw * K], bd[M * Nw], yd[M * Nw], dwd[E * K * Nw];
        const int32_t od[E + 1] = {0, 1, used};
        for (int i = 0; i < M * K; i++) xd[i] = i < used * K ? (float)(i % 5 - 2) : NAN;
        for (int i = 0; i < E * Nw * K; i++) wd[i] = (float)(i % 3 + 1);
        for (int i = 0; i < M * Nw; i++) bd[i] = i < used * Nw ? (float)(i % 4 - 1) : NAN, yd[i] = NAN;
        const host_val ins[] = {{x, xd}, {w, wd}, {off, (void *)od}, {b, bd}, {yb, yd}};
        const host_val outs[] = {{yb, yd}, {dw, dwd}};
        const tt_err rc = y && dw ? run_one(g, be, ins, 5, outs, 2) : -1;
        CHECK_MSG(rc == 0, "grouped_matmul with a tail on %s: %s", be->name, tt_last_error());
        for (int r = 0; r < M && !rc; r++) { /* y[r] = x[r] w[e]^T for its expert e, zero past the rows used */
            const int e = r < od[1] ? 0 : 1;
            for (int j = 0; j < Nw; j++) {
                double want = 0;
                for (int k = 0; r < used && k < K; k++) want += (double)xd[r * K + k] * wd[(e * Nw + j) * K + k];
                CHECK_MSG(yd[r * Nw + j] == want, "grouped_matmul with a tail on %s: y[%d][%d] = %g, want %g", be->name,
                          r, j, yd[r * Nw + j], want);
            }
        }
        for (int e = 0; e < E && !rc; e++) /* dw[e] = x_e^T b_e over its rows alone */
            for (int k = 0; k < K; k++)
                for (int j = 0; j < Nw; j++) {
                    double want = 0;
                    for (int r = od[e]; r < od[e + 1]; r++) want += (double)xd[r * K + k] * bd[r * Nw + j];
                    const float got = dwd[(e * K + k) * Nw + j];
                    CHECK_MSG(got == want, "grouped_matmul_wgrad with a tail on %s: dw[%d][%d][%d] = %g, want %g",
                              be->name, e, k, j, got, want);
                }
        tt_graph_free(g);
    }
}

/* Expert parallelism's ops against numbers worked out by hand (cpu and ref agreeing with each other would not
 * catch a misunderstanding both share), and the runs that must fail. */
void test_expert_parallel_hand(void)
{
    for (int bi = 0; tt_backend_name(bi); bi++) {
        const tt_backend *be = tt_backend_get(tt_backend_name(bi));
        for (int r = 0; r < 2; r++) {
            int64_t counts[4][2];
            int32_t loc_off[3], to_src[7], to_exp[7];
            const tt_err rc = ep_plan_hand(be, ep_hand_offs, r, 7, counts, loc_off, to_src, to_exp);
            CHECK_MSG(rc == 0, "moe_ep_plan by hand on %s, rank %d: %s", be->name, r, tt_last_error());
            if (rc) continue;
            CHECK_MSG(memcmp(counts, ep_hand_want[r].counts, sizeof counts) == 0 &&
                          memcmp(loc_off, ep_hand_want[r].loc_off, sizeof loc_off) == 0 &&
                          memcmp(to_src, ep_hand_want[r].to_src, sizeof to_src) == 0 &&
                          memcmp(to_exp, ep_hand_want[r].to_exp, sizeof to_exp) == 0,
                      "moe_ep_plan by hand on %s, rank %d: the plan differs from the hand-worked one", be->name, r);
        }
        /* rank 1 receives 5 rows: a buffer of 4 is too small */
        int64_t counts[4][2];
        int32_t loc_off[3], to_src[4], to_exp[4];
        tt_err rc = ep_plan_hand(be, ep_hand_offs, 1, 4, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "receives 5 token rows, more than its receive buffer's 4"),
                  "moe_ep_plan on %s: an overfull buffer gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        const int32_t falling[10] = {0, 1, 2, 2, 5, 0, 3, 2, 5, 5}, late[10] = {1, 1, 2, 2, 5, 0, 2, 3, 5, 5};
        rc = ep_plan_hand(be, falling, 0, 7, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "rank 1's offsets fall at expert 1"),
                  "moe_ep_plan on %s: falling offsets gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = ep_plan_hand(be, late, 0, 7, counts, loc_off, to_src, to_exp);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "rank 0's expert offsets start at 1"),
                  "moe_ep_plan on %s: offsets not starting at 0 gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        /* row_gather: an index past the rows, one below -1, an inverse that is not one */
        const int32_t past[2] = {0, 3}, below[2] = {-2, 0}, good[2] = {2, -1}, inv_good[3] = {-1, -1, 0},
                      inv_bad[3] = {-1, 1, 0}, inv0[3] = {0, -1, -1}, inv1[3] = {1, -1, -1};
        float y[4] = {-1, -1, -1, -1};
        rc = row_gather_run(be, good, inv_good, y);
        CHECK_MSG(rc == 0 && y[0] == 5 && y[1] == 6 && y[2] == 0 && y[3] == 0, "row_gather on %s: %s (%g %g %g %g)",
                  be->name, rc ? tt_last_error() : "ok", y[0], y[1], y[2], y[3]);
        rc = row_gather_run(be, past, inv0, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "index 3 at 1 is outside [-1, 3)"),
                  "row_gather on %s: index 3 of 3 rows gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = row_gather_run(be, below, inv1, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "index -2 at 0 is outside [-1, 3)"),
                  "row_gather on %s: index -2 gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
        rc = row_gather_run(be, good, inv_bad, y);
        CHECK_MSG(rc != 0 && strstr(tt_last_error(), "inverse index 1 at 1"),
                  "row_gather on %s: a broken inverse gave %d (%s)", be->name, rc, rc ? tt_last_error() : "");
    }
}

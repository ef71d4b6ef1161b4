/* test_kernels.c — the CPU kernels: every fast fp32 kernel against its fp32
 * reference on awkward shapes, every backward reference kernel against
 * central finite differences of its double forward, AdamW and the RoPE
 * frequencies against hand-computed values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "core/core.h"
#include "harness.h"

static tt_rng g_rng = {20240601, 0};

static void *must(void *p)
{
    if (!p) {
        fprintf(stderr, "test_kernels: out of memory\n");
        exit(1);
    }
    return p;
}
static float *zf(size_t n) { return must(tt_alloc((n ? n : 1) * sizeof(float))); }
static double *zd(size_t n) { return must(tt_alloc((n ? n : 1) * sizeof(double))); }
static float *rf(size_t n, double s)
{
    float *p = zf(n);
    for (size_t i = 0; i < n; i++) p[i] = (float)(s * tt_rng_normal(&g_rng));
    return p;
}
static double *rd(size_t n, double s)
{
    double *p = zd(n);
    for (size_t i = 0; i < n; i++) p[i] = s * tt_rng_normal(&g_rng);
    return p;
}
static float *cpf(const float *a, size_t n) { float *p = zf(n); memcpy(p, a, n * sizeof(float)); return p; }
static int32_t *ri(size_t n, int lo, int hi) /* uniform in [lo, hi) */
{
    int32_t *p = must(tt_alloc((n ? n : 1) * sizeof(int32_t)));
    for (size_t i = 0; i < n; i++) p[i] = lo + (int32_t)tt_rng_below(&g_rng, (uint64_t)(hi - lo));
    return p;
}
/* document ids (B, T): each row starts a new document with probability 1/4 */
static int32_t *docs(int B, int T)
{
    int32_t *d = must(tt_alloc((size_t)B * T * sizeof(int32_t)));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            d[b * T + t] = t == 0 ? 100 * b : d[b * T + t - 1] + (tt_rng_below(&g_rng, 4) == 0);
    return d;
}

/* max |got - want| <= tol * max |want| (at least 1e-3: the values are O(1),
 * so entries that cancel to ~0 do not demand ulps); infinities must match. */
static void close_f(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double err = 0, mag = 0;
    int infbad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i])) {
            infbad += got[i] != want[i];
            continue;
        }
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= err)) err = d; /* NaN sticks */
        if (fabs(want[i]) > mag) mag = fabs(want[i]);
    }
    CHECK_MSG(!infbad && err <= tol * (mag > 1e-3 ? mag : 1e-3), "%s: max err %.3g, max |ref| %.3g, inf mismatches %d",
              what, err, mag, infbad);
}
static void close_d(const char *what, double got, double want, double tol)
{
    CHECK_MSG(fabs(got - want) <= tol * (fabs(want) > 1e-30 ? fabs(want) : 1), "%s: %.10g vs %.10g", what,
              got, want);
}

/* ---- finite differences ---------------------------------------------------
 * L(ctx) runs a double reference forward and returns sum(out * R). Each entry
 * of x is nudged by +-eps and the central difference is compared with the
 * analytic gradient: max error <= 1e-6 * max |gradient|. */
typedef double (*loss_fn)(void *ctx);

static void grad_check(const char *what, loss_fn L, void *ctx, double *x, size_t n, const double *an)
{
    const double eps = 1e-6;
    double err = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + eps;
        double lp = L(ctx);
        x[i] = x0 - eps;
        double lm = L(ctx);
        x[i] = x0;
        double d = fabs((lp - lm) / (2 * eps) - an[i]);
        if (!(d <= err)) err = d;
        if (fabs(an[i]) > mag) mag = fabs(an[i]);
    }
    CHECK_MSG(mag > 1e-3 && err <= 1e-6 * mag, "%s: finite differences off by %.3g, max |grad| %.3g", what, err,
              mag);
}
static double dotd(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ======================= fast fp32 vs reference fp32 ======================= */

static void test_matmul_fast(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {17, 23, 5}, {33, 7, 65}, {64, 48, 32}, {5, 1, 19}};
    char name[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int acc = 0; acc < 2; acc++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    float *A = rf((size_t)M * K, 1), *B = rf((size_t)K * N, 1), *C0 = rf((size_t)M * N, 1);
                    float *C1 = cpf(C0, (size_t)M * N), *C2 = cpf(C0, (size_t)M * N);
                    cpu_matmul(A, B, C1, M, N, K, ta, tb, acc);
                    ref_matmul_f32(A, B, C2, M, N, K, ta, tb, acc);
                    snprintf(name, sizeof name, "matmul M=%d N=%d K=%d ta=%d tb=%d acc=%d", M, N, K, ta, tb, acc);
                    close_f(name, C1, C2, (size_t)M * N, 1e-5);
                    tt_free(A), tt_free(B), tt_free(C0), tt_free(C1), tt_free(C2);
                }
    /* K = 0 is an empty sum */
    float A[1] = {0}, B[1] = {0}, C[6] = {1, 2, 3, 4, 5, 6};
    cpu_matmul(A, B, C, 2, 3, 0, 0, 0, 1);
    CHECK(C[5] == 6);
    cpu_matmul(A, B, C, 2, 3, 0, 0, 0, 0);
    CHECK(C[0] == 0 && C[5] == 0);
}

static void test_rowwise_fast(void)
{
    static const int shapes[][2] = {{1, 1}, {1, 8}, {7, 13}, {13, 67}, {100, 129}};
    char name[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], D = shapes[s][1];
        size_t nd = (size_t)N * D;
        float *x = rf(nd, 1.5), *w = rf(D, 1), *b = rf(D, 1), *dy = rf(nd, 1);
        float *y1 = zf(nd), *y2 = zf(nd), *r1 = zf(N), *r2 = zf(N), *m1 = zf(N), *m2 = zf(N);
        float *dx1 = zf(nd), *dx2 = zf(nd), *dw1 = rf(D, 1), *dw2 = rf(D, 1), *db1 = rf(D, 1), *db2 = rf(D, 1);

        cpu_bias_add(x, b, y1, N, D);
        ref_bias_add_f32(x, b, y2, N, D);
        snprintf(name, sizeof name, "bias_add N=%d D=%d", N, D);
        close_f(name, y1, y2, nd, 1e-6);
        cpu_bias_grad(dy, db1, N, D);
        ref_bias_grad_f32(dy, db2, N, D);
        snprintf(name, sizeof name, "bias_grad N=%d D=%d", N, D);
        close_f(name, db1, db2, D, 1e-5);
        cpu_add(x, dy, y1, nd);
        ref_add_f32(x, dy, y2, nd);
        snprintf(name, sizeof name, "add n=%zu", nd);
        close_f(name, y1, y2, nd, 1e-6);

        cpu_rmsnorm_fwd(x, w, y1, r1, N, D, 1e-5);
        ref_rmsnorm_fwd_f32(x, w, y2, r2, N, D, 1e-5);
        snprintf(name, sizeof name, "rmsnorm_fwd N=%d D=%d", N, D);
        close_f(name, y1, y2, nd, 1e-5);
        close_f(name, r1, r2, N, 1e-5);
        cpu_rmsnorm_bwd(x, w, r2, dy, dx1, dw1, N, D);
        ref_rmsnorm_bwd_f32(x, w, r2, dy, dx2, dw2, N, D);
        snprintf(name, sizeof name, "rmsnorm_bwd N=%d D=%d", N, D);
        close_f(name, dx1, dx2, nd, 1e-4);
        close_f(name, dw1, dw2, D, 1e-4);

        cpu_layernorm_fwd(x, w, b, y1, m1, r1, N, D, 1e-5);
        ref_layernorm_fwd_f32(x, w, b, y2, m2, r2, N, D, 1e-5);
        snprintf(name, sizeof name, "layernorm_fwd N=%d D=%d", N, D);
        close_f(name, y1, y2, nd, 1e-4);
        close_f(name, m1, m2, N, 1e-5);
        close_f(name, r1, r2, N, 1e-4);
        cpu_layernorm_bwd(x, w, m2, r2, dy, dx1, dw1, db1, N, D);
        ref_layernorm_bwd_f32(x, w, m2, r2, dy, dx2, dw2, db2, N, D);
        snprintf(name, sizeof name, "layernorm_bwd N=%d D=%d", N, D);
        close_f(name, dx1, dx2, nd, 1e-4);
        close_f(name, dw1, dw2, D, 1e-4);
        close_f(name, db1, db2, D, 1e-4);

        /* in place: dx overwrites dy */
        float *dyc = cpf(dy, nd);
        cpu_rmsnorm_bwd(x, w, r2, dyc, dyc, dw1, N, D);
        ref_rmsnorm_bwd_f32(x, w, r2, dy, dx2, dw2, N, D);
        snprintf(name, sizeof name, "rmsnorm_bwd in place N=%d D=%d", N, D);
        close_f(name, dyc, dx2, nd, 1e-4);
        close_f(name, dw1, dw2, D, 1e-4);

        float *a[] = {x, w, b, dy, y1, y2, r1, r2, m1, m2, dx1, dx2, dw1, dw2, db1, db2, dyc};
        for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) tt_free(a[i]);
    }
}

static void test_embedding_fast(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {1, 5, 7}, {50, 17, 37}, {300, 40, 130}};
    char name[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], V = shapes[s][1], D = shapes[s][2];
        int32_t *ids = ri(N, 0, V);
        float *table = rf((size_t)V * D, 1), *dout = rf((size_t)N * D, 1);
        float *o1 = zf((size_t)N * D), *o2 = zf((size_t)N * D);
        float *g1 = rf((size_t)V * D, 1), *g2 = rf((size_t)V * D, 1); /* garbage: must be overwritten */
        cpu_embedding_fwd(ids, table, o1, N, V, D);
        ref_embedding_fwd_f32(ids, table, o2, N, V, D);
        snprintf(name, sizeof name, "embedding_fwd N=%d V=%d D=%d", N, V, D);
        close_f(name, o1, o2, (size_t)N * D, 0);
        cpu_embedding_bwd(ids, dout, g1, N, V, D);
        ref_embedding_bwd_f32(ids, dout, g2, N, V, D);
        snprintf(name, sizeof name, "embedding_bwd N=%d V=%d D=%d", N, V, D);
        close_f(name, g1, g2, (size_t)V * D, 1e-5);
        tt_free(ids), tt_free(table), tt_free(dout), tt_free(o1), tt_free(o2), tt_free(g1), tt_free(g2);
    }
}

static void test_rope_fast(void)
{
    static const int shapes[][3] = {{1, 1, 2}, {9, 3, 18}, {20, 4, 130}, {5, 2, 64}};
    char name[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int llama3 = 0; llama3 < 2; llama3++)
            for (int inv = 0; inv < 2; inv++) {
                int N = shapes[s][0], H = shapes[s][1], hd = shapes[s][2];
                size_t n = (size_t)N * H * hd;
                tt_rope_params rp = {500000.0, llama3, 8.0, 1.0, 4.0, 8192};
                float *freq = zf(hd / 2);
                tt_rope_inv_freq(&rp, hd, freq);
                int32_t *pos = ri(N, 0, 4000);
                float *x = rf(n, 1), *y1 = zf(n), *y2 = zf(n);
                cpu_rope(x, pos, freq, y1, N, H, hd, inv);
                ref_rope_f32(x, pos, freq, y2, N, H, hd, inv);
                snprintf(name, sizeof name, "rope N=%d H=%d hd=%d llama3=%d inverse=%d", N, H, hd, llama3, inv);
                close_f(name, y1, y2, n, 1e-5);
                /* in place, and the inverse undoes the forward */
                cpu_rope(y1, pos, freq, y1, N, H, hd, !inv);
                close_f(name, y1, x, n, 1e-5);
                tt_free(freq), tt_free(pos), tt_free(x), tt_free(y1), tt_free(y2);
            }
}

static void test_pointwise_fast(void)
{
    static const size_t sizes[] = {1, 17, 1001};
    char name[64];
    for (size_t s = 0; s < 3; s++) {
        size_t n = sizes[s];
        float *a = rf(n, 3), *b = rf(n, 1), *dy = rf(n, 1);
        float *y1 = zf(n), *y2 = zf(n), *d1 = zf(n), *d2 = zf(n), *e1 = zf(n), *e2 = zf(n);
        a[0] = -40, b[0] = 2; /* saturated sigmoid */
        snprintf(name, sizeof name, "swiglu n=%zu", n);
        cpu_swiglu_fwd(a, b, y1, n);
        ref_swiglu_fwd_f32(a, b, y2, n);
        close_f(name, y1, y2, n, 1e-5);
        cpu_swiglu_bwd(a, b, dy, d1, e1, n);
        ref_swiglu_bwd_f32(a, b, dy, d2, e2, n);
        close_f(name, d1, d2, n, 1e-5);
        close_f(name, e1, e2, n, 1e-5);
        snprintf(name, sizeof name, "gelu n=%zu", n);
        cpu_gelu_fwd(a, y1, n);
        ref_gelu_fwd_f32(a, y2, n);
        close_f(name, y1, y2, n, 1e-5);
        cpu_gelu_bwd(a, dy, d1, n);
        ref_gelu_bwd_f32(a, dy, d2, n);
        close_f(name, d1, d2, n, 1e-5);
        float *p[] = {a, b, dy, y1, y2, d1, d2, e1, e2};
        for (int i = 0; i < 9; i++) tt_free(p[i]);
    }
}

typedef struct {
    int B, Tq, Tk, kvT, q_off, H, Hk, hd, window, use_doc;
} attn_case;

static void test_attention_fast(void)
{
    static const attn_case cases[] = {
        {1, 1, 1, 1, 0, 1, 1, 8, 0, 0},      /* T = 1, one head */
        {2, 37, 37, 37, 0, 4, 2, 16, 0, 0},  /* GQA 4:2 */
        {2, 50, 50, 50, 0, 3, 1, 20, 0, 1},  /* GQA 3:1, documents */
        {1, 70, 70, 70, 0, 4, 4, 33, 9, 1},  /* sliding window + documents, odd hd */
        {2, 150, 150, 150, 0, 4, 2, 16, 0, 1}, /* several key blocks */
        {1, 130, 130, 130, 0, 2, 1, 8, 70, 0}, /* window wider than a key block */
        {2, 1, 40, 64, 39, 4, 2, 16, 0, 1},  /* decode: one query, KV cache longer than valid */
        {1, 5, 23, 32, 18, 3, 1, 12, 6, 1},  /* a few queries at an offset, window */
        {1, 3, 3, 3, 0, 1, 1, 130, 0, 0},    /* head dim over 64 */
    };
    char name[160];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        attn_case a = cases[c];
        size_t nq = (size_t)a.B * a.Tq * a.H * a.hd, nk = (size_t)a.B * a.kvT * a.Hk * a.hd;
        float *q = rf(nq, 1), *k = rf(nk, 1), *v = rf(nk, 1);
        /* cache rows past Tk hold garbage that must never be read */
        for (int b = 0; b < a.B; b++)
            for (size_t j = (size_t)a.Tk; j < (size_t)a.kvT; j++)
                for (size_t e = 0; e < (size_t)a.Hk * a.hd; e++)
                    k[((size_t)b * a.kvT + j) * a.Hk * a.hd + e] = v[((size_t)b * a.kvT + j) * a.Hk * a.hd + e] = NAN;
        int32_t *doc = a.use_doc ? docs(a.B, a.Tk) : NULL;
        float *o1 = zf(nq), *o2 = zf(nq), *l1 = zf((size_t)a.B * a.H * a.Tq), *l2 = zf((size_t)a.B * a.H * a.Tq);
        double scale = 1.0 / sqrt(a.hd);
        cpu_attention_fwd(q, k, v, doc, o1, l1, a.B, a.Tq, a.Tk, a.kvT, a.q_off, a.H, a.Hk, a.hd, a.window, scale);
        ref_attention_fwd_f32(q, k, v, doc, o2, l2, a.B, a.Tq, a.Tk, a.kvT, a.q_off, a.H, a.Hk, a.hd, a.window,
                              scale);
        snprintf(name, sizeof name, "attention_fwd B=%d Tq=%d Tk=%d kvT=%d q_off=%d H=%d Hk=%d hd=%d window=%d doc=%d",
                 a.B, a.Tq, a.Tk, a.kvT, a.q_off, a.H, a.Hk, a.hd, a.window, a.use_doc);
        close_f(name, o1, o2, nq, 1e-4);
        close_f(name, l1, l2, (size_t)a.B * a.H * a.Tq, 1e-5);
        if (a.Tq == a.Tk && a.Tk == a.kvT && a.q_off == 0) {
            float *dout = rf(nq, 1), *dq1 = rf(nq, 1), *dq2 = zf(nq), *dk1 = rf(nk, 1), *dk2 = zf(nk);
            float *dv1 = rf(nk, 1), *dv2 = zf(nk), *dq3 = zf(nq);
            cpu_attention_bwd(q, k, v, doc, o2, l2, dout, dq1, dk1, dv1, a.B, a.Tq, a.H, a.Hk, a.hd, a.window, scale);
            ref_attention_bwd_f32(q, k, v, doc, o2, l2, dout, dq2, dk2, dv2, a.B, a.Tq, a.H, a.Hk, a.hd, a.window,
                                  scale);
            snprintf(name, sizeof name, "attention_bwd B=%d T=%d H=%d Hk=%d hd=%d window=%d doc=%d", a.B, a.Tq,
                     a.H, a.Hk, a.hd, a.window, a.use_doc);
            close_f(name, dq1, dq2, nq, 1e-4);
            close_f(name, dk1, dk2, nk, 1e-4);
            close_f(name, dv1, dv2, nk, 1e-4);
            /* run to run, the same bits */
            cpu_attention_bwd(q, k, v, doc, o2, l2, dout, dq3, dk2, dv2, a.B, a.Tq, a.H, a.Hk, a.hd, a.window, scale);
            CHECK_MSG(!memcmp(dq1, dq3, nq * sizeof(float)) && !memcmp(dk1, dk2, nk * sizeof(float)),
                      "%s: not deterministic", name);
            tt_free(dout), tt_free(dq1), tt_free(dq2), tt_free(dq3), tt_free(dk1), tt_free(dk2), tt_free(dv1),
                tt_free(dv2);
        }
        tt_free(q), tt_free(k), tt_free(v), tt_free(doc), tt_free(o1), tt_free(o2), tt_free(l1), tt_free(l2);
    }
}

static void test_ce_fast(void)
{
    static const int shapes[][3] = {{1, 8, 5}, {37, 24, 300}, {70, 33, 1100}, {130, 16, 513}};
    char name[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int mode = 0; mode < 4; mode++) { /* bit 0: dh wanted, bit 1: dW wanted */
            int N = shapes[s][0], D = shapes[s][1], V = shapes[s][2];
            float *h = rf((size_t)N * D, 1), *W = rf((size_t)V * D, 0.5);
            int32_t *t = ri(N, 0, V);
            int valid = 0;
            for (int n = 0; n < N; n++) {
                if (N > 1 && tt_rng_below(&g_rng, 5) == 0) t[n] = -100;
                valid += t[n] != -100;
            }
            double scale = 1.0 / (valid ? valid : 1);
            float *dh1 = rf((size_t)N * D, 1), *dh2 = zf((size_t)N * D);
            float *dW1 = rf((size_t)V * D, 1), *dW2 = cpf(dW1, (size_t)V * D); /* accumulated into */
            double l1 = cpu_ce_linear(h, W, t, N, D, V, -100, scale, mode & 1 ? dh1 : NULL, mode & 2 ? dW1 : NULL);
            double l2 = ref_ce_linear_f32(h, W, t, N, D, V, -100, scale, mode & 1 ? dh2 : NULL, mode & 2 ? dW2 : NULL);
            snprintf(name, sizeof name, "ce_linear N=%d D=%d V=%d dh=%d dW=%d", N, D, V, mode & 1, mode >> 1);
            close_d(name, l1, l2, 1e-5);
            if (mode & 1) close_f(name, dh1, dh2, (size_t)N * D, 1e-4);
            if (mode & 2) close_f(name, dW1, dW2, (size_t)V * D, 1e-4);
            if (mode == 3) { /* run to run, the same bits */
                float *dh3 = zf((size_t)N * D);
                double l3 = cpu_ce_linear(h, W, t, N, D, V, -100, scale, dh3, NULL);
                CHECK_MSG(l3 == l1 && !memcmp(dh1, dh3, (size_t)N * D * sizeof(float)), "%s: not deterministic", name);
                tt_free(dh3);
            }
            tt_free(h), tt_free(W), tt_free(t), tt_free(dh1), tt_free(dh2), tt_free(dW1), tt_free(dW2);
        }
    /* every target ignored: no loss, dh zero, dW untouched */
    float h[6] = {1, 2, 3, 4, 5, 6}, W[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, dh[6], dW[9];
    int32_t t[2] = {-100, -100};
    for (int i = 0; i < 6; i++) dh[i] = 7;
    for (int i = 0; i < 9; i++) dW[i] = 3;
    double l = cpu_ce_linear(h, W, t, 2, 3, 3, -100, 1.0, dh, dW);
    CHECK(l == 0 && dh[0] == 0 && dh[5] == 0 && dW[0] == 3 && dW[8] == 3);
}

static void test_optim_fast(void)
{
    static const size_t sizes[] = {1, 17, 12345};
    char name[64];
    for (size_t s = 0; s < 3; s++) {
        size_t n = sizes[s];
        float *p1 = rf(n, 1), *g = rf(n, 1), *m1 = zf(n), *v1 = zf(n);
        float *p2 = cpf(p1, n), *m2 = zf(n), *v2 = zf(n);
        snprintf(name, sizeof name, "sumsq n=%zu", n);
        close_d(name, cpu_sumsq(g, n), ref_sumsq_f32(g, n), 1e-12);
        for (long step = 1; step <= 3; step++) {
            cpu_adamw(p1, g, m1, v1, n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.7, step);
            ref_adamw_f32(p2, g, m2, v2, n, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.7, step);
        }
        snprintf(name, sizeof name, "adamw n=%zu", n);
        close_f(name, p1, p2, n, 1e-5);
        close_f(name, m1, m2, n, 1e-5);
        close_f(name, v1, v2, n, 1e-5);
        tt_free(p1), tt_free(g), tt_free(m1), tt_free(v1), tt_free(p2), tt_free(m2), tt_free(v2);
    }
    float sq[4] = {1, -2, 3, 0.5f};
    close_d("sumsq by hand", cpu_sumsq(sq, 4), 14.25, 0);
    close_d("sumsq by hand (ref)", ref_sumsq_f64((const double[]){1, -2, 3, 0.5}, 4), 14.25, 0);
}

/* =============== backward references vs finite differences ============== */

typedef struct {
    double *A, *B, *C, *R;
    int M, N, K, ta, tb;
} mm_ctx;
static double mm_loss(void *p)
{
    mm_ctx *c = p;
    ref_matmul_f64(c->A, c->B, c->C, c->M, c->N, c->K, c->ta, c->tb, 0);
    return dotd(c->C, c->R, (size_t)c->M * c->N);
}

/* The backward of C = op(A) op(B) is itself two matmuls with transposes. */
static void test_matmul_grad(void)
{
    char name[64];
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int M = 3, N = 4, K = 5;
            mm_ctx c = {rd(M * K, 1), rd(K * N, 1), zd(M * N), rd(M * N, 1), M, N, K, ta, tb};
            double *dA = zd(M * K), *dB = zd(K * N);
            if (!ta) ref_matmul_f64(c.R, c.B, dA, M, K, N, 0, !tb, 0); /* dA = R op(B)^T */
            else ref_matmul_f64(c.B, c.R, dA, K, M, N, tb, 1, 0);      /* dA = op(B) R^T */
            if (!tb) ref_matmul_f64(c.A, c.R, dB, K, N, M, !ta, 0, 0); /* dB = op(A)^T R */
            else ref_matmul_f64(c.R, c.A, dB, N, K, M, 1, ta, 0);      /* dB = R^T op(A) */
            snprintf(name, sizeof name, "matmul grad A ta=%d tb=%d", ta, tb);
            grad_check(name, mm_loss, &c, c.A, M * K, dA);
            snprintf(name, sizeof name, "matmul grad B ta=%d tb=%d", ta, tb);
            grad_check(name, mm_loss, &c, c.B, K * N, dB);
            tt_free(c.A), tt_free(c.B), tt_free(c.C), tt_free(c.R), tt_free(dA), tt_free(dB);
        }
}

typedef struct {
    double *x, *b, *y, *R;
    int N, D;
} bias_ctx;
static double bias_loss(void *p)
{
    bias_ctx *c = p;
    ref_bias_add_f64(c->x, c->b, c->y, c->N, c->D);
    return dotd(c->y, c->R, (size_t)c->N * c->D);
}

typedef struct {
    const int32_t *ids;
    double *table, *out, *R;
    int N, V, D;
} emb_ctx;
static double emb_loss(void *p)
{
    emb_ctx *c = p;
    ref_embedding_fwd_f64(c->ids, c->table, c->out, c->N, c->V, c->D);
    return dotd(c->out, c->R, (size_t)c->N * c->D);
}

typedef struct {
    double *x, *w, *b, *y, *mean, *rstd, *R;
    int N, D, layer;
} norm_ctx;
static double norm_loss(void *p)
{
    norm_ctx *c = p;
    if (c->layer) ref_layernorm_fwd_f64(c->x, c->w, c->b, c->y, c->mean, c->rstd, c->N, c->D, 1e-5);
    else ref_rmsnorm_fwd_f64(c->x, c->w, c->y, c->rstd, c->N, c->D, 1e-5);
    return dotd(c->y, c->R, (size_t)c->N * c->D);
}

typedef struct {
    double *x, *y, *R;
    const int32_t *pos;
    const float *freq;
    int N, H, hd;
} rope_ctx;
static double rope_loss(void *p)
{
    rope_ctx *c = p;
    ref_rope_f64(c->x, c->pos, c->freq, c->y, c->N, c->H, c->hd, 0);
    return dotd(c->y, c->R, (size_t)c->N * c->H * c->hd);
}

static void test_simple_grads(void)
{
    int N = 4, D = 6, V = 5;
    /* bias: db = column sums of R */
    bias_ctx bc = {rd(N * D, 1), rd(D, 1), zd(N * D), rd(N * D, 1), N, D};
    double *db = zd(D);
    ref_bias_grad_f64(bc.R, db, N, D);
    grad_check("bias grad", bias_loss, &bc, bc.b, D, db);
    tt_free(bc.x), tt_free(bc.b), tt_free(bc.y), tt_free(bc.R), tt_free(db);

    /* embedding with repeated ids */
    int32_t ids[4] = {3, 1, 3, 0};
    emb_ctx ec = {ids, rd(V * D, 1), zd(N * D), rd(N * D, 1), N, V, D};
    double *dt = rd(V * D, 1); /* garbage: the kernel zeroes it */
    ref_embedding_bwd_f64(ids, ec.R, dt, N, V, D);
    grad_check("embedding grad", emb_loss, &ec, ec.table, V * D, dt);
    tt_free(ec.table), tt_free(ec.out), tt_free(ec.R), tt_free(dt);

    /* rmsnorm and layernorm */
    for (int layer = 0; layer < 2; layer++) {
        norm_ctx c = {rd(N * D, 1.5), rd(D, 1), rd(D, 1), zd(N * D), zd(N), zd(N), rd(N * D, 1), N, D, layer};
        double *dx = zd(N * D), *dw = zd(D), *dbb = zd(D);
        norm_loss(&c); /* saves mean and rstd at the point of the analytic gradient */
        if (layer) ref_layernorm_bwd_f64(c.x, c.w, c.mean, c.rstd, c.R, dx, dw, dbb, N, D);
        else ref_rmsnorm_bwd_f64(c.x, c.w, c.rstd, c.R, dx, dw, N, D);
        grad_check(layer ? "layernorm grad x" : "rmsnorm grad x", norm_loss, &c, c.x, N * D, dx);
        grad_check(layer ? "layernorm grad w" : "rmsnorm grad w", norm_loss, &c, c.w, D, dw);
        if (layer) grad_check("layernorm grad b", norm_loss, &c, c.b, D, dbb);
        tt_free(c.x), tt_free(c.w), tt_free(c.b), tt_free(c.y), tt_free(c.mean), tt_free(c.rstd), tt_free(c.R);
        tt_free(dx), tt_free(dw), tt_free(dbb);
    }

    /* rope: the backward is the inverse rotation of the upstream gradient */
    {
        int H = 3, hd = 8;
        float freq[4];
        tt_rope_params rp = {10000.0, 0, 0, 0, 0, 0};
        tt_rope_inv_freq(&rp, hd, freq);
        int32_t pos[4] = {0, 5, 17, 1234};
        rope_ctx c = {rd(N * H * hd, 1), zd(N * H * hd), rd(N * H * hd, 1), pos, freq, N, H, hd};
        double *dx = zd(N * H * hd);
        ref_rope_f64(c.R, pos, freq, dx, N, H, hd, 1);
        grad_check("rope grad", rope_loss, &c, c.x, N * H * hd, dx);
        tt_free(c.x), tt_free(c.y), tt_free(c.R), tt_free(dx);
    }
}

typedef struct {
    double *a, *b, *y, *R;
    size_t n;
    int gelu;
} pw_ctx;
static double pw_loss(void *p)
{
    pw_ctx *c = p;
    if (c->gelu) ref_gelu_fwd_f64(c->a, c->y, c->n);
    else ref_swiglu_fwd_f64(c->a, c->b, c->y, c->n);
    return dotd(c->y, c->R, c->n);
}

static void test_pointwise_grads(void)
{
    size_t n = 40;
    pw_ctx c = {rd(n, 2), rd(n, 1), zd(n), rd(n, 1), n, 0};
    double *da = zd(n), *db = zd(n);
    ref_swiglu_bwd_f64(c.a, c.b, c.R, da, db, n);
    grad_check("swiglu grad a", pw_loss, &c, c.a, n, da);
    grad_check("swiglu grad b", pw_loss, &c, c.b, n, db);
    c.gelu = 1;
    ref_gelu_bwd_f64(c.a, c.R, da, n);
    grad_check("gelu grad", pw_loss, &c, c.a, n, da);
    tt_free(c.a), tt_free(c.b), tt_free(c.y), tt_free(c.R), tt_free(da), tt_free(db);
}

typedef struct {
    double *q, *k, *v, *o, *lse, *R;
    const int32_t *doc;
    attn_case a;
} attn_ctx;
static double attn_loss(void *p)
{
    attn_ctx *c = p;
    attn_case a = c->a;
    ref_attention_fwd_f64(c->q, c->k, c->v, c->doc, c->o, c->lse, a.B, a.Tq, a.Tk, a.kvT, 0, a.H, a.Hk, a.hd,
                          a.window, 0.7);
    return dotd(c->o, c->R, (size_t)a.B * a.Tq * a.H * a.hd);
}

static void test_attention_grads(void)
{
    static const attn_case cases[] = {
        {2, 6, 6, 6, 0, 4, 2, 3, 0, 1},  /* GQA 4:2, documents */
        {1, 7, 7, 7, 0, 3, 1, 4, 3, 1},  /* GQA 3:1, window, documents */
        {1, 5, 5, 5, 0, 1, 1, 5, 0, 0},  /* one head, plain causal */
    };
    char name[96];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_case a = cases[i];
        size_t nq = (size_t)a.B * a.Tq * a.H * a.hd, nk = (size_t)a.B * a.Tq * a.Hk * a.hd;
        int32_t *doc = a.use_doc ? docs(a.B, a.Tq) : NULL;
        attn_ctx c = {rd(nq, 1), rd(nk, 1), rd(nk, 1), zd(nq), zd((size_t)a.B * a.H * a.Tq), rd(nq, 1), doc, a};
        double *dq = zd(nq), *dk = zd(nk), *dv = zd(nk);
        attn_loss(&c);
        ref_attention_bwd_f64(c.q, c.k, c.v, doc, c.o, c.lse, c.R, dq, dk, dv, a.B, a.Tq, a.H, a.Hk, a.hd, a.window,
                              0.7);
        snprintf(name, sizeof name, "attention grad q (case %zu)", i);
        grad_check(name, attn_loss, &c, c.q, nq, dq);
        snprintf(name, sizeof name, "attention grad k (case %zu)", i);
        grad_check(name, attn_loss, &c, c.k, nk, dk);
        snprintf(name, sizeof name, "attention grad v (case %zu)", i);
        grad_check(name, attn_loss, &c, c.v, nk, dv);
        tt_free(c.q), tt_free(c.k), tt_free(c.v), tt_free(c.o), tt_free(c.lse), tt_free(c.R), tt_free(doc);
        tt_free(dq), tt_free(dk), tt_free(dv);
    }
}

typedef struct {
    double *h, *W;
    const int32_t *t;
    int N, D, V;
    double scale;
} ce_ctx;
static double ce_loss(void *p)
{
    ce_ctx *c = p;
    return ref_ce_linear_f64(c->h, c->W, c->t, c->N, c->D, c->V, -100, c->scale, NULL, NULL);
}

static void test_ce_grads(void)
{
    int N = 5, D = 4, V = 7;
    int32_t t[5] = {2, -100, 6, 0, 2};
    ce_ctx c = {rd(N * D, 1), rd(V * D, 1), t, N, D, V, 0.37};
    double *dh = rd(N * D, 1), *dW0 = rd(V * D, 1), *dW = zd(V * D);
    memcpy(dW, dW0, V * D * sizeof(double));
    ref_ce_linear_f64(c.h, c.W, t, N, D, V, -100, c.scale, dh, dW);
    for (int i = 0; i < V * D; i++) dW[i] -= dW0[i]; /* dW was accumulated into */
    grad_check("ce_linear grad h", ce_loss, &c, c.h, N * D, dh);
    grad_check("ce_linear grad W", ce_loss, &c, c.W, V * D, dW);
    CHECK(dh[4] == 0 && dh[7] == 0); /* the ignored row */
    tt_free(c.h), tt_free(c.W), tt_free(dh), tt_free(dW0), tt_free(dW);
}

/* ============================ hand-computed =============================== */

static void test_adamw_hand(void)
{
    /* Step 1 from zero moments, g = 0.2, clip 0.5: g' = 0.1, m = 0.01,
     * v = 0.0005, mhat = 0.1, vhat = 0.01, so the update is
     * 0.1 / (0.1 + 1e-8) + 0.1 * 0.5 and p = 0.5 - 0.01 * that. */
    double p = 0.5, g = 0.2, m = 0, v = 0;
    ref_adamw_f64(&p, &g, &m, &v, 1, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 1);
    close_d("adamw step 1 p", p, 0.5 - 0.01 * (0.1 / (0.1 + 1e-8) + 0.05), 1e-14);
    close_d("adamw step 1 m", m, 0.01, 1e-14);
    close_d("adamw step 1 v", v, 0.0005, 1e-14);
    /* Step 3 from m = 0.1, v = 0.01 (which g' = 0.1 leaves unchanged):
     * mhat = 0.1 / (1 - 0.9^3) = 0.1 / 0.271, vhat = 0.01 / (1 - 0.95^3) =
     * 0.01 / 0.142625; p = 0.5 - 0.01 (mhat / (sqrt(vhat) + 1e-8) + 0.05)
     * = 0.48556430856999505. */
    p = 0.5, m = 0.1, v = 0.01;
    ref_adamw_f64(&p, &g, &m, &v, 1, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 3);
    close_d("adamw step 3 p", p, 0.48556430856999505, 1e-14);
    close_d("adamw step 3 m", m, 0.1, 1e-14);
    close_d("adamw step 3 v", v, 0.01, 1e-14);
    float pf = 0.5f, gf = 0.2f, mf = 0.1f, vf = 0.01f;
    cpu_adamw(&pf, &gf, &mf, &vf, 1, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 3);
    close_d("cpu_adamw step 3 p", pf, 0.48556430856999505, 1e-6);
}

static void test_rope_freq(void)
{
    /* default: 1 / theta^(2i/hd) */
    float f[64];
    tt_rope_params rp = {10000.0, 0, 0, 0, 0, 0};
    tt_rope_inv_freq(&rp, 128, f);
    double err = 0;
    for (int i = 0; i < 64; i++) err = fmax(err, fabs(f[i] - pow(10000.0, -2.0 * i / 128)) / pow(10000.0, -2.0 * i / 128));
    CHECK_MSG(f[0] == 1.0f && err < 1e-6, "rope inv_freq default: rel err %g", err);
    /* llama3 (Llama 3.1: theta 500000, factor 8, low 1, high 4, 8192): high
     * frequencies kept, low ones divided by 8, the band between them blended. */
    tt_rope_params l3 = {500000.0, 1, 8.0, 1.0, 4.0, 8192};
    float g[64];
    tt_rope_inv_freq(&l3, 128, g);
    int kept = 0, divided = 0, blended = 0;
    err = 0;
    for (int i = 0; i < 64; i++) {
        double base = pow(500000.0, -2.0 * i / 128), wl = 2 * M_PI / base, want;
        if (wl < 8192.0 / 4) want = base, kept++;
        else if (wl > 8192.0) want = base / 8, divided++;
        else {
            double sm = (8192.0 / wl - 1) / (4 - 1);
            want = (1 - sm) * base / 8 + sm * base;
            blended++;
        }
        err = fmax(err, fabs(g[i] - want) / want);
    }
    CHECK_MSG(err < 1e-5 && kept > 0 && divided > 0 && blended > 0, "rope inv_freq llama3: rel err %g (%d/%d/%d)",
              err, kept, divided, blended);
}

int main(void)
{
    double t0 = tt_now();
    test_matmul_fast();
    test_rowwise_fast();
    test_embedding_fast();
    test_rope_fast();
    test_pointwise_fast();
    test_attention_fast();
    test_ce_fast();
    test_optim_fast();
    test_matmul_grad();
    test_simple_grads();
    test_pointwise_grads();
    test_attention_grads();
    test_ce_grads();
    test_adamw_hand();
    test_rope_freq();
    fprintf(stderr, "test_kernels: %.2f s\n", tt_now() - t0);
    return th_done("test_kernels");
}

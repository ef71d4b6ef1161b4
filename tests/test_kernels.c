/* test_kernels.c — the reference CPU kernels: every backward reference
 * kernel against central finite differences of its double forward, AdamW and
 * the RoPE frequencies against hand-computed values. The fast kernels are
 * checked against these references in test_kernels_fast.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "models/rope.h"
#include "core/core.h"
#include "harness.h"

static tt_rng g_rng = {20240601, 0};

static double *zd(size_t n) { return th_alloc(n, sizeof(double)); }
static double *rd(size_t n, double s)
{
    double *p = zd(n);
    for (size_t i = 0; i < n; i++) p[i] = s * tt_rng_normal(&g_rng);
    return p;
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

/* =============== backward references vs finite differences ============== */

typedef struct {
    int B, Tq, Tk, kvT, q_off, H, Hk, hd, window, use_doc;
} attn_case;

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
            free(c.A), free(c.B), free(c.C), free(c.R), free(dA), free(dB);
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
    free(bc.x), free(bc.b), free(bc.y), free(bc.R), free(db);

    /* embedding with repeated ids */
    int32_t ids[4] = {3, 1, 3, 0};
    emb_ctx ec = {ids, rd(V * D, 1), zd(N * D), rd(N * D, 1), N, V, D};
    double *dt = rd(V * D, 1); /* garbage: the kernel zeroes it */
    ref_embedding_bwd_f64(ids, ec.R, dt, N, V, D);
    grad_check("embedding grad", emb_loss, &ec, ec.table, V * D, dt);
    free(ec.table), free(ec.out), free(ec.R), free(dt);

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
        free(c.x), free(c.w), free(c.b), free(c.y), free(c.mean), free(c.rstd), free(c.R);
        free(dx), free(dw), free(dbb);
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
        free(c.x), free(c.y), free(c.R), free(dx);
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
    free(c.a), free(c.b), free(c.y), free(c.R), free(da), free(db);
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
        int32_t *doc = a.use_doc ? th_doc_ids(&g_rng, a.B, a.Tq) : NULL;
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
        free(c.q), free(c.k), free(c.v), free(c.o), free(c.lse), free(c.R), free(doc);
        free(dq), free(dk), free(dv);
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
    free(c.h), free(c.W), free(dh), free(dW0), free(dW);
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
    cpu_adamw(&pf, &gf, &mf, &vf, 1, 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 3, NULL, 0);
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

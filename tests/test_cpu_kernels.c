/* test_cpu_kernels.c — the CPU kernels' edge cases that the op harness
 * (test_backend_ops.c) does not reach through its shapes: flash attention's
 * tiles, layouts (q, k, v as column ranges of a padded qkv buffer), head
 * sizes, document ids that come back and positions the cos/sin table cannot
 * hold, its backward against finite differences of its own forward; and the
 * fused cross-entropy over a large vocabulary, run to run determinism and
 * every target ignored; SwiGLU's and the cross-entropy row's AVX-512
 * kernels against the portable ones, in both dtypes. For bf16 the inputs are
 * rounded to bf16 first, so the reference sees exactly the values the fast
 * kernel reads. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "backend/ref/ref_kernels.h"
#include "models/rope.h"
#include "core/core.h"
#include "harness.h"

static tt_rng g_rng = {20241201, 0};

static float *zf(size_t n) { return th_alloc(n, sizeof(float)); }
static float *rf(size_t n, double s)
{
    float *p = zf(n);
    for (size_t i = 0; i < n; i++) p[i] = (float)(s * tt_rng_normal(&g_rng));
    return p;
}
static float *cpf(const float *a, size_t n) { float *p = zf(n); memcpy(p, a, n * sizeof(float)); return p; }
static int32_t *ri(size_t n, int lo, int hi) /* uniform in [lo, hi) */
{
    int32_t *p = th_alloc(n, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) p[i] = lo + (int32_t)tt_rng_below(&g_rng, (uint64_t)(hi - lo));
    return p;
}

/* ---- the two dtypes ------------------------------------------------------- */
static tt_dtype dt_of(int bf) { return bf ? TT_BF16 : TT_F32; }
/* x rounded to bf16 values in place when bf: the reference's inputs */
static float *round_if(float *x, size_t n, int bf)
{
    if (bf)
        for (size_t i = 0; i < n; i++) x[i] = tt_bf16_to_f32(tt_f32_to_bf16(x[i]));
    return x;
}
/* an activation buffer of the dtype holding x */
static void *act_of(const float *x, size_t n, int bf)
{
    if (!bf) return cpf(x, n);
    uint16_t *p = th_alloc(n, 2);
    for (size_t i = 0; i < n; i++) p[i] = tt_f32_to_bf16(x[i]);
    return p;
}
static void *act_new(size_t n, int bf) { return th_alloc(n, bf ? 2 : 4); }
/* fp32 copy of an activation buffer */
static float *f32_of(const void *x, size_t n, int bf)
{
    float *p = zf(n);
    for (size_t i = 0; i < n; i++) p[i] = bf ? tt_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
    return p;
}
/* the fp32 tolerance, or bf16's when bf: a bf16 output is within 2^-9 of its fp32 value */
static double tol(int bf, double t32, double t16) { return bf ? t16 : t32; }

/* max |got - want| <= tol * max |want| (at least 1e-2: the values are O(1),
 * so entries that cancel to ~0, such as a gradient that is 0 in exact
 * arithmetic, do not demand ulps); infinities must match. */
static void close_f(const char *what, const float *got, const float *want, size_t n, double t)
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
    CHECK_MSG(!infbad && err <= t * (mag > 1e-2 ? mag : 1e-2), "%s: max err %.3g, max |ref| %.3g, inf mismatches %d",
              what, err, mag, infbad);
}
/* the fast kernel's activation output (dtype bf) against the reference's fp32 */
static void close_act(const char *what, const void *got, const float *want, size_t n, int bf, double t)
{
    float *g = f32_of(got, n, bf);
    close_f(what, g, want, n, t);
    free(g);
}

/* ---- attention ---------------------------------------------------------------- */

typedef struct {
    int B, T, H, Hk, hd, window;
    int use_doc; /* 0 none, 1 ids that only increase, 2 ids that come back (0, then 1, then 0) */
    int pos_kind; /* 0 positions in [0, 300), 1 in [-100, 100), 2 one of them 2^20 (a table too sparse) */
} attn_case;

/* Training attention: q, k, v laid out as the column ranges [0, H*hd),
 * [H*hd, (H+Hk)*hd), [(H+Hk)*hd, (H+2Hk)*hd) of one qkv buffer with `pad`
 * unused columns after them (pad = -1: three separate buffers instead), with
 * RoPE inside or not, against the reference on the rotated values. */
static void check_attention(attn_case c, int bf, int rope, int pad)
{
    const int N = c.B * c.T, wq = c.H * c.hd, wk = c.Hk * c.hd;
    const size_t nq = (size_t)N * wq, nk = (size_t)N * wk;
    char name[200];
    snprintf(name, sizeof name, "attention %s B=%d T=%d H=%d Hk=%d hd=%d window=%d doc=%d pos=%d rope=%d layout=%s",
             tt_dtype_name(dt_of(bf)), c.B, c.T, c.H, c.Hk, c.hd, c.window, c.use_doc, c.pos_kind, rope,
             pad < 0 ? "separate" : "fused qkv");
    float *q = round_if(rf(nq, 1), nq, bf), *k = round_if(rf(nk, 1), nk, bf), *v = round_if(rf(nk, 1), nk, bf);
    float *dout = round_if(rf(nq, 1), nq, bf);
    int32_t *doc = c.use_doc ? th_doc_ids(&g_rng, c.B, c.T) : NULL, *pos = c.pos_kind == 1 ? ri(N, -100, 100) : ri(N, 0, 300);
    if (c.use_doc == 2)
        for (int i = 0; i < N; i++) doc[i] = i % c.T >= 40 && i % c.T < 70; /* 0, then 1, then 0 again */
    if (c.pos_kind == 2) pos[N / 2] = 1 << 20;
    float *freq = zf(c.hd / 2);
    tt_rope_inv_freq(&(tt_rope_params){10000.0, 0, 0, 0, 0, 0}, c.hd, freq);
    /* the reference: rotate, attend, and rotate the q and k gradients back */
    float *qr = zf(nq), *kr = zf(nk), *o2 = zf(nq), *l2 = zf((size_t)c.B * c.H * c.T);
    float *dq2 = zf(nq), *dk2 = zf(nk), *dv2 = zf(nk);
    if (rope) {
        ref_rope_scaled_f32(q, pos, freq, qr, N, c.H, c.hd, 0, 0.9);
        ref_rope_scaled_f32(k, pos, freq, kr, N, c.Hk, c.hd, 0, 0.9);
    } else {
        memcpy(qr, q, nq * 4), memcpy(kr, k, nk * 4);
    }
    const double scale = 1.0 / sqrt(c.hd);
    ref_attention_fwd_f32(qr, kr, v, doc, o2, l2, c.B, c.T, c.T, c.T, 0, c.H, c.Hk, c.hd, c.window, scale);
    round_if(o2, nq, bf); /* the backward reads the forward's stored output */
    ref_attention_bwd_f32(qr, kr, v, doc, o2, l2, dout, dq2, dk2, dv2, c.B, c.T, c.H, c.Hk, c.hd, c.window, scale);
    if (rope) {
        ref_rope_scaled_f32(dq2, pos, freq, dq2, N, c.H, c.hd, 1, 0.9);
        ref_rope_scaled_f32(dk2, pos, freq, dk2, N, c.Hk, c.hd, 1, 0.9);
    }
    /* the fast kernel's layout */
    const size_t es = bf ? 2 : 4;
    const long ld = pad < 0 ? 0 : wq + 2 * wk + pad;
    char *qkv = NULL, *dqkv = NULL;
    void *qa, *ka, *va, *dqa, *dka, *dva;
    if (pad < 0) {
        qa = act_of(q, nq, bf), ka = act_of(k, nk, bf), va = act_of(v, nk, bf);
        dqa = act_new(nq, bf), dka = act_new(nk, bf), dva = act_new(nk, bf);
    } else {
        qkv = act_new((size_t)N * ld, bf), dqkv = act_new((size_t)N * ld, bf);
        for (int n = 0; n < N; n++) {
            void *qrow = act_of(q + (size_t)n * wq, wq, bf), *krow = act_of(k + (size_t)n * wk, wk, bf);
            void *vrow = act_of(v + (size_t)n * wk, wk, bf);
            memcpy(qkv + (size_t)n * ld * es, qrow, wq * es);
            memcpy(qkv + ((size_t)n * ld + wq) * es, krow, wk * es);
            memcpy(qkv + ((size_t)n * ld + wq + wk) * es, vrow, wk * es);
            free(qrow), free(krow), free(vrow);
        }
        qa = qkv, ka = qkv + wq * es, va = qkv + (wq + wk) * es;
        dqa = dqkv, dka = dqkv + wq * es, dva = dqkv + (wq + wk) * es;
    }
    void *oa = act_new(nq, bf), *douta = act_of(dout, nq, bf);
    float *l1 = zf((size_t)c.B * c.H * c.T);
    tt_attn a = {.B = c.B, .T = c.T, .H = c.H, .Hk = c.Hk, .hd = c.hd, .window = c.window, .dt = dt_of(bf),
                 .q = qa, .k = ka, .v = va, .ldq = pad < 0 ? wq : ld, .ldk = pad < 0 ? wk : ld,
                 .ldv = pad < 0 ? wk : ld, .doc = doc, .pos = rope ? pos : NULL, .inv_freq = freq, .rope_scale = 0.9f,
                 .o = oa, .ldo = wq, .lse = l1, .dout = douta, .lddo = wq, .dq = dqa, .dk = dka, .dv = dva,
                 .lddq = pad < 0 ? wq : ld, .lddk = pad < 0 ? wk : ld, .lddv = pad < 0 ? wk : ld};
    CHECK(cpu_attention_fwd(&a) == 0);
    close_act(name, oa, o2, nq, bf, tol(bf, 1e-4, 1e-2));
    close_f(name, l1, l2, (size_t)c.B * c.H * c.T, tol(bf, 1e-5, 5e-3)); /* bf16: q, k rounded after RoPE */
    CHECK(cpu_attention_bwd(&a) == 0);
    /* the gradients, read back out of their views */
    float *dq1 = zf(nq), *dk1 = zf(nk), *dv1 = zf(nk);
    for (int n = 0; n < N; n++) {
        float *r;
        r = f32_of((const char *)dqa + (size_t)n * a.lddq * es, wq, bf), memcpy(dq1 + (size_t)n * wq, r, wq * 4), free(r);
        r = f32_of((const char *)dka + (size_t)n * a.lddk * es, wk, bf), memcpy(dk1 + (size_t)n * wk, r, wk * 4), free(r);
        r = f32_of((const char *)dva + (size_t)n * a.lddv * es, wk, bf), memcpy(dv1 + (size_t)n * wk, r, wk * 4), free(r);
    }
    close_f(name, dq1, dq2, nq, tol(bf, 1e-4, 2e-2));
    close_f(name, dk1, dk2, nk, tol(bf, 1e-4, 2e-2));
    close_f(name, dv1, dv2, nk, tol(bf, 1e-4, 2e-2));
    /* run to run, the same bits */
    void *dq3 = pad < 0 ? act_new(nq, bf) : NULL;
    if (dq3) {
        a.dq = dq3;
        CHECK(cpu_attention_bwd(&a) == 0);
        CHECK_MSG(!memcmp(dq3, dqa, nq * es), "%s: not deterministic", name);
        free(dq3);
    }
    if (pad >= 0) { /* the padding columns are never written */
        int clean = 1;
        for (int n = 0; n < N; n++)
            for (size_t x = (size_t)(wq + 2 * wk) * es; x < (size_t)ld * es; x++) clean &= dqkv[(size_t)n * ld * es + x] == 0;
        CHECK_MSG(clean, "%s: wrote into the padding of the qkv gradient", name);
        free(qkv), free(dqkv);
    } else {
        free(qa), free(ka), free(va), free(dqa), free(dka), free(dva);
    }
    float *f[] = {q, k, v, dout, freq, qr, kr, o2, l2, dq2, dk2, dv2, l1, dq1, dk1, dv1};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    free(doc), free(pos), free(oa), free(douta);
}

static void test_attention(void)
{
    static const attn_case cases[] = {
        {1, 1, 1, 1, 8, 0, 0, 0},      /* T = 1, one head */
        {2, 37, 4, 2, 16, 0, 0, 0},    /* GQA 4:2 */
        {2, 50, 3, 1, 20, 0, 1, 0},    /* GQA 3:1, documents */
        {1, 70, 4, 4, 34, 9, 1, 0},    /* sliding window + documents, head dim not a multiple of 16 */
        {2, 150, 4, 2, 16, 0, 1, 0},   /* several key blocks */
        {1, 130, 2, 1, 48, 70, 0, 0},  /* window wider than a key block */
        {1, 200, 2, 2, 64, 0, 0, 0},   /* the common head size, blocks with ragged ends */
        {1, 40, 2, 1, 128, 0, 1, 0},   /* a large head */
        {1, 130, 2, 1, 64, 0, 2, 0},   /* document ids that come back: a whole tile must not be taken as one document */
        {1, 70, 2, 2, 256, 0, 1, 0},   /* a very large head */
        {2, 50, 2, 1, 32, 0, 1, 1}, /* negative positions */
        {1, 90, 2, 1, 32, 0, 1, 2}, /* positions too sparse for the cos/sin table */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int v = 0; v < 8; v++) check_attention(cases[c], v & 1, (v >> 1) & 1, v >> 2 ? 5 : -1);
}

/* Which keys a flash attention tile's queries see (tt_attn_tile_vis, the
 * forward's and backward's masks), against the definition pair by pair: key j
 * is seen by query i when j <= i, i - j < window (if any) and both lie in one
 * document. Every tile of sequences with ragged last blocks, runs of
 * documents and ids that come back, with and without a window. */
static void test_attention_tile_vis(void)
{
    enum { T = 203, B = TT_ATTN_BLK };
    static int32_t doc[T];
    static unsigned char vis[B][B];
    static const int windows[] = {0, 1, 5, 64, 70, 150, INT_MAX};
    /* no ids; one document; documents from 0, 30, 140, 200 (a whole key tile in one, queries in the next);
     * runs of random length; ids at random from 3 */
    for (int kind = 0; kind < 5; kind++) {
        for (int t = 0, d = 0; t < T; t++) {
            if (kind == 2 ? t == 30 || t == 140 || t == 200 : kind == 3 && tt_rng_below(&g_rng, 40) == 0) d++;
            doc[t] = kind == 4 ? (int32_t)tt_rng_below(&g_rng, 3) : kind >= 2 ? d : 7;
        }
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            const tt_attn a = {.B = 1, .T = T, .window = windows[w], .doc = kind ? doc : NULL};
            int bad = 0;
            for (int i0 = 0; i0 < T; i0 += B)
                for (int j0 = 0; j0 < T; j0 += B) {
                    const int nq = T - i0 < B ? T - i0 : B, nj = T - j0 < B ? T - j0 : B;
                    memset(vis, 0xA5, sizeof vis);
                    const int see = tt_attn_tile_vis(&a, 0, i0, nq, j0, nj, vis);
                    int n_seen = 0, want_all = nq == B && nj == B;
                    for (int r = 0; r < B; r++)
                        for (int c = 0; c < B; c++) {
                            const int i = i0 + r, j = j0 + c;
                            const int ok = r < nq && c < nj && j <= i && (a.window <= 0 || i - j < a.window) &&
                                           (!a.doc || doc[i] == doc[j]);
                            n_seen += ok;
                            want_all &= ok;
                            if (see != TT_SEE_ALL && vis[r][c] != ok) bad++;
                        }
                    if (see == TT_SEE_ALL ? !want_all : see == TT_SEE_NONE ? n_seen != 0 : n_seen == 0) bad++;
                }
            CHECK_MSG(!bad, "attention tile masks, ids of kind %d, window %d: %d pairs or tiles wrong", kind,
                      a.window, bad);
        }
    }
}

/* The fast backward against central differences of the fast forward (fp32,
 * GQA, RoPE inside, documents and a window), on entries picked at random:
 * L = sum(o * R), so dout = R. */
typedef struct {
    tt_attn a;
    const float *R;
    size_t no;
} fd_ctx;

static double fd_loss(fd_ctx *c)
{
    CHECK(cpu_attention_fwd(&c->a) == 0);
    double s = 0;
    for (size_t i = 0; i < c->no; i++) s += (double)((float *)c->a.o)[i] * c->R[i];
    return s;
}

static void test_attention_fd(void)
{
    const int B = 1, T = 70, H = 4, Hk = 2, hd = 16, N = B * T;
    const size_t nq = (size_t)N * H * hd, nk = (size_t)N * Hk * hd;
    float *q = rf(nq, 1), *k = rf(nk, 1), *v = rf(nk, 1), *R = rf(nq, 1), *o = zf(nq), *lse = zf((size_t)B * H * T);
    float *dq = zf(nq), *dk = zf(nk), *dv = zf(nk), *freq = zf(hd / 2);
    int32_t *doc = th_doc_ids(&g_rng, B, T), *pos = ri(N, 0, 100);
    tt_rope_inv_freq(&(tt_rope_params){10000.0, 0, 0, 0, 0, 0}, hd, freq);
    fd_ctx c = {.a = {.B = B, .T = T, .H = H, .Hk = Hk, .hd = hd, .window = 40, .dt = TT_F32, .q = q, .k = k, .v = v,
                      .ldq = H * hd, .ldk = Hk * hd, .ldv = Hk * hd, .doc = doc, .pos = pos, .inv_freq = freq,
                      .rope_scale = 1.0f, .o = o, .ldo = H * hd, .lse = lse, .dout = R, .lddo = H * hd, .dq = dq,
                      .dk = dk, .dv = dv, .lddq = H * hd, .lddk = Hk * hd, .lddv = Hk * hd},
                .R = R, .no = nq};
    fd_loss(&c);
    CHECK(cpu_attention_bwd(&c.a) == 0);
    float *xs[3] = {q, k, v}, *gs[3] = {dq, dk, dv};
    const size_t ns[3] = {nq, nk, nk};
    const char *names[3] = {"dq", "dk", "dv"};
    const double eps = 2e-3;
    for (int t = 0; t < 3; t++) {
        double err = 0, mag = 0;
        for (size_t i = 0; i < ns[t]; i++) mag = fmax(mag, fabs(gs[t][i]));
        for (int p = 0; p < 150; p++) {
            const size_t i = (size_t)tt_rng_below(&g_rng, ns[t]);
            const float x0 = xs[t][i];
            xs[t][i] = x0 + (float)eps;
            const double lp = fd_loss(&c);
            xs[t][i] = x0 - (float)eps;
            const double lm = fd_loss(&c);
            xs[t][i] = x0;
            err = fmax(err, fabs((lp - lm) / (2 * eps) - gs[t][i]));
        }
        CHECK_MSG(mag > 0.1 && err <= 5e-3 * mag, "attention %s vs central differences: off by %.3g, max |grad| %.3g",
                  names[t], err, mag);
    }
    free(q), free(k), free(v), free(R), free(o), free(lse), free(dq), free(dk), free(dv), free(freq), free(doc), free(pos);
}


/* ---- loss -------------------------------------------------------------------------- */

static void test_ce(void)
{
    static const int shapes[][3] = {{1, 8, 5}, {37, 24, 300}, {70, 33, 1100}, {130, 16, 513}, {300, 40, 70000}};
    char name[160];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int mode = 0; mode < 16; mode++) { /* bit 0: dh wanted, bit 1: dW wanted, bit 2: bf16, bit 3: blocks
                                                    of 64 rows at most (one block otherwise) */
            const int N = shapes[s][0], D = shapes[s][1], V = shapes[s][2], bf = (mode >> 2) & 1, small = mode >> 3;
            if (V > 10000 && (mode & 7) != 3 && (mode & 7) != 7) continue; /* the big vocabulary: grads only */
            if (small && N <= 64) continue; /* one block either way */
            cpu_ce_set_block(small ? 1 : 0);
            float *h = round_if(rf((size_t)N * D, 1), (size_t)N * D, bf), *W = rf((size_t)V * D, 0.5);
            void *ha = act_of(h, (size_t)N * D, bf), *dh1 = act_new((size_t)N * D, bf);
            int32_t *t = ri(N, 0, V);
            int valid = 0;
            for (int n = 0; n < N; n++) {
                if (N > 1 && tt_rng_below(&g_rng, 5) == 0) t[n] = -100;
                valid += t[n] != -100;
            }
            double scale = 1.0 / (valid ? valid : 1);
            float *dh2 = zf((size_t)N * D);
            float *dW1 = rf((size_t)V * D, 0.01), *dW2 = cpf(dW1, (size_t)V * D); /* accumulated into */
            double l1 = 0;
            CHECK(cpu_ce_linear(ha, W, TT_F32, t, N, D, V, -100, scale, mode & 1 ? dh1 : NULL, mode & 2 ? dW1 : NULL, dt_of(bf),
                                &l1) == 0);
            /* the reference in double: its sums over a large vocabulary carry no rounding of their own */
            double l2;
            {
                const size_t nh = (size_t)N * D, nw = (size_t)V * D;
                double *hd = th_alloc(nh, 8), *Wd = th_alloc(nw, 8), *dhd = th_alloc(nh, 8), *dWd = th_alloc(nw, 8);
                for (size_t i = 0; i < nh; i++) hd[i] = h[i];
                for (size_t i = 0; i < nw; i++) Wd[i] = W[i], dWd[i] = dW2[i];
                l2 = ref_ce_linear_f64(hd, Wd, t, N, D, V, -100, scale, mode & 1 ? dhd : NULL, mode & 2 ? dWd : NULL);
                for (size_t i = 0; i < nh; i++) dh2[i] = (float)dhd[i];
                for (size_t i = 0; i < nw; i++) dW2[i] = (float)dWd[i];
                free(hd), free(Wd), free(dhd), free(dWd);
            }
            snprintf(name, sizeof name, "ce_linear %s N=%d D=%d V=%d dh=%d dW=%d%s", tt_dtype_name(dt_of(bf)), N, D, V,
                     mode & 1, (mode >> 1) & 1, small ? ", blocks of at most 64 rows" : "");
            CHECK_MSG(fabs(l1 - l2) <= tol(bf, 1e-5, 5e-3) * fabs(l2), "%s: loss %.8g vs %.8g", name, l1, l2);
            if (mode & 1) close_act(name, dh1, dh2, (size_t)N * D, bf, tol(bf, 1e-4, 2e-2));
            if (mode & 2) close_f(name, dW1, dW2, (size_t)V * D, tol(bf, 1e-4, 2e-2));
            if ((mode & 3) == 3) { /* run to run, the same bits */
                void *dh3 = act_new((size_t)N * D, bf);
                double l3 = 0;
                CHECK(cpu_ce_linear(ha, W, TT_F32, t, N, D, V, -100, scale, dh3, NULL, dt_of(bf), &l3) == 0);
                CHECK_MSG(l3 == l1 && !memcmp(dh1, dh3, (size_t)N * D * (bf ? 2 : 4)), "%s: not deterministic", name);
                free(dh3);
            }
            free(h), free(W), free(ha), free(dh1), free(t), free(dh2), free(dW1), free(dW2);
        }
    cpu_ce_set_block(0);
    /* every target ignored: no loss, dh zero, dW untouched */
    float h[6] = {1, 2, 3, 4, 5, 6}, W[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, dh[6], dW[9];
    int32_t t[2] = {-100, -100};
    for (int i = 0; i < 6; i++) dh[i] = 7;
    for (int i = 0; i < 9; i++) dW[i] = 3;
    double l = -1;
    CHECK(cpu_ce_linear(h, W, TT_F32, t, 2, 3, 3, -100, 1.0, dh, dW, TT_F32, &l) == 0);
    CHECK(l == 0 && dh[0] == 0 && dh[5] == 0 && dW[0] == 3 && dW[8] == 3);
}

/* ---- SwiGLU: the AVX-512 kernels against the portable bodies ----------------- */

/* bf16 bits a and b: the same (any two NaNs count as the same), or neighbours of one sign */
static int bf16_same(uint16_t a, uint16_t b) { return a == b || (isnan(tt_bf16_to_f32(a)) && isnan(tt_bf16_to_f32(b))); }
static int bf16_ulp(uint16_t a, uint16_t b) { return (a >> 15) == (b >> 15) && (a > b ? a - b : b - a) == 1; }

/* element i of an activation buffer as fp32 */
static float act_at(const void *p, size_t i, int bf)
{
    return bf ? tt_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* One swiglu forward and backward over a and b (n values each, or as the
 * halves of rows of width 2F when F > 0) through the op's entry points, on
 * the AVX-512 kernels or the portable bodies (avx). */
static void swiglu_run(int avx, int F, int bf, const void *a, const void *b, const void *dy, size_t n, void *y, void *da,
                       void *db)
{
    const size_t es = bf ? 2 : 4;
    const tt_dtype dt = dt_of(bf);
    cpu_swiglu_set_avx512(avx);
    if (!F) {
        cpu_swiglu_fwd(a, b, y, n, dt);
        cpu_swiglu_bwd(a, b, dy, da, db, n, dt);
    } else { /* a, b, da, db gathered as rows [gate | up] */
        const int N = (int)(n / (size_t)F);
        const size_t row = (size_t)F * es;
        char *ab = th_alloc(2 * n, es), *dab = th_alloc(2 * n, es);
        for (int r = 0; r < N; r++) {
            memcpy(ab + 2 * r * row, (const char *)a + r * row, row);
            memcpy(ab + (2 * r + 1) * row, (const char *)b + r * row, row);
        }
        cpu_swiglu_fused_fwd(ab, y, N, F, dt);
        cpu_swiglu_fused_bwd(ab, dy, dab, N, F, dt);
        for (int r = 0; r < N; r++) {
            memcpy((char *)da + r * row, dab + 2 * r * row, row);
            memcpy((char *)db + r * row, dab + (2 * r + 1) * row, row);
        }
        free(ab);
        free(dab);
    }
    cpu_swiglu_set_avx512(1);
}

/* The AVX-512 kernels' outputs against the portable bodies'. bf16: each value
 * the same or one bf16 ulp off, and at most a fraction max_off of them off;
 * fp32: within 1e-6 of the portable value (the exponentials differ by 3e-7
 * at most), or 1e-30 where they cancel. max_off 0 asks for the same bits in
 * either dtype. Also each against the exact result in double, to bf16's rounding
 * (2^-7 of the largest value) or fp32's (1e-6). */
static void swiglu_compare(const char *what, int F, int bf, const void *a, const void *b, const void *dy, size_t n,
                           double max_off)
{
    const size_t es = bf ? 2 : 4;
    void *out[2][3];
    for (int k = 0; k < 2; k++) {
        for (int o = 0; o < 3; o++) out[k][o] = th_alloc(n, es);
        swiglu_run(k, F, bf, a, b, dy, n, out[k][0], out[k][1], out[k][2]);
    }
    size_t off = 0, far = 0;
    double err = 0, mag = 1e-2;
    for (size_t i = 0; i < n; i++) {
        const double x = act_at(a, i, bf), u = act_at(b, i, bf), g = act_at(dy, i, bf);
        const double s = 1 / (1 + exp(-x)), want[3] = {x * s * u, g * u * s * (1 + x * (1 - s)), g * x * s};
        for (int o = 0; o < 3; o++) {
            const float fast = act_at(out[1][o], i, bf), port = act_at(out[0][o], i, bf);
            int same, near;
            if (bf) {
                const uint16_t hf = ((const uint16_t *)out[1][o])[i], hp = ((const uint16_t *)out[0][o])[i];
                same = bf16_same(hf, hp), near = bf16_ulp(hf, hp);
            } else {
                same = memcmp(&fast, &port, 4) == 0 || (isnan(fast) && isnan(port));
                near = fabs((double)fast - port) <= 1e-6 * fabs(port) + 1e-30;
            }
            if (!same) {
                off++;
                far += !near || (!bf && !max_off);
            }
            if (isfinite(want[o])) {
                const double d = fabs(fast - want[o]);
                if (!(d <= err)) err = d;
                if (fabs(want[o]) > mag) mag = fabs(want[o]);
            }
        }
    }
    CHECK_MSG(far == 0 && off <= max_off * 3 * n,
              "swiglu %s %s: %zu of %zu outputs differ from the portable body's, %zu by more than %s", tt_dtype_name(dt_of(bf)),
              what, off, 3 * n, far, bf ? "one bf16 ulp" : "1e-6");
    CHECK_MSG(err <= (bf ? 0x1p-7 : 1e-6) * mag, "swiglu %s %s: max error %.3g against double, max |want| %.3g",
              tt_dtype_name(dt_of(bf)), what, err, mag);
    if (getenv("TITAN_TEST_VERBOSE"))
        printf("swiglu %s %s: %zu of %zu outputs off the portable body's\n", tt_dtype_name(dt_of(bf)), what, off, 3 * n);
    for (int k = 0; k < 2; k++)
        for (int o = 0; o < 3; o++) free(out[k][o]);
}

static void test_swiglu(void)
{
    if (!tt_cpu_avx512()) {
        th_cpu_lacks("the AVX-512 SwiGLU kernels: this CPU has no AVX-512 (F, BW, VL)");
        return;
    }
    /* values of O(1) to O(10), where silu's exponential matters, in flat runs with a ragged tail and in rows
     * of 19 and 384 (the gate and up halves of a fused value) */
    const size_t n = 384 * 37;
    /* where the exponential's rounding cannot show, the same bits as the portable body: zeros, infinities,
     * NaN, an exponential that overflows (x <= -88.8: +inf, so silu is -0) or vanishes next to 1 (x >= 87.4),
     * every pair of them */
    const float xs[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.0f, 100.0f, -89.0f, -100.0f, -1e30f, 1e30f};
    const float us[] = {0.0f, -0.0f, 1.0f, -3.0f, INFINITY, -INFINITY, NAN};
    const size_t nx = sizeof xs / sizeof *xs, nu = sizeof us / sizeof *us, ns = nx * nu * nu;
    for (int bf = 0; bf < 2; bf++) {
        float *fa = round_if(rf(n, 4), n, bf), *fb = round_if(rf(n, 1), n, bf), *fg = round_if(rf(n, 1), n, bf);
        void *a = act_of(fa, n, bf), *b = act_of(fb, n, bf), *dy = act_of(fg, n, bf);
        /* bf16: one ulp off where the exponential's 3e-6 tips a rounding, measured 5 of these 42,624; fp32:
         * every value may move in its last bits (measured: 177 of 42,624 did) */
        const double off = bf ? 3e-3 : 1;
        swiglu_compare("flat, 14,208 values", 0, bf, a, b, dy, n, off);
        swiglu_compare("flat, 1,001 values", 0, bf, a, b, dy, 1001, off);
        swiglu_compare("rows of 2 x 19", 19, bf, a, b, dy, 19 * 40, off);
        swiglu_compare("rows of 2 x 384", 384, bf, a, b, dy, n, off);
        float *sa = zf(ns), *sb = zf(ns), *sg = zf(ns);
        for (size_t i = 0; i < ns; i++) {
            sa[i] = xs[i % nx];
            sb[i] = us[i / nx % nu];
            sg[i] = us[i / (nx * nu)];
        }
        void *va = act_of(round_if(sa, ns, bf), ns, bf), *vb = act_of(round_if(sb, ns, bf), ns, bf),
             *vg = act_of(round_if(sg, ns, bf), ns, bf);
        swiglu_compare("special values", 0, bf, va, vb, vg, ns, 0);
        free(fa), free(fb), free(fg), free(a), free(b), free(dy), free(sa), free(sb), free(sg), free(va), free(vb), free(vg);
    }
}

/* ---- the fused cross-entropy's AVX-512 row against the portable one ---------- */

/* With W the identity (D = V) the logits are h itself and dh is the gradient
 * of the logits as the row left it, bit for bit: so the two rows' gradients
 * compare value by value (bf16: the same, or one ulp off where the
 * exponentials' last bits tip a rounding; fp32: within 1e-6) and their
 * losses to 1e-6, with the gradient and without it. */
static void test_ce_row(void)
{
    if (!tt_cpu_avx512()) {
        th_cpu_lacks("the fused cross-entropy's AVX-512 row: this CPU has no AVX-512 (F, BW, VL)");
        return;
    }
    static const int shapes[][2] = {{9, 40}, {33, 1100}, {5, 2049}};
    for (int bf = 0; bf < 2; bf++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int N = shapes[s][0], V = shapes[s][1];
            const size_t nh = (size_t)N * V;
            float *h = round_if(rf(nh, 4), nh, bf), *W = zf((size_t)V * V);
            h[4 * (size_t)V - 1] = 120; /* a large logit last in its row: the max must see it, or its exponential overflows */
            for (int v = 0; v < V; v++) W[(size_t)v * V + v] = 1;
            void *ha = act_of(h, nh, bf), *dh[2] = {act_new(nh, bf), act_new(nh, bf)};
            int32_t *t = ri(N, 0, V);
            t[0] = 0, t[1] = V - 1, t[2] = -100; /* the first and last class, and a row not scored */
            double l[2], le[2];
            for (int k = 0; k < 2; k++) {
                cpu_ce_set_avx512(k);
                CHECK(cpu_ce_linear(ha, W, TT_F32, t, N, V, V, -100, 1.0 / N, dh[k], NULL, dt_of(bf), &l[k]) == 0);
                CHECK(cpu_ce_linear(ha, W, TT_F32, t, N, V, V, -100, 1.0 / N, NULL, NULL, dt_of(bf), &le[k]) == 0);
            }
            cpu_ce_set_avx512(1);
            size_t off = 0, far = 0;
            for (size_t i = 0; i < nh; i++) {
                const float gp = act_at(dh[0], i, bf), gf = act_at(dh[1], i, bf);
                if (memcmp(&gp, &gf, 4) == 0) continue;
                off++;
                far += bf ? !bf16_ulp(((uint16_t *)dh[0])[i], ((uint16_t *)dh[1])[i])
                          : !(fabs((double)gf - gp) <= 1e-6 * fabs(gp) + 1e-12);
            }
            CHECK_MSG(far == 0 && off <= (bf ? nh / 500 : nh), "ce row %s N=%d V=%d: %zu of %zu gradients differ from the "
                      "portable row's, %zu by more than %s", tt_dtype_name(dt_of(bf)), N, V, off, nh, far,
                      bf ? "one bf16 ulp" : "1e-6");
            CHECK_MSG(fabs(l[1] - l[0]) <= 1e-6 * fabs(l[0]) && fabs(le[1] - le[0]) <= 1e-6 * fabs(le[0]),
                      "ce row %s N=%d V=%d: loss %.9g and %.9g without gradients, against the portable row's %.9g and "
                      "%.9g", tt_dtype_name(dt_of(bf)), N, V, l[1], le[1], l[0], le[0]);
            if (getenv("TITAN_TEST_VERBOSE"))
                printf("ce row %s N=%d V=%d: %zu of %zu gradients off, loss %.9g vs %.9g\n", tt_dtype_name(dt_of(bf)), N,
                       V, off, nh, l[1], l[0]);
            free(h), free(W), free(ha), free(dh[0]), free(dh[1]), free(t);
        }
}

/* ---- exp16_maskz and exp16_bf16_maskz (the attention's softmax) ------------ */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "backend/cpu/avx512_util.h"

typedef __m512 exp16_fn(__mmask16 k, __m512 x);

/* 16 lanes from xs through exp under mask k: lanes outside k must be +0, the
 * others within rel of libm's exp of x clamped to [-87.3, 88.7] (NaN staying
 * NaN). Returns the lanes that fail. */
__attribute__((target("avx512f"))) static int exp16_lanes(exp16_fn *exp16, double rel, const float xs[16], __mmask16 k,
                                                           float out[16])
{
    _mm512_storeu_ps(out, exp16(k, _mm512_loadu_ps(xs)));
    int bad = 0;
    for (int i = 0; i < 16; i++) {
        if (!(k >> i & 1))
            bad += out[i] != 0.0f || signbit(out[i]);
        else if (isnan(xs[i]))
            bad += !isnan(out[i]);
        else {
            const double want = exp((double)(xs[i] < -87.3f ? -87.3f : xs[i] > 88.7f ? 88.7f : xs[i]));
            bad += !(fabs(out[i] - want) <= rel * want);
        }
    }
    return bad;
}

/* every 1/64 from -100 to hi, with a mask that changes from call to call */
static int exp16_sweep(exp16_fn *exp16, double rel, int hi)
{
    float xs[16], out[16];
    int bad = 0, n = 0;
    for (int j = -6400; j <= hi * 64; j += 16, n++) {
        for (int i = 0; i < 16; i++) xs[i] = (float)(j + i) / 64.0f;
        bad += exp16_lanes(exp16, rel, xs, (__mmask16)(0xFFFF ^ (n * 0x9E37u)), out);
    }
    return bad;
}

static void test_exp16(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) return;
    float out[16];
    /* exp16_maskz: past both ends of the clamp, to 3e-7 */
    int bad = exp16_sweep(exp16_maskz, 3e-7, 90);
    const float special[16] = {-INFINITY, NAN, -0.0f, 0.0f, -87.3f, -87.29f, 1e-30f, -1e-30f, 88.0f, -1e30f, 88.7f, INFINITY};
    bad += exp16_lanes(exp16_maskz, 3e-7, special, 0xFFFF, out);
    CHECK_MSG(bad == 0, "exp16_maskz: %d lanes wrong", bad);
    CHECK(out[0] > 0 && out[0] < 2e-38f && isnan(out[1]) && out[2] == 1.0f && out[3] == 1.0f);
    /* exp16_bf16_maskz: x <= 0 (scores minus their maximum) to 3e-6, and finite up to 88 */
    bad = exp16_sweep(exp16_bf16_maskz, 3e-6, 0);
    const float special_bf16[16] = {-INFINITY, NAN, -0.0f, 0.0f, -87.3f, -87.29f, -1e-30f, -1e30f, 1e-30f, 1.0f, 88.0f};
    bad += exp16_lanes(exp16_bf16_maskz, 3e-6, special_bf16, 0xFFFF, out);
    CHECK_MSG(bad == 0, "exp16_bf16_maskz: %d lanes wrong", bad);
    CHECK(out[0] > 0 && out[0] < 2e-38f && isnan(out[1]) && isfinite(out[10]));
}
#else
static void test_exp16(void) {}
#endif

/* `test_cpu_kernels attention` runs the attention cases only: ctest runs them
 * again under each TITAN_ATTENTION path (CMakeLists.txt). */
int main(int argc, char **argv)
{
    double t0 = tt_now();
    test_attention();
    test_attention_tile_vis();
    test_attention_fd();
    if (argc > 1 && !strcmp(argv[1], "attention")) {
        fprintf(stderr, "test_cpu_kernels attention: %.2f s\n", tt_now() - t0);
        return th_done("test_cpu_kernels attention");
    }
    test_ce();
    test_exp16();
    test_swiglu();
    test_ce_row();
    fprintf(stderr, "test_cpu_kernels: %.2f s\n", tt_now() - t0);
    return th_done("test_cpu_kernels");
}

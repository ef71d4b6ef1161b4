/* test_rope_scaling.c — RoPE scaling (linear, llama3, YaRN) against the
 * inverse frequencies and attention factor transformers computes for the same
 * config.json (tests/fixtures/hf/rope_cases.safetensors, made by
 * tools/gen_hf_fixtures.py), and the scaled rotation kernels: fast vs
 * reference, their adjoint (the backward), and the op in a graph; and the
 * default and llama3 inverse frequencies against hand-computed values. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "backend/ref/ref_kernels.h"
#include "formats/safetensors.h"
#include "graph/autodiff.h"
#include "graph/exec.h"
#include "harness.h"
#include "hf/hf_config.h"
#include "models/rope.h"

static const char *const cases[] = {"default",     "linear_v4",          "llama3_31",        "yarn_qwen25",
                                    "yarn_betas_notrunc", "yarn_mscale", "yarn_attn_factor", "yarn_implicit_factor"};

static void test_cases(void)
{
    tt_safetensors *st = tt_st_open(TITAN_SOURCE_DIR "/tests/fixtures/hf/rope_cases.safetensors");
    CHECK_MSG(st != NULL, "%s", tt_last_error());
    if (!st) return;
    const char *all = tt_st_metadata(st, "configs"); /* {case: config.json object} */
    cJSON *configs = all ? cJSON_Parse(all) : NULL;
    CHECK(configs != NULL);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char key[64];
        char *json = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(configs, cases[c]));
        snprintf(key, sizeof key, "inv_freq.%s", cases[c]);
        const tt_st_tensor *tf = tt_st_find(st, key);
        snprintf(key, sizeof key, "scale.%s", cases[c]);
        const tt_st_tensor *ts = tt_st_find(st, key);
        CHECK_MSG(json && tf && ts, "case %s missing from the fixture", cases[c]);
        if (!json || !tf || !ts) {
            free(json);
            continue;
        }
        tt_hf_config hc;
        CHECK_MSG(tt_hf_config_parse(json, strlen(json), cases[c], &hc) == 0, "%s", tt_last_error());
        free(json);
        int hd = hc.model.head_dim, half = hd / 2;
        CHECK(tf->ndim == 1 && tf->shape[0] == half);
        if (tf->shape[0] != half) continue;
        float mine[128], want[128];
        memcpy(want, tf->data, (size_t)half * sizeof(float));
        tt_rope_inv_freq_ext(&hc.model.rope, &hc.ext.rope, hd, mine);
        double worst = 0;
        for (int i = 0; i < half; i++) {
            double rel = fabs(mine[i] - want[i]) / fabs(want[i]);
            if (rel > worst) worst = rel;
        }
        /* same fp32 operations; powf may differ from torch's pow by an ulp */
        CHECK_MSG(worst <= 4e-7, "%s: inv_freq max relative error %.3g", cases[c], worst);
        double scale;
        memcpy(&scale, ts->data, sizeof scale);
        double mine_scale = tt_rope_attention_scale(&hc.model.rope, &hc.ext.rope);
        CHECK_MSG(fabs(mine_scale - scale) < 1e-12, "%s: attention scale %.17g vs %.17g", cases[c], mine_scale, scale);
        printf("rope %-20s inv_freq max rel err %.2e, attention scale %.6f\n", cases[c], worst, scale);
    }
    cJSON_Delete(configs);
    tt_st_close(st);
}

/* cpu_rope (with its scale) vs ref_rope_scaled_f32, and <R x, y> == <x, R^T y> in f64
 * where R^T is the scaled inverse rotation (what the backward runs). */
static void test_kernels(void)
{
    enum { N = 7, H = 3, HD = 10 };
    tt_rng r = {11, 0};
    float x[N * H * HD], y1[N * H * HD], y2[N * H * HD], freq[HD / 2];
    double xd[N * H * HD], yd[N * H * HD], rx[N * H * HD], rty[N * H * HD];
    int32_t pos[N];
    tt_rope_params rp = {10000, 0, 4, 0, 0, 64};
    tt_rope_ext ext = {.yarn = 1};
    tt_rope_inv_freq_ext(&rp, &ext, HD, freq);
    for (int i = 0; i < N; i++) pos[i] = (int32_t)tt_rng_below(&r, 300);
    for (int i = 0; i < N * H * HD; i++) {
        x[i] = (float)(2 * tt_rng_uniform(&r) - 1);
        xd[i] = x[i];
        yd[i] = 2 * tt_rng_uniform(&r) - 1;
    }
    double scale = tt_rope_attention_scale(&rp, &ext);
    CHECK_NEAR(scale, 0.1 * log(4.0) + 1, 1e-15);
    cpu_rope(x, pos, freq, y1, N, H, HD, 0, (float)scale, TT_F32);
    ref_rope_scaled_f32(x, pos, freq, y2, N, H, HD, 0, scale);
    double worst = 0, norm_x = 0, norm_y = 0;
    for (int i = 0; i < N * H * HD; i++) {
        worst = fmax(worst, fabs(y1[i] - y2[i]));
        norm_x += (double)x[i] * x[i];
        norm_y += (double)y1[i] * y1[i];
    }
    CHECK_MSG(worst < 1e-5, "fast vs reference scaled rope: %g", worst);
    CHECK_NEAR(sqrt(norm_y / norm_x), scale, 1e-5); /* a rotation times scale */
    ref_rope_scaled_f64(xd, pos, freq, rx, N, H, HD, 0, scale);
    ref_rope_scaled_f64(yd, pos, freq, rty, N, H, HD, 1, scale);
    double a = 0, b = 0;
    for (int i = 0; i < N * H * HD; i++) {
        a += rx[i] * yd[i];
        b += xd[i] * rty[i];
    }
    CHECK_MSG(fabs(a - b) < 1e-12 * (1 + fabs(a)), "adjoint: %.17g vs %.17g", a, b);
    /* scale 1 is the plain rotation */
    cpu_rope(x, pos, freq, y1, N, H, HD, 0, 1.0f, TT_F32);
    ref_rope_f32(x, pos, freq, y2, N, H, HD, 0);
    worst = 0;
    for (int i = 0; i < N * H * HD; i++) worst = fmax(worst, fabs(y1[i] - y2[i]));
    CHECK_MSG(worst < 1e-5, "fast vs reference rope: %g", worst);
}

/* The op carries the scale to the kernel, and its gradient (the scaled
 * inverse rotation, from the op's backward rule) matches finite differences:
 * loss = ce_linear(rope_scaled(x), W, targets) in f64. */
static void test_graph(void)
{
    enum { N = 4, H = 2, HD = 6, C = H * HD, V = 5 };
    double x[N * C], w[V * C], sc = 1.0;
    float freq[HD / 2];
    int32_t pos[N] = {0, 3, 5, 9}, tgt[N] = {1, 4, 0, 2};
    tt_rng r = {5, 0};
    for (int i = 0; i < N * C; i++) x[i] = 2 * tt_rng_uniform(&r) - 1;
    for (int i = 0; i < V * C; i++) w[i] = 2 * tt_rng_uniform(&r) - 1;
    tt_rope_params rp = {10000, 0, 8, 0, 0, 16};
    tt_rope_ext rx = {.yarn = 1, .attention_factor = 1.3};
    tt_rope_inv_freq_ext(&rp, &rx, HD, freq);
    tt_graph *g = tt_graph_new();
    tt_value *vx = tt_value_new(g, TT_ROLE_PARAM, TT_F64, 2, (int64_t[]){N, C});
    tt_value *vw = tt_value_new(g, TT_ROLE_PARAM, TT_F64, 2, (int64_t[]){V, C});
    tt_value *vp = tt_graph_input(g, "pos", TT_I32, 1, (int64_t[]){N});
    tt_value *vt = tt_graph_input(g, "targets", TT_I32, 1, (int64_t[]){N});
    tt_value *vs = tt_graph_input(g, "scale", TT_F64, 1, (int64_t[]){1});
    void *fd;
    int64_t nf = HD / 2;
    tt_value *vf = tt_graph_const(g, TT_F32, 1, &nf, &fd);
    memcpy(fd, freq, sizeof freq);
    tt_value *y = tt_rope_scaled(g, vx, vp, vf, H, HD, tt_rope_attention_scale(&rp, &rx));
    tt_value *loss = tt_ce_linear(g, y, vw, vt, vs, -100), *gx = NULL;
    tt_graph_mark_output(g, y);
    tt_graph_mark_output(g, loss);
    CHECK(tt_autodiff(g, 1, &loss, 1, &vx, &gx) == 0 && gx);
    if (gx) tt_graph_mark_output(g, gx);
    /* f64 graphs run on the reference backend (debug: node by node, NaN/Inf checks) */
    const tt_backend *ref = tt_backend_get("ref");
    CHECK_MSG(ref != NULL, "%s", tt_last_error());
    tt_exec *e = ref && gx ? tt_exec_new(g, ref, NULL, TT_EXEC_DEBUG) : NULL;
    int ok = e && tt_exec_write(e, vx, x, sizeof x) == 0 && tt_exec_write(e, vw, w, sizeof w) == 0 &&
             tt_exec_write(e, vp, pos, sizeof pos) == 0 && tt_exec_write(e, vt, tgt, sizeof tgt) == 0 &&
             tt_exec_write(e, vs, &sc, sizeof sc) == 0 && tt_exec_run(e) == 0;
    CHECK_MSG(ok, "%s", tt_last_error());
    if (ok) {
        double want[N * C], got[N * C], grad[N * C], worst = 0;
        CHECK(tt_exec_read(e, y, got, sizeof got) == 0);
        ref_rope_scaled_f64(x, pos, freq, want, N, H, HD, 0, 1.3);
        for (int i = 0; i < N * C; i++) worst = fmax(worst, fabs(got[i] - want[i]));
        CHECK_MSG(worst < 1e-14, "graph rope_scaled vs kernel: %g", worst);
        CHECK(tt_exec_read(e, gx, grad, sizeof grad) == 0);
        worst = 0;
        int runs_ok = 1;
        for (int i = 0; i < N * C; i++) {
            double keep = x[i], eps = 1e-6, lp = NAN, lm = NAN;
            x[i] = keep + eps;
            runs_ok &= tt_exec_write(e, vx, x, sizeof x) == 0 && tt_exec_run(e) == 0 &&
                       tt_exec_read(e, loss, &lp, sizeof lp) == 0;
            x[i] = keep - eps;
            runs_ok &= tt_exec_write(e, vx, x, sizeof x) == 0 && tt_exec_run(e) == 0 &&
                       tt_exec_read(e, loss, &lm, sizeof lm) == 0;
            x[i] = keep;
            worst = fmax(worst, fabs((lp - lm) / (2 * eps) - grad[i]));
        }
        CHECK_MSG(runs_ok, "finite-difference runs: %s", tt_last_error());
        CHECK_MSG(worst < 1e-7, "rope_scaled gradient vs finite differences: %g", worst);
        printf("rope_scaled gradient vs finite differences: max abs error %.2e\n", worst);
    }
    tt_exec_free(e);
    tt_graph_free(g);
}

/* The default and llama3 inverse frequencies against hand-computed values
 * (moved from test_kernels.c). */
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
    test_cases();
    test_kernels();
    test_graph();
    test_rope_freq();
    return th_done("test_rope_scaling");
}

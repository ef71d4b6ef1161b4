/* bench_gemm.c — GFLOP/s of titan's GEMM (backend/cpu/gemm.c) against
 * OpenBLAS (fp32) and oneDNN (fp32 dnnl_sgemm, bf16 matmul primitive) on
 * square sizes and the shapes of the project's model configs, with the
 * percentage of the machine's measured peak (titan bench peak).
 *
 *   bench_gemm [--dtype f32|bf16] [--seconds S] [--only titan|openblas|onednn] [MxNxK[:op] ...]
 *
 * Each figure is the best of the repetitions that fill S seconds (default
 * 0.3): on a shared machine the best run is the one nobody disturbed.
 * op is two letters, n or t, for A and B: C (M,N) = op(A) op(B). A Linear
 * layer y = x W^T is "nt", its input gradient dx = dy W "nn", its weight
 * gradient dW = dy^T x "tn". oneDNN is loaded at run time (dlopen), so the
 * bench builds and runs without it; its header only has to be present at
 * build time for its types. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/peak.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#if DNNL_VERSION_MAJOR == 2
#define HAVE_DNNL 1
#endif
#endif

typedef struct { int M, N, K, ta, tb; const char *what; } bshape;

/* Llama 768-dim, 12 layers, vocab 50304 at 4 x 256 tokens (M = 1024), and the
 * 288-dim model at M = 2048: forward (nt), input gradient (nn), weight
 * gradient (tn) of each distinct Linear. */
static const bshape default_shapes[] = {
    {512, 512, 512, 0, 0, "square"}, {1024, 1024, 1024, 0, 0, "square"},
    {2048, 2048, 2048, 0, 0, "square"}, {4096, 4096, 4096, 0, 0, "square"},
    {1024, 768, 768, 0, 1, "768 attn fwd"}, {1024, 768, 768, 0, 0, "768 attn dx"},
    {768, 768, 1024, 1, 0, "768 attn dW"},
    {1024, 2048, 768, 0, 1, "768 up fwd"}, {1024, 768, 2048, 0, 0, "768 up dx"},
    {2048, 768, 1024, 1, 0, "768 up dW"},
    {1024, 768, 2048, 0, 1, "768 down fwd"}, {1024, 2048, 768, 0, 0, "768 down dx"},
    {768, 2048, 1024, 1, 0, "768 down dW"},
    {1024, 50304, 768, 0, 1, "768 head fwd"}, {1024, 768, 50304, 0, 0, "768 head dx"},
    {50304, 768, 1024, 1, 0, "768 head dW"},
    {2048, 288, 288, 0, 1, "288 attn fwd"}, {2048, 288, 288, 0, 0, "288 attn dx"},
    {288, 288, 2048, 1, 0, "288 attn dW"},
    {2048, 768, 288, 0, 1, "288 up fwd"}, {2048, 288, 768, 0, 0, "288 up dx"},
    {768, 288, 2048, 1, 0, "288 up dW"},
    {2048, 288, 768, 0, 1, "288 down fwd"}, {2048, 768, 288, 0, 0, "288 down dx"},
    {288, 768, 2048, 1, 0, "288 down dW"},
    {2048, 32000, 288, 0, 1, "288 head fwd"}, {2048, 288, 32000, 0, 0, "288 head dx"},
    {32000, 288, 2048, 1, 0, "288 head dW"},
};

/* ---- oneDNN, found at run time -------------------------------------------- */
#ifdef HAVE_DNNL
static struct {
    int ok;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    __typeof__(&dnnl_sgemm) sgemm;
    __typeof__(&dnnl_memory_desc_init_by_strides) md_init;
    __typeof__(&dnnl_matmul_desc_init) matmul_init;
    __typeof__(&dnnl_primitive_desc_create) pd_create;
    __typeof__(&dnnl_primitive_desc_destroy) pd_destroy;
    __typeof__(&dnnl_primitive_create) prim_create;
    __typeof__(&dnnl_primitive_destroy) prim_destroy;
    __typeof__(&dnnl_primitive_execute) execute;
    __typeof__(&dnnl_memory_create) mem_create;
    __typeof__(&dnnl_memory_destroy) mem_destroy;
    __typeof__(&dnnl_stream_wait) wait;
} dn;

static void dnnl_load(void)
{
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h) h = dlopen("libdnnl.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return;
#define SYM(field, name) \
    if (!(*(void **)&dn.field = dlsym(h, #name))) return;
    SYM(sgemm, dnnl_sgemm)
    SYM(md_init, dnnl_memory_desc_init_by_strides)
    SYM(matmul_init, dnnl_matmul_desc_init)
    SYM(pd_create, dnnl_primitive_desc_create)
    SYM(pd_destroy, dnnl_primitive_desc_destroy)
    SYM(prim_create, dnnl_primitive_create)
    SYM(prim_destroy, dnnl_primitive_destroy)
    SYM(execute, dnnl_primitive_execute)
    SYM(mem_create, dnnl_memory_create)
    SYM(mem_destroy, dnnl_memory_destroy)
    SYM(wait, dnnl_stream_wait)
#undef SYM
    __typeof__(&dnnl_engine_create) eng_create = (__typeof__(&dnnl_engine_create))dlsym(h, "dnnl_engine_create");
    __typeof__(&dnnl_stream_create) st_create = (__typeof__(&dnnl_stream_create))dlsym(h, "dnnl_stream_create");
    if (!eng_create || !st_create || eng_create(&dn.eng, dnnl_cpu, 0) != dnnl_success ||
        st_create(&dn.st, dn.eng, dnnl_stream_default_flags) != dnnl_success)
        return;
    dn.ok = 1;
}

/* A bf16 matmul primitive for one shape, with plain (strided) layouts, so it
 * pays for its own packing as titan does. */
typedef struct { dnnl_primitive_t prim; dnnl_memory_t a, b, c; } dnnl_mm;

static int dnnl_mm_make(dnnl_mm *m, const bshape *s, const void *A, const void *B, float *C)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t ad = {s->M, s->K}, bd = {s->K, s->N}, cd = {s->M, s->N};
    dnnl_dims_t as = {s->ta ? 1 : s->K, s->ta ? s->M : 1}, bs = {s->tb ? 1 : s->N, s->tb ? s->K : 1},
                cs = {s->N, 1};
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd;
    if (dn.md_init(&amd, 2, ad, dnnl_bf16, as) || dn.md_init(&bmd, 2, bd, dnnl_bf16, bs) ||
        dn.md_init(&cmd, 2, cd, dnnl_f32, cs) || dn.matmul_init(&d, &amd, &bmd, NULL, &cmd) ||
        dn.pd_create(&pd, &d, NULL, dn.eng, NULL))
        return -1;
    int bad = dn.prim_create(&m->prim, pd) != dnnl_success;
    dn.pd_destroy(pd);
    if (bad) return -1;
    if (dn.mem_create(&m->a, &amd, dn.eng, (void *)A) || dn.mem_create(&m->b, &bmd, dn.eng, (void *)B) ||
        dn.mem_create(&m->c, &cmd, dn.eng, C))
        return -1;
    return 0;
}

static void dnnl_mm_run(dnnl_mm *m)
{
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c}};
    dn.execute(m->prim, dn.st, 3, args);
    dn.wait(dn.st);
}

static void dnnl_mm_free(dnnl_mm *m)
{
    dn.mem_destroy(m->a), dn.mem_destroy(m->b), dn.mem_destroy(m->c);
    dn.prim_destroy(m->prim);
}
#endif

/* ---- timing ---------------------------------------------------------------- */

typedef struct {
    int impl; /* 0 titan, 1 openblas, 2 onednn */
    int bf16;
    const bshape *s;
    const float *A, *B;
    const uint16_t *A16, *B16;
    float *C;
#ifdef HAVE_DNNL
    dnnl_mm *mm;
#endif
} call;

static int run_once(const call *c)
{
    const bshape *s = c->s;
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    switch (c->impl) {
    case 0:
        return c->bf16 ? tt_gemm_bf16(c->A16, c->B16, c->C, s->M, s->N, s->K, s->ta, s->tb, 0)
                       : tt_gemm_f32(c->A, c->B, c->C, s->M, s->N, s->K, s->ta, s->tb, 0);
    case 1:
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                    s->M, s->N, s->K, 1.0f, c->A, lda, c->B, ldb, 0.0f, c->C, s->N);
        return 0;
#ifdef HAVE_DNNL
    case 2:
        if (c->bf16) {
            dnnl_mm_run(c->mm);
            return 0;
        }
        return dn.sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, c->A, lda, c->B,
                        ldb, 0.0f, c->C, s->N) == dnnl_success ? 0 : -1;
#endif
    default: return -1;
    }
}

/* best GFLOP/s over repetitions filling `seconds` (at least 3, after a warm-up) */
static double time_gflops(const call *c, double seconds)
{
    if (run_once(c)) return -1;
    double best = 1e30, t0 = tt_now();
    for (int r = 0; r < 3 || tt_now() - t0 < seconds; r++) {
        double t = tt_now();
        run_once(c);
        t = tt_now() - t;
        if (t < best) best = t;
    }
    return 2.0 * c->s->M * c->s->N * c->s->K / best * 1e-9;
}

static double max_rel_diff(const float *x, const float *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num = fmax(num, fabs((double)x[i] - y[i]));
        den = fmax(den, fabs((double)y[i]));
    }
    return num / (den > 0 ? den : 1);
}

static int parse_shape(const char *arg, bshape *s)
{
    char op[3] = "nn";
    int n = 0;
    if (sscanf(arg, "%dx%dx%d%n", &s->M, &s->N, &s->K, &n) != 3 || s->M <= 0 || s->N <= 0 || s->K <= 0) return -1;
    if (arg[n] == ':') {
        if (strlen(arg + n + 1) != 2) return -1;
        memcpy(op, arg + n + 1, 2);
    } else if (arg[n]) {
        return -1;
    }
    if ((op[0] != 'n' && op[0] != 't') || (op[1] != 'n' && op[1] != 't')) return -1;
    s->ta = op[0] == 't', s->tb = op[1] == 't', s->what = "";
    return 0;
}

int main(int argc, char **argv)
{
    int do_f32 = 1, do_bf16 = 1, nshapes = 0, only = -1;
    double seconds = 0.3;
    bshape *shapes = calloc((size_t)argc, sizeof(bshape));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *d = argv[++i];
            do_f32 = !strcmp(d, "f32"), do_bf16 = !strcmp(d, "bf16");
            if (!do_f32 && !do_bf16) { fprintf(stderr, "bench_gemm: --dtype is f32 or bf16, not %s\n", d); return 2; }
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            const char *o = argv[++i];
            only = !strcmp(o, "titan") ? 0 : !strcmp(o, "openblas") ? 1 : !strcmp(o, "onednn") ? 2 : -2;
            if (only == -2) { fprintf(stderr, "bench_gemm: --only titan|openblas|onednn, not %s\n", o); return 2; }
        } else if (parse_shape(argv[i], &shapes[nshapes]) == 0) {
            nshapes++;
        } else {
            fprintf(stderr, "usage: bench_gemm [--dtype f32|bf16] [--seconds S] [--only titan|openblas|onednn] "
                            "[MxNxK[:nt] ...]\n"
                            "bench_gemm: cannot read '%s'\n", argv[i]);
            return 2;
        }
    }
    const bshape *list = nshapes ? shapes : default_shapes;
    if (!nshapes) nshapes = (int)(sizeof(default_shapes) / sizeof(default_shapes[0]));

    tt_peak pk;
    if (tt_peak_get(&pk)) { fprintf(stderr, "bench_gemm: %s\n", tt_last_error()); return 1; }
    int have_dnnl = 0;
#ifdef HAVE_DNNL
    dnnl_load();
    have_dnnl = dn.ok;
#endif
    printf("peak (%s, %d threads, %s): f32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n", pk.cached ? "cached" : "measured",
           pk.threads, pk.path, pk.f32_gflops, pk.bf16_gflops);
    printf("titan paths: f32 %s, bf16 %s; oneDNN: %s\n", tt_gemm_path_name(TT_F32), tt_gemm_path_name(TT_BF16),
           have_dnnl ? "loaded" : "not available");
    static const char *names[3] = {"titan", "openblas", "onednn"};
    int wins[2][3] = {{0}};

    for (int bf = 0; bf < 2; bf++) {
        if ((bf && !do_bf16) || (!bf && !do_f32)) continue;
        const double peak = bf ? pk.bf16_gflops : pk.f32_gflops;
        printf("\n%-5s %-16s %-3s %-13s | %14s | %14s | %14s | %s\n", bf ? "bf16" : "f32", "MxNxK", "op", "layer",
               "titan GF  %pk", "openblas GF %pk", "onednn GF %pk", "fastest");
        for (int si = 0; si < nshapes; si++) {
            const bshape *s = &list[si];
            const size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
            float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *Cref = malloc(nc * 4);
            uint16_t *A16 = malloc(na * 2), *B16 = malloc(nb * 2);
            if (!A || !B || !C || !Cref || !A16 || !B16) { fprintf(stderr, "bench_gemm: out of memory\n"); return 1; }
            tt_rng rng = {42, 0};
            for (size_t x = 0; x < na; x++) A[x] = (float)tt_rng_uniform(&rng) - 0.5f, A16[x] = tt_f32_to_bf16(A[x]);
            for (size_t x = 0; x < nb; x++) B[x] = (float)tt_rng_uniform(&rng) - 0.5f, B16[x] = tt_f32_to_bf16(B[x]);
            double gf[3] = {-1, -1, -1};
            call c = {.bf16 = bf, .s = s, .A = A, .B = B, .A16 = A16, .B16 = B16, .C = C};
#ifdef HAVE_DNNL
            dnnl_mm mm = {0};
            int mm_ok = bf && have_dnnl && dnnl_mm_make(&mm, s, A16, B16, Cref) == 0;
            c.mm = &mm;
#endif
            if (only < 0 || only == 0) gf[0] = time_gflops(&c, seconds);
            /* the other libraries write Cref; it also checks titan's answer */
            c.C = Cref;
            if (!bf && (only < 0 || only == 1)) c.impl = 1, gf[1] = time_gflops(&c, seconds);
#ifdef HAVE_DNNL
            if (have_dnnl && (!bf || mm_ok) && (only < 0 || only == 2)) c.impl = 2, gf[2] = time_gflops(&c, seconds);
            if (mm_ok) dnnl_mm_free(&mm);
#endif
            double diff = gf[0] > 0 && (gf[1] > 0 || gf[2] > 0) ? max_rel_diff(C, Cref, nc) : 0;
            char op[3] = {s->ta ? 't' : 'n', s->tb ? 't' : 'n', 0}, dims[32];
            snprintf(dims, sizeof dims, "%dx%dx%d", s->M, s->N, s->K);
            printf("%-5s %-16s %-3s %-13s", "", dims, op, s->what);
            int best = -1;
            for (int i = 0; i < 3; i++) {
                if (gf[i] > 0) printf(" | %7.1f %5.1f%%", gf[i], 100 * gf[i] / peak);
                else printf(" | %14s", "-");
                if (gf[i] > 0 && (best < 0 || gf[i] > gf[best])) best = i;
            }
            if (best >= 0) wins[bf][best]++;
            printf(" | %s", best >= 0 ? names[best] : "-");
            if (diff > (bf ? 1e-2 : 1e-4)) printf("  (MISMATCH: max rel diff %.2g)", diff);
            printf("\n");
            fflush(stdout);
            free(A), free(B), free(C), free(Cref), free(A16), free(B16);
        }
    }
    for (int bf = 0; bf < 2; bf++) {
        if ((bf && !do_bf16) || (!bf && !do_f32)) continue;
        printf("%s fastest: titan %d, openblas %d, onednn %d shapes\n", bf ? "bf16" : "f32", wins[bf][0],
               wins[bf][1], wins[bf][2]);
    }
    free(shapes);
    return 0;
}

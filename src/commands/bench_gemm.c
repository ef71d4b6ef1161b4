/* bench_gemm.c — `titan bench gemm`: GFLOP/s of titan's GEMM on square sizes
 * and on the products of a config's training step (forward, input gradient
 * and weight gradient of each Linear, with the dtypes the step uses), beside
 * OpenBLAS (fp32 sgemm) and oneDNN (fp32 sgemm, bf16 matmul primitive), with
 * each figure's share of the machine's measured peak and which one the
 * training step runs. titan's figure is a one-node graph (matmul) run through
 * the executor on the config's backend, as the step runs it.
 *
 * A shape's calls (titan's and each library's) run in rounds, one call of
 * each a round, so that on a shared machine whose speed moves from second
 * to second they all meet the same moments: each figure is its best round,
 * and which is fastest goes by the median over the rounds of the ratio of
 * their times. Figures timed one library after the other (as before) put
 * titan ahead of oneDNN on 14 and on 16 of 18 products in two runs 15 s
 * apart on the AMX host, whose speed doubled and halved within seconds. oneDNN is loaded
 * at run time (dlopen), so titan builds and runs without it; its header only
 * has to be present at build time for its types. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "commands/bench_grouped.h"
#include "config/resolve.h"
#include "graph/exec.h"

#ifdef TITAN_HAVE_DNNL_H /* CMake found oneDNN's header (libdnnl-dev) */
#include <oneapi/dnnl/dnnl.h>
#if DNNL_VERSION_MAJOR == 2
#define HAVE_DNNL 1
#endif
#endif

typedef struct {
    int M, N, K, ta, tb;
    tt_dtype adt, bdt, cdt; /* the operands as the step passes them (bf16 rows) */
    char what[32];
} bshape;

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
    if (dn.ok) return;
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

/* A bf16 x bf16 matmul primitive for one shape, with plain (strided)
 * layouts, so that it pays for its own packing as titan does, writing C in
 * the shape's dtype as titan does (bf16 for a forward or input gradient,
 * fp32 otherwise). */
typedef struct { dnnl_primitive_t prim; dnnl_memory_t a, b, c; } dnnl_mm;

static int dnnl_mm_make(dnnl_mm *m, const bshape *s, const void *A, const void *B, void *C)
{
    dnnl_memory_desc_t amd, bmd, cmd;
    dnnl_dims_t ad = {s->M, s->K}, bd = {s->K, s->N}, cd = {s->M, s->N};
    dnnl_dims_t as = {s->ta ? 1 : s->K, s->ta ? s->M : 1}, bs = {s->tb ? 1 : s->N, s->tb ? s->K : 1}, cs = {s->N, 1};
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd;
    if (dn.md_init(&amd, 2, ad, dnnl_bf16, as) || dn.md_init(&bmd, 2, bd, dnnl_bf16, bs) ||
        dn.md_init(&cmd, 2, cd, s->cdt == TT_BF16 ? dnnl_bf16 : dnnl_f32, cs) ||
        dn.matmul_init(&d, &amd, &bmd, NULL, &cmd) ||
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

static void dnnl_mm_free(dnnl_mm *m)
{
    dn.mem_destroy(m->a), dn.mem_destroy(m->b), dn.mem_destroy(m->c);
    dn.prim_destroy(m->prim);
}
#endif

/* ---- the shapes ------------------------------------------------------------- */

static void add_shape(bshape *s, int *n, int M, int N, int K, int ta, int tb, tt_dtype adt, tt_dtype bdt, tt_dtype cdt,
                      const char *what)
{
    bshape *x = &s[(*n)++];
    *x = (bshape){M, N, K, ta, tb, adt, bdt, cdt, ""};
    snprintf(x->what, sizeof x->what, "%s", what);
}

/* The products of one Llama-style step as the fused graph runs them: per
 * Linear the forward y = x W^T (nt), dx = dy W (nn) and dW = dy^T x (tn);
 * in the bf16 table with bf16 activations and the bf16 copy of the weights
 * that a bf16 run keeps (tt_step_cfg.weights16; FSDP's gathers are bf16
 * too). The head's products are those of one block of rows of the fused
 * cross-entropy. */
static int step_shapes(const tt_config *c, int bf, bshape *s)
{
    const int N = c->training.local_batch_size * c->training.seq_len, D = c->model.dim, F = c->model.ffn_dim;
    const int q = c->model.n_heads * c->model.head_dim, kv = c->model.n_kv_heads * c->model.head_dim;
    const int V = c->model.vocab_size, R = tt_ce_block_rows(N, V, TT_CE_BLOCK_LOGITS);
    const tt_dtype a = bf ? TT_BF16 : TT_F32, w = a;
    struct { const char *n; int out, in, rows; } lin[] = {
        {"qkv", q + 2 * kv, D, N}, {"o", D, q, N}, {"gate/up", 2 * F, D, N}, {"down", D, F, N}, {"head", V, D, R},
    };
    int n = 0;
    char what[32];
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) {
        snprintf(what, sizeof what, "%s fwd", lin[i].n);
        add_shape(s, &n, lin[i].rows, lin[i].out, lin[i].in, 0, 1, a, w, i == 4 ? TT_F32 : a, what);
        snprintf(what, sizeof what, "%s dx", lin[i].n);
        add_shape(s, &n, lin[i].rows, lin[i].in, lin[i].out, 0, 0, a, w, a, what);
        snprintf(what, sizeof what, "%s dW", lin[i].n);
        add_shape(s, &n, lin[i].out, lin[i].in, lin[i].rows, 1, 0, a, a, TT_F32, what);
    }
    return n;
}

/* ---- timing ---------------------------------------------------------------- */

typedef struct {
    int impl; /* 0 titan, 1 openblas, 2 onednn */
    int bf16;
    const bshape *s;
    tt_exec *exec;             /* titan: the matmul node on the backend */
    const float *A32, *B32;    /* the operands in fp32 */
    const uint16_t *A16, *B16; /* and in bf16 */
    float *C32;
#ifdef HAVE_DNNL
    dnnl_mm *mm;
#endif
} call;

/* titan's product as the step runs it: C = op(A) op(B) in the shape's dtypes,
 * A and B uploaded once. *c_out is the output value. */
static tt_exec *titan_matmul(const tt_backend *be, const bshape *s, const call *c, tt_graph **g_out, tt_value **c_out)
{
    tt_graph *g = *g_out = tt_graph_new();
    if (!g) return NULL;
    const int64_t as[2] = {s->ta ? s->K : s->M, s->ta ? s->M : s->K}, bs[2] = {s->tb ? s->N : s->K, s->tb ? s->K : s->N};
    tt_value *A = tt_graph_input(g, "A", s->adt, 2, as), *B = tt_graph_input(g, "B", s->bdt, 2, bs);
    tt_value *C = *c_out = tt_matmul_to(g, A, B, s->ta, s->tb, s->cdt);
    tt_graph_mark_output(g, C);
    tt_exec *e = C ? tt_exec_new(g, be, NULL, TT_EXEC_GRAPH) : NULL;
    if (e && (tt_exec_write(e, A, s->adt == TT_BF16 ? (const void *)c->A16 : c->A32, tt_value_bytes(A)) ||
              tt_exec_write(e, B, s->bdt == TT_BF16 ? (const void *)c->B16 : c->B32, tt_value_bytes(B)))) {
        tt_exec_free(e);
        e = NULL;
    }
    return e;
}

static int run_once(const call *c)
{
    const bshape *s = c->s;
    const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    switch (c->impl) {
    case 0:
        return tt_exec_run(c->exec);
    case 1:
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
                    s->K, 1.0f, c->A32, lda, c->B32, ldb, 0.0f, c->C32, s->N);
        return 0;
#ifdef HAVE_DNNL
    case 2:
        if (c->bf16) {
            dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, c->mm->a}, {DNNL_ARG_WEIGHTS, c->mm->b}, {DNNL_ARG_DST, c->mm->c}};
            dn.execute(c->mm->prim, dn.st, 3, args);
            dn.wait(dn.st);
            return 0;
        }
        return dn.sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, c->A32, lda, c->B32, ldb, 0.0f,
                        c->C32, s->N) == dnnl_success ? 0 : -1;
#endif
    default: return -1;
    }
}

/* Rounds a shape's calls take: at least MIN_ROUNDS, then until the time budget
 * is spent, at most MAX_ROUNDS */
#define MIN_ROUNDS 5
#define MAX_ROUNDS 4096

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The n calls of one shape (calls[0] titan's) timed in rounds, each round
 * one call of each in turn, the order rotating from round to round, until
 * `seconds` a call have passed: on a shared machine whose speed moves from
 * second to second, every library then meets the same moments as titan.
 * gf[i]: call i's best GFLOP/s (-1 when its warm-up call failed); vs[i]: the
 * median over the rounds of titan's time over call i's in that round (above
 * 1: call i was the faster). */
static tt_err time_rounds(const call *calls, int n, double seconds, double *gf, double *vs)
{
    double *t = malloc(sizeof(double) * (size_t)n * MAX_ROUNDS), *ratio = malloc(sizeof(double) * MAX_ROUNDS);
    if (!t || !ratio) {
        free(t), free(ratio);
        return tt_errorf("bench gemm: out of memory for the timings");
    }
    int ok[3] = {0};
    for (int i = 0; i < n; i++) ok[i] = run_once(&calls[i]) == 0; /* the warm-up */
    int rounds = 0;
    for (const double t0 = tt_now(); rounds < MAX_ROUNDS && (rounds < MIN_ROUNDS || tt_now() - t0 < seconds * n);
         rounds++)
        for (int k = 0; k < n; k++) {
            const int i = (rounds + k) % n;
            if (!ok[i]) continue;
            const double a = tt_now();
            run_once(&calls[i]);
            t[(size_t)i * MAX_ROUNDS + rounds] = tt_now() - a;
        }
    const bshape *s = calls[0].s;
    for (int i = 0; i < n; i++) {
        gf[i] = vs[i] = -1;
        if (!ok[i]) continue;
        const double *ti = t + (size_t)i * MAX_ROUNDS;
        double best = ti[0];
        for (int r = 1; r < rounds; r++) best = ti[r] < best ? ti[r] : best;
        gf[i] = 2.0 * s->M * s->N * s->K / best * 1e-9;
        if (!ok[0]) continue;
        for (int r = 0; r < rounds; r++) ratio[r] = t[r] / ti[r];
        qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
        vs[i] = rounds % 2 ? ratio[rounds / 2] : 0.5 * (ratio[rounds / 2 - 1] + ratio[rounds / 2]);
    }
    free(t), free(ratio);
    return 0;
}

/* the largest difference between titan's C (its dtype) and a library's fp32 C, relative to the largest |C| */
static double max_rel_diff(const void *x, tt_dtype dt, const float *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = dt == TT_BF16 ? tt_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
        num = fmax(num, fabs(a - y[i]));
        den = fmax(den, fabs((double)y[i]));
    }
    return num / (den > 0 ? den : 1);
}

tt_err tt_bench_gemm_shape_parse(const char *arg, int *M, int *N, int *K, int *ta, int *tb)
{
    char op[3] = "nn";
    int n = 0;
    if (sscanf(arg, "%dx%dx%d%n", M, N, K, &n) != 3 || *M <= 0 || *N <= 0 || *K <= 0 || *M > 65536 || *N > 262144 ||
        *K > 262144)
        return tt_errorf("gemm shape '%s': want MxNxK[:op] with positive sizes (op nn, nt, tn or tt)", arg);
    if (arg[n] == ':') {
        if (strlen(arg + n + 1) != 2) return tt_errorf("gemm shape '%s': op is two letters, n or t", arg);
        memcpy(op, arg + n + 1, 2);
    } else if (arg[n]) {
        return tt_errorf("gemm shape '%s': unexpected '%s'", arg, arg + n);
    }
    if ((op[0] != 'n' && op[0] != 't') || (op[1] != 'n' && op[1] != 't'))
        return tt_errorf("gemm shape '%s': op is two letters, n or t", arg);
    *ta = op[0] == 't', *tb = op[1] == 't';
    return 0;
}

static const char *const impl_names[3] = {"titan", "openblas", "onednn"};

/* One shape's host buffers: the operands in fp32 and bf16, a library's C (fp32, or oneDNN's bf16) and titan's */
typedef struct {
    float *A, *B, *C32;
    uint16_t *A16, *B16, *C16;
    void *C;
} shape_bufs;

static void shape_bufs_free(shape_bufs *b)
{
    tt_free(b->A), tt_free(b->B), tt_free(b->C32), tt_free(b->A16), tt_free(b->B16), tt_free(b->C16), tt_free(b->C);
}

/* One table (fp32 or bf16) over the shapes. */
static tt_err table(FILE *out, const tt_backend *be, int bf, const bshape *list, int n, double seconds, double peak,
                    int have_dnnl)
{
    (void)have_dnnl;
    int wins[3] = {0};
    double worst_gap[3] = {0}; /* how much faster than titan a library was, at most */
    fprintf(out, "\n%-5s %-16s %-3s %-14s %-11s | %14s | %14s | %14s | %s\n", bf ? "bf16" : "f32", "MxNxK", "op", "product",
            "A.B->C", "titan GF  %pk", "openblas GF %pk", "onednn GF %pk", "fastest");
    for (int si = 0; si < n; si++) {
        const bshape *s = &list[si];
        const size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
        /* the libraries' operands and C on huge pages where they are big (tt_alloc), as titan's are in its
         * arena: on 4 KB pages oneDNN ran the head's forward (a 206 MB C, rows 201 KB apart) at half speed */
        shape_bufs bu = {tt_alloc(na * 4), tt_alloc(nb * 4), tt_alloc(nc * 4), tt_alloc(na * 2), tt_alloc(nb * 2),
                         tt_alloc(nc * 2), tt_alloc(nc * 4)};
        float *A = bu.A, *B = bu.B, *C32 = bu.C32;
        uint16_t *A16 = bu.A16, *B16 = bu.B16, *C16 = bu.C16;
        void *C = bu.C;
        if (!A || !B || !C32 || !A16 || !B16 || !C16 || !C) {
            shape_bufs_free(&bu);
            return tt_errorf("bench gemm: out of memory for %dx%dx%d", s->M, s->N, s->K);
        }
        tt_rng rng = {42, 0};
        for (size_t x = 0; x < na; x++) A[x] = (float)tt_rng_uniform(&rng) - 0.5f, A16[x] = tt_f32_to_bf16(A[x]);
        for (size_t x = 0; x < nb; x++) B[x] = (float)tt_rng_uniform(&rng) - 0.5f, B16[x] = tt_f32_to_bf16(B[x]);
        double gf[3] = {-1, -1, -1}, vs[3] = {-1, -1, -1};
        call c = {.bf16 = bf, .s = s, .A32 = A, .B32 = B, .A16 = A16, .B16 = B16, .C32 = C32};
        tt_graph *g = NULL;
        tt_value *cv = NULL;
        if (!(c.exec = titan_matmul(be, s, &c, &g, &cv))) {
            tt_graph_free(g);
            shape_bufs_free(&bu);
            return tt_error_prefix("bench gemm %dx%dx%d: ", s->M, s->N, s->K);
        }
        /* the calls timed side by side: titan's, then the libraries' this row has (each call's impl says which) */
        call calls[3];
        int n_calls = 0;
        calls[n_calls++] = c;
        if (!bf) calls[n_calls] = c, calls[n_calls++].impl = 1;
#ifdef HAVE_DNNL
        dnnl_mm mm = {0};
        const int c16 = s->cdt == TT_BF16;
        const int mm_ok = bf && have_dnnl && dnnl_mm_make(&mm, s, A16, B16, c16 ? (void *)C16 : C32) == 0;
        c.mm = &mm;
        if (have_dnnl && (!bf || mm_ok)) calls[n_calls] = c, calls[n_calls++].impl = 2;
#endif
        double cgf[3], cvs[3];
        tt_err trc = time_rounds(calls, n_calls, seconds, cgf, cvs);
        for (int k = 0; k < n_calls && !trc; k++) gf[calls[k].impl] = cgf[k], vs[calls[k].impl] = cvs[k];
        if (gf[0] > 0 && tt_exec_read(c.exec, cv, C, tt_value_bytes(cv))) gf[0] = -1;
        tt_exec_free(c.exec);
        tt_graph_free(g);
#ifdef HAVE_DNNL
        if (mm_ok) dnnl_mm_free(&mm);
        for (size_t x = 0; mm_ok && c16 && x < nc; x++) C32[x] = tt_bf16_to_f32(C16[x]); /* for the check below */
#endif
        if (trc) {
            shape_bufs_free(&bu);
            return -1;
        }
        /* the libraries' C checks titan's */
        const double diff = gf[0] > 0 && (gf[1] > 0 || gf[2] > 0) ? max_rel_diff(C, s->cdt, C32, nc) : 0;
        char op[3] = {s->ta ? 't' : 'n', s->tb ? 't' : 'n', 0}, dims[32], dts[16];
        snprintf(dims, sizeof dims, "%dx%dx%d", s->M, s->N, s->K);
        snprintf(dts, sizeof dts, "%s.%s->%s", tt_dtype_name(s->adt), tt_dtype_name(s->bdt), tt_dtype_name(s->cdt));
        fprintf(out, "%-5s %-16s %-3s %-14s %-11s", "", dims, op, s->what, dts);
        /* the fastest by the rounds' ratios: titan unless a library's median round beat it */
        int best = gf[0] > 0 ? 0 : -1;
        double best_vs = 1;
        for (int i = 0; i < 3; i++) {
            if (gf[i] > 0) fprintf(out, " | %7.1f %5.1f%%", gf[i], 100 * gf[i] / peak);
            else fprintf(out, " | %14s", "-");
            if (i && vs[i] > best_vs) best = i, best_vs = vs[i];
            if (i && vs[i] > 0 && vs[i] - 1 > worst_gap[i]) worst_gap[i] = vs[i] - 1;
        }
        if (best >= 0) wins[best]++;
        fprintf(out, " | %-8s", best >= 0 ? impl_names[best] : "-");
        for (int i = 1; i < 3; i++)
            if (vs[i] > 0) fprintf(out, " %s/titan %.3f", impl_names[i], vs[i]);
        if (diff > (bf ? 2e-2 : 1e-4)) fprintf(out, "  (MISMATCH: max rel diff %.2g)", diff);
        fprintf(out, "\n");
        fflush(out);
        shape_bufs_free(&bu);
    }
    fprintf(out, "%s fastest: titan %d, openblas %d, onednn %d of %d shapes", bf ? "bf16" : "f32", wins[0], wins[1],
            wins[2], n);
    for (int i = 1; i < 3; i++)
        if (worst_gap[i] > 0) fprintf(out, "; %s at most %.0f%% faster than titan", impl_names[i], 100 * worst_gap[i]);
    fprintf(out, "\n");
    return 0;
}

tt_err tt_bench_gemm(const tt_config *c, const char *const *shapes, int n_shapes, int dtypes, double seconds, FILE *out)
{
    const tt_backend *be = tt_config_backend(c);
    tt_backend_peak pk;
    if (!be || be->peak(0, &pk)) return -1;
    int have_dnnl = 0;
#ifdef HAVE_DNNL
    dnnl_load();
    have_dnnl = dn.ok;
#endif
    fprintf(out, "peak (%s, %s, %s): f32 %.1f GFLOP/s, bf16 %.1f GFLOP/s\n", pk.source, pk.device, pk.path,
            pk.gflops[TT_F32], pk.gflops[TT_BF16]);
    fprintf(out, "titan: the matmul op on backend %s; OpenBLAS %s; oneDNN %s\n", be->name, openblas_get_config(),
            have_dnnl ? "loaded" : "not available (its products are left out; Debian: libdnnl-dev)");
    fprintf(out, "each shape's calls alternated in rounds (one call of each a round, the order rotating) for "
                 "%.2f s a library; GF: the best round's; fastest, and LIB/titan: the median over the rounds of "
                 "titan's time over the library's (above 1: the library was faster); bf16 rows: titan and oneDNN "
                 "read bf16 activations and weights (the bf16 copy of the weights a bf16 run keeps) and write C in "
                 "the dtype the step wants\n",
            seconds);
    bshape *list = calloc((size_t)n_shapes + 64, sizeof *list);
    if (!list) return tt_errorf("out of memory");
    tt_err rc = 0;
    for (int bf = 0; bf < 2 && !rc; bf++) {
        if (!(dtypes & (1 << bf))) continue;
        const tt_dtype d = bf ? TT_BF16 : TT_F32;
        int n = 0;
        if (n_shapes) {
            for (int i = 0; i < n_shapes && !rc; i++) {
                int M, N, K, ta, tb;
                if ((rc = tt_bench_gemm_shape_parse(shapes[i], &M, &N, &K, &ta, &tb))) break;
                add_shape(list, &n, M, N, K, ta, tb, d, d, TT_F32, "given");
            }
        } else {
            static const int sq[] = {1024, 2048, 4096};
            for (int i = 0; i < 3; i++) add_shape(list, &n, sq[i], sq[i], sq[i], 0, 0, d, d, TT_F32, "square");
            n += step_shapes(c, bf, list + n);
        }
        if (!rc) rc = table(out, be, bf, list, n, seconds, pk.gflops[bf ? TT_BF16 : TT_F32], have_dnnl);
    }
    free(list);
    if (!rc && !n_shapes) rc = tt_bench_grouped_gemm(c, dtypes, seconds, pk.gflops[TT_F32], pk.gflops[TT_BF16], out);
    if (!rc)
        fprintf(out, "\nthe training step runs titan's GEMM for every product above: it reads the bf16 activations "
                     "and the weights' bf16 copy as they are, writes bf16 outputs and adds weight gradients into the "
                     "fp32 accumulators in place, where a library's call would need an extra pass to accumulate\n");
    return rc;
}

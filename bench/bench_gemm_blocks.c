/* bench_gemm_blocks.c — titan's GEMM in two configurations, alternated call
 * by call on the same operands: by default the k and A blocks tuned for a
 * 1 MB L2 (Zen 4) against those the CPU's own L2 gives (tt_gemm_set_l2);
 * with --a-tile / --b-tile, also two register tiles of the AVX-512 fp32
 * kernel (tt_gemm_set_tile); with --a-split / --b-split, also two ways of
 * sharing a product between the threads (tt_gemm_set_split). A weight operand
 * of a bf16 product is read as a bf16 copy of the fp32 weights, made before
 * the calls, as the step reads the copy its state keeps (tt_state_alloc_w16);
 * with --a-f32-weights A reads the fp32 weights and packs them into bf16
 * panels in each call, as the step did before that copy. With
 * --a-scratch-out, A sums a bf16 C's tiles in
 * scratch and rounds them after (tt_gemm_set_out16(0)), where B's kernel
 * rounds its whole tiles into C. With --a-pack-cols N, A reads an A stored
 * as the kernel reads it in place below N columns of C a thread and packs it
 * from there (tt_gemm_set_a_pack_cols), where B follows its path's figure.
 * With --a-no-pack-prefetch, A's packers read a row-contiguous operand
 * without prefetching rows ahead (tt_gemm_set_pack_prefetch(0); the paths
 * that prefetch, AMX and AVX-512, differ). With --a-kc-blocks, A cuts every K in
 * kc blocks (tt_gemm_set_kc_whole(0)), where B takes a K up to its path's
 * kc_whole in one block (AMX, the AVX-512 bf16 tiles and the 12x32 fp32
 * one). With --a-pack-transposed, A
 * packs every transposed fp32 A (tt_gemm_set_a_cols(SIZE_MAX)), where B's
 * fp32 tiles read a large one in place.
 * On a shared host whose speed drifts over seconds, whole-process A/B runs
 * (titan bench gemm once with TITAN_GEMM_L2=1M, once without) differ by more
 * than the blocks do; pairs of calls a few ms apart see the same machine, so
 * the median of their ratios is the figure to quote. Each pair's order
 * alternates (A then B, B then A), so neither side always runs second.
 *
 *   bench_gemm_blocks [--f32] [--reps N] [--a-l2 BYTES] [--b-l2 BYTES] [--a-tile T] [--b-tile T]
 *                     [--a-split S] [--b-split S] [--a-f32-weights] [--a-scratch-out] [--a-pack-cols N]
 *                     [--a-no-pack-prefetch] [--a-kc-blocks] [--a-pack-transposed] [--cold]
 *                     [MxNxK:op ...]
 *
 * Without shapes, the products of the llama_768 bf16 step (dim 768, ffn 2048,
 * 1024 tokens, vocab 50304, the head's three products over all 1024 rows at once, as cross_entropy.c's one block of
 * them makes them) in the dtypes the
 * step passes them (--f32: every operand fp32, as the fp32 step passes them;
 * given shapes take bf16 A, B (a weight, read as its bf16 copy) and bf16 C, as a linear's forward and
 * input gradient do, or with op tn bf16 A and B added into an fp32 C, as its
 * weight gradient does; fp32 all through with --f32). A = --a-l2 (default 1 MB), B = --b-l2 (default: the
 * CPU's; 0 is the CPU's for either); --a-tile and --b-tile (auto, 12x32, 8x48 or 6x64) default to TITAN_GEMM_TILE's, or
 * the default tile, and --a-split and --b-split (auto, shared, own) to TITAN_GEMM_SPLIT's. So `--a-l2 0 --a-tile 12x32
 * --b-tile auto` compares the tiles, and `--a-l2 0 --a-split shared --b-split own` the splits. --cold writes 256 MiB
 * before each call, so that its operands come from memory. Each line: median GFLOP/s of A and of B, and the median of the
 * per-pair speed ratios B/A; the last line weights the products by A's time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "core/core.h"

typedef struct {
    int M, N, K, ta, tb;
    tt_dtype adt, bdt, cdt;
    const char *what;
} shape;

/* llama_768, bf16: activations bf16, weights fp32 (read as their bf16 copy), weight gradients fp32 (accumulated) */
#define FWD(m, n, k, w) {m, n, k, 0, 1, TT_BF16, TT_F32, TT_BF16, w " fwd"}
#define DX(m, n, k, w) {m, n, k, 0, 0, TT_BF16, TT_F32, TT_BF16, w " dx"}
#define DW(m, n, k, w) {m, n, k, 1, 0, TT_BF16, TT_BF16, TT_F32, w " dW"}
static const shape step_shapes[] = {
    FWD(1024, 2304, 768, "qkv"),     DX(1024, 768, 2304, "qkv"),     DW(2304, 768, 1024, "qkv"),
    FWD(1024, 768, 768, "o"),        DX(1024, 768, 768, "o"),        DW(768, 768, 1024, "o"),
    FWD(1024, 4096, 768, "gate/up"), DX(1024, 768, 4096, "gate/up"), DW(4096, 768, 1024, "gate/up"),
    FWD(1024, 768, 2048, "down"),    DX(1024, 2048, 768, "down"),    DW(768, 2048, 1024, "down"),
    {1024, 50304, 768, 0, 1, TT_BF16, TT_F32, TT_F32, "head fwd"}, DX(1024, 768, 50304, "head"),
    DW(50304, 768, 1024, "head"),
};

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* n values of dt, on huge pages where they are big, as tt_alloc gives the step its weights, gradients and arena:
 * on 4 KB pages the products with a large operand ran up to 2x slower here (the head's forward, its fp32 logits
 * 206 MB, a row 201 KB apart) than in the step */
static void *filled(size_t n, tt_dtype dt, unsigned *seed)
{
    void *p = tt_alloc(n * tt_dtype_size(dt));
    if (!p) {
        fprintf(stderr, "bench_gemm_blocks: out of memory for %zu values\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        const float v = (float)(*seed >> 8) / 16777216.0f - 0.5f;
        if (dt == TT_BF16) ((uint16_t *)p)[i] = tt_f32_to_bf16(v);
        else ((float *)p)[i] = v;
    }
    return p;
}

/* one side of the comparison: an L2 size for the blocks (0: the CPU's), a tile and a split (NULL: the default),
 * whether a bf16 product reads the fp32 weights (not their bf16 copy), whether a bf16 C is rounded after, from
 * scratch, and from how many columns a thread A is packed where it could be read in place (0: the path's own) */
typedef struct {
    long l2;
    const char *tile, *split;
    int f32_weights, scratch_out, a_pack_cols, no_pack_prefetch, kc_blocks, pack_transposed;
} side;

static void set_side(const side *x)
{
    tt_gemm_set_l2(x->l2);
    tt_gemm_set_out16(!x->scratch_out);
    tt_gemm_set_a_pack_cols(x->a_pack_cols);
    tt_gemm_set_pack_prefetch(!x->no_pack_prefetch);
    tt_gemm_set_kc_whole(!x->kc_blocks);
    tt_gemm_set_a_cols(x->pack_transposed ? SIZE_MAX : 0);
    if (tt_gemm_set_tile(x->tile) || tt_gemm_set_split(x->split)) {
        fprintf(stderr, "bench_gemm_blocks: %s\n", tt_last_error());
        exit(2);
    }
}

/* one product, A and B alternated reps times; adds A's time to *ta, B's to *tb */
/* --cold: a buffer larger than the L3 written before each timed call, so the call finds its operands in memory as
 * the step does (each product's operands last touched many products ago), not in the caches the last call filled */
static char *g_flush;
static size_t g_flush_bytes;

static void flush_caches(void)
{
    for (size_t i = 0; g_flush && i < g_flush_bytes; i += 64) g_flush[i] = (char)(g_flush[i] + 1);
}

static int run(const shape *s, int reps, const side *sa, const side *sb, double *ta_sum, double *tb_sum)
{
    unsigned seed = 7;
    void *A = filled((size_t)s->M * s->K, s->adt, &seed), *B = filled((size_t)s->K * s->N, s->bdt, &seed);
    void *C = filled((size_t)s->M * s->N, s->cdt, &seed);
    tt_gemm_args g = {.compute = s->adt == TT_BF16 || s->bdt == TT_BF16 ? TT_BF16 : TT_F32,
                            .A = A, .adt = s->adt, .lda = s->ta ? s->M : s->K, .ta = s->ta,
                            .B = B, .bdt = s->bdt, .ldb = s->tb ? s->K : s->N, .tb = s->tb,
                            .C = C, .cdt = s->cdt, .ldc = s->N, .M = s->M, .N = s->N, .K = s->K,
                            .accumulate = s->cdt == TT_F32 && s->ta};
    /* the weights' bf16 copy: rounded as the packing rounds them, so both sides compute the same product */
    const int copy = g.compute == TT_BF16 && s->bdt == TT_F32;
    uint16_t *B16 = copy ? tt_alloc((size_t)s->K * s->N * sizeof *B16) : NULL;
    if (copy && !B16) return -1;
    for (size_t i = 0; copy && i < (size_t)s->K * s->N; i++) B16[i] = tt_f32_to_bf16(((const float *)B)[i]);
    double *t = malloc(sizeof(double) * 3 * (size_t)reps);
    if (!t) {
        tt_free(B16);
        return -1;
    }
    int rc = 0;
    /* r = -1: both once, unmeasured (scratch, caches); then A first in even pairs, B first in odd ones */
    for (int r = -1; r < reps && !rc; r++)
        for (int i = 0; i < 2 && !rc; i++) {
            const int v = (r & 1) ? !i : i;
            const side *x = v ? sb : sa;
            set_side(x);
            g.B = copy && !x->f32_weights ? (const void *)B16 : B;
            g.bdt = copy && !x->f32_weights ? TT_BF16 : s->bdt;
            flush_caches();
            const double t0 = tt_now();
            rc = tt_gemm(&g);
            if (r >= 0) t[v * reps + r] = tt_now() - t0;
        }
    if (!rc) {
        for (int r = 0; r < reps; r++) t[2 * reps + r] = t[r] / t[reps + r];
        const double flop = 2.0 * s->M * s->N * s->K, ma = median(t, reps), mb = median(t + reps, reps);
        *ta_sum += ma, *tb_sum += mb;
        const double ga = flop / ma * 1e-9, gb = flop / mb * 1e-9;
        printf("%6dx%-6dx%-6d %s%s  %-12s  A %6.1f  B %6.1f GFLOP/s  B/A %.3f\n", s->M, s->N, s->K, s->ta ? "t" : "n",
               s->tb ? "t" : "n", s->what, ga, gb, median(t + 2 * reps, reps));
    }
    free(t);
    tt_free(A), tt_free(B), tt_free(C), tt_free(B16);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = 0, f32 = 0;
    side sa = {.l2 = 1L << 20}, sb = {.l2 = 0};
    shape given[64];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--f32")) f32 = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--a-f32-weights")) sa.f32_weights = 1;
        else if (!strcmp(argv[i], "--a-scratch-out")) sa.scratch_out = 1;
        else if (!strcmp(argv[i], "--a-no-pack-prefetch")) sa.no_pack_prefetch = 1;
        else if (!strcmp(argv[i], "--a-kc-blocks")) sa.kc_blocks = 1;
        else if (!strcmp(argv[i], "--a-pack-transposed")) sa.pack_transposed = 1;
        else if (!strcmp(argv[i], "--cold")) g_flush_bytes = 256u << 20;
        else if (!strcmp(argv[i], "--a-pack-cols") && i + 1 < argc) {
            char *end;
            const long v = strtol(argv[i + 1], &end, 10);
            if (*end || v <= 0 || v > 1 << 20) {
                fprintf(stderr, "bench_gemm_blocks: --a-pack-cols %s: want a count of columns, 1 to 1048576\n",
                        argv[i + 1]);
                return 2;
            }
            sa.a_pack_cols = (int)v;
            i++;
        }
        else if ((!strcmp(argv[i], "--a-l2") || !strcmp(argv[i], "--b-l2")) && i + 1 < argc) {
            char *end;
            const long v = strtol(argv[i + 1], &end, 10);
            if (*end || v < 0) {
                fprintf(stderr, "bench_gemm_blocks: %s %s: want a size in bytes\n", argv[i], argv[i + 1]);
                return 2;
            }
            (argv[i][2] == 'a' ? &sa : &sb)->l2 = v;
            i++;
        } else if ((!strcmp(argv[i], "--a-tile") || !strcmp(argv[i], "--b-tile")) && i + 1 < argc) {
            (argv[i][2] == 'a' ? &sa : &sb)->tile = argv[i + 1];
            i++;
        } else if ((!strcmp(argv[i], "--a-split") || !strcmp(argv[i], "--b-split")) && i + 1 < argc) {
            (argv[i][2] == 'a' ? &sa : &sb)->split = argv[i + 1];
            i++;
        }
        else if (n < 64) {
            shape s = {0, 0, 0, 0, 0, TT_BF16, TT_F32, TT_BF16, "given"};
            char op[3] = "nn";
            if (sscanf(argv[i], "%dx%dx%d:%2s", &s.M, &s.N, &s.K, op) < 3 || s.M <= 0 || s.N <= 0 || s.K <= 0 ||
                (op[0] != 'n' && op[0] != 't') || (op[1] != 'n' && op[1] != 't')) {
                fprintf(stderr, "bench_gemm_blocks: %s: want MxNxK[:op], op nn, nt, tn or tt\n", argv[i]);
                return 2;
            }
            s.ta = op[0] == 't', s.tb = op[1] == 't';
            if (s.ta) s.bdt = TT_BF16, s.cdt = TT_F32; /* the step's tn products are weight gradients */
            given[n++] = s;
        } else {
            fprintf(stderr, "bench_gemm_blocks: at most 64 shapes\n");
            return 2;
        }
    }
    if (!n) {
        n = (int)(sizeof step_shapes / sizeof step_shapes[0]);
        memcpy(given, step_shapes, sizeof step_shapes);
    }
    if (f32)
        for (int i = 0; i < n; i++) given[i].adt = given[i].bdt = given[i].cdt = TT_F32;
    if (g_flush_bytes && !(g_flush = calloc(g_flush_bytes, 1))) {
        fprintf(stderr, "bench_gemm_blocks: out of memory for the %zu MiB --cold buffer\n", g_flush_bytes >> 20);
        return 1;
    }
    const shape *list = given;
    const tt_dtype cd = f32 ? TT_F32 : TT_BF16;
    set_side(&sa);
    printf("A: the blocks for %s (scale %d), path %s, split %s%s%s", sa.l2 ? "the L2 given" : "this CPU's L2",
           tt_gemm_block_scale(cd), tt_gemm_path_name(cd), sa.split ? sa.split : "default",
           sa.scratch_out ? ", a bf16 C rounded from scratch" : "", sa.f32_weights ? ", the fp32 weights packed instead" : "");
    if (sa.a_pack_cols) printf(", A packed from %d columns a thread", sa.a_pack_cols);
    if (sa.no_pack_prefetch) printf(", the packers without prefetches");
    if (sa.kc_blocks) printf(", every K in kc blocks");
    if (sa.pack_transposed) printf(", a transposed fp32 A packed");
    set_side(&sb);
    printf("; B: for %s (scale %d), path %s, split %s; %s operands%s; pairs of calls alternated\n",
           sb.l2 ? "the L2 given" : "this CPU's L2", tt_gemm_block_scale(cd), tt_gemm_path_name(cd),
           sb.split ? sb.split : "default", f32 ? "fp32" : "the bf16 step's (weights read as their bf16 copy)",
           g_flush_bytes ? ", caches flushed before each call" : "");
    double ta = 0, tb = 0;
    for (int i = 0; i < n; i++) {
        const double macs = (double)list[i].M * list[i].N * list[i].K;
        const int r = reps > 0 ? reps : macs > 2e9 ? 5 : 21;
        if (run(&list[i], r, &sa, &sb, &ta, &tb)) return 1;
    }
    printf("all products, time-weighted: B/A %.3f (A %.1f ms, B %.1f ms a pass)\n", ta / tb, ta * 1e3, tb * 1e3);
    return 0;
}

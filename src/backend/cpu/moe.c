/* moe.c — the Mixture-of-Experts kernels on the CPU: routing, the stable
 * counting sort of (token, slot) assignments by expert, the row moves into
 * expert order and back, and the grouped GEMM over all experts. Every result
 * is independent of the thread count: the sort is serial (O(N*k)), and each
 * output row is written by one thread, summing its terms in a fixed order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "ops/ops.h"

/* columns a row move handles at once, in fp32 on the stack */
#define CHUNK 256

/* ---- routing ----------------------------------------------------------------- */

/* Insert candidate e with choice value v into the descending top list
 * (best[0..*n), capacity k); equal values keep the earlier (lower) expert first. */
static void top_insert(int32_t *best, float *bv, int *n, int k, int32_t e, float v)
{
    if (*n == k && !(v > bv[k - 1])) return;
    int i = *n < k ? (*n)++ : k - 1;
    while (i > 0 && v > bv[i - 1]) best[i] = best[i - 1], bv[i] = bv[i - 1], i--;
    best[i] = e, bv[i] = v;
}

/* The experts token t may choose: all, or those of the topk_group groups
 * whose two best choice values sum highest (DeepSeek-V3's group limit). */
static void allowed_groups(const float *c, int E, int n_group, int topk_group, unsigned char *ok)
{
    const int G = E / n_group;
    float gsum[TT_MOE_MAX_EXPERTS], tv[2], gv[TT_MOE_MAX_EXPERTS];
    int32_t gbest[TT_MOE_MAX_EXPERTS], two[2];
    int ng = 0;
    for (int gi = 0; gi < n_group; gi++) {
        int n = 0;
        for (int e = 0; e < G; e++) top_insert(two, tv, &n, 2, e, c[gi * G + e]);
        gsum[gi] = tv[0] + (n > 1 ? tv[1] : 0.0f);
    }
    for (int gi = 0; gi < n_group; gi++) top_insert(gbest, gv, &ng, topk_group, gi, gsum[gi]);
    memset(ok, 0, (size_t)E);
    for (int j = 0; j < ng; j++) memset(ok + gbest[j] * G, 1, (size_t)G);
}

void cpu_moe_route(const float *logits, const float *bias, float *weight, int32_t *expert, float *scores, int N,
                   int E, int k, int sigmoid, int norm, int n_group, int topk_group, float route_scale)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *l = logits + (size_t)t * E;
        float *s = scores + (size_t)t * E, c[TT_MOE_MAX_EXPERTS], bv[TT_MOE_MAX_EXPERTS];
        unsigned char ok[TT_MOE_MAX_EXPERTS];
        float mx = l[0], sum = 0;
        for (int e = 1; e < E; e++) mx = fmaxf(mx, l[e]);
        for (int e = 0; e < E; e++) {
            s[e] = sigmoid ? 1.0f / (1.0f + expf(-l[e])) : expf(l[e] - mx);
            sum += s[e];
        }
        for (int e = 0; e < E; e++) {
            if (!sigmoid) s[e] /= sum;
            c[e] = s[e] + (bias ? bias[e] : 0.0f);
        }
        if (n_group > 1) allowed_groups(c, E, n_group, topk_group, ok);
        int32_t *ex = expert + (size_t)t * k;
        int n = 0;
        for (int e = 0; e < E; e++)
            if (n_group <= 1 || ok[e]) top_insert(ex, bv, &n, k, e, c[e]);
        double z = 1e-20;
        for (int j = 0; j < k; j++) z += s[ex[j]];
        for (int j = 0; j < k; j++)
            weight[(size_t)t * k + j] = (float)(route_scale * (norm ? s[ex[j]] / z : s[ex[j]]));
    }
}

void cpu_moe_route_bwd(const float *scores, const int32_t *expert, const float *dweight, const float *dscores,
                       float *dlogits, int N, int E, int k, int sigmoid, int norm, float route_scale)
{
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *s = scores + (size_t)t * E, *dw = dweight + (size_t)t * k;
        const int32_t *ex = expert + (size_t)t * k;
        float *dl = dlogits + (size_t)t * E, ds[TT_MOE_MAX_EXPERTS];
        double z = 1e-20, dot = 0;
        for (int j = 0; j < k; j++) z += s[ex[j]], dot += (double)dw[j] * s[ex[j]];
        if (dscores) memcpy(ds, dscores + (size_t)t * E, sizeof(float) * (size_t)E);
        else memset(ds, 0, sizeof(float) * (size_t)E);
        /* through the weights' normalisation, then through softmax or sigmoid */
        for (int j = 0; j < k; j++) ds[ex[j]] += (float)(route_scale * (norm ? (dw[j] - dot / z) / z : dw[j]));
        if (sigmoid) {
            for (int e = 0; e < E; e++) dl[e] = ds[e] * s[e] * (1.0f - s[e]);
        } else {
            double sd = 0;
            for (int e = 0; e < E; e++) sd += (double)ds[e] * s[e];
            for (int e = 0; e < E; e++) dl[e] = s[e] * (ds[e] - (float)sd);
        }
    }
}

/* The auxiliary losses (TT_OP_MOE_AUX_LOSS): per group of tokens (all N, or each of the B sequences) the
 * expert counts and mean normalised scores, then the loss and each token's score gradient. */
tt_err cpu_moe_aux_loss(const float *in, const int32_t *expert, double scale, float *grad, int N, int E, int k, int B,
                        int kind, double coef, double *out)
{
    double loss = 0;
    if (kind == TT_AUX_Z) { /* each token's logsumexp^2, then their sum in token order: any thread count */
        double *sq = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
        if (!sq) return tt_errorf("moe_aux_loss: out of memory for %d tokens", N);
        #pragma omp parallel for schedule(static)
        for (int t = 0; t < N; t++) {
            const float *l = in + (size_t)t * E;
            float mx = l[0];
            double sum = 0;
            for (int e = 1; e < E; e++) mx = fmaxf(mx, l[e]);
            for (int e = 0; e < E; e++) sum += expf(l[e] - mx);
            const double lse = mx + log(sum);
            sq[t] = lse * lse;
            for (int e = 0; grad && e < E; e++) grad[(size_t)t * E + e] = (float)(coef * scale / N * 2 * lse * exp(l[e] - lse));
        }
        for (int t = 0; t < N; t++) loss += sq[t];
        free(sq);
        *out = coef * scale * loss / N;
        return 0;
    }
    const int G = kind == TT_AUX_SEQUENCE ? B : 1, n = N / G;
    const double kk = kind == TT_AUX_SEQUENCE ? k : 1;
    for (int g = 0; g < G; g++) {
        double c[TT_MOE_MAX_EXPERTS] = {0}, P[TT_MOE_MAX_EXPERTS] = {0};
        for (int t = g * n; t < (g + 1) * n; t++) { /* serial: the same sums on any thread count */
            const float *s = in + (size_t)t * E;
            double S = 0;
            for (int e = 0; e < E; e++) S += s[e];
            for (int e = 0; e < E; e++) P[e] += s[e] / S;
            for (int j = 0; j < k; j++) c[expert[(size_t)t * k + j]] += 1;
        }
        const double f = E / (n * kk), gs = coef * scale / G * f / n; /* dL / ds'_te = gs * c_e */
        for (int e = 0; e < E; e++) loss += f * c[e] * P[e] / n / G;
        if (!grad) continue;
        #pragma omp parallel for schedule(static)
        for (int t = g * n; t < (g + 1) * n; t++) { /* through the normalisation s' = s / S */
            const float *s = in + (size_t)t * E;
            double S = 0, dot = 0;
            for (int e = 0; e < E; e++) S += s[e];
            for (int e = 0; e < E; e++) dot += gs * c[e] * s[e] / S;
            for (int e = 0; e < E; e++) grad[(size_t)t * E + e] = (float)((gs * c[e] - dot) / S);
        }
    }
    *out = coef * scale * loss;
    return 0;
}

/* A counting sort: the rows each expert gets, their starts, then every
 * assignment in order to the next row of its expert. */
void cpu_moe_sort(const int32_t *expert, int M, int E, int32_t *perm, int32_t *pos, int32_t *offsets)
{
    memset(offsets, 0, sizeof(int32_t) * ((size_t)E + 1));
    for (int a = 0; a < M; a++) offsets[expert[a] + 1]++;
    for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    for (int a = 0, e; a < M; a++) {
        e = expert[a];
        pos[a] = offsets[e]++; /* offsets[e] walks through expert e's rows */
        perm[pos[a]] = a;
    }
    /* each offsets[e] now holds the end of expert e's rows, which is the start of e+1's */
    for (int e = E; e > 0; e--) offsets[e] = offsets[e - 1];
    offsets[0] = 0;
}

/* ---- moving rows --------------------------------------------------------------- */

/* Rows ahead whose lines the row moves ask for: the rows they gather lie in
 * an order no hardware prefetcher can guess */
#define ROWS_AHEAD 4

/* the k rows (of `row` bytes) of `rows` that token t's slots in pos name */
static void prefetch_slots(const void *rows, const int32_t *pos, int t, int k, size_t row)
{
    for (int j = 0; j < k; j++) tt_prefetch((const char *)rows + (size_t)pos[(size_t)t * k + j] * row, row);
}

/* The fp32 loops of the row moves, compiled for the CPU's widest vectors
 * (the OpenMP regions that call them are baseline code) */
TT_CLONES static void scale_chunk(float *buf, int n, float f)
{
    for (int d = 0; d < n; d++) buf[d] *= f;
}
TT_CLONES static void axpy_chunk(float *acc, const float *buf, int n, float f)
{
    for (int d = 0; d < n; d++) acc[d] += f * buf[d];
}

void cpu_moe_permute(const void *x, const int32_t *perm, const float *w, void *xs, int M, int D, int k, tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt), row = (size_t)D * es;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < M; r++) {
        const char *src = (const char *)x + (size_t)(perm[r] / k) * row;
        char *dst = (char *)xs + (size_t)r * row;
        if (r + ROWS_AHEAD < M) tt_prefetch((const char *)x + (size_t)(perm[r + ROWS_AHEAD] / k) * row, row);
        if (!w) {
            memcpy(dst, src, row);
            continue;
        }
        const float f = w[perm[r]];
        float buf[CHUNK];
        for (int d0 = 0; d0 < D; d0 += CHUNK) { /* scaled in fp32, rounded once */
            const int nd = D - d0 < CHUNK ? D - d0 : CHUNK;
            tt_cpu_to_f32(buf, src + (size_t)d0 * es, dt, (size_t)nd);
            scale_chunk(buf, nd, f);
            tt_cpu_from_f32(dst + (size_t)d0 * es, dt, buf, (size_t)nd);
        }
    }
}

void cpu_moe_combine(const void *ys, const int32_t *pos, const float *w, void *y, int N, int D, int k, tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float acc[CHUNK], buf[CHUNK];
        if (t + ROWS_AHEAD < N) prefetch_slots(ys, pos, t + ROWS_AHEAD, k, (size_t)D * es);
        for (int d0 = 0; d0 < D; d0 += CHUNK) {
            const int nd = D - d0 < CHUNK ? D - d0 : CHUNK;
            memset(acc, 0, sizeof acc);
            for (int j = 0; j < k; j++) { /* the slots in order: the same sum on any thread count */
                const size_t a = (size_t)t * k + j;
                const float f = w ? w[a] : 1.0f;
                tt_cpu_to_f32(buf, (const char *)ys + ((size_t)pos[a] * D + d0) * es, dt, (size_t)nd);
                axpy_chunk(acc, buf, nd, f);
            }
            tt_cpu_from_f32((char *)y + ((size_t)t * D + d0) * es, dt, acc, (size_t)nd);
        }
    }
}

/* a . b over n values, summed in vector lanes: the order is the clone's, not the thread count's */
TT_CLONES static float dot_chunk(const float *a, const float *b, int n)
{
    float s = 0;
    #pragma omp simd reduction(+ : s)
    for (int d = 0; d < n; d++) s += a[d] * b[d];
    return s;
}

void cpu_moe_rowdot(const void *a, const void *b, const int32_t *pos, float *out, int N, int D, int k, tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float ab[CHUNK], bb[CHUNK];
        if (t + ROWS_AHEAD < N) prefetch_slots(b, pos, t + ROWS_AHEAD, k, (size_t)D * es);
        for (int j = 0; j < k; j++) {
            const size_t r = (size_t)pos[(size_t)t * k + j];
            double acc = 0;
            for (int d0 = 0; d0 < D; d0 += CHUNK) {
                const int nd = D - d0 < CHUNK ? D - d0 : CHUNK;
                tt_cpu_to_f32(ab, (const char *)a + ((size_t)t * D + d0) * es, dt, (size_t)nd);
                tt_cpu_to_f32(bb, (const char *)b + (r * D + d0) * es, dt, (size_t)nd);
                acc += dot_chunk(ab, bb, nd);
            }
            out[(size_t)t * k + j] = (float)acc;
        }
    }
}

/* ---- the experts' matmuls --------------------------------------------------------- */

/* One product per expert, all in one parallel region (tt_gemm_grouped). */
static tt_err grouped(tt_gemm_args *args, int E)
{
    tt_err rc = tt_gemm_grouped(args, E);
    free(args);
    return rc;
}

tt_err cpu_grouped_matmul(const void *x, tt_dtype xdt, const void *w, tt_dtype wdt, void *y, tt_dtype ydt,
                          const int32_t *off, int E, int M, int K, int Nw, int tb)
{
    tt_gemm_args *args = calloc((size_t)E, sizeof *args);
    if (!args) return tt_errorf("grouped_matmul: out of memory");
    const tt_dtype compute = xdt == TT_BF16 || wdt == TT_BF16 ? TT_BF16 : TT_F32;
    const size_t xs = tt_dtype_size(xdt), ws = tt_dtype_size(wdt), ys = tt_dtype_size(ydt);
    /* the rows no expert has (a receive buffer's unused tail) are zero, so what reads y reads no garbage */
    memset((char *)y + (size_t)off[E] * Nw * ys, 0, (size_t)(M - off[E]) * Nw * ys);
    for (int e = 0; e < E; e++)
        args[e] = (tt_gemm_args){.compute = compute, .A = (const char *)x + (size_t)off[e] * K * xs, .adt = xdt,
                                 .lda = K, .B = (const char *)w + (size_t)e * K * Nw * ws, .bdt = wdt,
                                 .ldb = tb ? K : Nw, .tb = tb, .C = (char *)y + (size_t)off[e] * Nw * ys, .cdt = ydt,
                                 .ldc = Nw, .M = off[e + 1] - off[e], .N = Nw, .K = K};
    return grouped(args, E);
}

tt_err cpu_grouped_matmul_wgrad(const void *a, const void *b, tt_dtype dt, float *dw, const int32_t *off, int E, int P,
                                int Q, int accumulate)
{
    tt_gemm_args *args = calloc((size_t)E, sizeof *args);
    if (!args) return tt_errorf("grouped_matmul_wgrad: out of memory");
    const tt_dtype compute = dt == TT_BF16 ? TT_BF16 : TT_F32;
    const size_t es = tt_dtype_size(dt);
    for (int e = 0; e < E; e++) /* dw[e] (P,Q) = a_e^T b_e: K is the expert's row count (0: zeroed) */
        args[e] = (tt_gemm_args){.compute = compute, .A = (const char *)a + (size_t)off[e] * P * es, .adt = dt,
                                 .lda = P, .ta = 1, .B = (const char *)b + (size_t)off[e] * Q * es, .bdt = dt,
                                 .ldb = Q, .C = dw + (size_t)e * P * Q, .cdt = TT_F32, .ldc = Q, .M = P, .N = Q,
                                 .K = off[e + 1] - off[e], .accumulate = accumulate};
    return grouped(args, E);
}

/* ---- expert parallelism ------------------------------------------------------------ */

void cpu_row_gather(const void *x, const int32_t *idx, void *y, int R, int D, tt_dtype dt)
{
    const size_t row = (size_t)D * tt_dtype_size(dt);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < R; i++) {
        char *dst = (char *)y + (size_t)i * row;
        if (idx[i] < 0) memset(dst, 0, row);
        else memcpy(dst, (const char *)x + (size_t)idx[i] * row, row);
    }
}

/* Serial, O(ep*E + recv_rows) integer work: small beside the exchange it plans. */
void cpu_moe_ep_plan(const int32_t *offs_all, int E, int ep, int rank, int64_t row, int64_t recv_rows,
                     int64_t *const counts[4], int32_t *loc_off, int32_t *to_src, int32_t *to_exp)
{
    const int El = E / ep;
    const int32_t *mine = offs_all + (size_t)rank * (E + 1);
    int64_t *scounts = counts[0], *sdispls = counts[1], *rcounts = counts[2], *rdispls = counts[3];
    /* send: the sorted rows are in global expert order, so destination d's rows are one run */
    for (int d = 0; d < ep; d++) {
        scounts[d] = (int64_t)(mine[(d + 1) * El] - mine[d * El]) * row;
        sdispls[d] = (int64_t)mine[d * El] * row;
    }
    /* receive: from source i, its rows for my experts [rank*El, (rank+1)*El), one run landing source-major */
    int64_t total = 0;
    for (int i = 0; i < ep; i++) {
        const int32_t *o = offs_all + (size_t)i * (E + 1) + (size_t)rank * El;
        rdispls[i] = total * row;
        rcounts[i] = (int64_t)(o[El] - o[0]) * row;
        total += o[El] - o[0];
    }
    /* expert-major offsets: expert j's rows from every source */
    loc_off[0] = 0;
    for (int j = 0; j < El; j++) {
        int32_t n = 0;
        for (int i = 0; i < ep; i++) {
            const int32_t *o = offs_all + (size_t)i * (E + 1) + (size_t)rank * El;
            n += o[j + 1] - o[j];
        }
        loc_off[j + 1] = loc_off[j] + n;
    }
    /* each (expert, source) run: its expert-major start and its source-major start */
    for (int j = 0; j < El; j++) {
        int32_t em = loc_off[j];
        for (int i = 0; i < ep; i++) {
            const int32_t *o = offs_all + (size_t)i * (E + 1) + (size_t)rank * El;
            const int32_t sm = (int32_t)(rdispls[i] / row) + (o[j] - o[0]), n = o[j + 1] - o[j];
            for (int32_t t = 0; t < n; t++) to_src[em + t] = sm + t, to_exp[sm + t] = em + t;
            em += n;
        }
    }
    for (int64_t r = total; r < recv_rows; r++) to_src[r] = to_exp[r] = -1;
}

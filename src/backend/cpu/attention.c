/* attention.c — the portable attention kernels: causal, GQA, document
 * masking, a sliding window and soft-capped scores, fp32. The T x T score
 * matrix is never held: the forward runs an online softmax over 64 x 64 tiles of scores and saves
 * the logsumexp; the backward recomputes each tile's probabilities from it.
 * Tile products go through cblas_sgemm (single-threaded inside our parallel
 * loops), reading q/k/v in place through their row strides, so GQA copies
 * nothing. Training calls on other layouts (bf16, column ranges of a fused
 * qkv buffer, RoPE inside) are brought to this form in fp32 scratch first;
 * attention_avx512.c and attention_avx2.c run them without that detour where
 * the CPU allows. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_impl.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"

#define QB 64 /* query rows per tile */
#define KB 64 /* keys per tile */

/* vis[r][c] = whether query row r (absolute position qpos0 + r) sees key
 * j0 + c. Returns whether any pair of the tile is visible, so fully masked
 * tiles (other documents, outside the window) cost only this scan. */
static int tile_mask(const int32_t *db, int Tk, int qpos0, int nq, int j0, int nj, int window,
                     unsigned char vis[QB][KB])
{
    int any = 0;
    for (int r = 0; r < nq; r++) {
        int qpos = qpos0 + r;
        int qd = db && qpos < Tk ? db[qpos] : 0;
        for (int c = 0; c < nj; c++) {
            int j = j0 + c;
            int ok = j <= qpos && qpos < Tk && (window <= 0 || qpos - j < window) && (!db || db[j] == qd);
            vis[r][c] = (unsigned char)ok;
            any |= ok;
        }
    }
    return any;
}

static inline float dotf(const float *restrict a, const float *restrict b, int n)
{
    float s = 0;
    #pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* A tile's scores soft-capped in place: s -> cap tanh(s / cap) (cap > 0) */
static void cap_scores(float *S, int n, float cap)
{
    const float inv = 1.0f / cap;
    #pragma omp simd
    for (int i = 0; i < n; i++) S[i] = cap * tt_tanhf(S[i] * inv);
}

static void attn_fwd_f32(const float *q, const float *k, const float *v, const int32_t *doc, float *o, float *lse,
                         int B, int Tq, int Tk, int kvT, int q_off, int H, int Hk, int hd, int window, double scale,
                         double softcap)
{
    int group = H / Hk, nqb = (Tq + QB - 1) / QB, ldq = H * hd, ldk = Hk * hd;
    float sc = (float)scale, cap = (float)softcap;
    long tasks = (long)B * H * nqb;
    /* Tiles are independent, so a dynamic schedule (which evens out the causal
     * triangle) still gives the same bits on every run. */
    #pragma omp parallel for schedule(dynamic, 1)
    for (long task = 0; task < tasks; task++) {
        int ib = (int)(task % nqb), h = (int)(task / nqb % H), b = (int)(task / ((long)nqb * H));
        int kh = h / group, i0 = ib * QB, nq = Tq - i0 < QB ? Tq - i0 : QB, qpos0 = q_off + i0;
        const float *Q = q + (((size_t)b * Tq + i0) * H + h) * hd; /* (nq, hd), row stride ldq */
        float *O = o + (((size_t)b * Tq + i0) * H + h) * hd;       /* (nq, hd), row stride ldq */
        const int32_t *db = doc ? doc + (size_t)b * Tk : NULL;
        float m[QB], l[QB], S[QB * KB];
        unsigned char vis[QB][KB];
        for (int r = 0; r < nq; r++) {
            m[r] = -INFINITY, l[r] = 0;
            memset(O + (size_t)r * ldq, 0, (size_t)hd * sizeof(float));
        }
        /* keys any row of the tile may see: [jlo, jhi] */
        int jlo = window > 0 && qpos0 - window + 1 > 0 ? qpos0 - window + 1 : 0;
        int jhi = qpos0 + nq - 1 < Tk - 1 ? qpos0 + nq - 1 : Tk - 1;
        for (int j0 = jlo; j0 <= jhi; j0 += KB) {
            int nj = jhi - j0 + 1 < KB ? jhi - j0 + 1 : KB;
            if (!tile_mask(db, Tk, qpos0, nq, j0, nj, window, vis)) continue;
            const float *K = k + (((size_t)b * kvT + j0) * Hk + kh) * hd; /* (nj, hd) */
            const float *V = v + (((size_t)b * kvT + j0) * Hk + kh) * hd;
            /* S (nq, nj) = scale Q K^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nj, hd, sc, Q, ldq, K, ldk, 0.0f, S, nj);
            if (cap > 0) cap_scores(S, nq * nj, cap);
            for (int r = 0; r < nq; r++) {
                float *s = S + (size_t)r * nj, bm = -INFINITY, sum = 0;
                for (int c = 0; c < nj; c++)
                    if (vis[r][c] && s[c] > bm) bm = s[c];
                if (bm == -INFINITY) { /* this row sees none of these keys */
                    memset(s, 0, (size_t)nj * sizeof(float));
                    continue;
                }
                if (bm > m[r]) { /* a new running max: rescale what was summed so far */
                    float corr = expf(m[r] - bm), *orow = O + (size_t)r * ldq;
                    l[r] *= corr;
                    for (int d = 0; d < hd; d++) orow[d] *= corr;
                    m[r] = bm;
                }
                for (int c = 0; c < nj; c++) {
                    s[c] = vis[r][c] ? expf(s[c] - m[r]) : 0.0f;
                    sum += s[c];
                }
                l[r] += sum;
            }
            /* O (nq, hd) += P (nq, nj) V (nj, hd) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, nj, 1.0f, S, nj, V, ldk, 1.0f, O, ldq);
        }
        for (int r = 0; r < nq; r++) {
            float *lr = lse + ((size_t)b * H + h) * Tq + i0 + r, *orow = O + (size_t)r * ldq;
            if (l[r] == 0) { /* saw no key */
                *lr = -INFINITY;
                continue;
            }
            float inv = 1.0f / l[r];
            for (int d = 0; d < hd; d++) orow[d] *= inv;
            *lr = m[r] + logf(l[r]);
        }
    }
}

/* One task per (batch, kv head): it alone writes that head's dk and dv and the
 * dq of the query heads that share it, so nothing races. Key tiles are the
 * outer loop so their dk/dv stay in cache while the query tiles that see them
 * stream by. Per tile, with P = exp(S - lse) and D_i = dout_i . o_i:
 * dP = dO V^T, dS = P (dP - D) scale, dV += P^T dO, dK += dS^T Q, dQ += dS K. Under a soft-cap, P is of the
 * capped scores and dS takes the cap's derivative, 1 - tanh^2, too. */
static void attn_bwd_f32(const float *q, const float *k, const float *v, const int32_t *doc, const float *o,
                         const float *lse, const float *dout, float *dq, float *dk, float *dv, int B, int T_, int H,
                         int Hk, int hd, int window, double scale, double softcap)
{
    int group = H / Hk, T = T_, ldq = H * hd, ldk = Hk * hd;
    float sc = (float)scale, cap = (float)softcap;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int task = 0; task < B * Hk; task++) {
        int b = task / Hk, kh = task % Hk;
        const int32_t *db = doc ? doc + (size_t)b * T : NULL;
        float P[QB * KB], dS[QB * KB];
        unsigned char vis[QB][KB];
        for (int t = 0; t < T; t++) {
            memset(dk + (((size_t)b * T + t) * Hk + kh) * hd, 0, (size_t)hd * sizeof(float));
            memset(dv + (((size_t)b * T + t) * Hk + kh) * hd, 0, (size_t)hd * sizeof(float));
            memset(dq + (((size_t)b * T + t) * H + kh * group) * hd, 0, (size_t)group * hd * sizeof(float));
        }
        for (int j0 = 0; j0 < T; j0 += KB) {
            int nj = T - j0 < KB ? T - j0 : KB;
            size_t ko = (((size_t)b * T + j0) * Hk + kh) * hd;
            const float *K = k + ko, *V = v + ko; /* (nj, hd), row stride ldk */
            float *dK = dk + ko, *dV = dv + ko;
            /* queries before j0 see none of these keys, nor those past the window */
            int ihi = T - 1;
            if (window > 0 && (long)j0 + nj - 1 + window - 1 < ihi) ihi = j0 + nj - 1 + window - 1;
            for (int h = kh * group; h < (kh + 1) * group; h++)
                for (int i0 = j0; i0 <= ihi; i0 += QB) {
                    int nq = ihi - i0 + 1 < QB ? ihi - i0 + 1 : QB;
                    if (!tile_mask(db, T, i0, nq, j0, nj, window, vis)) continue;
                    size_t qo = (((size_t)b * T + i0) * H + h) * hd;
                    const float *Q = q + qo, *dO = dout + qo, *Oi = o + qo; /* (nq, hd), stride ldq */
                    const float *L = lse + ((size_t)b * H + h) * T + i0;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nj, hd, sc, Q, ldq, K, ldk, 0.0f,
                                P, nj);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nj, hd, 1.0f, dO, ldq, V, ldk,
                                0.0f, dS, nj);
                    for (int r = 0; r < nq; r++) {
                        float *p = P + (size_t)r * nj, *ds = dS + (size_t)r * nj, Lr = L[r];
                        float Di = dotf(dO + (size_t)r * ldq, Oi + (size_t)r * ldq, hd);
                        if (cap > 0)
                            for (int c = 0; c < nj; c++) {
                                const float t = tt_tanhf(p[c] / cap);
                                p[c] = vis[r][c] && Lr != -INFINITY ? expf(cap * t - Lr) : 0.0f;
                                ds[c] = p[c] * (ds[c] - Di) * sc * (1.0f - t * t);
                            }
                        else
                            for (int c = 0; c < nj; c++) {
                                p[c] = vis[r][c] && Lr != -INFINITY ? expf(p[c] - Lr) : 0.0f;
                                ds[c] = p[c] * (ds[c] - Di) * sc;
                            }
                    }
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, hd, nq, 1.0f, P, nj, dO, ldq, 1.0f,
                                dV, ldk);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nj, hd, nq, 1.0f, dS, nj, Q, ldq, 1.0f,
                                dK, ldk);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, hd, nj, 1.0f, dS, nj, K, ldk, 1.0f,
                                dq + qo, ldq);
                }
        }
    }
}

void cpu_attention_kv(const float *q, const float *k, const float *v, float *o, float *lse, int B, int Tq, int Tk,
                      int kvT, int q_off, int H, int Hk, int hd, int window, double scale, double softcap)
{
    attn_fwd_f32(q, k, v, NULL, o, lse, B, Tq, Tk, kvT, q_off, H, Hk, hd, window, scale, softcap);
}

/* ---- attention sinks (GPT-OSS) ------------------------------------------------ */

/* A row of logsumexp L over its keys and output o = sum_j e^(s_j - L) v_j: the sink s, one more logit with no
 * value, makes the logsumexp L' = log(e^L + e^s) and the output o e^(L - L'). A row that sees no key keeps
 * o = 0 and L = -inf (all of its probability is the sink's, which adds nothing). */
void cpu_attention_sinks_fwd(void *o, long ldo, float *lse, const float *sinks, int B, int T, int H, int dv,
                             tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt);
    const int bf = dt == TT_BF16;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < B * T; n++) {
        const int b = n / T, t = n % T;
        for (int h = 0; h < H; h++) {
            float *L = lse + ((size_t)b * H + h) * T + t;
            if (*L == -INFINITY) continue;
            const float s = sinks[h], m = fmaxf(*L, s), Ls = m + logf(expf(*L - m) + expf(s - m));
            const float f = expf(*L - Ls);
            char *row = (char *)o + ((size_t)n * ldo + (size_t)h * dv) * es;
            for (int d = 0; d < dv; d++) tt_st(row, (size_t)d, tt_ld(row, (size_t)d, bf) * f, bf);
            *L = Ls;
        }
    }
}

/* The sink's probability in a row, p_s = e^(s - L'), has dp = 0 (no value), so its score gradient is
 * p_s (0 - D) with D = dout . o: dsink_h = -sum over the rows of head h of p_s D. */
void cpu_attention_sinks_bwd(const void *o, long ldo, const void *dout, long lddo, const float *lse,
                             const float *sinks, float *dsinks, int B, int T, int H, int dv, tt_dtype dt)
{
    const size_t es = tt_dtype_size(dt);
    const int bf = dt == TT_BF16;
    #pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double acc = 0;
        for (int n = 0; n < B * T; n++) {
            const float L = lse[((size_t)(n / T) * H + h) * T + n % T];
            if (L == -INFINITY) continue;
            const char *on = (const char *)o + ((size_t)n * ldo + (size_t)h * dv) * es;
            const char *dn = (const char *)dout + ((size_t)n * lddo + (size_t)h * dv) * es;
            float D = 0;
            for (int d = 0; d < dv; d++) D += tt_ld(on, (size_t)d, bf) * tt_ld(dn, (size_t)d, bf);
            acc -= (double)expf(sinks[h] - L) * D;
        }
        dsinks[h] = (float)acc;
    }
}

/* ---- training calls in any layout, through fp32 scratch ---------------------- */

/* dst (N, heads*hd) fp32 = the strided view src, RoPE'd by `inverse` when pos is set */
static void gather(float *dst, const void *src, long ld, int N, int heads, const tt_attn *a, int rope)
{
    const int w = heads * a->hd;
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) tt_cpu_to_f32(dst + (size_t)n * w, (const char *)src + (size_t)n * ld * tt_dtype_size(a->dt), a->dt, (size_t)w);
    if (rope && a->pos) cpu_rope(dst, a->pos, a->inv_freq, dst, N, heads, a->hd, 0, a->rope_scale, TT_F32);
}

/* the strided view dst = src (N, heads*hd) fp32, inverse-RoPE'd first when asked */
static void scatter(void *dst, long ld, float *src, int N, int heads, const tt_attn *a, int rope)
{
    const int w = heads * a->hd;
    if (rope && a->pos) cpu_rope(src, a->pos, a->inv_freq, src, N, heads, a->hd, 1, a->rope_scale, TT_F32);
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) tt_cpu_from_f32((char *)dst + (size_t)n * ld * tt_dtype_size(a->dt), a->dt, src + (size_t)n * w, (size_t)w);
}

/* fp32 scratch for the views: q and o (N, H*hd), k and v (N, Hk*hd), and in
 * the backward dout, dq, dk, dv too */
static float *views_scratch(const tt_attn *a, int bwd, float **q, float **k, float **v, float **o, float **dout,
                            float **dq, float **dk, float **dv)
{
    const size_t N = (size_t)a->B * a->T, nq = N * a->H * a->hd, nk = N * a->Hk * a->hd;
    float *buf = tt_cpu_scratch(TT_SCRATCH_REF, (bwd ? 4 * nq + 4 * nk : 2 * nq + 2 * nk) * sizeof(float));
    if (!buf) return NULL;
    *q = buf, *o = *q + nq, *k = *o + nq, *v = *k + nk;
    if (bwd) *dout = *v + nk, *dq = *dout + nq, *dk = *dq + nq, *dv = *dk + nk;
    return buf;
}

tt_err tt_attention_fwd_portable(const tt_attn *a)
{
    float *q, *k, *v, *o;
    const int N = a->B * a->T;
    if (!views_scratch(a, 0, &q, &k, &v, &o, NULL, NULL, NULL, NULL)) return -1;
    gather(q, a->q, a->ldq, N, a->H, a, 1);
    gather(k, a->k, a->ldk, N, a->Hk, a, 1);
    gather(v, a->v, a->ldv, N, a->Hk, a, 0);
    attn_fwd_f32(q, k, v, a->doc, o, a->lse, a->B, a->T, a->T, a->T, 0, a->H, a->Hk, a->hd, a->window,
                 tt_attn_scale(a), a->softcap);
    scatter(a->o, a->ldo, o, N, a->H, a, 0);
    return 0;
}

tt_err tt_attention_bwd_portable(const tt_attn *a)
{
    float *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    const int N = a->B * a->T;
    if (!views_scratch(a, 1, &q, &k, &v, &o, &dout, &dq, &dk, &dv)) return -1;
    gather(q, a->q, a->ldq, N, a->H, a, 1);
    gather(k, a->k, a->ldk, N, a->Hk, a, 1);
    gather(v, a->v, a->ldv, N, a->Hk, a, 0);
    gather(o, a->o, a->ldo, N, a->H, a, 0);
    gather(dout, a->dout, a->lddo, N, a->H, a, 0);
    attn_bwd_f32(q, k, v, a->doc, o, a->lse, dout, dq, dk, dv, a->B, a->T, a->H, a->Hk, a->hd, a->window,
                 tt_attn_scale(a), a->softcap);
    scatter(a->dq, a->lddq, dq, N, a->H, a, 1);
    scatter(a->dk, a->lddk, dk, N, a->Hk, a, 1);
    scatter(a->dv, a->lddv, dv, N, a->Hk, a, 0);
    return 0;
}

/* The path TITAN_ATTENTION names (tests, benchmarks): portable, or avx2 (the
 * AVX2 flash kernels, even where the AVX-512 ones would run); unset, the
 * fastest the CPU and the call allow. A path the CPU or call cannot take
 * passes the call to the next one down. */
enum { PATH_BEST, PATH_AVX2, PATH_PORTABLE };

static int forced_path(void)
{
    static int warned;
    const char *e = getenv("TITAN_ATTENTION");
    if (!e || !*e) return PATH_BEST;
    if (!strcmp(e, "portable")) return PATH_PORTABLE;
    if (!strcmp(e, "avx2")) return PATH_AVX2;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        tt_warn("TITAN_ATTENTION=%s is not one of avx2, portable: ignored", e);
    return PATH_BEST;
}

tt_err cpu_attention_fwd(const tt_attn *a)
{
    const int path = forced_path();
    tt_err rc = path == PATH_BEST ? tt_attention_fwd_avx512(a) : 1;
    if (rc == 1 && path != PATH_PORTABLE) rc = tt_attention_fwd_avx2(a);
    return rc == 1 ? tt_attention_fwd_portable(a) : rc;
}

tt_err cpu_attention_bwd(const tt_attn *a)
{
    const int path = forced_path();
    tt_err rc = path == PATH_BEST ? tt_attention_bwd_avx512(a) : 1;
    if (rc == 1 && path != PATH_PORTABLE) rc = tt_attention_bwd_avx2(a);
    return rc == 1 ? tt_attention_bwd_portable(a) : rc;
}

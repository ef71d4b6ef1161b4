/* peak.c — `titan bench peak`: the CPU's fp32 FMA and bf16 dot-product
 * throughput on all threads, the denominator of MFU, cached per machine.
 * Kernels for AVX-512 (+BF16), AVX2+FMA and plain C are all compiled in (via
 * target attributes) and one is chosen at run time, so one binary runs on any
 * x86-64. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/host/peak.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TT_PEAK_X86 1
#endif

/* Each kernel runs `seconds`, sets *elapsed and returns the FLOPs it did.
 * Many independent accumulators hide the FMA latency (4 cycles, 2 issued a
 * cycle on current cores: at least 8 chains are needed); the timer is read
 * only every 256 rounds so it costs nothing. a*c+b with a just below 1 keeps
 * the values normal forever (denormals would be slow). */
typedef double (*peak_kernel)(double seconds, double *elapsed);
static volatile float peak_sink; /* keeps the compiler from dropping the work */

#define REP16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ROUNDS 256

#ifdef TT_PEAK_X86
__attribute__((target("avx512f"))) static double f32_avx512(double seconds, double *elapsed)
{
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
#define DECL(i) __m512 c##i = _mm512_set1_ps(0.01f * (float)(i));
#define STEP(i) c##i = _mm512_fmadd_ps(c##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    REP16(DECL)
    uint64_t iters = 0;
    double t0 = tt_now(), t;
    do {
        for (int r = 0; r < ROUNDS; r++) {
            REP16(STEP)
        }
        iters += ROUNDS;
    } while ((t = tt_now() - t0) < seconds);
    __m512 s = _mm512_setzero_ps();
    REP16(SUM)
    peak_sink = _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
    *elapsed = t;
    return (double)iters * 16 * 16 * 2; /* 16 registers x 16 lanes x (mul + add) */
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16_avx512(double seconds, double *elapsed)
{
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(-1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
#define DECL(i) __m512 c##i = _mm512_set1_ps(0.01f * (float)(i));
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    REP16(DECL)
    uint64_t iters = 0;
    double t0 = tt_now(), t;
    do {
        for (int r = 0; r < ROUNDS; r++) {
            REP16(STEP)
        }
        iters += ROUNDS;
    } while ((t = tt_now() - t0) < seconds);
    __m512 s = _mm512_setzero_ps();
    REP16(SUM)
    peak_sink = _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
    *elapsed = t;
    return (double)iters * 16 * 64; /* 16 registers x 32 bf16 pairs x 2 FLOPs */
}

__attribute__((target("avx2,fma"))) static double f32_avx2(double seconds, double *elapsed)
{
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
#define DECL(i) __m256 c##i = _mm256_set1_ps(0.01f * (float)(i));
#define STEP(i) c##i = _mm256_fmadd_ps(c##i, a, b);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    REP12(DECL) /* 12 + 2 constants of the 16 ymm registers */
    uint64_t iters = 0;
    double t0 = tt_now(), t;
    do {
        for (int r = 0; r < ROUNDS; r++) {
            REP12(STEP)
        }
        iters += ROUNDS;
    } while ((t = tt_now() - t0) < seconds);
    __m256 s = _mm256_setzero_ps();
    REP12(SUM)
    float lanes[8];
    _mm256_storeu_ps(lanes, s);
    peak_sink = lanes[0] + lanes[7];
#undef DECL
#undef STEP
#undef SUM
    *elapsed = t;
    return (double)iters * 12 * 8 * 2;
}
#endif

/* Plain C: what any machine can do (the compiler may use SSE for it). */
static double f32_scalar(double seconds, double *elapsed)
{
    const float a = 0.999999f, b = 1e-6f;
#define DECL(i) float c##i = 0.01f * (float)(i);
#define STEP(i) c##i = c##i * a + b;
#define SUM(i) s += c##i;
    REP12(DECL)
    uint64_t iters = 0;
    double t0 = tt_now(), t;
    do {
        for (int r = 0; r < ROUNDS; r++) {
            REP12(STEP)
        }
        iters += ROUNDS;
    } while ((t = tt_now() - t0) < seconds);
    float s = 0;
    REP12(SUM)
    peak_sink = s;
#undef DECL
#undef STEP
#undef SUM
    *elapsed = t;
    return (double)iters * 12 * 2;
}

/* The best kernels this CPU runs. TITAN_PEAK_ISA=scalar|avx2 caps the choice
 * (to exercise and compare the fallbacks on a big machine). */
static void pick(peak_kernel *f32, peak_kernel *bf16, char *path, size_t cap)
{
    const char *cap_isa = getenv("TITAN_PEAK_ISA");
    int allow512 = !cap_isa || strcmp(cap_isa, "avx512") == 0;
    int allow2 = allow512 || (cap_isa && strcmp(cap_isa, "avx2") == 0);
    *f32 = f32_scalar;
    *bf16 = NULL;
    snprintf(path, cap, "scalar");
#ifdef TT_PEAK_X86
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f")) {
        *f32 = f32_avx512;
        snprintf(path, cap, "avx512f");
        if (__builtin_cpu_supports("avx512bf16")) {
            *bf16 = bf16_avx512;
            snprintf(path, cap, "avx512f+avx512bf16");
        }
    } else if (allow2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *f32 = f32_avx2;
        snprintf(path, cap, "avx2+fma");
    }
#else
    (void)allow2;
#endif
}

/* GFLOP/s of kernel k on nt threads. Each thread warms up (clocks ramp,
 * threads spin up); then the time is cut into windows of ~20 ms that all
 * threads start together at a barrier. A window's rate is the sum of the
 * threads' rates, and the best window counts: the peak is what the hardware
 * can do, and on a shared machine some windows lose time to other processes. */
static double run_threads(peak_kernel k, double seconds, int nt)
{
    int nwin = seconds > 0.04 ? (int)(seconds / 0.02) : 1;
    double win = seconds / nwin, best = 0;
    double *rates = calloc((size_t)nt, sizeof *rates);
    if (!rates) return 0;
#pragma omp parallel num_threads(nt)
    {
        int me = 0;
#ifdef _OPENMP
        me = omp_get_thread_num();
#endif
        double e;
        k(seconds * 0.1, &e);
        for (int w = 0; w < nwin; w++) {
#pragma omp barrier
            double flops = k(win, &e);
            rates[me] = e > 0 ? flops / e : 0;
#pragma omp barrier
#pragma omp single
            {
                double sum = 0;
                for (int t = 0; t < nt; t++) sum += rates[t];
                if (sum > best) best = sum;
            }
        }
    }
    free(rates);
    return best / 1e9;
}

static void cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        size_t n = strcspn(v, "\n");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
        if (n > 0) snprintf(buf, cap, "%.*s", (int)n, v);
        break;
    }
    fclose(f);
}

tt_err tt_peak_measure(tt_peak *out, double seconds)
{
    if (!(seconds > 0 && seconds < 3600)) return tt_errorf("peak measurement: duration %g s outside (0, 3600)", seconds);
    memset(out, 0, sizeof *out);
    peak_kernel f32, bf16;
    pick(&f32, &bf16, out->path, sizeof out->path);
    cpu_model(out->cpu, sizeof out->cpu);
    out->threads = tt_num_threads();
    double each = bf16 ? seconds / 2 : seconds;
    out->f32_gflops = run_threads(f32, each, out->threads);
    out->bf16_gflops = bf16 ? run_threads(bf16, each, out->threads) : 0.0;
    if (!(out->f32_gflops > 0)) return tt_errorf("peak measurement: no work was timed (%s)", out->path);
    return TT_OK;
}

/* ---- the cache file ----------------------------------------------------- */
tt_err tt_peak_cache_path(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(buf, cap, "%s/titan/peak.json", xdg);
    else if (home && home[0]) n = snprintf(buf, cap, "%s/.cache/titan/peak.json", home);
    else return tt_errorf("peak cache: neither XDG_CACHE_HOME nor HOME is set");
    if (n < 0 || (size_t)n >= cap) return tt_errorf("peak cache: path too long");
    return TT_OK;
}

int tt_peak_load_cached(tt_peak *out)
{
    char path[4096], text[8192];
    if (tt_peak_cache_path(path, sizeof path) != 0) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    cJSON *j = cJSON_Parse(text);
    tt_peak here, p;
    memset(&p, 0, sizeof p);
    cpu_model(here.cpu, sizeof here.cpu);
    const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(j, "cpu"), *thr = cJSON_GetObjectItemCaseSensitive(j, "threads");
    const cJSON *f32 = cJSON_GetObjectItemCaseSensitive(j, "f32_gflops");
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(j, "bf16_gflops");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(j, "path");
    int ok = cJSON_IsString(cpu) && cJSON_IsNumber(thr) && cJSON_IsNumber(f32) && cJSON_IsNumber(bf) &&
             cJSON_IsString(pa) && strcmp(cpu->valuestring, here.cpu) == 0 && thr->valuedouble == tt_num_threads() &&
             f32->valuedouble > 0 && bf->valuedouble >= 0;
    if (ok) {
        p.f32_gflops = f32->valuedouble;
        p.bf16_gflops = bf->valuedouble;
        snprintf(p.path, sizeof p.path, "%s", pa->valuestring);
        snprintf(p.cpu, sizeof p.cpu, "%s", here.cpu);
        p.threads = tt_num_threads();
        p.cached = 1;
        *out = p;
    }
    cJSON_Delete(j);
    return ok;
}

static tt_err mkdir_parents(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return tt_errorf("%s: cannot create: %s", p, strerror(errno));
        *s = '/';
    }
    return TT_OK;
}

tt_err tt_peak_save(const tt_peak *pk)
{
    char path[4096], tmp[4200];
    if (tt_peak_cache_path(path, sizeof path) != 0 || mkdir_parents(path) != 0) return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "cpu", pk->cpu);
    cJSON_AddNumberToObject(j, "threads", pk->threads);
    cJSON_AddNumberToObject(j, "f32_gflops", pk->f32_gflops);
    cJSON_AddNumberToObject(j, "bf16_gflops", pk->bf16_gflops);
    cJSON_AddStringToObject(j, "path", pk->path);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return tt_errorf("%s: out of memory", path);
    /* write a private temporary and rename it: ranks may race to the cache */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    tt_err rc = TT_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) rc = tt_errorf("%s: cannot create: %s", tmp, strerror(errno));
    else {
        int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF || fflush(f) != 0 || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (bad) rc = tt_errorf("%s: write failed: %s", tmp, strerror(errno));
        else if (rename(tmp, path) != 0) rc = tt_errorf("%s: cannot rename into place: %s", path, strerror(errno));
        if (rc != 0) unlink(tmp);
    }
    cJSON_free(text);
    return rc;
}

tt_err tt_peak_get(tt_peak *out)
{
    if (tt_peak_load_cached(out)) return TT_OK;
    if (tt_peak_measure(out, 1.0) != 0) return -1;
    if (tt_peak_save(out) != 0) tt_warn("%s (the measured peak is used, but not cached)", tt_last_error());
    return TT_OK;
}

/* peak.c — `titan bench peak`: the CPU's fp32 FMA and bf16 dot-product
 * throughput on all threads, the denominator of MFU: the best of several
 * rounds, checked against the clock and the cores, cached per machine.
 * Kernels for AVX-512 (+BF16), AVX2+FMA and plain C are all compiled in (via
 * target attributes) and one is chosen at run time, so one binary runs on any
 * x86-64. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backend/host/amx.h"
#include "backend/host/bf16_dot.h"
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

/* AMX: four 16x16 fp32 tiles, each gaining a 16x32 by 32x16 bf16 product a
 * step (16,384 FLOPs per tdpbf16ps), as titan's GEMM kernel does. The A rows
 * hold (x, -x) pairs, so every pair sums to zero and the tiles stay at 0. */
__attribute__((target("amx-tile,amx-bf16"))) static double bf16_amx(double seconds, double *elapsed)
{
    uint16_t a[16 * 32] __attribute__((aligned(64))), b[16 * 32] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) {
        a[i] = i & 1 ? 0xba83 : 0x3a83; /* -1e-3, 1e-3 in bf16 */
        b[i] = 0x3a83;
    }
    tt_amx_tiles_16x64();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    uint64_t iters = 0;
    double t0 = tt_now(), t;
    do {
        for (int r = 0; r < ROUNDS; r++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        iters += ROUNDS;
    } while ((t = tt_now() - t0) < seconds);
    float c[16 * 16] __attribute__((aligned(64)));
    _tile_stored(0, c, 64);
    tt_amx_release();
    peak_sink = c[0] + c[255];
    *elapsed = t;
    return (double)iters * 4 * 16 * 16 * 32 * 2; /* 4 tile products of 16 x 16 x 32 multiply-adds */
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

/* The best kernels this CPU runs: bf16 on AMX tiles where titan's GEMM can
 * use them (tt_amx_usable: TITAN_AMX=0 says no), else as vdpbf16ps where
 * titan prefers them to FMAs (tt_bf16_dot_preferred), else none: bf16 then
 * runs on the fp32 FMAs and the fp32 peak is its peak. The peak is the MFU's
 * denominator, so it is measured on what titan's kernels run.
 * TITAN_PEAK_ISA=scalar|avx2|avx512 caps the choice (to exercise and compare
 * the fallbacks on a big machine). */
static void pick(peak_kernel *f32, peak_kernel *bf16, char *path, size_t cap)
{
    const char *cap_isa = getenv("TITAN_PEAK_ISA");
    int allow_amx = !cap_isa || strcmp(cap_isa, "amx") == 0;
    int allow512 = allow_amx || strcmp(cap_isa, "avx512") == 0;
    int allow2 = allow512 || (cap_isa && strcmp(cap_isa, "avx2") == 0);
    *f32 = f32_scalar;
    *bf16 = NULL;
    snprintf(path, cap, "scalar");
#ifdef TT_PEAK_X86
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512f")) {
        *f32 = f32_avx512;
        snprintf(path, cap, "avx512f");
        if (tt_bf16_dot_preferred()) { /* else bf16 products are widened onto the fp32 FMAs */
            *bf16 = bf16_avx512;
            snprintf(path, cap, "avx512f+avx512bf16");
        }
        if (allow_amx && tt_amx_usable()) {
            *bf16 = bf16_amx;
            snprintf(path, cap, "avx512f+amx-bf16");
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

/* ---- the machine --------------------------------------------------------- */

/* What /proc/cpuinfo says of this machine. */
typedef struct {
    char model[128]; /* "model name" */
    char id[96];     /* vendor, family, model, stepping */
    double mhz;      /* the highest "cpu MHz" */
    int cores;       /* distinct (physical id, core id) pairs; 0 = not said */
} cpuinfo;

#define MAX_CORE_IDS 1024

/* "key\t: value" -> value without its line end, or NULL when the line is not key's. */
static const char *field_value(char *line, const char *key)
{
    size_t n = strlen(key);
    if (strncmp(line, key, n) != 0) return NULL;
    char *v = line + n + strspn(line + n, " \t"); /* "model" is not "model name" */
    if (*v != ':') return NULL;
    for (v++; *v == ' ' || *v == '\t'; v++) {}
    size_t len = strcspn(v, "\n");
    while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    v[len] = '\0';
    return v;
}

static void read_cpuinfo(cpuinfo *ci)
{
    memset(ci, 0, sizeof *ci);
    snprintf(ci->model, sizeof ci->model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], vendor[16] = "", family[16] = "", model[16] = "", stepping[16] = "";
    long phys = 0, core = -1, ids[MAX_CORE_IDS][2];
    int n_ids = 0, first = 1, has_model = 0; /* first: still in the first processor's block */
    for (int more = 1; more;) {
        more = fgets(line, sizeof line, f) != NULL;
        const char *v;
        if (!more || line[0] == '\n') { /* the end of a processor's block: count its core */
            if (core >= 0 && n_ids < MAX_CORE_IDS) {
                int k = 0;
                while (k < n_ids && (ids[k][0] != phys || ids[k][1] != core)) k++;
                if (k == n_ids) ids[n_ids][0] = phys, ids[n_ids][1] = core, n_ids++;
            }
            if (core >= 0 || has_model) first = 0;
            phys = 0, core = -1;
            continue;
        }
        if ((v = field_value(line, "model name")) && first && v[0]) {
            snprintf(ci->model, sizeof ci->model, "%s", v);
            has_model = 1;
        } else if ((v = field_value(line, "vendor_id")) && first) snprintf(vendor, sizeof vendor, "%s", v);
        else if ((v = field_value(line, "cpu family")) && first) snprintf(family, sizeof family, "%s", v);
        else if ((v = field_value(line, "model")) && first) snprintf(model, sizeof model, "%s", v);
        else if ((v = field_value(line, "stepping")) && first) snprintf(stepping, sizeof stepping, "%s", v);
        else if ((v = field_value(line, "physical id"))) phys = strtol(v, NULL, 10);
        else if ((v = field_value(line, "core id"))) core = strtol(v, NULL, 10);
        else if ((v = field_value(line, "cpu MHz"))) {
            double mhz = strtod(v, NULL);
            if (mhz > ci->mhz && mhz < 1e6) ci->mhz = mhz;
        }
    }
    fclose(f);
    if (vendor[0] || family[0])
        snprintf(ci->id, sizeof ci->id, "%s family %s model %s stepping %s", vendor, family, model, stepping);
    ci->cores = n_ids;
}

/* A code path's FLOPs per cycle and core, at the low and the high end of the
 * CPUs that run it (peak.h). */
static const struct {
    const char *path;
    double f32_lo, f32_hi, bf16_lo, bf16_hi;
} flops_per_cycle[] = {
    {"avx512f+amx-bf16", 32, 64, 512, 1024}, /* one tdpbf16ps each 16 cycles, or 32 */
    {"avx512f+avx512bf16", 32, 64, 64, 128},
    {"avx512f", 32, 64, 0, 0},
    {"avx2+fma", 16, 32, 0, 0},
    {"scalar", 1, 16, 0, 0},
};

void tt_peak_bounds_of(const char *path, int cores, double mhz, int mhz_is_max, tt_peak_bounds *b)
{
    memset(b, 0, sizeof *b);
    b->mhz = mhz > 0 ? mhz : 0;
    b->mhz_is_max = mhz_is_max;
    b->cores = cores;
    size_t k = 0, n = sizeof flops_per_cycle / sizeof flops_per_cycle[0];
    while (k < n && strcmp(flops_per_cycle[k].path, path)) k++;
    if (k == n || !(mhz > 0) || cores < 1) return; /* an unknown path or clock: nothing to check */
    const double lo = cores * (0.5 * mhz) / 1e3, hi = cores * (mhz_is_max ? 1.15 : 2.0) * mhz / 1e3; /* G-cycles/s */
    b->f32_lo = lo * flops_per_cycle[k].f32_lo;
    b->f32_hi = hi * flops_per_cycle[k].f32_hi;
    b->bf16_lo = lo * flops_per_cycle[k].bf16_lo;
    b->bf16_hi = hi * flops_per_cycle[k].bf16_hi;
}

void tt_peak_bounds_here(const char *path, int threads, tt_peak_bounds *b)
{
    cpuinfo ci;
    read_cpuinfo(&ci);
    double mhz = 0;
    int is_max = 0;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f) {
        double khz = 0;
        if (fscanf(f, "%lf", &khz) == 1 && khz > 0 && khz < 1e9) mhz = khz / 1e3, is_max = 1;
        fclose(f);
    }
    if (!is_max) mhz = ci.mhz;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int cores = ci.cores > 0 ? ci.cores : online > 0 ? (int)online : 1;
    tt_peak_bounds_of(path, threads < cores ? threads : cores, mhz, is_max, b);
}

void tt_peak_judge(tt_peak *p, const tt_peak_bounds *b)
{
    p->bounds = *b;
    p->note[0] = '\0';
    if (!(b->f32_lo > 0)) {
        p->verdict = TT_PEAK_UNCHECKED;
        snprintf(p->note, sizeof p->note, "not checked against the clock (%s)",
                 b->mhz > 0 ? "an unknown code path" : "no clock in cpufreq or /proc/cpuinfo");
        return;
    }
    const struct {
        const char *name;
        double v, lo, hi;
    } fig[2] = {{"fp32", p->f32_gflops, b->f32_lo, b->f32_hi}, {"bf16", p->bf16_gflops, b->bf16_lo, b->bf16_hi}};
    p->verdict = TT_PEAK_PLAUSIBLE;
    for (int i = 0; i < 2; i++) {
        if (!(fig[i].lo > 0) || !(fig[i].v > 0)) continue; /* bf16 where the path has none */
        int low = fig[i].v < fig[i].lo, high = fig[i].v > fig[i].hi;
        if (!low && !(high && p->verdict == TT_PEAK_PLAUSIBLE)) continue; /* a low figure outranks a high one */
        p->verdict = low ? TT_PEAK_LOW : TT_PEAK_HIGH;
        snprintf(p->note, sizeof p->note,
                 "%s %.4g GFLOP/s is %s the %.0f-%.0f GFLOP/s that %d core%s at %.0f MHz (%s) allow on %s%s", fig[i].name,
                 fig[i].v, low ? "below" : "above", fig[i].lo, fig[i].hi, b->cores, b->cores == 1 ? "" : "s", b->mhz,
                 b->mhz_is_max ? "cpufreq's maximum" : "/proc/cpuinfo", p->path,
                 low ? ": other work slowed the measurement" : ": the clock read is below the one the cores ran at");
    }
}

/* ---- measuring ------------------------------------------------------------- */

#define ROUNDS_MIN 2
#define ROUNDS_MAX 5

/* best[0] >= best[1]: the two best rounds of a figure */
static void keep_best(double best[2], double v)
{
    if (v > best[0]) best[1] = best[0], best[0] = v;
    else if (v > best[1]) best[1] = v;
}
static int agree(const double best[2]) { return best[1] >= 0.9 * best[0]; }

tt_err tt_peak_measure(tt_peak *out, double seconds)
{
    if (!(seconds > 0 && seconds < 3600)) return tt_errorf("peak measurement: duration %g s outside (0, 3600)", seconds);
    memset(out, 0, sizeof *out);
    peak_kernel f32, bf16;
    pick(&f32, &bf16, out->path, sizeof out->path);
    cpuinfo ci;
    read_cpuinfo(&ci);
    snprintf(out->cpu, sizeof out->cpu, "%s", ci.model);
    snprintf(out->cpu_id, sizeof out->cpu_id, "%s", ci.id);
    out->threads = tt_num_threads();
    tt_peak_bounds b;
    tt_peak_bounds_here(out->path, out->threads, &b);
    double each = seconds / ROUNDS_MIN / (bf16 ? 2 : 1), bf[2] = {0, 0}, bb[2] = {0, 0};
    for (int r = 0; r < ROUNDS_MAX; r++) {
        keep_best(bf, run_threads(f32, each, out->threads));
        if (bf16) keep_best(bb, run_threads(bf16, each, out->threads));
        out->rounds = r + 1;
        out->f32_gflops = bf[0];
        out->bf16_gflops = bb[0];
        tt_peak_judge(out, &b);
        if (r + 1 >= ROUNDS_MIN && out->verdict != TT_PEAK_LOW && agree(bf) && (!bf16 || agree(bb))) break;
    }
    if (!(out->f32_gflops > 0)) return tt_errorf("peak measurement: no work was timed (%s)", out->path);
    if (out->verdict == TT_PEAK_LOW || out->verdict == TT_PEAK_HIGH)
        tt_warn("peak measurement, best of %d rounds: %s", out->rounds, out->note);
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
    cpuinfo here;
    read_cpuinfo(&here);
    const cJSON *cpu = cJSON_GetObjectItemCaseSensitive(j, "cpu"), *thr = cJSON_GetObjectItemCaseSensitive(j, "threads");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "cpu_id");
    const cJSON *f32 = cJSON_GetObjectItemCaseSensitive(j, "f32_gflops");
    const cJSON *bf = cJSON_GetObjectItemCaseSensitive(j, "bf16_gflops");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(j, "path");
    /* (a cache from before cpu_id was written is another machine's, as far as we can tell) */
    int ok = cJSON_IsString(cpu) && cJSON_IsString(id) && cJSON_IsNumber(thr) && cJSON_IsNumber(f32) &&
             cJSON_IsNumber(bf) && cJSON_IsString(pa) && strcmp(cpu->valuestring, here.model) == 0 &&
             strcmp(id->valuestring, here.id) == 0 && thr->valuedouble == tt_num_threads() &&
             f32->valuedouble > 0 && f32->valuedouble < 1e12 && bf->valuedouble >= 0 && bf->valuedouble < 1e12;
    /* the kernels this run would measure with (TITAN_AMX, TITAN_PEAK_ISA) */
    peak_kernel kf, kb;
    char path_now[32];
    pick(&kf, &kb, path_now, sizeof path_now);
    ok = ok && strcmp(pa->valuestring, path_now) == 0;
    tt_peak p;
    memset(&p, 0, sizeof p);
    if (ok) {
        p.f32_gflops = f32->valuedouble;
        p.bf16_gflops = bf->valuedouble;
        snprintf(p.path, sizeof p.path, "%s", pa->valuestring);
        snprintf(p.cpu, sizeof p.cpu, "%s", here.model);
        snprintf(p.cpu_id, sizeof p.cpu_id, "%s", here.id);
        p.threads = tt_num_threads();
        p.cached = 1;
        tt_peak_bounds b;
        tt_peak_bounds_here(p.path, p.threads, &b);
        tt_peak_judge(&p, &b);
        if (p.verdict == TT_PEAK_LOW) { /* a noisy measurement must not poison every later MFU */
            tt_warn("the cached peak in %s looks wrong (%s): measuring again", path, p.note);
            ok = 0;
        }
    }
    if (ok) *out = p;
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
    cJSON_AddStringToObject(j, "cpu_id", pk->cpu_id);
    cJSON_AddNumberToObject(j, "threads", pk->threads);
    cJSON_AddNumberToObject(j, "f32_gflops", pk->f32_gflops);
    cJSON_AddNumberToObject(j, "bf16_gflops", pk->bf16_gflops);
    cJSON_AddStringToObject(j, "path", pk->path);
    cJSON_AddNumberToObject(j, "rounds", pk->rounds); /* how the figures were found, for whoever reads the file */
    cJSON_AddNumberToObject(j, "clock_mhz", pk->bounds.mhz);
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

tt_err tt_peak_measure_and_cache(tt_peak *out, double seconds)
{
    if (tt_peak_measure(out, seconds) != 0) return -1;
    if (out->verdict == TT_PEAK_LOW)
        tt_warn("the peak measured is below the plausible range: used for this run only, not cached");
    else if (tt_peak_save(out) != 0)
        tt_warn("%s (the measured peak is used, but not cached)", tt_last_error());
    return TT_OK;
}

tt_err tt_peak_get(tt_peak *out)
{
    if (tt_peak_load_cached(out)) return TT_OK;
    return tt_peak_measure_and_cache(out, 1.0);
}

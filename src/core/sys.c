/* sys.c — clocks, peak memory, thread count and the OpenMP runtime's waits. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core.h"

double tt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void (*work_progress_hook)(void);

void tt_set_work_progress_hook(void (*hook)(void)) { work_progress_hook = hook; }

void tt_work_progress(void)
{
    if (work_progress_hook) work_progress_hook();
}

size_t tt_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

int tt_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int tt_num_cores(int *bound)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (online < 1) online = 1;
    if (n < 1) n = (int)online;
    if (bound) *bound = n < online;
    return n;
}

void tt_set_num_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n > 0 ? n : 1);
#else
    (void)n;
#endif
}

/* How long an idle OpenMP thread spins before it sleeps, in libgomp's
 * GOMP_SPINCOUNT: polls of its flag, a `pause` each (12 ns on the Intel Xeon
 * host, so about 36 us). libgomp's own default, 300,000, spins for
 * milliseconds, longer than a scheduler's time slice: with another busy
 * process on the cores, a thread waiting at a join or for the next parallel
 * region spends that slice spinning while the thread it waits for is
 * descheduled. Measured on the Intel Xeon host with one busy process beside
 * `titan bench step` (bf16, bench/wait_policy.sh, docs/performance.md),
 * 3,000 ran llama_768 1.36x as fast as libgomp's default, llama_288 1.47x
 * and moe_288 1.62x (medians of rounds); on the quiet host the medians were
 * 0.96-1.00x, within the rounds' spread. OMP_WAIT_POLICY=passive (no spin)
 * did as well on that host, but wakes a sleeping thread for every parallel
 * region that follows a short gap, which the spin covers. */
#define TT_GOMP_SPINCOUNT "3000"

void tt_openmp_wait_default(char **argv)
{
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
    /* libgomp reads its wait policy once, as it is loaded, before main: it
     * only takes effect through the environment of an exec. */
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return; /* the user's choice */
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || n >= (ssize_t)sizeof self - 1) return;
    self[n] = 0;
    if (setenv("GOMP_SPINCOUNT", TT_GOMP_SPINCOUNT, 1)) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT"); /* the exec failed: carry on with libgomp's default */
#else
    (void)argv; /* another runtime (LLVM's libomp) has its own settings: KMP_BLOCKTIME */
#endif
}

/* name=value of `name` in the NUL-separated environment block env (n bytes), or NULL */
static const char *env_entry(const char *env, size_t n, const char *name)
{
    const size_t len = strlen(name);
    for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (!strncmp(env + i, name, len) && env[i + len] == '=') return env + i;
    return NULL;
}

const char *tt_openmp_wait_desc(char *buf, size_t size)
{
    /* the environment as the process was started, NUL-terminated: a later
     * setenv does not reach a runtime that had already read it */
    FILE *f = fopen("/proc/self/environ", "rb");
    size_t n = 0, cap = 0;
    char *env = NULL;
    for (int ok = f != NULL; ok;) {
        if (n + 4096 + 1 > cap) {
            char *e = realloc(env, cap = 2 * cap + 4096 + 1);
            if (!e) break;
            env = e;
        }
        const size_t got = fread(env + n, 1, cap - n - 1, f);
        n += got;
        ok = got > 0;
    }
    if (f) fclose(f);
    if (!env) {
        snprintf(buf, size, "unknown");
        return buf;
    }
    env[n] = 0;
    const char *policy = env_entry(env, n, "OMP_WAIT_POLICY"), *spin = env_entry(env, n, "GOMP_SPINCOUNT");
    if (policy || spin) snprintf(buf, size, "%s%s%s", policy ? policy : "", policy && spin ? " " : "", spin ? spin : "");
    else snprintf(buf, size, "the runtime's default");
    free(env);
    return buf;
}

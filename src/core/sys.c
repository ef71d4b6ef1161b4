/* sys.c — clocks, peak memory and thread count. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
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

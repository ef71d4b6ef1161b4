/* corelat.c — the round trip of a cache line between two threads: thread 0
 * writes an odd number into a shared line, thread 1 waits for it and answers
 * with the next even one, many times over. Each hand-over moves the line
 * from one core's cache to the other's, so the time a round trip takes is
 * twice the cores' distance. */
#include <stdatomic.h>

#include "backend/host/corelat.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Round trips a timing, and timings (their median is the figure: a trip
 * that was descheduled is slower, never faster) */
#define RT_TRIPS 4000
#define RT_TIMINGS 5
/* A timing stops after this long (s), on the trips done by then: with two
 * threads on one core each hand-over waits for a time slice, and 4000 of
 * them would take minutes. */
#define RT_BUDGET 0.05
/* what thread 0 writes to tell thread 1 to stop */
#define RT_STOP (-1L)

static void sort_small(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            const double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
}

tt_err tt_core_round_trip(double *ns)
{
    *ns = 0;
    if (tt_num_threads() < 2) return 0;
    static _Alignas(64) atomic_long line; /* alone in its cache line: nothing else moves it */
    double t[RT_TIMINGS] = {0};
    int team = 1;
#ifdef _OPENMP
    #pragma omp parallel num_threads(2)
    {
        #pragma omp single
        team = omp_get_num_threads();
        /* (the single's barrier: both threads know the team before either waits on the other) */
        const int me = omp_get_thread_num();
        for (int r = 0; team == 2 && r < RT_TIMINGS; r++) {
            const long base = (long)r * 2 * RT_TRIPS;
            #pragma omp barrier
            const double t0 = tt_now();
            long i = 0;
            for (; i < RT_TRIPS; i++) {
                const long ask = base + 2 * i + 1;
                if (me == 0) {
                    if (i % 64 == 63 && tt_now() - t0 > RT_BUDGET) { /* out of time: tell thread 1 */
                        atomic_store_explicit(&line, RT_STOP, memory_order_release);
                        break;
                    }
                    atomic_store_explicit(&line, ask, memory_order_release);
                    while (atomic_load_explicit(&line, memory_order_acquire) != ask + 1) {}
                } else {
                    long v;
                    while ((v = atomic_load_explicit(&line, memory_order_acquire)) != ask && v != RT_STOP) {}
                    if (v == RT_STOP) break;
                    atomic_store_explicit(&line, ask + 1, memory_order_release);
                }
            }
            if (me == 0) t[r] = (tt_now() - t0) * 1e9 / (double)(i > 0 ? i : 1);
            #pragma omp barrier
            /* both have left the loop (thread 1 after seeing a stop): clear it before the next timing */
            if (me == 0) atomic_store(&line, 0);
        }
    }
#endif
    if (team < 2) return 0;
    sort_small(t, RT_TIMINGS);
    *ns = t[RT_TIMINGS / 2];
    return 0;
}

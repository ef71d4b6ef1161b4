/* test_corelat.c — the round trip of a cache line between two threads: a
 * positive, finite figure with two threads, 0 with one (nothing to measure),
 * and it ends, also when both threads share one core (each hand-over then
 * waits for a time slice: the timings stop early). Not a timing assertion. */
#include "backend/host/corelat.h"
#include "harness.h"

int main(void)
{
    double ns = -1;
    tt_set_num_threads(2);
    CHECK_MSG(tt_core_round_trip(&ns) == 0, "%s", tt_last_error());
    printf("  two threads: %.1f ns a round trip\n", ns);
#ifdef _OPENMP
    CHECK_MSG(ns > 0 && ns < 1e12, "round trip %g ns", ns);
#else
    CHECK(ns == 0);
#endif
    CHECK(tt_core_round_trip(&ns) == 0); /* again: the shared line starts over */
#ifdef _OPENMP
    CHECK_MSG(ns > 0 && ns < 1e12, "second round trip %g ns", ns);
#endif
    tt_set_num_threads(1);
    ns = -1;
    CHECK(tt_core_round_trip(&ns) == 0 && ns == 0);
    return th_done("test_corelat");
}

/* harness.h — a tiny test harness: CHECK macros, a pass/fail count, skip. */
#ifndef TT_HARNESS_H
#define TT_HARNESS_H
#include <math.h>
#include <stdio.h>

extern int th_failed, th_passed;
#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) th_passed++;                                                          \
        else {                                                                          \
            th_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)
#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (cond) th_passed++;                                                          \
        else {                                                                          \
            th_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
        }                                                                               \
    } while (0)
#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g (tol %g)", (double)(a), (double)(b), (double)(tol))
/* Print the summary line and return the process exit code. */
int th_done(const char *name);
/* Report a skip with a reason and return 77 (CTest's SKIP_RETURN_CODE). */
int th_skip(const char *name, const char *why);
/* Path to ../shared beside the source tree, or NULL if absent. */
const char *th_shared_dir(void);
#endif

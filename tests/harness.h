/* harness.h — a tiny test harness: CHECK macros, a pass/fail count, skip. */
#ifndef TT_HARNESS_H
#define TT_HARNESS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"

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
/* Zeroed memory for n elements of size bytes, released with free(); n = 0
 * still gives a pointer. Overflow or out of memory ends the test (exit 1). */
void *th_alloc(size_t n, size_t size);
/* Document ids (B, T) drawn from r: row b starts document 100 * b, and each
 * later token starts a new document with probability 1/4. */
int32_t *th_doc_ids(tt_rng *r, int B, int T);
/* Path to ../shared beside the source tree, or NULL if absent. */
const char *th_shared_dir(void);
#endif

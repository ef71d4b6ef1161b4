/* harness.c — the shared pieces of the test harness. */
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"

int th_failed, th_passed;

int th_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, th_passed, th_failed);
    return th_failed ? 1 : 0;
}

int th_skip(const char *name, const char *why)
{
    printf("%s: SKIPPED: %s\n", name, why);
    return 77;
}

void *th_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1); /* calloc checks n * size for overflow */
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu x %zu bytes\n", n, size);
        exit(1);
    }
    return p;
}

int32_t *th_doc_ids(tt_rng *r, int B, int T)
{
    int32_t *d = th_alloc((size_t)B * T, sizeof(int32_t));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) d[b * T + t] = t == 0 ? 100 * b : d[b * T + t - 1] + (tt_rng_below(r, 4) == 0);
    return d;
}

const char *th_shared_dir(void)
{
    static char path[4096];
    const char *env = getenv("TITAN_SHARED_DIR");
    snprintf(path, sizeof path, "%s", env ? env : TITAN_SOURCE_DIR "/../shared");
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : NULL;
}

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

const char *th_shared_dir(void)
{
    static char path[4096];
    const char *env = getenv("TITAN_SHARED_DIR");
    snprintf(path, sizeof path, "%s", env ? env : TITAN_SOURCE_DIR "/../shared");
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : NULL;
}

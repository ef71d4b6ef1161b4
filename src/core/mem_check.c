/* mem_check.c — how much memory a new allocation can have, and the check that
 * refuses a size before it is allocated (naming what needed it), so a config
 * that implies terabytes fails at once instead of after minutes of paging. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

/* The first unsigned number in a small file ("max" and absent files: 0). */
static uint64_t read_u64(const char *path)
{
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f) {
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
    }
    return (uint64_t)v;
}

/* MemAvailable of /proc/meminfo (the kernel's estimate of what can be
 * allocated without swapping), in bytes; 0 if the line is not there. */
static uint64_t meminfo_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

size_t tt_mem_available(void)
{
    uint64_t avail = meminfo_available();
    if (!avail) { /* no /proc: the free pages */
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) avail = (uint64_t)pages * (uint64_t)page;
    }
    /* a container's limit is lower than what the host's meminfo says
     * (cgroup v2, then v1; "max" or no file means none) */
    static const char *const limits[][2] = {
        {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"},
    };
    for (int i = 0; i < 2; i++) {
        uint64_t lim = read_u64(limits[i][0]), used = read_u64(limits[i][1]);
        if (lim && lim < ((uint64_t)1 << 60)) {
            uint64_t left = lim > used ? lim - used : 0;
            if (!avail || left < avail) avail = left;
            break;
        }
    }
    return avail > SIZE_MAX ? SIZE_MAX : (size_t)avail;
}

int tt_mem_check(size_t bytes, const char *what, ...)
{
    size_t avail = tt_mem_available();
    if (avail == 0 || bytes <= avail) return 0; /* unknown: let the allocation say */
    char buf[512];
    va_list ap;
    va_start(ap, what);
    vsnprintf(buf, sizeof buf, what, ap);
    va_end(ap);
    return tt_errorf("%s needs %zu bytes (%.1f GiB) but %zu bytes (%.1f GiB) of memory are available", buf, bytes,
                     (double)bytes / (1 << 30), avail, (double)avail / (1 << 30));
}

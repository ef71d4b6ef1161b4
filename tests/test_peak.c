/* test_peak.c — peak FLOP/s measurement runs on every code path this CPU
 * allows and gives positive numbers (not a timing assertion), and the cache
 * round-trips and is ignored when it belongs to another machine. */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/host/peak.h"
#include "harness.h"

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void)
{
    tt_peak p;
    const char *isas[3] = {NULL, "avx2", "scalar"};
    for (int i = 0; i < 3; i++) {
        if (isas[i]) setenv("TITAN_PEAK_ISA", isas[i], 1);
        CHECK_MSG(tt_peak_measure(&p, 0.05) == 0, "%s", tt_last_error());
        printf("  %-20s f32 %8.1f GFLOP/s  bf16 %8.1f GFLOP/s  (%d threads, %s)\n", p.path, p.f32_gflops,
               p.bf16_gflops, p.threads, p.cpu);
        CHECK(p.f32_gflops > 0 && p.bf16_gflops >= 0 && p.threads >= 1 && p.cpu[0] && !p.cached);
        CHECK((strstr(p.path, "bf16") != NULL) == (p.bf16_gflops > 0));
        if (isas[i] && strcmp(isas[i], "scalar") == 0) CHECK(strcmp(p.path, "scalar") == 0);
        if (isas[i]) CHECK(strstr(p.path, "avx512") == NULL);
    }
    unsetenv("TITAN_PEAK_ISA");
    CHECK(tt_peak_measure(&p, -1) != 0);

    char dir[64] = "/tmp/tt_peak_XXXXXX", path[4096];
    if (!mkdtemp(dir)) return th_skip("test_peak", "cannot create a temporary directory");
    setenv("XDG_CACHE_HOME", dir, 1);
    tt_peak got;
    CHECK(tt_peak_cache_path(path, sizeof path) == 0 && strncmp(path, dir, strlen(dir)) == 0);
    CHECK(tt_peak_load_cached(&got) == 0); /* nothing cached yet */
    CHECK_MSG(tt_peak_save(&p) == 0, "%s", tt_last_error());
    CHECK(tt_peak_load_cached(&got) == 1 && got.cached == 1);
    CHECK_NEAR(got.f32_gflops, p.f32_gflops, 1e-6 * p.f32_gflops);
    CHECK(strcmp(got.path, p.path) == 0 && strcmp(got.cpu, p.cpu) == 0 && got.threads == p.threads);
    CHECK(tt_peak_get(&got) == 0 && got.cached == 1); /* served from the cache, no measuring */

    /* a cache written on another machine is not used */
    tt_peak other = p;
    snprintf(other.cpu, sizeof other.cpu, "Some Other CPU 9000");
    CHECK(tt_peak_save(&other) == 0);
    CHECK(tt_peak_load_cached(&got) == 0);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"cpu\": 3", f); /* and a broken one is a miss, not an error */
        fclose(f);
    }
    CHECK(tt_peak_load_cached(&got) == 0);
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return th_done("test_peak");
}

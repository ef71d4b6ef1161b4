/* test_dist_cli.c — the CLI in a job of several processes: an error that
 * every rank hits is printed by each, prefixed with its rank, and the job
 * exits non-zero; help is printed as ever. Runs `mpirun -np 2 titan ...`
 * (TITAN_MPIEXEC, which CTest sets); skipped in a build without MPI or
 * without mpirun. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "dist/dist.h"
#include "harness.h"

/* Run `mpirun -np 2 titan ARGS`; its exit status, and its output in out. */
static int job(const char *mpiexec, const char *args, char *out, size_t size)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "timeout -k 5 60 %s --oversubscribe -np 2 %s/titan %s 2>&1", mpiexec, TITAN_BINARY_DIR,
             args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    int status = pclose(p);
    return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void)
{
    if (!tt_dist_built_with_mpi()) return th_skip("test_dist_cli", "this build has no MPI (-DTITAN_MPI=OFF)");
    const char *mpiexec = getenv("TITAN_MPIEXEC");
    if (!mpiexec || !*mpiexec) return th_skip("test_dist_cli", "TITAN_MPIEXEC is not set (CTest sets it)");
    static char out[1 << 16];

    /* a bad key: each rank says so, naming itself */
    int rc = job(mpiexec, "train --training.steps abc", out, sizeof out);
    CHECK_MSG(rc > 0 && rc != 124, "exit status %d", rc);
    for (int r = 0; r < 2; r++) {
        char want[128];
        snprintf(want, sizeof want, "rank %d: titan train: error: command line: training.steps: expected an "
                                    "integer, got 'abc'", r);
        CHECK_MSG(strstr(out, want) != NULL, "the output lacks '%s':\n%s", want, out);
    }
    /* help and usage errors stay as they are: no rank to name, nothing started */
    rc = job(mpiexec, "help", out, sizeof out);
    CHECK_MSG(rc == 0 && strstr(out, "usage: titan") && !strstr(out, "rank "), "titan help: %d\n%s", rc, out);
    return th_done("test_dist_cli");
}

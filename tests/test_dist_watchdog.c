/* test_dist_watchdog.c — a rank that never joins a collective ends the whole
 * job, non-zero, within a bound, instead of hanging it: the watchdog (a 2 s
 * timeout here) aborts the job, naming the rank and the collective. The test
 * launches mpirun (TITAN_MPIEXEC, which CTest sets) on two ranks of itself,
 * under `timeout`, once with rank 0 blocked in a wait and once with rank 0
 * computing while its collective is pending; rank 1 never joins. And a rank
 * busy alone (reporting progress, tt_work_progress) for three timeouts is
 * waited for, by a collective or by the end of the job, but once it stops
 * reporting it is taken for hung within the timeout. Skipped in a build
 * without MPI or without mpirun. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/dist.h"
#include "harness.h"
#include "titan/titan.h"

#define COMM_TIMEOUT 2 /* seconds: the watchdog's */
#define JOB_BOUND 30   /* seconds the job may take in all (start-up, the timeout, the abort); timeout(1)
                          ends a job that would hang past it, so the test fails rather than hangs */
#define BUSY (3 * COMM_TIMEOUT) /* seconds of work a busy rank does alone, reporting progress */
#define TEXT(x) TEXT_(x)
#define TEXT_(x) #x

/* BUSY seconds of work in 10 ms pieces, each reported as progress. */
static void busy(void)
{
    for (int i = 0; i < BUSY * 100; i++) {
        usleep(10000);
        tt_work_progress();
    }
}

/* The busy modes: rank 1 works alone, then joins the all-reduce (busy) or
 * stops answering (busy_hang); or rank 0 works alone while rank 1 ends the
 * job (busy_end). 0 when the job ended as it should. */
static int busy_program(tt_dist *d, const char *mode)
{
    const int rank = tt_dist_rank(d);
    int64_t x = 1;
    if (rank == (strcmp(mode, "busy_end") ? 1 : 0)) busy();
    if (!strcmp(mode, "busy_hang") && rank == 1) {
        sleep(100); /* hung after its work: no progress; the job's abort ends this sleep */
        return 0;
    }
    if (strcmp(mode, "busy_end") &&
        tt_dist_all_reduce(d, TT_GROUP_WORLD, &x, 1, TT_I64, TT_REDUCE_SUM, "the stuck all_reduce"))
        return 4;
    tt_shutdown();
    return 0;
}

/* One rank of the job: rank 1 never joins; rank 0 waits for it, or computes
 * with the collective pending; or a busy mode. */
static int rank_program(const char *mode)
{
    tt_dist *d = tt_dist_get();
    if (!d) {
        fprintf(stderr, "tt_dist_get: %s\n", tt_last_error());
        return 3;
    }
    tt_dist_set_timeout(d, COMM_TIMEOUT);
    if (!strncmp(mode, "busy", 4)) return busy_program(d, mode);
    if (tt_dist_rank(d) != 0) {
        sleep(100); /* the dead rank: the job's abort ends this sleep */
        return 0;
    }
    int64_t x = 1;
    if (!strcmp(mode, "wait")) {
        tt_dist_all_reduce(d, TT_GROUP_WORLD, &x, 1, TT_I64, TT_REDUCE_SUM, "the stuck all_reduce");
    } else {
        tt_coll c = {.kind = TT_COLL_ALL_REDUCE, .send = &x, .recv = &x, .count = 1, .dtype = TT_I64,
                     .what = "the pending all_reduce"};
        tt_coll_req *r;
        if (tt_coll_start(d, &c, &r) == 0)
            for (int i = 0; i < 100000; i++) { /* "kernels", with progress between them, and no wait */
                tt_dist_progress(d);
                usleep(1000);
            }
    }
    fprintf(stderr, "rank 0: the watchdog did not end the job\n");
    tt_shutdown();
    return 0;
}

/* Run the job; its exit status (or -1), seconds and output. */
static int launch(const char *mpiexec, const char *self, const char *mode, double *seconds, char *out, size_t size)
{
    char path[] = "/tmp/test_dist_watchdog_XXXXXX";
    int fd = mkstemp(path);
    out[0] = 0;
    if (fd < 0) return -1;
    unlink(path);
    double t0 = tt_now();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("timeout", "timeout", "-k", "5", TEXT(JOB_BOUND), mpiexec, "--oversubscribe", "-np", "2", self,
               "--rank-program", mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) status = -1;
    *seconds = tt_now() - t0;
    ssize_t n = pread(fd, out, size - 1, 0);
    out[n > 0 ? n : 0] = 0;
    close(fd);
    if (status == -1) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--rank-program")) return rank_program(argv[2]);
    if (!tt_dist_built_with_mpi()) return th_skip("test_dist_watchdog", "this build has no MPI (-DTITAN_MPI=OFF)");
    const char *mpiexec = getenv("TITAN_MPIEXEC");
    if (!mpiexec || !*mpiexec) return th_skip("test_dist_watchdog", "TITAN_MPIEXEC is not set (CTest sets it)");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return th_skip("test_dist_watchdog", "cannot find this program (/proc/self/exe)");
    self[n] = 0;
    static const char *const modes[][2] = {{"wait", "the stuck all_reduce"}, {"pending", "the pending all_reduce"}};
    for (size_t m = 0; m < 2; m++) {
        static char out[1 << 16];
        double seconds = 0;
        int rc = launch(mpiexec, self, modes[m][0], &seconds, out, sizeof out);
        char want[160];
        snprintf(want, sizeof want, "rank 0: %s did not complete in %d s: aborting the job", modes[m][1],
                 COMM_TIMEOUT);
        CHECK_MSG(rc > 0 && rc != 124 && rc != 137 && rc != 127, "%s: the job's exit status is %d (124, 137: "
                  "killed by timeout; 127: not started)", modes[m][0], rc);
        CHECK_MSG(seconds >= COMM_TIMEOUT && seconds < JOB_BOUND, "%s: the job took %.1f s", modes[m][0], seconds);
        CHECK_MSG(strstr(out, want) != NULL, "%s: the output lacks '%s':\n%s", modes[m][0], want, out);
        printf("  %s: the job ended with status %d after %.1f s: %s\n", modes[m][0], rc, seconds, want);
    }
    /* a rank busy for three timeouts, waited for by a collective or by the end of the job: the job completes */
    static const char *const fine[] = {"busy", "busy_end"};
    for (size_t m = 0; m < 2; m++) {
        static char out[1 << 16];
        double seconds = 0;
        int rc = launch(mpiexec, self, fine[m], &seconds, out, sizeof out);
        CHECK_MSG(rc == 0 && seconds >= BUSY, "%s: the job's exit status is %d after %.1f s (want 0 after the "
                  "busy rank's %d s):\n%s", fine[m], rc, seconds, BUSY, out);
        if (rc == 0)
            printf("  %s: a rank busy alone for %d s, reporting progress: the job completed in %.1f s\n", fine[m],
                   BUSY, seconds);
    }
    /* busy, then hung: aborted within the timeout of its last progress, the message says so */
    static char out[1 << 16];
    double seconds = 0;
    int rc = launch(mpiexec, self, "busy_hang", &seconds, out, sizeof out);
    char want[160];
    snprintf(want, sizeof want, "rank 0: the stuck all_reduce did not complete in %d s since rank 1 last reported "
             "progress", COMM_TIMEOUT);
    CHECK_MSG(rc > 0 && rc != 124 && rc != 137 && rc != 127, "busy_hang: the job's exit status is %d", rc);
    CHECK_MSG(seconds >= BUSY + COMM_TIMEOUT && seconds < BUSY + JOB_BOUND / 2, "busy_hang: the job took %.1f s",
              seconds);
    CHECK_MSG(strstr(out, want) != NULL, "busy_hang: the output lacks '%s':\n%s", want, out);
    printf("  busy_hang: the job ended with status %d after %.1f s: %s\n", rc, seconds, want);
    return th_done("test_dist_watchdog");
}

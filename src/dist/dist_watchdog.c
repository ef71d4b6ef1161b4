/* dist_watchdog.c — the thread that ends the whole job when a collective or a
 * blocking MPI call does not complete within the timeout, so that a dead or
 * hung rank never leaves the others waiting forever; and the progress
 * messages that tell it a rank is busy, not dead.
 *
 * This is the one place the library ends the process. A collective that does
 * not complete cannot be returned from: MPI offers no way to cancel it, its
 * buffers stay owned by MPI, and the rank that is blocked in it is inside an
 * MPI call that will not come back. An error return is impossible, and
 * waiting is a hang of every rank of the job (and of its allocation on a
 * cluster). MPI_Abort ends every process of the job, and the launcher's exit
 * status says so; the last completed checkpoint stays intact.
 *
 * The thread calls MPI_Abort although MPI was initialised FUNNELED (only the
 * main thread makes MPI calls): the main thread is stuck, so no other MPI call
 * runs concurrently with intent, and Open MPI's abort goes through the
 * launcher (PMIx) without touching communicator state.
 *
 * MPI_Abort asks the launcher to end the job, and waits for it: Open MPI
 * 4.1's sends its message to mpirun and sleeps until mpirun has shown it. A
 * launcher that does not answer (stopped, deadlocked, its machine gone) would
 * leave this rank waiting forever, so before anything of an abort that can
 * block (the message to stderr, a pipe mpirun no longer reads, included) the
 * process sets itself a deadline: SIGALRM, whose default action ends it,
 * ABORT_GRACE_SECONDS later. The launcher, if it ever looks, then sees a rank
 * die, and ends the job for that.
 *
 * MPI_Init_thread is watched too: it waits for the launcher as well. Until it
 * returns MPI_Abort is not allowed, so a rank whose start is late writes its
 * line and ends itself (_exit(1)); the other ranks, waiting in the same start,
 * do the same, and a launcher that looks again sees its ranks die. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_internal.h"

#define POLL_SECONDS 0.05   /* how often the thread looks: the abort comes within this of the timeout */
#define LISTEN_SECONDS 0.01 /* how often a waiting rank takes the progress messages that arrived */
#define TELL_PARTS 6        /* a busy rank tells the others every timeout / TELL_PARTS at most */
/* MPI_Abort's time to end the job through the launcher: a healthy mpirun ends it in about 1 s */
#define ABORT_GRACE_SECONDS 5

/* The abort's one line: what this rank waited for, and whether another rank's
 * progress had pushed the timeout back (it then counts from the last word).
 * Word heard at the wait's very start is likely a message left from earlier
 * work, taken as soon as the wait listened: it moved the timeout by nothing
 * worth naming. */
static void say_late(const tt_dist *d, const tt_watch *w, double now, double timeout)
{
    /* before MPI has started, MPI_Abort cannot reach the other ranks: this one ends alone */
    const char *ending = w->before_mpi ? "ending this rank (MPI has not started, so it cannot end the others)"
                                       : "aborting the job";
    char msg[384];
    if (d->heard > w->since + (timeout < 10 ? timeout / 10 : 1))
        snprintf(msg, sizeof msg,
                 "rank %d: %s did not complete in %g s since rank %d last reported progress (%.0f s in all): %s\n",
                 d->rank, w->what, timeout, d->heard_from, now - w->since, ending);
    else
        snprintf(msg, sizeof msg, "rank %d: %s did not complete in %g s: %s\n", d->rank, w->what, timeout, ending);
    fputs(msg, stderr); /* one write, so ranks' lines do not interleave */
    fflush(stderr);
}

void tt_abort_deadline(void)
{
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    signal(SIGALRM, SIG_DFL);                  /* its default action: the process ends */
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL); /* and this thread, at least, takes it */
    alarm(ABORT_GRACE_SECONDS);
}

static void *watchdog_main(void *arg)
{
    tt_dist *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        double now = tt_now(), timeout = d->timeout;
        const tt_watch *late = NULL;
        /* a wait is late when neither it nor word from a busy rank is recent:
         * a dead or hung rank sends none, so it is still caught in timeout */
        const double word = d->heard;
        for (const tt_watch *w = d->watched.next; timeout > 0 && w != &d->watched; w = w->next)
            if (now - (w->since > word ? w->since : word) > timeout && (!late || w->since < late->since)) late = w;
        if (late) {
            const int before_mpi = late->before_mpi;
            tt_abort_deadline();
            say_late(d, late, now, timeout);
            pthread_mutex_unlock(&d->mu);
            if (before_mpi) _exit(1); /* MPI_Abort before MPI_Init_thread returns is erroneous */
            tt_mpi_abort(1);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)(POLL_SECONDS * 1e9);
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        int rc = pthread_cond_timedwait(&d->cv, &d->mu, &ts);
        (void)rc; /* ETIMEDOUT or a wake-up from tt_watchdog_stop: either way, look again */
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

tt_err tt_watchdog_start(tt_dist *d)
{
    if (d->thread_running) return 0;
    d->stop = 0;
    int rc = pthread_create(&d->thread, NULL, watchdog_main, d);
    if (rc) return tt_errorf("rank %d: cannot start the communication watchdog thread: %s", d->rank, strerror(rc));
    d->thread_running = 1;
    return 0;
}

void tt_watchdog_stop(tt_dist *d)
{
    if (!d->thread_running) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    d->thread_running = 0;
}

void tt_watch_begin(tt_dist *d, tt_watch *w, const char *what, tt_coll_req *req)
{
    snprintf(w->what, sizeof w->what, "%s", what && what[0] ? what : "a collective");
    w->req = req;
    pthread_mutex_lock(&d->mu);
    w->since = tt_now();
    w->next = &d->watched;
    w->prev = d->watched.prev;
    w->prev->next = w;
    d->watched.prev = w;
    pthread_mutex_unlock(&d->mu);
}

void tt_watch_end(tt_dist *d, tt_watch *w)
{
    if (!w->next) return; /* not on the list */
    pthread_mutex_lock(&d->mu);
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->next = w->prev = NULL;
    pthread_mutex_unlock(&d->mu);
}

/* ---- progress ------------------------------------------------------------------ */

static tt_dist *progress_job; /* the job tt_work_progress reports to */

/* tt_work_progress's hook: tell the others, at most every timeout /
 * TELL_PARTS (a few messages a timeout, however fine the work's steps).
 * Only the thread that calls MPI may; work on another thread says nothing. */
static void on_work_progress(void)
{
    tt_dist *d = progress_job;
    if (!d || !pthread_equal(pthread_self(), d->main_thread)) return;
    const double now = tt_now(), timeout = d->timeout; /* the main thread alone sets it */
    if (timeout <= 0 || (d->told > 0 && now - d->told < timeout / TELL_PARTS)) return;
    d->told = now;
    tt_mpi_tell_progress(d);
}

void tt_progress_start(tt_dist *d)
{
    d->main_thread = pthread_self();
    d->heard = d->told = d->listened = 0;
    progress_job = d;
    tt_set_work_progress_hook(on_work_progress);
}

void tt_progress_listen(tt_dist *d)
{
    const double now = tt_now();
    if (now - d->listened < LISTEN_SECONDS) return;
    d->listened = now;
    int from = -1;
    if (!tt_mpi_hear_progress(d, &from)) return;
    pthread_mutex_lock(&d->mu);
    d->heard = now, d->heard_from = from;
    pthread_mutex_unlock(&d->mu);
}

void tt_progress_stop(void)
{
    tt_set_work_progress_hook(NULL);
    progress_job = NULL;
}

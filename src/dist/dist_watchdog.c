/* dist_watchdog.c — the thread that ends the whole job when a collective or a
 * blocking MPI call does not complete within the timeout, so that a dead or
 * hung rank never leaves the others waiting forever.
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
 * launcher (PMIx) without touching communicator state. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"

#define POLL_SECONDS 0.05 /* how often the thread looks: the abort comes within this of the timeout */

static void *watchdog_main(void *arg)
{
    tt_dist *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        double now = tt_now(), timeout = d->timeout;
        const tt_watch *late = NULL;
        for (const tt_watch *w = d->watched.next; timeout > 0 && w != &d->watched; w = w->next)
            if (now - w->since > timeout && (!late || w->since < late->since)) late = w;
        if (late) {
            char msg[256];
            snprintf(msg, sizeof msg, "rank %d: %s did not complete in %g s: aborting the job\n", d->rank,
                     late->what, timeout);
            pthread_mutex_unlock(&d->mu);
            fputs(msg, stderr); /* one write, so ranks' lines do not interleave */
            fflush(stderr);
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

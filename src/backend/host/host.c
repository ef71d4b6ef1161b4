/* host.c — the queue, the copies and the kernel dispatch shared by the host
 * backends (cpu, ref). The queue is synchronous, or with TITAN_QUEUE=async a
 * worker thread per queue runs its work in order, as a GPU's stream would, so
 * that a wait missing above the backend shows up on the CPU. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/host/host.h"
#include "backend/host/peak.h"

/* ---- the asynchronous mode's shared state ------------------------------------ */
/* One lock and one condition for every asynchronous queue: a test mode, where
 * simple beats fast. Under `lock`: every queue's list, counters and error, and
 * in_flight. `run_lock` makes the workers of several queues take turns, so the
 * kernels (and their thread-indexed OpenMP teams) never run two at a time. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER; /* work enqueued, done, or a queue stopping */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t in_flight;         /* work enqueued on any queue and not yet done */
static _Atomic int async_queues;   /* asynchronous queues alive (the memory's free waits while any is) */

/* ---- counted host memory ---------------------------------------------------- */
static _Atomic size_t mem_in_use;

void *tt_host_mem_alloc(size_t bytes)
{
    void *p = tt_alloc(bytes ? bytes : 1);
    if (p) mem_in_use += malloc_usable_size(p);
    return p;
}

void tt_host_mem_free(void *p)
{
    if (!p) return;
    /* as cudaFree does, freeing waits for the work in flight: a queued kernel
     * may still read or write the buffer */
    if (async_queues) {
        pthread_mutex_lock(&lock);
        while (in_flight) pthread_cond_wait(&changed, &lock);
        pthread_mutex_unlock(&lock);
    }
    mem_in_use -= malloc_usable_size(p);
    tt_free(p);
}

size_t tt_host_mem_in_use(void) { return mem_in_use; }

/* ---- the queue ----------------------------------------------------------------- */

enum { W_KERNEL, W_COPY, W_ZERO, W_WAIT };
typedef struct work {
    struct work *next;
    int kind;
    tt_host_kernel kernel; /* W_KERNEL: kernel(n, p, p + n->n_in) */
    const tt_node *n;
    void **p;
    void *dst;             /* W_COPY: memmove(dst, src, bytes); W_ZERO: memset */
    const void *src;
    size_t bytes;
    void *staging;         /* an upload's copy of the caller's bytes, freed once copied */
    tt_queue *on;          /* W_WAIT: until on has done `seq` pieces of work */
    uint64_t seq;
} work;

/* Synchronous: work runs when it is enqueued, so a queue holds only how to
 * reach the backend's memory, and one static object serves as every event.
 * Asynchronous: the worker takes the list in order; enqueued and done count
 * the work, and an event is the count its queue must reach. */
struct tt_queue {
    void *(*ptr)(tt_mem m);
    int async;
    work *head, *tail;
    uint64_t enqueued, done;
    int failed, stop;
    char err[1024]; /* the first failure's message (tt_errorf's is the worker thread's own) */
    pthread_t worker;
};
struct tt_event {
    tt_queue *q;
    uint64_t seq;
};
static struct tt_event done_event;
static tt_err sync_keep(tt_event *e);

/* Whether TITAN_QUEUE asks for asynchronous queues ("async"; "sync" or unset: not). */
static int want_async(void)
{
    const char *s = getenv("TITAN_QUEUE");
    return s && strcmp(s, "async") == 0;
}

static void work_free(work *w)
{
    free(w->p);
    free(w->staging);
    free(w);
}

static tt_err work_run(const work *w)
{
    switch (w->kind) {
    case W_KERNEL:
        /* the executor's words for a failing node, here where the failure is */
        return w->kernel(w->n, w->p, w->p + w->n->n_in) ? tt_backend_node_error(w->n) : 0;
    case W_COPY: memmove(w->dst, w->src, w->bytes); return 0;
    case W_ZERO: memset(w->dst, 0, w->bytes); return 0;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    tt_queue *q = arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&changed, &lock);
        work *w = q->head;
        if (!w) break; /* stopping, and nothing is left */
        if (w->kind == W_WAIT) {
            while (w->on->done < w->seq) pthread_cond_wait(&changed, &lock);
        } else if (!q->failed) { /* after a failure the queue's work is skipped until finish or sync reports it */
            pthread_mutex_unlock(&lock);
            pthread_mutex_lock(&run_lock);
            const tt_err rc = work_run(w);
            pthread_mutex_unlock(&run_lock);
            pthread_mutex_lock(&lock);
            if (rc && !q->failed) {
                q->failed = 1;
                snprintf(q->err, sizeof q->err, "%s", tt_last_error());
            }
        }
        q->head = w->next;
        if (!q->head) q->tail = NULL;
        q->done++;
        in_flight--;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
        work_free(w);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

tt_queue *tt_host_queue_new(void *(*ptr)(tt_mem m))
{
    tt_queue *q = calloc(1, sizeof *q);
    if (!q) {
        tt_errorf("out of memory");
        return NULL;
    }
    q->ptr = ptr;
    if (want_async()) {
        q->async = 1;
        if (pthread_create(&q->worker, NULL, worker_main, q)) {
            free(q);
            tt_errorf("cannot start an asynchronous queue's worker thread");
            return NULL;
        }
        async_queues++;
    }
    return q;
}

void tt_host_queue_free(tt_queue *q)
{
    if (!q) return;
    if (q->async) { /* the worker runs what is left, then ends */
        pthread_mutex_lock(&lock);
        q->stop = 1;
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
        pthread_join(q->worker, NULL);
        async_queues--;
    }
    free(q);
}

/* Append w to q's work (it owns w from here). */
static tt_err enqueue(tt_queue *q, work *w)
{
    w->next = NULL;
    pthread_mutex_lock(&lock);
    if (q->tail) q->tail->next = w;
    else q->head = w;
    q->tail = w;
    q->enqueued++;
    in_flight++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    return 0;
}

static work *work_new(int kind)
{
    work *w = calloc(1, sizeof *w);
    if (!w) tt_errorf("out of memory for a queue's work");
    else w->kind = kind;
    return w;
}

static tt_err enqueue_copy(tt_queue *q, void *dst, const void *src, size_t bytes, void *staging)
{
    work *w = work_new(W_COPY);
    if (!w) {
        free(staging);
        return -1;
    }
    w->dst = dst, w->src = src, w->bytes = bytes, w->staging = staging;
    return enqueue(q, w);
}

tt_err tt_host_upload(tt_queue *q, tt_mem dst, const void *src, size_t bytes)
{
    if (!bytes) return 0;
    if (!q->async) {
        memcpy(q->ptr(dst), src, bytes);
        return 0;
    }
    /* the caller may reuse src once this returns: the queue copies from its own copy */
    void *staging = malloc(bytes);
    if (!staging) return tt_errorf("out of memory staging an upload of %zu bytes", bytes);
    memcpy(staging, src, bytes);
    return enqueue_copy(q, q->ptr(dst), staging, bytes, staging);
}

tt_err tt_host_download(tt_queue *q, void *dst, tt_mem src, size_t bytes)
{
    if (!bytes) return 0;
    if (!q->async) {
        memcpy(dst, q->ptr(src), bytes);
        return 0;
    }
    return enqueue_copy(q, dst, q->ptr(src), bytes, NULL);
}

tt_err tt_host_copy(tt_queue *q, tt_mem dst, tt_mem src, size_t bytes)
{
    if (!bytes) return 0;
    if (!q->async) {
        memmove(q->ptr(dst), q->ptr(src), bytes);
        return 0;
    }
    return enqueue_copy(q, q->ptr(dst), q->ptr(src), bytes, NULL);
}

tt_err tt_host_zero(tt_queue *q, tt_mem dst, size_t bytes)
{
    if (!bytes) return 0;
    if (!q->async) {
        memset(q->ptr(dst), 0, bytes);
        return 0;
    }
    work *w = work_new(W_ZERO);
    if (!w) return -1;
    w->dst = q->ptr(dst), w->bytes = bytes;
    return enqueue(q, w);
}

tt_event *tt_host_record(tt_queue *q)
{
    if (!q->async) return &done_event;
    tt_event *e = malloc(sizeof *e);
    if (!e) {
        tt_errorf("out of memory for an event");
        return NULL;
    }
    pthread_mutex_lock(&lock);
    e->q = q, e->seq = q->enqueued;
    pthread_mutex_unlock(&lock);
    return e;
}

tt_err tt_host_wait(tt_queue *q, tt_event *e)
{
    if (!e) return tt_errorf("a wait on no event");
    if (e == &done_event) return 0;
    /* an asynchronous queue's event holds a synchronous queue's later work
     * back only if the host waits for it */
    if (!q->async) return sync_keep(e);
    work *w = work_new(W_WAIT);
    if (!w) return -1;
    w->on = e->q, w->seq = e->seq; /* copied: e may be freed once this returns */
    return enqueue(q, w);
}

/* The first failure of q's work, reported once, as this thread's error (the caller holds lock). */
static tt_err take_failure(tt_queue *q)
{
    if (!q->failed) return 0;
    q->failed = 0;
    return tt_errorf("%s", q->err);
}

/* The host waits for e, which stays the caller's. */
static tt_err sync_keep(tt_event *e)
{
    if (e == &done_event) return 0;
    pthread_mutex_lock(&lock);
    while (e->q->done < e->seq) pthread_cond_wait(&changed, &lock);
    const tt_err rc = take_failure(e->q);
    pthread_mutex_unlock(&lock);
    return rc;
}

tt_err tt_host_sync(tt_event *e)
{
    if (!e) return tt_errorf("a sync on no event");
    const tt_err rc = sync_keep(e);
    if (e != &done_event) free(e);
    return rc;
}

tt_err tt_host_finish(tt_queue *q)
{
    if (!q->async) return 0;
    pthread_mutex_lock(&lock);
    while (q->done < q->enqueued) pthread_cond_wait(&changed, &lock);
    const tt_err rc = take_failure(q);
    pthread_mutex_unlock(&lock);
    return rc;
}

tt_err tt_host_call(tt_queue *q, tt_host_kernel kernel, const tt_node *n, const tt_mem *in, const tt_mem *out)
{
    const int total = n->n_in + n->n_out;
    if (q->async) { /* the operands' addresses travel with the work */
        work *w = work_new(W_KERNEL);
        if (!w || !(w->p = malloc(((size_t)total + 1) * sizeof *w->p))) {
            free(w);
            return tt_errorf("out of memory");
        }
        for (int k = 0; k < n->n_in; k++) w->p[k] = q->ptr(in[k]);
        for (int k = 0; k < n->n_out; k++) w->p[n->n_in + k] = q->ptr(out[k]);
        w->kernel = kernel, w->n = n;
        return enqueue(q, w);
    }
    /* most nodes have a handful of operands: no allocation for them */
    void *stack[32], **p = stack;
    if (total > 32 && !(p = malloc((size_t)total * sizeof *p))) return tt_errorf("out of memory");
    for (int k = 0; k < n->n_in; k++) p[k] = q->ptr(in[k]);
    for (int k = 0; k < n->n_out; k++) p[n->n_in + k] = q->ptr(out[k]);
    tt_err rc = kernel(n, p, p + n->n_in);
    if (p != stack) free(p);
    return rc;
}

tt_err tt_host_peak(double measure_seconds, tt_backend_peak *out)
{
    tt_peak pk;
    memset(out, 0, sizeof *out);
    if (measure_seconds > 0   ? tt_peak_measure_and_cache(&pk, measure_seconds)
        : measure_seconds < 0 ? tt_peak_measure(&pk, -measure_seconds)
                              : tt_peak_get(&pk))
        return -1;
    out->gflops[TT_F32] = pk.f32_gflops;
    /* without bf16 dot products (or tiles) bf16 is computed on the fp32 path: its peak */
    out->gflops[TT_BF16] = pk.bf16_gflops > 0 ? pk.bf16_gflops : pk.f32_gflops;
    snprintf(out->device, sizeof out->device, "%.100s (%d threads)", pk.cpu, pk.threads);
    snprintf(out->path, sizeof out->path, "%s", pk.path);
    out->source = measure_seconds != 0 || !pk.cached ? "measured" : "cached";
    return 0;
}

/* host.c — the synchronous queue, the copies and the kernel dispatch shared
 * by the host backends (cpu, ref). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "backend/host/host.h"
#include "backend/host/peak.h"

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
    mem_in_use -= malloc_usable_size(p);
    tt_free(p);
}

size_t tt_host_mem_in_use(void) { return mem_in_use; }

/* Work runs when it is enqueued, so a queue holds only how to reach the
 * backend's memory, and an event has nothing to wait for. One static object
 * serves as every event. */
struct tt_queue {
    void *(*ptr)(tt_mem m);
};
struct tt_event {
    int unused;
};
static struct tt_event done_event;

tt_queue *tt_host_queue_new(void *(*ptr)(tt_mem m))
{
    tt_queue *q = calloc(1, sizeof *q);
    if (!q) tt_errorf("out of memory");
    else q->ptr = ptr;
    return q;
}

tt_err tt_host_upload(tt_queue *q, tt_mem dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(q->ptr(dst), src, bytes);
    return 0;
}
tt_err tt_host_download(tt_queue *q, void *dst, tt_mem src, size_t bytes)
{
    if (bytes) memcpy(dst, q->ptr(src), bytes);
    return 0;
}
tt_err tt_host_copy(tt_queue *q, tt_mem dst, tt_mem src, size_t bytes)
{
    if (bytes) memmove(q->ptr(dst), q->ptr(src), bytes);
    return 0;
}
tt_err tt_host_zero(tt_queue *q, tt_mem dst, size_t bytes)
{
    if (bytes) memset(q->ptr(dst), 0, bytes);
    return 0;
}

void tt_host_queue_free(tt_queue *q) { free(q); }
tt_event *tt_host_record(tt_queue *q)
{
    (void)q;
    return &done_event;
}
tt_err tt_host_wait(tt_queue *q, tt_event *e)
{
    (void)q;
    (void)e;
    return 0;
}
tt_err tt_host_sync(tt_event *e)
{
    (void)e;
    return 0;
}
tt_err tt_host_finish(tt_queue *q)
{
    (void)q;
    return 0;
}

tt_err tt_host_call(tt_queue *q, tt_host_kernel kernel, const tt_node *n, const tt_mem *in, const tt_mem *out)
{
    /* most nodes have a handful of operands: no allocation for them */
    void *stack[32], **p = stack;
    const int total = n->n_in + n->n_out;
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
    if (measure_seconds > 0 ? tt_peak_measure_and_cache(&pk, measure_seconds) : tt_peak_get(&pk)) return -1;
    out->gflops[TT_F32] = pk.f32_gflops;
    out->gflops[TT_BF16] = pk.bf16_gflops;
    snprintf(out->device, sizeof out->device, "%.100s (%d threads)", pk.cpu, pk.threads);
    snprintf(out->path, sizeof out->path, "%s", pk.path);
    out->source = measure_seconds > 0 || !pk.cached ? "measured" : "cached";
    return 0;
}

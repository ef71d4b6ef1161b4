/* host.c — the synchronous queue and the kernel-table dispatch shared by the
 * host backends (cpu, ref). */
#include <stdlib.h>

#include "backend/host/host.h"

/* Work runs when it is enqueued, so a queue has nothing to hold but its
 * existence and an event nothing to wait for. One static object serves as
 * every event. */
struct tt_queue {
    int unused;
};
struct tt_event {
    int unused;
};
static struct tt_event done_event;

tt_queue *tt_host_queue_new(void)
{
    tt_queue *q = calloc(1, sizeof *q);
    if (!q) tt_errorf("out of memory");
    return q;
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

tt_err tt_host_call(tt_host_kernel kernel, void *(*ptr)(tt_mem m), const tt_node *n, const tt_mem *in,
                    const tt_mem *out)
{
    /* most nodes have a handful of operands: no allocation for them */
    void *stack[32], **p = stack;
    const int total = n->n_in + n->n_out;
    if (total > 32 && !(p = malloc((size_t)total * sizeof *p))) return tt_errorf("out of memory");
    for (int k = 0; k < n->n_in; k++) p[k] = ptr(in[k]);
    for (int k = 0; k < n->n_out; k++) p[n->n_in + k] = ptr(out[k]);
    tt_err rc = kernel(n, p, p + n->n_in);
    if (p != stack) free(p);
    return rc;
}

/* host.h — what the backends that run on the host CPU (cpu, ref) share: a
 * queue that runs each piece of work when it is enqueued (so events are
 * complete as soon as they are recorded), and calling a kernel of their
 * tables (indexed by op id) on host pointers. */
#ifndef TT_BACKEND_HOST_H
#define TT_BACKEND_HOST_H
#include "backend/backend.h"

/* A kernel over host buffers: in[k] / out[k] point at n->in[k] / n->out[k]. */
typedef tt_err (*tt_host_kernel)(const tt_node *n, void *const *in, void *const *out);

/* The synchronous queue: work runs inside the call that enqueues it. */
tt_queue *tt_host_queue_new(void);
void tt_host_queue_free(tt_queue *q);
tt_event *tt_host_record(tt_queue *q);
tt_err tt_host_wait(tt_queue *q, tt_event *e);
tt_err tt_host_sync(tt_event *e);
tt_err tt_host_finish(tt_queue *q);

/* Resolve each tt_mem of the node with `ptr` and call the kernel. */
tt_err tt_host_call(tt_host_kernel kernel, void *(*ptr)(tt_mem m), const tt_node *n, const tt_mem *in,
                    const tt_mem *out);

#endif

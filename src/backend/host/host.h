/* host.h — what the backends that run on the host CPU (cpu, ref) share: a
 * queue, the copies, and calling a kernel of their tables (indexed by op id)
 * on host pointers. A backend gives the queue the function that turns its
 * buffer handles into host addresses. */
#ifndef TT_BACKEND_HOST_H
#define TT_BACKEND_HOST_H
#include "backend/backend.h"

/* Host memory for a backend's buffers (64-byte aligned, zeroed), counted:
 * in_use is what the backends' live buffers hold now, in bytes. */
void *tt_host_mem_alloc(size_t bytes);
void tt_host_mem_free(void *p);
size_t tt_host_mem_in_use(void);

/* A kernel over host buffers: in[k] / out[k] point at n->in[k] / n->out[k]. */
typedef tt_err (*tt_host_kernel)(const tt_node *n, void *const *in, void *const *out);

/* The queue; ptr resolves the backend's memory. By default it is synchronous:
 * work runs inside the call that enqueues it, so events are complete when
 * recorded. With TITAN_QUEUE=async in the environment every queue made is
 * asynchronous: a worker thread of its own runs its kernels and copies in
 * order (one queue's worker at a time); record, wait, sync and finish are
 * real; an upload stages its source, so it returns once src may be reused; a
 * download's bytes are there after finish or the sync of a later event; a
 * kernel's error (named as tt_backend_node_error names it) surfaces at the
 * next finish or sync, and the queue's work is skipped until then. Freeing a
 * buffer waits for the work in flight on every queue, as cudaFree does. A
 * queue must outlive the waits of other queues on its events. */
tt_queue *tt_host_queue_new(void *(*ptr)(tt_mem m));
void tt_host_queue_free(tt_queue *q);
tt_err tt_host_upload(tt_queue *q, tt_mem dst, const void *src, size_t bytes);
tt_err tt_host_download(tt_queue *q, void *dst, tt_mem src, size_t bytes);
tt_err tt_host_copy(tt_queue *q, tt_mem dst, tt_mem src, size_t bytes);
tt_err tt_host_zero(tt_queue *q, tt_mem dst, size_t bytes);
tt_event *tt_host_record(tt_queue *q);
tt_err tt_host_wait(tt_queue *q, tt_event *e);
tt_err tt_host_sync(tt_event *e);
tt_err tt_host_finish(tt_queue *q);

/* Resolve each tt_mem of the node with the queue's ptr and call the kernel. */
tt_err tt_host_call(tt_queue *q, tt_host_kernel kernel, const tt_node *n, const tt_mem *in, const tt_mem *out);

/* The host CPU's peak (backend/host/peak.c) in the interface's terms:
 * measure_seconds 0 = cached (measured and cached the first time). */
tt_err tt_host_peak(double measure_seconds, tt_backend_peak *out);

#endif

/* backend.h — what a device backend provides, picked by name the way
 * torch.device("cpu") is: its memory, copies between it and the host, an
 * ordered queue with events, a kernel for each op it runs, and what it
 * knows of its device (which ops and dtypes it runs, its peak FLOP/s, its
 * default compute dtype).
 *
 * A backend buffer (tt_buf) is opaque above the backend: nothing outside
 * src/backend/ dereferences one. The host reads a loss, a gradient norm or a
 * checkpoint's tensors by downloading them, and writes inputs and weights by
 * uploading them. */
#ifndef TT_BACKEND_H
#define TT_BACKEND_H
#include "ops/ops.h"

typedef struct tt_queue tt_queue;
typedef struct tt_event tt_event;

/* The device's peak, for MFU: gflops[dt] is that of the path products
 * computed in dt take (bf16 widened onto fp32 FMAs: the fp32 peak), 0 for a
 * dtype it has no path for. source says where the figure came from ("measured", "cached"). */
typedef struct {
    double gflops[TT_DTYPE_COUNT];
    char device[128];  /* "AMD EPYC 9R14 (2 threads)", ... */
    char path[48];     /* the code path measured: "avx512f+avx512bf16", ... */
    const char *source;
} tt_backend_peak;

typedef struct tt_backend {
    const char *name;

    /* ---- memory ---- */
    /* bytes of device memory (64-byte aligned), NULL + error when there is none */
    tt_buf *(*alloc)(size_t bytes);
    void (*free)(tt_buf *b);
    /* bytes the backend's live buffers hold now (what a run measures its state by) */
    size_t (*bytes_in_use)(void);

    /* ---- the queue: work enqueued on one queue runs in order ---- */
    tt_queue *(*queue_new)(void);
    void (*queue_free)(tt_queue *q);
    /* Work may run later than the call that enqueues it (a device's stream, the
     * host queue's asynchronous mode): a kernel's error then surfaces at the
     * finish or sync that follows it. */
    /* host -> device; returns once src may be reused */
    tt_err (*upload)(tt_queue *q, tt_mem dst, const void *src, size_t bytes);
    /* device -> host; dst holds the bytes once the queue is finished (finish, or an event's sync) */
    tt_err (*download)(tt_queue *q, void *dst, tt_mem src, size_t bytes);
    tt_err (*copy)(tt_queue *q, tt_mem dst, tt_mem src, size_t bytes);
    tt_err (*zero)(tt_queue *q, tt_mem dst, size_t bytes);
    /* run node n with its inputs and outputs at in[k] / out[k] (indexed like n->in / n->out) */
    tt_err (*run)(tt_queue *q, const tt_node *n, const tt_mem *in, const tt_mem *out);
    /* an event that completes when the work enqueued on q so far has */
    tt_event *(*record)(tt_queue *q);
    /* later work on q waits for e (which may come from another queue) */
    tt_err (*wait)(tt_queue *q, tt_event *e);
    /* the host waits for e, then frees it */
    tt_err (*sync)(tt_event *e);
    /* the host waits for all work enqueued on q; the first error of that work, if any */
    tt_err (*finish)(tt_queue *q);

    /* the host address of backend memory, for transports that read host memory (MPI);
     * NULL when the memory is not host memory (a device's: collectives there need NCCL) */
    void *(*host_ptr)(tt_mem m);

    /* ---- what the backend runs and how fast ---- */
    /* whether it has a kernel for op computing in dt (tt_node_dtype of the node) */
    int (*supports)(int op, tt_dtype dt);
    /* the peak: measure_seconds 0 = the cached figure (measured and cached the first time);
     * > 0 = measure now for about that long and cache it; < 0 = measure now for about -measure_seconds
     * and cache nothing (a check of how fast the device runs in these minutes: `bench step --host-check`) */
    tt_err (*peak)(double measure_seconds, tt_backend_peak *out);
    /* the device memory's bandwidth in GB/s, measured now for about `seconds`: with the peak, the roofline
     * (`titan bench peak`, `bench step --profile`) */
    tt_err (*bandwidth)(double seconds, double *gbps);
    /* how far apart two of its threads run: the round trip in ns of a cache line between them, measured now (0
     * with one thread); NULL where it means nothing (`bench peak`, `bench step --host-check`) */
    tt_err (*core_round_trip)(double *ns);
    /* the compute dtype a run uses when the config does not say:
     * bf16 where the device has fast bf16 products */
    tt_dtype (*default_dtype)(void);
} tt_backend;

/* The backend of that name ("cpu", "ref"), from the table in backend.c; NULL
 * and an error that names what this build has for any other name (one the
 * project knows but this binary does not build, such as "cuda", says so). */
const tt_backend *tt_backend_get(const char *name);
/* The name of the i-th backend built into this binary (i from 0), NULL past
 * the last: how the harness and the errors list them. */
const char *tt_backend_name(int i);

/* ---- conveniences over the interface ---- */
static inline tt_mem tt_mem_at(tt_mem m, size_t off) { return (tt_mem){m.buf, m.off + off}; }
/* upload / download and wait */
tt_err tt_backend_read(const tt_backend *be, tt_queue *q, void *dst, tt_mem src, size_t bytes);
tt_err tt_backend_write(const tt_backend *be, tt_queue *q, tt_mem dst, const void *src, size_t bytes);
/* Prefix the error that node n's kernel set with the node's scope, op and input
 * shapes; returns -1. The executor names a failing node so, and a queue whose
 * kernels run later (on a worker, on a device) names it the same way when it
 * reports the failure at finish or sync. */
tt_err tt_backend_node_error(const tt_node *n);

#endif

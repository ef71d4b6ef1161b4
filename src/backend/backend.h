/* backend.h — what a device backend provides: a kernel for every op id,
 * picked by name the way torch.device("cpu") is. */
#ifndef TT_BACKEND_H
#define TT_BACKEND_H
#include "ops/ops.h"

typedef struct tt_backend {
    const char *name;
    /* Run node n on buffers in[] / out[] (indexed like n->in / n->out).
     * reference = 1 runs the naive reference kernel (debug mode, tests). */
    tt_err (*run)(const tt_node *n, void *const *in, void *const *out, int reference);
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
} tt_backend;

/* "cpu"; anything else is an error that names what this build has. */
const tt_backend *tt_backend_get(const char *name);
extern const tt_backend tt_backend_cpu;
#endif

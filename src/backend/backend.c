/* backend.c — looking a backend up by name, and the conveniences over the
 * interface. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"

extern const tt_backend tt_backend_cpu, tt_backend_ref;
const char *const tt_backend_names[] = {"cpu", "ref", NULL};

const tt_backend *tt_backend_get(const char *name)
{
    if (strcmp(name, "cpu") == 0) return &tt_backend_cpu;
    if (strcmp(name, "ref") == 0) return &tt_backend_ref;
    if (strcmp(name, "cuda") == 0) {
        tt_errorf("backend 'cuda' is not built into this binary (available: cpu, ref)");
        return NULL;
    }
    tt_errorf("unknown backend '%s' (available: cpu, ref)", name);
    return NULL;
}

tt_err tt_backend_read(const tt_backend *be, tt_queue *q, void *dst, tt_mem src, size_t bytes)
{
    if (be->download(q, dst, src, bytes)) return -1;
    return be->finish(q);
}

tt_err tt_backend_write(const tt_backend *be, tt_queue *q, tt_mem dst, const void *src, size_t bytes)
{
    if (be->upload(q, dst, src, bytes)) return -1;
    return be->finish(q);
}

tt_err tt_backend_node_error(const tt_node *n)
{
    char shapes[512] = "";
    size_t k = 0;
    for (int i = 0; i < n->n_in && k < sizeof shapes - 64; i++) {
        char d[96];
        k += (size_t)snprintf(shapes + k, sizeof shapes - k, "%s%s", i ? ", " : "", tt_value_desc(n->in[i], d, sizeof d));
    }
    return tt_error_prefix("%s%s%s (inputs %s): ", n->scope, n->scope[0] ? ": " : "", tt_op_name(n->op), shapes);
}

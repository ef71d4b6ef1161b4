/* backend.c — looking a backend up by name, and the conveniences over the
 * interface. */
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

/* backend.c — the table of backends, looking one up by name, and the
 * conveniences over the interface. */
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/registry.h"

/* Every backend this project knows, in the order the names list them. One
 * without a constructor is known but not compiled into this binary: asking
 * for it says so instead of calling the name unknown. A new backend is one
 * row here (under its build option) and its constructor in registry.h. */
static const struct {
    const char *name;
    const tt_backend *(*make)(void); /* NULL: not built into this binary */
} registry[] = {
    {"cpu", tt_backend_cpu_make},
    {"ref", tt_backend_ref_make},
    {"cuda", NULL},
};
#define N_REGISTRY ((int)(sizeof registry / sizeof registry[0]))

const char *tt_backend_name(int i)
{
    for (int k = 0; k < N_REGISTRY; k++)
        if (registry[k].make && i-- == 0) return registry[k].name;
    return NULL;
}

/* "cpu, ref": the backends built into this binary, for the errors */
static const char *available(void)
{
    static char buf[256];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; tt_backend_name(i) && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", tt_backend_name(i));
    return buf;
}

const tt_backend *tt_backend_get(const char *name)
{
    for (int k = 0; k < N_REGISTRY; k++) {
        if (strcmp(name, registry[k].name) != 0) continue;
        if (registry[k].make) return registry[k].make();
        tt_errorf("backend '%s' is not built into this binary (available: %s)", name, available());
        return NULL;
    }
    tt_errorf("unknown backend '%s' (available: %s)", name, available());
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

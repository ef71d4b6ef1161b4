/* backend.c — looking a backend up by name. */
#include <string.h>

#include "backend/backend.h"

const tt_backend *tt_backend_get(const char *name)
{
    if (strcmp(name, "cpu") == 0) return &tt_backend_cpu;
    if (strcmp(name, "cuda") == 0) {
        tt_errorf("backend 'cuda' is not built into this binary (available: cpu)");
        return NULL;
    }
    tt_errorf("unknown backend '%s' (available: cpu)", name);
    return NULL;
}

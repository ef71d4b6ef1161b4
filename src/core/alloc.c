/* alloc.c — aligned, zeroed allocation and overflow-checked size products. */
#include <stdlib.h>
#include <string.h>

#include "core.h"

void *tt_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) {
        tt_errorf("allocation of %zu bytes overflows", bytes);
        return NULL;
    }
    if (n == 0) n = 64;
    void *p = aligned_alloc(64, n);
    if (!p) {
        tt_errorf("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void tt_free(void *p) { free(p); }

char *tt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) {
        tt_errorf("out of memory");
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

int tt_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

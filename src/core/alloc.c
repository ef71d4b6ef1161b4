/* alloc.c — aligned, zeroed allocation and overflow-checked size products. */
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "core.h"

#define TT_HUGE_PAGE ((size_t)2 << 20)
#define TT_HUGE_MIN ((size_t)4 << 20) /* from here the rounding up to whole huge pages adds at most half */

void *tt_alloc(size_t bytes)
{
    size_t n = (bytes + 63) & ~(size_t)63;
    if (n < bytes) {
        tt_errorf("allocation of %zu bytes overflows", bytes);
        return NULL;
    }
    if (n == 0) n = 64;
    size_t align = 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Big buffers (weights, gradients, AdamW moments, the step's arena, the head's logits) on 2 MiB pages
     * where the kernel allows them (transparent huge pages in "madvise" mode, Debian's default): one TLB
     * entry for 512 small pages, so strided GEMM panels and long streams walk the page tables far less */
    if (n >= TT_HUGE_MIN) {
        const size_t rounded = (n + TT_HUGE_PAGE - 1) & ~(TT_HUGE_PAGE - 1);
        if (rounded >= n) n = rounded, align = TT_HUGE_PAGE;
    }
#endif
    void *p = aligned_alloc(align, n);
    if (!p) {
        tt_errorf("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == TT_HUGE_PAGE) (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: 4 KiB pages where refused */
#endif
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

/* bf16_dot.c — vdpbf16ps or widened fp32 FMAs for bf16 products (bf16_dot.h). */
#include "backend/host/bf16_dot.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

int tt_bf16_dot_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}

static int vendor_is_intel(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return 0;
    char v[13];
    memcpy(v, &b, 4), memcpy(v + 4, &d, 4), memcpy(v + 8, &c, 4);
    v[12] = '\0';
    return strcmp(v, "GenuineIntel") == 0;
}
#else
int tt_bf16_dot_supported(void) { return 0; }
static int vendor_is_intel(void) { return 0; }
#endif

/* 0 not decided yet, 1 dot products, -1 widened FMAs */
static int g_dot;

static int dot_probe(void)
{
    if (!tt_bf16_dot_supported()) return -1;
    const char *env = getenv("TITAN_BF16_DOT");
    if (env && strcmp(env, "1") == 0) return 1;
    if (env && strcmp(env, "0") == 0) return -1;
    if (env && *env) tt_warn("TITAN_BF16_DOT=%s is not 0 or 1: ignored", env);
    return vendor_is_intel() ? -1 : 1;
}

int tt_bf16_dot_preferred(void)
{
    int s = __atomic_load_n(&g_dot, __ATOMIC_ACQUIRE);
    if (s == 0) { /* two threads may both decide: the same answer */
        s = dot_probe();
        __atomic_store_n(&g_dot, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* amx.c — is AMX usable here, and the tile configuration (amx.h). */
#include "backend/host/amx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* 0 not asked yet, 1 usable, -1 not usable */
static int g_amx;

static int amx_probe(void)
{
    const char *env = getenv("TITAN_AMX");
    if (env && strcmp(env, "0") == 0) return -1;
    /* cpuid leaf 7: EDX bit 24 AMX-TILE, bit 22 AMX-BF16 (read directly: clang 14's
     * __builtin_cpu_supports has no names for them) */
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) return -1;
    /* the kernel refuses when it lacks AMX support (before Linux 5.16), or
     * when the OS never enabled the tile state in XCR0 */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
}

int tt_amx_usable(void)
{
    int s = __atomic_load_n(&g_amx, __ATOMIC_ACQUIRE);
    if (s == 0) { /* two threads may both probe: the same answer, and asking twice is harmless */
        s = amx_probe();
        __atomic_store_n(&g_amx, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* ldtilecfg's 64-byte operand: palette 1, then per tile its bytes a row and its rows */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((packed, aligned(64))) amx_tilecfg;

__attribute__((target("amx-tile"))) void tt_amx_tiles_16x64(void)
{
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    /* not _tile_loadconfig: GCC 12's names an 8-byte operand, so the stores to
     * the rest of cfg may be dropped as dead; this operand is all 64 bytes */
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

__attribute__((target("amx-tile"))) void tt_amx_release(void) { _tile_release(); }

#else /* no AMX off x86-64 Linux */
int tt_amx_usable(void) { return 0; }
void tt_amx_tiles_16x64(void) {}
void tt_amx_release(void) {}
#endif

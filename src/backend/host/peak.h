/* peak.h — the host CPU's measured peak FLOP/s (fp32 FMA, bf16 dot products) on
 * all threads, for MFU; measured once per machine and cached on disk. */
#ifndef TT_PEAK_H
#define TT_PEAK_H

#include "core/core.h"

typedef struct {
    double f32_gflops;  /* fp32 fused multiply-add, 2 FLOPs each */
    double bf16_gflops; /* bf16 pair dot products into fp32, 2 FLOPs a pair; 0 = unsupported */
    char path[32];      /* code path that ran: "avx512f+avx512bf16", "avx2+fma", "scalar", ... */
    char cpu[128];      /* model name from /proc/cpuinfo */
    int threads;        /* OpenMP threads used (tt_num_threads()) */
    int cached;         /* 1 if this came from the cache file */
} tt_peak;

/* Measure now: about `seconds` in all, half fp32 and half bf16, on
 * tt_num_threads() threads. The kernel is chosen at run time from what the
 * CPU supports, so one binary runs on any x86-64 (and elsewhere, scalar). */
tt_err tt_peak_measure(tt_peak *out, double seconds);
/* The cached peak when its cpu model and thread count match this machine,
 * else measure (about 1 s) and cache it. A cache that cannot be written is
 * only a warning. */
tt_err tt_peak_get(tt_peak *out);

/* The cache: $XDG_CACHE_HOME/titan/peak.json, else ~/.cache/titan/peak.json. */
tt_err tt_peak_cache_path(char *buf, size_t cap);
/* 1 and *out filled when the cache matches this machine; 0 when it is absent,
 * unreadable or for another cpu/thread count. */
int tt_peak_load_cached(tt_peak *out);
tt_err tt_peak_save(const tt_peak *p); /* atomic write */

#endif

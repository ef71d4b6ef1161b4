/* peak.h — the host CPU's measured peak FLOP/s (fp32 FMA, bf16 dot products) on
 * all threads, for MFU: the best of several measurements, checked against what
 * the clock and the cores allow, measured once per machine and cached on disk. */
#ifndef TT_PEAK_H
#define TT_PEAK_H

#include "core/core.h"

/* What a code path can plausibly do on this machine, in GFLOP/s: cores x clock
 * x the path's FLOPs per cycle and core, at the low and the high end of the
 * CPUs that run it (an AVX-512 core does 32 fp32 FLOPs a cycle with one FMA
 * unit or 256-bit halves, 64 with two 512-bit units; bf16 pairs double that;
 * AVX2 16-32; plain C 1-16). The low end also allows the clock to sit at half
 * the one read (wide vectors lower it; /proc/cpuinfo may show a governor's
 * current clock); the high end allows turbo: 15% above cpufreq's maximum, or
 * twice /proc/cpuinfo's figure, which in a VM is often the base clock. */
typedef struct {
    double mhz;         /* the clock read; 0 = unknown, and then nothing is checked */
    int mhz_is_max;     /* 1: cpufreq's cpuinfo_max_freq; 0: the highest "cpu MHz" in /proc/cpuinfo */
    int cores;          /* cores the threads spread over: min(threads, physical cores); SMT siblings share units */
    double f32_lo, f32_hi, bf16_lo, bf16_hi; /* 0 where unknown (no clock; bf16 on a path without it) */
} tt_peak_bounds;

typedef enum {
    TT_PEAK_UNCHECKED = 0, /* the clock is unknown */
    TT_PEAK_PLAUSIBLE,
    TT_PEAK_LOW,           /* below the range: the machine was busy; retried, and never cached */
    TT_PEAK_HIGH,          /* above it: the clock read is probably below the real one; kept, and said */
} tt_peak_verdict;

typedef struct {
    double f32_gflops;  /* fp32 fused multiply-add, 2 FLOPs each */
    double bf16_gflops; /* bf16 pair dot products into fp32, 2 FLOPs a pair; 0 = unsupported */
    char path[32];      /* code path that ran: "avx512f+avx512bf16", "avx2+fma", "scalar", ... */
    char cpu[128];      /* model name from /proc/cpuinfo */
    char cpu_id[96];    /* vendor, family, model, stepping: a VM moved to another host generation keeps
                           its model name ("AMD EPYC") but not these */
    int threads;        /* OpenMP threads used (tt_num_threads()) */
    int cached;         /* 1 if this came from the cache file */
    int rounds;         /* measurement rounds taken (the figures are the best of them) */
    tt_peak_bounds bounds;
    tt_peak_verdict verdict;
    char note[256];     /* what the check found, when it is not plausible or unchecked ("" otherwise) */
} tt_peak;

/* Measure now, in rounds of about seconds / 2 each (half fp32, half bf16), on
 * tt_num_threads() threads, and keep each dtype's best round. It stops after
 * two rounds when their best figures agree within 10% and lie within the
 * plausible range, else measures again, up to 5 rounds: a burst of other work
 * on a shared machine slows a round, never speeds one up. A result still below
 * the range, or above it, is warned about. The kernel is chosen at run time
 * from what the CPU supports, so one binary runs on any x86-64 (and elsewhere,
 * scalar). */
tt_err tt_peak_measure(tt_peak *out, double seconds);
/* The cached peak when it belongs to this machine (cpu model and id, thread
 * count) and is not below the plausible range, else measure (about 1 s) and
 * cache it unless it came out below the range. A cache that cannot be written
 * is only a warning. */
tt_err tt_peak_get(tt_peak *out);
/* Measure now (tt_peak_measure) and cache the result unless it came out below
 * the plausible range (then it serves the caller only, and the next run
 * measures again): `titan bench peak`, and a run whose steps did more than the
 * cached peak. */
tt_err tt_peak_measure_and_cache(tt_peak *out, double seconds);

/* The range for a code path on cores cores at mhz (tt_peak_bounds). */
void tt_peak_bounds_of(const char *path, int cores, double mhz, int mhz_is_max, tt_peak_bounds *b);
/* The same for this machine: its clock (cpufreq's maximum, else /proc/cpuinfo)
 * and physical cores, for `threads` threads. */
void tt_peak_bounds_here(const char *path, int threads, tt_peak_bounds *b);
/* Judge p's figures against b: sets p->bounds, p->verdict and p->note. */
void tt_peak_judge(tt_peak *p, const tt_peak_bounds *b);

/* The cache: $XDG_CACHE_HOME/titan/peak.json, else ~/.cache/titan/peak.json. */
tt_err tt_peak_cache_path(char *buf, size_t cap);
/* 1 and *out filled when the cache matches this machine; 0 when it is absent,
 * unreadable, for another cpu/thread count, or below the plausible range
 * (said in a warning: the caller measures again). */
int tt_peak_load_cached(tt_peak *out);
tt_err tt_peak_save(const tt_peak *p); /* atomic write */

#endif

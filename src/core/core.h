/* core.h — errors, allocation, dtypes, deterministic RNG and timers: the layer
 * every other part of the library stands on. Private to the library. */
#ifndef TT_CORE_H
#define TT_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "titan/titan.h"

/* ---- errors -------------------------------------------------------------
 * Library functions return tt_err (0 = ok, -1 = error) or NULL, after calling
 * tt_errorf() with a message that says what was wrong and where. The message
 * lives in a thread-local buffer that tt_last_error() reads. The library never
 * exits on bad input. */
#define TT_OK 0
int tt_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prefix the current message with more context ("file.toml: " + msg). */
int tt_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- logging ------------------------------------------------------------
 * tt_log writes a line to stdout, on rank 0 only; tt_warn writes "warning:
 * ..." to stderr on every rank, prefixed "rank N: " in a job of several
 * processes. The dist layer sets the rank once, when the job starts (before
 * that, every process logs as rank 0 of 1). */
void tt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tt_log_set_rank(int rank, int world);

/* ---- allocation: 64-byte aligned, zeroed; NULL + error on failure ------- */
void *tt_alloc(size_t bytes);
void tt_free(void *p);
char *tt_strdup(const char *s);
/* a*b (and a*b*c) with overflow checks: returns 0 and sets *out, or -1 */
int tt_mul_size(size_t a, size_t b, size_t *out);

/* ---- dtypes ------------------------------------------------------------- */
typedef enum { TT_F32 = 0, TT_BF16, TT_F16, TT_I32, TT_I64, TT_F64, TT_DTYPE_COUNT } tt_dtype;
size_t tt_dtype_size(tt_dtype t);
const char *tt_dtype_name(tt_dtype t);           /* "f32", "bf16", ... */
int tt_dtype_from_name(const char *s, tt_dtype *out);
float tt_bf16_to_f32(uint16_t h);
uint16_t tt_f32_to_bf16(float f);                 /* round to nearest even */
float tt_f16_to_f32(uint16_t h);

/* ---- deterministic, counter-based RNG ------------------------------------
 * Every draw is a pure function of (seed, counter), so a stream is the same on
 * every backend and rank count, and saving {seed, counter} saves the state. */
typedef struct { uint64_t seed, counter; } tt_rng;
/* splitmix64's finaliser */
static inline uint64_t tt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* The draw at `counter` of the stream `seed`: the finaliser applied twice over the pair, cheap, well mixed and
 * stateless, which is what makes the stream reproducible anywhere. Inline so that a kernel drawing once an element
 * (dropout's mask) hoists the seed's half out of its loop. */
static inline uint64_t tt_hash64(uint64_t seed, uint64_t counter)
{
    return tt_mix64(tt_mix64(seed + 0x9e3779b97f4a7c15ull) ^ (counter * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
}
uint64_t tt_rng_u64(tt_rng *r);
double tt_rng_uniform(tt_rng *r);                 /* [0, 1) */
double tt_rng_normal(tt_rng *r);                  /* N(0, 1), Box-Muller */
uint64_t tt_rng_below(tt_rng *r, uint64_t n);     /* uniform in [0, n) */

/* ---- files: a read-only map of a whole file (base NULL for an empty file) */
tt_err tt_map_file(const char *path, void **base, size_t *len);
void tt_unmap_file(void *base, size_t len);

/* ---- time and memory ---------------------------------------------------- */
double tt_now(void);                              /* seconds, monotonic */
/* Long work one rank does while the others of a job may wait for it (writing
 * a file, deleting a folder, generating a sample) calls tt_work_progress as
 * it advances: after each chunk written, file removed, token made. The job's
 * layer (src/dist/) sets the hook and tells the other ranks, whose watchdog
 * then bounds their wait by the time since this rank's last progress rather
 * than by a fixed time. The progress must come from the work itself: a timer
 * calling it would hide a hang. Until a hook is set, a no-op. */
void tt_work_progress(void);
void tt_set_work_progress_hook(void (*hook)(void));
size_t tt_peak_rss_bytes(void);
int tt_num_threads(void);
/* The cores this process may run on (its CPU affinity, else the online
 * ones); *bound (may be NULL): whether that is fewer than the machine has (a
 * launcher bound the process). And the threads the kernels use from now on
 * (at least 1). */
int tt_num_cores(int *bound);
void tt_set_num_threads(int n);
/* The wait settings the OpenMP runtime was started with, as text in buf:
 * OMP_WAIT_POLICY=... and GOMP_SPINCOUNT=... from the environment the
 * process was executed with, "the runtime's default" or "unknown". */
const char *tt_openmp_wait_desc(char *buf, size_t size);
/* Bytes a new allocation can have now: /proc/meminfo's MemAvailable (else
 * sysconf's free pages), lowered to a cgroup's memory limit less its use;
 * 0 when nothing is known (mem_check.c). */
size_t tt_mem_available(void);
/* Before allocating `bytes` for something big: 0 if they fit what is
 * available (or nothing is known), else -1 after an error "<what> needs N
 * bytes (x GiB) but M bytes (y GiB) of memory are available"; what is a
 * printf format naming the config keys that asked for it. */
int tt_mem_check(size_t bytes, const char *what, ...) __attribute__((format(printf, 2, 3)));

#endif

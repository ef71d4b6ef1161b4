/* convert.c — whole-row moves between fp32 and the activation dtype (bf16
 * or fp32), vectorised for the CPU at hand (simd.h), and the per-thread
 * scratch buffers of the kernels. */
#include <pthread.h>
#include <stdlib.h>

#include "backend/cpu/simd.h"

TT_CLONES static void bf16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = tt_bf16_float(src[i]);
}

TT_CLONES static void f32_to_bf16(uint16_t *restrict dst, const float *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = tt_bf16_bits(src[i]);
}

void tt_cpu_to_f32(float *dst, const void *src, tt_dtype dt, size_t n)
{
    if (dt == TT_BF16) bf16_to_f32(dst, src, n);
    else if (dst != src) memmove(dst, src, n * sizeof(float));
}

void tt_cpu_from_f32(void *dst, tt_dtype dt, const float *src, size_t n)
{
    if (dt == TT_BF16) f32_to_bf16(dst, src, n);
    else if (dst != src) memmove(dst, src, n * sizeof(float));
}

/* A thread's scratch, freed when the thread ends (an asynchronous queue's
 * worker and its OpenMP team end with the queue); the main thread's lives to
 * the end of the process. */
typedef struct {
    void *buf[TT_SCRATCH_SLOTS];
    size_t cap[TT_SCRATCH_SLOTS];
} scratch_set;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_release(void *p)
{
    scratch_set *s = p;
    for (int i = 0; i < TT_SCRATCH_SLOTS; i++) tt_free(s->buf[i]);
    free(s);
}
static void scratch_key_make(void) { pthread_key_create(&scratch_key, scratch_release); }

void *tt_cpu_scratch(int slot, size_t bytes)
{
    static _Thread_local scratch_set *mine;
    if (slot < 0 || slot >= TT_SCRATCH_SLOTS) {
        tt_errorf("scratch slot %d does not exist", slot);
        return NULL;
    }
    if (!mine) {
        pthread_once(&scratch_once, scratch_key_make);
        if (!(mine = calloc(1, sizeof *mine))) {
            tt_errorf("out of memory for kernel scratch");
            return NULL;
        }
        pthread_setspecific(scratch_key, mine);
    }
    void **buf = mine->buf;
    size_t *cap = mine->cap;
    if (bytes > cap[slot] || !buf[slot]) {
        tt_free(buf[slot]);
        buf[slot] = NULL;
        cap[slot] = 0;
        if (!(buf[slot] = tt_alloc(bytes ? bytes : 64))) {
            tt_errorf("out of memory for %zu bytes of kernel scratch", bytes);
            return NULL;
        }
        cap[slot] = bytes;
    }
    return buf[slot];
}

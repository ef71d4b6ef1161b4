/* simd.h — how the CPU kernels get vector code in a binary that runs on any
 * x86-64: a loop is written once in plain C and TT_CLONES compiles it three
 * times (AVX-512, AVX2, baseline SSE2); the loader picks the best the CPU
 * runs (GNU ifunc). Also the bf16 <-> fp32 element moves the kernels use,
 * written so that loops over them vectorise, and a dtype-generic load and
 * store for kernels that are instantiated once per activation dtype.
 *
 * Put TT_CLONES on a function that holds the hot loop, never on one that
 * opens an OpenMP parallel region: the region's body is outlined before the
 * clones are made and would stay baseline code. */
#ifndef TT_CPU_SIMD_H
#define TT_CPU_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/vmath.h"
#include "core/core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TT_NO_CLONES)
#define TT_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define TT_CLONES
#endif

#define TT_INLINE static inline __attribute__((always_inline))

/* Whether this CPU runs AVX-512 F, BW and VL code: the question
 * swiglu_avx512.c's and cross_entropy_avx512.c's callers ask */
static inline int tt_cpu_avx512(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

/* fp32 -> bf16 bits, round to nearest even, NaN kept quiet: tt_f32_to_bf16 */
TT_INLINE uint16_t tt_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

TT_INLINE float tt_bf16_float(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of an activation buffer of dtype bf16 (bf != 0) or fp32. Kernels
 * pass a constant bf, so each instantiation has no branch in its loops. */
TT_INLINE float tt_ld(const void *p, size_t i, int bf)
{
    return bf ? tt_bf16_float(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
TT_INLINE void tt_st(void *p, size_t i, float v, int bf)
{
    if (bf) ((uint16_t *)p)[i] = tt_bf16_bits(v);
    else ((float *)p)[i] = v;
}

/* Asks for the bytes [p, p + n) to be read soon, a cache line at a time: a
 * row the hardware prefetchers will not see coming (a strided view's next
 * row, a row gathered by index). p + n stays inside p's buffer. */
TT_INLINE void tt_prefetch(const void *p, size_t n)
{
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const char *)p + o);
}

/* Per-thread scratch memory, kept and grown on demand (never shrunk), so a
 * kernel allocates nothing once it has seen its shapes. Each slot is an
 * independent buffer, so a kernel may call another that has its own.
 * Returns NULL (with the error set) when out of memory. */
enum { TT_SCRATCH_GEMM, TT_SCRATCH_CE, TT_SCRATCH_ATTN, TT_SCRATCH_ATTN_WS, TT_SCRATCH_ATTN_ROPE, TT_SCRATCH_REF,
       TT_SCRATCH_ATTN_PAD, TT_SCRATCH_SLOTS };
void *tt_cpu_scratch(int slot, size_t bytes);

/* Whole rows: dst (n) = src (n) as fp32, or the other way. Vectorised. */
void tt_cpu_to_f32(float *dst, const void *src, tt_dtype dt, size_t n);
void tt_cpu_from_f32(void *dst, tt_dtype dt, const float *src, size_t n);

#endif

/* gemm_choice.c — what each GEMM call takes, decided at run time: the code
 * path (from cpuid, or TITAN_GEMM_ISA), the AVX-512 fp32 register tile, how
 * the threads share a product, and the cache blocks' scale from the L2. The
 * loop nest that uses them is gemm.c's. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_choice.h"
#include "backend/host/bf16_dot.h"

/* ---- which code path ------------------------------------------------------ */

int tt_gemm_isa_supported(tt_gemm_isa isa)
{
    switch (isa) {
    case TT_GEMM_ISA_AUTO:
    case TT_GEMM_ISA_SCALAR: return 1;
#ifdef TT_GEMM_X86
    case TT_GEMM_ISA_AMX: return tt_gemm_impl_amx_bf16() != NULL;
    case TT_GEMM_ISA_AVX512BF16:
        return tt_gemm_impl_avx512_bf16() != NULL && tt_bf16_dot_supported() &&
               tt_gemm_isa_supported(TT_GEMM_ISA_AVX512);
    case TT_GEMM_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TT_GEMM_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
#endif
    default: return 0;
    }
}

static const char *const isa_names[] = {"auto", "scalar", "avx2", "avx512", "avx512bf16", "amx"};

/* The path every call takes: the best the CPU runs, or the one
 * TITAN_GEMM_ISA names (read once), or the one set by tt_gemm_set_isa.
 * 0 = not decided yet. Atomic because the first GEMMs may come from several
 * threads at once. */
static int g_isa;

/* The preferred path at or below `top` that the CPU runs: AVX512BF16 is
 * skipped where FMAs outrun vdpbf16ps (tt_bf16_dot_preferred). */
static tt_gemm_isa preferred_at_most(int top)
{
    for (int i = top; i > TT_GEMM_ISA_SCALAR; i--) {
        if (i == TT_GEMM_ISA_AVX512BF16 && !tt_bf16_dot_preferred()) continue;
        if (tt_gemm_isa_supported((tt_gemm_isa)i)) return (tt_gemm_isa)i;
    }
    return TT_GEMM_ISA_SCALAR;
}

static tt_gemm_isa best_isa(void)
{
    const char *env = getenv("TITAN_GEMM_ISA");
    if (!env || !*env) return preferred_at_most(TT_GEMM_ISA_AMX);
    int want = 0;
    for (int i = TT_GEMM_ISA_SCALAR; i <= TT_GEMM_ISA_AMX; i++)
        if (strcmp(env, isa_names[i]) == 0) want = i;
    if (!want) {
        tt_warn("TITAN_GEMM_ISA=%s is not one of amx, avx512bf16, avx512, avx2, scalar: ignored", env);
        return preferred_at_most(TT_GEMM_ISA_AMX);
    }
    /* the named path where the CPU has it, else the preferred one below it */
    return tt_gemm_isa_supported((tt_gemm_isa)want) ? (tt_gemm_isa)want : preferred_at_most(want - 1);
}

static tt_gemm_isa current_isa(void)
{
    int isa = __atomic_load_n(&g_isa, __ATOMIC_ACQUIRE);
    if (isa == 0) {
        isa = (int)best_isa();
        __atomic_store_n(&g_isa, isa, __ATOMIC_RELEASE);
    }
    return (tt_gemm_isa)isa;
}

tt_err tt_gemm_set_isa(tt_gemm_isa isa)
{
    if (isa == TT_GEMM_ISA_AUTO) {
        __atomic_store_n(&g_isa, (int)best_isa(), __ATOMIC_RELEASE);
        return TT_OK;
    }
    if (isa < TT_GEMM_ISA_SCALAR || isa > TT_GEMM_ISA_AMX)
        return tt_errorf("tt_gemm_set_isa: unknown code path %d", (int)isa);
    if (!tt_gemm_isa_supported(isa))
        return tt_errorf("tt_gemm_set_isa: this CPU cannot run the %s path", isa_names[isa]);
    __atomic_store_n(&g_isa, (int)isa, __ATOMIC_RELEASE);
    return TT_OK;
}

/* ---- modes chosen by name ------------------------------------------------- */

/* A mode chosen by name, as the fp32 tile and the split between threads
 * are: names[0] is "auto"; the environment variable `var` names one (read
 * on first use), or the setter does. */
typedef struct {
    const char *var, *what, *choices;
    const char *const *names;
    int n;
    int value; /* the index in names; -1 = not decided yet */
} gemm_mode;

static int mode_index(const gemm_mode *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(name, m->names[i]) == 0) return i;
    return -1;
}

/* the mode m->var names; 0 (auto) when it is unset or names none, with a warning */
static int mode_from_env(const gemm_mode *m)
{
    const char *env = getenv(m->var);
    if (env && *env) {
        const int i = mode_index(m, env);
        if (i >= 0) return i;
        tt_warn("%s=%s is not one of %s: ignored", m->var, env, m->choices);
    }
    return 0;
}

static int mode_get(gemm_mode *m)
{
    int i = __atomic_load_n(&m->value, __ATOMIC_ACQUIRE);
    if (i < 0) {
        i = mode_from_env(m);
        __atomic_store_n(&m->value, i, __ATOMIC_RELEASE);
    }
    return i;
}

/* the mode `name` names (NULL: the variable's, or auto), or an error naming the setter */
static tt_err mode_set(gemm_mode *m, const char *name, const char *setter)
{
    const int i = name ? mode_index(m, name) : mode_from_env(m);
    if (i < 0) return tt_errorf("%s: unknown %s %s (%s)", setter, m->what, name, m->choices);
    __atomic_store_n(&m->value, i, __ATOMIC_RELEASE);
    return TT_OK;
}

/* ---- the AVX-512 fp32 tile ------------------------------------------------- */

/* Three register tiles feed the fp32 FMAs the same 24 accumulators: 12x32
 * (tuned on Zen 4), 8x48 and 6x64, which load 14, 11 and 10 values a k step
 * for 24 FMAs. Measured on an Intel Xeon (bench_gemm_blocks), the wider
 * tiles are a few per cent ahead where N is a multiple of their width and
 * 9-16% behind where it is not (a ragged panel wastes up to half its
 * columns), so "auto" takes the widest that divides N there on Intel;
 * elsewhere 12x32 stays. */
static const char *const tile_names[] = {"auto", "12x32", "8x48", "6x64"};
static gemm_mode g_tile = {"TITAN_GEMM_TILE", "tile", "auto, 12x32, 8x48, 6x64", tile_names, 4, -1};

tt_err tt_gemm_set_tile(const char *name) { return mode_set(&g_tile, name, "tt_gemm_set_tile"); }

static int cpu_is_intel(void)
{
#ifdef TT_GEMM_X86
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

/* The AVX-512 fp32 implementation for a product with N columns of C */
static const tt_gemm_impl *avx512_f32(int N)
{
    int t = mode_get(&g_tile);
    if (t == 0 && cpu_is_intel()) t = N % 64 == 0 ? 3 : N % 48 == 0 ? 2 : 1;
    return t == 3 ? tt_gemm_impl_avx512_f32_6x64() : t == 2 ? tt_gemm_impl_avx512_f32_8x48() : tt_gemm_impl_avx512_f32();
}

/* The AVX-512 bf16 tile: 12x32, or 8x48 where TITAN_GEMM_TILE (or
 * tt_gemm_set_tile) names it; auto takes 8x48 only for the A tt_gemm_one_set_impl
 * describes. There is no bf16 6x64: that mode keeps 12x32 for bf16. */
static const tt_gemm_impl *avx512_bf16(void)
{
    return mode_get(&g_tile) == 2 ? tt_gemm_impl_avx512_bf16_8x48() : tt_gemm_impl_avx512_bf16();
}

const tt_gemm_impl *tt_gemm_one_set_impl(const tt_gemm_impl *im, int N)
{
    const tt_gemm_impl *wide = tt_gemm_impl_avx512_bf16_8x48();
    return im == tt_gemm_impl_avx512_bf16() && mode_get(&g_tile) == 0 && N % wide->nr == 0 ? wide : im;
}

/* The implementation for `compute` and N columns of C; *round says whether
 * fp32 operands must be rounded to bf16 while packing (bf16 compute on fp32
 * hardware). */
const tt_gemm_impl *tt_gemm_pick_impl(tt_dtype compute, int N, int *round)
{
    const tt_gemm_impl *im = NULL;
    *round = 0;
    switch (current_isa()) {
    case TT_GEMM_ISA_AMX:
        if (compute == TT_BF16) im = tt_gemm_impl_amx_bf16();
        if (!im) im = avx512_f32(N);
        break;
    case TT_GEMM_ISA_AVX512BF16:
        if (compute == TT_BF16) im = avx512_bf16();
        if (!im) im = avx512_f32(N);
        break;
    case TT_GEMM_ISA_AVX512: im = avx512_f32(N); break;
    case TT_GEMM_ISA_AVX2: im = tt_gemm_impl_avx2_f32(); break;
    default: break;
    }
    if (!im) im = tt_gemm_impl_scalar();
    *round = compute == TT_BF16 && im->kunit == 1;
    return im;
}

int tt_gemm_bf16_hardware(void)
{
    return current_isa() >= TT_GEMM_ISA_AVX512 && tt_bf16_dot_supported();
}

void tt_gemm_tile(tt_dtype compute, int N, int *mr, int *nr)
{
    int round;
    const tt_gemm_impl *im = tt_gemm_pick_impl(compute == TT_BF16 ? TT_BF16 : TT_F32, N, &round);
    *mr = im->mr, *nr = im->nr;
}

const char *tt_gemm_path_name(tt_dtype compute)
{
    int round;
    return tt_gemm_pick_impl(compute == TT_BF16 ? TT_BF16 : TT_F32, 0, &round)->name;
}

/* ---- how the threads share a product ----------------------------------------- */

/* "own": each thread computes its own band of C, packing what it reads
 * itself; "shared": the threads pack each block together and share it; "auto"
 * takes own bands where they cost no more than they save (own_split). */
static const char *const split_names[] = {"auto", "shared", "own"}; /* as TT_GEMM_SPLIT_* */
static gemm_mode g_split = {"TITAN_GEMM_SPLIT", "split", "auto, shared, own", split_names, 3, -1};

tt_err tt_gemm_set_split(const char *name) { return mode_set(&g_split, name, "tt_gemm_set_split"); }

int tt_gemm_current_split(void) { return mode_get(&g_split); }

/* ---- cache blocks from the L2 ---------------------------------------------- */

/* The per-core L2 in bytes the blocks are sized for: the one tt_gemm_set_l2
 * set, else TITAN_GEMM_L2 (bytes, or with a K or M suffix), else the CPU's
 * (sysconf); 0 = unknown. -1 = not decided yet. */
static long g_l2 = -1;

static long parse_size(const char *s)
{
    char *end;
    const long v = strtol(s, &end, 10);
    const long mul = *end == 'K' || *end == 'k' ? 1024 : *end == 'M' || *end == 'm' ? 1024 * 1024 : 1;
    if (end == s || v <= 0 || v > (1L << 40) / mul || (mul > 1 && end[1]) || (mul == 1 && *end)) return -1;
    return v * mul;
}

static long detect_l2(void)
{
    const char *env = getenv("TITAN_GEMM_L2");
    if (env && *env) {
        const long v = parse_size(env);
        if (v > 0) return v;
        tt_warn("TITAN_GEMM_L2=%s is not a size in bytes (such as 2M or 1024K): ignored", env);
    }
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? v : 0;
#else
    return 0;
#endif
}

static long current_l2(void)
{
    long l2 = __atomic_load_n(&g_l2, __ATOMIC_ACQUIRE);
    if (l2 < 0) {
        l2 = detect_l2();
        __atomic_store_n(&g_l2, l2, __ATOMIC_RELEASE);
    }
    return l2;
}

void tt_gemm_set_l2(long bytes) { __atomic_store_n(&g_l2, bytes > 0 ? bytes : detect_l2(), __ATOMIC_RELEASE); }

/* 2 where the L2 holds at least twice the one im's kc and A block were tuned
 * for (measured: 2 MB against Zen 4's 1 MB), else 1 */
int tt_gemm_impl_block_scale(const tt_gemm_impl *im)
{
    return im->l2_kb > 0 && current_l2() >= 2L * im->l2_kb * 1024 ? 2 : 1;
}

int tt_gemm_block_scale(tt_dtype compute)
{
    int round;
    return tt_gemm_impl_block_scale(tt_gemm_pick_impl(compute == TT_BF16 ? TT_BF16 : TT_F32, 0, &round));
}

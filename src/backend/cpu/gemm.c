/* gemm.c — the GEMM driver: argument checks, cache blocking (the
 * GotoBLAS/BLIS loop nest), packing and the split of C over the OpenMP
 * threads. What a call takes (code path, tile, split, block scale) is decided
 * in gemm_choice.c; the microkernels and packers live in gemm_avx512.c,
 * gemm_amx.c, gemm_avx2.c and gemm_scalar.c. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemm_choice.h"
#include "backend/cpu/gemm_impl.h"
#include "backend/cpu/simd.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the loop nest -------------------------------------------------------- */

typedef struct {
    const tt_gemm_impl *im;
    int round;
    const char *A, *B; /* bytes */
    tt_dtype adt, bdt;
    long lda, ldb, ldc;
    int ta, tb;
    void *C;
    tt_dtype cdt;
    float *part; /* bf16 C over several k blocks: the fp32 partial sums, (M, N) */
    int M, N, K, accumulate;
    int a_place; /* A_PACKED, or read in place: A_ROWS by kern_rows, A_COLS by kern_cols (see gemm_plan_for) */
    int own;     /* OWN_ROWS, OWN_COLS: each thread computes its own band of C alone (see gemm_thread_own) */
    int out16;   /* a bf16 C's whole tiles rounded into C by im->kern_out16 in the last k block */
} gemm_job;

/* How the threads share a product (gemm_job.own) */
enum { OWN_NONE, OWN_ROWS, OWN_COLS };

/* How the kernel reads A (gemm_job.a_place) */
enum { A_PACKED, A_ROWS, A_COLS };

static inline int cdiv(int a, int b) { return (a + b - 1) / b; }
static inline int round_up(int a, int b) { return cdiv(a, b) * b; }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* k blocks and panels hold whole granules of k values (zero-padded) */
static inline int kgran_of(const tt_gemm_impl *im) { return im->kgran ? im->kgran : im->kunit; }
static inline int kpad_of(const tt_gemm_impl *im, int kc) { return round_up(kc, kgran_of(im)); }

/* Block sizes for a range of n values: at most `cap`, a multiple of `unit`,
 * and as even as possible so the last block is not a sliver. */
static int balanced_block(int n, int cap, int unit)
{
    if (n <= 0) return unit;
    return round_up(cdiv(n, cdiv(n, cap)), unit);
}

/* How the threads share one GEMM (one parallel region, static partition).
 *
 * Own bands (where own_split takes them): thread t
 * computes its band of C's rows (OWN_ROWS) or of its columns (OWN_COLS)
 * alone, packing every block it reads into its own buffers, with no barrier
 * until the end. The operand the other thread also needs (all of B for a
 * band of rows, all of A for a band of columns) is packed by both: the band
 * is cut along the dimension that makes that copy the smaller, and an A read
 * in place is not worth a band (own_split).
 *
 * Shared blocks (elsewhere): every block of B (kc x nc)
 * and of A (mc x kc) is packed by all threads together, each packing whole
 * panels, and the MR x NR tiles of each (mc, nc) block are cut in equal
 * contiguous runs, B panel major, one a thread, claimed as they are done
 * (see "claims" below). A thread's run then mostly uses the B panels it
 * packed itself, but every A panel, half of them packed by the other
 * thread.
 *
 * Why own bands: on the Zen 4 host the two vCPUs sit either on one chiplet
 * or on two (`titan bench peak` prints a cache line's round trip between
 * them: about 55 ns or 330 ns, flipping between runs), and a panel packed by
 * a thread on the other chiplet is read across the fabric. The weight
 * gradients (tn, A packed) lost up to 15% to that with shared blocks on two
 * chiplets, and 2-3% to the waits on one; the copy costs less where the
 * operand copied is small beside the work (OWN_MIN_SPAN). */
typedef struct {
    int T;
    int kcb, ncb, mcb; /* block sizes */
    char *bbuf;        /* packed B: ncb x kcb; in own bands, T of them, bbytes apart */
    char *abuf;        /* packed A: mcb x kcb, in own bands T of them, abytes apart; with A in place, T
                          row buffers of mr x kcb for ragged edges */
    int *claims;       /* each band's next unclaimed unit, a set of T per block, one cache line apart (see claim) */
    size_t abytes, bbytes; /* bytes of one packed A block and one B block */
    size_t a_total, b_total, p_total, c_total; /* scratch for A, B, a bf16 C's partial sums and the claims */
} gemm_plan;

static size_t round64(size_t x) { return (x + 63) / 64 * 64; }

static void barrier(int T)
{
#ifdef _OPENMP
    if (T > 1) {
#pragma omp barrier
    }
#else
    (void)T;
#endif
}

/* tt_gemm_set_kc_whole's switch */
static int g_kc_whole = 1;

void tt_gemm_set_kc_whole(int on) { __atomic_store_n(&g_kc_whole, on != 0, __ATOMIC_RELAXED); }

/* tt_gemm_set_pack_prefetch's switch */
static int g_pack_prefetch = 1;

void tt_gemm_set_pack_prefetch(int on) { __atomic_store_n(&g_pack_prefetch, on != 0, __ATOMIC_RELAXED); }

/* rows [r0, r0 + rn) of the operand block (pc.., row0..) packed to dst */
static void pack_rows(const gemm_job *j, int is_a, int row0, int rn, int pc, int kc, char *dst)
{
    const tt_gemm_impl *im = j->im;
    if (rn <= 0) return;
    tt_gemm_pack_args pa = {.kn = kc, .kpad = kpad_of(im, kc), .round_bf16 = j->round,
                            .prefetch = __atomic_load_n(&g_pack_prefetch, __ATOMIC_RELAXED) ? im->pack_prefetch : 0,
                            .prefetch_l2 = im->pack_prefetch_l2};
    if (is_a) { /* A element (row, k) is A[k*lda + row] when ta, else A[row*lda + k] */
        const size_t esz = tt_dtype_size(j->adt);
        pa.src = j->A + esz * (j->ta ? (size_t)pc * j->lda + row0 : (size_t)row0 * j->lda + pc);
        pa.sdt = j->adt, pa.ld = j->lda, pa.kcontig = !j->ta, pa.rn = rn, pa.W = im->mr;
    } else { /* B element (k, col) is B[col*ldb + k] when tb, else B[k*ldb + col] */
        const size_t esz = tt_dtype_size(j->bdt);
        pa.src = j->B + esz * (j->tb ? (size_t)row0 * j->ldb + pc : (size_t)pc * j->ldb + row0);
        pa.sdt = j->bdt, pa.ld = j->ldb, pa.kcontig = j->tb, pa.rn = rn, pa.W = im->nr;
    }
    (is_a && im->pack_a ? im->pack_a : im->pack)(dst, &pa);
}

/* the first of thread t of T's band of `units` (a static split's) */
static int band_lo(int units, int t, int T) { return (int)((long)units * t / T); }

/* [*lo, *hi): thread t of T's band of n values, cut in whole units */
static void band_of(int n, int unit, int t, int T, int *lo, int *hi)
{
    const int units = cdiv(n, unit);
    *lo = band_lo(units, t, T) * unit;
    *hi = imin(band_lo(units, t + 1, T) * unit, n);
}

/* Thread t's share of rows [row0, row0 + n) cut in panels of W: whole panels,
 * packed into their place in the shared buffer. */
static void pack_share(const gemm_job *j, int is_a, int row0, int n, int pc, int kc, char *buf, int t, int T)
{
    const int W = is_a ? j->im->mr : j->im->nr;
    int lo, hi;
    band_of(n, W, t, T, &lo, &hi);
    const size_t panel = (size_t)kpad_of(j->im, kc) * W * j->im->esize;
    pack_rows(j, is_a, row0 + lo, hi - lo, pc, kc, buf + (size_t)(lo / W) * panel);
}

/* c (mm, nn) = bf16(t (+ part) (+ c when acc)): the one rounding of a bf16 C */
TT_CLONES static void store_bf16(uint16_t *c, long ldc, const float *t, int ldt, const float *part, long ldp, int mm,
                                 int nn, int acc)
{
    for (int i = 0; i < mm; i++) {
        uint16_t *ci = c + (size_t)i * ldc;
        const float *ti = t + (size_t)i * ldt, *pi = part ? part + (size_t)i * ldp : NULL;
        for (int x = 0; x < nn; x++) {
            float v = ti[x];
            if (pi) v += pi[x];
            if (acc) v += tt_bf16_float(ci[x]);
            ci[x] = tt_bf16_bits(v);
        }
    }
}

/* out (mm, nn, stride ldo) = (or +=) the valid part of a full tile t */
static void put_tile(float *out, long ldo, const float *t, int ldt, int mm, int nn, int beta)
{
    for (int i = 0; i < mm; i++) {
        float *oi = out + (size_t)i * ldo;
        const float *ti = t + (size_t)i * ldt;
        if (beta)
            for (int x = 0; x < nn; x++) oi[x] += ti[x];
        else
            for (int x = 0; x < nn; x++) oi[x] = ti[x];
    }
}

/* The microkernel on A panel ap, or on A in place at ap with stride alda
 * (words): rows, or a transposed A's k steps */
static inline void kern(const gemm_job *j, int ks, const char *ap, long alda, const char *bp, float *c, long ldc,
                        int beta)
{
    const tt_gemm_impl *im = j->im;
    if (!alda) im->kern(ks, ap, bp, c, ldc, beta);
    else if (j->a_place == A_COLS) im->kern_cols(ks, ap, alda, bp, c, ldc, beta);
    else im->kern_rows(ks, ap, alda, bp, c, ldc, beta);
}

/* Where the fp32 sums of C at (row, col) go in this k block: C itself (row
 * stride *lds; *beta: add to what is there), or the partial buffer of a bf16
 * C; NULL in the last k block of a bf16 C, which is summed in scratch and
 * rounded by round_out. */
static float *sums_at(const gemm_job *j, int row, int col, int kbeta, int last, long *lds, int *beta)
{
    *beta = kbeta;
    if (j->cdt == TT_F32) {
        *lds = j->ldc, *beta = kbeta || j->accumulate;
        return (float *)j->C + (size_t)row * j->ldc + col;
    }
    *lds = j->N;
    return last ? NULL : j->part + (size_t)row * j->N + col;
}

/* A bf16 C at (row, col), and the partial sums earlier k blocks left there
 * (row stride N; NULL when kbeta says there were none) */
static uint16_t *c16_at(const gemm_job *j, int row, int col) { return (uint16_t *)j->C + (size_t)row * j->ldc + col; }
static const float *part_at(const gemm_job *j, int row, int col, int kbeta)
{
    return kbeta ? j->part + (size_t)row * j->N + col : NULL;
}

/* The last k block of a bf16 C: rows x nn sums in t (row stride nr), plus
 * the partial sums of earlier k blocks, rounded once into C */
static void round_out(const gemm_job *j, const float *t, int row, int col, int rows, int nn, int kbeta)
{
    store_bf16(c16_at(j, row, col), j->ldc, t, j->im->nr, part_at(j, row, col, kbeta), j->N, rows, nn, j->accumulate);
}

/* One MR x NR tile of C: A panel ap (or A rows, alda != 0), B panel bp, mm x
 * nn of it valid; kbeta: an earlier k block has summed into it; last: this is
 * the last k block. */
static inline void tile(const gemm_job *j, int ks, const char *ap, long alda, const char *bp, int row, int col,
                        int mm, int nn, int kbeta, int last)
{
    const tt_gemm_impl *im = j->im;
    float tmp[16 * 64] __attribute__((aligned(64))); /* mr * nr <= 16 * 64 */
    long lds;
    int beta;
    float *sum = sums_at(j, row, col, kbeta, last, &lds, &beta);
    if (mm == im->mr && nn == im->nr) {
        if (sum) {
            kern(j, ks, ap, alda, bp, sum, lds, beta);
            return;
        }
        if (j->out16) { /* the rounding into C in the kernel, as round_out's */
            im->kern_out16(ks, ap, alda, bp, c16_at(j, row, col), j->ldc, part_at(j, row, col, kbeta), j->N,
                           j->accumulate);
            return;
        }
    }
    kern(j, ks, ap, alda, bp, tmp, im->nr, 0); /* a ragged edge, or a bf16 C's last k block without kern_out16 */
    if (sum) put_tile(sum, lds, tmp, im->nr, mm, nn, beta);
    else round_out(j, tmp, row, col, mm, nn, kbeta);
}

/* A rows [row, row + mm) of the k block at pc, read in place: the address of
 * the first and the row stride in words (A_ROWS), or of row's value at step
 * pc and the stride between steps (A_COLS). A ragged last panel (mm < mr) is
 * copied into the thread's row buffer first, padded with zeros, so the
 * kernel never reads past A: as rows (A_ROWS), or as a packed panel (A_COLS,
 * *alda 0). */
static const char *a_in_place(const gemm_job *j, const gemm_plan *pl, int t, int row, int mm, int pc, int kc,
                              long *alda)
{
    const tt_gemm_impl *im = j->im;
    const size_t es = tt_dtype_size(j->adt);
    char *buf = pl->abuf + (size_t)t * pl->abytes;
    if (j->a_place == A_COLS) { /* fp32: step s's values at src + s * lda */
        const float *src = (const float *)j->A + (size_t)pc * j->lda + row;
        *alda = j->lda;
        if (mm == im->mr) return (const char *)src;
        float *pb = (float *)buf;
        for (int s = 0; s < kc; s++)
            for (int i = 0; i < im->mr; i++) pb[(size_t)s * im->mr + i] = i < mm ? src[(size_t)s * j->lda + i] : 0.0f;
        *alda = 0;
        return buf;
    }
    const char *src = j->A + ((size_t)row * j->lda + pc) * es;
    *alda = j->lda / im->kunit;
    if (mm == im->mr) return src;
    for (int i = 0; i < im->mr; i++) {
        if (i < mm) memcpy(buf + (size_t)i * kc * es, src + (size_t)i * j->lda * es, (size_t)kc * es);
        else memset(buf + (size_t)i * kc * es, 0, (size_t)kc * es);
    }
    *alda = kc / im->kunit;
    return buf;
}

/* The tiles of one (mc, nc) block at (ic, jc), or thread t's run [x0, x1)
 * of them, B panel major: each B micro-panel is reused by the block's A
 * micro-panels in turn. ap0: the packed A block (unused with A in place). */
static void block_tiles(const gemm_job *j, const gemm_plan *pl, int t, int ic, int mc, int jc, int nc, int pc,
                        int kc, const char *ap0, const char *bp0, int x0, int x1)
{
    const tt_gemm_impl *im = j->im;
    const int mr = im->mr, nr = im->nr, ks = kpad_of(im, kc) / im->kunit, npi = cdiv(mc, mr);
    const int last = pc + kc >= j->K;
    const size_t bpanel = (size_t)ks * nr * im->kunit * im->esize, apanel = (size_t)ks * mr * im->kunit * im->esize;
    for (int x = x0; x < x1; x++) {
        const int jr = x / npi, ir = x % npi, mm = imin(mr, mc - ir * mr), nn = imin(nr, nc - jr * nr);
        long alda = 0;
        const char *ap = j->a_place ? a_in_place(j, pl, t, ic + ir * mr, mm, pc, kc, &alda) : ap0 + ir * apanel;
        tile(j, ks, ap, alda, bp0 + jr * bpanel, ic + ir * mr, jc + jr * nr, mm, nn, pc > 0, last);
    }
}

/* ---- claims: work dealt out as it is done ---------------------------------
 *
 * The threads' work is not dealt once but claimed. A stretch of `units`
 * (tiles of a shared block, panels of an own band) is cut in T bands as a
 * static split would cut it, band b [units * b / T, units * (b + 1) / T),
 * each with a counter saying how far it has been claimed. Each thread claims
 * its own band first and then what the others have left, so a thread the host
 * slows (the hypervisor runs the VM's vCPUs beside other guests; a laptop
 * runs other programs) hands the rest of its band over instead of holding
 * the others at the next barrier. Who computes a tile changes nothing in its
 * sums. A claim takes all but the band's last eighth at once, then `tail`
 * units at a time (tail 0: the band whole). */

#define CLAIM_STRIDE (64 / (int)sizeof(int)) /* one counter a cache line */

/* testing hooks (tt_gemm_test_idle): the thread that takes no work of its own, and the units stolen so far */
static int g_idle_thread = -1;
static long g_units_stolen;

/* band b's counter in counter set `set` (a block's, or a stage's ic block's) */
static int *claim_counter(const gemm_plan *pl, int set, int b) { return pl->claims + ((size_t)set * pl->T + b) * CLAIM_STRIDE; }

/* Thread t sets its band's counter in `set` to the band's start; the others
 * may claim from it once a barrier has passed. */
static void claims_open(const gemm_plan *pl, int set, int t, int units)
{
    __atomic_store_n(claim_counter(pl, set, t), band_lo(units, t, pl->T), __ATOMIC_RELAXED);
}

/* a spinning thread's pause, which leaves the core to its sibling */
static inline void spin_pause(void)
{
#ifdef TT_GEMM_X86
    __builtin_ia32_pause();
#endif
}

/* The testing hook: thread t waits until the others have claimed all of its band of `units` in `set` */
static void idle_if_asked(const gemm_plan *pl, int set, int t, int units)
{
    if (pl->T < 2 || __atomic_load_n(&g_idle_thread, __ATOMIC_RELAXED) != t) return;
    while (__atomic_load_n(claim_counter(pl, set, t), __ATOMIC_RELAXED) < band_lo(units, t + 1, pl->T)) spin_pause();
}

/* Units [*at, *at + n) claimed by thread t from band b of `units` in `set`,
 * or 0 when none are left */
static int claim(const gemm_plan *pl, int set, int t, int b, int units, int tail, int *at)
{
    int *pos = claim_counter(pl, set, b);
    const int lo = band_lo(units, b, pl->T), hi = band_lo(units, b + 1, pl->T);
    int p = __atomic_load_n(pos, __ATOMIC_RELAXED);
    while (p < hi) {
        const int head = tail ? hi - lo - imax(tail, (hi - lo) / 8) : hi - lo;
        const int n = imin(p == lo && head > 0 ? head : imax(tail, 1), hi - p);
        if (__atomic_compare_exchange_n(pos, &p, p + n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            if (b != t) __atomic_fetch_add(&g_units_stolen, n, __ATOMIC_RELAXED);
            *at = p;
            return n;
        }
    }
    return 0;
}

/* the MR x NR tiles of an mc x nc block of C */
static int block_ntile(const tt_gemm_impl *im, int mc, int nc) { return cdiv(mc, im->mr) * cdiv(nc, im->nr); }

/* The tiles of block (ic, mc) x (jc, nc) at pc, claimed in set `set` from
 * band b (packed A at ap0, B at bp0) */
static void claim_tiles(const gemm_job *j, const gemm_plan *pl, int set, int t, int b, int ic, int mc, int jc,
                        int nc, int pc, int kc)
{
    int at, got; /* after the head, a B panel's tiles a claim */
    while ((got = claim(pl, set, t, b, block_ntile(j->im, mc, nc), cdiv(mc, j->im->mr), &at)))
        block_tiles(j, pl, t, ic, mc, jc, nc, pc, kc, pl->abuf, pl->bbuf, at, at + got);
}

/* Thread t of T on shared blocks: the BLIS loop nest. For each nc block of
 * columns and kc block of k, pack B (kc x nc) together; then for each mc
 * block of rows pack A (mc x kc, it stays in L2) together and sweep this
 * thread's run of the block's tiles. With A read in place there is nothing
 * to pack per mc block, so the only waits are for the B block. */
static void gemm_thread_shared(const gemm_job *j, const gemm_plan *pl, int t)
{
    const tt_gemm_impl *im = j->im;
    const int T = pl->T;
    for (int jc = 0; jc < j->N; jc += pl->ncb) {
        const int nc = imin(pl->ncb, j->N - jc);
        for (int pc = 0; pc < j->K; pc += pl->kcb) {
            const int kc = imin(pl->kcb, j->K - pc);
            pack_share(j, 0, jc, nc, pc, kc, pl->bbuf, t, T);
            if (j->a_place) {
                /* no wait between the A blocks: each has its own counters */
                for (int ic = 0, set = 0; ic < j->M; ic += pl->mcb, set++)
                    claims_open(pl, set, t, block_ntile(im, imin(pl->mcb, j->M - ic), nc));
                barrier(T); /* the B block is whole, the counters set */
                for (int ic = 0, set = 0; ic < j->M; ic += pl->mcb, set++)
                    idle_if_asked(pl, set, t, block_ntile(im, imin(pl->mcb, j->M - ic), nc));
                for (int r = 0; r < T; r++) /* this thread's bands in every A block, then the others' */
                    for (int ic = 0, set = 0; ic < j->M; ic += pl->mcb, set++)
                        claim_tiles(j, pl, set, t, (t + r) % T, ic, imin(pl->mcb, j->M - ic), jc, nc, pc, kc);
                barrier(T); /* everyone is done with the B block */
                continue;
            }
            for (int ic = 0; ic < j->M; ic += pl->mcb) {
                const int mc = imin(pl->mcb, j->M - ic), ntile = block_ntile(im, mc, nc);
                pack_share(j, 1, ic, mc, pc, kc, pl->abuf, t, T);
                claims_open(pl, 0, t, ntile);
                barrier(T); /* the A block (and, the first time, the B block) is whole */
                idle_if_asked(pl, 0, t, ntile);
                for (int r = 0; r < T; r++) claim_tiles(j, pl, 0, t, (t + r) % T, ic, mc, jc, nc, pc, kc);
                barrier(T); /* everyone is done with the A block (and the B block, after the last) */
            }
        }
    }
}

/* Thread t on rows [m0, m1) and columns [n0, n1) of C alone: the same loop
 * nest, every block packed into this thread's buffers, no waits. */
static void own_range(const gemm_job *j, const gemm_plan *pl, int t, int m0, int m1, int n0, int n1)
{
    const tt_gemm_impl *im = j->im;
    char *abuf = pl->abuf + (size_t)t * pl->abytes, *bbuf = pl->bbuf + (size_t)t * pl->bbytes;
    for (int jc = n0; jc < n1; jc += pl->ncb) {
        const int nc = imin(pl->ncb, n1 - jc);
        for (int pc = 0; pc < j->K; pc += pl->kcb) {
            const int kc = imin(pl->kcb, j->K - pc);
            pack_rows(j, 0, jc, nc, pc, kc, bbuf);
            for (int ic = m0; ic < m1; ic += pl->mcb) {
                const int mc = imin(pl->mcb, m1 - ic);
                if (!j->a_place) pack_rows(j, 1, ic, mc, pc, kc, abuf);
                block_tiles(j, pl, t, ic, mc, jc, nc, pc, kc, abuf, bbuf, 0, block_ntile(im, mc, nc));
            }
        }
    }
}

/* The fewest columns a claim of an own band takes once its head is gone */
#define OWN_TAIL_CLAIM 128

/* Thread t of T on the own bands (OWN_ROWS or OWN_COLS), their panels
 * claimed. A claim costs its own pass over the operand every band reads, so
 * where that one is packed (all of B for bands of rows, all of A for bands of
 * columns unless A is read in place) a band is claimed whole: measured on
 * Zen 4 (bench_gemm_blocks), packing it a few times more cost the weight
 * gradients 2-12% of their time, more than the threads' spread on a quiet
 * host. Where the bands copy nothing (columns, A in place) the tail goes
 * OWN_TAIL_CLAIM columns at a time. */
static void gemm_thread_own(const gemm_job *j, const gemm_plan *pl, int t)
{
    const tt_gemm_impl *im = j->im;
    const int rows = j->own == OWN_ROWS, unit = rows ? im->mr : im->nr, n = rows ? j->M : j->N;
    const int units = cdiv(n, unit), tail = !rows && j->a_place ? cdiv(OWN_TAIL_CLAIM, unit) : 0;
    claims_open(pl, 0, t, units);
    barrier(pl->T); /* every band's counter is set */
    idle_if_asked(pl, 0, t, units);
    for (int r = 0; r < pl->T; r++) {
        int at, got;
        while ((got = claim(pl, 0, t, (t + r) % pl->T, units, tail, &at))) {
            const int v0 = at * unit, v1 = imin((at + got) * unit, n);
            if (rows) own_range(j, pl, t, v0, v1, 0, j->N);
            else own_range(j, pl, t, 0, j->M, v0, v1);
        }
    }
}

void tt_gemm_test_idle(int thread) { __atomic_store_n(&g_idle_thread, thread, __ATOMIC_RELAXED); }

long tt_gemm_units_stolen(void) { return __atomic_load_n(&g_units_stolen, __ATOMIC_RELAXED); }

/* tt_gemm_set_out16's switch: off, a bf16 C's last k block goes through scratch on every path */
static int g_out16 = 1;

void tt_gemm_set_out16(int on) { __atomic_store_n(&g_out16, on != 0, __ATOMIC_RELAXED); }

/* tt_gemm_set_a_pack_cols's figure (0: the impl's) */
static int g_a_pack_cols;

/* A transposed fp32 A of at least this many bytes is read in place (A_COLS)
 * where the threads have few columns each. Such an A (the head's weight
 * gradient reads the logits' gradient, vocabulary x tokens) comes from
 * memory once whichever way, and packing it adds a pass that writes it all
 * again; a smaller one stays in the caches, where the packed panel, one
 * dense stream, reads faster than k steps a row stride apart. Measured on
 * the Intel Xeon host (bench_gemm_blocks --f32 --a-pack-transposed,
 * performance-changes.md): the heads' weight gradients 32000 x 288 x 2048
 * and 50304 x 768 x 1024 1.05-1.09x as fast in place on two threads (1.15x
 * on one), while 768-3584 x 288 x 2048 ran 0.89-0.97x on one thread. */
#define A_COLS_MIN_BYTES ((size_t)64 << 20)

/* tt_gemm_set_a_cols's figure (0: A_COLS_MIN_BYTES) */
static size_t g_a_cols_bytes;

void tt_gemm_set_a_cols(size_t min_bytes) { __atomic_store_n(&g_a_cols_bytes, min_bytes, __ATOMIC_RELAXED); }

void tt_gemm_set_a_pack_cols(int cols) { __atomic_store_n(&g_a_pack_cols, cols > 0 ? cols : 0, __ATOMIC_RELAXED); }

static void gemm_thread(const gemm_job *j, const gemm_plan *pl, int t)
{
    if (j->im->begin) j->im->begin();
    if (j->own) {
        gemm_thread_own(j, pl, t);
        barrier(pl->T); /* a grouped GEMM's next product may reuse the scratch (and read this C) */
    } else {
        gemm_thread_shared(j, pl, t);
    }
    if (j->im->end) j->im->end();
}

/* below this many multiply-adds one thread is faster than waking the team */
#define TT_GEMM_SERIAL_MACS (1 << 19)
/* C with at most this many rows takes the skinny path (no packing: B is read
 * once, in place). Measured crossovers on Zen 4: up to 32 rows for fp32
 * products; only 8 when the packed path has bf16 dot products (2x the FLOPs
 * of the skinny path's fp32 FMAs). */
#define TT_GEMM_SKINNY_M_F32 32
#define TT_GEMM_SKINNY_M_BF16 8

/* Threads for this job: 1 inside another parallel region (no nesting, no
 * oversubscription) or for a small product, else the OpenMP default. */
static int team_size(const gemm_job *j)
{
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && (double)j->M * j->N * j->K >= TT_GEMM_SERIAL_MACS)
        nt = omp_get_max_threads();
#endif
    return nt < 1 ? 1 : nt;
}

/* Scratch memory of the calling thread (packed blocks, partial sums), kept
 * and grown on demand, so a GEMM allocates nothing once the shapes have been seen. */
static char *scratch(size_t need, const gemm_job *j)
{
    char *buf = tt_cpu_scratch(TT_SCRATCH_GEMM, need);
    if (!buf) tt_error_prefix("gemm %dx%dx%d: ", j->M, j->N, j->K);
    return buf;
}

/* Few rows: op(A) converted once to fp32 rows, then the columns of C split
 * over the threads, each streaming its part of B once. */
static tt_err gemm_skinny(const gemm_job *j, tt_dtype compute)
{
    const int M = j->M, N = j->N, K = j->K;
    /* op(A) as fp32 rows, then (bf16 C only) room for the fp32 sums */
    const size_t abytes = round64((size_t)M * K * sizeof(float));
    char *buf = scratch(abytes + (j->cdt == TT_BF16 ? (size_t)M * N * sizeof(float) : 0), j);
    if (!buf) return -1;
    float *a = (float *)buf;
    const int round_a = compute == TT_BF16 && j->adt == TT_F32;
    for (int i = 0; i < M; i++) {
        float *ai = a + (size_t)i * K;
        if (!j->ta && j->adt == TT_F32 && !round_a) { /* the common case: a plain copy */
            memcpy(ai, (const float *)j->A + (size_t)i * j->lda, (size_t)K * sizeof(float));
            continue;
        }
        for (int k = 0; k < K; k++) {
            const size_t idx = j->ta ? (size_t)k * j->lda + i : (size_t)i * j->lda + k;
            if (j->adt == TT_BF16) {
                ai[k] = tt_bf16_float(((const uint16_t *)j->A)[idx]);
            } else {
                const float v = ((const float *)j->A)[idx];
                ai[k] = round_a ? tt_gemm_round_bf16(v) : v;
            }
        }
    }
    float *sums = j->cdt == TT_BF16 ? (float *)(buf + abytes) : (float *)j->C;
    const tt_gemm_skinny_args sa = {
        .a = a, .b = j->B, .bdt = j->bdt, .ldb = j->ldb, .tb = j->tb,
        .round_b = compute == TT_BF16 && j->bdt == TT_F32, .c = sums, .ldc = j->cdt == TT_BF16 ? N : j->ldc,
        .M = M, .K = K, .accumulate = j->cdt == TT_F32 && j->accumulate,
    };
    const int nt = team_size(j), unit = 64; /* whole 64-column blocks per thread */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num(), T = omp_get_num_threads();
#endif
        int n0, n1;
        band_of(N, unit, t, T, &n0, &n1);
        if (n0 < n1) {
            j->im->skinny(&sa, n0, n1);
            if (j->cdt == TT_BF16)
                store_bf16((uint16_t *)j->C + n0, j->ldc, sums + n0, N, NULL, 0, M, n1 - n0, j->accumulate);
        }
    }
    return TT_OK;
}

/* the most bytes of packed A in one block (of L2's 1 MB on Zen 4; times
 * block_scale) */
#define A_BLOCK_BYTES (384 * 1024)

/* Own bands (see gemm_plan) are cut in whole panels, so they come out
 * uneven when the panels do not divide among the threads: a cut is taken
 * when no thread gets more than 1/64 above the mean (27 panels on 2 threads
 * leave one idle 4% of the time, which measured slower than shared blocks,
 * whose runs of tiles come out even). */
static int even_cut(int panels, int nt) { return panels >= nt && (long)cdiv(panels, nt) * nt * 64 <= (long)panels * 65; }

/* Each thread of an own band packs the operand every band needs, so
 * against shared blocks it packs (nt - 1) / nt of that operand more: for a
 * band of rows all of B, N x K, against its M / nt x N x K multiply-adds.
 * Measured on Zen 4 with bench_gemm_blocks (performance-changes.md), where
 * shared blocks wait and read the other thread's A panels (A packed): own
 * bands of rows won up to 16% with the vCPUs on two chiplets and 1-4% on one
 * (the weight gradients 2304 x 768 x 1024, 4096 x 768 x 1024, 50304 x 768 x
 * 1024), and with 768 values a thread across the cut lost 2-5% (an
 * expert's 288 x 768 x 512 by columns). So own bands copy only where the dimension across the cut has
 * at least this many values a thread beyond one, */
#define OWN_MIN_SPAN 1024
/* or, for bands of rows, where B is narrow: at most this many panels, and A
 * at least this many panels a thread. There shared blocks wait about as
 * long as they compute between barriers: llama_288's weight gradients (tn,
 * N = 288, K = 2048) ran up to 26% faster in own bands (2% slower to 6%
 * faster on one chiplet), an expert's with K = 512 (768 x 288 x 512) 3%
 * slower to 2% faster. */
#define OWN_NARROW_B_PANELS 12
#define OWN_NARROW_A_PANELS 8

/* the most bytes of an A read in place that bands of columns stream once a thread */
#define OWN_A_IN_PLACE_BYTES (4L << 20)

/* The own band job j takes on nt threads (OWN_ROWS, OWN_COLS), or OWN_NONE
 * for shared blocks. */
static int own_split(const gemm_job *j, int nt)
{
    const int mode = tt_gemm_current_split();
    if (nt < 2 || mode == TT_GEMM_SPLIT_SHARED) return OWN_NONE;
    const int forced = mode == TT_GEMM_SPLIT_OWN;
    const int rows_even = even_cut(cdiv(j->M, j->im->mr), nt), cols_even = even_cut(cdiv(j->N, j->im->nr), nt);
    /* A read in place: a band of columns packs nothing twice, but each
     * thread streams all of A, where shared blocks read each row for both
     * threads at once. Where A is small the caches hold it for the second
     * reader (an expert's products: moe_288's step 2% faster in bands);
     * where it is large it comes from memory twice (4096 x 4096 x 4096 ran
     * 5% slower). A band of rows would copy B. */
    if (j->a_place)
        return forced || (cols_even && (double)j->M * j->K * tt_dtype_size(j->adt) <= OWN_A_IN_PLACE_BYTES)
                   ? OWN_COLS
                   : OWN_NONE;
    /* otherwise the cut whose copy is the smaller: all of B (N x K) for rows, all of A (M x K) for columns */
    const int narrow_b = cdiv(j->N, j->im->nr) <= OWN_NARROW_B_PANELS &&
                         cdiv(j->M, j->im->mr) >= OWN_NARROW_A_PANELS * nt;
    const int rows_ok = forced || (rows_even && (j->M >= OWN_MIN_SPAN * (nt - 1) || narrow_b));
    const int cols_ok = forced || (cols_even && j->N >= OWN_MIN_SPAN * (nt - 1));
    if (rows_ok && (!cols_ok || j->N < j->M)) return OWN_ROWS;
    return cols_ok ? OWN_COLS : OWN_NONE;
}

/* From this many columns of C a thread, A is packed even where it could be
 * read in place: the kernel reads a packed panel as one stream, where in
 * place it reads mr rows a row stride apart, and the copy is spread over
 * that many columns. Measured on Zen 4 (bench_gemm_blocks, pairs of calls),
 * the llama_768 step's products with N of 2,048 to 50,304 on two threads
 * ran 1.6-3.7% faster packed in bf16 and 1.4-2.6% in fp32; packing A in
 * every product cost those with N 768 up to 4.4%. AMX, whose tile load
 * reads 16 rows a stride apart, takes the same figure: on the Intel Xeon
 * host, with the operands on huge pages as the step's are, in place against
 * packing from 32 columns a thread ran llama_768's products with N 768
 * 0.99-1.56x as fast (1.12x time-weighted over all 15), llama_288's
 * 0.98-1.83x and an MoE expert's 1.01-1.50x, while with 1,152 columns a
 * thread and more packing stayed 5-10% ahead (performance-changes.md). */
#define A_PACK_MIN_COLS 1024

/* Addresses this many bytes apart fall in the same L1 set (32 KB of 8 ways
 * on Zen 4; 48 KB of 12 on Zen 5 and recent Intel cores). An A read in place
 * with a row stride that is a multiple of it has the kernel's mr rows
 * in one set: 12, more than Zen 4's ways. There the llama_768 step's down
 * projection forward (K 2048, rows 4 KB apart) and gate/up input gradient
 * (K 4096) ran 2.4-23% faster with A packed, the same shapes with K 2064 and
 * 4112 4% slower (bench_gemm_blocks, performance-changes.md). A tile of at
 * most L1_SET_ROWS rows reads such an A in place (the ways hold its rows),
 * and on the bf16 path the automatic tile mode takes the 8x48 tile for it
 * where 48 divides N (tt_gemm_one_set_impl): on Zen 4 that ran the down
 * forward 1.05-1.10x as fast as the 12x32 tile on a packed A, and the gate/up
 * input gradient 1.00-1.04x (performance-changes.md). */
#define L1_SET_STRIDE 4096
#define L1_SET_ROWS 8

/* The blocking of job j on nt threads, how A is read (in place or packed)
 * and how the threads share it (own bands or shared blocks), and the scratch
 * bytes it needs (returned). */
static size_t gemm_plan_for(gemm_job *j, int nt, gemm_plan *pl)
{
    const size_t aes = tt_dtype_size(j->adt);
    const int set_cols = __atomic_load_n(&g_a_pack_cols, __ATOMIC_RELAXED);
    const int pack_cols = set_cols ? set_cols : A_PACK_MIN_COLS;
    const int few = j->N < pack_cols * nt; /* the threads' columns, few enough to read A in place */
    /* A's rows all in one L1 set: the tile for that, where the path has one */
    const int one_set = ((size_t)j->lda * aes) % L1_SET_STRIDE == 0;
    if (one_set && !j->ta && few) j->im = tt_gemm_one_set_impl(j->im, j->N);
    const tt_gemm_impl *im = j->im;
    const int scale = tt_gemm_impl_block_scale(im);
    /* the impl's kc_whole: a K a little past kc in one k block, where A is
     * not transposed (a figure of values, the same on every L2) */
    const int whole = im->kc_whole && !j->ta && j->K <= im->kc_whole &&
                      __atomic_load_n(&g_kc_whole, __ATOMIC_RELAXED);
    *pl = (gemm_plan){.kcb = balanced_block(j->K, whole ? j->K : im->kc * scale, kgran_of(im))};
    /* A is read in place when it is stored k-contiguous in exactly the packed
     * element type (fp32 for fp32 products; bf16, in whole 4-byte pairs, for
     * bf16 ones, and whole k granules: no k block then needs padding), so
     * packing it would only copy it, when the threads' columns are few
     * enough (A_PACK_MIN_COLS, or what tt_gemm_set_a_pack_cols set) that the copy
     * would cost more than it saves, and when its rows do not all fall in
     * one L1 set (L1_SET_STRIDE) or the tile's rows fit the set's ways
     * (L1_SET_ROWS). */
    const int few_cols = few && (!one_set || im->mr <= L1_SET_ROWS);
    const int rows_ok = im->kern_rows && !j->ta && !j->round &&
                        (im->kunit == 1 ? j->adt == TT_F32
                                        : j->adt == TT_BF16 && j->K % kgran_of(im) == 0 && j->lda % 2 == 0 &&
                                              ((uintptr_t)j->A & 3) == 0);
    /* a transposed fp32 A (a weight gradient's output gradient) is the packed
     * panel's layout with a row stride: A_COLS reads it where the fp32 tiles
     * have kern_cols, into an fp32 C (no kern_out16 reads it), when it is
     * large (A_COLS_MIN_BYTES) and its k steps fall in more than two L1 sets
     * (1536 x 288 x 2048, 6 KB apart, ran at half speed in place) */
    const size_t cols_min = __atomic_load_n(&g_a_cols_bytes, __ATOMIC_RELAXED);
    const int cols_ok = im->kern_cols && j->ta && !j->round && im->kunit == 1 && j->adt == TT_F32 &&
                        j->cdt == TT_F32 && ((size_t)j->lda * aes) % (L1_SET_STRIDE / 2) != 0 &&
                        (double)j->M * j->K * aes >= (double)(cols_min ? cols_min : A_COLS_MIN_BYTES);
    j->a_place = !few_cols ? A_PACKED : rows_ok ? A_ROWS : cols_ok ? A_COLS : A_PACKED;
    j->own = own_split(j, nt);
    /* the blocks are cut from a thread's band in own bands, from all of C otherwise */
    const int rows = j->own == OWN_ROWS ? cdiv(cdiv(j->M, im->mr), nt) * im->mr : j->M;
    const int cols = j->own == OWN_COLS ? cdiv(cdiv(j->N, im->nr), nt) * im->nr : j->N;
    pl->ncb = balanced_block(cols, im->nc, im->nr);
    /* A short k block leaves room for more rows of A in L2: fewer, larger A
     * blocks mean fewer barriers and packing calls. */
    int mcap = (int)((size_t)A_BLOCK_BYTES * scale / ((size_t)pl->kcb * im->esize)) / im->mr * im->mr;
    if (mcap < im->mc) mcap = im->mc;
    pl->mcb = balanced_block(rows, mcap, im->mr);
    /* with A in place, a thread's A buffer is its row buffer for ragged edges */
    pl->abytes = j->a_place ? round64((size_t)im->mr * pl->kcb * aes) : round64((size_t)pl->mcb * pl->kcb * im->esize);
    pl->bbytes = round64((size_t)pl->ncb * pl->kcb * im->esize);
    pl->a_total = (j->own || j->a_place ? (size_t)nt : 1) * pl->abytes;
    pl->b_total = (j->own ? (size_t)nt : 1) * pl->bbytes;
    /* a bf16 C summed over several k blocks keeps its partial sums in fp32 */
    pl->p_total = j->cdt == TT_BF16 && j->K > pl->kcb ? round64((size_t)j->M * j->N * sizeof(float)) : 0;
    /* claim counters: a set per block, or with A in place in shared blocks, per A block of a stage */
    const size_t sets = !j->own && j->a_place ? (size_t)cdiv(j->M, pl->mcb) : 1;
    pl->c_total = sets * nt * CLAIM_STRIDE * sizeof(int);
    return pl->a_total + pl->b_total + pl->p_total + pl->c_total;
}

/* The job's blocks in scratch buffer buf */
static void gemm_bind(gemm_job *j, gemm_plan *pl, char *buf)
{
    pl->bbuf = buf, pl->abuf = buf + pl->b_total;
    j->part = pl->p_total ? (float *)(buf + pl->a_total + pl->b_total) : NULL;
    pl->claims = pl->c_total ? (int *)(buf + pl->a_total + pl->b_total + pl->p_total) : NULL;
}

static tt_err gemm_run(gemm_job *j)
{
    const int nt = team_size(j);
    gemm_plan pl;
    char *buf = scratch(gemm_plan_for(j, nt, &pl), j);
    if (!buf) return -1;
    gemm_bind(j, &pl, buf);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        gemm_plan my = pl;
        int t = 0;
        my.T = 1;
#ifdef _OPENMP
        my.T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        gemm_thread(j, &my, t);
    }
    return TT_OK;
}

/* The checks of one product; 1 when there is nothing to compute (an empty C,
 * or K == 0, C then zeroed unless accumulating), -1 on a bad argument. */
static int gemm_check(const tt_gemm_args *g)
{
    const int ta = g->ta != 0, tb = g->tb != 0, M = g->M, N = g->N, K = g->K;
    if (g->compute != TT_F32 && g->compute != TT_BF16)
        return tt_errorf("gemm: compute dtype must be f32 or bf16, not %s", tt_dtype_name(g->compute));
    if ((g->adt != TT_F32 && g->adt != TT_BF16) || (g->bdt != TT_F32 && g->bdt != TT_BF16) ||
        (g->cdt != TT_F32 && g->cdt != TT_BF16))
        return tt_errorf("gemm: operands must be f32 or bf16 (A is %s, B is %s, C is %s)", tt_dtype_name(g->adt),
                         tt_dtype_name(g->bdt), tt_dtype_name(g->cdt));
    if (M < 0 || N < 0 || K < 0) return tt_errorf("gemm: negative size %dx%dx%d", M, N, K);
    /* tile and block arithmetic rounds sizes up in int; the partial sums of a bf16 C are (M, N) */
    if (M > INT_MAX - 4096 || N > INT_MAX - 4096 || K > INT_MAX - 4096 || (size_t)M * N > (SIZE_MAX >> 3))
        return tt_errorf("gemm: size %dx%dx%d too large", M, N, K);
    if (M == 0 || N == 0) return 1;
    if (g->ldc < N) return tt_errorf("gemm: ldc %d < N %d", g->ldc, N);
    if (!g->C) return tt_errorf("gemm: C is NULL for a %dx%d result", M, N);
    if (K == 0) { /* an empty sum */
        if (!g->accumulate)
            for (int i = 0; i < M; i++)
                memset((char *)g->C + (size_t)i * g->ldc * tt_dtype_size(g->cdt), 0, (size_t)N * tt_dtype_size(g->cdt));
        return 1;
    }
    if (g->lda < (ta ? M : K)) return tt_errorf("gemm: lda %d < %d", g->lda, ta ? M : K);
    if (g->ldb < (tb ? K : N)) return tt_errorf("gemm: ldb %d < %d", g->ldb, tb ? K : N);
    if (!g->A || !g->B) return tt_errorf("gemm: A or B is NULL for a %dx%dx%d product", M, N, K);
    return 0;
}

static gemm_job job_of(const tt_gemm_args *g)
{
    gemm_job j = {
        .A = g->A, .B = g->B, .adt = g->adt, .bdt = g->bdt, .lda = g->lda, .ldb = g->ldb, .ldc = g->ldc,
        .ta = g->ta != 0, .tb = g->tb != 0, .C = g->C, .cdt = g->cdt, .M = g->M, .N = g->N, .K = g->K,
        .accumulate = g->accumulate != 0,
    };
    j.im = tt_gemm_pick_impl(g->compute, g->N, &j.round);
    j.out16 = j.cdt == TT_BF16 && j.im->kern_out16 && __atomic_load_n(&g_out16, __ATOMIC_RELAXED);
    return j;
}

/* Few enough rows for the path's skinny kernels */
static int takes_skinny(const gemm_job *j)
{
    return j->im->skinny && j->M <= (j->im->kunit == 2 ? TT_GEMM_SKINNY_M_BF16 : TT_GEMM_SKINNY_M_F32);
}

tt_err tt_gemm(const tt_gemm_args *g)
{
    const int c = gemm_check(g);
    if (c) return c < 0 ? -1 : TT_OK;
    gemm_job j = job_of(g);
    if (takes_skinny(&j)) return gemm_skinny(&j, g->compute);
    return gemm_run(&j);
}

/* The plan tt_gemm(g) would take: 1 with j and pl set, 0 where it takes no
 * plan (nothing to compute, or the skinny path), -1 on a bad argument. */
static int plan_of(const tt_gemm_args *g, gemm_job *j, gemm_plan *pl)
{
    const int c = gemm_check(g);
    if (c) return c < 0 ? -1 : 0;
    *j = job_of(g);
    if (takes_skinny(j)) return 0;
    gemm_plan_for(j, team_size(j), pl);
    return 1;
}

int tt_gemm_reads_a_in_place(const tt_gemm_args *g)
{
    gemm_job j;
    gemm_plan pl;
    const int p = plan_of(g, &j, &pl);
    return p > 0 ? j.a_place : p;
}

int tt_gemm_k_block(const tt_gemm_args *g)
{
    gemm_job j;
    gemm_plan pl;
    const int p = plan_of(g, &j, &pl);
    return p > 0 ? pl.kcb : p;
}

/* All the products in one parallel region: each runs the loop nest above on
 * the whole team, one after the other, in one scratch buffer (every product's
 * loop nest ends on a barrier, so the next may reuse it). An empty product
 * costs nothing. */
tt_err tt_gemm_grouped(const tt_gemm_args *g, int n)
{
    if (n <= 0) return TT_OK;
    gemm_job *jobs = malloc(sizeof *jobs * (size_t)n);
    gemm_plan *plans = malloc(sizeof *plans * (size_t)n);
    if (!jobs || !plans) {
        free(jobs);
        free(plans);
        return tt_errorf("gemm: out of memory for %d grouped products", n);
    }
    int live = 0;
    double macs = 0;
    for (int i = 0; i < n; i++) {
        const int c = gemm_check(&g[i]);
        if (c < 0) {
            free(jobs);
            free(plans);
            return tt_error_prefix("group %d of %d: ", i, n);
        }
        if (c == 0) jobs[live++] = job_of(&g[i]), macs += (double)g[i].M * g[i].N * g[i].K;
    }
    int nt = 1;
#ifdef _OPENMP
    if (!omp_in_parallel() && macs >= TT_GEMM_SERIAL_MACS) nt = omp_get_max_threads();
#endif
    size_t need = 0;
    for (int i = 0; i < live; i++) {
        const size_t b = gemm_plan_for(&jobs[i], nt, &plans[i]);
        if (b > need) need = b;
    }
    char *buf = live ? scratch(need, &jobs[0]) : NULL;
    if (live && !buf) {
        free(jobs);
        free(plans);
        return -1;
    }
    for (int i = 0; i < live; i++) gemm_bind(&jobs[i], &plans[i], buf);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        for (int i = 0; i < live; i++) {
            gemm_plan my = plans[i];
            my.T = T;
            gemm_thread(&jobs[i], &my, t);
        }
    }
    free(jobs);
    free(plans);
    return TT_OK;
}

tt_err tt_gemm_f32(const float *A, const float *B, float *C, int M, int N, int K, int ta, int tb,
                   int accumulate)
{
    return tt_gemm(&(tt_gemm_args){.compute = TT_F32, .A = A, .adt = TT_F32, .lda = ta ? M : K, .ta = ta,
                                   .B = B, .bdt = TT_F32, .ldb = tb ? K : N, .tb = tb,
                                   .C = C, .cdt = TT_F32, .ldc = N, .M = M, .N = N, .K = K, .accumulate = accumulate});
}

tt_err tt_gemm_bf16(const uint16_t *A, const uint16_t *B, float *C, int M, int N, int K, int ta,
                    int tb, int accumulate)
{
    return tt_gemm(&(tt_gemm_args){.compute = TT_BF16, .A = A, .adt = TT_BF16, .lda = ta ? M : K, .ta = ta,
                                   .B = B, .bdt = TT_BF16, .ldb = tb ? K : N, .tb = tb,
                                   .C = C, .cdt = TT_F32, .ldc = N, .M = M, .N = N, .K = K, .accumulate = accumulate});
}

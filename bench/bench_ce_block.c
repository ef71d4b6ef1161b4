/* bench_ce_block.c — the fused linear + cross-entropy (cpu_ce_linear, bf16,
 * with both gradients) at several block sizes, alternated call by call on
 * the same operands. A block holds the fp32 logits of R rows at once
 * (tt_ce_block_rows of the logits given); each block reads the head three
 * times and the fp32 dW once, so the size trades those passes against how
 * far the block's logits travel (cross_entropy.c). The first size is the
 * reference: each other's line gives the median over the rounds of the
 * reference's time over its own (above 1: faster than the reference).
 *
 *   bench_ce_block [--rounds N] ROWS DIM VOCAB MLOGITS [MLOGITS ...]
 *
 * MLOGITS: the most logits a block holds, in units of 2^20 (64 is
 * TT_CE_BLOCK_LOGITS, the default: 256 MiB of fp32). moe_288's step, say:
 * bench_ce_block 2048 288 32000 64 16 4 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels.h"
#include "core/core.h"
#include "ops/ops.h"

#define MAX_SIZES 8
#define MAX_ROUNDS 64

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* n bf16 values uniform in [-amp/2, amp/2) */
static uint16_t *bf16_filled(size_t n, float amp, unsigned *seed)
{
    uint16_t *p = tt_alloc(n * sizeof *p);
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = tt_f32_to_bf16(amp * ((float)(*seed >> 8) / 16777216.0f - 0.5f));
    }
    return p;
}

static long arg(const char *s, const char *what, long lo, long hi)
{
    char *end;
    const long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < lo || v > hi) {
        fprintf(stderr, "bench_ce_block: %s '%s' is not a whole number from %ld to %ld\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    int a = 1, rounds = 7;
    if (a + 1 < argc && strcmp(argv[a], "--rounds") == 0) rounds = (int)arg(argv[a + 1], "--rounds", 1, MAX_ROUNDS), a += 2;
    if (argc - a < 4 || argc - a > 3 + MAX_SIZES) {
        fprintf(stderr, "usage: bench_ce_block [--rounds N] ROWS DIM VOCAB MLOGITS [MLOGITS ...] (at most %d sizes)\n",
                MAX_SIZES);
        return 2;
    }
    const int N = (int)arg(argv[a], "ROWS", 1, 1 << 20), D = (int)arg(argv[a + 1], "DIM", 1, 1 << 16),
              V = (int)arg(argv[a + 2], "VOCAB", 2, 1 << 22);
    const int ns = argc - a - 3;
    size_t logits[MAX_SIZES];
    for (int s = 0; s < ns; s++) logits[s] = (size_t)arg(argv[a + 3 + s], "MLOGITS", 1, 1 << 12) << 20;
    unsigned seed = 1;
    uint16_t *h = bf16_filled((size_t)N * D, 1.0f, &seed), *W = bf16_filled((size_t)V * D, 0.1f, &seed);
    uint16_t *dh = tt_alloc((size_t)N * D * sizeof *dh);
    float *dW = tt_alloc((size_t)V * D * sizeof *dW);
    int32_t *targets = malloc((size_t)N * sizeof *targets);
    if (!h || !W || !dh || !dW || !targets) {
        fprintf(stderr, "bench_ce_block: out of memory for %d x %d x %d\n", N, D, V);
        return 1;
    }
    memset(dW, 0, (size_t)V * D * sizeof *dW);
    for (int i = 0; i < N; i++) seed = seed * 1664525u + 1013904223u, targets[i] = (int32_t)((seed >> 8) % (unsigned)V);

    static double t[MAX_SIZES][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int q = 0; q < ns; q++) { /* one call of each size a round, the order rotating */
            const int s = (q + r) % ns;
            cpu_ce_set_block(logits[s]);
            double loss;
            const double t0 = tt_now();
            if (cpu_ce_linear(h, W, TT_BF16, targets, N, D, V, -100, 1.0 / N, dh, dW, TT_BF16, &loss)) {
                fprintf(stderr, "bench_ce_block: %s\n", tt_last_error());
                return 1;
            }
            t[s][r] = tt_now() - t0;
        }
    printf("cross-entropy %d rows x %d dim x %d vocab, bf16, both gradients; %d rounds\n", N, D, V, rounds);
    for (int s = 0; s < ns; s++) {
        double v[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) v[r] = t[0][r] / t[s][r];
        qsort(v, (size_t)rounds, sizeof *v, cmp_double);
        printf("  %4zuM logits (%5d rows a block): ms", logits[s] >> 20, tt_ce_block_rows(N, V, logits[s]));
        for (int r = 0; r < rounds; r++) printf(" %.1f", 1e3 * t[s][r]);
        if (s) printf("   speed against %zuM: median %.3f", logits[0] >> 20, v[rounds / 2]);
        printf("\n");
    }
    cpu_ce_set_block(0);
    tt_free(h), tt_free(W), tt_free(dh), tt_free(dW), free(targets);
    return 0;
}

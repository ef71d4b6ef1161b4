/* test_sampler.c — greedy, temperature, top-k and top-p sampling: which tokens
 * can come out, and that the empirical distribution matches the softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "commands/sampler.h"

#define NDRAW 20000

/* A slow reference for top-p: sort the whole vocabulary, cut the nucleus,
 * draw with the same uniform. tt_sample prunes before sorting; the token must
 * come out the same. */
typedef struct { double p; int id; } ref_cand;
static int ref_cmp(const void *x, const void *y)
{
    const ref_cand *a = x, *b = y;
    if (a->p != b->p) return a->p > b->p ? -1 : 1;
    return a->id - b->id;
}
static int ref_top_p(const float *logits, int V, float t, float top_p, tt_rng *rng, ref_cand *c)
{
    float mx = logits[0];
    for (int i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double total = 0.0;
    for (int i = 0; i < V; i++) {
        c[i].p = expf((float)((double)(logits[i] - mx) * (1.0 / t)));
        c[i].id = i;
    }
    qsort(c, (size_t)V, sizeof *c, ref_cmp);
    for (int i = 0; i < V; i++) total += c[i].p;
    double cum = 0.0;
    int n = V;
    for (int i = 0; i < V; i++) {
        cum += c[i].p;
        if (cum >= top_p * total) { n = i + 1; break; }
    }
    total = 0.0;
    for (int i = 0; i < n; i++) total += c[i].p;
    double r = tt_rng_uniform(rng) * total;
    cum = 0.0;
    for (int i = 0; i < n - 1; i++) {
        cum += c[i].p;
        if (r < cum) return c[i].id;
    }
    return c[n - 1].id;
}

/* Draw NDRAW tokens and return the frequency of each of the V ids in freq. */
static int draw_many(tt_sampler *s, const float *logits, int V, float t, int k, float p, double *freq)
{
    tt_rng rng = {1234, 0};
    memset(freq, 0, (size_t)V * sizeof *freq);
    for (int n = 0; n < NDRAW; n++) {
        int tok = -1;
        if (tt_sample(s, logits, V, t, k, p, &rng, &tok) != 0 || tok < 0 || tok >= V) return -1;
        freq[tok] += 1.0 / NDRAW;
    }
    return 0;
}

int main(void)
{
    tt_sampler s;
    CHECK(tt_sampler_init(&s, 8) == 0);
    tt_rng rng = {42, 0};
    int tok = -1;

    /* greedy: argmax, no rng draw */
    const float l6[6] = {0.1f, 2.0f, -1.0f, 3.5f, 3.0f, 0.0f};
    CHECK(tt_sample(&s, l6, 6, 0.0f, 0, 1.0f, &rng, &tok) == 0 && tok == 3);
    CHECK(rng.counter == 0);
    /* top_k = 1 and a tiny top_p are greedy at any temperature */
    int all_greedy = 1;
    for (int i = 0; i < 200; i++) {
        CHECK(tt_sample(&s, l6, 6, 1.5f, 1, 1.0f, &rng, &tok) == 0);
        all_greedy &= tok == 3;
        CHECK(tt_sample(&s, l6, 6, 1.5f, 0, 1e-6f, &rng, &tok) == 0);
        all_greedy &= tok == 3;
        CHECK(tt_sample(&s, l6, 6, 1.5f, 4, 1e-6f, &rng, &tok) == 0);
        all_greedy &= tok == 3;
    }
    CHECK(all_greedy);
    /* equal maxima: the lowest id, for greedy and for a tiny nucleus alike */
    const float tie[4] = {1.0f, 5.0f, 5.0f, 5.0f};
    CHECK(tt_sample(&s, tie, 4, 0.0f, 0, 1.0f, &rng, &tok) == 0 && tok == 1);
    CHECK(tt_sample(&s, tie, 4, 1.0f, 0, 1e-6f, &rng, &tok) == 0 && tok == 1);

    /* temperature 1: the empirical distribution matches softmax(logits) */
    const float l5[5] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
    double prob[5], freq[5], z = 0.0;
    for (int i = 0; i < 5; i++) z += exp(l5[i]);
    for (int i = 0; i < 5; i++) prob[i] = exp(l5[i]) / z;
    CHECK(draw_many(&s, l5, 5, 1.0f, 0, 1.0f, freq) == 0);
    for (int i = 0; i < 5; i++) CHECK_NEAR(freq[i], prob[i], 0.02);

    /* temperature 2 flattens: softmax(logits / 2) */
    z = 0.0;
    for (int i = 0; i < 5; i++) z += exp(l5[i] / 2.0);
    CHECK(draw_many(&s, l5, 5, 2.0f, 0, 1.0f, freq) == 0);
    for (int i = 0; i < 5; i++) CHECK_NEAR(freq[i], exp(l5[i] / 2.0) / z, 0.02);

    /* top_k = 2: only ids 1 and 4, in the ratio e^2 : e^1.5 */
    CHECK(draw_many(&s, l5, 5, 1.0f, 2, 1.0f, freq) == 0);
    CHECK(freq[0] == 0.0 && freq[2] == 0.0 && freq[3] == 0.0);
    CHECK_NEAR(freq[1], exp(2.0) / (exp(2.0) + exp(1.5)), 0.02);

    /* top_p: probs of l5 sorted are .367 (1), .223 (4), .135 (0), .082 (2),
     * .030 (3)... computed exactly below; the nucleus for 0.5 is {1, 4}. */
    double sorted_cum = prob[1] + prob[4];
    CHECK(sorted_cum >= 0.5 && prob[1] < 0.5);
    CHECK(draw_many(&s, l5, 5, 1.0f, 0, 0.5f, freq) == 0);
    CHECK(freq[0] == 0.0 && freq[2] == 0.0 && freq[3] == 0.0);
    CHECK_NEAR(freq[1], prob[1] / sorted_cum, 0.02);
    /* top_p just above the top two's mass pulls in id 0 as well */
    CHECK(draw_many(&s, l5, 5, 1.0f, 0, (float)(sorted_cum + 0.01), freq) == 0);
    CHECK(freq[0] > 0.0 && freq[2] == 0.0 && freq[3] == 0.0);
    CHECK_NEAR(freq[0], prob[0] / (sorted_cum + prob[0]), 0.02);
    /* top_k then top_p on the renormalised top-k: within {1, 4}, id 1 holds
     * 0.62 of the mass, so top_p 0.6 keeps only id 1 */
    CHECK(draw_many(&s, l5, 5, 1.0f, 2, 0.6f, freq) == 0);
    CHECK(freq[4] == 0.0 && freq[0] == 0.0 && fabs(freq[1] - 1.0) < 1e-9);

    /* -Inf logits are masked and never drawn */
    const float masked[4] = {-INFINITY, 0.0f, -INFINITY, 0.0f};
    CHECK(draw_many(&s, masked, 4, 1.0f, 0, 1.0f, freq) == 0);
    CHECK(freq[0] == 0.0 && freq[2] == 0.0);
    CHECK_NEAR(freq[1], 0.5, 0.02);

    /* V = 1 */
    const float one[1] = {-3.0f};
    CHECK(tt_sample(&s, one, 1, 1.0f, 0, 0.9f, &rng, &tok) == 0 && tok == 0);
    CHECK(tt_sample(&s, one, 1, 0.0f, 0, 1.0f, &rng, &tok) == 0 && tok == 0);

    /* determinism: the same rng state gives the same token */
    tt_rng a = {7, 99}, b = {7, 99};
    int ta, tb, same = 1;
    for (int i = 0; i < 100; i++) {
        CHECK(tt_sample(&s, l5, 5, 1.0f, 3, 0.9f, &a, &ta) == 0 && tt_sample(&s, l5, 5, 1.0f, 3, 0.9f, &b, &tb) == 0);
        same &= ta == tb;
    }
    CHECK(same && a.counter == 199 && b.counter == 199);

    /* a vocabulary larger than the initial buffer grows it once */
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)(i % 17) * 0.1f;
    big[777] = 10.0f;
    CHECK(tt_sample(&s, big, 1000, 0.01f, 0, 1.0f, &rng, &tok) == 0 && tok == 777);
    CHECK(s.cap >= 1000);
    CHECK(tt_sample(&s, big, 1000, 1.0f, 50, 0.95f, &rng, &tok) == 0 && tok >= 0 && tok < 1000);

    /* top-p with pruning agrees draw for draw with the full-sort reference */
    static ref_cand rc[1000];
    tt_rng gen = {5, 0};
    int agree = 1;
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < 1000; i++) big[i] = (float)(tt_rng_normal(&gen) * 2.0);
        float p = trial % 4 == 0 ? 1e-4f : (float)(0.5 + 0.49 * tt_rng_uniform(&gen));
        tt_rng r1 = {11, (uint64_t)trial}, r2 = r1;
        int got = -1;
        CHECK(tt_sample(&s, big, 1000, 0.8f, 0, p, &r1, &got) == 0);
        agree &= got == ref_top_p(big, 1000, 0.8f, p, &r2, rc);
    }
    CHECK(agree);

    /* a denormal temperature is greedy, not NaN */
    CHECK(tt_sample(&s, l5, 5, 1e-44f, 0, 1.0f, &rng, &tok) == 0 && tok == 1);

    /* errors */
    float bad[5] = {1.0f, NAN, 0.0f, 0.0f, 0.0f};
    CHECK(tt_sample(&s, bad, 5, 1.0f, 0, 1.0f, &rng, &tok) != 0);
    CHECK(strstr(tt_last_error(), "NaN") != NULL);
    CHECK(tt_sample(&s, bad, 5, 0.0f, 0, 1.0f, &rng, &tok) != 0);
    bad[1] = INFINITY;
    CHECK(tt_sample(&s, bad, 5, 1.0f, 0, 1.0f, &rng, &tok) != 0);
    const float none[2] = {-INFINITY, -INFINITY};
    CHECK(tt_sample(&s, none, 2, 1.0f, 0, 1.0f, &rng, &tok) != 0);
    CHECK(tt_sample(&s, l5, 0, 1.0f, 0, 1.0f, &rng, &tok) != 0);
    CHECK(tt_sample(&s, l5, 5, -1.0f, 0, 1.0f, &rng, &tok) != 0);
    CHECK(tt_sample(&s, l5, 5, 1.0f, -2, 1.0f, &rng, &tok) != 0);
    CHECK(tt_sample(&s, l5, 5, 1.0f, 0, 0.0f, &rng, &tok) != 0);
    CHECK(tt_sample(&s, l5, 5, 1.0f, 0, 1.5f, &rng, &tok) != 0);

    tt_sampler_free(&s);
    return th_done("test_sampler");
}

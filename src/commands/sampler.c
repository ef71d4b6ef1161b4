/* sampler.c — next-token sampling for generation. Plain softmax sampling is
 * one pass over the vocabulary; top-k keeps a k-entry heap and top-p prunes
 * tokens that cannot be in the nucleus before sorting, so neither sorts V. */
#include <math.h>
#include <stdlib.h>

#include "commands/sampler.h"

struct tt_sample_cand {
    float p; /* unnormalised probability exp((logit - max) / T) */
    int id;
};

/* The order "more probable first, then lower id": a strict total order, so
 * every sort and selection below is deterministic. */
static int cand_before(const struct tt_sample_cand *a, const struct tt_sample_cand *b)
{
    return a->p > b->p || (a->p == b->p && a->id < b->id);
}

static int cand_cmp(const void *x, const void *y)
{
    const struct tt_sample_cand *a = x, *b = y;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

tt_err tt_sampler_init(tt_sampler *s, int max_vocab)
{
    s->cand = NULL;
    s->cap = 0;
    if (max_vocab < 0) return tt_errorf("sampler: vocab size must be >= 0, got %d", max_vocab);
    if (max_vocab == 0) return TT_OK;
    s->cand = tt_alloc((size_t)max_vocab * sizeof *s->cand);
    if (!s->cand) return -1;
    s->cap = max_vocab;
    return TT_OK;
}

void tt_sampler_free(tt_sampler *s)
{
    tt_free(s->cand);
    s->cand = NULL;
    s->cap = 0;
}

/* Sift the heap entry at i down; the root is the *worst* kept candidate. */
static void heap_sift_down(struct tt_sample_cand *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_before(&h[w], &h[l])) w = l;
        if (r < n && cand_before(&h[w], &h[r])) w = r;
        if (w == i) return;
        struct tt_sample_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* Move the k best of c[0..n) to c[0..k), sorted best first. */
static void select_top_k(struct tt_sample_cand *c, int n, int k)
{
    for (int i = k / 2 - 1; i >= 0; i--) heap_sift_down(c, k, i);
    for (int i = k; i < n; i++) {
        if (cand_before(&c[i], &c[0])) {
            c[0] = c[i];
            heap_sift_down(c, k, 0);
        }
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

tt_err tt_sample(tt_sampler *s, const float *logits, int V, float temperature, int top_k, float top_p,
                 tt_rng *rng, int *out_token)
{
    if (V < 1) return tt_errorf("sampler: vocab size must be >= 1, got %d", V);
    if (!(temperature >= 0.0f) || isinf(temperature))
        return tt_errorf("sampler: temperature must be finite and >= 0, got %g", (double)temperature);
    if (top_k < 0) return tt_errorf("sampler: top_k must be >= 0, got %d", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) return tt_errorf("sampler: top_p must be in (0, 1], got %g", (double)top_p);

    int best = -1;
    for (int i = 0; i < V; i++) {
        float l = logits[i];
        if (isnan(l) || (isinf(l) && l > 0))
            return tt_errorf("sampler: logit %d of %d is %s", i, V, isnan(l) ? "NaN" : "+Inf");
        if (l > -INFINITY && (best < 0 || l > logits[best])) best = i;
    }
    if (best < 0) return tt_errorf("sampler: all %d logits are -Inf", V);
    if (temperature == 0.0f || top_k == 1 || V == 1) {
        *out_token = best;
        return TT_OK;
    }

    if (V > s->cap) {
        struct tt_sample_cand *c = tt_alloc((size_t)V * sizeof *c);
        if (!c) return tt_error_prefix("sampler: ");
        tt_free(s->cand);
        s->cand = c;
        s->cap = V;
    }
    struct tt_sample_cand *c = s->cand; // (V,)
    /* In double, so a denormal temperature gives a huge finite scale instead
     * of Inf (0 * Inf would turn the argmax into NaN). */
    const float maxl = logits[best];
    const double inv_t = 1.0 / (double)temperature;
    double total = 0.0;
    for (int i = 0; i < V; i++) {
        c[i].p = expf((float)((double)(logits[i] - maxl) * inv_t)); /* <= 1, and 1 at the argmax */
        c[i].id = i;
        total += c[i].p;
    }

    int n = V; /* candidates c[0..n), sorted best first whenever n < V */
    if (top_k > 0 && top_k < V) {
        select_top_k(c, V, top_k);
        n = top_k;
        total = 0.0;
        for (int i = 0; i < n; i++) total += c[i].p;
    }
    if (top_p < 1.0f) {
        if (n == V) {
            /* Prune before sorting. A nucleus member after the first has more
             * than (1 - top_p) of the mass at or after it, spread over at most
             * V - 1 tokens, so it is >= this cutoff. The first has the largest
             * p, which is 1 (the argmax), so capping the cutoff at 1 keeps it. */
            const double cutoff = fmin((1.0 - top_p) / (double)(V - 1) * total, 1.0);
            int m = 0;
            for (int i = 0; i < V; i++)
                if (c[i].p >= cutoff) c[m++] = c[i];
            qsort(c, (size_t)m, sizeof *c, cand_cmp);
            n = m;
        }
        double cum = 0.0, target = (double)top_p * total;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += c[i].p;
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        total = 0.0;
        for (int i = 0; i < n; i++) total += c[i].p;
    }

    /* Inverse-CDF draw over the kept candidates; the last one takes any
     * rounding slack so the draw always lands. */
    double r = tt_rng_uniform(rng) * total, cum = 0.0;
    for (int i = 0; i < n - 1; i++) {
        cum += c[i].p;
        if (r < cum) {
            *out_token = c[i].id;
            return TT_OK;
        }
    }
    *out_token = c[n - 1].id;
    return TT_OK;
}

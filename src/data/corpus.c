/* corpus.c — the synthetic corpus generator: a seeded made-up lexicon, a small
 * sentence grammar with entity references, and the exact NLL of what it emits. */
#include "data/corpus.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "data/shard.h"
#include "tokenizer/tokenizer_byte.h"

/* ---- the grammar ----------------------------------------------------------
 * Every item is a literal or a slot filled from one word class, all classes
 * and literals are disjoint sets of strings, and no two templates have the
 * same item sequence. Hence the class of each emitted word, and so the
 * template, is recoverable from the text: the process is uniquely decodable.
 * Slot R expands to "Name" or "the ROLE Name"; ROLE and Name occur nowhere
 * else in body sentences, so the expansion is recoverable too. */
static const struct {
    const char *text;
    double weight;
} templates[] = {
    {"the A N V the N", 1.0},   {"R V the A N", 1.5},          {"R V with R", 1.0},
    {"the N V D", 1.0},         {"R and R V the N", 1.0},      {"R D V the N of R", 1.0},
    {"the A N is A", 0.8},      {"R V the N in the A N", 1.0},
};
#define N_TEMPLATES ((int)(sizeof templates / sizeof templates[0]))
#define MAX_ITEMS 16
static const char *intro_template = "P is a O aged Y";

/* what one template item is */
enum { IT_LIT, IT_CLASS, IT_REF, IT_NEWNAME, IT_ROLE_OF_NEW, IT_AGE };
typedef struct {
    int kind, cls; /* cls for IT_CLASS */
    const char *lit;
    int lit_len;
} item;
typedef struct {
    item items[MAX_ITEMS];
    int n;
    double logp; /* log of the template's probability */
    int max_tokens;
} tmpl;

/* lexicon class shares of n_words (roles take the remainder): about in
 * proportion to how often the templates use each class, so that words of
 * every class are seen about equally often */
static const double class_share[TT_WC_ROLE] = {0.38, 0.30, 0.20, 0.07};

struct tt_corpus {
    tt_corpus_cfg cfg;
    char *pool; /* every word, NUL-terminated */
    int *off[TT_WC_COUNT], *len[TT_WC_COUNT];
    double *cdf[TT_WC_COUNT], *logp[TT_WC_COUNT]; /* Zipf, lowercase classes */
    int count[TT_WC_COUNT], maxlen[TT_WC_COUNT];
    tmpl body[N_TEMPLATES], intro;
    int max_body, max_intro;
};

tt_corpus_cfg tt_corpus_cfg_default(void)
{
    return (tt_corpus_cfg){
        .seed = 1234,
        .train_tokens = 3000000,
        .val_tokens = 200000,
        .max_doc_tokens = 256,
        .n_words = 1000,
        .n_names = 200,
        .zipf = 1.2,
        .p_stop = 0.5,
        .p_attr = 0.3,
        .min_entities = 2,
        .max_entities = 4,
    };
}

static int class_count(const tt_corpus_cfg *cfg, int cls)
{
    if (cls == TT_WC_NAME) return cfg->n_names;
    int used = 0;
    for (int c = 0; c < TT_WC_ROLE; c++) {
        int n = (int)(cfg->n_words * class_share[c]);
        if (c == cls) return n;
        used += n;
    }
    return cfg->n_words - used;
}

static tt_err check_fields(const tt_corpus_cfg *c)
{
    if (c->train_tokens < 1 || c->val_tokens < 1)
        return tt_errorf("corpus: train_tokens (%" PRId64 ") and val_tokens (%" PRId64 ") must be positive",
                         c->train_tokens, c->val_tokens);
    if (c->n_words < 100 || c->n_words > 1000000)
        return tt_errorf("corpus: n_words %d is outside [100, 1000000]", c->n_words);
    /* 2-syllable names number ~120k: stay well inside so drawing distinct ones is quick */
    if (c->n_names < c->max_entities || c->n_names > 50000)
        return tt_errorf("corpus: n_names %d must be in [max_entities=%d, 50000]", c->n_names, c->max_entities);
    if (c->min_entities < 1 || c->max_entities < c->min_entities || c->max_entities > 16)
        return tt_errorf("corpus: entities per document [%d, %d] must satisfy 1 <= min <= max <= 16",
                         c->min_entities, c->max_entities);
    if (!(c->zipf >= 0.0 && c->zipf <= 4.0)) return tt_errorf("corpus: zipf %g is outside [0, 4]", c->zipf);
    if (!(c->p_stop > 0.0 && c->p_stop < 1.0)) return tt_errorf("corpus: p_stop %g is outside (0, 1)", c->p_stop);
    if (!(c->p_attr > 0.0 && c->p_attr < 1.0)) return tt_errorf("corpus: p_attr %g is outside (0, 1)", c->p_attr);
    if (c->max_doc_tokens < 16 || c->max_doc_tokens > (1 << 20))
        return tt_errorf("corpus: max_doc_tokens %d is outside [16, 1048576]", c->max_doc_tokens);
    return TT_OK;
}

/* ---- lexicon ---------------------------------------------------------------
 * Words are 2 (sometimes 3) syllables of consonant + vowel (+ coda): pronounceable,
 * lowercase, and cheap for a small byte model to spell, so that most of the
 * entropy is in which word, not in how it is spelled. Names are 2 syllables,
 * capitalised. */
static const char *onsets[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"};
static const char *vowels[] = {"a", "e", "i", "o", "u"};
static const char *codas[] = {"", "", "", "", "", "", "n", "r", "l", "s"};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_WORD 32

static int make_word(tt_rng *r, int nsyl, char *out)
{
    int n = 0;
    for (int s = 0; s < nsyl; s++) {
        const char *parts[3] = {onsets[tt_rng_below(r, NELEM(onsets))], vowels[tt_rng_below(r, NELEM(vowels))],
                                codas[tt_rng_below(r, NELEM(codas))]};
        for (int p = 0; p < 3; p++)
            for (const char *q = parts[p]; *q; q++) out[n++] = *q;
    }
    out[n] = 0;
    return n;
}

/* open-addressing set of pool offsets, for distinctness */
typedef struct {
    int *slot;
    size_t mask;
    const char *pool;
} strset;

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

/* 1 if s is new (and now recorded at pool offset off), 0 if already present */
static int strset_add(strset *set, const char *s, int off)
{
    for (size_t i = str_hash(s) & set->mask;; i = (i + 1) & set->mask) {
        if (set->slot[i] < 0) {
            set->slot[i] = off;
            return 1;
        }
        if (strcmp(set->pool + set->slot[i], s) == 0) return 0;
    }
}

static int is_literal(const char *w)
{
    for (int t = 0; t <= N_TEMPLATES; t++) {
        const char *p = t < N_TEMPLATES ? templates[t].text : intro_template;
        while (*p) {
            const char *e = strchr(p, ' ');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (strlen(w) == n && strncmp(p, w, n) == 0) return 1;
            p += n + (e ? 1 : 0);
        }
    }
    return 0;
}

static tt_err build_lexicon(tt_corpus *c)
{
    const tt_corpus_cfg *cfg = &c->cfg;
    int total = 0;
    for (int k = 0; k < TT_WC_COUNT; k++) total += c->count[k] = class_count(cfg, k);
    size_t cap = 8;
    while (cap < (size_t)total * 4) cap <<= 1;
    c->pool = malloc((size_t)total * (MAX_WORD + 1));
    strset set = {malloc(cap * sizeof(int)), cap - 1, c->pool};
    if (!c->pool || !set.slot) {
        free(set.slot);
        return tt_errorf("corpus: out of memory for a %d-word lexicon", total);
    }
    for (size_t i = 0; i < cap; i++) set.slot[i] = -1;
    tt_rng r = {tt_hash64(cfg->seed, 0x6c657869636f6eull), 0};
    int used = 0;
    for (int k = 0; k < TT_WC_COUNT; k++) {
        c->off[k] = malloc(sizeof(int) * (size_t)c->count[k]);
        c->len[k] = malloc(sizeof(int) * (size_t)c->count[k]);
        if (!c->off[k] || !c->len[k]) {
            free(set.slot);
            return tt_errorf("corpus: out of memory");
        }
        for (int i = 0; i < c->count[k];) {
            char *w = c->pool + used;
            int nsyl = k == TT_WC_NAME ? 2 : 2 + (tt_rng_uniform(&r) < 0.15);
            int n = make_word(&r, nsyl, w);
            if (k == TT_WC_NAME) w[0] = (char)(w[0] - 'a' + 'A');
            /* English-like endings, known from the slot: verbs in -s,
             * adverbs in -ly. They cost nothing to predict once learned. */
            if (k == TT_WC_VERB) w[n++] = 's', w[n] = 0;
            if (k == TT_WC_ADV) w[n++] = 'l', w[n++] = 'y', w[n] = 0;
            /* 10^6 draws of a space of ~10^9 words: rejection always ends */
            if (is_literal(w) || !strset_add(&set, w, used)) continue;
            c->off[k][i] = used;
            c->len[k][i] = n;
            if (n > c->maxlen[k]) c->maxlen[k] = n;
            used += n + 1;
            i++;
        }
        if (k == TT_WC_NAME) continue;
        /* Zipf within the class: p(rank) ~ (rank + 1)^-zipf */
        c->cdf[k] = malloc(sizeof(double) * (size_t)c->count[k]);
        c->logp[k] = malloc(sizeof(double) * (size_t)c->count[k]);
        if (!c->cdf[k] || !c->logp[k]) {
            free(set.slot);
            return tt_errorf("corpus: out of memory");
        }
        double z = 0;
        for (int i = 0; i < c->count[k]; i++) z += pow(i + 1.0, -cfg->zipf);
        double acc = 0;
        for (int i = 0; i < c->count[k]; i++) {
            double p = pow(i + 1.0, -cfg->zipf) / z;
            c->logp[k][i] = log(p);
            acc += p;
            c->cdf[k][i] = acc;
        }
        c->cdf[k][c->count[k] - 1] = 2.0; /* every draw in [0, 1) lands */
    }
    free(set.slot);
    return TT_OK;
}

/* ---- templates --------------------------------------------------------- */
static int slot_class(char ch)
{
    switch (ch) {
    case 'N': return TT_WC_NOUN;
    case 'V': return TT_WC_VERB;
    case 'A': return TT_WC_ADJ;
    case 'D': return TT_WC_ADV;
    default: return -1;
    }
}

static tt_err parse_template(const tt_corpus *c, const char *text, int is_intro, tmpl *t)
{
    t->n = 0;
    t->max_tokens = 0;
    const int ref_max = c->maxlen[TT_WC_NAME] + 1 > 4 + c->maxlen[TT_WC_ROLE] + 1 + c->maxlen[TT_WC_NAME] + 1
                            ? c->maxlen[TT_WC_NAME] + 1
                            : 4 + c->maxlen[TT_WC_ROLE] + 1 + c->maxlen[TT_WC_NAME] + 1;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, ' ');
        int n = e ? (int)(e - p) : (int)strlen(p);
        if (t->n == MAX_ITEMS) return tt_errorf("corpus: template \"%s\" has too many items", text);
        item *it = &t->items[t->n++];
        *it = (item){IT_LIT, -1, p, n};
        if (n == 1 && p[0] >= 'A' && p[0] <= 'Z') {
            if (slot_class(p[0]) >= 0) it->kind = IT_CLASS, it->cls = slot_class(p[0]);
            else if (p[0] == 'R' && !is_intro) it->kind = IT_REF;
            else if (p[0] == 'P' && is_intro) it->kind = IT_NEWNAME;
            else if (p[0] == 'O' && is_intro) it->kind = IT_ROLE_OF_NEW;
            else if (p[0] == 'Y') it->kind = IT_AGE;
            else return tt_errorf("corpus: template \"%s\": unknown slot %c", text, p[0]);
        }
        switch (it->kind) {
        case IT_LIT: t->max_tokens += n + 1; break;
        case IT_CLASS: t->max_tokens += c->maxlen[it->cls] + 1; break;
        case IT_REF: t->max_tokens += ref_max; break;
        case IT_NEWNAME: t->max_tokens += c->maxlen[TT_WC_NAME] + 1; break;
        case IT_ROLE_OF_NEW: t->max_tokens += c->maxlen[TT_WC_ROLE] + 1; break;
        case IT_AGE: t->max_tokens += 3; break;
        }
        p += n + (e ? 1 : 0);
    }
    return TT_OK;
}

static tt_err build_grammar(tt_corpus *c)
{
    double wsum = 0;
    for (int i = 0; i < N_TEMPLATES; i++) wsum += templates[i].weight;
    c->max_body = 0;
    for (int i = 0; i < N_TEMPLATES; i++) {
        if (parse_template(c, templates[i].text, 0, &c->body[i]) != TT_OK) return -1;
        c->body[i].logp = log(templates[i].weight / wsum);
        if (c->body[i].max_tokens > c->max_body) c->max_body = c->body[i].max_tokens;
    }
    if (parse_template(c, intro_template, 1, &c->intro) != TT_OK) return -1;
    c->max_intro = c->intro.max_tokens;
    return TT_OK;
}

/* BOS, max_entities intros each with its joining space, one body sentence, EOS */
static int longest_min_doc(const tt_corpus *c)
{
    return 1 + c->cfg.max_entities * (c->max_intro + 1) + c->max_body + 1;
}

void tt_corpus_free(tt_corpus *c)
{
    if (!c) return;
    for (int k = 0; k < TT_WC_COUNT; k++) {
        free(c->off[k]);
        free(c->len[k]);
        free(c->cdf[k]);
        free(c->logp[k]);
    }
    free(c->pool);
    tt_free(c);
}

tt_corpus *tt_corpus_new(const tt_corpus_cfg *cfg)
{
    if (check_fields(cfg) != TT_OK) return NULL;
    tt_corpus *c = tt_alloc(sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    if (build_lexicon(c) != TT_OK || build_grammar(c) != TT_OK) {
        tt_corpus_free(c);
        return NULL;
    }
    if (longest_min_doc(c) > cfg->max_doc_tokens) {
        tt_errorf("corpus: max_doc_tokens %d is too small: %d intros and one sentence can take %d tokens",
                  cfg->max_doc_tokens, cfg->max_entities, longest_min_doc(c));
        tt_corpus_free(c);
        return NULL;
    }
    return c;
}

tt_err tt_corpus_cfg_check(const tt_corpus_cfg *cfg)
{
    tt_corpus *c = tt_corpus_new(cfg);
    if (!c) return -1;
    tt_corpus_free(c);
    return TT_OK;
}

const tt_corpus_cfg *tt_corpus_config(const tt_corpus *c) { return &c->cfg; }
int tt_corpus_n_templates(void) { return N_TEMPLATES; }
const char *tt_corpus_intro_template(void) { return intro_template; }
const char *tt_corpus_template(int i, double *weight)
{
    if (i < 0 || i >= N_TEMPLATES) return NULL;
    if (weight) *weight = templates[i].weight;
    return templates[i].text;
}
int tt_corpus_class_size(const tt_corpus *c, tt_word_class cls)
{
    return (int)cls >= 0 && cls < TT_WC_COUNT ? c->count[cls] : 0;
}
const char *tt_corpus_word(const tt_corpus *c, tt_word_class cls, int rank)
{
    if ((int)cls < 0 || cls >= TT_WC_COUNT || rank < 0 || rank >= c->count[cls]) return NULL;
    return c->pool + c->off[cls][rank];
}
int tt_corpus_max_sentence_tokens(const tt_corpus *c, int intro) { return intro ? c->max_intro : c->max_body; }

/* ---- one document -------------------------------------------------------- */
typedef struct {
    int32_t *tok;
    int n;
    double nll;
} docbuf;

static void emit_str(docbuf *d, const char *s, int n)
{
    for (int i = 0; i < n; i++) d->tok[d->n++] = (uint8_t)s[i];
}

static void emit_word(docbuf *d, const tt_corpus *c, int cls, int rank)
{
    emit_str(d, c->pool + c->off[cls][rank], c->len[cls][rank]);
}

static int draw_zipf(const tt_corpus *c, int cls, tt_rng *r, double *nll)
{
    double u = tt_rng_uniform(r);
    const double *cdf = c->cdf[cls];
    int lo = 0, hi = c->count[cls] - 1; /* first i with cdf[i] > u */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    *nll -= c->logp[cls][lo];
    return lo;
}

/* Emit one sentence; items separated by spaces, '.' at the end. ents/roles
 * hold the k entities introduced so far. */
static void emit_sentence(const tt_corpus *c, const tmpl *t, tt_rng *r, docbuf *d, int *ents, int *roles, int *k)
{
    const tt_corpus_cfg *cfg = &c->cfg;
    const int start = d->n;
    for (int i = 0; i < t->n; i++) {
        const item *it = &t->items[i];
        if (i) d->tok[d->n++] = ' ';
        switch (it->kind) {
        case IT_LIT: emit_str(d, it->lit, it->lit_len); break;
        case IT_CLASS: emit_word(d, c, it->cls, draw_zipf(c, it->cls, r, &d->nll)); break;
        case IT_REF: {
            int e = (int)tt_rng_below(r, (uint64_t)*k);
            d->nll += log((double)*k);
            int attr = tt_rng_uniform(r) < cfg->p_attr;
            d->nll -= log(attr ? cfg->p_attr : 1.0 - cfg->p_attr);
            if (attr) {
                emit_str(d, "the ", 4);
                emit_word(d, c, TT_WC_ROLE, roles[e]);
                d->tok[d->n++] = ' ';
            }
            emit_word(d, c, TT_WC_NAME, ents[e]);
            break;
        }
        case IT_NEWNAME: {
            /* uniform among the names not yet introduced in this document */
            int avail = cfg->n_names - *k;
            int pick = (int)tt_rng_below(r, (uint64_t)avail);
            d->nll += log((double)avail);
            /* the pick-th unused name: step over taken ids in ascending order */
            int sorted[16], name = pick;
            for (int j = 0; j < *k; j++) {
                int v = ents[j], m = j;
                while (m > 0 && sorted[m - 1] > v) sorted[m] = sorted[m - 1], m--;
                sorted[m] = v;
            }
            for (int j = 0; j < *k; j++) name += name >= sorted[j];
            ents[*k] = name;
            emit_word(d, c, TT_WC_NAME, name);
            break;
        }
        case IT_AGE: {
            /* a number 10..99, uniform: easy to model, but real entropy */
            int age = 10 + (int)tt_rng_below(r, 90);
            d->nll += log(90.0);
            d->tok[d->n++] = '0' + age / 10;
            d->tok[d->n++] = '0' + age % 10;
            break;
        }
        case IT_ROLE_OF_NEW:
            roles[*k] = draw_zipf(c, TT_WC_ROLE, r, &d->nll);
            emit_word(d, c, TT_WC_ROLE, roles[*k]);
            (*k)++;
            break;
        }
    }
    d->tok[d->n++] = '.';
    /* sentences start with a capital, as in English; a deterministic rewrite,
     * so it costs no probability */
    if (d->tok[start] >= 'a' && d->tok[start] <= 'z') d->tok[start] += 'A' - 'a';
}

static void gen_doc(const tt_corpus *c, tt_rng *r, docbuf *d)
{
    const tt_corpus_cfg *cfg = &c->cfg;
    int ents[16], roles[16], k = 0;
    d->n = 0;
    d->nll = 0;
    d->tok[d->n++] = TT_BYTE_BOS;
    int span = cfg->max_entities - cfg->min_entities + 1;
    int n_ent = cfg->min_entities + (int)tt_rng_below(r, (uint64_t)span);
    d->nll += log((double)span);
    for (int j = 0; j < n_ent; j++) {
        if (j) d->tok[d->n++] = ' ';
        emit_sentence(c, &c->intro, r, d, ents, roles, &k);
    }
    double wsum = 0;
    for (int i = 0; i < N_TEMPLATES; i++) wsum += templates[i].weight;
    for (;;) {
        d->tok[d->n++] = ' ';
        double u = tt_rng_uniform(r) * wsum, acc = 0;
        int t = 0;
        while (t < N_TEMPLATES - 1 && u >= (acc += templates[t].weight)) t++;
        d->nll -= c->body[t].logp;
        emit_sentence(c, &c->body[t], r, d, ents, roles, &k);
        /* the cap is part of the process: stop surely when the longest
         * sentence (with its joining space and the EOS) might not fit */
        if (d->n + 1 + c->max_body + 1 > cfg->max_doc_tokens) break;
        int stop = tt_rng_uniform(r) < cfg->p_stop;
        d->nll -= log(stop ? cfg->p_stop : 1.0 - cfg->p_stop);
        if (stop) break;
    }
    d->tok[d->n++] = TT_BYTE_EOS;
}

static uint64_t split_seed(const tt_corpus_cfg *cfg, tt_corpus_split split)
{
    return tt_hash64(cfg->seed, 0x73706c6974ull + (uint64_t)split);
}

tt_err tt_corpus_gen_doc(const tt_corpus *c, tt_corpus_split split, uint64_t index, int32_t *tokens, int cap,
                         int *n_tokens, double *nll)
{
    if (split != TT_CORPUS_TRAIN && split != TT_CORPUS_VAL) return tt_errorf("corpus: unknown split %d", (int)split);
    if (cap < c->cfg.max_doc_tokens)
        return tt_errorf("corpus: document buffer of %d tokens is below max_doc_tokens %d", cap,
                         c->cfg.max_doc_tokens);
    tt_rng r = {tt_hash64(split_seed(&c->cfg, split), index), 0};
    docbuf d = {tokens, 0, 0};
    gen_doc(c, &r, &d);
    *n_tokens = d.n;
    *nll = d.nll;
    return TT_OK;
}

/* ---- writing the splits ------------------------------------------------ */
typedef struct {
    int64_t tokens, docs, scored;
    double nll;
    int64_t hist[TT_BYTE_VOCAB];
} split_acc;

static tt_err write_split(const tt_corpus *c, tt_corpus_split split, const char *path, int64_t target, split_acc *a)
{
    memset(a, 0, sizeof *a);
    tt_shard_writer *w = tt_shard_writer_open(path, 2, TT_BYTE_BOS, TT_BYTE_VOCAB);
    if (!w) return -1;
    int cap = c->cfg.max_doc_tokens;
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)cap);
    if (!buf) {
        tt_shard_writer_abort(w);
        return tt_errorf("corpus: out of memory");
    }
    while (a->tokens < target) {
        int n;
        double nll;
        tt_corpus_gen_doc(c, split, (uint64_t)a->docs, buf, cap, &n, &nll);
        if (tt_shard_writer_append(w, buf, (size_t)n) != TT_OK) {
            free(buf);
            tt_shard_writer_abort(w);
            return -1;
        }
        a->tokens += n;
        a->docs++;
        a->scored += n - 1; /* every token after BOS is predicted */
        a->nll += nll;
        for (int i = 1; i < n; i++) a->hist[buf[i]]++;
    }
    free(buf);
    return tt_shard_writer_close(w);
}

tt_err tt_corpus_write(const tt_corpus_cfg *cfg, const char *train_path, const char *val_path, tt_corpus_stats *out)
{
    tt_corpus *c = tt_corpus_new(cfg);
    if (!c) return -1;
    split_acc *a = malloc(2 * sizeof *a);
    if (!a) {
        tt_corpus_free(c);
        return tt_errorf("corpus: out of memory");
    }
    tt_err err = write_split(c, TT_CORPUS_TRAIN, train_path, cfg->train_tokens, &a[0]);
    if (!err) err = write_split(c, TT_CORPUS_VAL, val_path, cfg->val_tokens, &a[1]);
    if (!err && out) {
        double h = 0;
        for (int i = 0; i < TT_BYTE_VOCAB; i++)
            if (a[1].hist[i]) {
                double p = (double)a[1].hist[i] / (double)a[1].scored;
                h -= p * log(p);
            }
        *out = (tt_corpus_stats){
            .floor_nats = a[1].nll / (double)a[1].scored,
            .unigram_nats = h,
            .train_floor_nats = a[0].nll / (double)a[0].scored,
            .train_tokens = a[0].tokens,
            .val_tokens = a[1].tokens,
            .train_docs = a[0].docs,
            .val_docs = a[1].docs,
            .val_scored_tokens = a[1].scored,
        };
        out->gap_nats = out->unigram_nats - out->floor_nats;
    }
    free(a);
    tt_corpus_free(c);
    return err;
}

/* ---- JSON -------------------------------------------------------------- */
int tt_corpus_cfg_equal(const tt_corpus_cfg *a, const tt_corpus_cfg *b)
{
    return a->seed == b->seed && a->train_tokens == b->train_tokens && a->val_tokens == b->val_tokens &&
           a->max_doc_tokens == b->max_doc_tokens && a->n_words == b->n_words && a->n_names == b->n_names &&
           a->zipf == b->zipf && a->p_stop == b->p_stop && a->p_attr == b->p_attr &&
           a->min_entities == b->min_entities && a->max_entities == b->max_entities;
}

/* cJSON prints doubles with 15 significant digits when they compare equal
 * within an epsilon, which can lose the last bit: print the shortest of 15 or
 * 17 digits that reads back exactly. */
static cJSON *add_double(cJSON *obj, const char *key, double v)
{
    char buf[40];
    if (!isfinite(v)) v = 0.0;
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    cJSON *item = cJSON_CreateRaw(buf);
    if (item && !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return NULL;
    }
    return item;
}

cJSON *tt_corpus_stats_to_json(const tt_corpus_cfg *cfg, const tt_corpus_stats *st)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *jc = root ? cJSON_AddObjectToObject(root, "config") : NULL;
    cJSON *js = root ? cJSON_AddObjectToObject(root, "stats") : NULL;
    if (!jc || !js) goto oom;
    char seed[32];
    snprintf(seed, sizeof seed, "%" PRIu64, cfg->seed);
    int ok = cJSON_AddStringToObject(jc, "seed", seed) && cJSON_AddNumberToObject(jc, "train_tokens", (double)cfg->train_tokens) &&
             cJSON_AddNumberToObject(jc, "val_tokens", (double)cfg->val_tokens) &&
             cJSON_AddNumberToObject(jc, "max_doc_tokens", cfg->max_doc_tokens) &&
             cJSON_AddNumberToObject(jc, "n_words", cfg->n_words) && cJSON_AddNumberToObject(jc, "n_names", cfg->n_names) &&
             add_double(jc, "zipf", cfg->zipf) && add_double(jc, "p_stop", cfg->p_stop) &&
             add_double(jc, "p_attr", cfg->p_attr) &&
             cJSON_AddNumberToObject(jc, "min_entities", cfg->min_entities) &&
             cJSON_AddNumberToObject(jc, "max_entities", cfg->max_entities) &&
             add_double(js, "floor_nats", st->floor_nats) &&
             add_double(js, "unigram_nats", st->unigram_nats) &&
             add_double(js, "gap_nats", st->gap_nats) &&
             add_double(js, "train_floor_nats", st->train_floor_nats) &&
             cJSON_AddNumberToObject(js, "train_tokens", (double)st->train_tokens) &&
             cJSON_AddNumberToObject(js, "val_tokens", (double)st->val_tokens) &&
             cJSON_AddNumberToObject(js, "train_docs", (double)st->train_docs) &&
             cJSON_AddNumberToObject(js, "val_docs", (double)st->val_docs) &&
             cJSON_AddNumberToObject(js, "val_scored_tokens", (double)st->val_scored_tokens);
    if (ok) return root;
oom:
    cJSON_Delete(root);
    tt_errorf("corpus: out of memory building JSON");
    return NULL;
}

static tt_err get_num(const cJSON *obj, const char *sect, const char *key, const char *where, double lo, double hi,
                      int integral, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) return tt_errorf("%s: %s.%s is missing or not a number", where, sect, key);
    double x = v->valuedouble;
    if (!(x >= lo && x <= hi) || (integral && x != floor(x)))
        return tt_errorf("%s: %s.%s = %g is out of range", where, sect, key, x);
    *out = x;
    return TT_OK;
}

tt_err tt_corpus_stats_from_json(const cJSON *j, const char *where, tt_corpus_cfg *cfg, tt_corpus_stats *st)
{
    const cJSON *jc = cJSON_GetObjectItemCaseSensitive(j, "config");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(j, "stats");
    const double big = 9007199254740992.0; /* 2^53: exact in a double */
    double v[11];
    if (cfg) {
        if (!cJSON_IsObject(jc)) return tt_errorf("%s: missing object \"config\"", where);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(jc, "seed");
        char *end;
        if (!cJSON_IsString(s) || !s->valuestring[0] || s->valuestring[0] == '-')
            return tt_errorf("%s: config.seed is missing or not a decimal string", where);
        errno = 0;
        unsigned long long seed = strtoull(s->valuestring, &end, 10);
        if (*end || errno) return tt_errorf("%s: config.seed \"%s\" is not a 64-bit decimal", where, s->valuestring);
        static const char *keys[] = {"train_tokens", "val_tokens", "max_doc_tokens", "n_words", "n_names", "zipf",
                                     "p_stop", "p_attr", "min_entities", "max_entities"};
        for (int i = 0; i < 10; i++)
            if (get_num(jc, "config", keys[i], where, 0, (i < 2) ? big : (i >= 5 && i <= 7) ? 4.0 : 2147483647.0,
                        !(i >= 5 && i <= 7), &v[i]) != TT_OK)
                return -1;
        *cfg = (tt_corpus_cfg){.seed = seed, .train_tokens = (int64_t)v[0], .val_tokens = (int64_t)v[1],
                               .max_doc_tokens = (int)v[2], .n_words = (int)v[3], .n_names = (int)v[4],
                               .zipf = v[5], .p_stop = v[6], .p_attr = v[7], .min_entities = (int)v[8],
                               .max_entities = (int)v[9]};
    }
    if (st) {
        if (!cJSON_IsObject(js)) return tt_errorf("%s: missing object \"stats\"", where);
        static const char *keys[] = {"floor_nats", "unigram_nats", "gap_nats", "train_floor_nats",
                                     "train_tokens", "val_tokens", "train_docs", "val_docs", "val_scored_tokens"};
        for (int i = 0; i < 9; i++)
            if (get_num(js, "stats", keys[i], where, i < 4 ? -100.0 : 0.0, i < 4 ? 100.0 : big, i >= 4, &v[i]) != TT_OK)
                return -1;
        *st = (tt_corpus_stats){.floor_nats = v[0], .unigram_nats = v[1], .gap_nats = v[2],
                                .train_floor_nats = v[3], .train_tokens = (int64_t)v[4], .val_tokens = (int64_t)v[5],
                                .train_docs = (int64_t)v[6], .val_docs = (int64_t)v[7],
                                .val_scored_tokens = (int64_t)v[8]};
    }
    return TT_OK;
}

/* ---- prepare: generate once, reuse while the config matches ------------- */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1 << 20) && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = 0;
    else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* 1 if dir holds a corpus for exactly cfg whose shards open and match the
 * cached counts; fills st */
static int cached_ok(const tt_corpus_cfg *cfg, const char *json_path, const char *train, const char *val,
                     tt_corpus_stats *st)
{
    char *text = read_text(json_path);
    if (!text) return 0;
    cJSON *j = cJSON_Parse(text);
    free(text);
    tt_corpus_cfg old;
    int ok = j && tt_corpus_stats_from_json(j, json_path, &old, st) == TT_OK && tt_corpus_cfg_equal(&old, cfg);
    cJSON_Delete(j);
    for (int i = 0; ok && i < 2; i++) {
        tt_shard *s = tt_shard_open(i ? val : train);
        ok = s && s->hdr.token_count == (uint64_t)(i ? st->val_tokens : st->train_tokens) &&
             s->hdr.bos_id == TT_BYTE_BOS && s->hdr.vocab_size == TT_BYTE_VOCAB;
        tt_shard_close(s);
    }
    return ok;
}

tt_err tt_corpus_prepare(const tt_corpus_cfg *cfg, const char *dir, tt_corpus_stats *out)
{
    char train[4096], val[4096], json[4096], tmp[4200];
    if (snprintf(train, sizeof train, "%s/train.bin", dir) >= (int)sizeof train ||
        snprintf(val, sizeof val, "%s/val.bin", dir) >= (int)sizeof val ||
        snprintf(json, sizeof json, "%s/corpus.json", dir) >= (int)sizeof json)
        return tt_errorf("%s: path too long", dir);
    tt_corpus_stats st;
    if (cached_ok(cfg, json, train, val, &st)) {
        if (out) *out = st;
        return TT_OK;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return tt_errorf("%s: cannot create directory: %s", dir, strerror(errno));
    if (tt_corpus_write(cfg, train, val, &st) != TT_OK) return -1;
    cJSON *j = tt_corpus_stats_to_json(cfg, &st);
    if (!j) return -1;
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text) return tt_errorf("%s: out of memory", json);
    snprintf(tmp, sizeof tmp, "%s.tmp", json);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(text);
    if (!ok || rename(tmp, json) != 0) {
        unlink(tmp);
        return tt_errorf("%s: cannot write: %s", json, strerror(errno));
    }
    if (out) *out = st;
    return TT_OK;
}

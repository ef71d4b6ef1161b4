/* test_corpus.c — the byte tokenizer and the synthetic corpus: determinism,
 * the lexicon, the document cap, the entropy gap, JSON caching, and an
 * independent parser that re-derives each document's NLL from its bytes alone
 * (and counts its derivations), which is what makes the floor trustworthy;
 * and the floor's tokens are the loader's, at any seq_len. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/shard.h"
#include "tokenizer/tokenizer_byte.h"

/* ---- byte tokenizer ------------------------------------------------------ */
static void test_tokenizer(void)
{
    const char *text = "Zorba is a baker.\n\xff\x00";
    size_t n = 20, k;
    int32_t ids[32];
    uint8_t back[32];
    CHECK(tt_byte_encode(text, n, TT_BYTE_ADD_BOS | TT_BYTE_ADD_EOS, ids, 32, &k) == 0);
    CHECK(k == n + 2 && ids[0] == TT_BYTE_BOS && ids[k - 1] == TT_BYTE_EOS && ids[1] == 'Z' && ids[19] == 0xff);
    CHECK(tt_byte_decode(ids, k, 0, back, sizeof back, &k) == 0);
    CHECK(k == n && memcmp(back, text, n) == 0);
    CHECK(tt_byte_encode(text, n, TT_BYTE_ADD_BOS, ids, n, &k) != 0); /* no room for BOS */
    int32_t bad[4] = {'a', 258, 'b', -1};
    CHECK(tt_byte_decode(bad, 4, 0, back, sizeof back, &k) != 0);
    CHECK(strstr(tt_last_error(), "position 1") != NULL);
    CHECK(tt_byte_decode(bad, 4, TT_BYTE_SKIP_INVALID, back, sizeof back, &k) == 0 && k == 2 && back[1] == 'b');
    CHECK(tt_byte_decode(bad, 3, TT_BYTE_SKIP_INVALID, back, 1, &k) != 0); /* out buffer too small */
}

/* ---- an independent parser of documents ----------------------------------
 * It knows the grammar only as the published template strings and the
 * process rules in corpus.h, recomputes Zipf probabilities from the config,
 * and sums over every derivation it finds; the generator's choices are never
 * seen. */
typedef struct {
    const char *s;
    int cls, rank;
} lexent;

typedef struct {
    const tt_corpus *c;
    tt_corpus_cfg cfg;
    lexent *lex;
    int nlex;
    double *logz[TT_WC_COUNT]; /* log Zipf probability per rank */
    double tlogp[64];          /* log template probability */
    char titems[64][16][16];   /* template items */
    int tn[64], ntempl;
    int max_body;
    /* the document being parsed */
    char words[512][40];
    int sent_first[128], sent_n[128], sent_end[128], nsent; /* sent_end: tokens through its '.', BOS included */
    double logps[64];
    int nderiv;
} parser;

static int lex_cmp(const void *a, const void *b) { return strcmp(((const lexent *)a)->s, ((const lexent *)b)->s); }

static const lexent *lookup(const parser *p, const char *w)
{
    lexent key = {w, 0, 0};
    return bsearch(&key, p->lex, (size_t)p->nlex, sizeof key, lex_cmp);
}

static int split_items(const char *text, char items[16][16])
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) snprintf(items[n++], 16, "%s", t);
    return n;
}

static int word_len_max(const parser *p, int cls)
{
    int m = 0;
    for (int i = 0; i < tt_corpus_class_size(p->c, cls); i++) {
        int n = (int)strlen(tt_corpus_word(p->c, cls, i));
        if (n > m) m = n;
    }
    return m;
}

static void parser_init(parser *p, const tt_corpus *c)
{
    memset(p, 0, sizeof *p);
    p->c = c;
    p->cfg = *tt_corpus_config(c);
    for (int k = 0; k < TT_WC_COUNT; k++) p->nlex += tt_corpus_class_size(c, k);
    p->lex = malloc(sizeof(lexent) * (size_t)p->nlex);
    int at = 0;
    for (int k = 0; k < TT_WC_COUNT; k++) {
        int n = tt_corpus_class_size(c, k);
        p->logz[k] = malloc(sizeof(double) * (size_t)n);
        double z = 0;
        for (int r = 0; r < n; r++) z += pow(r + 1.0, -p->cfg.zipf);
        for (int r = 0; r < n; r++) {
            p->logz[k][r] = log(pow(r + 1.0, -p->cfg.zipf) / z);
            p->lex[at++] = (lexent){tt_corpus_word(c, k, r), k, r};
        }
    }
    qsort(p->lex, (size_t)p->nlex, sizeof(lexent), lex_cmp);
    double wsum = 0;
    p->ntempl = tt_corpus_n_templates();
    for (int t = 0; t < p->ntempl; t++) {
        double w;
        p->tn[t] = split_items(tt_corpus_template(t, &w), p->titems[t]);
        wsum += w;
    }
    /* longest body sentence: recomputed from the lexicon and templates */
    int name = word_len_max(p, TT_WC_NAME), role = word_len_max(p, TT_WC_ROLE);
    int ref = name + 1 > 4 + role + 1 + name + 1 ? name + 1 : 4 + role + 1 + name + 1;
    for (int t = 0; t < p->ntempl; t++) {
        double w;
        tt_corpus_template(t, &w);
        p->tlogp[t] = log(w / wsum);
        int len = 0;
        for (int i = 0; i < p->tn[t]; i++) {
            const char *it = p->titems[t][i];
            if (!strcmp(it, "N")) len += word_len_max(p, TT_WC_NOUN) + 1;
            else if (!strcmp(it, "V")) len += word_len_max(p, TT_WC_VERB) + 1;
            else if (!strcmp(it, "A")) len += word_len_max(p, TT_WC_ADJ) + 1;
            else if (!strcmp(it, "D")) len += word_len_max(p, TT_WC_ADV) + 1;
            else if (!strcmp(it, "R")) len += ref;
            else len += (int)strlen(it) + 1;
        }
        if (len > p->max_body) p->max_body = len;
    }
}

static void parser_free(parser *p)
{
    free(p->lex);
    for (int k = 0; k < TT_WC_COUNT; k++) free(p->logz[k]);
}

typedef struct {
    int name[16], role[16], k;
} ents;

/* match items[ii..] of one sentence against words[wi..we); intro extends e.
 * Calls done() for each full match with the sentence's log-probability. */
static void sentence_done(parser *p, int s, const ents *e, double lp, int body);
static void match(parser *p, int s, char (*items)[16], int ni, int ii, int wi, int we, const char *w0, ents e,
                  double lp, int body)
{
    if (ii == ni) {
        if (wi == we) sentence_done(p, s, &e, lp, body);
        return;
    }
    if (wi >= we) return;
    const char *it = items[ii];
    const char *w = wi == p->sent_first[s] ? w0 : p->words[wi];
    const lexent *x = lookup(p, w);
    if (!strcmp(it, "N") || !strcmp(it, "V") || !strcmp(it, "A") || !strcmp(it, "D")) {
        int cls = it[0] == 'N' ? TT_WC_NOUN : it[0] == 'V' ? TT_WC_VERB : it[0] == 'A' ? TT_WC_ADJ : TT_WC_ADV;
        if (x && x->cls == cls) match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, lp + p->logz[cls][x->rank], body);
    } else if (!strcmp(it, "R")) {
        const double lk = -log((double)e.k);
        if (x && x->cls == TT_WC_NAME)
            for (int j = 0; j < e.k; j++)
                if (e.name[j] == x->rank)
                    match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, lp + lk + log(1 - p->cfg.p_attr), body);
        if (!strcmp(w, "the") && wi + 2 < we) {
            const lexent *r = lookup(p, p->words[wi + 1]), *n = lookup(p, p->words[wi + 2]);
            if (r && n && r->cls == TT_WC_ROLE && n->cls == TT_WC_NAME)
                for (int j = 0; j < e.k; j++)
                    if (e.name[j] == n->rank && e.role[j] == r->rank)
                        match(p, s, items, ni, ii + 1, wi + 3, we, w0, e, lp + lk + log(p->cfg.p_attr), body);
        }
    } else if (!strcmp(it, "P")) {
        int fresh = x && x->cls == TT_WC_NAME;
        for (int j = 0; fresh && j < e.k; j++) fresh = e.name[j] != x->rank;
        if (fresh) {
            double l2 = lp - log((double)(p->cfg.n_names - e.k));
            e.name[e.k] = x->rank;
            match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, l2, body);
        }
    } else if (!strcmp(it, "Y")) {
        if (strlen(w) == 2 && w[0] >= '1' && w[0] <= '9' && w[1] >= '0' && w[1] <= '9')
            match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, lp - log(90.0), body);
    } else if (!strcmp(it, "O")) {
        if (x && x->cls == TT_WC_ROLE) {
            e.role[e.k++] = x->rank;
            match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, lp + p->logz[TT_WC_ROLE][x->rank], body);
        }
    } else if (!strcmp(it, w)) {
        match(p, s, items, ni, ii + 1, wi + 1, we, w0, e, lp, body);
    }
}

static void parse_from(parser *p, int s, ents e, int body, double lp);

/* one sentence matched (lp: the document so far, this sentence included):
 * apply the document-level rules and go on */
static void sentence_done(parser *p, int s, const ents *e, double lp, int body)
{
    if (body) {
        int forced = p->sent_end[s] + 1 + p->max_body + 1 > p->cfg.max_doc_tokens;
        if (s + 1 == p->nsent) { /* stopped here */
            if (!forced) lp += log(p->cfg.p_stop);
            if (p->nderiv < 64) p->logps[p->nderiv] = lp;
            p->nderiv++;
            return;
        }
        if (forced) return; /* continuing was impossible */
        lp += log(1 - p->cfg.p_stop);
    }
    parse_from(p, s + 1, *e, body, lp);
}

static void parse_from(parser *p, int s, ents e, int body, double lp)
{
    if (s == p->nsent) return; /* ended without a body sentence */
    /* the first letter of a sentence is capitalised: undo it both ways */
    char w0[2][40];
    int nw0 = 0;
    const char *first = p->words[p->sent_first[s]];
    if (first[0] < 'A' || first[0] > 'Z') return;
    snprintf(w0[nw0++], 40, "%s", first);
    snprintf(w0[nw0], 40, "%s", first);
    w0[nw0++][0] += 'a' - 'A';
    const int wb = p->sent_first[s], we = wb + p->sent_n[s];
    for (int v = 0; v < nw0; v++) {
        if (!body && e.k < p->cfg.max_entities) {
            char items[16][16];
            int ni = split_items(tt_corpus_intro_template(), items);
            match(p, s, items, ni, 0, wb, we, w0[v], e, lp, 0);
        }
        if (e.k >= p->cfg.min_entities) {
            /* entering the body fixes the entity count: a uniform choice */
            double lp_body = body ? lp : lp - log((double)(p->cfg.max_entities - p->cfg.min_entities + 1));
            for (int t = 0; t < p->ntempl; t++)
                match(p, s, p->titems[t], p->tn[t], 0, wb, we, w0[v], e, lp_body + p->tlogp[t], 1);
        }
    }
}

/* Returns the number of derivations; *nll = -log of the summed probability. */
static int parse_doc(parser *p, const int32_t *tok, int n, double *nll)
{
    p->nderiv = 0;
    p->nsent = 0;
    if (n < 3 || tok[0] != TT_BYTE_BOS || tok[n - 1] != TT_BYTE_EOS) return 0;
    int nw = 0, i = 1;
    while (i < n - 1) {
        /* a sentence: words separated by single spaces, then '.' */
        p->sent_first[p->nsent] = nw;
        for (;;) {
            int len = 0;
            while (i < n - 1 && tok[i] != ' ' && tok[i] != '.') {
                int ch = tok[i++];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) || len >= 39)
                    return 0;
                p->words[nw][len++] = (char)ch;
            }
            if (len == 0 || i >= n - 1 || nw >= 511) return 0;
            p->words[nw++][len] = 0;
            if (tok[i++] == '.') break;
        }
        p->sent_n[p->nsent] = nw - p->sent_first[p->nsent];
        p->sent_end[p->nsent] = i; /* tokens so far: BOS + text through '.' */
        if (++p->nsent >= 127) return 0;
        if (i < n - 1 && tok[i++] != ' ') return 0;
        if (i == n - 1 && tok[i - 1] == ' ') return 0;
    }
    ents e = {.k = 0};
    parse_from(p, 0, e, 0, 0.0);
    if (p->nderiv == 0) return 0;
    double m = p->logps[0], s = 0;
    int kept = p->nderiv < 64 ? p->nderiv : 64;
    for (int d = 1; d < kept; d++) m = fmax(m, p->logps[d]);
    for (int d = 0; d < kept; d++) s += exp(p->logps[d] - m);
    *nll = -(m + log(s));
    return p->nderiv;
}

static int doc_has(const int32_t *tok, int n, const char *w)
{
    int len = (int)strlen(w);
    for (int a = 0; a + len <= n; a++) {
        int eq = 1;
        for (int b = 0; b < len && eq; b++) eq = tok[a + b] == (uint8_t)w[b];
        if (eq) return 1;
    }
    return 0;
}

static void test_parser(const tt_corpus_cfg *cfg, int ndocs, const char *label)
{
    tt_corpus *c = tt_corpus_new(cfg);
    CHECK_MSG(c != NULL, "%s", tt_last_error());
    if (!c) return;
    parser *p = malloc(sizeof *p);
    parser_init(p, c);
    CHECK(p->max_body == tt_corpus_max_sentence_tokens(c, 0));
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)cfg->max_doc_tokens);
    int bad_count = 0, bad_nll = 0, over = 0, capped = 0, rejected = 0, min_len = 1 << 30, max_len = 0;
    double worst = 0;
    for (int d = 0; d < ndocs; d++) {
        int n;
        double nll, pnll = 0;
        CHECK(tt_corpus_gen_doc(c, d & 1 ? TT_CORPUS_VAL : TT_CORPUS_TRAIN, (uint64_t)d, tok, cfg->max_doc_tokens,
                                &n, &nll) == 0);
        if (n > cfg->max_doc_tokens) over++;
        if (n + p->max_body + 1 > cfg->max_doc_tokens) capped++; /* the forced stop may have applied */
        min_len = n < min_len ? n : min_len;
        max_len = n > max_len ? n : max_len;
        int k = parse_doc(p, tok, n, &pnll);
        if (k != 1) {
            if (bad_count++ < 3) {
                fprintf(stderr, "%s doc %d: %d derivations: ", label, d, k);
                for (int i = 1; i < n - 1; i++) fputc(tok[i], stderr);
                fputc('\n', stderr);
            }
            continue;
        }
        double err = fabs(pnll - nll);
        worst = fmax(worst, err);
        if (err > 1e-9) bad_nll++;
        /* negative control: corrupt one letter; the parser must notice,
         * unless the change happens to make another lexicon word */
        int at = 1 + (d * 7919) % (n - 2);
        if (tok[at] >= 'a' && tok[at] < 'z') {
            tok[at] = tok[at] == 'q' ? 'x' : 'q'; /* q/x are in no word */
            rejected += parse_doc(p, tok, n, &pnll) == 0;
        } else rejected++;
    }
    CHECK_MSG(bad_count == 0, "%s: %d of %d documents did not have exactly one derivation", label, bad_count, ndocs);
    CHECK_MSG(bad_nll == 0, "%s: %d documents' parser NLL differs from the generator's (worst %g)", label, bad_nll,
              worst);
    CHECK_MSG(over == 0, "%s: %d documents over max_doc_tokens %d", label, over, cfg->max_doc_tokens);
    CHECK_MSG(rejected == ndocs, "%s: the parser accepted %d corrupted documents", label, ndocs - rejected);
    printf("%s: %d docs parse uniquely, NLL agrees to %.2g; lengths %d..%d (cap %d), %d near the cap\n", label,
           ndocs, worst, min_len, max_len, cfg->max_doc_tokens, capped);
    if (cfg->max_doc_tokens < 200) CHECK_MSG(capped > ndocs / 4, "%s: the cap was rarely reached (%d)", label, capped);

    /* a reference to an entity that was never introduced must not parse */
    int n;
    double nll, pnll;
    int broke = 0;
    for (int d = 0; d < 200 && !broke; d++) {
        tt_corpus_gen_doc(c, TT_CORPUS_VAL, (uint64_t)d, tok, cfg->max_doc_tokens, &n, &nll);
        /* find the last name that also occurs earlier (a reference, not its
         * introduction) and swap in another name of the same length */
        for (int i = n - 2; i > 1 && !broke; i--) {
            if (!(tok[i] >= 'A' && tok[i] <= 'Z') || tok[i - 1] != ' ') continue;
            int len = 0;
            while (len < 39 && ((tok[i + len] >= 'a' && tok[i + len] <= 'z') || (len == 0))) len++;
            char w[40] = {0};
            for (int j = 0; j < len; j++) w[j] = (char)tok[i + j];
            const lexent *x = lookup(p, w);
            if (!x || x->cls != TT_WC_NAME || !doc_has(tok, i, w)) continue;
            for (int r = 0; r < tt_corpus_class_size(c, TT_WC_NAME); r++) {
                const char *o = tt_corpus_word(c, TT_WC_NAME, r);
                if ((int)strlen(o) != len || strcmp(o, w) == 0) continue;
                if (doc_has(tok, n, o)) continue; /* skip names already in the document */
                for (int j = 0; j < len; j++) tok[i + j] = o[j];
                broke = 1;
                break;
            }
        }
    }
    CHECK(broke);
    CHECK_MSG(parse_doc(p, tok, n, &pnll) == 0, "%s: a reference to an unintroduced name parsed", label);
    free(tok);
    parser_free(p);
    free(p);
    tt_corpus_free(c);
}

/* ---- lexicon and determinism -------------------------------------------- */
static void test_lexicon(void)
{
    tt_corpus_cfg cfg = tt_corpus_cfg_default();
    tt_corpus *c = tt_corpus_new(&cfg);
    CHECK_MSG(c != NULL, "%s", tt_last_error());
    if (!c) return;
    int total = 0, nonlower = 0;
    const char **all = malloc(sizeof(char *) * 200000);
    int nall = 0;
    for (int k = 0; k < TT_WC_COUNT; k++) {
        int n = tt_corpus_class_size(c, k);
        CHECK(n > 0);
        if (k != TT_WC_NAME) total += n;
        for (int r = 0; r < n; r++) {
            const char *w = tt_corpus_word(c, k, r);
            for (int i = 0; w[i]; i++)
                nonlower += !(w[i] >= 'a' && w[i] <= 'z') && !(k == TT_WC_NAME && i == 0 && w[i] >= 'A' && w[i] <= 'Z');
            if (k == TT_WC_NAME) CHECK(w[0] >= 'A' && w[0] <= 'Z');
            all[nall++] = w;
        }
    }
    CHECK(tt_corpus_word(c, TT_WC_NOUN, -1) == NULL && tt_corpus_word(c, TT_WC_NOUN, 1 << 20) == NULL);
    CHECK_MSG(total >= 1000, "lexicon has %d words", total);
    CHECK(tt_corpus_class_size(c, TT_WC_NAME) == cfg.n_names);
    CHECK(nonlower == 0);
    int dups = 0;
    for (int i = 0; i < nall; i++)
        for (int j = i + 1; j < nall; j++) dups += strcmp(all[i], all[j]) == 0;
    CHECK_MSG(dups == 0, "%d duplicate words", dups);
    free(all);

    /* same seed, same documents; another seed, other documents and words */
    tt_corpus *c2 = tt_corpus_new(&cfg);
    tt_corpus_cfg other = cfg;
    other.seed = cfg.seed + 1;
    tt_corpus *c3 = tt_corpus_new(&other);
    int32_t a[512], b[512];
    int na, nb, same = 1, differ = 0;
    double la, lb;
    for (int d = 0; d < 50; d++) {
        tt_corpus_gen_doc(c, TT_CORPUS_TRAIN, (uint64_t)d, a, 512, &na, &la);
        tt_corpus_gen_doc(c2, TT_CORPUS_TRAIN, (uint64_t)d, b, 512, &nb, &lb);
        same &= na == nb && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0 && la == lb;
        tt_corpus_gen_doc(c3, TT_CORPUS_TRAIN, (uint64_t)d, b, 512, &nb, &lb);
        differ += na != nb || memcmp(a, b, sizeof(int32_t) * (size_t)na) != 0;
        tt_corpus_gen_doc(c, TT_CORPUS_VAL, (uint64_t)d, b, 512, &nb, &lb); /* the val stream differs too */
        differ += na != nb || memcmp(a, b, sizeof(int32_t) * (size_t)na) != 0;
    }
    CHECK(same);
    CHECK(differ == 100);
    CHECK(strcmp(tt_corpus_word(c, TT_WC_NOUN, 0), tt_corpus_word(c3, TT_WC_NOUN, 0)) != 0);
    CHECK(tt_corpus_gen_doc(c, TT_CORPUS_TRAIN, 0, a, cfg.max_doc_tokens - 1, &na, &la) != 0);
    tt_corpus_free(c);
    tt_corpus_free(c2);
    tt_corpus_free(c3);

    /* bad configs are refused with a reason */
    tt_corpus_cfg bad = cfg;
    bad.max_doc_tokens = 40;
    CHECK(tt_corpus_new(&bad) == NULL && strstr(tt_last_error(), "max_doc_tokens") != NULL);
    bad = cfg;
    bad.n_words = 10;
    CHECK(tt_corpus_cfg_check(&bad) != 0 && strstr(tt_last_error(), "n_words") != NULL);
    bad = cfg;
    bad.p_stop = 1.0;
    CHECK(tt_corpus_cfg_check(&bad) != 0);
    bad = cfg;
    bad.min_entities = 5;
    CHECK(tt_corpus_cfg_check(&bad) != 0);
    CHECK(tt_corpus_cfg_check(&cfg) == 0);
}

/* ---- writing: floor, unigram and gap, checked against the shard --------- */
static void test_write_and_gap(const char *dir)
{
    char train[512], val[512];
    snprintf(train, sizeof train, "%s/train.bin", dir);
    snprintf(val, sizeof val, "%s/val.bin", dir);
    tt_corpus_cfg cfg = tt_corpus_cfg_default();
    cfg.train_tokens = 300000;
    cfg.val_tokens = 200000;
    tt_corpus_stats st;
    double t0 = tt_now();
    CHECK_MSG(tt_corpus_write(&cfg, train, val, &st) == 0, "%s", tt_last_error());
    double dt = tt_now() - t0;
    printf("corpus: %lld + %lld tokens in %.3f s; val floor %.4f, unigram %.4f, gap %.4f nats/token (train floor "
           "%.4f); %lld val docs, %.1f tokens/doc\n",
           (long long)st.train_tokens, (long long)st.val_tokens, dt, st.floor_nats, st.unigram_nats, st.gap_nats,
           st.train_floor_nats, (long long)st.val_docs, (double)st.val_tokens / (double)st.val_docs);
    CHECK_MSG(st.gap_nats >= 2.0, "gap %.4f < 2.0", st.gap_nats);
    CHECK(st.floor_nats > 0.2 && st.floor_nats < 1.0);
    CHECK(fabs(st.floor_nats - st.train_floor_nats) < 0.03); /* both splits come from one process */
    CHECK(st.train_tokens >= cfg.train_tokens && st.val_tokens >= cfg.val_tokens);
    CHECK(dt < 10.0); /* ~500k tokens; generating millions must take seconds at most */

    /* recompute the floor and unigram from the shard and the generator */
    tt_shard *s = tt_shard_open(val);
    CHECK_MSG(s != NULL, "%s", tt_last_error());
    if (!s) return;
    CHECK(s->hdr.token_count == (uint64_t)st.val_tokens && s->hdr.bos_id == TT_BYTE_BOS &&
          s->hdr.vocab_size == TT_BYTE_VOCAB && s->hdr.token_width == 2);
    tt_corpus *c = tt_corpus_new(&cfg);
    int64_t hist[TT_BYTE_VOCAB] = {0}, scored = 0, docs = 0, at = 0;
    double nll_sum = 0;
    int32_t doc[512];
    int mismatch = 0;
    while (at < (int64_t)s->hdr.token_count) {
        int n;
        double nll;
        tt_corpus_gen_doc(c, TT_CORPUS_VAL, (uint64_t)docs++, doc, 512, &n, &nll);
        for (int i = 0; i < n; i++) mismatch += (int64_t)tt_shard_token(s, (uint64_t)(at + i)) != doc[i];
        for (int i = 1; i < n; i++) hist[doc[i]]++;
        scored += n - 1;
        nll_sum += nll;
        at += n;
    }
    CHECK(mismatch == 0 && at == (int64_t)s->hdr.token_count && docs == st.val_docs);
    CHECK(scored == st.val_scored_tokens);
    double h = 0;
    for (int i = 0; i < TT_BYTE_VOCAB; i++)
        if (hist[i]) h -= (double)hist[i] / (double)scored * log((double)hist[i] / (double)scored);
    CHECK_NEAR(h, st.unigram_nats, 1e-9);
    CHECK_NEAR(nll_sum / (double)scored, st.floor_nats, 1e-9);
    CHECK(hist[TT_BYTE_BOS] == 0 && hist[TT_BYTE_EOS] == docs);
    tt_corpus_free(c);
    tt_shard_close(s);

    /* The floor divides the documents' NLL by the tokens validation scores:
     * whatever seq_len the loader packs (documents whole at 256; cut into
     * pieces at 64 or 17, each piece's last target the next piece's first
     * token), its validation pass scores exactly those tokens. */
    const int Ts[] = {256, 64, 17};
    for (int i = 0; i < 3; i++) {
        tt_loader_cfg lc = {val, Ts[i], 4, 0, TT_LOADER_VAL, 0, 1};
        tt_loader *l = tt_loader_open(&lc);
        tt_batch *b = tt_batch_new(4, Ts[i]);
        CHECK_MSG(l && b, "%s", tt_last_error());
        int64_t loader_scored = 0;
        while (l && b && tt_loader_next(l, b) == 1) loader_scored += b->n_scored;
        CHECK_MSG(loader_scored == st.val_scored_tokens,
                  "seq_len %d: the loader scores %lld tokens, the floor counts %lld", Ts[i], (long long)loader_scored,
                  (long long)st.val_scored_tokens);
        CHECK_NEAR(nll_sum / (double)loader_scored, st.floor_nats, 1e-9);
        tt_batch_free(b);
        tt_loader_close(l);
    }
}

/* ---- JSON and prepare ---------------------------------------------------- */
static void test_json(const char *dir)
{
    tt_corpus_cfg cfg = tt_corpus_cfg_default(), back;
    cfg.seed = 0xfedcba9876543210ull; /* all 64 bits must survive */
    cfg.train_tokens = 20000;
    cfg.val_tokens = 10000;
    tt_corpus_stats st = {0.5, 3.0, 2.5, 0.51, 20001, 10002, 150, 70, 9932}, st2;
    cJSON *j = tt_corpus_stats_to_json(&cfg, &st);
    char *text = cJSON_Print(j);
    cJSON *k = cJSON_Parse(text);
    CHECK(tt_corpus_stats_from_json(k, "corpus.json", &back, &st2) == 0);
    CHECK(tt_corpus_cfg_equal(&cfg, &back));
    CHECK(memcmp(&st, &st2, sizeof st) == 0);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(k, "stats"), "gap_nats");
    CHECK(tt_corpus_stats_from_json(k, "x/corpus.json", NULL, &st2) != 0);
    CHECK(strstr(tt_last_error(), "x/corpus.json") && strstr(tt_last_error(), "gap_nats"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(k, "config"), "seed", cJSON_CreateString("12x"));
    CHECK(tt_corpus_stats_from_json(k, "x/corpus.json", &back, NULL) != 0);
    cJSON_Delete(j);
    cJSON_Delete(k);
    free(text);

    char sub[512], path[600];
    snprintf(sub, sizeof sub, "%s/prep", dir);
    tt_corpus_stats a, b;
    CHECK_MSG(tt_corpus_prepare(&cfg, sub, &a) == 0, "%s", tt_last_error());
    snprintf(path, sizeof path, "%s/train.bin", sub);
    unlink(path); /* a missing shard forces regeneration */
    CHECK(tt_corpus_prepare(&cfg, sub, &b) == 0 && memcmp(&a, &b, sizeof a) == 0);
    CHECK(tt_corpus_prepare(&cfg, sub, &b) == 0 && memcmp(&a, &b, sizeof a) == 0); /* cached */
    cfg.seed++;
    CHECK(tt_corpus_prepare(&cfg, sub, &b) == 0 && b.floor_nats != a.floor_nats); /* new config, new corpus */
}

int main(void)
{
    char dir[] = "/tmp/tt_test_corpus_XXXXXX";
    if (!mkdtemp(dir)) return th_skip("test_corpus", "cannot make a temporary directory");
    test_tokenizer();
    test_lexicon();
    tt_corpus_cfg cfg = tt_corpus_cfg_default();
    test_parser(&cfg, 3000, "default");
    tt_corpus_cfg small = cfg; /* a tight cap: the forced stop happens often */
    small.max_doc_tokens = 210;
    small.p_stop = 0.2;
    small.n_words = 1000;
    small.n_names = 50;
    small.seed = 99;
    test_parser(&small, 2000, "cap210");
    test_write_and_gap(dir);
    test_json(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return th_done("test_corpus");
}

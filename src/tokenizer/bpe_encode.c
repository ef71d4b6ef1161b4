/* bpe_encode.c — tokenizer.json encode: added tokens are cut out of the raw
 * text first, the rest is normalized, cut again at normalized added tokens,
 * pre-tokenized and run through BPE; the post-processor template wraps the
 * ids. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

/* ---- added tokens ------------------------------------------------------------- */

/* start of the whitespace run that ends s[0..a) (Rust's \s*$) */
static size_t space_run_before(const char *s, size_t a)
{
    while (a > 0) {
        size_t k = a - 1;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        size_t adv;
        if (!tok_is_whitespace(tok_utf8_get(s + k, &adv))) break;
        a = k;
    }
    return a;
}

/* length of the whitespace run that starts s[0..n) (Rust's ^\s*) */
static size_t space_run_after(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t adv;
        if (!tok_is_whitespace(tok_utf8_get(s + i, &adv))) break;
        i += adv;
    }
    return i;
}

static int normalized_part(tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, int at_origin);

/* a piece of text between added tokens: the raw pass normalizes it and looks
 * for normalized added tokens; the normalized pass pre-tokenizes it */
static int text_part(tt_tokenizer *t, tok_scratch *sc, int normalized, const char *s, size_t n, int at_origin)
{
    if (!n) return 0;
    return normalized ? tok_pretokenize(t, sc, s, n, at_origin) : normalized_part(t, sc, s, n, at_origin);
}

/* HF AddedVocabulary::find_matches: leftmost-longest matches, lstrip / rstrip
 * widening a match over the whitespace around it. */
static int split_added(tt_tokenizer *t, tok_scratch *sc, const tok_trie *trie, int normalized, const char *s, size_t n,
                       int at_origin)
{
    size_t start = 0; /* end of the last match (with rstrip) */
    if (!trie->n_first) return text_part(t, sc, normalized, s, n, at_origin);
    for (size_t i = 0; i < n;) {
        if (trie->n_first == 1) {
            const char *c = memchr(s + i, trie->only_first, n - i);
            if (!c) break;
            i = (size_t)(c - s);
        } else if (!trie->first[(unsigned char)s[i]]) {
            i++;
            continue;
        }
        size_t len = 0;
        int32_t k = tok_trie_match(trie, s + i, n - i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[k];
        size_t ma = i, mb = i + len;
        if (a->lstrip) {
            size_t ns = space_run_before(s, ma);
            ma = ns > start ? ns : start;
        }
        if (a->rstrip) mb += space_run_after(s + mb, n - mb);
        if (start < ma && text_part(t, sc, normalized, s + start, ma - start, at_origin && start == 0)) return -1;
        if (tok_emit(sc, a->id)) return -1;
        start = i = mb;
    }
    if (start < n) return text_part(t, sc, normalized, s + start, n - start, at_origin && start == 0);
    return 0;
}

static int normalized_part(tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, int at_origin)
{
    const char *ns;
    size_t nn;
    if (tok_normalize(t, sc, s, n, &ns, &nn)) return -1;
    return split_added(t, sc, &t->trie_norm, 1, ns, nn, at_origin);
}

int tok_bpe_encode(tt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                   size_t *cap)
{
    size_t bad = tok_utf8_invalid_at(text, len);
    if (bad != len) return tt_errorf("tokenizer: text is not valid UTF-8 at byte %zu", bad);
    tok_scratch *sc = tok_scratch_get(t);
    if (!sc) return -1;
    sc->out = *ids;
    sc->out_n = 0;
    sc->out_cap = *ids ? *cap : 0;
    int rc = 0;
    if (add_special)
        for (int i = 0; i < t->n_tmpl_pre && !rc; i++) rc = tok_emit(sc, t->tmpl_pre[i]);
    if (!rc) rc = split_added(t, sc, &t->trie_raw, 0, text, len, 1);
    if (add_special)
        for (int i = 0; i < t->n_tmpl_post && !rc; i++) rc = tok_emit(sc, t->tmpl_post[i]);
    *ids = sc->out;
    *n = rc ? 0 : sc->out_n;
    *cap = sc->out_cap;
    sc->out = NULL;
    sc->out_n = sc->out_cap = 0;
    tok_scratch_put(t, sc);
    return rc;
}

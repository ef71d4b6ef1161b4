/* bpe_encode.c — tokenizer.json encode: added tokens are cut out of the raw
 * text first, the rest is normalized, cut again at normalized added tokens,
 * pre-tokenized and run through BPE; the post-processor template wraps the
 * ids. The offsets encode runs the same pipeline with origins (tok_orig). */
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

static int normalized_part(tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                           int at_origin);

/* a piece of text between added tokens: the raw pass normalizes it and looks
 * for normalized added tokens; the normalized pass pre-tokenizes it. orig:
 * NULL, or the piece's origins (offsets) */
static int text_part(tt_tokenizer *t, tok_scratch *sc, int normalized, const char *s, size_t n, const uint32_t *orig,
                     int at_origin)
{
    if (!n) return 0;
    return normalized ? tok_pretokenize(t, sc, s, n, orig, at_origin) : normalized_part(t, sc, s, n, orig, at_origin);
}

/* HF AddedVocabulary::find_matches: leftmost-longest matches, lstrip / rstrip
 * widening a match over the whitespace around it (so a token's offsets start
 * at the whitespace it took). */
static int split_added(tt_tokenizer *t, tok_scratch *sc, const tok_trie *trie, int normalized, const char *s, size_t n,
                       const uint32_t *orig, int at_origin)
{
    size_t start = 0; /* end of the last match (with rstrip) */
    if (!trie->n_first) return text_part(t, sc, normalized, s, n, orig, at_origin);
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
        if (start < ma && text_part(t, sc, normalized, s + start, ma - start, orig ? orig + start : NULL,
                                    at_origin && start == 0))
            return -1;
        if (orig ? tok_emit_at(sc, a->id, orig[ma]) : tok_emit(sc, a->id)) return -1;
        start = i = mb;
    }
    if (start < n)
        return text_part(t, sc, normalized, s + start, n - start, orig ? orig + start : NULL, at_origin && start == 0);
    return 0;
}

static int normalized_part(tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                           int at_origin)
{
    const char *ns;
    size_t nn;
    const uint32_t *norig;
    /* a character HF's normalizers insert before all others starts where the piece does */
    if (tok_normalize(t, sc, s, n, orig, orig ? orig[0] : 0, &ns, &nn, &norig)) return -1;
    return split_added(t, sc, &t->trie_norm, 1, ns, nn, norig, at_origin);
}

/* the ids of text into sc->out (with orig, their starts into sc->starts) */
static int encode(tt_tokenizer *t, tok_scratch *sc, const char *text, size_t len, int add_special,
                  const uint32_t *orig)
{
    int rc = 0;
    if (add_special)
        for (int i = 0; i < t->n_tmpl_pre && !rc; i++) rc = tok_emit(sc, t->tmpl_pre[i]);
    if (!rc) rc = split_added(t, sc, &t->trie_raw, 0, text, len, orig, 1);
    if (add_special)
        for (int i = 0; i < t->n_tmpl_post && !rc; i++) rc = tok_emit(sc, t->tmpl_post[i]);
    return rc;
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
    int rc = encode(t, sc, text, len, add_special, NULL);
    *ids = sc->out;
    *n = rc ? 0 : sc->out_n;
    *cap = sc->out_cap;
    sc->out = NULL;
    sc->out_n = sc->out_cap = 0;
    tok_scratch_put(t, sc);
    return rc;
}

/* the text's own origins: each byte, the start of its character */
static int text_origins(tok_orig *o, const char *text, size_t len)
{
    o->n = 0;
    if (tok_orig_reserve(o, len + 1)) return -1; /* + 1: o->p is not NULL (a plain encode) for "" */
    for (size_t i = 0; i < len;) {
        size_t l = tok_utf8_len((unsigned char)text[i]);
        for (size_t k = 0; k < l; k++) o->p[i + k] = (uint32_t)i;
        i += l;
    }
    o->n = len;
    return 0;
}

int tok_bpe_encode_offsets(tt_tokenizer *t, const char *text, size_t len, int32_t **ids, uint32_t **starts,
                           size_t *n, size_t *cap)
{
    if (t->no_offsets[0]) return tt_errorf("%s", t->no_offsets);
    size_t bad = tok_utf8_invalid_at(text, len);
    if (bad != len) return tt_errorf("tokenizer: text is not valid UTF-8 at byte %zu", bad);
    tok_scratch *sc = tok_scratch_get(t);
    if (!sc) return -1;
    size_t c = *ids && *starts ? *cap : 0;
    sc->out = *ids;
    sc->starts = *starts;
    sc->out_n = 0;
    sc->out_cap = sc->starts_cap = c;
    int rc = text_origins(&sc->raw_orig, text, len);
    if (!rc) rc = encode(t, sc, text, len, 0, sc->raw_orig.p);
    if (!rc) rc = tok_starts_fit(sc);
    *ids = sc->out;
    *starts = sc->starts;
    *n = rc ? 0 : sc->out_n;
    *cap = sc->out_cap < sc->starts_cap ? sc->out_cap : sc->starts_cap; /* both hold at least this */
    sc->out = NULL;
    sc->starts = NULL;
    sc->out_n = sc->out_cap = sc->starts_cap = 0;
    tok_scratch_put(t, sc);
    return rc;
}

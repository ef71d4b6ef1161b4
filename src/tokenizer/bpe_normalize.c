/* bpe_normalize.c — tokenizer.json normalizers: NFC/NFD/NFKC/NFKD
 * (bpe_unicode_forms.c), Prepend, Replace and Strip, applied in sequence to
 * each piece of text that is not an added token; for offsets, each also says
 * where its output characters come from, as HF's NormalizedString does. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

/* Replace every match of the pattern (find_iter semantics: empty matches
 * insert the content). HF inserts the content after removing the match, so
 * its characters take the origin of the match's last character (of the one
 * before an empty match; origin at the very start). Always inlined: in the
 * plain tok_replace_all, orig is a constant NULL and its tests vanish. */
static inline __attribute__((always_inline)) int replace_all(const tok_pattern *p, const char *s, size_t n, const uint32_t *orig, uint32_t origin,
                       const char *with, size_t with_n, tok_scratch *sc, tok_buf *out, tok_orig *out_orig)
{
    tok_finder f;
    tok_finder_init(&f, p, s, n, sc);
    size_t at = 0, a, b;
    int r;
    while ((r = tok_finder_next(&f, &a, &b)) == 1) {
        if (tok_buf_put(out, s + at, a - at) || tok_buf_put(out, with, with_n)) return -1;
        if (orig && (tok_orig_copy(out_orig, orig + at, a - at) ||
                     tok_orig_put(out_orig, b ? orig[b - 1] : origin, with_n)))
            return -1;
        at = b;
    }
    if (r < 0) return -1;
    if (orig && tok_orig_copy(out_orig, orig + at, n - at)) return -1;
    return tok_buf_put(out, s + at, n - at);
}

int tok_replace_all(const tok_pattern *p, const char *s, size_t n, const char *with, size_t with_n, tok_scratch *sc,
                    tok_buf *out)
{
    return replace_all(p, s, n, NULL, 0, with, with_n, sc, out, NULL);
}

static int replace_all_offsets(const tok_pattern *p, const char *s, size_t n, const uint32_t *orig, uint32_t origin,
                               const char *with, size_t with_n, tok_scratch *sc, tok_buf *out, tok_orig *out_orig)
{
    return replace_all(p, s, n, orig, origin, with, with_n, sc, out, out_orig);
}

/* the characters kept keep their origins */
static int strip(const char *s, size_t n, const uint32_t *orig, int left, int right, tok_buf *out, tok_orig *out_orig)
{
    size_t a = 0, b = n;
    while (left && a < b) {
        size_t adv;
        uint32_t cp = tok_utf8_get(s + a, &adv);
        if (!tok_is_whitespace(cp)) break;
        a += adv;
    }
    while (right && b > a) {
        size_t k = b - 1;
        while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        size_t adv;
        if (!tok_is_whitespace(tok_utf8_get(s + k, &adv))) break;
        b = k;
    }
    if (orig && tok_orig_copy(out_orig, orig + a, b - a)) return -1;
    return tok_buf_put(out, s + a, b - a);
}

/* HF prepends only to non-empty text, and the prefix takes the origin of the
 * first character (it replaces that character, which is then re-inserted) */
static int prepend(const tok_normalizer *nz, const char *s, size_t n, const uint32_t *orig, tok_buf *out,
                   tok_orig *out_orig)
{
    if (n && tok_buf_put(out, nz->str, nz->str_n)) return -1;
    if (orig && ((n && tok_orig_put(out_orig, orig[0], nz->str_n)) || tok_orig_copy(out_orig, orig, n))) return -1;
    return tok_buf_put(out, s, n);
}

static int apply(const tok_normalizer *nz, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                 uint32_t origin, tok_buf *out, tok_orig *out_orig)
{
    out->n = 0;
    if (orig) out_orig->n = 0;
    switch (nz->kind) {
    case NORM_NFC:
    case NORM_NFD:
    case NORM_NFKC:
    case NORM_NFKD: return tok_unicode_form(nz->kind, s, n, orig, origin, out, out_orig);
    case NORM_PREPEND: return prepend(nz, s, n, orig, out, out_orig);
    case NORM_REPLACE:
        if (orig) return replace_all_offsets(&nz->pat, s, n, orig, origin, nz->str, nz->str_n, sc, out, out_orig);
        return tok_replace_all(&nz->pat, s, n, nz->str, nz->str_n, sc, out);
    case NORM_STRIP: return strip(s, n, orig, nz->left, nz->right, out, out_orig);
    }
    return tt_errorf("tokenizer: unknown normalizer");
}

int tok_normalize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                  uint32_t origin, const char **out, size_t *out_n, const uint32_t **out_orig)
{
    const char *cur = s;
    size_t cur_n = n;
    for (int i = 0; i < t->n_norms; i++) {
        /* write into the buffer that does not hold the current text */
        int k = cur == sc->norm[0].p;
        tok_buf *dst = &sc->norm[k];
        if (apply(&t->norms[i], sc, cur, cur_n, orig, origin, dst, &sc->norm_orig[k])) return -1;
        if (tok_buf_reserve(dst, 0)) return -1; /* dst->p non-NULL even when empty */
        cur = dst->p;
        cur_n = dst->n;
        if (orig) orig = sc->norm_orig[k].p;
    }
    *out = cur;
    *out_n = cur_n;
    if (out_orig) *out_orig = orig;
    return 0;
}

char *tok_normalize_alloc(const tt_tokenizer *t, const char *s, size_t n, size_t *out_n)
{
    tok_scratch *sc = tok_scratch_get((tt_tokenizer *)t);
    if (!sc) return NULL;
    const char *r;
    size_t rn;
    char *copy = NULL;
    if (tok_normalize(t, sc, s, n, NULL, 0, &r, &rn, NULL) == 0) {
        copy = malloc(rn + 1);
        if (copy) {
            memcpy(copy, r, rn);
            copy[rn] = 0;
            *out_n = rn;
        } else tt_errorf("tokenizer: out of memory");
    }
    tok_scratch_put((tt_tokenizer *)t, sc);
    return copy;
}

/* bpe_normalize.c — tokenizer.json normalizers: NFC/NFD/NFKC/NFKD (utf8proc),
 * Prepend, Replace and Strip, applied in sequence to each piece of text that
 * is not an added token. */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

static int is_ascii(const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) return 0;
    }
    for (; i < n; i++)
        if ((unsigned char)s[i] & 0x80) return 0;
    return 1;
}

static int unicode_form(tok_norm_kind k, const char *s, size_t n, tok_buf *out)
{
    /* ASCII text is unchanged by every normalization form */
    if (is_ascii(s, n)) return tok_buf_put(out, s, n);
    int opts = UTF8PROC_STABLE;
    if (k == NORM_NFC || k == NORM_NFKC) opts |= UTF8PROC_COMPOSE;
    else opts |= UTF8PROC_DECOMPOSE;
    if (k == NORM_NFKC || k == NORM_NFKD) opts |= UTF8PROC_COMPAT;
    if (n > (size_t)INT32_MAX) return tt_errorf("tokenizer: text of %zu bytes is too long to normalize", n);
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &res, opts);
    if (r < 0) return tt_errorf("tokenizer: Unicode normalization failed (%s)", utf8proc_errmsg(r));
    int rc = tok_buf_put(out, res, (size_t)r);
    free(res);
    return rc;
}

/* Replace every match of the pattern (find_iter semantics: empty matches
 * insert the content). */
int tok_replace_all(const tok_pattern *p, const char *s, size_t n, const char *with, size_t with_n, tok_scratch *sc,
                    tok_buf *out)
{
    tok_finder f;
    tok_finder_init(&f, p, s, n, sc);
    size_t at = 0, a, b;
    int r;
    while ((r = tok_finder_next(&f, &a, &b)) == 1) {
        if (tok_buf_put(out, s + at, a - at) || tok_buf_put(out, with, with_n)) return -1;
        at = b;
    }
    if (r < 0) return -1;
    return tok_buf_put(out, s + at, n - at);
}

static int strip(const char *s, size_t n, int left, int right, tok_buf *out)
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
    return tok_buf_put(out, s + a, b - a);
}

static int apply(const tok_normalizer *nz, tok_scratch *sc, const char *s, size_t n, tok_buf *out)
{
    out->n = 0;
    switch (nz->kind) {
    case NORM_NFC:
    case NORM_NFD:
    case NORM_NFKC:
    case NORM_NFKD: return unicode_form(nz->kind, s, n, out);
    case NORM_PREPEND:
        /* HF prepends only to non-empty text */
        if (n && tok_buf_put(out, nz->str, nz->str_n)) return -1;
        return tok_buf_put(out, s, n);
    case NORM_REPLACE: return tok_replace_all(&nz->pat, s, n, nz->str, nz->str_n, sc, out);
    case NORM_STRIP: return strip(s, n, nz->left, nz->right, out);
    }
    return tt_errorf("tokenizer: unknown normalizer");
}

int tok_normalize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const char **out, size_t *out_n)
{
    const char *cur = s;
    size_t cur_n = n;
    for (int i = 0; i < t->n_norms; i++) {
        /* write into the buffer that does not hold the current text */
        tok_buf *dst = (cur == sc->norm[0].p) ? &sc->norm[1] : &sc->norm[0];
        if (apply(&t->norms[i], sc, cur, cur_n, dst)) return -1;
        if (tok_buf_reserve(dst, 0)) return -1; /* dst->p non-NULL even when empty */
        cur = dst->p;
        cur_n = dst->n;
    }
    *out = cur;
    *out_n = cur_n;
    return 0;
}

char *tok_normalize_alloc(const tt_tokenizer *t, const char *s, size_t n, size_t *out_n)
{
    tok_scratch *sc = tok_scratch_get((tt_tokenizer *)t);
    if (!sc) return NULL;
    const char *r;
    size_t rn;
    char *copy = NULL;
    if (tok_normalize(t, sc, s, n, &r, &rn) == 0) {
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

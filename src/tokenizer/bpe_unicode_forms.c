/* bpe_unicode_forms.c — the NFC / NFD / NFKC / NFKD normalizers. The text
 * comes from utf8proc. For offsets, each output character also needs the
 * input character HF says it comes from, and HF decides that positionally
 * from the "changes" of its unicode-normalization-alignments crate:
 *   - decomposing a character marks its first piece 0 and the others +1;
 *   - canonical reordering (a stable sort of each run of combining marks by
 *     combining class) moves the marks along with their characters;
 *   - composing two characters gives the result the sum of their marks - 1.
 * NormalizedString::transform then reads the marks against the input in
 * order: a character marked c <= 0 takes the origin of the next input
 * character and consumes 1 - c of them; one marked > 0 is inserted and takes
 * the origin of the last character consumed. So the decomposition and the
 * composition are redone here character by character to get the marks (with
 * utf8proc's tables), and the result must spell utf8proc's text exactly:
 * otherwise the offsets are refused rather than guessed. */
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

static const char *form_name(tok_norm_kind k)
{
    return k == NORM_NFC ? "NFC" : k == NORM_NFD ? "NFD" : k == NORM_NFKC ? "NFKC" : "NFKD";
}

/* ---- the characters with their marks ---------------------------------------------- */

typedef struct {
    int32_t cp;
    int32_t mark;  /* the crate's change: 0 replaces an input character, > 0 inserted, < 0 also removes */
    uint8_t ccc;   /* canonical combining class */
} nf_char;

typedef struct {
    nf_char *p;
    size_t n, cap;
} nf_vec;

static int nf_push(nf_vec *v, int32_t cp, int32_t mark)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        nf_char *p = realloc(v->p, cap * sizeof *p);
        if (!p) return tt_errorf("tokenizer: out of memory (normalizing %zu characters)", cap);
        v->p = p;
        v->cap = cap;
    }
    uint8_t ccc = cp < 0x80 ? 0 : (uint8_t)utf8proc_get_property(cp)->combining_class;
    v->p[v->n++] = (nf_char){cp, mark, ccc};
    return 0;
}

/* Full decomposition of every character, first piece marked 0 and the rest +1,
 * then each run of combining marks stably sorted by class (canonical order). */
static int decompose(const char *s, size_t n, int compat, nf_vec *v)
{
    utf8proc_option_t opts = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    for (size_t i = 0; i < n;) {
        if (!((unsigned char)s[i] & 0x80)) { /* ASCII: its own decomposition, a starter */
            if (nf_push(v, (unsigned char)s[i++], 0)) return -1;
            continue;
        }
        size_t adv;
        utf8proc_int32_t d[32]; /* the longest decomposition (U+FDFA) has 18 characters */
        int boundclass = 0;
        utf8proc_ssize_t r = utf8proc_decompose_char((utf8proc_int32_t)tok_utf8_get(s + i, &adv), d, 32, opts,
                                                     &boundclass);
        if (r < 0 || r > 32) return tt_errorf("tokenizer: cannot decompose the character at byte %zu", i);
        for (utf8proc_ssize_t j = 0; j < r; j++)
            if (nf_push(v, d[j], j > 0)) return -1;
        i += adv;
    }
    for (size_t a = 0; a < v->n;) {
        if (v->p[a].ccc == 0) {
            a++;
            continue;
        }
        size_t b = a;
        while (b < v->n && v->p[b].ccc != 0) b++;
        for (size_t i = a + 1; i < b; i++) /* insertion sort: stable, and runs are short */
            for (size_t j = i; j > a && v->p[j - 1].ccc > v->p[j].ccc; j--) {
                nf_char x = v->p[j];
                v->p[j] = v->p[j - 1];
                v->p[j - 1] = x;
            }
        a = b;
    }
    return 0;
}

/* the primary composite of a and b, or -1 */
static int32_t compose_pair(int32_t a, int32_t b)
{
    if (b < 0x80) return -1; /* no composition ends in an ASCII character */
    utf8proc_int32_t buf[2] = {a, b};
    return utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE) == 1 ? buf[0] : -1;
}

/* Canonical composition of in into out, in the crate's order: a starter (the
 * composee) absorbs what composes with it; what does not compose waits in
 * held until a starter ends the run, then follows the composee out. */
static int compose(const nf_vec *in, nf_vec *out)
{
    nf_char k = {0};
    int have_k = 0, last_ccc = -1; /* -1: nothing held */
    size_t held = 0;               /* characters waiting in wait[] behind the composee */
    nf_char *wait = malloc((in->n ? in->n : 1) * sizeof *wait);
    if (!wait) return tt_errorf("tokenizer: out of memory (normalizing)");
    int rc = 0;
#define OUT(c) do { if (!rc) rc = nf_push(out, (c).cp, (c).mark); } while (0)
    for (size_t i = 0; i < in->n && !rc; i++) {
        nf_char c = in->p[i];
        if (!have_k) {
            if (c.ccc != 0) OUT(c);
            else {
                k = c;
                have_k = 1;
            }
            continue;
        }
        if (last_ccc >= 0 && last_ccc >= c.ccc) { /* c is blocked from the composee */
            if (c.ccc != 0) {
                wait[held++] = c;
                last_ccc = c.ccc;
                continue;
            }
            OUT(k);
            for (size_t j = 0; j < held; j++) OUT(wait[j]);
            held = 0;
            last_ccc = -1;
            k = c;
            continue;
        }
        int32_t r = compose_pair(k.cp, c.cp);
        if (r >= 0) {
            k = (nf_char){r, k.mark + c.mark - 1, 0};
            continue;
        }
        if (last_ccc < 0 && c.ccc == 0) {
            OUT(k);
            k = c;
            continue;
        }
        wait[held++] = c;
        last_ccc = c.ccc;
    }
    if (have_k) OUT(k);
    for (size_t j = 0; j < held; j++) OUT(wait[j]);
#undef OUT
    free(wait);
    return rc;
}

/* ---- origins --------------------------------------------------------------------- */

/* Read the marks against the input as NormalizedString::transform does, after
 * checking that the characters spell text (utf8proc's result). */
static int read_marks(tok_norm_kind k, const nf_vec *v, const char *s, size_t n, const uint32_t *orig,
                      uint32_t origin, const char *text, size_t text_n, tok_orig *out)
{
    size_t at = 0;
    for (size_t i = 0; i < v->n; i++) {
        char u[4];
        int un = tok_utf8_put((uint32_t)v->p[i].cp, u);
        if (at + (size_t)un > text_n || memcmp(text + at, u, (size_t)un) != 0) break;
        at += (size_t)un;
    }
    if (at != text_n)
        return tt_errorf("tokenizer: the %s normalizer's offsets cannot be aligned exactly here (its alignment "
                         "disagrees with utf8proc at byte %zu of the normalized text); refusing to guess",
                         form_name(k), at);
    size_t idx = 0; /* the next input byte to consume */
    for (size_t i = 0; i < v->n; i++) {
        const nf_char *c = &v->p[i];
        uint32_t o;
        if (c->mark > 0) o = idx ? orig[idx - 1] : origin;
        else {
            if (idx >= n)
                return tt_errorf("tokenizer: the %s normalizer's offsets cannot be aligned exactly here (more "
                                 "output characters than input ones)", form_name(k));
            o = orig[idx];
            for (int32_t r = 0; r <= -c->mark && idx < n; r++) idx += tok_utf8_len((unsigned char)s[idx]);
        }
        char u[4];
        if (tok_orig_put(out, o, (size_t)tok_utf8_put((uint32_t)c->cp, u))) return -1;
    }
    return 0;
}

static int form_origins(tok_norm_kind k, const char *s, size_t n, const uint32_t *orig, uint32_t origin,
                        const char *text, size_t text_n, tok_orig *out)
{
    nf_vec d = {0}, c = {0};
    int rc = decompose(s, n, k == NORM_NFKC || k == NORM_NFKD, &d);
    int composes = k == NORM_NFC || k == NORM_NFKC;
    if (!rc && composes) rc = compose(&d, &c);
    if (!rc) rc = read_marks(k, composes ? &c : &d, s, n, orig, origin, text, text_n, out);
    free(d.p);
    free(c.p);
    return rc;
}

int tok_unicode_form(tok_norm_kind k, const char *s, size_t n, const uint32_t *orig, uint32_t origin, tok_buf *out,
                     tok_orig *out_orig)
{
    /* ASCII text is unchanged by every normalization form */
    if (is_ascii(s, n)) return tok_buf_put(out, s, n) || (orig && tok_orig_copy(out_orig, orig, n)) ? -1 : 0;
    int opts = UTF8PROC_STABLE;
    if (k == NORM_NFC || k == NORM_NFKC) opts |= UTF8PROC_COMPOSE;
    else opts |= UTF8PROC_DECOMPOSE;
    if (k == NORM_NFKC || k == NORM_NFKD) opts |= UTF8PROC_COMPAT;
    if (n > (size_t)INT32_MAX) return tt_errorf("tokenizer: text of %zu bytes is too long to normalize", n);
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &res, opts);
    if (r < 0) return tt_errorf("tokenizer: Unicode normalization failed (%s)", utf8proc_errmsg(r));
    size_t at = out->n;
    int rc = tok_buf_put(out, res, (size_t)r);
    free(res);
    if (!rc && orig) rc = form_origins(k, s, n, orig, origin, out->p + at, out->n - at, out_orig);
    return rc;
}

/* strings.c — Python's str operations on UTF-8 values, as chat templates reach them through
 * methods and filters: the case changes with Unicode's full mappings (final sigma, "ß".upper()),
 * strip, replace and split; markupsafe's Markup keeps its flag through them as in Python. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat/casing_table.h"
#include "chat/chat_internal.h"
#include "core/core.h"

int js_new(jarena *a, const char *s, size_t n, jv like, jv *out)
{
    if (jv_str(a, s, n, out)) return -1;
    out->flags |= like.flags & JVF_MARKUP;
    return 0;
}

static int cat_of(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c); }

static int is_cased(uint32_t c)
{
    int k = cat_of(c);
    if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT) return 1;
    return utf8proc_toupper((utf8proc_int32_t)c) != (utf8proc_int32_t)c ||
           utf8proc_tolower((utf8proc_int32_t)c) != (utf8proc_int32_t)c;
}

static int is_case_ignorable(uint32_t c)
{
    int k = cat_of(c);
    if (k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
        k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK)
        return 1;
    return c == '\'' || c == '.' || c == ':' || c == 0xB7 || c == 0x387 || c == 0x5F4 || c == 0x2018 || c == 0x2019 ||
           c == 0x2024 || c == 0x2027 || c == 0xFE13 || c == 0xFE52 || c == 0xFE55 || c == 0xFF07 || c == 0xFF0E ||
           c == 0xFF1A;
}

static const uint32_t *special(uint32_t c, int title)
{
    size_t lo = 0, hi = sizeof casing_special / sizeof *casing_special;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (casing_special[m].cp == c) return title ? casing_special[m].title : casing_special[m].upper;
        if (casing_special[m].cp < c) lo = m + 1;
        else hi = m;
    }
    return NULL;
}

static int put_cp(jbuf *b, uint32_t c)
{
    char tmp[4];
    return jb_put(b, tmp, (size_t)u8_enc(c, tmp));
}

static int put_upper(jbuf *b, uint32_t c, int title)
{
    const uint32_t *sp = special(c, title);
    if (sp) {
        for (int i = 0; i < 3 && sp[i]; i++)
            if (put_cp(b, sp[i])) return -1;
        return 0;
    }
    return put_cp(b, (uint32_t)(title ? utf8proc_totitle((utf8proc_int32_t)c) : utf8proc_toupper((utf8proc_int32_t)c)));
}

/* lower() of code point i of cps[0..n): final sigma and the dotted capital I as Python does them */
static int put_lower(jbuf *b, const uint32_t *cps, size_t n, size_t i)
{
    uint32_t c = cps[i];
    if (c == 0x130) return put_cp(b, 'i') || put_cp(b, 0x307);
    if (c == 0x3A3) {
        size_t j = i;
        uint32_t p = 0;
        int found = 0;
        while (j-- > 0)
            if (!is_case_ignorable(cps[j])) {
                p = cps[j], found = 1;
                break;
            }
        int final = found && is_cased(p);
        if (final && i + 1 < n) {
            size_t k = i + 1;
            while (k < n && is_case_ignorable(cps[k])) k++;
            final = k == n || !is_cased(cps[k]);
        }
        return put_cp(b, final ? 0x3C2 : 0x3C3);
    }
    return put_cp(b, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
}

static int decode_all(const jstr *s, uint32_t **out, size_t *n)
{
    *out = malloc((s->len + 1) * sizeof **out);
    if (!*out) return tt_errorf("out of memory");
    *n = 0;
    for (size_t i = 0; i < s->len;) i += (size_t)u8_dec(s->s + i, s->len - i, &(*out)[(*n)++]);
    return 0;
}

int js_case(jarena *a, jv s, case_op op, jv *out)
{
    uint32_t *cps = NULL;
    size_t n = 0;
    if (decode_all(s.u.s, &cps, &n)) return -1;
    jbuf b = {0};
    int rc = 0, prev_cased = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint32_t c = cps[i];
        switch (op) {
        case CASE_UPPER: rc = put_upper(&b, c, 0); break;
        case CASE_LOWER: rc = put_lower(&b, cps, n, i); break;
        case CASE_CAPITALIZE: rc = i == 0 ? put_upper(&b, c, 1) : put_lower(&b, cps, n, i); break;
        case CASE_TITLE_METHOD:
            rc = prev_cased ? put_lower(&b, cps, n, i) : put_upper(&b, c, 1);
            prev_cased = is_cased(c);
            break;
        }
    }
    free(cps);
    rc = rc || js_new(a, b.p ? b.p : "", b.len, s, out);
    jb_free(&b);
    return rc ? -1 : 0;
}

static int in_chars(uint32_t c, const jv *chars)
{
    if (!chars) return u8_isspace(c);
    const jstr *s = chars->u.s;
    for (size_t i = 0; i < s->len;) {
        uint32_t d;
        i += (size_t)u8_dec(s->s + i, s->len - i, &d);
        if (d == c) return 1;
    }
    return 0;
}

int js_strip(jarena *a, jv s, const jv *chars, int left, int right, jv *out)
{
    const char *p = s.u.s->s;
    size_t b = 0, e = s.u.s->len;
    if (chars && chars->kind == JV_NONE) chars = NULL;
    if (chars && chars->kind != JV_STR) return tt_errorf("strip arg must be None or str");
    while (left && b < e) {
        uint32_t c;
        int l = u8_dec(p + b, e - b, &c);
        if (!in_chars(c, chars)) break;
        b += (size_t)l;
    }
    while (right && e > b) {
        size_t k = e - 1;
        while (k > b && ((unsigned char)p[k] & 0xC0) == 0x80) k--;
        uint32_t c;
        u8_dec(p + k, e - k, &c);
        if (!in_chars(c, chars)) break;
        e = k;
    }
    return js_new(a, p + b, e - b, s, out);
}

int js_replace(jarena *a, jv s, jv old, jv new_, int64_t count, jv *out)
{
    const jstr *S = s.u.s, *O = old.u.s;
    jbuf nb = {0}, b = {0};
    /* Markup.replace escapes its arguments */
    if (s.flags & JVF_MARKUP && !(new_.flags & JVF_MARKUP)) {
        if (jv_write_escaped(&nb, new_.u.s->s, new_.u.s->len)) return -1;
    } else if (jb_put(&nb, new_.u.s->s, new_.u.s->len)) {
        return -1;
    }
    jbuf ob = {0};
    if (s.flags & JVF_MARKUP && !(old.flags & JVF_MARKUP)) {
        if (jv_write_escaped(&ob, O->s, O->len)) return jb_free(&nb), -1;
    } else if (jb_put(&ob, O->s, O->len)) {
        return jb_free(&nb), -1;
    }
    const char *os = ob.p ? ob.p : "";
    size_t on = ob.len;
    int rc = 0;
    size_t i = 0;
    int64_t done = 0;
    if (on == 0) { /* "abc".replace("", "-") == "-a-b-c-" */
        for (; !rc && (count < 0 || done < count); done++) {
            rc = jb_put(&b, nb.p ? nb.p : "", nb.len);
            if (i >= S->len) {
                done++;
                break;
            }
            uint32_t c;
            int l = u8_dec(S->s + i, S->len - i, &c);
            rc = rc || jb_put(&b, S->s + i, (size_t)l);
            i += (size_t)l;
        }
        rc = rc || jb_put(&b, S->s + i, S->len - i);
    } else {
        while (!rc && (count < 0 || done < count)) {
            const char *hit = memmem(S->s + i, S->len - i, os, on);
            if (!hit) break;
            size_t at = (size_t)(hit - S->s);
            rc = jb_put(&b, S->s + i, at - i) || jb_put(&b, nb.p ? nb.p : "", nb.len);
            i = at + on, done++;
        }
        rc = rc || jb_put(&b, S->s + i, S->len - i);
    }
    rc = rc || js_new(a, b.p ? b.p : "", b.len, s, out);
    jb_free(&b), jb_free(&nb), jb_free(&ob);
    return rc ? -1 : 0;
}

int js_split(jarena *a, jv s, const jv *sep, int64_t maxsplit, int right, jv *out)
{
    const jstr *S = s.u.s;
    if (sep && sep->kind == JV_NONE) sep = NULL;
    if (sep && sep->kind != JV_STR) return tt_errorf("must be str or None, not %s", jv_type_name(*sep));
    if (sep && sep->u.s->len == 0) return tt_errorf("empty separator");
    /* pieces as [begin, end) byte ranges, collected in order (from the right for rsplit) */
    size_t cap = 16, n = 0;
    size_t *rb = malloc(cap * sizeof *rb), *re = malloc(cap * sizeof *re);
    int rc = 0;
#define PIECE(B, E)                                                                                                   \
    do {                                                                                                              \
        if (n == cap) {                                                                                               \
            cap *= 2;                                                                                                 \
            size_t *x = realloc(rb, cap * sizeof *rb), *y = x ? realloc(re, cap * sizeof *re) : NULL;                 \
            if (x) rb = x;                                                                                            \
            if (y) re = y;                                                                                            \
            if (!x || !y) goto oom;                                                                                   \
        }                                                                                                             \
        rb[n] = (B), re[n++] = (E);                                                                                   \
    } while (0)
    if (!rb || !re) goto oom;
    if (sep) {
        const char *p = sep->u.s->s;
        size_t pn = sep->u.s->len;
        if (!right) {
            size_t i = 0;
            int64_t k = 0;
            for (;;) {
                const char *hit = maxsplit < 0 || k < maxsplit ? memmem(S->s + i, S->len - i, p, pn) : NULL;
                if (!hit) {
                    PIECE(i, S->len);
                    break;
                }
                PIECE(i, (size_t)(hit - S->s));
                i = (size_t)(hit - S->s) + pn, k++;
            }
        } else {
            size_t e = S->len;
            int64_t k = 0;
            for (;;) {
                size_t found = (size_t)-1;
                if ((maxsplit < 0 || k < maxsplit) && e >= pn)
                    for (size_t j = e - pn + 1; j-- > 0;)
                        if (memcmp(S->s + j, p, pn) == 0) {
                            found = j;
                            break;
                        }
                if (found == (size_t)-1) {
                    PIECE(0, e);
                    break;
                }
                PIECE(found + pn, e);
                e = found, k++;
            }
        }
    } else { /* runs of whitespace; no empty pieces */
        uint32_t *cps = NULL;
        size_t ncp = 0;
        if (decode_all(S, &cps, &ncp)) goto fail;
        size_t *off = malloc((ncp + 1) * sizeof *off);
        if (!off) {
            free(cps);
            goto oom;
        }
        for (size_t i = 0, k = 0; k <= ncp; k++) {
            off[k] = i;
            if (k < ncp) i += (size_t)u8_enc(cps[k], (char[4]){0});
        }
        int64_t k = 0;
        if (!right) {
            size_t i = 0;
            for (;;) {
                while (i < ncp && u8_isspace(cps[i])) i++;
                if (i == ncp) break;
                if (maxsplit >= 0 && k >= maxsplit) { /* the rest, trailing whitespace and all */
                    PIECE(off[i], off[ncp]);
                    break;
                }
                size_t j = i;
                while (j < ncp && !u8_isspace(cps[j])) j++;
                PIECE(off[i], off[j]);
                i = j, k++;
            }
        } else {
            size_t e = ncp;
            for (;;) {
                while (e > 0 && u8_isspace(cps[e - 1])) e--;
                if (e == 0) break;
                if (maxsplit >= 0 && k >= maxsplit) { /* the rest, leading whitespace and all */
                    PIECE(off[0], off[e]);
                    break;
                }
                size_t j = e;
                while (j > 0 && !u8_isspace(cps[j - 1])) j--;
                PIECE(off[j], off[e]);
                e = j, k++;
            }
        }
        free(cps);
        free(off);
    }
    {
        jlist *l = jv_list_new(a, n);
        if (!l) goto fail;
        for (size_t i = 0; i < n; i++) {
            size_t k = right ? n - 1 - i : i;
            if (js_new(a, S->s + rb[k], re[k] - rb[k], s, &l->v[i])) goto fail;
        }
        *out = (jv){JV_LIST, 0, 0, {.l = l}};
    }
    free(rb), free(re);
    return 0;
oom:
    tt_errorf("out of memory");
fail:
    free(rb), free(re);
    (void)rc;
    return -1;
#undef PIECE
}


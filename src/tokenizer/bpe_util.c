/* bpe_util.c — the small pieces under the tokenizer.json implementation: byte
 * buffers, a string hash map, UTF-8, the GPT-2 byte map, patterns (PCRE2 with
 * Oniguruma's find_iter semantics) and the added-token trie. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

/* ---- buffers ------------------------------------------------------------- */

int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->n) return tt_errorf("tokenizer: buffer size overflow");
    size_t need = b->n + extra + 1; /* +1 keeps room for a NUL terminator */
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return tt_errorf("tokenizer: out of memory (%zu bytes)", cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int tok_orig_reserve(tok_orig *o, size_t extra)
{
    if (extra > SIZE_MAX / 8 - o->n) return tt_errorf("tokenizer: offset buffer size overflow");
    size_t need = o->n + extra;
    if (need <= o->cap) return 0;
    size_t cap = o->cap ? o->cap : 256;
    while (cap < need) cap *= 2;
    uint32_t *p = realloc(o->p, cap * sizeof *p);
    if (!p) return tt_errorf("tokenizer: out of memory (%zu offsets)", cap);
    o->p = p;
    o->cap = cap;
    return 0;
}

void tok_orig_free(tok_orig *o)
{
    free(o->p);
    o->p = NULL;
    o->n = o->cap = 0;
}

/* ---- hashing and the string map ----------------------------------------- */

uint64_t tok_hash(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

static int strmap_grow(tok_strmap *m)
{
    size_t slots = m->mask ? (m->mask + 1) * 2 : 64;
    uint32_t *s = calloc(slots, sizeof *s);
    if (!s) return tt_errorf("tokenizer: out of memory (vocabulary map)");
    for (size_t i = 0; i < m->n; i++) {
        size_t j = m->ents[i].hash & (slots - 1);
        while (s[j]) j = (j + 1) & (slots - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(m->slots);
    m->slots = s;
    m->mask = slots - 1;
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t val)
{
    if (n > UINT32_MAX / 2) return tt_errorf("tokenizer: token of %zu bytes is too long", n);
    if ((m->n + 1) * 2 > (m->mask ? m->mask + 1 : 0) && strmap_grow(m)) return -1;
    uint64_t h = tok_hash(s, n);
    size_t j = h & m->mask;
    for (; m->slots[j]; j = (j + 1) & m->mask) {
        tok_strent *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->keys.p + e->off, s, n) == 0) {
            e->val = val;
            return 0;
        }
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        tok_strent *e = realloc(m->ents, cap * sizeof *e);
        if (!e) return tt_errorf("tokenizer: out of memory (vocabulary map)");
        m->ents = e;
        m->cap = cap;
    }
    if (m->keys.n + n > UINT32_MAX) return tt_errorf("tokenizer: vocabulary strings exceed 4 GiB");
    tok_strent *e = &m->ents[m->n];
    e->hash = h;
    e->off = (uint32_t)m->keys.n;
    e->len = (uint32_t)n;
    e->val = val;
    if (tok_buf_put(&m->keys, s, n)) return -1;
    m->slots[j] = (uint32_t)++m->n;
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *s, size_t n)
{
    if (!m->n) return -1;
    uint64_t h = tok_hash(s, n);
    for (size_t j = h & m->mask; m->slots[j]; j = (j + 1) & m->mask) {
        const tok_strent *e = &m->ents[m->slots[j] - 1];
        if (e->hash == h && e->len == n && memcmp(m->keys.p + e->off, s, n) == 0) return e->val;
    }
    return -1;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->slots);
    free(m->ents);
    tok_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- UTF-8 --------------------------------------------------------------- */

size_t tok_utf8_invalid_at(const char *str, size_t n)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, eight bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F; /* no surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return i;
        if (i + len > n) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return n;
}

uint32_t tok_utf8_get(const char *str, size_t *adv)
{
    const uint8_t *s = (const uint8_t *)str;
    uint8_t c = s[0];
    if (c < 0x80) { *adv = 1; return c; }
    if (c < 0xE0) { *adv = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F); }
    if (c < 0xF0) { *adv = 3; return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F); }
    *adv = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
           (s[3] & 0x3F);
}

int tok_utf8_put(uint32_t cp, char *out)
{
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | (cp >> 6)); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int tok_is_whitespace(uint32_t cp)
{
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes show as themselves, the
 * other 68 bytes (0x00-0x20, 0x7F-0xA0, 0xAD) as U+0100.. in byte order. */
uint32_t tok_byte_to_char(int b)
{
    b &= 0xFF;
    if (b <= 0x20) return 256u + (uint32_t)b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (uint32_t)(b - 0x7F);
    if (b == 0xAD) return 256u + 33u + 34u;
    return (uint32_t)b;
}

int tok_char_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 289 + 0x7F);
    if (cp == 323) return 0xAD;
    return -1;
}

/* ---- patterns ------------------------------------------------------------ */

/* HF tokenizers runs Split / Replace regexes with Oniguruma. Rewrite the
 * escapes whose meaning differs in PCRE2 (UTF + UCP): Oniguruma's \s also
 * matches U+0085, its \w is Letter|Mark|Number|Connector_Punctuation, and
 * its \h is a hex digit. */
static int rewrite_onig(const char *pat, size_t n, tok_buf *out, const char *file, const char *where)
{
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char e = pat[++i];
            const char *rep = NULL, *neg = NULL;
            if (e == 's' || e == 'S') rep = "\\s\\x{85}", neg = (e == 'S') ? "" : NULL;
            else if (e == 'w' || e == 'W') rep = "\\p{L}\\p{M}\\p{N}\\p{Pc}", neg = (e == 'W') ? "" : NULL;
            else if (e == 'h' || e == 'H') rep = "0-9a-fA-F", neg = (e == 'H') ? "" : NULL;
            if (!rep) {
                char two[2] = {'\\', e};
                if (tok_buf_put(out, two, 2)) return -1;
                continue;
            }
            if (in_class) {
                if (neg)
                    return tt_errorf("%s: %s: \\%c inside a character class is not supported", file, where, e);
                if (tok_buf_put(out, rep, strlen(rep))) return -1;
            } else {
                if (tok_buf_put(out, neg ? "[^" : "[", neg ? 2 : 1) || tok_buf_put(out, rep, strlen(rep)) ||
                    tok_buf_put(out, "]", 1))
                    return -1;
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            if (tok_buf_put(out, &c, 1)) return -1;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < n && pat[i + 1] == '^') {
                if (tok_buf_put(out, "^", 1)) return -1;
                i++;
            }
            if (i + 1 < n && pat[i + 1] == ']') {
                if (tok_buf_put(out, "]", 1)) return -1;
                i++;
            }
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && pat[i + 1] == ':') {
            /* POSIX class [:name:] */
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < n; k++)
                if (pat[k] == ':' && pat[k + 1] == ']') { end = pat + k + 2; break; }
            if (end) {
                if (tok_buf_put(out, pat + i, (size_t)(end - (pat + i)))) return -1;
                i = (size_t)(end - pat) - 1;
                continue;
            }
        }
        if (in_class && c == ']') in_class = 0;
        if (tok_buf_put(out, &c, 1)) return -1;
    }
    return 0;
}

int tok_pattern_compile(tok_pattern *p, const char *pat, size_t n, int is_literal, const char *file,
                        const char *where)
{
    memset(p, 0, sizeof *p);
    if (is_literal && n > 0) {
        p->lit = malloc(n);
        if (!p->lit) return tt_errorf("%s: out of memory", file);
        memcpy(p->lit, pat, n);
        p->lit_n = n;
        return 0;
    }
    if (tok_utf8_invalid_at(pat, n) != n) return tt_errorf("%s: %s: the pattern is not valid UTF-8", file, where);
    if (!is_literal) p->fast = tok_fast_kind(pat, n);
    tok_buf src = {0};
    if (!is_literal && rewrite_onig(pat, n, &src, file, where)) {
        tok_buf_free(&src);
        return -1;
    }
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        tok_buf_free(&src);
        return tt_errorf("%s: out of memory", file);
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    int err = 0;
    PCRE2_SIZE erroff = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C;
    if (is_literal) opts |= PCRE2_LITERAL;
    p->re = pcre2_compile((PCRE2_SPTR)(src.p ? src.p : ""), src.n, opts, &err, &erroff, cc);
    pcre2_compile_context_free(cc);
    tok_buf_free(&src);
    if (!p->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return tt_errorf("%s: %s: regex does not compile (%s at offset %zu)", file, where, (const char *)msg,
                         (size_t)erroff);
    }
    /* JIT makes splitting several times faster; without it PCRE2 interprets */
    p->jit = pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

void tok_pattern_free(tok_pattern *p)
{
    if (p->re) pcre2_code_free(p->re);
    free(p->lit);
    memset(p, 0, sizeof *p);
}

const char *tok_find(const char *s, size_t n, const char *pat, size_t m)
{
    /* memchr on the first byte: glibc's memmem costs more to set up than the
     * short tokens and pieces searched here take to scan */
    if (!m || m > n) return m ? NULL : s;
    const char *end = s + n - m + 1;
    for (const char *p = s; p < end && (p = memchr(p, pat[0], (size_t)(end - p))) != NULL; p++)
        if (memcmp(p, pat, m) == 0) return p;
    return NULL;
}

void tok_finder_init(tok_finder *f, const tok_pattern *p, const char *s, size_t n, tok_scratch *sc)
{
    f->pat = p;
    f->s = s;
    f->n = n;
    f->pos = 0;
    f->last_match_end = SIZE_MAX;
    f->sc = sc;
}

int tok_finder_next(tok_finder *f, size_t *a, size_t *b)
{
    const tok_pattern *p = f->pat;
    size_t e;
    if (p->fast && f->pos < f->n && tok_fast_match(p->fast, f->s, f->n, f->pos, &e)) {
        *a = f->pos;
        *b = f->pos = f->last_match_end = e;
        return 1;
    }
    while (f->pos <= f->n) {
        size_t s;
        if (!p->re) {
            const char *hit = tok_find(f->s + f->pos, f->n - f->pos, p->lit, p->lit_n);
            if (!hit) break;
            s = (size_t)(hit - f->s);
            e = s + p->lit_n;
        } else {
            /* the text is valid UTF-8 (checked once per call) and pos is on a
             * character boundary, so the JIT's fast entry is safe */
            int rc = p->jit ? pcre2_jit_match(p->re, (PCRE2_SPTR)f->s, f->n, f->pos, 0, f->sc->md, f->sc->mc)
                            : pcre2_match(p->re, (PCRE2_SPTR)f->s, f->n, f->pos, PCRE2_NO_UTF_CHECK, f->sc->md,
                                          f->sc->mc);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return tt_errorf("tokenizer: regex match failed (%s)", (const char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(f->sc->md);
            s = ov[0];
            e = ov[1];
            if (e < s || e > f->n) return tt_errorf("tokenizer: regex returned a bad match");
        }
        /* Oniguruma's find_iter: an empty match right where the previous match
         * ended is skipped by stepping one character. */
        if (e == s && e == f->last_match_end) {
            f->pos += f->pos < f->n ? tok_utf8_len((unsigned char)f->s[f->pos]) : 1;
            continue;
        }
        f->pos = e;
        f->last_match_end = e;
        *a = s;
        *b = e;
        return 1;
    }
    f->pos = f->n + 1;
    return 0;
}

/* ---- added-token trie ---------------------------------------------------- */

static int32_t trie_node_new(tok_trie *t, uint8_t byte)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        tok_trie_node *nn = realloc(t->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return tt_errorf("tokenizer: out of memory (added tokens)");
        t->nodes = nn;
        t->cap = cap;
    }
    tok_trie_node *x = &t->nodes[t->n];
    x->child = x->sibling = x->token = -1;
    x->byte = byte;
    return t->n++;
}

int tok_trie_add(tok_trie *t, const char *s, size_t n, int32_t token)
{
    if (!n) return 0;
    if (!t->n && trie_node_new(t, 0) < 0) return -1;
    int32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        int32_t k = t->nodes[cur].child;
        while (k >= 0 && t->nodes[k].byte != c) k = t->nodes[k].sibling;
        if (k < 0) {
            k = trie_node_new(t, c);
            if (k < 0) return -1;
            t->nodes[k].sibling = t->nodes[cur].child;
            t->nodes[cur].child = k;
        }
        cur = k;
    }
    /* the first token with a given content wins, as in Aho-Corasick */
    if (t->nodes[cur].token < 0) t->nodes[cur].token = token;
    if (!t->first[(uint8_t)s[0]]) {
        t->first[(uint8_t)s[0]] = 1;
        t->n_first++;
        t->only_first = (uint8_t)s[0];
    }
    return 0;
}

int32_t tok_trie_match(const tok_trie *t, const char *s, size_t n, size_t *len)
{
    if (!t->n || !n || !t->first[(uint8_t)s[0]]) return -1;
    int32_t cur = 0, best = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t k = t->nodes[cur].child;
        while (k >= 0 && t->nodes[k].byte != (uint8_t)s[i]) k = t->nodes[k].sibling;
        if (k < 0) break;
        cur = k;
        if (t->nodes[cur].token >= 0) {
            best = t->nodes[cur].token;
            *len = i + 1;
        }
    }
    return best;
}

void tok_trie_free(tok_trie *t)
{
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

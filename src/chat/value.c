/* value.c — the chat template's values: the arena and buffers they live in, and the Python
 * semantics every part of the interpreter shares (truth, ==, <, str(), repr(), UTF-8). */
#include "chat/value.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/core.h"

/* ---- arena ------------------------------------------------------------------------------------- */

struct jchunk {
    jchunk *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

void *ja_alloc(jarena *a, size_t bytes)
{
    bytes = (bytes + 15) & ~(size_t)15;
    if (bytes == 0) bytes = 16;
    jchunk *c = a->head;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > 60000 ? bytes : 64000;
        if (a->limit && a->total + cap > a->limit) {
            tt_errorf("the template needs more than %zu bytes of memory", a->limit);
            return NULL;
        }
        c = malloc(sizeof *c + cap);
        if (!c) {
            tt_errorf("out of memory (%zu bytes)", cap);
            return NULL;
        }
        c->next = a->head, c->used = 0, c->cap = cap;
        a->head = c;
        a->total += cap;
    }
    void *p = c->data + c->used;
    c->used += bytes;
    memset(p, 0, bytes);
    return p;
}

void ja_free(jarena *a)
{
    for (jchunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- buffers ----------------------------------------------------------------------------------- */

int jb_put(jbuf *b, const void *s, size_t n)
{
    if (b->limit && (n > b->limit || b->len > b->limit - n))
        return tt_errorf("the output would pass %zu bytes (the bound on a rendering)", b->limit);
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->len + n + 1) {
            if (c > ((size_t)-1) / 2) return tt_errorf("out of memory");
            c *= 2;
        }
        char *p = realloc(b->p, c);
        if (!p) return tt_errorf("out of memory (%zu bytes)", c);
        b->p = p, b->cap = c;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int jb_puts(jbuf *b, const char *s) { return jb_put(b, s, strlen(s)); }
int jb_putc(jbuf *b, char c) { return jb_put(b, &c, 1); }

int jb_printf(jbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return tt_errorf("formatting failed");
    return jb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void jb_free(jbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- UTF-8 ------------------------------------------------------------------------------------- */

int u8_dec(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return *cp = 0, 0;
    if (u[0] < 0x80) return *cp = u[0], 1;
    int len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : u[0] >= 0xC0 ? 2 : 1;
    if (len == 1 || (size_t)len > n) return *cp = 0xFFFD, 1;
    uint32_t c = u[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) c = (c << 6) | (u[i] & 0x3F);
    *cp = c;
    return len;
}

int u8_enc(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
    if (cp < 0x800) return o[0] = (unsigned char)(0xC0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | cp >> 12), o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | cp >> 18), o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t u8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as Python decodes it */
int u8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        unsigned c = u[i];
        size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return 0;
        for (size_t k = 1; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && u[i + 1] < 0xA0) || (c == 0xED && u[i + 1] >= 0xA0) || (c == 0xF0 && u[i + 1] < 0x90) ||
            (c == 0xF4 && u[i + 1] >= 0x90))
            return 0;
        i += len;
    }
    return 1;
}

size_t u8_offset(const char *s, size_t n, size_t i)
{
    size_t at = 0;
    while (i > 0 && at < n) {
        at++;
        while (at < n && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
        i--;
    }
    return at;
}

int u8_isspace(uint32_t c)
{
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- making values ----------------------------------------------------------------------------- */

int jv_str(jarena *a, const char *s, size_t n, jv *out)
{
    jstr *p = ja_alloc(a, sizeof *p + n + 1);
    if (!p) return -1;
    p->len = n;
    if (n) memcpy(p->s, s, n);
    p->s[n] = 0;
    *out = (jv){JV_STR, 0, 0, {.s = p}};
    return 0;
}

int jv_cstr(jarena *a, const char *s, jv *out) { return jv_str(a, s, strlen(s), out); }

jlist *jv_list_new(jarena *a, size_t n)
{
    if (n > ((size_t)1 << 40)) {
        tt_errorf("a list of %zu items is too long", n);
        return NULL;
    }
    jlist *l = ja_alloc(a, sizeof *l + n * sizeof(jv));
    if (l) l->n = n;
    return l;
}

int jv_list(jarena *a, const jv *items, size_t n, int tuple, jv *out)
{
    jlist *l = jv_list_new(a, n);
    if (!l) return -1;
    if (n) memcpy(l->v, items, n * sizeof *items);
    *out = (jv){JV_LIST, (uint8_t)(tuple ? JVF_TUPLE : 0), 0, {.l = l}};
    return 0;
}

jdict *jv_dict_new(jarena *a, size_t cap)
{
    jdict *d = ja_alloc(a, sizeof *d);
    if (!d) return NULL;
    d->keys = ja_alloc(a, (cap ? cap : 1) * sizeof(jv));
    d->vals = ja_alloc(a, (cap ? cap : 1) * sizeof(jv));
    return d->keys && d->vals ? d : NULL;
}

static long dict_find(const jdict *d, jv key)
{
    if (key.kind == JV_STR) { /* the common case: string keys */
        for (size_t i = 0; i < d->n; i++)
            if (d->keys[i].kind == JV_STR && d->keys[i].u.s->len == key.u.s->len &&
                memcmp(d->keys[i].u.s->s, key.u.s->s, key.u.s->len) == 0)
                return (long)i;
        return -1;
    }
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->keys[i], key)) return (long)i;
    return -1;
}

void jv_dict_set(jdict *d, jv key, jv val)
{
    long i = dict_find(d, key);
    if (i >= 0) d->vals[i] = val;
    else d->keys[d->n] = key, d->vals[d->n++] = val;
}

int jv_dict_get(const jdict *d, jv key, jv *out)
{
    long i = dict_find(d, key);
    if (i < 0) return 0;
    *out = d->vals[i];
    return 1;
}

int jv_dict_get_str(const jdict *d, const char *key, jv *out)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == JV_STR && d->keys[i].u.s->len == n && memcmp(d->keys[i].u.s->s, key, n) == 0)
            return *out = d->vals[i], 1;
    return 0;
}

const char *jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return v.flags & JVF_MARKUP ? "Markup" : "str";
    case JV_LIST: return v.flags & JVF_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "method";
    case JV_LOOP: return "LoopContext";
    }
    return "?";
}

/* ---- truth, equality, order -------------------------------------------------------------------- */

/* Values a template nests deeper than this (a list in a list ... built in a loop) stop ==, < and
 * hashing where Python would raise RecursionError; the renderer turns the flag into an error. */
enum { JV_MAX_DEPTH = 500 };
_Thread_local int jv_too_deep;
static _Thread_local int cmp_depth;

int jv_truthy(jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

int jv_hashable(jv v)
{
    if (v.kind == JV_LIST) {
        if (!(v.flags & JVF_TUPLE)) return 0;
        if (++cmp_depth > JV_MAX_DEPTH) return cmp_depth--, jv_too_deep = 1, 0;
        int ok = 1;
        for (size_t i = 0; i < v.u.l->n && ok; i++) ok = jv_hashable(v.u.l->v[i]);
        cmp_depth--;
        return ok;
    }
    return v.kind != JV_DICT && v.kind != JV_NS;
}

static double num_of(jv v) { return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : (double)v.u.b; }
static int64_t int_of(jv v) { return v.kind == JV_INT ? v.u.i : (int64_t)v.u.b; }

static int eq_deep(jv a, jv b);

int jv_eq(jv a, jv b)
{
    if (a.kind != JV_LIST && a.kind != JV_DICT) return eq_deep(a, b);
    if (++cmp_depth > JV_MAX_DEPTH) return cmp_depth--, jv_too_deep = 1, 0;
    int r = eq_deep(a, b);
    cmp_depth--;
    return r;
}

static int eq_deep(jv a, jv b)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return int_of(a) == int_of(b);
        return num_of(a) == num_of(b);
    }
    if (a.kind != b.kind) return 0;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR: return a.u.s->len == b.u.s->len && memcmp(a.u.s->s, b.u.s->s, a.u.s->len) == 0;
    case JV_LIST:
        if ((a.flags & JVF_TUPLE) != (b.flags & JVF_TUPLE) || a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv o;
            if (!jv_dict_get(b.u.d, a.u.d->keys[i], &o) || !jv_eq(a.u.d->vals[i], o)) return 0;
        }
        return 1;
    case JV_NS: return a.u.ns == b.u.ns;
    case JV_MACRO: return a.u.m == b.u.m;
    case JV_FUNC: return a.id == b.id;
    case JV_METHOD: return a.u.meth == b.u.meth;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return 0;
    }
}

static int cmp_deep(jv a, jv b, int *res);

int jv_cmp(jv a, jv b, int *res)
{
    if (a.kind != JV_LIST) return cmp_deep(a, b, res);
    if (++cmp_depth > JV_MAX_DEPTH) {
        cmp_depth--;
        jv_too_deep = 1;
        return tt_errorf("a value nested more than %d deep (Python stops with RecursionError)", JV_MAX_DEPTH);
    }
    int r = cmp_deep(a, b, res);
    cmp_depth--;
    return r;
}

static int cmp_deep(jv a, jv b, int *res)
{
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            int64_t x = int_of(a), y = int_of(b);
            *res = x < y ? -1 : x > y;
        } else {
            double x = num_of(a), y = num_of(b);
            *res = x < y ? -1 : x > y ? 1 : 0; /* NaN: neither less nor greater */
        }
        return 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) { /* UTF-8 byte order is code point order */
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        int c = memcmp(a.u.s->s, b.u.s->s, n);
        *res = c ? (c < 0 ? -1 : 1) : (a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len);
        return 0;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST && (a.flags & JVF_TUPLE) == (b.flags & JVF_TUPLE)) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(a.u.l->v[i], b.u.l->v[i])) continue;
            return jv_cmp(a.u.l->v[i], b.u.l->v[i], res);
        }
        *res = a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
        return 0;
    }
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF)
        return tt_errorf("'%s' is undefined", a.kind == JV_UNDEF ? (a.u.uname ? a.u.uname : "value")
                                                                 : (b.u.uname ? b.u.uname : "value"));
    return tt_errorf("'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
}

/* ---- str() and repr() -------------------------------------------------------------------------- */

void jv_write_float(char *out, size_t cap, double f)
{
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp: [-]d[.ddd]e[+-]XX -> the digits and the decimal exponent */
    char digits[24];
    int nd = 0, neg = tmp[0] == '-';
    const char *p = tmp + neg;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int decpt = exp10 + 1;
    size_t at = 0;
#define OUT(...) at += (size_t)snprintf(out + at, at < cap ? cap - at : 0, __VA_ARGS__)
    if (neg) OUT("-");
    if (decpt <= -4 || decpt > 16) {
        OUT("%c", digits[0]);
        if (nd > 1) OUT(".%s", digits + 1);
        OUT("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        OUT("0.");
        for (int i = 0; i < -decpt; i++) OUT("0");
        OUT("%s", digits);
    } else if (decpt >= nd) {
        OUT("%s", digits);
        for (int i = nd; i < decpt; i++) OUT("0");
        OUT(".0");
    } else {
        OUT("%.*s.%s", decpt, digits, digits + decpt);
    }
#undef OUT
}

static int is_printable(uint32_t c)
{
    if (c == ' ') return 1;
    if (c < 0x20 || c == 0x7F) return 0;
    if (c < 0x7F) return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return 0;
    default: return 1;
    }
}

static int write_str_repr(jbuf *b, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (jb_putc(b, q)) return -1;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int l = u8_dec(s + i, n - i, &c);
        int rc;
        if (c == (uint32_t)q || c == '\\') rc = jb_putc(b, '\\') || jb_putc(b, (char)c);
        else if (c == '\t') rc = jb_puts(b, "\\t");
        else if (c == '\n') rc = jb_puts(b, "\\n");
        else if (c == '\r') rc = jb_puts(b, "\\r");
        else if (is_printable(c)) rc = jb_put(b, s + i, (size_t)l);
        else if (c < 0x100) rc = jb_printf(b, "\\x%02x", c);
        else if (c < 0x10000) rc = jb_printf(b, "\\u%04x", c);
        else rc = jb_printf(b, "\\U%08x", c);
        if (rc) return -1;
        i += (size_t)l;
    }
    return jb_putc(b, q);
}

static int write_repr(jbuf *b, jv v, int depth);

static int write_seq(jbuf *b, jv v, int depth)
{
    int tuple = v.flags & JVF_TUPLE;
    if (jb_putc(b, tuple ? '(' : '[')) return -1;
    for (size_t i = 0; i < v.u.l->n; i++)
        if ((i && jb_puts(b, ", ")) || write_repr(b, v.u.l->v[i], depth + 1)) return -1;
    if (tuple && v.u.l->n == 1 && jb_putc(b, ',')) return -1;
    return jb_putc(b, tuple ? ')' : ']');
}

static int write_dict(jbuf *b, const jv *keys, const jv *vals, size_t n, int depth)
{
    if (jb_putc(b, '{')) return -1;
    for (size_t i = 0; i < n; i++)
        if ((i && jb_puts(b, ", ")) || write_repr(b, keys[i], depth + 1) || jb_puts(b, ": ") ||
            write_repr(b, vals[i], depth + 1))
            return -1;
    return jb_putc(b, '}');
}

static int write_repr(jbuf *b, jv v, int depth)
{
    if (depth > 200) return tt_errorf("a value nested more than 200 deep");
    switch (v.kind) {
    case JV_STR:
        if (v.flags & JVF_MARKUP)
            return jb_puts(b, "Markup(") || write_str_repr(b, v.u.s->s, v.u.s->len) || jb_putc(b, ')');
        return write_str_repr(b, v.u.s->s, v.u.s->len);
    case JV_LIST: return write_seq(b, v, depth);
    case JV_DICT: return write_dict(b, v.u.d->keys, v.u.d->vals, v.u.d->n, depth);
    case JV_UNDEF: return jb_puts(b, "Undefined");
    case JV_NS:
        return jb_puts(b, "<Namespace ") || write_dict(b, v.u.ns->keys, v.u.ns->vals, v.u.ns->n, depth) ||
               jb_putc(b, '>');
    default: return jv_write_str(b, v);
    }
}

int jv_write_repr(jbuf *b, jv v) { return write_repr(b, v, 0); }

int jv_write_str(jbuf *b, jv v)
{
    char tmp[64];
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_NONE: return jb_puts(b, "None");
    case JV_BOOL: return jb_puts(b, v.u.b ? "True" : "False");
    case JV_INT: return jb_printf(b, "%lld", (long long)v.u.i);
    case JV_FLOAT: jv_write_float(tmp, sizeof tmp, v.u.f); return jb_puts(b, tmp);
    case JV_STR: return jb_put(b, v.u.s->s, v.u.s->len);
    case JV_LIST:
    case JV_DICT:
    case JV_NS: return write_repr(b, v, 0);
    default:
        return tt_errorf("a %s cannot be written out as text here (titan's renderer does not print it)",
                         jv_type_name(v));
    }
}

int jv_to_str(jarena *a, jv v, jv *out)
{
    if (v.kind == JV_STR) {
        *out = v;
        return 0;
    }
    jbuf b = {0};
    int rc = jv_write_str(&b, v) || jv_str(a, b.p ? b.p : "", b.len, out);
    jb_free(&b);
    return rc ? -1 : 0;
}

int jv_write_escaped(jbuf *b, const char *s, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rep = NULL;
        switch (s[i]) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        default: continue;
        }
        if (jb_put(b, s + from, i - from) || jb_puts(b, rep)) return -1;
        from = i + 1;
    }
    return jb_put(b, s + from, n - from);
}

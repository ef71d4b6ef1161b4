/* toml.c — a small, strict reader for the TOML subset described in toml.h and
 * docs/config.md. It never recurses, checks every byte it reads against the end
 * of the input, and reports the first problem as "NAME:LINE: message". */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "formats/toml.h"

#define TOML_MAX_BYTES ((size_t)1 << 30) /* keeps line numbers and sizes far from int limits */
#define TOML_MAX_NUMBER 256              /* longest number token we convert */

/* ---- growable byte buffer ---------------------------------------------- */

typedef struct {
    char *d;
    size_t n, cap;
} sbuf;

static int sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->n + n + 1) cap *= 2;
        char *d = realloc(b->d, cap);
        if (!d) return tt_errorf("out of memory");
        b->d = d;
        b->cap = cap;
    }
    memcpy(b->d + b->n, s, n);
    b->n += n;
    b->d[b->n] = 0;
    return 0;
}

/* Take ownership of the buffer's text (an empty buffer gives ""). */
static char *sb_take(sbuf *b)
{
    if (!b->d && sb_put(b, "", 0)) return NULL;
    char *s = b->d;
    b->d = NULL;
    b->n = b->cap = 0;
    return s;
}

/* ---- parser state -------------------------------------------------------- */

enum { NODE_VALUE, NODE_TABLE };
/* How a table came to exist decides what may later reopen it (TOML 1.0 rules). */
enum { HOW_IMPLICIT, HOW_HEADER, HOW_DOTTED };

typedef struct {
    int parent;
    char *name;
    unsigned char kind, how;
    int section; /* header section in which a dotted table was created */
    int line;
} node;

typedef struct {
    const char *p, *end;
    const char *name; /* for messages; NULL when parsing a lone scalar */
    int line;
    /* the tree of defined keys and tables; node 0 is the root table */
    node *nodes;
    size_t n_nodes, cap_nodes;
    int *hash; /* open addressing over (parent, name): node index + 1, 0 = empty */
    size_t hash_cap;
    int cur_table, section;
    char *prefix; /* canonical key of the current [table], "" at the root */
    tt_toml_doc *doc;
    size_t cap_entries;
} parser;

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->name) return tt_errorf("%s:%d: %s", ps->name, ps->line, msg);
    return tt_errorf("%s", msg);
}

/* ---- small helpers ------------------------------------------------------- */

const char *tt_toml_type_name(tt_toml_type t)
{
    switch (t) {
    case TT_TOML_STRING: return "string";
    case TT_TOML_INT: return "integer";
    case TT_TOML_FLOAT: return "float";
    case TT_TOML_BOOL: return "boolean";
    case TT_TOML_ARRAY: return "array";
    }
    return "?";
}

static bool is_bare(int ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '-';
}

static bool is_digit(int ch) { return ch >= '0' && ch <= '9'; }

bool tt_toml_is_bare_key(const char *s)
{
    if (!s || !*s) return false;
    for (; *s; s++)
        if (!is_bare((unsigned char)*s)) return false;
    return true;
}

/* Append a key component in canonical form: bare if possible, else quoted. */
static int put_component(sbuf *b, const char *s)
{
    if (tt_toml_is_bare_key(s)) return sb_put(b, s, strlen(s));
    if (sb_put(b, "\"", 1)) return -1;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        char esc[8];
        if (*q == '"' || *q == '\\') {
            esc[0] = '\\', esc[1] = (char)*q;
            if (sb_put(b, esc, 2)) return -1;
        } else if (*q < 0x20 || *q == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04X", *q);
            if (sb_put(b, esc, 6)) return -1;
        } else if (sb_put(b, (const char *)q, 1)) return -1;
    }
    return sb_put(b, "\"", 1);
}

/* Length of the valid UTF-8 sequence at s (0 if invalid): no overlongs,
 * no surrogates, nothing above U+10FFFF, no NUL. */
static size_t utf8_len(const unsigned char *s, const unsigned char *end)
{
    size_t avail = (size_t)(end - s);
    unsigned c = s[0];
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return avail >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

bool tt_toml_valid_utf8(const char *s, size_t n)
{
    const unsigned char *q = (const unsigned char *)s, *e = q + n;
    while (q < e) {
        size_t k = utf8_len(q, e);
        if (k == 0) return false;
        q += k;
    }
    return true;
}

static int put_codepoint(parser *ps, sbuf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp == 0) return perr(ps, "\\u0000 is not allowed in strings");
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return perr(ps, "invalid unicode escape U+%X", cp);
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[2] = (char)(0x80 | (cp & 0x3F)),
        n = 3;
    else
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    return sb_put(b, u, n);
}

/* ---- whitespace, comments, line ends --------------------------------------- */

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t')) ps->p++;
}

/* At '#': skip the comment up to (not including) the line end. */
static int skip_comment(parser *ps)
{
    while (ps->p < ps->end && *ps->p != '\n') {
        unsigned char ch = (unsigned char)*ps->p;
        if (ch == '\r') {
            if (ps->p + 1 < ps->end && ps->p[1] == '\n') return 0;
            return perr(ps, "carriage return without a line feed");
        }
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return perr(ps, "control character 0x%02X in a comment", ch);
        ps->p++;
    }
    return 0;
}

/* Consume one line end ("\n" or "\r\n") if there is one; 1 if consumed, 0 if
 * not at a line end, -1 on a lone '\r'. */
static int eat_newline(parser *ps)
{
    if (ps->p >= ps->end) return 0;
    if (*ps->p == '\n') {
        ps->p++;
        ps->line++;
        return 1;
    }
    if (*ps->p == '\r') {
        if (ps->p + 1 < ps->end && ps->p[1] == '\n') {
            ps->p += 2;
            ps->line++;
            return 1;
        }
        return perr(ps, "carriage return without a line feed");
    }
    return 0;
}

/* After a header or a key/value: only whitespace and a comment may follow. */
static int expect_line_end(parser *ps, const char *after)
{
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '#' && skip_comment(ps)) return -1;
    if (ps->p >= ps->end) return 0;
    int r = eat_newline(ps);
    if (r < 0) return -1;
    if (r == 0) return perr(ps, "unexpected '%c' after %s (one key = value per line)", *ps->p, after);
    return 0;
}

/* Whitespace, newlines and comments, as allowed between array elements. */
static int skip_ws_nl(parser *ps)
{
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end) return 0;
        if (*ps->p == '#') {
            if (skip_comment(ps)) return -1;
            continue;
        }
        int r = eat_newline(ps);
        if (r < 0) return -1;
        if (r == 0) return 0;
    }
}

/* ---- strings --------------------------------------------------------------- */

static int hex_digits(parser *ps, int n, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++) {
        if (ps->p >= ps->end) return perr(ps, "unterminated unicode escape");
        char ch = *ps->p++;
        int d = is_digit(ch) ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
        if (d < 0) return perr(ps, "unicode escape needs %d hex digits", n);
        v = v * 16 + (uint32_t)d;
    }
    *out = v;
    return 0;
}

/* At the opening quote of a basic ("...") or literal ('...') string. */
static int parse_string(parser *ps, char **out)
{
    char q = *ps->p;
    if (ps->end - ps->p >= 3 && ps->p[1] == q && ps->p[2] == q)
        return perr(ps, "multi-line strings (%c%c%c) are not supported", q, q, q);
    ps->p++;
    sbuf b = {0};
    for (;;) {
        if (ps->p >= ps->end || *ps->p == '\n' || *ps->p == '\r') {
            free(b.d);
            return perr(ps, "unterminated string");
        }
        unsigned char ch = (unsigned char)*ps->p;
        if (ch == (unsigned char)q) {
            ps->p++;
            break;
        }
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            free(b.d);
            return perr(ps, "control character 0x%02X in a string (use an escape)", ch);
        }
        if (ch == '\\' && q == '"') {
            ps->p++;
            if (ps->p >= ps->end) {
                free(b.d);
                return perr(ps, "unterminated string");
            }
            char e = *ps->p++, c = 0;
            uint32_t cp = 0;
            int r = 0;
            switch (e) {
            case 'b': c = '\b'; break;
            case 't': c = '\t'; break;
            case 'n': c = '\n'; break;
            case 'f': c = '\f'; break;
            case 'r': c = '\r'; break;
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case 'u': r = hex_digits(ps, 4, &cp) || put_codepoint(ps, &b, cp); break;
            case 'U': r = hex_digits(ps, 8, &cp) || put_codepoint(ps, &b, cp); break;
            default:
                free(b.d);
                if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7f) return perr(ps, "invalid escape '\\%c' in string", e);
                return perr(ps, "invalid escape in string");
            }
            if (r || (c && sb_put(&b, &c, 1))) {
                free(b.d);
                return -1;
            }
            continue;
        }
        /* the whole input was checked for valid UTF-8 up front */
        size_t n = utf8_len((const unsigned char *)ps->p, (const unsigned char *)ps->end);
        if (n == 0 || sb_put(&b, ps->p, n)) {
            free(b.d);
            return n == 0 ? perr(ps, "invalid UTF-8 in string") : -1;
        }
        ps->p += n;
    }
    *out = sb_take(&b);
    return *out ? 0 : -1;
}

/* ---- keys ------------------------------------------------------------------- */

typedef struct {
    char **v;
    size_t n, cap;
} keyparts;

static void kp_free(keyparts *k)
{
    for (size_t i = 0; i < k->n; i++) free(k->v[i]);
    free(k->v);
    memset(k, 0, sizeof *k);
}

static int kp_push(keyparts *k, char *s)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 4;
        char **v = realloc(k->v, cap * sizeof *v);
        if (!v) {
            free(s);
            return tt_errorf("out of memory");
        }
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = s;
    return 0;
}

/* A key: components separated by '.', each bare or quoted, spaces around dots. */
static int parse_key(parser *ps, keyparts *k)
{
    for (;;) {
        skip_ws(ps);
        char *part = NULL;
        if (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\'')) {
            if (parse_string(ps, &part)) return -1;
        } else {
            const char *s = ps->p;
            while (ps->p < ps->end && is_bare((unsigned char)*ps->p)) ps->p++;
            if (ps->p == s) {
                if (ps->p >= ps->end || *ps->p == '\n' || *ps->p == '\r') return perr(ps, "expected a key");
                return perr(ps, "expected a key, found '%c'", *ps->p);
            }
            part = malloc((size_t)(ps->p - s) + 1);
            if (!part) return tt_errorf("out of memory");
            memcpy(part, s, (size_t)(ps->p - s));
            part[ps->p - s] = 0;
        }
        if (kp_push(k, part)) return -1;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == '.') {
            ps->p++;
            continue;
        }
        return 0;
    }
}

/* ---- scalar values ------------------------------------------------------------- */

/* digits with single underscores between them; returns the end pointer or NULL */
static const char *scan_digits(const char *s, const char *end)
{
    if (s >= end || !is_digit(*s)) return NULL;
    while (s < end && is_digit(*s)) {
        s++;
        if (s < end && *s == '_') {
            if (s + 1 >= end || !is_digit(s[1])) return NULL;
            s++;
        }
    }
    return s;
}

/* A bare value token (number, boolean, or something we reject). */
static int parse_bare(parser *ps, tt_toml_value *v)
{
    const char *s = ps->p;
    while (ps->p < ps->end && (is_bare((unsigned char)*ps->p) || *ps->p == '+' || *ps->p == '.' || *ps->p == ':'))
        ps->p++;
    const char *e = ps->p;
    size_t n = (size_t)(e - s);
    if (n == 0) {
        if (ps->p >= ps->end || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '#') return perr(ps, "expected a value");
        if (*ps->p == '{') return perr(ps, "inline tables ({...}) are not supported; use a [table] section");
        return perr(ps, "expected a value, found '%c'", *ps->p);
    }
    int shown = n > 40 ? 40 : (int)n;
    if ((n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5))) {
        v->type = TT_TOML_BOOL;
        v->b = n == 4;
        return 0;
    }
    const char *t = s + (*s == '+' || *s == '-');
    if ((e - t == 3 && (!memcmp(t, "inf", 3) || !memcmp(t, "nan", 3))))
        return perr(ps, "inf and nan are not accepted (config values are finite)");
    if (n >= 10 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) && s[4] == '-')
        return perr(ps, "dates are not supported: '%.*s'", shown, s);
    if (memchr(s, ':', n)) return perr(ps, "times are not supported: '%.*s'", shown, s);
    if (e - t >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b'))
        return perr(ps, "hexadecimal, octal and binary integers are not supported: '%.*s'", shown, s);
    if (t >= e || !is_digit(*t)) return perr(ps, "invalid value '%.*s' (strings must be quoted)", shown, s);

    const char *q = scan_digits(t, e);
    if (!q) return perr(ps, "invalid number '%.*s' (underscores must sit between digits)", shown, s);
    if (t[0] == '0' && q - t > 1) return perr(ps, "leading zeros are not allowed: '%.*s'", shown, s);
    bool is_float = false;
    if (q < e && *q == '.') {
        q = scan_digits(q + 1, e);
        if (!q) return perr(ps, "invalid float '%.*s' (digits needed after '.')", shown, s);
        is_float = true;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < e && (*q == '+' || *q == '-')) q++;
        q = scan_digits(q, e);
        if (!q) return perr(ps, "invalid float exponent in '%.*s'", shown, s);
        is_float = true;
    }
    if (q != e) return perr(ps, "invalid number '%.*s'", shown, s);

    if (!is_float) {
        /* accumulate as a negative number so INT64_MIN fits */
        int64_t acc = 0;
        for (const char *d = t; d < e; d++) {
            if (*d == '_') continue;
            int dig = *d - '0';
            if (acc < (INT64_MIN + dig) / 10) return perr(ps, "integer out of range: '%.*s'", shown, s);
            acc = acc * 10 - dig;
        }
        if (*s != '-') {
            if (acc == INT64_MIN) return perr(ps, "integer out of range: '%.*s'", shown, s);
            acc = -acc;
        }
        v->type = TT_TOML_INT;
        v->i = acc;
        return 0;
    }
    if (n >= TOML_MAX_NUMBER) return perr(ps, "number too long");
    char buf[TOML_MAX_NUMBER];
    size_t m = 0;
    for (const char *d = s; d < e; d++)
        if (*d != '_') buf[m++] = *d;
    buf[m] = 0;
    errno = 0;
    char *stop;
    double f = strtod(buf, &stop);
    if (*stop != 0) return perr(ps, "invalid float '%.*s'", shown, s);
    if (!isfinite(f)) return perr(ps, "float out of range: '%.*s'", shown, s);
    v->type = TT_TOML_FLOAT;
    v->f = f;
    return 0;
}

static int parse_scalar_at(parser *ps, tt_toml_value *v)
{
    memset(v, 0, sizeof *v);
    v->line = ps->line;
    if (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\'')) {
        v->type = TT_TOML_STRING;
        return parse_string(ps, &v->str);
    }
    if (ps->p < ps->end && *ps->p == '[') return perr(ps, "nested arrays are not supported");
    return parse_bare(ps, v);
}

void tt_toml_value_clear(tt_toml_value *v)
{
    if (!v) return;
    free(v->str);
    for (size_t i = 0; i < v->n_items; i++) free(v->items[i].str);
    free(v->items);
    memset(v, 0, sizeof *v);
}

/* At '[' in value position: an array of scalars of one type. */
static int parse_array(parser *ps, tt_toml_value *v)
{
    int start = ps->line;
    size_t cap = 0;
    ps->p++;
    memset(v, 0, sizeof *v);
    v->type = TT_TOML_ARRAY;
    v->line = start;
    for (;;) {
        if (skip_ws_nl(ps)) goto fail;
        if (ps->p >= ps->end) {
            ps->line = start;
            perr(ps, "unterminated array");
            goto fail;
        }
        if (*ps->p == ']') break;
        if (v->n_items == cap) {
            size_t nc = cap ? 2 * cap : 4;
            tt_toml_value *it = realloc(v->items, nc * sizeof *it);
            if (!it) {
                tt_errorf("out of memory");
                goto fail;
            }
            v->items = it;
            cap = nc;
        }
        tt_toml_value *it = &v->items[v->n_items];
        if (*ps->p == '{') {
            perr(ps, "inline tables ({...}) are not supported");
            goto fail;
        }
        if (parse_scalar_at(ps, it)) {
            free(it->str);
            goto fail;
        }
        v->n_items++;
        if (v->n_items > 1 && it->type != v->items[0].type) {
            perr(ps, "array mixes %s and %s values", tt_toml_type_name(v->items[0].type), tt_toml_type_name(it->type));
            goto fail;
        }
        if (skip_ws_nl(ps)) goto fail;
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') break;
        if (ps->p >= ps->end) {
            ps->line = start;
            perr(ps, "unterminated array");
        } else perr(ps, "expected ',' or ']' in array, found '%c'", *ps->p);
        goto fail;
    }
    ps->p++; /* ']' */
    return 0;
fail:
    tt_toml_value_clear(v);
    return -1;
}

static int parse_value(parser *ps, tt_toml_value *v)
{
    if (ps->p < ps->end && *ps->p == '[') return parse_array(ps, v);
    return parse_scalar_at(ps, v);
}

/* ---- the table tree ------------------------------------------------------------ */

static uint64_t node_hash(int parent, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(unsigned)parent * 0x9E3779B97F4A7C15ull;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

static int find_node(parser *ps, int parent, const char *name)
{
    size_t mask = ps->hash_cap - 1;
    for (size_t i = node_hash(parent, name) & mask;; i = (i + 1) & mask) {
        int idx = ps->hash[i] - 1;
        if (idx < 0) return -1;
        if (ps->nodes[idx].parent == parent && !strcmp(ps->nodes[idx].name, name)) return idx;
    }
}

static void hash_insert(parser *ps, int idx)
{
    size_t mask = ps->hash_cap - 1;
    size_t i = node_hash(ps->nodes[idx].parent, ps->nodes[idx].name) & mask;
    while (ps->hash[i]) i = (i + 1) & mask;
    ps->hash[i] = idx + 1;
}

/* Create a child node; the name is copied. Returns its index or -1. */
static int add_node(parser *ps, int parent, const char *name, int kind, int how)
{
    if (ps->n_nodes == ps->cap_nodes) {
        size_t cap = ps->cap_nodes ? 2 * ps->cap_nodes : 64;
        node *nn = realloc(ps->nodes, cap * sizeof *nn);
        if (!nn) return tt_errorf("out of memory");
        ps->nodes = nn;
        ps->cap_nodes = cap;
    }
    if (2 * (ps->n_nodes + 1) > ps->hash_cap) { /* keep the table at most half full */
        size_t cap = ps->hash_cap ? 2 * ps->hash_cap : 128;
        int *h = calloc(cap, sizeof *h);
        if (!h) return tt_errorf("out of memory");
        free(ps->hash);
        ps->hash = h;
        ps->hash_cap = cap;
        for (size_t i = 0; i < ps->n_nodes; i++) hash_insert(ps, (int)i);
    }
    char *nm = tt_strdup(name);
    if (!nm) return -1;
    int idx = (int)ps->n_nodes++;
    ps->nodes[idx] = (node){parent, nm, (unsigned char)kind, (unsigned char)how, ps->section, ps->line};
    hash_insert(ps, idx);
    return idx;
}

/* Canonical dotted key of parts[0..n) (with the current table's prefix if
 * with_prefix), for entries and messages. */
static char *join_key(parser *ps, const keyparts *k, size_t n, bool with_prefix)
{
    sbuf b = {0};
    if (with_prefix && ps->prefix[0] && sb_put(&b, ps->prefix, strlen(ps->prefix))) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (b.n && sb_put(&b, ".", 1)) goto fail;
        if (put_component(&b, k->v[i])) goto fail;
    }
    return sb_take(&b);
fail:
    free(b.d);
    return NULL;
}

/* [a.b.c]: open (or define) the table and make it current. */
static int define_table(parser *ps, const keyparts *k)
{
    int n = 0;
    for (size_t i = 0; i < k->n; i++) {
        bool last = i + 1 == k->n;
        int c = find_node(ps, n, k->v[i]);
        if (c < 0) {
            c = add_node(ps, n, k->v[i], NODE_TABLE, last ? HOW_HEADER : HOW_IMPLICIT);
            if (c < 0) return -1;
        } else {
            node *nd = &ps->nodes[c];
            char *name = join_key(ps, k, i + 1, false);
            int r = 0;
            if (nd->kind == NODE_VALUE)
                r = perr(ps, "'%s' is already a value (line %d), not a table", name ? name : "?", nd->line);
            else if (last && nd->how == HOW_HEADER)
                r = perr(ps, "table [%s] is defined twice (first on line %d)", name ? name : "?", nd->line);
            else if (last && nd->how == HOW_DOTTED)
                r = perr(ps, "table [%s] was already defined with dotted keys (line %d)", name ? name : "?", nd->line);
            free(name);
            if (r) return -1;
            if (last) {
                nd->how = HOW_HEADER;
                nd->line = ps->line;
            }
        }
        n = c;
    }
    char *prefix = join_key(ps, k, k->n, false);
    if (!prefix) return -1;
    free(ps->prefix);
    ps->prefix = prefix;
    ps->cur_table = n;
    ps->section++;
    return 0;
}

/* a.b.c = v inside the current table: check it against the tree and record it. */
static int define_key(parser *ps, const keyparts *k, int *out)
{
    int n = ps->cur_table;
    for (size_t i = 0; i < k->n; i++) {
        bool last = i + 1 == k->n;
        int c = find_node(ps, n, k->v[i]);
        if (c < 0) {
            c = add_node(ps, n, k->v[i], last ? NODE_VALUE : NODE_TABLE, HOW_DOTTED);
            if (c < 0) return -1;
            n = c;
            continue;
        }
        node *nd = &ps->nodes[c];
        char *name = join_key(ps, k, i + 1, true);
        int r = 0;
        if (last && nd->kind == NODE_VALUE)
            r = perr(ps, "duplicate key '%s' (first defined on line %d)", name ? name : "?", nd->line);
        else if (last)
            r = perr(ps, "key '%s' is already a table (line %d)", name ? name : "?", nd->line);
        else if (nd->kind == NODE_VALUE)
            r = perr(ps, "'%s' is already a value (line %d), not a table", name ? name : "?", nd->line);
        else if (nd->how == HOW_HEADER)
            r = perr(ps, "cannot add to table [%s] with dotted keys: it has its own [header] (line %d)",
                     name ? name : "?", nd->line);
        else if (nd->how == HOW_DOTTED && nd->section != ps->section)
            r = perr(ps, "table '%s' was defined with dotted keys in an earlier section (line %d)", name ? name : "?",
                     nd->line);
        free(name);
        if (r) return -1;
        if (nd->how == HOW_IMPLICIT) { /* now owned by this section's dotted keys */
            nd->how = HOW_DOTTED;
            nd->section = ps->section;
            nd->line = ps->line;
        }
        n = c;
    }
    *out = n;
    return 0;
}

/* ---- the document ---------------------------------------------------------------- */

static int add_entry(parser *ps, char *key, int line, tt_toml_value *v)
{
    tt_toml_doc *d = ps->doc;
    if (d->n == ps->cap_entries) {
        size_t cap = ps->cap_entries ? 2 * ps->cap_entries : 16;
        tt_toml_entry *e = realloc(d->entries, cap * sizeof *e);
        if (!e) {
            free(key);
            tt_toml_value_clear(v);
            return tt_errorf("out of memory");
        }
        d->entries = e;
        ps->cap_entries = cap;
    }
    d->entries[d->n++] = (tt_toml_entry){key, line, *v};
    return 0;
}

void tt_toml_free(tt_toml_doc *doc)
{
    if (!doc) return;
    for (size_t i = 0; i < doc->n; i++) {
        free(doc->entries[i].key);
        tt_toml_value_clear(&doc->entries[i].value);
    }
    free(doc->entries);
    free(doc);
}

const tt_toml_entry *tt_toml_get(const tt_toml_doc *doc, const char *key)
{
    if (!doc || !key) return NULL;
    for (size_t i = 0; i < doc->n; i++)
        if (!strcmp(doc->entries[i].key, key)) return &doc->entries[i];
    return NULL;
}

static int parse_line(parser *ps)
{
    keyparts k = {0};
    int r = -1;
    if (*ps->p == '[') {
        ps->p++;
        if (ps->p < ps->end && *ps->p == '[') {
            perr(ps, "arrays of tables ([[...]]) are not supported");
            goto done;
        }
        if (parse_key(ps, &k)) goto done;
        if (ps->p >= ps->end || *ps->p != ']') {
            perr(ps, "expected ']' to close the table header");
            goto done;
        }
        ps->p++;
        if (define_table(ps, &k) || expect_line_end(ps, "a table header")) goto done;
        r = 0;
    } else {
        int line = ps->line, leaf;
        if (parse_key(ps, &k)) goto done;
        if (ps->p >= ps->end || *ps->p != '=') {
            perr(ps, "expected '=' after the key");
            goto done;
        }
        ps->p++;
        skip_ws(ps);
        tt_toml_value v;
        if (parse_value(ps, &v)) goto done;
        /* define after parsing so a multi-line array reports its own errors first */
        int value_line = ps->line;
        ps->line = line;
        char *key = NULL;
        if (define_key(ps, &k, &leaf) || !(key = join_key(ps, &k, k.n, true))) {
            tt_toml_value_clear(&v);
            goto done;
        }
        ps->line = value_line;
        if (add_entry(ps, key, line, &v) || expect_line_end(ps, "a value")) goto done;
        r = 0;
    }
done:
    kp_free(&k);
    return r;
}

static void parser_release(parser *ps)
{
    for (size_t i = 0; i < ps->n_nodes; i++) free(ps->nodes[i].name);
    free(ps->nodes);
    free(ps->hash);
    free(ps->prefix);
}

tt_toml_doc *tt_toml_parse(const char *text, size_t len, const char *name)
{
    parser ps = {0};
    ps.name = name ? name : "<toml>";
    ps.line = 1;
    if (!text) {
        if (len) {
            tt_errorf("%s: no text", ps.name);
            return NULL;
        }
        text = "";
    }
    if (len > TOML_MAX_BYTES) {
        tt_errorf("%s: document too large (%zu bytes)", ps.name, len);
        return NULL;
    }
    /* TOML is UTF-8: check every byte once, so later code can trust it */
    const unsigned char *u = (const unsigned char *)text, *uend = u + len;
    int line = 1;
    for (const unsigned char *q = u; q < uend;) {
        size_t n = utf8_len(q, uend);
        if (n == 0) {
            ps.line = line;
            perr(&ps, *q == 0 ? "NUL byte in the document" : "invalid UTF-8 (byte 0x%02X)", *q);
            return NULL;
        }
        line += *q == '\n';
        q += n;
    }
    ps.p = text;
    ps.end = text + len;
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) ps.p += 3; /* byte order mark */
    ps.doc = calloc(1, sizeof *ps.doc);
    ps.prefix = tt_strdup("");
    if (!ps.doc || !ps.prefix || add_node(&ps, -1, "", NODE_TABLE, HOW_HEADER) != 0) {
        if (!ps.doc) tt_errorf("out of memory");
        goto fail;
    }
    while (ps.p < ps.end) {
        skip_ws(&ps);
        if (ps.p >= ps.end) break;
        if (*ps.p == '#') {
            if (skip_comment(&ps)) goto fail;
            continue;
        }
        int r = eat_newline(&ps);
        if (r < 0) goto fail;
        if (r > 0) continue;
        if (parse_line(&ps)) goto fail;
    }
    parser_release(&ps);
    return ps.doc;
fail:
    parser_release(&ps);
    tt_toml_free(ps.doc);
    return NULL;
}

char *tt_toml_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tt_errorf("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    sbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.n + n > TOML_MAX_BYTES) {
            tt_errorf("%s: file too large", path);
            goto fail;
        }
        if (sb_put(&b, chunk, n)) goto fail;
    }
    if (ferror(f)) {
        tt_errorf("%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    *len = b.n;
    return sb_take(&b);
fail:
    fclose(f);
    free(b.d);
    return NULL;
}

tt_toml_doc *tt_toml_parse_file(const char *path)
{
    size_t len;
    char *text = tt_toml_read_file(path, &len);
    if (!text) return NULL;
    tt_toml_doc *d = tt_toml_parse(text, len, path);
    free(text);
    return d;
}

int tt_toml_parse_scalar(const char *text, tt_toml_value *out)
{
    parser ps = {0};
    memset(out, 0, sizeof *out);
    if (!text) return tt_errorf("no value");
    size_t len = strlen(text);
    if (!tt_toml_valid_utf8(text, len)) return tt_errorf("invalid UTF-8 in the value");
    ps.p = text;
    ps.end = text + len;
    ps.line = 1;
    if (parse_scalar_at(&ps, out)) return -1;
    if (ps.p != ps.end) {
        tt_toml_value_clear(out);
        return tt_errorf("unexpected text after the value in '%s'", text);
    }
    return 0;
}

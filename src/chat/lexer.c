/* lexer.c — a chat template's text to tokens, as jinja2's lexer cuts it with transformers' settings:
 * newlines normalised and one trailing newline dropped, trim_blocks, lstrip_blocks, the - and +
 * whitespace controls, comments, raw blocks, Python string escapes, balanced brackets in tags. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"
#include "core/core.h"

typedef struct {
    const char *s; /* the normalised source */
    size_t n;
    const char *name;
    jarena *a;
    jtokens *out;
    size_t lc_off; /* line and column of lc_off, advanced as tokens are made */
    int lc_line, lc_col;
} lexer;

static void line_col(lexer *L, size_t off, int *line, int *col)
{
    if (off < L->lc_off) L->lc_off = 0, L->lc_line = 1, L->lc_col = 1;
    for (; L->lc_off < off; L->lc_off++) {
        unsigned char c = (unsigned char)L->s[L->lc_off];
        if (c == '\n') L->lc_line++, L->lc_col = 1;
        else if ((c & 0xC0) != 0x80) L->lc_col++;
    }
    *line = L->lc_line, *col = L->lc_col;
}

static int lex_err(lexer *L, size_t off, const char *what)
{
    int line, col;
    line_col(L, off, &line, &col);
    return tt_errorf("%s:%d:%d: %s", L->name, line, col, what);
}

static jtoken *push(lexer *L, tk_type type, size_t off)
{
    jtokens *o = L->out;
    if (o->n == o->cap) {
        size_t c = o->cap ? o->cap * 2 : 256;
        jtoken *t = realloc(o->t, c * sizeof *t);
        if (!t) {
            tt_errorf("out of memory");
            return NULL;
        }
        o->t = t, o->cap = c;
    }
    jtoken *t = &o->t[o->n++];
    memset(t, 0, sizeof *t);
    t->type = type;
    line_col(L, off, &t->line, &t->col);
    return t;
}

static char *copy(lexer *L, const char *s, size_t n)
{
    char *p = ja_alloc(L->a, n + 1);
    if (p) memcpy(p, s, n), p[n] = 0;
    return p;
}

/* Python's \s at s[i]: its length, 0 when not whitespace */
static int space_at(const char *s, size_t n, size_t i)
{
    if (i >= n) return 0;
    uint32_t c;
    int l = u8_dec(s + i, n - i, &c);
    return u8_isspace(c) ? l : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    for (int l; (l = space_at(s, n, i)) > 0;) i += (size_t)l;
    return i;
}

/* the end of text [from, to) after str.rstrip() */
static size_t rstrip_end(const char *s, size_t from, size_t to)
{
    while (to > from) {
        size_t b = to - 1;
        while (b > from && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
        uint32_t c;
        u8_dec(s + b, to - b, &c);
        if (!u8_isspace(c)) break;
        to = b;
    }
    return to;
}

static int starts(const lexer *L, size_t i, const char *p)
{
    size_t k = strlen(p);
    return i + k <= L->n && memcmp(L->s + i, p, k) == 0;
}

/* Emit the data [from, to) before a tag, stripped as the tag's sign and lstrip_blocks say. */
static int emit_data(lexer *L, size_t from, size_t to, char sign, int lstrip, int line_starting)
{
    if (sign == '-') {
        to = rstrip_end(L->s, from, to);
    } else if (sign != '+' && lstrip) {
        size_t l = to;
        while (l > from && L->s[l - 1] != '\n') l--;
        int has_nl = l > from;
        if (has_nl || line_starting) { /* jinja2 3.1.6: whitespace_re (\s+, Unicode) fills the rest of the line */
            size_t k = l;
            for (int w; k < to && (w = space_at(L->s, to, k)) > 0;) k += (size_t)w;
            if (k == to && to > l) to = l;
        }
    }
    if (to == from) return 0;
    jtoken *t = push(L, TK_DATA, from);
    if (!t || !(t->s = copy(L, L->s + from, to - from))) return -1;
    t->len = to - from;
    return 0;
}

/* ---- string literals: Python's unicode-escape after backslashreplace, as jinja2 decodes them ---- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int lex_string(lexer *L, size_t at, size_t *end)
{
    char q = L->s[at];
    size_t i = at + 1;
    while (i < L->n && L->s[i] != q) i += L->s[i] == '\\' ? 2 : 1;
    if (i >= L->n) return lex_err(L, at, "unexpected char '" "\"" "' or an unterminated string");
    *end = i + 1;
    const char *s = L->s + at + 1;
    size_t n = i - at - 1;
    char *o = ja_alloc(L->a, n * 4 + 16), *p = o;
    if (!o) return -1;
    for (size_t k = 0; k < n;) {
        if (s[k] != '\\') {
            *p++ = s[k++];
            continue;
        }
        if (k + 1 >= n) return lex_err(L, at, "\\ at end of string");
        unsigned char c = (unsigned char)s[k + 1];
        k += 2;
        uint32_t cp;
        if (c >= 0x80) { /* backslashreplace made it \xhh, \uhhhh or \Uhhhhhhhh: "\\" then the rest */
            k -= 1;
            int l = u8_dec(s + k, n - k, &cp);
            k += (size_t)l;
            *p++ = '\\';
            if (cp < 0x100) p += sprintf(p, "x%02x", cp);
            else if (cp < 0x10000) p += sprintf(p, "u%04x", cp);
            else p += sprintf(p, "U%08x", cp);
            continue;
        }
        switch (c) {
        case '\n': continue;
        case '\\': *p++ = '\\'; continue;
        case '\'': *p++ = '\''; continue;
        case '"': *p++ = '"'; continue;
        case 'a': *p++ = '\a'; continue;
        case 'b': *p++ = '\b'; continue;
        case 'f': *p++ = '\f'; continue;
        case 'n': *p++ = '\n'; continue;
        case 'r': *p++ = '\r'; continue;
        case 't': *p++ = '\t'; continue;
        case 'v': *p++ = '\v'; continue;
        case 'N': return lex_err(L, at, "unsupported construct: the \\N{...} escape in a string");
        default: break;
        }
        if (c >= '0' && c <= '7') {
            cp = c - '0';
            for (int d = 0; d < 2 && k < n && s[k] >= '0' && s[k] <= '7'; d++) cp = cp * 8 + (uint32_t)(s[k++] - '0');
        } else if (c == 'x' || c == 'u' || c == 'U') {
            int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            cp = 0;
            for (int d = 0; d < digits; d++) {
                int h = k < n ? hexval(s[k]) : -1;
                if (h < 0) return lex_err(L, at, "a truncated \\x, \\u or \\U escape in a string");
                cp = cp * 16 + (uint32_t)h, k++;
            }
            if (cp > 0x10FFFF) return lex_err(L, at, "an illegal Unicode character in a string escape");
        } else {
            *p++ = '\\', *p++ = (char)c; /* an unknown escape stays as written */
            continue;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF)
            return lex_err(L, at, "unsupported construct: a surrogate code point in a string escape");
        p += u8_enc(cp, p);
    }
    *p = 0;
    jtoken *t = push(L, TK_STRING, at);
    if (!t) return -1;
    t->s = o, t->len = (size_t)(p - o);
    return 0;
}

/* ---- numbers: jinja2's float_re, then integer_re ------------------------------------------------- */

static int isdig(char c) { return c >= '0' && c <= '9'; }

/* digits with single '_' between them, from i; returns the end (i when none) */
static size_t digit_run(const lexer *L, size_t i)
{
    if (i >= L->n || !isdig(L->s[i])) return i;
    while (i < L->n && isdig(L->s[i])) {
        i++;
        if (i + 1 < L->n && L->s[i] == '_' && isdig(L->s[i + 1])) i++;
    }
    return i;
}

static int lex_number(lexer *L, size_t at, size_t *end)
{
    const char *s = L->s;
    size_t i = digit_run(L, at), e = 0;
    int is_float = 0;
    if (at == 0 || s[at - 1] != '.') {
        size_t j = i;
        if (j < L->n && s[j] == '.' && j + 1 < L->n && isdig(s[j + 1])) j = digit_run(L, j + 1), is_float = 1;
        if (j < L->n && (s[j] == 'e' || s[j] == 'E')) {
            size_t k = j + 1;
            if (k < L->n && (s[k] == '+' || s[k] == '-')) k++;
            size_t m = digit_run(L, k);
            if (m > k) j = m, is_float = 1;
        }
        if (is_float) e = j;
    }
    char buf[128];
    size_t bn = 0;
    if (is_float) {
        for (size_t k = at; k < e && bn + 1 < sizeof buf; k++)
            if (s[k] != '_') buf[bn++] = s[k];
        buf[bn] = 0;
        jtoken *t = push(L, TK_FLOAT, at);
        if (!t) return -1;
        t->f = strtod(buf, NULL);
        *end = e;
        return 0;
    }
    int base = 10;
    size_t k = at;
    if (s[at] == '0' && at + 1 < L->n && strchr("bBoOxX", s[at + 1]) && s[at + 1]) {
        char b = (char)(s[at + 1] | 0x20);
        base = b == 'b' ? 2 : b == 'o' ? 8 : 16;
        k = at + 2;
        size_t m = k;
        for (;;) {
            size_t p = m;
            if (p < L->n && s[p] == '_') p++;
            int h = p < L->n ? hexval(s[p]) : -1;
            if (h < 0 || h >= base) break;
            m = p + 1;
        }
        if (m == k) base = 10, k = at; /* "0x" with no digit: the integer 0, then a name */
        else i = m;
    }
    if (base == 10) {
        if (s[at] == '0') { /* 0(_?0)* */
            i = at + 1;
            while (i < L->n && (s[i] == '0' || (s[i] == '_' && i + 1 < L->n && s[i + 1] == '0'))) i += s[i] == '_' ? 2 : 1;
        }
        k = at;
    }
    uint64_t v = 0;
    for (size_t p = k; p < i; p++) {
        if (s[p] == '_') continue;
        uint64_t d = (uint64_t)hexval(s[p]);
        if (v > (UINT64_MAX - d) / (uint64_t)base || v * (uint64_t)base + d > (uint64_t)INT64_MAX)
            return lex_err(L, at, "an integer literal beyond 64 bits (titan's renderer stops there)");
        v = v * (uint64_t)base + d;
    }
    jtoken *t = push(L, TK_INT, at);
    if (!t) return -1;
    t->i = (int64_t)v;
    *end = i;
    return 0;
}

static const char *const op_text[OP_COUNT] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                              "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

/* The tokens of one {% %} or {{ }} tag from i; *end: after its closing delimiter. */
static int lex_tag(lexer *L, size_t i, int block, size_t *end)
{
    char stack[256];
    int depth = 0;
    for (;;) {
        if (depth == 0) {
            if (block && starts(L, i, "+%}")) {
                i += 3;
                break;
            }
            if (starts(L, i, block ? "-%}" : "-}}")) {
                i = skip_space(L->s, L->n, i + 3);
                break;
            }
            if (starts(L, i, block ? "%}" : "}}")) {
                i += 2;
                if (block && i < L->n && L->s[i] == '\n') i++;
                break;
            }
        }
        if (i >= L->n) return lex_err(L, i, block ? "unexpected end of template: a {% tag is not closed" :
                                                    "unexpected end of template: a {{ tag is not closed");
        int sp = space_at(L->s, L->n, i);
        if (sp) {
            i += (size_t)sp;
            continue;
        }
        char c = L->s[i];
        size_t e = i;
        if (isdig(c)) {
            if (lex_number(L, i, &e)) return -1;
            i = e;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            e = i;
            while (e < L->n && ((L->s[e] >= 'a' && L->s[e] <= 'z') || (L->s[e] >= 'A' && L->s[e] <= 'Z') ||
                                L->s[e] == '_' || isdig(L->s[e])))
                e++;
            if (e < L->n && ((unsigned char)L->s[e] & 0x80))
                return lex_err(L, e, "unsupported construct: a name with non-ASCII letters");
            jtoken *t = push(L, TK_NAME, i);
            if (!t || !(t->s = copy(L, L->s + i, e - i))) return -1;
            t->len = e - i;
            i = e;
            continue;
        }
        if (c == '\'' || c == '"') {
            if (lex_string(L, i, &e)) return -1;
            i = e;
            continue;
        }
        int op = -1;
        for (int k = 0; k < OP_COUNT; k++)
            if (starts(L, i, op_text[k])) {
                op = k;
                break;
            }
        if (op < 0) {
            char msg[64];
            if ((unsigned char)c >= 0x80) snprintf(msg, sizeof msg, "unexpected non-ASCII character in a tag");
            else snprintf(msg, sizeof msg, "unexpected char '%c'", c);
            return lex_err(L, i, msg);
        }
        if (op == OP_LPAREN || op == OP_LBRACKET || op == OP_LBRACE) {
            if (depth == (int)sizeof stack) return lex_err(L, i, "brackets nested too deep");
            stack[depth++] = op == OP_LPAREN ? ')' : op == OP_LBRACKET ? ']' : '}';
        } else if (op == OP_RPAREN || op == OP_RBRACKET || op == OP_RBRACE) {
            char want = op == OP_RPAREN ? ')' : op == OP_RBRACKET ? ']' : '}';
            if (depth == 0 || stack[depth - 1] != want) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected '%c'", want);
                return lex_err(L, i, msg);
            }
            depth--;
        }
        jtoken *t = push(L, TK_OP, i);
        if (!t) return -1;
        t->op = op;
        i += strlen(op_text[op]);
    }
    jtoken *t = push(L, block ? TK_BLOCK_END : TK_VAR_END, i);
    if (!t) return -1;
    *end = i;
    return 0;
}

/* {% raw %} at i (after "{%" and its sign, at q): the end of the opening tag, or 0 */
static size_t raw_open(const lexer *L, size_t q)
{
    size_t r = skip_space(L->s, L->n, q);
    if (!starts(L, r, "raw")) return 0;
    r = skip_space(L->s, L->n, r + 3);
    if (starts(L, r, "-%}")) return skip_space(L->s, L->n, r + 3);
    if (starts(L, r, "%}")) return r + 2;
    return 0;
}

static int lex_source(lexer *L)
{
    size_t pos = 0;
    int line_starting = 1;
    while (pos < L->n) {
        size_t p = pos;
        for (;;) {
            const char *hit = memchr(L->s + p, '{', L->n - p);
            if (!hit) {
                p = L->n;
                break;
            }
            p = (size_t)(hit - L->s);
            if (p + 1 < L->n && (L->s[p + 1] == '%' || L->s[p + 1] == '{' || L->s[p + 1] == '#')) break;
            p++;
        }
        if (p >= L->n) {
            jtoken *t = push(L, TK_DATA, pos);
            if (!t || !(t->s = copy(L, L->s + pos, L->n - pos))) return -1;
            t->len = L->n - pos;
            break;
        }
        char kind = L->s[p + 1], sign = 0;
        size_t q = p + 2;
        if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) sign = L->s[q++];
        size_t raw_end = kind == '%' ? raw_open(L, q) : 0;
        if (emit_data(L, pos, p, sign, kind != '{', line_starting)) return -1;
        if (raw_end) { /* the text up to {% endraw %}, as data */
            size_t i = raw_end, body_end = 0, after = 0;
            char esign = 0;
            for (; i + 1 < L->n; i++) {
                if (!starts(L, i, "{%")) continue;
                size_t k = i + 2;
                char sg = 0;
                if (k < L->n && (L->s[k] == '-' || L->s[k] == '+')) sg = L->s[k++];
                k = skip_space(L->s, L->n, k);
                if (!starts(L, k, "endraw")) continue;
                k = skip_space(L->s, L->n, k + 6);
                if (starts(L, k, "+%}")) after = k + 3;
                else if (starts(L, k, "-%}")) after = skip_space(L->s, L->n, k + 3);
                else if (starts(L, k, "%}")) after = k + 2 + (k + 2 < L->n && L->s[k + 2] == '\n');
                else continue;
                body_end = i, esign = sg;
                break;
            }
            if (!after) return lex_err(L, p, "missing end of raw directive");
            int ls = L->s[raw_end - 1] == '\n';
            if (emit_data(L, raw_end, body_end, esign, 1, ls)) return -1;
            pos = after;
            line_starting = L->s[pos - 1] == '\n';
            continue;
        }
        if (kind == '#') {
            size_t i = q, after = 0;
            for (; i + 1 < L->n; i++) {
                if (starts(L, i, "+#}")) after = i + 3;
                else if (starts(L, i, "-#}")) after = skip_space(L->s, L->n, i + 3);
                else if (starts(L, i, "#}")) after = i + 2 + (i + 2 < L->n && L->s[i + 2] == '\n');
                if (after) break;
            }
            if (!after) return lex_err(L, p, "missing end of comment tag");
            pos = after;
            line_starting = L->s[pos - 1] == '\n';
            continue;
        }
        int block = kind == '%';
        if (!push(L, block ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, p)) return -1;
        size_t end = L->n;
        if (lex_tag(L, q, block, &end)) return -1;
        pos = end;
        line_starting = L->s[pos - 1] == '\n';
    }
    return push(L, TK_EOF, L->n) ? 0 : -1;
}

tt_err tt_chat_lex(const char *src, size_t len, const char *name, jarena *a, jtokens *out)
{
    if (!u8_valid(src, len)) return tt_errorf("%s: the template is not valid UTF-8", name);
    /* newlines to "\n", and one trailing newline dropped (keep_trailing_newline=False) */
    char *s = ja_alloc(a, len + 1);
    if (!s) return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    lexer L = {s, n, name, a, out, 0, 1, 1};
    return lex_source(&L);
}

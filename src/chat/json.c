/* json.c — JSON in and out of template values: json.dumps as transformers' tojson calls it, and
 * a conversation's cJSON tree (with its number literals, when the reader kept them) as values. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "chat/value.h"
#include "core/core.h"

/* ---- json.dumps --------------------------------------------------------------------------------- */

typedef struct {
    jbuf *b;
    int ensure_ascii, sort_keys;
    const char *indent; /* NULL: none */
    size_t indent_len;
    const char *item_sep, *key_sep;
} jenc;

static int json_str(jbuf *b, const char *s, size_t n, int ensure_ascii)
{
    if (jb_putc(b, '"')) return -1;
    size_t from = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (!ensure_ascii || c < 0x7F)) { /* the common case: as it is */
            i++;
            continue;
        }
        char esc[16];
        const char *rep = NULL;
        size_t step = 1;
        if (c == '"') rep = "\\\"";
        else if (c == '\\') rep = "\\\\";
        else if (c == '\n') rep = "\\n";
        else if (c == '\r') rep = "\\r";
        else if (c == '\t') rep = "\\t";
        else if (c == '\b') rep = "\\b";
        else if (c == '\f') rep = "\\f";
        else if (c < 0x20 || (ensure_ascii && c == 0x7F)) snprintf(esc, sizeof esc, "\\u%04x", c), rep = esc;
        else if (c >= 0x80 && ensure_ascii) {
            uint32_t cp;
            step = (size_t)u8_dec(s + i, n - i, &cp);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", cp);
            }
            rep = esc;
        }
        if (rep) {
            if (jb_put(b, s + from, i - from) || jb_puts(b, rep)) return -1;
            from = i + step;
        }
        i += step;
    }
    return jb_put(b, s + from, n - from) || jb_putc(b, '"');
}

static int json_float(jbuf *b, double f)
{
    if (isnan(f)) return jb_puts(b, "NaN");
    if (isinf(f)) return jb_puts(b, f < 0 ? "-Infinity" : "Infinity");
    char tmp[64];
    jv_write_float(tmp, sizeof tmp, f);
    return jb_puts(b, tmp);
}

static int newline_indent(jenc *e, int level)
{
    if (jb_putc(e->b, '\n')) return -1;
    for (int i = 0; i < level; i++)
        if (jb_put(e->b, e->indent, e->indent_len)) return -1;
    return 0;
}

/* A dict key as json.dumps writes it, or an error for a key type it refuses. */
static int json_key(jenc *e, jv k)
{
    switch (k.kind) {
    case JV_STR: return json_str(e->b, k.u.s->s, k.u.s->len, e->ensure_ascii);
    case JV_BOOL: return jb_puts(e->b, k.u.b ? "\"true\"" : "\"false\"");
    case JV_NONE: return jb_puts(e->b, "\"null\"");
    case JV_INT: return jb_printf(e->b, "\"%lld\"", (long long)k.u.i);
    case JV_FLOAT: return jb_putc(e->b, '"') || json_float(e->b, k.u.f) || jb_putc(e->b, '"');
    default: return tt_errorf("keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
}

static int json_val(jenc *e, jv v, int level);

static int json_dict(jenc *e, const jv *keys, const jv *vals, size_t n, int level)
{
    if (n == 0) return jb_puts(e->b, "{}");
    size_t *order = malloc(n * sizeof *order);
    if (!order) return tt_errorf("out of memory");
    for (size_t i = 0; i < n; i++) order[i] = i;
    int rc = 0;
    if (e->sort_keys) /* insertion sort: stable, and stops at the first pair Python cannot order */
        for (size_t i = 1; i < n && !rc; i++)
            for (size_t j = i; j > 0; j--) {
                int c;
                if ((rc = jv_cmp(keys[order[j]], keys[order[j - 1]], &c))) break;
                if (c >= 0) break;
                size_t t = order[j];
                order[j] = order[j - 1], order[j - 1] = t;
            }
    rc = rc || jb_putc(e->b, '{') || (e->indent && newline_indent(e, level + 1));
    for (size_t k = 0; k < n && !rc; k++) {
        size_t i = order[k];
        if (k) rc = jb_puts(e->b, e->item_sep) || (e->indent && newline_indent(e, level + 1));
        rc = rc || json_key(e, keys[i]) || jb_puts(e->b, e->key_sep) || json_val(e, vals[i], level + 1);
    }
    rc = rc || (e->indent && newline_indent(e, level)) || jb_putc(e->b, '}');
    free(order);
    return rc ? -1 : 0;
}

static int json_val(jenc *e, jv v, int level)
{
    if (level > 200) return tt_errorf("a value nested more than 200 deep");
    switch (v.kind) {
    case JV_NONE: return jb_puts(e->b, "null");
    case JV_BOOL: return jb_puts(e->b, v.u.b ? "true" : "false");
    case JV_INT: return jb_printf(e->b, "%lld", (long long)v.u.i);
    case JV_FLOAT: return json_float(e->b, v.u.f);
    case JV_STR: return json_str(e->b, v.u.s->s, v.u.s->len, e->ensure_ascii);
    case JV_DICT: return json_dict(e, v.u.d->keys, v.u.d->vals, v.u.d->n, level);
    case JV_LIST: {
        const jlist *l = v.u.l;
        if (l->n == 0) return jb_puts(e->b, "[]");
        if (jb_putc(e->b, '[') || (e->indent && newline_indent(e, level + 1))) return -1;
        for (size_t i = 0; i < l->n; i++) {
            if (i && (jb_puts(e->b, e->item_sep) || (e->indent && newline_indent(e, level + 1)))) return -1;
            if (json_val(e, l->v[i], level + 1)) return -1;
        }
        return (e->indent && newline_indent(e, level)) || jb_putc(e->b, ']');
    }
    default: return tt_errorf("Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

int jv_write_json(jbuf *b, jv v, int ensure_ascii, const jv *indent, const char *item_sep, const char *key_sep,
                  int sort_keys)
{
    char spaces[256];
    jenc e = {b, ensure_ascii, sort_keys, NULL, 0, item_sep, key_sep};
    if (indent && indent->kind != JV_NONE) {
        if (indent->kind == JV_STR) {
            e.indent = indent->u.s->s, e.indent_len = indent->u.s->len;
        } else if (indent->kind == JV_INT || indent->kind == JV_BOOL) {
            int64_t n = indent->kind == JV_INT ? indent->u.i : indent->u.b;
            if (n > (int64_t)sizeof spaces) return tt_errorf("tojson: an indent of %lld is too large", (long long)n);
            e.indent_len = n > 0 ? (size_t)n : 0;
            memset(spaces, ' ', e.indent_len);
            e.indent = spaces;
        } else {
            return tt_errorf("tojson: indent must be an int or a str, not %s", jv_type_name(*indent));
        }
    }
    if (!e.item_sep) e.item_sep = e.indent ? "," : ", ";
    if (!e.key_sep) e.key_sep = ": ";
    return json_val(&e, v, 0);
}

/* ---- cJSON to values ------------------------------------------------------------------------------ */

static int number_from_literal(const char *lit, jv *out)
{
    if (strpbrk(lit, ".eE")) {
        *out = jv_float(strtod(lit, NULL));
        return 0;
    }
    errno = 0;
    long long i = strtoll(lit, NULL, 10);
    if (errno == ERANGE) return tt_errorf("the integer %.40s is beyond 64 bits (titan's renderer stops there)", lit);
    *out = jv_int(i);
    return 0;
}

int tt_chat_value_from_json(jarena *a, const cJSON *j, jv *out, int depth)
{
    if (depth > 200) return tt_errorf("the conversation nests more than 200 levels deep");
    if (cJSON_IsNull(j)) return *out = jv_none(), 0;
    if (cJSON_IsBool(j)) return *out = jv_bool(cJSON_IsTrue(j)), 0;
    if (cJSON_IsNumber(j)) {
        if (j->valuestring) return number_from_literal(j->valuestring, out);
        double d = j->valuedouble;
        /* no literal kept: an integral number within 2^53 was most likely written as an integer */
        if (d == floor(d) && fabs(d) < 9007199254740992.0) *out = jv_int((int64_t)d);
        else *out = jv_float(d);
        return 0;
    }
    if (cJSON_IsString(j)) {
        size_t n = strlen(j->valuestring);
        if (!u8_valid(j->valuestring, n)) return tt_errorf("a string of the conversation is not valid UTF-8");
        return jv_str(a, j->valuestring, n, out);
    }
    if (cJSON_IsArray(j)) {
        size_t n = (size_t)cJSON_GetArraySize(j), i = 0;
        jlist *l = jv_list_new(a, n);
        if (!l) return -1;
        for (const cJSON *c = j->child; c; c = c->next)
            if (tt_chat_value_from_json(a, c, &l->v[i++], depth + 1)) return -1;
        *out = (jv){JV_LIST, 0, 0, {.l = l}};
        return 0;
    }
    if (cJSON_IsObject(j)) {
        size_t n = (size_t)cJSON_GetArraySize(j);
        jdict *d = jv_dict_new(a, n);
        if (!d) return -1;
        for (const cJSON *c = j->child; c; c = c->next) {
            jv k, v;
            const char *key = c->string ? c->string : "";
            if (!u8_valid(key, strlen(key))) return tt_errorf("a key of the conversation is not valid UTF-8");
            if (jv_cstr(a, key, &k) || tt_chat_value_from_json(a, c, &v, depth + 1)) return -1;
            jv_dict_set(d, k, v); /* a repeated key: the last value wins, as Python's json.loads */
        }
        *out = (jv){JV_DICT, 0, 0, {.d = d}};
        return 0;
    }
    return tt_errorf("a JSON value of an unknown type");
}

/* ---- keeping number literals ------------------------------------------------------------------------ */

/* The number literals of the text in document order, which is cJSON's order of number nodes. */
static const char *next_number(const char *p, const char *end, size_t *len)
{
    while (p < end) {
        if (*p == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\') p++;
            p++;
            continue;
        }
        if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *s = p;
            while (p < end && (strchr("+-.eE", *p) || (*p >= '0' && *p <= '9'))) p++;
            *len = (size_t)(p - s);
            return s;
        }
        p++;
    }
    return NULL;
}

static int mark(cJSON *j, const char **p, const char *end)
{
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            size_t len = 0;
            const char *s = next_number(*p, end, &len);
            if (!s) return tt_errorf("the JSON text and its tree disagree");
            *p = s + len;
            free(j->valuestring);
            j->valuestring = malloc(len + 1);
            if (!j->valuestring) return tt_errorf("out of memory");
            memcpy(j->valuestring, s, len);
            j->valuestring[len] = 0;
        }
        if (j->child && mark(j->child, p, end)) return -1;
    }
    return 0;
}

tt_err tt_chat_json_keep_numbers(cJSON *root, const char *text, size_t len)
{
    const char *p = text;
    return mark(root, &p, text + len);
}

/* filters.c — the jinja2 filters and tests of titan's subset, each as jinja2 3.1 defines it (with
 * transformers' tojson), and what they return: lists, or one-pass iterators where jinja2 returns
 * generators (map, select, reverse, ...), so that |length of one fails as it does there. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat/chat_internal.h"
#include "core/core.h"

enum {
    F_ABS, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_FIRST, F_FLOAT, F_INDENT, F_INT, F_ITEMS, F_JOIN,
    F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND,
    F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_UNIQUE, F_UPPER,
    F_WORDCOUNT, F_N
};
const char *const tt_chat_filter_names[] = {
    "abs", "capitalize", "count", "d", "default", "dictsort", "first", "float", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round",
    "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
    "wordcount"};
unsigned long tt_chat_filter_hits[F_N];
int tt_chat_n_filters(void) { return F_N; }

enum {
    T_BOOLEAN, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_EVEN, T_FALSE, T_FLOAT, T_GE, T_GT, T_IN, T_INTEGER,
    T_ITERABLE, T_LE, T_LT, T_MAPPING, T_NE, T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, T_STRING, T_TRUE,
    T_UNDEFINED, T_N
};
const char *const tt_chat_test_names[] = {"boolean", "defined", "divisibleby", "eq", "equalto", "even", "false",
                                          "float", "ge", "gt", "in", "integer", "iterable", "le", "lt", "mapping",
                                          "ne", "none", "number", "odd", "sameas", "sequence", "string", "true",
                                          "undefined"};
unsigned long tt_chat_test_hits[T_N];
int tt_chat_n_tests(void) { return T_N; }

int tt_chat_filter_index(const char *name)
{
    for (int i = 0; i < F_N; i++)
        if (!strcmp(tt_chat_filter_names[i], name)) return i;
    return -1;
}

int tt_chat_test_index(const char *name)
{
    for (int i = 0; i < T_N; i++)
        if (!strcmp(tt_chat_test_names[i], name)) return i;
    if (!strcmp(name, "greaterthan")) return T_GT;
    if (!strcmp(name, "lessthan")) return T_LT;
    return -1;
}

int tt_chat_known_elsewhere(const char *name, int test)
{
    static const char *const filters[] = {"attr", "batch", "center", "e", "escape", "filesizeformat", "forceescape",
                                          "format", "groupby", "pprint", "random", "slice", "striptags", "truncate",
                                          "urlencode", "urlize", "wordwrap", "xmlattr", NULL};
    static const char *const tests[] = {"callable", "escaped", "filter", "lower", "test", "upper", NULL};
    for (const char *const *l = test ? tests : filters; *l; l++)
        if (!strcmp(*l, name)) return 1;
    return 0;
}

/* ---- arguments ---------------------------------------------------------------------------------- */

/* Bind positional and keyword arguments to the filter's parameters (after the value). */
static int bind(jrender *r, const jnode *at, const char *fname, const char *const *params, const jv *args, int nargs,
                const char **kwnames, const jv *kwvals, int nkw, jv *slots, int *given)
{
    int np = 0;
    while (params[np]) np++;
    if (nargs > np) return jr_err(r, at, "%s() takes at most %d argument(s) after the value, got %d", fname, np, nargs);
    for (int i = 0; i < np; i++) given[i] = i < nargs;
    for (int i = 0; i < nargs; i++) slots[i] = args[i];
    for (int k = 0; k < nkw; k++) {
        int hit = -1;
        for (int i = 0; i < np; i++)
            if (!strcmp(params[i], kwnames[k])) hit = i;
        if (hit < 0) return jr_err(r, at, "%s() got an unexpected keyword argument '%s'", fname, kwnames[k]);
        if (given[hit]) return jr_err(r, at, "%s() got multiple values for argument '%s'", fname, kwnames[k]);
        given[hit] = 1, slots[hit] = kwvals[k];
    }
    return 0;
}

static int soft_str(jrender *r, const jnode *at, jv v, jv *out)
{
    if (v.kind == JV_ITER || (v.kind == JV_LIST && (v.flags & (JVF_VIEW | JVF_RANGE))))
        return jr_err(r, at, "unsupported construct: the text of a %s object", v.kind == JV_ITER ? v.u.it->tname : jv_type_name(v));
    return jv_to_str(r->a, v, out) ? jr_fail(r, at) : 0;
}

static int iter_of(jrender *r, const jnode *at, const jlist *l, const char *tname, jv *out)
{
    jiter *it = ja_alloc(r->a, sizeof *it);
    if (!it) return jr_fail(r, at);
    it->items = l, it->tname = tname;
    *out = (jv){JV_ITER, 0, 0, {.it = it}};
    return 0;
}

static int py_len(jrender *r, const jnode *at, jv v, int64_t *n)
{
    switch (v.kind) {
    case JV_UNDEF: *n = 0; return 0;
    case JV_STR: *n = (int64_t)u8_count(v.u.s->s, v.u.s->len); return 0;
    case JV_LIST: *n = (int64_t)v.u.l->n; return 0;
    case JV_DICT: *n = (int64_t)v.u.d->n; return 0;
    case JV_LOOP: *n = (int64_t)v.u.loop->items->n; return 0;
    case JV_ITER: return jr_err(r, at, "object of type '%s' has no len()", v.u.it->tname);
    default: return jr_err(r, at, "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* ignore_case: a str lowered, anything else as it is */
static int icase(jrender *r, const jnode *at, jv v, int case_sensitive, jv *out)
{
    if (case_sensitive || v.kind != JV_STR) return *out = v, 0;
    return js_case(r->a, v, CASE_LOWER, out) ? jr_fail(r, at) : 0;
}

/* make_attrgetter: "a.b.0" looked up part by part with environment.getitem */
static int attr_path(jrender *r, const jnode *at, jv item, jv attr, jv *out)
{
    if (attr.kind == JV_NONE) return *out = item, 0;
    if (attr.kind != JV_STR) return jr_getitem(r, at, item, attr, out);
    const char *s = attr.u.s->s;
    for (;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        int digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= s[i] >= '0' && s[i] <= '9';
        jv key;
        if (digits && n < 18) {
            key = jv_int(strtoll(s, NULL, 10));
        } else if (jv_str(r->a, s, n, &key)) {
            return jr_fail(r, at);
        }
        if (jr_getitem(r, at, item, key, &item)) return -1;
        if (!dot) break;
        s = dot + 1;
    }
    *out = item;
    return 0;
}

/* stable merge sort of items by keys (Python's sorted: only <, stable, reverse keeps ties in order) */
static int sort_by(jrender *r, const jnode *at, jv *items, jv *keys, size_t n, int reverse)
{
    if (n < 2) return 0;
    jv *ti = malloc(n * sizeof *ti), *tk = malloc(n * sizeof *tk);
    if (!ti || !tk) return free(ti), free(tk), jr_err(r, at, "out of memory");
    int rc = 0;
    for (size_t w = 1; w < n && !rc; w *= 2) {
        for (size_t lo = 0; lo < n && !rc; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c;
                /* take the right one first only when it is strictly before the left one */
                if (reverse ? jv_cmp(keys[i], keys[j], &c) : jv_cmp(keys[j], keys[i], &c)) {
                    rc = jr_fail(r, at);
                    break;
                }
                if (c < 0) ti[k] = items[j], tk[k++] = keys[j++];
                else ti[k] = items[i], tk[k++] = keys[i++];
            }
            while (i < mid) ti[k] = items[i], tk[k++] = keys[i++];
            while (j < hi) ti[k] = items[j], tk[k++] = keys[j++];
        }
        if (!rc) memcpy(items, ti, n * sizeof *ti), memcpy(keys, tk, n * sizeof *tk);
    }
    free(ti), free(tk);
    return rc;
}

/* ---- number parsing as Python's int() and float() do it -------------------------------------- */

static int py_float_str(const jstr *s, double *out)
{
    const char *p = s->s, *e = s->s + s->len;
    while (p < e && u8_isspace((unsigned char)*p)) p++;
    while (e > p && u8_isspace((unsigned char)e[-1])) e--;
    char buf[128];
    size_t n = 0;
    for (const char *q = p; q < e; q++) {
        if (*q == '_') {
            if (q == p || q + 1 == e || !(q[-1] >= '0' && q[-1] <= '9') || !(q[1] >= '0' && q[1] <= '9')) return -1;
            continue;
        }
        if (n + 1 >= sizeof buf || ((unsigned char)*q & 0x80)) return -1;
        buf[n++] = *q;
    }
    buf[n] = 0;
    if (!n) return -1;
    const char *b = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcasecmp(b, "inf") || !strcasecmp(b, "infinity") || !strcasecmp(b, "nan")) {
        *out = strtod(buf, NULL);
        return 0;
    }
    for (const char *q = b; *q; q++)
        if (!strchr("0123456789.eE+-", *q)) return -1; /* no hex floats, no "0x" */
    char *end;
    errno = 0;
    *out = strtod(buf, &end);
    return *end ? -1 : 0;
}

static int py_int_str(const jstr *s, int64_t base, int64_t *out, int *overflow)
{
    const char *p = s->s, *e = s->s + s->len;
    *overflow = 0;
    while (p < e && u8_isspace((unsigned char)*p)) p++;
    while (e > p && u8_isspace((unsigned char)e[-1])) e--;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (base == 0 || base == 2 || base == 8 || base == 16) {
        if (e - p >= 2 && p[0] == '0' && strchr("xXoObB", p[1])) {
            int64_t b = (p[1] | 0x20) == 'x' ? 16 : (p[1] | 0x20) == 'o' ? 8 : 2;
            if (base && base != b) return -1;
            base = b, p += 2;
            if (p < e && *p == '_') p++;
        } else if (base == 0) {
            base = 10;
        }
    }
    if (base < 2 || base > 36 || p == e) return -1;
    uint64_t v = 0;
    for (const char *q = p; q < e; q++) {
        if (*q == '_') {
            if (q == p || q + 1 == e || q[1] == '_') return -1;
            continue;
        }
        int d = *q >= '0' && *q <= '9' ? *q - '0' : (*q | 0x20) >= 'a' && (*q | 0x20) <= 'z' ? (*q | 0x20) - 'a' + 10 : 99;
        if (d >= base) return -1;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)d) / (uint64_t)base) *overflow = 1;
        else v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* ---- select, reject, map ------------------------------------------------------------------------ */

static int run_test_by_name(jrender *r, const jnode *at, jv name, jv item, const jv *args, int nargs, int *res)
{
    if (name.kind != JV_STR) return jr_err(r, at, "a test name must be a str");
    int tid = tt_chat_test_index(name.u.s->s);
    if (tid < 0)
        return jr_err(r, at, tt_chat_known_elsewhere(name.u.s->s, 1) ? "unsupported construct: the test '%s'" : "no test named '%s'",
                      name.u.s->s);
    jv out;
    if (jr_test(r, at, tid, item, args, nargs, &out)) return -1;
    *res = jv_truthy(out);
    return 0;
}

static int select_reject(jrender *r, const jnode *at, jv v, const jv *args, int nargs, int attr, int reject, jv *out)
{
    static const jlist empty = {0};
    if (!jv_truthy(v)) return iter_of(r, at, &empty, "generator", out);
    if (attr && nargs < 1) return jr_err(r, at, "missing parameter for attribute name");
    const jlist *items;
    if (jr_items(r, at, v, &items)) return -1;
    jlist *kept = jv_list_new(r->a, items->n);
    if (!kept) return jr_fail(r, at);
    int off = attr ? 1 : 0;
    size_t k = 0;
    for (size_t i = 0; i < items->n; i++) {
        jv x = items->v[i];
        int ok = 0;
        if (jr_step(r, at) || (attr && attr_path(r, at, x, args[0], &x))) return -1;
        if (nargs > off) {
            if (run_test_by_name(r, at, args[off], x, args + off + 1, nargs - off - 1, &ok)) return -1;
        } else {
            ok = jv_truthy(x);
        }
        if (ok != reject) kept->v[k++] = items->v[i];
    }
    kept->n = k;
    return iter_of(r, at, kept, "generator", out);
}

static int do_map(jrender *r, const jnode *at, jv v, const jv *args, int nargs, const char **kwnames,
                  const jv *kwvals, int nkw, jv *out)
{
    static const jlist empty = {0};
    if (!jv_truthy(v)) return iter_of(r, at, &empty, "generator", out);
    const jlist *items;
    if (jr_items(r, at, v, &items)) return -1;
    jlist *res = jv_list_new(r->a, items->n);
    if (!res) return jr_fail(r, at);
    jv attribute = jv_undef(NULL), deflt = jv_none();
    int by_attr = 0;
    if (nargs == 0) {
        for (int k = 0; k < nkw; k++) {
            if (!strcmp(kwnames[k], "attribute")) attribute = kwvals[k], by_attr = 1;
            else if (!strcmp(kwnames[k], "default")) deflt = kwvals[k];
            else return jr_err(r, at, "unexpected keyword argument '%s'", kwnames[k]);
        }
        if (!by_attr) return jr_err(r, at, "map requires a filter argument");
    }
    int fid = -1;
    if (!by_attr) {
        if (args[0].kind != JV_STR) return jr_err(r, at, "map: the filter name must be a str");
        fid = tt_chat_filter_index(args[0].u.s->s);
        if (fid < 0)
            return jr_err(r, at, tt_chat_known_elsewhere(args[0].u.s->s, 0) ? "unsupported construct: the filter '%s'"
                                                                             : "no filter named '%s'",
                          args[0].u.s->s);
    }
    for (size_t i = 0; i < items->n; i++) {
        if (jr_step(r, at)) return -1;
        if (by_attr) {
            if (attr_path(r, at, items->v[i], attribute, &res->v[i])) return -1;
            if (deflt.kind != JV_NONE && res->v[i].kind == JV_UNDEF) res->v[i] = deflt;
        } else if (jr_filter(r, at, fid, items->v[i], args + 1, nargs - 1, kwnames, kwvals, nkw, &res->v[i])) {
            return -1;
        }
    }
    return iter_of(r, at, res, "generator", out);
}

/* ---- the filters -------------------------------------------------------------------------------- */

static int title_filter(jrender *r, const jnode *at, jv s, jv *out)
{
    /* "".join(item[0].upper() + item[1:].lower() for item in re.split(r"([-\s({\[<]+)", s) if item) */
    const jstr *S = s.u.s;
    jbuf b = {0};
    int rc = 0;
    for (size_t i = 0; i < S->len && !rc;) {
        uint32_t c;
        int l = u8_dec(S->s + i, S->len - i, &c);
        int sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || u8_isspace(c);
        size_t j = i + (size_t)l;
        while (j < S->len) {
            uint32_t d;
            int m = u8_dec(S->s + j, S->len - j, &d);
            int dsep = d == '-' || d == '(' || d == '{' || d == '[' || d == '<' || u8_isspace(d);
            if (dsep != sep) break;
            j += (size_t)m;
        }
        jv first, rest, up, low;
        rc = jv_str(r->a, S->s + i, (size_t)l, &first) || jv_str(r->a, S->s + i + l, j - i - (size_t)l, &rest) ||
             js_case(r->a, first, CASE_UPPER, &up) || js_case(r->a, rest, CASE_LOWER, &low) ||
             jb_put(&b, up.u.s->s, up.u.s->len) || jb_put(&b, low.u.s->s, low.u.s->len);
        i = j;
    }
    rc = rc || jv_str(r->a, b.p ? b.p : "", b.len, out);
    jb_free(&b);
    return rc ? jr_fail(r, at) : 0;
}

/* str.splitlines() boundaries */
static int line_break(const char *s, size_t n, size_t i, size_t *len)
{
    uint32_t c;
    int l = u8_dec(s + i, n - i, &c);
    if (c == '\r' && i + 1 < n && s[i + 1] == '\n') return *len = 2, 1;
    if (c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
        c == 0x2028 || c == 0x2029)
        return *len = (size_t)l, 1;
    *len = (size_t)l;
    return 0;
}

static int indent_filter(jrender *r, const jnode *at, jv s, jv width, int first, int blank, jv *out)
{
    jbuf ind = {0}, b = {0};
    int rc = 0, markup = s.flags & JVF_MARKUP;
    if (width.kind == JV_STR) rc = jb_put(&ind, width.u.s->s, width.u.s->len);
    else if (width.kind == JV_INT || width.kind == JV_BOOL) {
        int64_t w = width.kind == JV_INT ? width.u.i : width.u.b;
        if (w > 4096) return jr_err(r, at, "indent: a width of %lld is too large", (long long)w);
        for (int64_t i = 0; i < w && !rc; i++) rc = jb_putc(&ind, ' ');
    } else {
        return jr_err(r, at, "can't multiply sequence by non-int of type '%s'", jv_type_name(width));
    }
    /* (s + "\n").splitlines(): s cut at each line break, the last piece kept even when empty */
    const jstr *S = s.u.s;
    if (first && !rc) rc = jb_put(&b, ind.p ? ind.p : "", ind.len);
    for (size_t i = 0, st = 0, line = 0; !rc; line++) {
        size_t bl = 0;
        int found = 0;
        while (i < S->len && !(found = line_break(S->s, S->len, i, &bl))) i += bl;
        if (line) rc = jb_putc(&b, '\n') || ((blank || i > st) && jb_put(&b, ind.p ? ind.p : "", ind.len));
        rc = rc || jb_put(&b, S->s + st, i - st);
        if (!found) break;
        i += bl, st = i;
    }
    rc = rc || jv_str(r->a, b.p ? b.p : "", b.len, out);
    jb_free(&ind), jb_free(&b);
    if (rc) return jr_fail(r, at);
    if (markup) out->flags |= JVF_MARKUP;
    return 0;
}

static int round_filter(jrender *r, const jnode *at, jv v, jv prec, jv method, jv *out)
{
    if (method.kind != JV_STR || (strcmp(method.u.s->s, "common") && strcmp(method.u.s->s, "ceil") && strcmp(method.u.s->s, "floor")))
        return jr_err(r, at, "method must be common, ceil or floor");
    if (prec.kind != JV_INT && prec.kind != JV_BOOL)
        return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(prec));
    int64_t p = prec.kind == JV_INT ? prec.u.i : prec.u.b;
    if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
    if (!jv_is_num(v)) return jr_err(r, at, "type %s doesn't define __round__ method", jv_type_name(v));
    if (p < 0 || p > 300) return jr_err(r, at, "unsupported construct: round with a precision of %lld", (long long)p);
    if (!strcmp(method.u.s->s, "common")) {
        if (v.kind != JV_FLOAT) return *out = jv_int(v.kind == JV_INT ? v.u.i : v.u.b), 0;
        if (!isfinite(v.u.f)) return *out = v, 0;
        char buf[512];
        snprintf(buf, sizeof buf, "%.*f", (int)p, v.u.f); /* glibc: exact value, ties to even, as Python */
        return *out = jv_float(strtod(buf, NULL)), 0;
    }
    double x = v.kind == JV_FLOAT ? v.u.f : (double)(v.kind == JV_INT ? v.u.i : v.u.b), sc = pow(10.0, (double)p);
    double y = !strcmp(method.u.s->s, "ceil") ? ceil(x * sc) : floor(x * sc);
    if (!isfinite(y)) return jr_err(r, at, "cannot convert float infinity to integer");
    return *out = jv_float(y / sc), 0;
}

static int to_json(jrender *r, const jnode *at, jv v, const jv *slots, const int *given, jv *out)
{
    jv ea = given[0] ? slots[0] : jv_bool(0), indent = given[1] ? slots[1] : jv_none(),
       sep = given[2] ? slots[2] : jv_none(), sk = given[3] ? slots[3] : jv_bool(0);
    const char *item_sep = NULL, *key_sep = NULL;
    if (sep.kind != JV_NONE) {
        if (sep.kind != JV_LIST || sep.u.l->n != 2 || sep.u.l->v[0].kind != JV_STR || sep.u.l->v[1].kind != JV_STR)
            return jr_err(r, at, "tojson: separators must be a pair of strings");
        item_sep = sep.u.l->v[0].u.s->s, key_sep = sep.u.l->v[1].u.s->s;
    }
    jbuf b = {0};
    b.limit = r->root->limit;
    int rc = jv_write_json(&b, v, jv_truthy(ea), &indent, item_sep, key_sep, jv_truthy(sk)) ||
             jv_str(r->a, b.p ? b.p : "", b.len, out);
    jb_free(&b);
    return rc ? jr_fail(r, at) : 0;
}

static int minmax(jrender *r, const jnode *at, jv v, int is_max, int cs, jv attr, jv *out)
{
    const jlist *items;
    if (jr_items(r, at, v, &items)) return -1;
    if (!items->n) return *out = jv_undef("No aggregated item, sequence was empty."), 0;
    size_t best = 0;
    jv bk;
    if (attr_path(r, at, items->v[0], attr, &bk) || icase(r, at, bk, cs, &bk)) return -1;
    for (size_t i = 1; i < items->n; i++) {
        jv k;
        int c;
        if (attr_path(r, at, items->v[i], attr, &k) || icase(r, at, k, cs, &k)) return -1;
        if (jv_cmp(k, bk, &c)) return jr_fail(r, at);
        if (is_max ? c > 0 : c < 0) best = i, bk = k;
    }
    *out = items->v[best];
    return 0;
}

int jr_filter(jrender *r, const jnode *at, int fid, jv v, const jv *args, int nargs, const char **kwnames,
              const jv *kwvals, int nkw, jv *out)
{
    static const char *const none[] = {NULL}, *const p_default[] = {"default_value", "boolean", NULL},
                             *const p_dictsort[] = {"case_sensitive", "by", "reverse", NULL},
                             *const p_float[] = {"default", NULL}, *const p_int[] = {"default", "base", NULL},
                             *const p_indent[] = {"width", "first", "blank", NULL},
                             *const p_join[] = {"d", "attribute", NULL},
                             *const p_minmax[] = {"case_sensitive", "attribute", NULL},
                             *const p_replace[] = {"old", "new", "count", NULL},
                             *const p_round[] = {"precision", "method", NULL},
                             *const p_sort[] = {"reverse", "case_sensitive", "attribute", NULL},
                             *const p_sum[] = {"attribute", "start", NULL},
                             *const p_tojson[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL},
                             *const p_trim[] = {"chars", NULL};
    const char *const *params = none;
    tt_chat_filter_hits[fid]++;
    if (jr_step(r, at)) return -1;
    const char *fname = tt_chat_filter_names[fid];
    switch (fid) {
    case F_MAP: return do_map(r, at, v, args, nargs, kwnames, kwvals, nkw, out);
    case F_SELECT:
    case F_REJECT:
    case F_SELECTATTR:
    case F_REJECTATTR:
        if (nkw) return jr_err(r, at, "unsupported construct: keyword arguments to %s", fname);
        return select_reject(r, at, v, args, nargs, fid == F_SELECTATTR || fid == F_REJECTATTR,
                             fid == F_REJECT || fid == F_REJECTATTR, out);
    case F_D:
    case F_DEFAULT: params = p_default; break;
    case F_DICTSORT: params = p_dictsort; break;
    case F_FLOAT: params = p_float; break;
    case F_INT: params = p_int; break;
    case F_INDENT: params = p_indent; break;
    case F_JOIN: params = p_join; break;
    case F_MAX:
    case F_MIN:
    case F_UNIQUE: params = p_minmax; break;
    case F_REPLACE: params = p_replace; break;
    case F_ROUND: params = p_round; break;
    case F_SORT: params = p_sort; break;
    case F_SUM: params = p_sum; break;
    case F_TOJSON: params = p_tojson; break;
    case F_TRIM: params = p_trim; break;
    default: break;
    }
    jv slot[4] = {jv_none(), jv_none(), jv_none(), jv_none()};
    int given[4] = {0, 0, 0, 0};
    if (bind(r, at, fname, params, args, nargs, kwnames, kwvals, nkw, slot, given)) return -1;
    jv s;
    int64_t n = 0;
    switch (fid) {
    case F_ABS:
        if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (v.kind == JV_FLOAT) return *out = jv_float(fabs(v.u.f)), 0;
        if (v.kind == JV_INT || v.kind == JV_BOOL) {
            int64_t x = v.kind == JV_INT ? v.u.i : v.u.b;
            if (x == INT64_MIN) return jr_err(r, at, "an integer beyond 64 bits");
            return *out = jv_int(x < 0 ? -x : x), 0;
        }
        return jr_err(r, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
        if (soft_str(r, at, v, &s)) return -1;
        return js_case(r->a, s, fid == F_CAPITALIZE ? CASE_CAPITALIZE : fid == F_LOWER ? CASE_LOWER : CASE_UPPER, out)
                   ? jr_fail(r, at)
                   : 0;
    case F_TITLE: return soft_str(r, at, v, &s) || title_filter(r, at, s, out) ? -1 : 0;
    case F_INDENT: /* do_indent adds "\n" to the value itself: anything but a str fails there */
        if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (v.kind != JV_STR) return jr_err(r, at, "unsupported operand type(s) for +=: '%s' and 'str'", jv_type_name(v));
        s = v;
        return indent_filter(r, at, s, given[0] ? slot[0] : jv_int(4), jv_truthy(slot[1]), jv_truthy(slot[2]), out);
    case F_COUNT:
    case F_LENGTH: return py_len(r, at, v, &n) ? -1 : (*out = jv_int(n), 0);
    case F_D:
    case F_DEFAULT:
        if (v.kind == JV_UNDEF || (given[1] && jv_truthy(slot[1]) && !jv_truthy(v))) {
            if (given[0]) *out = slot[0];
            else return jv_cstr(r->a, "", out) ? jr_fail(r, at) : 0;
        } else {
            *out = v;
        }
        return 0;
    case F_DICTSORT: {
        if (v.kind != JV_DICT) return jr_err(r, at, "dictsort: '%s' object has no attribute 'items'", jv_type_name(v));
        jv by = given[1] ? slot[1] : jv_none();
        int pos = 0;
        if (given[1] && (by.kind != JV_STR || (strcmp(by.u.s->s, "key") && strcmp(by.u.s->s, "value"))))
            return jr_err(r, at, "you can only sort by either \"key\" or \"value\"");
        if (given[1] && !strcmp(by.u.s->s, "value")) pos = 1;
        size_t cnt = v.u.d->n;
        jlist *l = jv_list_new(r->a, cnt);
        jv *keys = ja_alloc(r->a, (cnt ? cnt : 1) * sizeof *keys);
        if (!l || !keys) return jr_fail(r, at);
        for (size_t i = 0; i < cnt; i++) {
            jv kv[2] = {v.u.d->keys[i], v.u.d->vals[i]};
            if (jv_list(r->a, kv, 2, 1, &l->v[i]) || icase(r, at, kv[pos], jv_truthy(slot[0]), &keys[i])) return -1;
        }
        if (sort_by(r, at, l->v, keys, cnt, jv_truthy(slot[2]))) return -1;
        *out = (jv){JV_LIST, 0, 0, {.l = l}};
        return 0;
    }
    case F_FIRST:
    case F_LAST: {
        if (v.kind == JV_ITER) {
            if (fid == F_LAST) return jr_err(r, at, "'%s' object is not reversible", v.u.it->tname);
            jiter *it = v.u.it;
            *out = it->pos < it->items->n ? it->items->v[it->pos++] : jv_undef("No first item, sequence was empty.");
            return 0;
        }
        const jlist *items;
        if (jr_items(r, at, v, &items)) return -1;
        if (!items->n) return *out = jv_undef(fid == F_FIRST ? "No first item, sequence was empty." : "No last item, sequence was empty."), 0;
        *out = items->v[fid == F_FIRST ? 0 : items->n - 1];
        return 0;
    }
    case F_FLOAT: {
        jv dflt = given[0] ? slot[0] : jv_float(0.0);
        double d;
        if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (v.kind == JV_FLOAT) return *out = v, 0;
        if (v.kind == JV_INT || v.kind == JV_BOOL) return *out = jv_float((double)(v.kind == JV_INT ? v.u.i : v.u.b)), 0;
        if (v.kind == JV_STR && py_float_str(v.u.s, &d) == 0) return *out = jv_float(d), 0;
        return *out = dflt, 0;
    }
    case F_INT: {
        jv dflt = given[0] ? slot[0] : jv_int(0), base = given[1] ? slot[1] : jv_int(10);
        if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (v.kind == JV_INT) return *out = v, 0;
        if (v.kind == JV_BOOL) return *out = jv_int(v.u.b), 0;
        if (v.kind == JV_FLOAT) {
            if (isnan(v.u.f)) return *out = dflt, 0;
            if (!isfinite(v.u.f)) return jr_err(r, at, "cannot convert float infinity to integer");
            if (fabs(v.u.f) >= 9.2e18) return jr_err(r, at, "an integer beyond 64 bits");
            return *out = jv_int((int64_t)v.u.f), 0;
        }
        if (v.kind == JV_STR) {
            int64_t x;
            int ovf;
            if (base.kind != JV_INT) return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(base));
            if (py_int_str(v.u.s, base.u.i, &x, &ovf) == 0) {
                if (ovf) return jr_err(r, at, "an integer beyond 64 bits");
                return *out = jv_int(x), 0;
            }
            double d;
            if (py_float_str(v.u.s, &d) == 0) {
                if (isnan(d)) return *out = dflt, 0;
                if (!isfinite(d)) return *out = dflt, 0;
                if (fabs(d) >= 9.2e18) return jr_err(r, at, "an integer beyond 64 bits");
                return *out = jv_int((int64_t)d), 0;
            }
        }
        return *out = dflt, 0;
    }
    case F_ITEMS: {
        static const jlist empty = {0};
        if (v.kind == JV_UNDEF) return iter_of(r, at, &empty, "generator", out);
        if (v.kind != JV_DICT) return jr_err(r, at, "can only get item pairs from a mapping");
        jlist *l = jv_list_new(r->a, v.u.d->n);
        if (!l) return jr_fail(r, at);
        for (size_t i = 0; i < v.u.d->n; i++) {
            jv kv[2] = {v.u.d->keys[i], v.u.d->vals[i]};
            if (jv_list(r->a, kv, 2, 1, &l->v[i])) return jr_fail(r, at);
        }
        return iter_of(r, at, l, "generator", out);
    }
    case F_JOIN: {
        const jlist *items;
        jv d = given[0] ? slot[0] : jv_none();
        jbuf b = {0};
        b.limit = r->root->limit;
        if (jr_items(r, at, v, &items)) return -1;
        if (given[0] && jv_write_str(&b, d)) return jb_free(&b), jr_fail(r, at);
        size_t dl = b.len;
        char *dcopy = malloc(dl + 1);
        if (!dcopy) return jb_free(&b), jr_err(r, at, "out of memory");
        memcpy(dcopy, b.p ? b.p : "", dl);
        b.len = 0;
        int rc = 0;
        for (size_t i = 0; i < items->n && !rc; i++) {
            jv x = items->v[i];
            if (given[1] && slot[1].kind != JV_NONE && attr_path(r, at, x, slot[1], &x)) rc = -1;
            else if (x.kind == JV_ITER) rc = jr_err(r, at, "unsupported construct: the text of a generator object");
            else rc = (i && jb_put(&b, dcopy, dl)) || (jv_write_str(&b, x) && jr_fail(r, at));
        }
        free(dcopy);
        rc = rc || (jv_str(r->a, b.p ? b.p : "", b.len, out) && jr_fail(r, at));
        jb_free(&b);
        return rc ? -1 : 0;
    }
    case F_LIST: {
        const jlist *items;
        if (jr_items(r, at, v, &items)) return -1;
        return jv_list(r->a, items->v, items->n, 0, out) ? jr_fail(r, at) : 0;
    }
    case F_MAX:
    case F_MIN:
        return minmax(r, at, v, fid == F_MAX, jv_truthy(slot[0]), given[1] ? slot[1] : jv_none(), out);
    case F_REPLACE: {
        jv o, nw;
        if (!given[0] || !given[1]) return jr_err(r, at, "replace() missing required arguments 'old' and 'new'");
        if (soft_str(r, at, v, &s) || soft_str(r, at, slot[0], &o) || soft_str(r, at, slot[1], &nw)) return -1;
        s.flags &= (uint8_t)~JVF_MARKUP, o.flags &= (uint8_t)~JVF_MARKUP, nw.flags &= (uint8_t)~JVF_MARKUP;
        int64_t cnt = -1;
        if (given[2] && slot[2].kind != JV_NONE) {
            if (slot[2].kind != JV_INT && slot[2].kind != JV_BOOL)
                return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(slot[2]));
            cnt = slot[2].kind == JV_INT ? slot[2].u.i : slot[2].u.b;
        }
        return js_replace(r->a, s, o, nw, cnt, out) ? jr_fail(r, at) : 0;
    }
    case F_REVERSE: {
        if (v.kind == JV_STR) {
            const jstr *S = v.u.s;
            char *buf = ja_alloc(r->a, S->len + 1);
            if (!buf) return jr_fail(r, at);
            size_t o = S->len;
            for (size_t i = 0; i < S->len;) {
                uint32_t c;
                int l = u8_dec(S->s + i, S->len - i, &c);
                o -= (size_t)l;
                memcpy(buf + o, S->s + i, (size_t)l);
                i += (size_t)l;
            }
            return js_new(r->a, buf, S->len, v, out) ? jr_fail(r, at) : 0; /* Markup[::-1] is a Markup */
        }
        const jlist *items;
        int was_iter = v.kind == JV_ITER;
        if (v.kind != JV_UNDEF && v.kind != JV_LIST && v.kind != JV_DICT && !was_iter)
            return jr_err(r, at, "argument must be iterable");
        if (jr_items(r, at, v, &items)) return -1;
        jlist *l = jv_list_new(r->a, items->n);
        if (!l) return jr_fail(r, at);
        for (size_t i = 0; i < items->n; i++) l->v[i] = items->v[items->n - 1 - i];
        if (was_iter) return *out = (jv){JV_LIST, 0, 0, {.l = l}}, 0; /* a generator: list(value) reversed */
        return iter_of(r, at, l, v.kind == JV_DICT ? "dict_reversekeyiterator" : "reversed", out);
    }
    case F_ROUND: {
        jv common = slot[1];
        if (!given[1] && jv_cstr(r->a, "common", &common)) return jr_fail(r, at);
        return round_filter(r, at, v, given[0] ? slot[0] : jv_int(0), common, out);
    }
    case F_SAFE:
        if (soft_str(r, at, v, &s)) return -1;
        if (jv_str(r->a, s.u.s->s, s.u.s->len, out)) return jr_fail(r, at);
        out->flags |= JVF_MARKUP;
        return 0;
    case F_SORT: {
        const jlist *items;
        if (jr_items(r, at, v, &items)) return -1;
        size_t cnt = items->n;
        jlist *l = jv_list_new(r->a, cnt);
        jv *keys = ja_alloc(r->a, (cnt ? cnt : 1) * sizeof *keys);
        if (!l || !keys) return jr_fail(r, at);
        memcpy(l->v, items->v, cnt * sizeof(jv));
        jv attr = given[2] ? slot[2] : jv_none();
        /* make_multi_attrgetter: the key is a list, one value per comma-separated attribute */
        jv parts = jv_none();
        for (size_t i = 0; i < cnt; i++) {
            size_t np = attr.kind == JV_STR ? 0 : 1;
            jv one[1];
            if (attr.kind == JV_STR) {
                jv sep;
                if (jv_cstr(r->a, ",", &sep) || js_split(r->a, attr, &sep, -1, 0, &parts)) return jr_fail(r, at);
                np = parts.u.l->n;
            }
            jlist *k = jv_list_new(r->a, np);
            if (!k) return jr_fail(r, at);
            for (size_t j = 0; j < np; j++) {
                jv a = attr.kind == JV_STR ? parts.u.l->v[j] : attr;
                if (attr_path(r, at, l->v[i], a, &one[0]) || icase(r, at, one[0], jv_truthy(slot[1]), &k->v[j])) return -1;
            }
            keys[i] = (jv){JV_LIST, 0, 0, {.l = k}};
        }
        if (sort_by(r, at, l->v, keys, cnt, jv_truthy(slot[0]))) return -1;
        *out = (jv){JV_LIST, 0, 0, {.l = l}};
        return 0;
    }
    case F_STRING: return soft_str(r, at, v, out);
    case F_SUM: {
        const jlist *items;
        jv acc = given[1] ? slot[1] : jv_int(0);
        if (jr_items(r, at, v, &items)) return -1;
        if (acc.kind == JV_STR) return jr_err(r, at, "sum() can't sum strings [use ''.join(seq) instead]");
        for (size_t i = 0; i < items->n; i++) {
            jv x = items->v[i];
            if (given[0] && slot[0].kind != JV_NONE && attr_path(r, at, x, slot[0], &x)) return -1;
            if (jr_binop(r, at, OP_ADD, acc, x, &acc)) return -1;
        }
        *out = acc;
        return 0;
    }
    case F_TOJSON: return to_json(r, at, v, slot, given, out);
    case F_TRIM: return soft_str(r, at, v, &s) || (js_strip(r->a, s, given[0] ? &slot[0] : NULL, 1, 1, out) && jr_fail(r, at)) ? -1 : 0;
    case F_UNIQUE: {
        const jlist *items;
        if (jr_items(r, at, v, &items)) return -1;
        jlist *l = jv_list_new(r->a, items->n);
        jv *seen = ja_alloc(r->a, (items->n ? items->n : 1) * sizeof *seen);
        if (!l || !seen) return jr_fail(r, at);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            jv key;
            if (attr_path(r, at, items->v[i], given[1] ? slot[1] : jv_none(), &key) ||
                icase(r, at, key, jv_truthy(slot[0]), &key))
                return -1;
            if (!jv_hashable(key)) return jr_err(r, at, "unhashable type: '%s'", jv_type_name(key));
            int dup = 0;
            for (size_t j = 0; j < k && !dup; j++) dup = jv_eq(seen[j], key);
            if (!dup) seen[k] = key, l->v[k++] = items->v[i];
        }
        l->n = k;
        return iter_of(r, at, l, "generator", out);
    }
    case F_WORDCOUNT: {
        if (soft_str(r, at, v, &s)) return -1;
        int64_t words = 0;
        int in_word = 0;
        for (size_t i = 0; i < s.u.s->len;) {
            uint32_t c;
            i += (size_t)u8_dec(s.u.s->s + i, s.u.s->len - i, &c);
            int k = utf8proc_category((utf8proc_int32_t)c);
            int w = c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                    (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
            if (w && !in_word) words++;
            in_word = w;
        }
        return *out = jv_int(words), 0;
    }
    }
    return jr_err(r, at, "internal error: filter %d", fid);
}

/* ---- the tests ---------------------------------------------------------------------------------- */

static int small_int(jv v) { return (v.kind == JV_INT && v.u.i >= -5 && v.u.i <= 256); }

int jr_test(jrender *r, const jnode *at, int tid, jv v, const jv *args, int nargs, jv *out)
{
    static const int want_args[T_N] = {[T_DIVISIBLEBY] = 1, [T_EQ] = 1, [T_EQUALTO] = 1, [T_GE] = 1, [T_GT] = 1,
                                       [T_IN] = 1, [T_LE] = 1, [T_LT] = 1, [T_NE] = 1, [T_SAMEAS] = 1};
    tt_chat_test_hits[tid]++;
    if (jr_step(r, at)) return -1;
    if (nargs != want_args[tid])
        return jr_err(r, at, "the test '%s' takes %d argument(s), got %d", tt_chat_test_names[tid], want_args[tid], nargs);
    jv a = nargs ? args[0] : jv_none(), m;
    int res = 0, c;
    switch (tid) {
    case T_BOOLEAN: res = v.kind == JV_BOOL; break;
    case T_DEFINED: res = v.kind != JV_UNDEF; break;
    case T_UNDEFINED: res = v.kind == JV_UNDEF; break;
    case T_FALSE: res = v.kind == JV_BOOL && !v.u.b; break;
    case T_TRUE: res = v.kind == JV_BOOL && v.u.b; break;
    case T_FLOAT: res = v.kind == JV_FLOAT; break;
    case T_INTEGER: res = v.kind == JV_INT; break;
    case T_NUMBER: res = jv_is_num(v); break;
    case T_STRING: res = v.kind == JV_STR; break;
    case T_MAPPING: res = v.kind == JV_DICT; break;
    case T_NONE: res = v.kind == JV_NONE; break;
    case T_ITERABLE:
        res = v.kind == JV_UNDEF || v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_ITER ||
              v.kind == JV_LOOP;
        break;
    case T_SEQUENCE:
        res = v.kind == JV_UNDEF || v.kind == JV_STR || v.kind == JV_DICT || (v.kind == JV_LIST && !(v.flags & JVF_VIEW));
        break;
    case T_DIVISIBLEBY:
    case T_EVEN:
    case T_ODD:
        if (jr_binop(r, at, OP_MOD, v, tid == T_DIVISIBLEBY ? a : jv_int(2), &m)) return -1;
        res = jv_eq(m, jv_int(tid == T_ODD ? 1 : 0));
        break;
    case T_EQ:
    case T_EQUALTO: res = jv_eq(v, a); break;
    case T_NE: res = !jv_eq(v, a); break;
    case T_GE:
    case T_GT:
    case T_LE:
    case T_LT:
        if (jv_cmp(v, a, &c)) return jr_fail(r, at);
        if ((v.kind == JV_FLOAT && isnan(v.u.f)) || (a.kind == JV_FLOAT && isnan(a.u.f))) res = 0;
        else res = tid == T_GE ? c >= 0 : tid == T_GT ? c > 0 : tid == T_LE ? c <= 0 : c < 0;
        break;
    case T_IN:
        if (jr_contains(r, at, v, a, &res)) return -1;
        break;
    case T_SAMEAS:
        /* Python identity: exact for None, booleans and the cached small ints; containers by object */
        if (v.kind == JV_NONE || a.kind == JV_NONE) res = v.kind == a.kind;
        else if (v.kind == JV_BOOL || a.kind == JV_BOOL) res = v.kind == a.kind && v.u.b == a.u.b;
        else if (small_int(v) || small_int(a)) res = small_int(v) && small_int(a) && v.u.i == a.u.i;
        else if ((v.kind == JV_LIST || v.kind == JV_DICT) && v.kind == a.kind)
            res = v.kind == JV_LIST ? v.u.l == a.u.l : v.u.d == a.u.d;
        else if (v.kind == JV_NS || v.kind == JV_MACRO || v.kind == JV_UNDEF || v.kind != a.kind)
            res = v.kind == a.kind && (v.kind == JV_UNDEF ? 0 : v.u.ns == a.u.ns);
        else
            return jr_err(r, at, "unsupported construct: 'sameas' on a %s (Python identity)", jv_type_name(v));
        break;
    }
    *out = jv_bool(res);
    return 0;
}

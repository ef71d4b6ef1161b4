/* access.c — what evaluation stands on: errors at a node, the step bound, scopes (frames), iterating
 * a value, and attribute, item and slice access as transformers' ImmutableSandboxedEnvironment
 * does them (obj.name prefers the attribute, obj[key] the item; unknown is undefined), and the
 * arithmetic operators with Python's semantics. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_internal.h"
#include "core/core.h"

int jr_err(jrender *r, const jnode *n, const char *fmt, ...)
{
    if (r->errored) return -1;
    r->errored = 1;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n) tt_errorf("%s:%d:%d: %s", r->t->name, n->line, n->col, msg);
    else tt_errorf("%s: %s", r->t->name, msg);
    return -1;
}

/* a library error (tt_errorf already called) gets the node's position, unless one is there */
int jr_fail(jrender *r, const jnode *n)
{
    if (r->errored) return -1;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tt_last_error());
    return jr_err(r, n, "%s", msg);
}

int jr_step(jrender *r, const jnode *n)
{
    if (jv_too_deep) {
        jv_too_deep = 0;
        return jr_err(r, n, "a value nested more than 500 deep (Python stops with RecursionError)");
    }
    if (++r->steps > r->max_steps)
        return jr_err(r, n, "the rendering ran past %llu steps (the bound on a rendering)",
                      (unsigned long long)r->max_steps);
    return 0;
}

/* ---- frames ------------------------------------------------------------------------------------- */

jframe *jr_frame_new(jrender *r, jframe *parent)
{
    jframe *f = ja_alloc(r->a, sizeof *f);
    if (f) f->parent = parent;
    return f;
}

jv *jr_frame_find(jframe *f, const char *name)
{
    for (; f; f = f->parent)
        for (size_t i = f->n; i-- > 0;)
            if (!strcmp(f->names[i], name)) return &f->vals[i];
    return NULL;
}

int jr_frame_set(jrender *r, jframe *f, const char *name, jv v)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->names[i], name)) return f->vals[i] = v, 0;
    if (f->n == f->cap) {
        size_t c = f->cap ? f->cap * 2 : 8;
        const char **names = ja_alloc(r->a, c * sizeof *names);
        jv *vals = ja_alloc(r->a, c * sizeof *vals);
        if (!names || !vals) return -1;
        if (f->n) memcpy(names, f->names, f->n * sizeof *names), memcpy(vals, f->vals, f->n * sizeof *vals);
        f->names = names, f->vals = vals, f->cap = c;
    }
    f->names[f->n] = name, f->vals[f->n++] = v;
    return 0;
}

/* ---- iteration ---------------------------------------------------------------------------------- */

int jr_items(jrender *r, const jnode *n, jv v, const jlist **out)
{
    static const jlist empty = {0};
    switch (v.kind) {
    case JV_UNDEF: *out = &empty; return 0;
    case JV_LIST: *out = v.u.l; return 0;
    case JV_DICT: {
        jlist *l = jv_list_new(r->a, v.u.d->n);
        if (!l) return jr_fail(r, n);
        memcpy(l->v, v.u.d->keys, v.u.d->n * sizeof(jv));
        *out = l;
        return 0;
    }
    case JV_STR: {
        const jstr *s = v.u.s;
        jlist *l = jv_list_new(r->a, u8_count(s->s, s->len));
        if (!l) return jr_fail(r, n);
        size_t k = 0;
        for (size_t i = 0; i < s->len;) {
            uint32_t cp;
            int len = u8_dec(s->s + i, s->len - i, &cp);
            /* iterating a Markup gives plain str characters (str's iterator) */
            if (jv_str(r->a, s->s + i, (size_t)len, &l->v[k++])) return jr_fail(r, n);
            i += (size_t)len;
        }
        *out = l;
        return 0;
    }
    case JV_ITER: { /* one pass: what is taken is gone */
        jiter *it = v.u.it;
        jlist *l = jv_list_new(r->a, it->items->n - it->pos);
        if (!l) return jr_fail(r, n);
        memcpy(l->v, it->items->v + it->pos, l->n * sizeof(jv));
        it->pos = it->items->n;
        *out = l;
        return 0;
    }
    default: return jr_err(r, n, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- attribute and item access, as the sandbox does them ---------------------------------------- */

static int slice_index(jrender *r, const jnode *at, jv v, int64_t *out, int *is_none)
{
    *is_none = v.kind == JV_NONE;
    if (*is_none) return 0;
    if (v.kind == JV_INT || v.kind == JV_BOOL) return *out = v.kind == JV_INT ? v.u.i : v.u.b, 0;
    if (v.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
    return 1; /* TypeError: the lookup gives undefined */
}

/* Python's PySlice_AdjustIndices: the positions a[start:stop:step] takes of len items */
static size_t slice_positions(int64_t len, int64_t start, int sn, int64_t stop, int pn, int64_t step, int64_t *first)
{
    if (step > 0) {
        start = sn ? 0 : start < 0 ? (start + len < 0 ? 0 : start + len) : (start > len ? len : start);
        stop = pn ? len : stop < 0 ? (stop + len < 0 ? 0 : stop + len) : (stop > len ? len : stop);
        *first = start;
        return stop > start ? (size_t)((stop - start - 1) / step + 1) : 0;
    }
    start = sn ? len - 1 : start < 0 ? (start + len < 0 ? -1 : start + len) : (start >= len ? len - 1 : start);
    stop = pn ? -1 : stop < 0 ? (stop + len < 0 ? -1 : stop + len) : (stop >= len ? len - 1 : stop);
    *first = start;
    return stop < start ? (size_t)((start - stop - 1) / (-step) + 1) : 0;
}

int jr_slice(jrender *r, const jnode *at, jv obj, const jv *parts, jv *out)
{
    int64_t idx[3] = {0, 0, 1};
    int none[3];
    /* jinja2 compiles a slice to Python's own obj[a:b:c], which fails on what cannot be sliced, but
     * folds a constant expression through the sandbox's getitem, which gives undefined there: titan
     * refuses those rather than guess which one a template gets */
    if (obj.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", obj.u.uname ? obj.u.uname : "value");
    if (!(obj.kind == JV_STR || (obj.kind == JV_LIST && !(obj.flags & JVF_VIEW))))
        return jr_err(r, at, "unsupported construct: slicing a %s object (an error in jinja2, or undefined when constant)",
                      obj.kind == JV_ITER ? obj.u.it->tname : jv_type_name(obj));
    for (int k = 0; k < 3; k++) {
        int rc = slice_index(r, at, parts[k], &idx[k], &none[k]);
        if (rc < 0) return -1;
        if (rc) return jr_err(r, at, "unsupported construct: slice indices that are not integers or None");
    }
    if (!none[2] && idx[2] == 0) return jr_err(r, at, "slice step cannot be zero");
    if (none[2]) idx[2] = 1;
    int is_list = obj.kind == JV_LIST;
    if (obj.flags & JVF_RANGE) return jr_err(r, at, "unsupported construct: slicing a range");
    if (is_list) {
        int64_t first;
        size_t cnt = slice_positions((int64_t)obj.u.l->n, idx[0], none[0], idx[1], none[1], idx[2], &first);
        jlist *l = jv_list_new(r->a, cnt);
        if (!l) return jr_fail(r, at);
        for (size_t i = 0; i < cnt; i++) l->v[i] = obj.u.l->v[first + (int64_t)i * idx[2]];
        *out = (jv){JV_LIST, (uint8_t)(obj.flags & JVF_TUPLE), 0, {.l = l}};
        return 0;
    }
    const jstr *s = obj.u.s;
    size_t ncp = u8_count(s->s, s->len);
    int64_t first;
    size_t cnt = slice_positions((int64_t)ncp, idx[0], none[0], idx[1], none[1], idx[2], &first);
    if (idx[2] == 1) {
        size_t b = u8_offset(s->s, s->len, (size_t)first), e = u8_offset(s->s, s->len, (size_t)first + cnt);
        return js_new(r->a, s->s + b, e - b, obj, out) ? jr_fail(r, at) : 0;
    }
    size_t *offs = malloc((ncp + 1) * sizeof *offs);
    if (!offs) return jr_err(r, at, "out of memory");
    for (size_t i = 0, k = 0; k <= ncp; k++) {
        offs[k] = i;
        if (i < s->len) i = u8_offset(s->s, s->len, k + 1);
    }
    jbuf b = {0};
    int rc = 0;
    for (size_t i = 0; i < cnt && !rc; i++) {
        int64_t c = first + (int64_t)i * idx[2];
        rc = jb_put(&b, s->s + offs[c], offs[c + 1] - offs[c]);
    }
    free(offs);
    rc = rc || js_new(r->a, b.p ? b.p : "", b.len, obj, out);
    jb_free(&b);
    return rc ? jr_fail(r, at) : 0;
}

/* obj[key] without the attribute fallback: 1 found, 0 not (TypeError or LookupError), -1 error */
static int native_item(jrender *r, const jnode *at, jv obj, jv key, jv *out)
{
    if (key.kind == JV_UNDEF && obj.kind != JV_DICT && obj.kind != JV_LIST && obj.kind != JV_STR) return 0;
    switch (obj.kind) {
    case JV_DICT:
        if (!jv_hashable(key)) return 0;
        return jv_dict_get(obj.u.d, key, out);
    case JV_LIST:
    case JV_STR: {
        if (obj.flags & JVF_VIEW) return 0;
        if (key.kind != JV_INT && key.kind != JV_BOOL) return 0;
        int64_t i = key.kind == JV_INT ? key.u.i : key.u.b;
        if (obj.kind == JV_LIST) {
            int64_t n = (int64_t)obj.u.l->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return 0;
            *out = obj.u.l->v[i];
            return 1;
        }
        const jstr *s = obj.u.s;
        int64_t n = (int64_t)u8_count(s->s, s->len);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return 0;
        size_t b = u8_offset(s->s, s->len, (size_t)i), e = u8_offset(s->s, s->len, (size_t)i + 1);
        return js_new(r->a, s->s + b, e - b, obj, out) ? jr_fail(r, at) : 1;
    }
    default: return 0;
    }
}

static int attr_of(jrender *r, const jnode *at, jv obj, const char *name, jv *out)
{
    if (name[0] == '_' && name[1] == '_')
        return jr_err(r, at, "unsupported construct: the attribute '%s' (the sandbox refuses it)", name);
    if (obj.kind == JV_NS) {
        for (size_t i = 0; i < obj.u.ns->n; i++)
            if (!strcmp(obj.u.ns->keys[i].u.s->s, name)) return *out = obj.u.ns->vals[i], 1;
        return 0;
    }
    if (obj.kind == JV_LOOP) {
        const jloop *L = obj.u.loop;
        int64_t n = (int64_t)L->items->n, i0 = (int64_t)L->index0;
        if (!strcmp(name, "index")) return *out = jv_int(i0 + 1), 1;
        if (!strcmp(name, "index0")) return *out = jv_int(i0), 1;
        if (!strcmp(name, "revindex")) return *out = jv_int(n - i0), 1;
        if (!strcmp(name, "revindex0")) return *out = jv_int(n - i0 - 1), 1;
        if (!strcmp(name, "first")) return *out = jv_bool(i0 == 0), 1;
        if (!strcmp(name, "last")) return *out = jv_bool(i0 == n - 1), 1;
        if (!strcmp(name, "length")) return *out = jv_int(n), 1;
        if (!strcmp(name, "depth")) return *out = jv_int(1), 1;
        if (!strcmp(name, "depth0")) return *out = jv_int(0), 1;
        if (!strcmp(name, "previtem"))
            return *out = i0 > 0 ? L->items->v[i0 - 1] : jv_undef("there is no previous item"), 1;
        if (!strcmp(name, "nextitem"))
            return *out = i0 + 1 < n ? L->items->v[i0 + 1] : jv_undef("there is no next item"), 1;
    }
    if (obj.kind == JV_MACRO || obj.kind == JV_FUNC || obj.kind == JV_METHOD || obj.kind == JV_ITER ||
        (obj.kind == JV_LIST && (obj.flags & (JVF_VIEW | JVF_RANGE))))
        return jr_err(r, at, "unsupported construct: the attribute '%s' of a %s", name, jv_type_name(obj));
    int id = jm_lookup(obj, name);
    if (id == -2) return jr_err(r, at, "unsupported construct: the %s method '%s'", jv_type_name(obj), name);
    if (id < 0) return 0;
    jmethod *m = ja_alloc(r->a, sizeof *m);
    if (!m) return jr_fail(r, at);
    m->self = obj, m->id = id;
    *out = (jv){JV_METHOD, 0, 0, {.meth = m}};
    return 1;
}

int jr_getattr(jrender *r, const jnode *at, jv obj, const char *name, jv *out)
{
    if (obj.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", obj.u.uname ? obj.u.uname : "value");
    int rc = attr_of(r, at, obj, name, out);
    if (rc) return rc < 0 ? -1 : 0;
    jv key;
    if (jv_cstr(r->a, name, &key)) return jr_fail(r, at);
    rc = native_item(r, at, obj, key, out);
    if (rc < 0) return -1;
    if (!rc) *out = jv_undef(name);
    return 0;
}

int jr_getitem(jrender *r, const jnode *at, jv obj, jv key, jv *out)
{
    if (obj.kind == JV_UNDEF) return jr_err(r, at, "'%s' is undefined", obj.u.uname ? obj.u.uname : "value");
    int rc = native_item(r, at, obj, key, out);
    if (rc) return rc < 0 ? -1 : 0;
    if (key.kind == JV_STR) {
        rc = attr_of(r, at, obj, key.u.s->s, out);
        if (rc) return rc < 0 ? -1 : 0;
    }
    *out = jv_undef(key.kind == JV_STR ? key.u.s->s : NULL);
    return 0;
}


static int undef_err(jrender *r, const jnode *at, jv v)
{
    return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
}

/* ---- arithmetic --------------------------------------------------------------------------------- */

static int64_t ival(jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }
static double fval(jv v) { return v.kind == JV_FLOAT ? v.u.f : (double)ival(v); }
static int is_intlike(jv v) { return v.kind == JV_INT || v.kind == JV_BOOL; }

static int repeat(jrender *r, const jnode *at, jv seq, int64_t times, jv *out)
{
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        size_t len = seq.u.s->len;
        if (len && (uint64_t)times > (r->root->limit ? r->root->limit : (size_t)1 << 40) / len)
            return jr_err(r, at, "a string repeated %lld times passes the bound on output", (long long)times);
        jbuf b = {0};
        int rc = 0;
        for (int64_t i = 0; i < times && !rc; i++) rc = jb_put(&b, seq.u.s->s, len);
        rc = rc || js_new(r->a, b.p ? b.p : "", b.len, seq, out);
        jb_free(&b);
        return rc ? jr_fail(r, at) : 0;
    }
    size_t n = seq.u.l->n;
    if (n && (uint64_t)times > ((size_t)1 << 26) / n) return jr_err(r, at, "a list repeated %lld times is too long", (long long)times);
    jlist *l = jv_list_new(r->a, n * (size_t)times);
    if (!l) return jr_fail(r, at);
    for (int64_t i = 0; i < times; i++) memcpy(l->v + (size_t)i * n, seq.u.l->v, n * sizeof(jv));
    *out = (jv){JV_LIST, (uint8_t)(seq.flags & JVF_TUPLE), 0, {.l = l}};
    return 0;
}

static int py_floordiv_f(jrender *r, const jnode *at, double a, double b, double *out)
{
    if (b == 0) return jr_err(r, at, "float floor division by zero");
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod && ((b < 0) != (mod < 0))) div -= 1.0;
    if (div) {
        double fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
        *out = fl;
    } else {
        *out = copysign(0.0, a / b);
    }
    return 0;
}

static double py_mod_f(double a, double b)
{
    double mod = fmod(a, b);
    if (mod) {
        if ((b < 0) != (mod < 0)) mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}

int jr_binop(jrender *r, const jnode *at, int op, jv a, jv b, jv *out)
{
    if (a.kind == JV_UNDEF) return undef_err(r, at, a);
    if (b.kind == JV_UNDEF) return undef_err(r, at, b);
    static const char *const sym[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
                                      [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**"};
    if (jv_is_num(a) && jv_is_num(b)) {
        int ints = is_intlike(a) && is_intlike(b);
        int64_t x = ints ? ival(a) : 0, y = ints ? ival(b) : 0, z;
        double fx = fval(a), fy = fval(b);
        switch (op) {
        case OP_ADD:
            if (ints) {
                if (__builtin_add_overflow(x, y, &z)) goto overflow;
                return *out = jv_int(z), 0;
            }
            return *out = jv_float(fx + fy), 0;
        case OP_SUB:
            if (ints) {
                if (__builtin_sub_overflow(x, y, &z)) goto overflow;
                return *out = jv_int(z), 0;
            }
            return *out = jv_float(fx - fy), 0;
        case OP_MUL:
            if (ints) {
                if (__builtin_mul_overflow(x, y, &z)) goto overflow;
                return *out = jv_int(z), 0;
            }
            return *out = jv_float(fx * fy), 0;
        case OP_DIV:
            if (fy == 0) return jr_err(r, at, "division by zero");
            return *out = jv_float(fx / fy), 0;
        case OP_FLOORDIV:
            if (ints) {
                if (y == 0) return jr_err(r, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto overflow;
                z = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) z--;
                return *out = jv_int(z), 0;
            } else {
                double d = 0;
                if (py_floordiv_f(r, at, fx, fy, &d)) return -1;
                return *out = jv_float(d), 0;
            }
        case OP_MOD:
            if (ints) {
                if (y == 0) return jr_err(r, at, "integer division or modulo by zero");
                if (y == -1) return *out = jv_int(0), 0;
                z = x % y;
                if (z != 0 && ((z < 0) != (y < 0))) z += y;
                return *out = jv_int(z), 0;
            }
            if (fy == 0) return jr_err(r, at, "float modulo");
            return *out = jv_float(py_mod_f(fx, fy)), 0;
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1, base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) goto overflow;
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) goto overflow;
                }
                return *out = jv_int(acc), 0;
            }
            if (fx == 0 && fy < 0) return jr_err(r, at, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy))
                return jr_err(r, at, "unsupported construct: a negative number to a fractional power (complex)");
            {
                double p = pow(fx, fy);
                if (isinf(p) && !isinf(fx)) return jr_err(r, at, "numerical result out of range");
                return *out = jv_float(p), 0;
            }
        }
    }
    if (op == OP_ADD && a.kind == JV_STR && b.kind == JV_STR) {
        /* Markup + str escapes the str, and str + Markup too (Markup.__radd__) */
        int ma = a.flags & JVF_MARKUP, mb = b.flags & JVF_MARKUP;
        jbuf s = {0};
        int rc = (ma || !mb ? jb_put(&s, a.u.s->s, a.u.s->len) : jv_write_escaped(&s, a.u.s->s, a.u.s->len)) ||
                 (mb || !ma ? jb_put(&s, b.u.s->s, b.u.s->len) : jv_write_escaped(&s, b.u.s->s, b.u.s->len));
        if (s.limit == 0 && r->root->limit && s.len > r->root->limit)
            rc = tt_errorf("a string longer than the bound on output");
        rc = rc || jv_str(r->a, s.p ? s.p : "", s.len, out);
        jb_free(&s);
        if (rc) return jr_fail(r, at);
        if (ma || mb) out->flags |= JVF_MARKUP;
        return 0;
    }
    if (op == OP_ADD && a.kind == JV_LIST && b.kind == JV_LIST && !((a.flags | b.flags) & (JVF_VIEW | JVF_RANGE)) &&
        (a.flags & JVF_TUPLE) == (b.flags & JVF_TUPLE)) {
        jlist *l = jv_list_new(r->a, a.u.l->n + b.u.l->n);
        if (!l) return jr_fail(r, at);
        memcpy(l->v, a.u.l->v, a.u.l->n * sizeof(jv));
        memcpy(l->v + a.u.l->n, b.u.l->v, b.u.l->n * sizeof(jv));
        *out = (jv){JV_LIST, (uint8_t)(a.flags & JVF_TUPLE), 0, {.l = l}};
        return 0;
    }
    if (op == OP_MUL) {
        int seq_a = a.kind == JV_STR || (a.kind == JV_LIST && !(a.flags & (JVF_VIEW | JVF_RANGE)));
        int seq_b = b.kind == JV_STR || (b.kind == JV_LIST && !(b.flags & (JVF_VIEW | JVF_RANGE)));
        if (seq_a && is_intlike(b)) return repeat(r, at, a, ival(b), out);
        if (seq_b && is_intlike(a)) return repeat(r, at, b, ival(a), out);
    }
    if (op == OP_MOD && a.kind == JV_STR)
        return jr_err(r, at, "unsupported construct: printf-style string formatting (str %% value)");
    return jr_err(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], jv_type_name(a),
                  jv_type_name(b));
overflow:
    return jr_err(r, at, "an integer result beyond 64 bits (titan's renderer stops there)");
}

int jr_contains(jrender *r, const jnode *at, jv needle, jv hay, int *res)
{
    *res = 0;
    switch (hay.kind) {
    case JV_UNDEF: return 0; /* iterates empty */
    case JV_STR:
        if (needle.kind != JV_STR)
            return jr_err(r, at, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        *res = needle.u.s->len == 0 || memmem(hay.u.s->s, hay.u.s->len, needle.u.s->s, needle.u.s->len) != NULL;
        return 0;
    case JV_DICT:
        if (!jv_hashable(needle)) return jr_err(r, at, "unhashable type: '%s'", jv_type_name(needle));
        {
            jv tmp;
            *res = jv_dict_get(hay.u.d, needle, &tmp);
        }
        return 0;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.l->n && !*res; i++) *res = jv_eq(hay.u.l->v[i], needle);
        return 0;
    case JV_ITER: {
        jiter *it = hay.u.it;
        while (it->pos < it->items->n && !*res) *res = jv_eq(it->items->v[it->pos++], needle);
        return 0;
    }
    case JV_NS: return jr_err(r, at, "argument of type 'Namespace' is not iterable");
    default: return jr_err(r, at, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}


/* ---- methods by name ---------------------------------------------------------------------- */

const char *const tt_chat_method_names[] = {"str.strip", "str.lstrip", "str.rstrip", "str.split", "str.rsplit",
                                            "str.startswith", "str.endswith", "str.upper", "str.lower", "str.title",
                                            "str.capitalize", "str.replace", "str.find", "str.count", "str.join",
                                            "dict.get", "dict.items", "dict.keys", "dict.values", "loop.cycle",
                                            "loop.changed"};

static const char *const str_attrs[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format", "format_map",
    "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
    "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans", "partition",
    "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip", "split",
    "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill", NULL};
static const char *const dict_attrs[] = {"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem",
                                         "setdefault", "update", "values", NULL};
static const char *const list_attrs[] = {"append", "clear", "copy", "count", "extend", "index", "insert", "pop",
                                         "remove", "reverse", "sort", NULL};
static const char *const num_attrs[] = {"as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator",
                                        "from_bytes", "imag", "is_integer", "numerator", "real", "to_bytes", "hex",
                                        "fromhex", NULL};

static int in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s)) return 1;
    return 0;
}

int jm_lookup(jv obj, const char *name)
{
    static const struct { const char *name; int id; } str_m[] = {
        {"strip", M_STRIP}, {"lstrip", M_LSTRIP}, {"rstrip", M_RSTRIP}, {"split", M_SPLIT}, {"rsplit", M_RSPLIT},
        {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH}, {"upper", M_UPPER}, {"lower", M_LOWER},
        {"title", M_TITLE}, {"capitalize", M_CAPITALIZE}, {"replace", M_REPLACE}, {"find", M_FIND},
        {"count", M_COUNT}, {"join", M_JOIN}},
                                 dict_m[] = {{"get", M_GET}, {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}};
    switch (obj.kind) {
    case JV_STR:
        for (size_t i = 0; i < sizeof str_m / sizeof *str_m; i++)
            if (!strcmp(str_m[i].name, name)) return str_m[i].id;
        return in_list(str_attrs, name) || (obj.flags & JVF_MARKUP && (!strcmp(name, "striptags") ||
                                                                         !strcmp(name, "unescape")))
                   ? -2
                   : -1;
    case JV_DICT:
        for (size_t i = 0; i < sizeof dict_m / sizeof *dict_m; i++)
            if (!strcmp(dict_m[i].name, name)) return dict_m[i].id;
        return in_list(dict_attrs, name) ? -2 : -1;
    case JV_LIST:
        if (obj.flags & JVF_TUPLE) return !strcmp(name, "count") || !strcmp(name, "index") ? -2 : -1;
        return in_list(list_attrs, name) ? -2 : -1;
    case JV_INT:
    case JV_BOOL:
    case JV_FLOAT: return in_list(num_attrs, name) ? -2 : -1;
    case JV_LOOP:
        if (!strcmp(name, "cycle")) return M_CYCLE;
        if (!strcmp(name, "changed")) return M_CHANGED;
        return -1;
    default: return -1;
    }
}


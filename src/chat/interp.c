/* interp.c — running a chat template's tree as jinja2 does in transformers' sandbox: statements
 * (a for body, a macro, a call block and a block set are scopes; if is not; {% generation %}
 * records where its text lands), expressions (comparisons, `in`, `~`, conditionals, and/or
 * returning operands), and calls of macros, the globals (raise_exception, strftime_now,
 * namespace, range, dict) and methods. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat_internal.h"
#include "chat/chat_template.h"
#include "core/core.h"

enum { FLOW_OK = 0, FLOW_ERR = -1, FLOW_BREAK = 1, FLOW_CONTINUE = 2 };
enum { FN_RAISE, FN_STRFTIME, FN_NAMESPACE, FN_RANGE, FN_DICT, FN_LIPSUM, FN_CYCLER, FN_JOINER };

static int64_t ival(jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }
static int is_intlike(jv v) { return v.kind == JV_INT || v.kind == JV_BOOL; }

static int undef_err(jrender *r, const jnode *at, jv v)
{
    return jr_err(r, at, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
}

static int compare(jrender *r, const jnode *at, int op, jv a, jv b, int *res)
{
    int c;
    switch (op) {
    case CMP_EQ: *res = jv_eq(a, b); return 0;
    case CMP_NE: *res = !jv_eq(a, b); return 0;
    case CMP_IN: return jr_contains(r, at, a, b, res);
    case CMP_NOTIN:
        if (jr_contains(r, at, a, b, res)) return -1;
        *res = !*res;
        return 0;
    default:
        if (jv_cmp(a, b, &c)) return jr_fail(r, at);
        if ((a.kind == JV_FLOAT && isnan(a.u.f)) || (b.kind == JV_FLOAT && isnan(b.u.f))) return *res = 0, 0;
        *res = op == CMP_LT ? c < 0 : op == CMP_LE ? c <= 0 : op == CMP_GT ? c > 0 : c >= 0;
        return 0;
    }
}

/* ---- calls -------------------------------------------------------------------------------------- */

static int call_macro(jrender *r, const jnode *at, const jmacro_val *m, const jv *args, int nargs,
                      const char **kwnames, const jv *kwvals, int nkw, jv *out)
{
    const jnode *d = m->def;
    const char *mname = d->type == S_MACRO ? d->name : "caller";
    if (r->depth > 100) return jr_err(r, at, "macro calls nested more than 100 deep");
    jframe *f = jr_frame_new(r, m->scope);
    if (!f) return jr_fail(r, at);
    int np = d->args.n, ndef = d->kwvals.n;
    int given[256] = {0};
    if (np > 256) return jr_err(r, at, "a macro with more than 256 parameters");
    jv caller = m->caller;
    int n_extra_kw = 0;
    jdict *kw = NULL;
    if (d->uses_kwargs && !(kw = jv_dict_new(r->a, (size_t)nkw))) return jr_fail(r, at);
    for (int i = 0; i < nargs && i < np; i++) {
        if (jr_frame_set(r, f, d->args.v[i]->name, args[i])) return jr_fail(r, at);
        given[i] = 1;
    }
    if (nargs > np && !d->uses_varargs)
        return jr_err(r, at, "macro '%s' takes not more than %d argument(s)", mname, np);
    for (int k = 0; k < nkw; k++) {
        int hit = -1;
        for (int i = 0; i < np; i++)
            if (!strcmp(d->args.v[i]->name, kwnames[k])) hit = i;
        if (hit >= 0) {
            if (given[hit]) return jr_err(r, at, "macro '%s' got multiple values for argument '%s'", mname, kwnames[k]);
            given[hit] = 1;
            if (jr_frame_set(r, f, kwnames[k], kwvals[k])) return jr_fail(r, at);
        } else if (!strcmp(kwnames[k], "caller") && d->uses_caller && d->type == S_MACRO) {
            caller = kwvals[k];
        } else if (kw) {
            jv key;
            if (jv_cstr(r->a, kwnames[k], &key)) return jr_fail(r, at);
            jv_dict_set(kw, key, kwvals[k]);
            n_extra_kw++;
        } else {
            return jr_err(r, at, "macro '%s' takes no keyword argument '%s'", mname, kwnames[k]);
        }
    }
    r->depth++;
    for (int i = 0; i < np; i++) {
        if (given[i]) continue;
        int di = i - (np - ndef);
        jv v = jv_undef(d->args.v[i]->name);
        if (di >= 0 && jr_eval(r, f, d->kwvals.v[di], &v)) return r->depth--, -1;
        if (jr_frame_set(r, f, d->args.v[i]->name, v)) return r->depth--, jr_fail(r, at);
    }
    if (d->uses_varargs) {
        jv va;
        if (jv_list(r->a, nargs > np ? args + np : NULL, nargs > np ? (size_t)(nargs - np) : 0, 1, &va) ||
            jr_frame_set(r, f, "varargs", va))
            return r->depth--, jr_fail(r, at);
    }
    if (kw && jr_frame_set(r, f, "kwargs", (jv){JV_DICT, 0, 0, {.d = kw}})) return r->depth--, jr_fail(r, at);
    if (d->uses_caller && d->type == S_MACRO && jr_frame_set(r, f, "caller", caller)) return r->depth--, jr_fail(r, at);
    int rc = jr_capture(r, f, &d->body, out);
    r->depth--;
    return rc;
}

static int kwarg(const char **kwnames, const jv *kwvals, int nkw, const char *name, jv *out)
{
    for (int k = 0; k < nkw; k++)
        if (!strcmp(kwnames[k], name)) return *out = kwvals[k], 1;
    return 0;
}

static int call_func(jrender *r, const jnode *at, int id, const jv *args, int nargs, const char **kwnames,
                     const jv *kwvals, int nkw, jv *out)
{
    switch (id) {
    case FN_RAISE: {
        jv msg = nargs ? args[0] : jv_undef(NULL);
        if (nargs != 1 || nkw) kwarg(kwnames, kwvals, nkw, "message", &msg);
        jbuf b = {0};
        if (jv_write_str(&b, msg)) return jb_free(&b), jr_fail(r, at);
        r->errored = 1, r->raised = 1;
        tt_errorf("%s", b.p ? b.p : "");
        jb_free(&b);
        return -1;
    }
    case FN_STRFTIME: {
        jv fmt = nargs ? args[0] : jv_undef(NULL);
        if (fmt.kind != JV_STR) return jr_err(r, at, "strftime_now() argument must be str, not %s", jv_type_name(fmt));
        if (strstr(fmt.u.s->s, "%f") || strstr(fmt.u.s->s, "%z") || strstr(fmt.u.s->s, "%Z"))
            return jr_err(r, at, "unsupported construct: %%f, %%z or %%Z in strftime_now's format");
        time_t now = r->now > 0 ? (time_t)r->now : time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[1024];
        size_t n = fmt.u.s->len ? strftime(buf, sizeof buf, fmt.u.s->s, &tm) : 0;
        if (n == 0 && fmt.u.s->len) return jr_err(r, at, "strftime_now: the formatted time is empty or too long");
        return jv_str(r->a, buf, n, out) ? jr_fail(r, at) : 0;
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        size_t cap = (size_t)nkw;
        jv src = jv_none();
        if (nargs > 1) return jr_err(r, at, "%s expected at most 1 argument, got %d", id == FN_DICT ? "dict" : "namespace", nargs);
        if (nargs == 1) {
            src = args[0];
            if (src.kind != JV_DICT) return jr_err(r, at, "unsupported construct: %s() of a %s",
                                                   id == FN_DICT ? "dict" : "namespace", jv_type_name(src));
            cap += src.u.d->n;
        }
        jdict *d = jv_dict_new(r->a, cap);
        if (!d) return jr_fail(r, at);
        if (src.kind == JV_DICT)
            for (size_t i = 0; i < src.u.d->n; i++) jv_dict_set(d, src.u.d->keys[i], src.u.d->vals[i]);
        for (int k = 0; k < nkw; k++) {
            jv key;
            if (jv_cstr(r->a, kwnames[k], &key)) return jr_fail(r, at);
            jv_dict_set(d, key, kwvals[k]);
        }
        if (id == FN_DICT) return *out = (jv){JV_DICT, 0, 0, {.d = d}}, 0;
        jns *ns = ja_alloc(r->a, sizeof *ns);
        if (!ns) return jr_fail(r, at);
        for (size_t i = 0; i < d->n; i++) {
            if (d->keys[i].kind != JV_STR) return jr_err(r, at, "unsupported construct: a namespace key that is not a str");
            if (d->keys[i].u.s->s[0] == '_')
                return jr_err(r, at, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                              d->keys[i].u.s->s);
        }
        ns->n = ns->cap = d->n, ns->keys = d->keys, ns->vals = d->vals;
        *out = (jv){JV_NS, 0, 0, {.ns = ns}};
        return 0;
    }
    case FN_RANGE: {
        int64_t a[3] = {0, 0, 1};
        if (nkw || nargs < 1 || nargs > 3) return jr_err(r, at, "range expected 1 to 3 integer arguments");
        for (int i = 0; i < nargs; i++) {
            if (!is_intlike(args[i]))
                return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(args[i]));
        }
        if (nargs == 1) a[1] = ival(args[0]);
        else {
            a[0] = ival(args[0]), a[1] = ival(args[1]);
            if (nargs == 3) a[2] = ival(args[2]);
        }
        if (a[2] == 0) return jr_err(r, at, "range() arg 3 must not be zero");
        double cnt = a[2] > 0 ? ceil(((double)a[1] - (double)a[0]) / (double)a[2])
                              : ceil(((double)a[0] - (double)a[1]) / (double)-a[2]);
        if (cnt < 0) cnt = 0;
        if (cnt > 100000) return jr_err(r, at, "range too big, the sandbox allows %d items at most", 100000);
        jlist *l = jv_list_new(r->a, (size_t)cnt);
        if (!l) return jr_fail(r, at);
        for (size_t i = 0; i < l->n; i++) l->v[i] = jv_int(a[0] + (int64_t)i * a[2]);
        *out = (jv){JV_LIST, JVF_RANGE, 0, {.l = l}};
        return 0;
    }
    default: return jr_err(r, at, "unsupported construct: the global %s()", id == FN_LIPSUM ? "lipsum" : id == FN_CYCLER ? "cycler" : "joiner");
    }
}

int jr_call(jrender *r, const jnode *at, jv fn, const jv *args, int nargs, const char **kwnames, const jv *kwvals,
            int nkw, jv *out)
{
    switch (fn.kind) {
    case JV_MACRO: return call_macro(r, at, fn.u.m, args, nargs, kwnames, kwvals, nkw, out);
    case JV_FUNC: return call_func(r, at, fn.id, args, nargs, kwnames, kwvals, nkw, out);
    case JV_METHOD: return jm_call(r, at, fn.u.meth, args, nargs, kwnames, kwvals, nkw, out);
    case JV_UNDEF: return undef_err(r, at, fn);
    default: return jr_err(r, at, "'%s' object is not callable", jv_type_name(fn));
    }
}

/* the globals a name falls back to */
static int global(const char *name, jv *out)
{
    static const char *const names[] = {"raise_exception", "strftime_now", "namespace", "range", "dict",
                                        "lipsum", "cycler", "joiner", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(name, names[i])) return *out = (jv){JV_FUNC, 0, (uint16_t)i, {.i = 0}}, 1;
    return 0;
}

/* ---- expressions -------------------------------------------------------------------------------- */

static int eval_args(jrender *r, jframe *f, const jnode *n, jv **args, jv **kw)
{
    *args = n->args.n ? ja_alloc(r->a, (size_t)n->args.n * sizeof(jv)) : NULL;
    *kw = n->kwvals.n ? ja_alloc(r->a, (size_t)n->kwvals.n * sizeof(jv)) : NULL;
    if ((n->args.n && !*args) || (n->kwvals.n && !*kw)) return jr_fail(r, n);
    for (int i = 0; i < n->args.n; i++)
        if (jr_eval(r, f, n->args.v[i], &(*args)[i])) return -1;
    for (int i = 0; i < n->kwvals.n; i++)
        if (jr_eval(r, f, n->kwvals.v[i], &(*kw)[i])) return -1;
    return 0;
}

int jr_eval(jrender *r, jframe *f, const jnode *n, jv *out)
{
    if (jr_step(r, n)) return -1;
    jv a, b;
    switch (n->type) {
    case E_CONST: *out = n->value; return 0;
    case E_NAME: {
        jv *v = jr_frame_find(f, n->name);
        if (v) *out = *v;
        else if (!global(n->name, out)) *out = jv_undef(n->name);
        return 0;
    }
    case E_ATTR: return jr_eval(r, f, n->a, &a) || jr_getattr(r, n, a, n->name, out) ? -1 : 0;
    case E_ITEM:
        if (jr_eval(r, f, n->a, &a)) return -1;
        if (n->b->type == E_SLICE) {
            jv parts[3] = {jv_none(), jv_none(), jv_none()};
            const jnode *pn[3] = {n->b->a, n->b->b, n->b->c};
            for (int k = 0; k < 3; k++)
                if (pn[k] && jr_eval(r, f, pn[k], &parts[k])) return -1;
            return jr_slice(r, n, a, parts, out);
        }
        return jr_eval(r, f, n->b, &b) || jr_getitem(r, n, a, b, out) ? -1 : 0;
    case E_CALL: {
        jv *args, *kw;
        if (jr_eval(r, f, n->a, &a) || eval_args(r, f, n, &args, &kw)) return -1;
        return jr_call(r, n, a, args, n->args.n, n->kwnames, kw, n->kwvals.n, out);
    }
    case E_FILTER: {
        jv *args, *kw;
        if (jr_eval(r, f, n->a, &a) || eval_args(r, f, n, &args, &kw)) return -1;
        return jr_filter(r, n, n->op, a, args, n->args.n, n->kwnames, kw, n->kwvals.n, out);
    }
    case E_TEST: {
        jv *args, *kw;
        if (jr_eval(r, f, n->a, &a) || eval_args(r, f, n, &args, &kw)) return -1;
        if (n->kwvals.n) return jr_err(r, n, "unsupported construct: keyword arguments to a test");
        return jr_test(r, n, n->op, a, args, n->args.n, out);
    }
    case E_NOT:
        if (jr_eval(r, f, n->a, &a)) return -1;
        *out = jv_bool(!jv_truthy(a));
        return 0;
    case E_NEG:
    case E_POS:
        if (jr_eval(r, f, n->a, &a)) return -1;
        if (a.kind == JV_UNDEF) return undef_err(r, n, a);
        if (!jv_is_num(a)) return jr_err(r, n, "bad operand type for unary %c: '%s'", n->type == E_NEG ? '-' : '+', jv_type_name(a));
        if (a.kind == JV_FLOAT) *out = jv_float(n->type == E_NEG ? -a.u.f : a.u.f);
        else if (n->type == E_NEG && ival(a) == INT64_MIN) return jr_err(r, n, "an integer beyond 64 bits");
        else *out = jv_int(n->type == E_NEG ? -ival(a) : ival(a));
        return 0;
    case E_BIN: return jr_eval(r, f, n->a, &a) || jr_eval(r, f, n->b, &b) || jr_binop(r, n, n->op, a, b, out) ? -1 : 0;
    case E_AND:
    case E_OR:
        if (jr_eval(r, f, n->a, &a)) return -1;
        if (jv_truthy(a) == (n->type == E_OR)) return *out = a, 0;
        return jr_eval(r, f, n->b, out);
    case E_COMPARE: {
        if (jr_eval(r, f, n->a, &a)) return -1;
        for (int i = 0; i < n->args.n; i++) {
            const jnode *o = n->args.v[i];
            int res;
            if (jr_eval(r, f, o->a, &b) || compare(r, o, o->op, a, b, &res)) return -1;
            if (!res) return *out = jv_bool(0), 0;
            a = b;
        }
        *out = jv_bool(1);
        return 0;
    }
    case E_COND:
        if (jr_eval(r, f, n->a, &a)) return -1;
        if (jv_truthy(a)) return jr_eval(r, f, n->b, out);
        if (n->c) return jr_eval(r, f, n->c, out);
        *out = jv_undef("the inline if-expression evaluated to false and no else section was defined");
        return 0;
    case E_CONCAT: {
        jbuf s = {0};
        for (int i = 0; i < n->args.n; i++)
            if (jr_eval(r, f, n->args.v[i], &a) || (jv_write_str(&s, a) && jr_fail(r, n->args.v[i]))) return jb_free(&s), -1;
        int rc = jv_str(r->a, s.p ? s.p : "", s.len, out);
        jb_free(&s);
        return rc ? jr_fail(r, n) : 0;
    }
    case E_LIST:
    case E_TUPLE: {
        jlist *l = jv_list_new(r->a, (size_t)n->args.n);
        if (!l) return jr_fail(r, n);
        for (int i = 0; i < n->args.n; i++)
            if (jr_eval(r, f, n->args.v[i], &l->v[i])) return -1;
        *out = (jv){JV_LIST, (uint8_t)(n->type == E_TUPLE ? JVF_TUPLE : 0), 0, {.l = l}};
        return 0;
    }
    case E_DICT: {
        jdict *d = jv_dict_new(r->a, (size_t)n->args.n);
        if (!d) return jr_fail(r, n);
        for (int i = 0; i < n->args.n; i++) {
            if (jr_eval(r, f, n->args.v[i], &a) || jr_eval(r, f, n->kwvals.v[i], &b)) return -1;
            if (!jv_hashable(a)) return jr_err(r, n->args.v[i], "unhashable type: '%s'", jv_type_name(a));
            jv_dict_set(d, a, b);
        }
        *out = (jv){JV_DICT, 0, 0, {.d = d}};
        return 0;
    }
    default: return jr_err(r, n, "internal error: a statement where an expression belongs");
    }
}

/* ---- statements --------------------------------------------------------------------------------- */

static int assign(jrender *r, jframe *f, const jnode *t, jv v)
{
    if (t->type == E_NAME) return jr_frame_set(r, f, t->name, v) ? jr_fail(r, t) : 0;
    if (t->type == E_TUPLE) {
        const jlist *items;
        if (v.kind == JV_UNDEF) return jr_err(r, t, "'%s' is undefined", v.u.uname ? v.u.uname : "value");
        if (jr_items(r, t, v, &items)) return -1;
        if (items->n < (size_t)t->args.n)
            return jr_err(r, t, "not enough values to unpack (expected %d, got %zu)", t->args.n, items->n);
        if (items->n > (size_t)t->args.n) return jr_err(r, t, "too many values to unpack (expected %d)", t->args.n);
        for (int i = 0; i < t->args.n; i++)
            if (assign(r, f, t->args.v[i], items->v[i])) return -1;
        return 0;
    }
    /* ns.attr */
    jv *ns = jr_frame_find(f, t->a->name);
    if (!ns || ns->kind != JV_NS) return jr_err(r, t, "cannot assign attribute on non-namespace object");
    if (t->name[0] == '_')
        return jr_err(r, t, "chat templates cannot store underscore-prefixed attributes on a namespace, but got '%s'",
                      t->name);
    jns *n = ns->u.ns;
    for (size_t i = 0; i < n->n; i++)
        if (!strcmp(n->keys[i].u.s->s, t->name)) return n->vals[i] = v, 0;
    if (n->n == n->cap) {
        size_t c = n->cap ? n->cap * 2 : 4;
        jv *k = ja_alloc(r->a, c * sizeof *k), *vv = ja_alloc(r->a, c * sizeof *vv);
        if (!k || !vv) return jr_fail(r, t);
        if (n->n) memcpy(k, n->keys, n->n * sizeof *k), memcpy(vv, n->vals, n->n * sizeof *vv);
        n->keys = k, n->vals = vv, n->cap = c;
    }
    if (jv_cstr(r->a, t->name, &n->keys[n->n])) return jr_fail(r, t);
    n->vals[n->n++] = v;
    return 0;
}

int jr_capture(jrender *r, jframe *f, const jnodes *body, jv *out)
{
    jbuf b = {0}, *saved = r->out;
    b.limit = r->root->limit;
    r->out = &b;
    int rc = jr_exec(r, f, body);
    r->out = saved;
    if (rc == FLOW_OK && jv_str(r->a, b.p ? b.p : "", b.len, out)) rc = jr_fail(r, NULL);
    jb_free(&b);
    return rc;
}

static int exec_for(jrender *r, jframe *f, const jnode *n)
{
    jv seq;
    const jlist *items;
    if (jr_eval(r, f, n->b, &seq) || jr_items(r, n->b, seq, &items)) return -1;
    if (n->c) { /* for x in seq if cond: the loop sees only the items that pass */
        jlist *kept = jv_list_new(r->a, items->n);
        if (!kept) return jr_fail(r, n);
        size_t k = 0;
        for (size_t i = 0; i < items->n; i++) {
            jframe *ff = jr_frame_new(r, f);
            jv ok;
            if (!ff) return jr_fail(r, n);
            if (assign(r, ff, n->a, items->v[i]) || jr_eval(r, ff, n->c, &ok)) return -1;
            if (jv_truthy(ok)) kept->v[k++] = items->v[i];
        }
        kept->n = k;
        items = kept;
    }
    jloop *L = ja_alloc(r->a, sizeof *L);
    if (!L) return jr_fail(r, n);
    L->items = items;
    int completed = 0; /* jinja2 runs the else block unless some iteration reached the body's end */
    for (size_t i = 0; i < items->n; i++) {
        jframe *lf = jr_frame_new(r, f);
        if (!lf || jr_step(r, n)) return lf ? -1 : jr_fail(r, n);
        L->index0 = i;
        if (jr_frame_set(r, lf, "loop", (jv){JV_LOOP, 0, 0, {.loop = L}})) return jr_fail(r, n);
        if (assign(r, lf, n->a, items->v[i])) return -1;
        int rc = jr_exec(r, lf, &n->body);
        if (rc == FLOW_ERR) return -1;
        if (rc == FLOW_BREAK) break;
        if (rc == FLOW_OK) completed = 1;
    }
    if (!completed && n->orelse.n) {
        jframe *ef = jr_frame_new(r, f);
        if (!ef) return jr_fail(r, n);
        return jr_exec(r, ef, &n->orelse);
    }
    return 0;
}

static int write_value(jrender *r, const jnode *n, jv v)
{
    if (v.kind == JV_ITER || (v.kind == JV_LIST && (v.flags & (JVF_VIEW | JVF_RANGE))))
        return jr_err(r, n, "unsupported construct: printing a %s object", v.kind == JV_ITER ? v.u.it->tname
                                                                                           : jv_type_name(v));
    return jv_write_str(r->out, v) ? jr_fail(r, n) : 0;
}

static int exec_stmt(jrender *r, jframe *f, const jnode *n)
{
    jv v;
    switch (n->type) {
    case S_DATA: return jb_put(r->out, n->value.u.s->s, n->value.u.s->len) ? jr_fail(r, n) : 0;
    case S_PRINT: return jr_eval(r, f, n->a, &v) || write_value(r, n, v) ? -1 : 0;
    case S_IF:
        if (jr_eval(r, f, n->a, &v)) return -1;
        return jr_exec(r, f, jv_truthy(v) ? &n->body : &n->orelse);
    case S_FOR: return exec_for(r, f, n);
    case S_SET: return jr_eval(r, f, n->b, &v) || assign(r, f, n->a, v) ? -1 : 0;
    case S_SETBLOCK: {
        jframe *bf = jr_frame_new(r, f);
        if (!bf) return jr_fail(r, n);
        int rc = jr_capture(r, bf, &n->body, &v);
        if (rc) return rc;
        /* the filters, innermost first: the chain is nested with the body's text at the bottom */
        const jnode *chain[64];
        int k = 0;
        for (const jnode *fl = n->b; fl && k < 64; fl = fl->a) chain[k++] = fl;
        while (k-- > 0) {
            const jnode *fl = chain[k];
            jv *args = fl->args.n ? ja_alloc(r->a, (size_t)fl->args.n * sizeof(jv)) : NULL;
            jv *kw = fl->kwvals.n ? ja_alloc(r->a, (size_t)fl->kwvals.n * sizeof(jv)) : NULL;
            for (int i = 0; i < fl->args.n; i++)
                if (!args || jr_eval(r, f, fl->args.v[i], &args[i])) return args ? -1 : jr_fail(r, fl);
            for (int i = 0; i < fl->kwvals.n; i++)
                if (!kw || jr_eval(r, f, fl->kwvals.v[i], &kw[i])) return kw ? -1 : jr_fail(r, fl);
            if (jr_filter(r, fl, fl->op, v, args, fl->args.n, fl->kwnames, kw, fl->kwvals.n, &v)) return -1;
        }
        return assign(r, f, n->a, v);
    }
    case S_MACRO: {
        jmacro_val *m = ja_alloc(r->a, sizeof *m);
        if (!m) return jr_fail(r, n);
        m->def = n, m->scope = f, m->caller = jv_undef("caller");
        return jr_frame_set(r, f, n->name, (jv){JV_MACRO, 0, 0, {.m = m}}) ? jr_fail(r, n) : 0;
    }
    case S_CALLBLOCK: {
        const jnode *call = n->a;
        jmacro_val *c = ja_alloc(r->a, sizeof *c);
        jv fn;
        if (!c) return jr_fail(r, n);
        c->def = n, c->scope = f, c->caller = jv_undef("caller");
        if (jr_eval(r, f, call->a, &fn)) return -1;
        int na = call->args.n, nk = call->kwvals.n;
        jv *args = ja_alloc(r->a, (size_t)(na + 1) * sizeof(jv)), *kw = ja_alloc(r->a, (size_t)(nk + 1) * sizeof(jv));
        const char **kn = ja_alloc(r->a, (size_t)(nk + 1) * sizeof(char *));
        if (!args || !kw || !kn) return jr_fail(r, n);
        for (int i = 0; i < na; i++)
            if (jr_eval(r, f, call->args.v[i], &args[i])) return -1;
        for (int i = 0; i < nk; i++) {
            if (jr_eval(r, f, call->kwvals.v[i], &kw[i])) return -1;
            kn[i] = call->kwnames[i];
        }
        kn[nk] = "caller", kw[nk] = (jv){JV_MACRO, 0, 0, {.m = c}};
        if (fn.kind != JV_MACRO) return jr_err(r, n, "unsupported construct: a call block around a %s", jv_type_name(fn));
        return jr_call(r, n, fn, args, na, kn, kw, nk + 1, &v) || write_value(r, n, v) ? -1 : 0;
    }
    case S_BREAK: return FLOW_BREAK;
    case S_CONTINUE: return FLOW_CONTINUE;
    case S_GEN: {
        jframe *gf = jr_frame_new(r, f);
        if (!gf) return jr_fail(r, n);
        int rc = jr_capture(r, gf, &n->body, &v);
        if (rc) return rc;
        size_t start = r->root->len;
        if (jb_put(r->out, v.u.s->s, v.u.s->len)) return jr_fail(r, n);
        if (r->gen) {
            tt_chat_spans *g = r->gen;
            if (g->n == g->cap) {
                int c = g->cap ? g->cap * 2 : 8;
                size_t *s = realloc(g->start, (size_t)c * sizeof *s), *e = s ? realloc(g->end, (size_t)c * sizeof *e) : NULL;
                if (s) g->start = s;
                if (e) g->end = e;
                if (!s || !e) return jr_err(r, n, "out of memory");
                g->cap = c;
            }
            g->start[g->n] = start, g->end[g->n++] = start + v.u.s->len;
        }
        return 0;
    }
    default: return jr_err(r, n, "internal error: an expression where a statement belongs");
    }
}

int jr_exec(jrender *r, jframe *f, const jnodes *body)
{
    for (int i = 0; i < body->n; i++) {
        if (jr_step(r, body->v[i])) return -1;
        int rc = exec_stmt(r, f, body->v[i]);
        if (rc) return rc;
    }
    return 0;
}

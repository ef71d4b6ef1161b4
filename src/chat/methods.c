/* methods.c — calling the Python methods chat templates use: str's (strip, split, replace, find,
 * join, the case changes), dict's (get, items, keys, values) and the loop's (cycle, changed), with
 * their arguments checked as Python checks them. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat/chat_internal.h"
#include "core/core.h"

unsigned long tt_chat_method_hits[M_N];
int tt_chat_n_methods(void) { return M_N; }

int js_join(jrender *r, const jnode *at, jv sep, jv items, jv *out)
{
    const jlist *l;
    if (jr_items(r, at, items, &l)) return -1;
    jbuf b = {0};
    int markup = sep.flags & JVF_MARKUP;
    for (size_t i = 0; i < l->n; i++) {
        jv it = l->v[i];
        if (it.kind != JV_STR) {
            jb_free(&b);
            return jr_err(r, at, "sequence item %zu: expected str instance, %s found", i, jv_type_name(it));
        }
        int rc = (i && jb_put(&b, sep.u.s->s, sep.u.s->len)) ||
                 (markup && !(it.flags & JVF_MARKUP) ? jv_write_escaped(&b, it.u.s->s, it.u.s->len)
                                                     : jb_put(&b, it.u.s->s, it.u.s->len));
        if (rc) return jb_free(&b), jr_fail(r, at);
    }
    int rc = js_new(r->a, b.p ? b.p : "", b.len, sep, out);
    jb_free(&b);
    return rc ? jr_fail(r, at) : 0;
}

/* str.find / str.count over [start, end) in code points */
static int find_count(jrender *r, const jnode *at, jv s, const jv *args, int nargs, int count, jv *out)
{
    if (nargs < 1 || nargs > 3) return jr_err(r, at, "%s() takes 1 to 3 arguments", count ? "count" : "find");
    if (args[0].kind != JV_STR) return jr_err(r, at, "must be str, not %s", jv_type_name(args[0]));
    const jstr *S = s.u.s, *sub = args[0].u.s;
    int64_t n = (int64_t)u8_count(S->s, S->len), lim[2] = {0, n};
    for (int k = 1; k < nargs; k++) {
        jv v = args[k];
        if (v.kind == JV_NONE) continue;
        if (v.kind != JV_INT && v.kind != JV_BOOL)
            return jr_err(r, at, "slice indices must be integers or None");
        int64_t x = v.kind == JV_INT ? v.u.i : v.u.b;
        if (x < 0) x = x + n < 0 ? 0 : x + n;
        if (x > n) x = n;
        lim[k - 1] = x;
    }
    int64_t st = lim[0], en = lim[1];
    size_t bs = u8_offset(S->s, S->len, (size_t)st), be = st <= en ? u8_offset(S->s, S->len, (size_t)en) : bs;
    if (count) {
        int64_t c = 0;
        if (st > en) return *out = jv_int(0), 0;
        if (sub->len == 0) return *out = jv_int(en - st + 1), 0;
        for (size_t i = bs; i + sub->len <= be;) {
            const char *hit = memmem(S->s + i, be - i, sub->s, sub->len);
            if (!hit) break;
            c++, i = (size_t)(hit - S->s) + sub->len;
        }
        return *out = jv_int(c), 0;
    }
    if (st > en || (sub->len == 0 && st > n)) return *out = jv_int(-1), 0;
    const char *hit = sub->len == 0 ? S->s + bs : memmem(S->s + bs, be - bs, sub->s, sub->len);
    *out = jv_int(hit ? (int64_t)u8_count(S->s, (size_t)(hit - S->s)) : -1);
    return 0;
}

static int affix(jrender *r, const jnode *at, jv s, const jv *args, int nargs, int end, jv *out)
{
    if (nargs != 1) return jr_err(r, at, "unsupported construct: %s with start or end", end ? "endswith" : "startswith");
    jv p = args[0];
    const jlist *opts = NULL;
    jlist one = {0};
    if (p.kind == JV_LIST && (p.flags & JVF_TUPLE)) opts = p.u.l;
    else if (p.kind != JV_STR)
        return jr_err(r, at, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
                      jv_type_name(p));
    size_t cnt = opts ? opts->n : 1;
    (void)one;
    for (size_t i = 0; i < cnt; i++) {
        jv q = opts ? opts->v[i] : p;
        if (q.kind != JV_STR) return jr_err(r, at, "a tuple for %s must only contain str", end ? "endswith" : "startswith");
        size_t k = q.u.s->len, n = s.u.s->len;
        if (k <= n && memcmp(s.u.s->s + (end ? n - k : 0), q.u.s->s, k) == 0) return *out = jv_bool(1), 0;
    }
    return *out = jv_bool(0), 0;
}

static int view(jrender *r, const jnode *at, const jdict *d, int which, jv *out)
{
    jlist *l = jv_list_new(r->a, d->n);
    if (!l) return jr_fail(r, at);
    for (size_t i = 0; i < d->n; i++) {
        if (which == 2) l->v[i] = d->keys[i];
        else if (which == 3) l->v[i] = d->vals[i];
        else {
            jv kv[2] = {d->keys[i], d->vals[i]};
            if (jv_list(r->a, kv, 2, 1, &l->v[i])) return jr_fail(r, at);
        }
    }
    *out = (jv){JV_LIST, JVF_VIEW, (uint16_t)which, {.l = l}};
    return 0;
}

int jm_call(jrender *r, const jnode *at, const jmethod *m, const jv *args, int nargs, const char **kwnames,
            const jv *kwvals, int nkw, jv *out)
{
    jv s = m->self;
    int id = m->id;
    tt_chat_method_hits[id]++;
    if (nkw && !(id == M_SPLIT || id == M_RSPLIT))
        return jr_err(r, at, "unsupported construct: keyword arguments to %s()", tt_chat_method_names[id]);
    jv sep = jv_none(), maxs = jv_int(-1);
    switch (id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP:
        if (nargs > 1) return jr_err(r, at, "%s() takes at most 1 argument", tt_chat_method_names[id] + 4);
        return js_strip(r->a, s, nargs ? &args[0] : NULL, id != M_RSTRIP, id != M_LSTRIP, out) ? jr_fail(r, at) : 0;
    case M_SPLIT:
    case M_RSPLIT:
        if (nargs > 2) return jr_err(r, at, "split() takes at most 2 arguments");
        if (nargs > 0) sep = args[0];
        if (nargs > 1) maxs = args[1];
        for (int k = 0; k < nkw; k++) {
            if (!strcmp(kwnames[k], "sep")) sep = kwvals[k];
            else if (!strcmp(kwnames[k], "maxsplit")) maxs = kwvals[k];
            else return jr_err(r, at, "split() got an unexpected keyword argument '%s'", kwnames[k]);
        }
        if (maxs.kind != JV_INT && maxs.kind != JV_BOOL)
            return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(maxs));
        return js_split(r->a, s, &sep, maxs.kind == JV_INT ? maxs.u.i : maxs.u.b, id == M_RSPLIT, out) ? jr_fail(r, at) : 0;
    case M_STARTSWITH:
    case M_ENDSWITH: return affix(r, at, s, args, nargs, id == M_ENDSWITH, out);
    case M_UPPER:
    case M_LOWER:
    case M_TITLE:
    case M_CAPITALIZE:
        if (nargs) return jr_err(r, at, "%s() takes no arguments", tt_chat_method_names[id] + 4);
        return js_case(r->a, s, id == M_UPPER ? CASE_UPPER : id == M_LOWER ? CASE_LOWER : id == M_TITLE ? CASE_TITLE_METHOD : CASE_CAPITALIZE, out)
                   ? jr_fail(r, at)
                   : 0;
    case M_REPLACE:
        if (nargs < 2 || nargs > 3) return jr_err(r, at, "replace() takes 2 or 3 arguments");
        if (args[0].kind != JV_STR || args[1].kind != JV_STR)
            return jr_err(r, at, "replace() arguments must be str, not %s", jv_type_name(args[args[0].kind == JV_STR]));
        if (nargs == 3 && args[2].kind != JV_INT && args[2].kind != JV_BOOL)
            return jr_err(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(args[2]));
        return js_replace(r->a, s, args[0], args[1], nargs == 3 ? (args[2].kind == JV_INT ? args[2].u.i : args[2].u.b) : -1, out)
                   ? jr_fail(r, at)
                   : 0;
    case M_FIND: return find_count(r, at, s, args, nargs, 0, out);
    case M_COUNT: return find_count(r, at, s, args, nargs, 1, out);
    case M_JOIN:
        if (nargs != 1) return jr_err(r, at, "join() takes exactly one argument");
        return js_join(r, at, s, args[0], out);
    case M_GET:
        if (nargs < 1 || nargs > 2) return jr_err(r, at, "get expected 1 or 2 arguments, got %d", nargs);
        if (!jv_hashable(args[0])) return jr_err(r, at, "unhashable type: '%s'", jv_type_name(args[0]));
        if (!jv_dict_get(s.u.d, args[0], out)) *out = nargs == 2 ? args[1] : jv_none();
        return 0;
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES:
        if (nargs) return jr_err(r, at, "%s() takes no arguments", tt_chat_method_names[id] + 5);
        return view(r, at, s.u.d, id == M_ITEMS ? 1 : id == M_KEYS ? 2 : 3, out);
    case M_CYCLE:
        if (!nargs) return jr_err(r, at, "no items for cycling given");
        *out = args[s.u.loop->index0 % (size_t)nargs];
        return 0;
    case M_CHANGED: {
        jloop *L = s.u.loop;
        jv tup;
        if (jv_list(r->a, args, (size_t)nargs, 1, &tup)) return jr_fail(r, at);
        int changed = !L->changed_set || !jv_eq(L->last_changed, tup);
        if (changed) L->last_changed = tup, L->changed_set = 1;
        *out = jv_bool(changed);
        return 0;
    }
    }
    return jr_err(r, at, "internal error: method %d", id);
}

/* parser.c — tokens to the syntax tree, following jinja2's parser (the same precedence, the same
 * quirks: filters bind tighter than arithmetic, ** is left-associative, -x|f is f(-x)). Statements
 * and names outside titan's subset are refused here with their line and column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"
#include "core/core.h"

typedef struct {
    const jtoken *t;
    size_t n, pos;
    tt_chat_template *tpl;
    jarena *a;
    int depth;      /* expression nesting, bounded */
    int loop_depth; /* for loops around (break/continue), reset inside macros */
    jnode *macro;   /* the macro being parsed, to note caller/varargs/kwargs */
} parser;

static const jtoken *cur(parser *p) { return &p->t[p->pos]; }
static const jtoken *look(parser *p) { return &p->t[p->pos + 1 < p->n ? p->pos + 1 : p->pos]; }
static const jtoken *next(parser *p)
{
    const jtoken *t = cur(p);
    if (p->pos + 1 < p->n) p->pos++;
    return t;
}

static const char *tok_desc(const jtoken *t, char *buf, size_t cap)
{
    static const char *const ops[OP_COUNT] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                              "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "begin of print statement";
    case TK_VAR_END: return "end of print statement";
    case TK_BLOCK_BEGIN: return "begin of statement block";
    case TK_BLOCK_END: return "end of statement block";
    case TK_NAME: snprintf(buf, cap, "'%.60s'", t->s); return buf;
    case TK_STRING: return "a string";
    case TK_INT: return "an integer";
    case TK_FLOAT: return "a float";
    case TK_OP: snprintf(buf, cap, "'%s'", ops[t->op]); return buf;
    }
    return "?";
}

static int perr(parser *p, const jtoken *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(parser *p, const jtoken *t, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tt_errorf("%s:%d:%d: %s", p->tpl->name, t->line, t->col, msg);
}

static int is_op(parser *p, int op) { return cur(p)->type == TK_OP && cur(p)->op == op; }
static int is_name(parser *p, const char *s) { return cur(p)->type == TK_NAME && strcmp(cur(p)->s, s) == 0; }
static int skip_op(parser *p, int op) { return is_op(p, op) ? (next(p), 1) : 0; }
static int skip_name(parser *p, const char *s) { return is_name(p, s) ? (next(p), 1) : 0; }

static int expect_op(parser *p, int op, const char *what)
{
    if (skip_op(p, op)) return 0;
    char b[80];
    return perr(p, cur(p), "expected '%s', got %s", what, tok_desc(cur(p), b, sizeof b));
}

static int expect_type(parser *p, tk_type type, const char *what)
{
    if (cur(p)->type == type) return next(p), 0;
    char b[80];
    return perr(p, cur(p), "expected %s, got %s", what, tok_desc(cur(p), b, sizeof b));
}

static jnode *mk(parser *p, jnode_type type, const jtoken *at)
{
    jnode *n = ja_alloc(p->a, sizeof *n);
    if (!n) return NULL;
    n->type = (uint8_t)type;
    n->line = at->line, n->col = at->col;
    return n;
}

/* a growing node list in the arena */
static int add(parser *p, jnodes *l, jnode *n)
{
    if ((l->n & (l->n - 1)) == 0) { /* at 0, 1, 2, 4, ...: double */
        size_t c = l->n ? (size_t)l->n * 2 : 1;
        jnode **v = ja_alloc(p->a, c * sizeof *v);
        if (!v) return -1;
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
    }
    l->v[l->n++] = n;
    return 0;
}

static int add_kw(parser *p, jnode *call, const char *name, jnode *val)
{
    int n = call->kwvals.n;
    if (add(p, &call->kwvals, val)) return -1;
    if ((n & (n - 1)) == 0) {
        size_t c = n ? (size_t)n * 2 : 1;
        const char **v = ja_alloc(p->a, c * sizeof *v);
        if (!v) return -1;
        if (n) memcpy(v, call->kwnames, (size_t)n * sizeof *v);
        call->kwnames = v;
    }
    call->kwnames[n] = name;
    return 0;
}

/* ---- expressions -------------------------------------------------------------------------------- */

static jnode *parse_expression(parser *p, int with_condexpr);
static jnode *parse_or(parser *p);
static jnode *parse_unary(parser *p, int with_filter);
static jnode *parse_primary(parser *p);
static jnode *parse_postfix(parser *p, jnode *n);
static jnode *parse_filter_expr(parser *p, jnode *n);
static jnode *parse_tuple(parser *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens);

static int enter(parser *p)
{
    if (++p->depth > 150) {
        perr(p, cur(p), "the template nests too deep (more than 150 levels of statements and expressions)");
        return -1;
    }
    return 0;
}

static jnode *parse_expression(parser *p, int with_condexpr)
{
    if (enter(p)) return NULL;
    jnode *n = parse_or(p);
    while (n && with_condexpr && is_name(p, "if")) {
        const jtoken *at = next(p);
        jnode *c = mk(p, E_COND, at), *test = parse_or(p);
        if (!c || !test) return NULL;
        c->a = test, c->b = n;
        if (skip_name(p, "else") && !(c->c = parse_expression(p, 1))) return NULL;
        n = c;
    }
    p->depth--;
    return n;
}

static jnode *parse_not(parser *p);

static jnode *parse_and(parser *p)
{
    jnode *l = parse_not(p);
    while (l && is_name(p, "and")) {
        jnode *n = mk(p, E_AND, next(p));
        if (!n || !(n->b = parse_not(p))) return NULL;
        n->a = l, l = n;
    }
    return l;
}

static jnode *parse_or(parser *p)
{
    jnode *l = parse_and(p);
    while (l && is_name(p, "or")) {
        jnode *n = mk(p, E_OR, next(p));
        if (!n || !(n->b = parse_and(p))) return NULL;
        n->a = l, l = n;
    }
    return l;
}

static jnode *parse_compare(parser *p);

static jnode *parse_not(parser *p)
{
    if (is_name(p, "not")) {
        jnode *n = mk(p, E_NOT, next(p));
        if (enter(p) || !n || !(n->a = parse_not(p))) return NULL;
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jnode *parse_math1(parser *p);

static jnode *parse_compare(parser *p)
{
    jnode *e = parse_math1(p), *cmp = NULL;
    if (!e) return NULL;
    for (;;) {
        int op = -1;
        const jtoken *t = cur(p);
        if (t->type == TK_OP) {
            switch (t->op) {
            case OP_EQ: op = CMP_EQ; break;
            case OP_NE: op = CMP_NE; break;
            case OP_LT: op = CMP_LT; break;
            case OP_LE: op = CMP_LE; break;
            case OP_GT: op = CMP_GT; break;
            case OP_GE: op = CMP_GE; break;
            default: break;
            }
            if (op >= 0) next(p);
        } else if (is_name(p, "in")) {
            op = CMP_IN, next(p);
        } else if (is_name(p, "not") && look(p)->type == TK_NAME && strcmp(look(p)->s, "in") == 0) {
            op = CMP_NOTIN, next(p), next(p);
        }
        if (op < 0) break;
        if (!cmp && !(cmp = mk(p, E_COMPARE, t))) return NULL;
        jnode *o = mk(p, E_COMPARE, t);
        if (!o || !(o->a = parse_math1(p)) || add(p, &cmp->args, o)) return NULL;
        o->op = op;
    }
    if (!cmp) return e;
    cmp->a = e;
    return cmp;
}

static jnode *binop(parser *p, jnode *l, jnode *(*sub)(parser *), const int *ops, int nops)
{
    while (l && cur(p)->type == TK_OP) {
        int op = cur(p)->op, hit = 0;
        for (int i = 0; i < nops; i++) hit |= ops[i] == op;
        if (!hit) break;
        jnode *n = mk(p, E_BIN, next(p));
        if (!n || !(n->b = sub(p))) return NULL;
        n->op = op, n->a = l, l = n;
    }
    return l;
}

static jnode *unary_f(parser *p) { return parse_unary(p, 1); }

static jnode *parse_pow2(parser *p)
{
    static const int ops[] = {OP_POW};
    return binop(p, parse_unary(p, 1), unary_f, ops, 1);
}

static jnode *parse_math2(parser *p)
{
    static const int ops[] = {OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD};
    return binop(p, parse_pow2(p), parse_pow2, ops, 4);
}

static jnode *parse_concat(parser *p)
{
    jnode *first = parse_math2(p);
    if (!first || !is_op(p, OP_TILDE)) return first;
    jnode *c = mk(p, E_CONCAT, cur(p));
    if (!c || add(p, &c->args, first)) return NULL;
    while (skip_op(p, OP_TILDE)) {
        jnode *n = parse_math2(p);
        if (!n || add(p, &c->args, n)) return NULL;
    }
    return c;
}

static jnode *parse_math1(parser *p)
{
    static const int ops[] = {OP_ADD, OP_SUB};
    return binop(p, parse_concat(p), parse_concat, ops, 2);
}

static jnode *parse_unary(parser *p, int with_filter)
{
    jnode *n;
    if (enter(p)) return NULL;
    if (is_op(p, OP_SUB) || is_op(p, OP_ADD)) {
        const jtoken *t = next(p);
        n = mk(p, t->op == OP_SUB ? E_NEG : E_POS, t);
        if (!n || !(n->a = parse_unary(p, 0))) return NULL;
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *parse_list(parser *p)
{
    jnode *l = mk(p, E_LIST, next(p));
    if (!l) return NULL;
    while (!is_op(p, OP_RBRACKET)) {
        if (l->args.n && expect_op(p, OP_COMMA, ",")) return NULL;
        if (is_op(p, OP_RBRACKET)) break;
        jnode *e = parse_expression(p, 1);
        if (!e || add(p, &l->args, e)) return NULL;
    }
    return expect_op(p, OP_RBRACKET, "]") ? NULL : l;
}

static jnode *parse_dict(parser *p)
{
    jnode *d = mk(p, E_DICT, next(p));
    if (!d) return NULL;
    while (!is_op(p, OP_RBRACE)) {
        if (d->args.n && expect_op(p, OP_COMMA, ",")) return NULL;
        if (is_op(p, OP_RBRACE)) break;
        jnode *k = parse_expression(p, 1), *v;
        if (!k || expect_op(p, OP_COLON, ":") || !(v = parse_expression(p, 1))) return NULL;
        if (add(p, &d->args, k) || add(p, &d->kwvals, v)) return NULL;
    }
    return expect_op(p, OP_RBRACE, "}") ? NULL : d;
}

static jnode *parse_primary(parser *p)
{
    const jtoken *t = cur(p);
    jnode *n;
    char b[80];
    switch (t->type) {
    case TK_NAME:
        next(p);
        n = mk(p, E_CONST, t);
        if (!n) return NULL;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n->value = jv_bool(1);
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n->value = jv_bool(0);
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n->value = jv_none();
        else {
            n->type = E_NAME, n->name = t->s;
            if (p->macro && !strcmp(t->s, "caller")) p->macro->uses_caller = 1;
            if (p->macro && !strcmp(t->s, "varargs")) p->macro->uses_varargs = 1;
            if (p->macro && !strcmp(t->s, "kwargs")) p->macro->uses_kwargs = 1;
        }
        return n;
    case TK_STRING: {
        /* adjacent strings are one: "a" "b" */
        jbuf s = {0};
        while (cur(p)->type == TK_STRING) {
            if (jb_put(&s, cur(p)->s, cur(p)->len)) return jb_free(&s), NULL;
            next(p);
        }
        n = mk(p, E_CONST, t);
        int rc = !n || jv_str(p->a, s.p ? s.p : "", s.len, &n->value);
        jb_free(&s);
        return rc ? NULL : n;
    }
    case TK_INT:
    case TK_FLOAT:
        next(p);
        if (!(n = mk(p, E_CONST, t))) return NULL;
        n->value = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        return n;
    case TK_OP:
        if (t->op == OP_LPAREN) {
            next(p);
            n = parse_tuple(p, 0, 1, NULL, 1);
            return !n || expect_op(p, OP_RPAREN, ")") ? NULL : n;
        }
        if (t->op == OP_LBRACKET) return parse_list(p);
        if (t->op == OP_LBRACE) return parse_dict(p);
        break;
    default: break;
    }
    perr(p, t, "unexpected %s", tok_desc(t, b, sizeof b));
    return NULL;
}

/* jinja2's is_tuple_end */
static int tuple_end(parser *p, const char *extra_end)
{
    const jtoken *t = cur(p);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || (t->type == TK_OP && t->op == OP_RPAREN)) return 1;
    return extra_end && is_name(p, extra_end);
}

static jnode *parse_tuple(parser *p, int simplified, int with_condexpr, const char *extra_end, int explicit_parens)
{
    const jtoken *start = cur(p);
    jnode *tup = NULL, *first = NULL;
    int n = 0, is_tuple = 0;
    for (;;) {
        if (n && expect_op(p, OP_COMMA, ",")) return NULL;
        if (tuple_end(p, extra_end)) break;
        jnode *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        if (!e) return NULL;
        if (n == 0) first = e;
        else if (n == 1) {
            if (!(tup = mk(p, E_TUPLE, start)) || add(p, &tup->args, first)) return NULL;
        }
        if (n >= 1 && add(p, &tup->args, e)) return NULL;
        n++;
        if (is_op(p, OP_COMMA)) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (n) return first;
        if (!explicit_parens) {
            char b[80];
            perr(p, cur(p), "expected an expression, got %s", tok_desc(cur(p), b, sizeof b));
            return NULL;
        }
    }
    if (!tup) {
        if (!(tup = mk(p, E_TUPLE, start))) return NULL;
        if (n == 1 && add(p, &tup->args, first)) return NULL;
    }
    return tup;
}

static int parse_call_args(parser *p, jnode *call)
{
    if (expect_op(p, OP_LPAREN, "(")) return -1;
    int require_comma = 0;
    while (!is_op(p, OP_RPAREN)) {
        if (require_comma) {
            if (expect_op(p, OP_COMMA, ",")) return -1;
            if (is_op(p, OP_RPAREN)) break;
        }
        if (is_op(p, OP_MUL) || is_op(p, OP_POW))
            return perr(p, cur(p), "unsupported construct: *args or **kwargs in a call");
        if (cur(p)->type == TK_NAME && look(p)->type == TK_OP && look(p)->op == OP_ASSIGN) {
            const char *key = next(p)->s;
            next(p);
            jnode *v = parse_expression(p, 1);
            if (!v || add_kw(p, call, key, v)) return -1;
        } else {
            if (call->kwvals.n) return perr(p, cur(p), "invalid syntax for function call expression");
            jnode *v = parse_expression(p, 1);
            if (!v || add(p, &call->args, v)) return -1;
        }
        require_comma = 1;
    }
    return expect_op(p, OP_RPAREN, ")");
}

static jnode *parse_subscribed(parser *p)
{
    const jtoken *t = cur(p);
    jnode *parts[3] = {NULL, NULL, NULL};
    if (is_op(p, OP_COLON)) {
        next(p);
    } else {
        jnode *e = parse_expression(p, 1);
        if (!e || !is_op(p, OP_COLON)) return e;
        next(p);
        parts[0] = e;
    }
    if (!is_op(p, OP_COLON) && !is_op(p, OP_RBRACKET) && !is_op(p, OP_COMMA) && !(parts[1] = parse_expression(p, 1)))
        return NULL;
    if (skip_op(p, OP_COLON) && !is_op(p, OP_RBRACKET) && !is_op(p, OP_COMMA) && !(parts[2] = parse_expression(p, 1)))
        return NULL;
    jnode *s = mk(p, E_SLICE, t);
    if (s) s->a = parts[0], s->b = parts[1], s->c = parts[2];
    return s;
}

static jnode *parse_postfix(parser *p, jnode *n)
{
    while (n) {
        if (is_op(p, OP_DOT)) {
            const jtoken *dot = next(p), *at = cur(p);
            if (at->type == TK_NAME) {
                next(p);
                jnode *g = mk(p, E_ATTR, dot);
                if (!g) return NULL;
                g->a = n, g->name = at->s, n = g;
            } else if (at->type == TK_INT) {
                next(p);
                jnode *g = mk(p, E_ITEM, dot), *k = mk(p, E_CONST, at);
                if (!g || !k) return NULL;
                k->value = jv_int(at->i);
                g->a = n, g->b = k, n = g;
            } else {
                char b[80];
                perr(p, at, "expected a name or a number after '.', got %s", tok_desc(at, b, sizeof b));
                return NULL;
            }
        } else if (is_op(p, OP_LBRACKET)) {
            const jtoken *br = next(p);
            jnode *g = mk(p, E_ITEM, br), *tup = NULL, *first = NULL;
            int k = 0;
            if (!g) return NULL;
            while (!is_op(p, OP_RBRACKET)) {
                if (k && expect_op(p, OP_COMMA, ",")) return NULL;
                jnode *e = parse_subscribed(p);
                if (!e) return NULL;
                if (k == 0) first = e;
                else {
                    if (k == 1 && (!(tup = mk(p, E_TUPLE, br)) || add(p, &tup->args, first))) return NULL;
                    if (add(p, &tup->args, e)) return NULL;
                }
                k++;
            }
            if (expect_op(p, OP_RBRACKET, "]")) return NULL;
            if (k == 0) {
                perr(p, br, "expected an index or a slice in []");
                return NULL;
            }
            g->a = n, g->b = tup ? tup : first, n = g;
            if (tup)
                for (int i = 0; i < tup->args.n; i++)
                    if (tup->args.v[i]->type == E_SLICE) {
                        perr(p, br, "unsupported construct: a tuple of slices as an index");
                        return NULL;
                    }
        } else if (is_op(p, OP_LPAREN)) {
            jnode *c = mk(p, E_CALL, cur(p));
            if (!c || parse_call_args(p, c)) return NULL;
            c->a = n, n = c;
        } else {
            break;
        }
    }
    return n;
}

static int dotted_name(parser *p, const char **out)
{
    if (cur(p)->type != TK_NAME) {
        char b[80];
        return perr(p, cur(p), "expected a name, got %s", tok_desc(cur(p), b, sizeof b));
    }
    const char *name = next(p)->s;
    if (is_op(p, OP_DOT)) return perr(p, cur(p), "unsupported construct: a dotted filter or test name");
    *out = name;
    return 0;
}

static jnode *parse_filter(parser *p, jnode *n, int start_inline)
{
    while (is_op(p, OP_PIPE) || start_inline) {
        if (!start_inline) next(p);
        start_inline = 0;
        const jtoken *at = cur(p);
        const char *name = "";
        if (dotted_name(p, &name)) return NULL;
        jnode *f = mk(p, E_FILTER, at);
        if (!f) return NULL;
        f->name = name, f->a = n;
        f->op = tt_chat_filter_index(name);
        if (f->op < 0) {
            perr(p, at, tt_chat_known_elsewhere(name, 0) ? "unsupported construct: the filter '%s'"
                                                           : "no filter named '%s'",
                 name);
            return NULL;
        }
        if (is_op(p, OP_LPAREN) && parse_call_args(p, f)) return NULL;
        n = f;
    }
    return n;
}

static jnode *parse_test(parser *p, jnode *n)
{
    const jtoken *is = next(p);
    int negated = skip_name(p, "not");
    const jtoken *at = cur(p);
    const char *name = "";
    if (dotted_name(p, &name)) return NULL;
    jnode *t = mk(p, E_TEST, at);
    if (!t) return NULL;
    t->name = name, t->a = n;
    t->op = tt_chat_test_index(name);
    if (t->op < 0) {
        perr(p, at, tt_chat_known_elsewhere(name, 1) ? "unsupported construct: the test '%s'" : "no test named '%s'",
             name);
        return NULL;
    }
    const jtoken *c = cur(p);
    if (is_op(p, OP_LPAREN)) {
        if (parse_call_args(p, t)) return NULL;
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                (c->type == TK_OP && (c->op == OP_LPAREN || c->op == OP_LBRACKET || c->op == OP_LBRACE))) &&
               !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
        if (is_name(p, "is")) {
            perr(p, c, "you cannot chain multiple tests with is");
            return NULL;
        }
        jnode *arg = parse_postfix(p, parse_primary(p));
        if (!arg || add(p, &t->args, arg)) return NULL;
    }
    if (negated) {
        jnode *nt = mk(p, E_NOT, is);
        if (!nt) return NULL;
        nt->a = t;
        return nt;
    }
    return t;
}

static jnode *parse_filter_expr(parser *p, jnode *n)
{
    while (n) {
        if (is_op(p, OP_PIPE)) n = parse_filter(p, n, 0);
        else if (is_name(p, "is")) n = parse_test(p, n);
        else if (is_op(p, OP_LPAREN)) {
            jnode *c = mk(p, E_CALL, cur(p));
            if (!c || parse_call_args(p, c)) return NULL;
            c->a = n, n = c;
        } else break;
    }
    return n;
}

/* ---- statements --------------------------------------------------------------------------------- */

static int subparse(parser *p, const char *const *end_tokens, jnodes *body);

static int at_end_token(parser *p, const char *const *end_tokens)
{
    for (int i = 0; end_tokens && end_tokens[i]; i++)
        if (is_name(p, end_tokens[i])) return 1;
    return 0;
}

/* jinja2's parse_statements: an optional ':', the end of the opening tag, the body up to one of
 * end_tokens (the cursor left on it, or past it with drop_needle) */
static int parse_statements(parser *p, const char *const *end_tokens, int drop_needle, jnodes *body)
{
    skip_op(p, OP_COLON);
    if (expect_type(p, TK_BLOCK_END, "the end of the tag ('%}')") || subparse(p, end_tokens, body)) return -1;
    if (cur(p)->type == TK_EOF) {
        char want[160] = "";
        for (int i = 0; end_tokens[i]; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", i ? " or " : "", end_tokens[i]);
        return perr(p, cur(p), "unexpected end of template: jinja was looking for %s", want);
    }
    if (drop_needle) next(p);
    return 0;
}

static int assignable(parser *p, jnode *t)
{
    if (t->type == E_NAME) return 0;
    if (t->type == E_TUPLE) {
        for (int i = 0; i < t->args.n; i++)
            if (assignable(p, t->args.v[i])) return -1;
        return 0;
    }
    return tt_errorf("%s:%d:%d: cannot assign to this expression", p->tpl->name, t->line, t->col);
}

static jnode *parse_for(parser *p, const jtoken *at)
{
    static const char *const body_end[] = {"endfor", "else", NULL}, *const for_end[] = {"endfor", NULL};
    jnode *f = mk(p, S_FOR, at);
    if (!f || !(f->a = parse_tuple(p, 1, 1, "in", 0)) || assignable(p, f->a)) return NULL;
    if (!is_name(p, "in")) {
        char b[80];
        perr(p, cur(p), "expected 'in', got %s", tok_desc(cur(p), b, sizeof b));
        return NULL;
    }
    next(p);
    if (!(f->b = parse_tuple(p, 0, 0, "recursive", 0))) return NULL;
    if (skip_name(p, "if") && !(f->c = parse_expression(p, 1))) return NULL;
    if (is_name(p, "recursive")) {
        perr(p, cur(p), "unsupported construct: a recursive for loop");
        return NULL;
    }
    p->loop_depth++;
    int rc = parse_statements(p, body_end, 0, &f->body);
    p->loop_depth--;
    if (rc) return NULL;
    if (!strcmp(next(p)->s, "else") && parse_statements(p, for_end, 1, &f->orelse)) return NULL;
    return f;
}

static jnode *parse_if(parser *p, const jtoken *at)
{
    static const char *const body_end[] = {"elif", "else", "endif", NULL}, *const if_end[] = {"endif", NULL};
    jnode *top = mk(p, S_IF, at), *n = top;
    if (!top) return NULL;
    for (;;) {
        if (!(n->a = parse_tuple(p, 0, 0, NULL, 0)) || parse_statements(p, body_end, 0, &n->body)) return NULL;
        const jtoken *t = next(p);
        if (!strcmp(t->s, "elif")) {
            jnode *e = mk(p, S_IF, t);
            if (!e || add(p, &n->orelse, e)) return NULL;
            n = e;
            continue;
        }
        if (!strcmp(t->s, "else") && parse_statements(p, if_end, 1, &n->orelse)) return NULL;
        return top;
    }
}

static jnode *parse_set(parser *p, const jtoken *at)
{
    static const char *const set_end[] = {"endset", NULL};
    jnode *s = mk(p, S_SET, at);
    if (!s) return NULL;
    if (cur(p)->type == TK_NAME && look(p)->type == TK_OP && look(p)->op == OP_DOT) { /* ns.attr */
        const jtoken *ns = next(p);
        next(p);
        const jtoken *attr = cur(p);
        if (expect_type(p, TK_NAME, "an attribute name")) return NULL;
        jnode *t = mk(p, E_ATTR, ns), *base = mk(p, E_NAME, ns);
        if (!t || !base) return NULL;
        base->name = ns->s, t->a = base, t->name = attr->s, s->a = t;
    } else if (!(s->a = parse_tuple(p, 1, 1, NULL, 0)) || assignable(p, s->a)) {
        return NULL;
    }
    if (skip_op(p, OP_ASSIGN)) return (s->b = parse_tuple(p, 0, 1, NULL, 0)) ? s : NULL;
    s->type = S_SETBLOCK;
    if (is_op(p, OP_PIPE) && !(s->b = parse_filter(p, NULL, 0))) return NULL;
    return parse_statements(p, set_end, 1, &s->body) ? NULL : s;
}

static int parse_signature(parser *p, jnode *m)
{
    if (expect_op(p, OP_LPAREN, "(")) return -1;
    while (!is_op(p, OP_RPAREN)) {
        if (m->args.n && expect_op(p, OP_COMMA, ",")) return -1;
        const jtoken *t = cur(p);
        if (expect_type(p, TK_NAME, "a parameter name")) return -1;
        jnode *a = mk(p, E_NAME, t);
        if (!a || add(p, &m->args, a)) return -1;
        a->name = t->s;
        if (skip_op(p, OP_ASSIGN)) {
            jnode *d = parse_expression(p, 1);
            if (!d || add(p, &m->kwvals, d)) return -1;
        } else if (m->kwvals.n) {
            return perr(p, t, "non-default argument follows default argument");
        }
    }
    return expect_op(p, OP_RPAREN, ")");
}

/* a macro-like body (macro, call block, generation): no loop around it, its own caller marks */
static int parse_body_as_macro(parser *p, jnode *m, const char *const *end)
{
    int saved_loops = p->loop_depth;
    jnode *saved_macro = p->macro;
    p->loop_depth = 0, p->macro = m;
    int rc = parse_statements(p, end, 1, &m->body);
    p->loop_depth = saved_loops, p->macro = saved_macro;
    return rc;
}

static jnode *parse_statement(parser *p)
{
    static const char *const macro_end[] = {"endmacro", NULL}, *const call_end[] = {"endcall", NULL},
                             *const gen_end[] = {"endgeneration", NULL};
    const jtoken *at = cur(p);
    char b[80];
    if (at->type != TK_NAME) {
        perr(p, at, "tag name expected, got %s", tok_desc(at, b, sizeof b));
        return NULL;
    }
    const char *w = at->s;
    next(p);
    if (!strcmp(w, "for")) return parse_for(p, at);
    if (!strcmp(w, "if")) return parse_if(p, at);
    if (!strcmp(w, "set")) return parse_set(p, at);
    if (!strcmp(w, "print")) {
        jnode *n = mk(p, S_PRINT, at);
        return n && (n->a = parse_tuple(p, 0, 1, NULL, 0)) ? n : NULL;
    }
    if (!strcmp(w, "break") || !strcmp(w, "continue")) {
        if (!p->loop_depth) {
            perr(p, at, "'%s' outside of a for loop", w);
            return NULL;
        }
        return mk(p, w[0] == 'b' ? S_BREAK : S_CONTINUE, at);
    }
    if (!strcmp(w, "macro")) {
        jnode *m = mk(p, S_MACRO, at);
        const jtoken *nt = cur(p);
        if (!m || expect_type(p, TK_NAME, "the macro's name")) return NULL;
        m->name = nt->s;
        return parse_signature(p, m) || parse_body_as_macro(p, m, macro_end) ? NULL : m;
    }
    if (!strcmp(w, "call")) {
        jnode *c = mk(p, S_CALLBLOCK, at);
        if (!c || (is_op(p, OP_LPAREN) && parse_signature(p, c))) return NULL;
        const jtoken *ct = cur(p);
        if (!(c->a = parse_expression(p, 1))) return NULL;
        if (c->a->type != E_CALL) {
            perr(p, ct, "expected a call after 'call'");
            return NULL;
        }
        return parse_body_as_macro(p, c, call_end) ? NULL : c;
    }
    if (!strcmp(w, "generation")) {
        jnode *g = mk(p, S_GEN, at);
        p->tpl->has_generation = 1;
        return g && !parse_body_as_macro(p, g, gen_end) ? g : NULL;
    }
    static const char *const refused[] = {"block", "extends", "include", "import", "from", "with", "autoescape",
                                          "filter", NULL};
    for (int i = 0; refused[i]; i++)
        if (!strcmp(w, refused[i])) {
            perr(p, at, "unsupported construct: the '%s' statement", w);
            return NULL;
        }
    perr(p, at, "encountered unknown tag '%s'", w);
    return NULL;
}

static int subparse_body(parser *p, const char *const *end_tokens, jnodes *body);
static int subparse(parser *p, const char *const *end_tokens, jnodes *body)
{
    /* statements nest through this function: bounded like expressions, so no template can
     * exhaust the stack */
    if (++p->depth > 150) return perr(p, cur(p), "the template nests too deep (more than 150 levels of statements and expressions)");
    int rc = subparse_body(p, end_tokens, body);
    p->depth--;
    return rc;
}

static int subparse_body(parser *p, const char *const *end_tokens, jnodes *body)
{
    for (;;) {
        const jtoken *t = cur(p);
        if (t->type == TK_EOF) return 0;
        if (t->type == TK_DATA) {
            jnode *d = mk(p, S_DATA, t);
            if (!d || jv_str(p->a, t->s, t->len, &d->value) || add(p, body, d)) return -1;
            next(p);
        } else if (t->type == TK_VAR_BEGIN) {
            next(p);
            jnode *n = mk(p, S_PRINT, t);
            if (!n || !(n->a = parse_tuple(p, 0, 1, NULL, 0)) || add(p, body, n)) return -1;
            if (expect_type(p, TK_VAR_END, "the end of the print statement ('}}')")) return -1;
        } else if (t->type == TK_BLOCK_BEGIN) {
            next(p);
            if (at_end_token(p, end_tokens)) return 0;
            jnode *s = parse_statement(p);
            if (!s || add(p, body, s)) return -1;
            if (expect_type(p, TK_BLOCK_END, "the end of the tag ('%}')")) return -1;
        } else {
            char b[80];
            return perr(p, t, "unexpected %s", tok_desc(t, b, sizeof b));
        }
    }
}

tt_err tt_chat_parse_tokens(tt_chat_template *t, const jtokens *toks)
{
    parser p = {toks->t, toks->n, 0, t, &t->arena, 0, 0, NULL};
    if (subparse(&p, NULL, &t->body)) return -1;
    if (cur(&p)->type != TK_EOF) {
        char b[80];
        return perr(&p, cur(&p), "unexpected %s", tok_desc(cur(&p), b, sizeof b));
    }
    return 0;
}

/* chat_internal.h — what the files of src/chat/ share: the template's tokens and syntax tree, the
 * renderer's state, and the filter, test and method tables. Private to src/chat/. */
#ifndef TT_CHAT_INTERNAL_H
#define TT_CHAT_INTERNAL_H

#include <stdint.h>

#include "titan/titan.h"

struct cJSON;
struct tt_chat_spans;
#include "chat/value.h"

/* ---- tokens (lexer.c) ---------------------------------------------------------------------------- */
typedef enum {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} tk_type;

/* operators; the two-character ones first */
typedef enum {
    OP_FLOORDIV, OP_POW, OP_EQ, OP_NE, OP_GE, OP_LE,
    OP_ADD, OP_SUB, OP_DIV, OP_MUL, OP_MOD, OP_TILDE, OP_LBRACKET, OP_RBRACKET, OP_LPAREN, OP_RPAREN,
    OP_LBRACE, OP_RBRACE, OP_GT, OP_LT, OP_ASSIGN, OP_DOT, OP_COLON, OP_PIPE, OP_COMMA, OP_SEMICOLON,
    OP_COUNT
} op_id;

typedef struct {
    tk_type type;
    int op;            /* TK_OP */
    int line, col;
    const char *s;     /* TK_DATA, TK_NAME, TK_STRING: the text (NUL-terminated, in the template's arena) */
    size_t len;
    int64_t i;         /* TK_INT */
    double f;          /* TK_FLOAT */
} jtoken;

typedef struct {
    jtoken *t;
    size_t n, cap;
} jtokens;

/* ---- the syntax tree (parser.c) ------------------------------------------------------------------ */
typedef enum {
    /* expressions */
    E_CONST, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NOT, E_NEG, E_POS, E_BIN, E_AND, E_OR,
    E_COMPARE, E_COND, E_CONCAT, E_LIST, E_TUPLE, E_DICT,
    /* statements */
    S_DATA, S_PRINT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_CALLBLOCK, S_BREAK, S_CONTINUE, S_GEN,
} jnode_type;

/* comparison operators of E_COMPARE (in each operand's op) */
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

typedef struct jnode jnode;
typedef struct {
    jnode **v;
    int n;
} jnodes;

struct jnode {
    uint8_t type;
    int op;            /* E_BIN: op_id; E_COMPARE operand: CMP_*; E_FILTER / E_TEST: the table index */
    int line, col;
    jv value;          /* E_CONST */
    const char *name;  /* E_NAME, E_ATTR, E_FILTER, E_TEST, S_MACRO */
    jnode *a, *b, *c;  /* operands; S_FOR: a target, b iterable, c filter; S_SET: a target, b value */
    jnodes args;       /* E_CALL, E_FILTER, E_TEST arguments; E_LIST/E_TUPLE/E_CONCAT items; E_DICT keys;
                        * E_COMPARE operands; S_MACRO / S_CALLBLOCK: parameter names (E_NAME) */
    jnodes kwvals;     /* keyword argument values (names in kwnames); E_DICT values; macro defaults */
    const char **kwnames;
    jnodes body, orelse; /* statements */
    int uses_caller, uses_varargs, uses_kwargs; /* S_MACRO: the names its body mentions */
};

typedef struct tt_chat_template tt_chat_template;
struct tt_chat_template {
    jarena arena; /* tokens, tree and constants */
    jnodes body;
    char name[128];
    int has_generation; /* a {% generation %} block: it, not the turns' prefixes, says what is trained */
};

tt_err tt_chat_lex(const char *src, size_t len, const char *name, jarena *a, jtokens *out);
tt_err tt_chat_parse_tokens(tt_chat_template *t, const jtokens *toks);

/* ---- rendering (render.c) ----------------------------------------------------------------------- */
typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

typedef struct jmacro_val {
    const jnode *def;   /* S_MACRO, or S_CALLBLOCK / S_GEN for a caller */
    jframe *scope;      /* where it was defined */
    jv caller;          /* the caller it gets (a call block's body), or undefined */
} jmacro_val;

typedef struct jloop {
    const jlist *items;
    size_t index0;
    jv last_changed;
    int changed_set;
} jloop;

typedef struct jrender {
    const tt_chat_template *t;
    jarena *a;
    jbuf *root;        /* the top-level output: generation spans are measured in it */
    jbuf *out;         /* where output goes now (the root, a macro's, a block set's) */
    struct tt_chat_spans *gen;
    uint64_t steps, max_steps;
    int depth;         /* macro calls and nested evaluation */
    int64_t now;       /* strftime_now's time, seconds since the epoch; < 0: the clock */
    int raised;        /* the error is the template's own raise_exception */
    int errored;
} jrender;

/* an error at a node: "name:line:col: message" (once: the first error wins) */
int jr_err(jrender *r, const jnode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int jr_step(jrender *r, const jnode *n);
int jr_fail(jrender *r, const jnode *n); /* the library's last error, at n */
jframe *jr_frame_new(jrender *r, jframe *parent);
jv *jr_frame_find(jframe *f, const char *name);
int jr_frame_set(jrender *r, jframe *f, const char *name, jv v);
/* run statements: 0, -1 error, 1 break, 2 continue */
int jr_exec(jrender *r, jframe *f, const jnodes *body);
/* run statements into a string of their own (a macro's, a block set's) */
int jr_capture(jrender *r, jframe *f, const jnodes *body, jv *out);
int jr_contains(jrender *r, const jnode *at, jv needle, jv hay, int *res);
int jr_binop(jrender *r, const jnode *at, int op, jv a, jv b, jv *out);
int tt_chat_value_from_json(jarena *a, const struct cJSON *j, jv *out, int depth);
int jr_eval(jrender *r, jframe *f, const jnode *n, jv *out);
/* a value's items for iteration (lists, tuples, strings' characters, dict keys); undefined: none */
int jr_items(jrender *r, const jnode *n, jv v, const jlist **out);
/* call a macro, function or method with evaluated arguments */
int jr_call(jrender *r, const jnode *at, jv fn, const jv *args, int nargs, const char **kwnames, const jv *kwvals,
            int nkw, jv *out);
/* obj.name and obj[key] as the sandbox does them */
int jr_getattr(jrender *r, const jnode *at, jv obj, const char *name, jv *out);
int jr_getitem(jrender *r, const jnode *at, jv obj, jv key, jv *out);
int jr_slice(jrender *r, const jnode *at, jv obj, const jv *parts /* start, stop, step */, jv *out);

/* ---- filters and tests (filters.c) ---------------------------------------------------------------- */
int tt_chat_filter_index(const char *name);       /* -1: unknown */
int tt_chat_test_index(const char *name);
int tt_chat_known_elsewhere(const char *name, int test); /* a jinja2 filter/test outside the subset */
int jr_filter(jrender *r, const jnode *at, int fid, jv v, const jv *args, int nargs, const char **kwnames,
              const jv *kwvals, int nkw, jv *out);
int jr_test(jrender *r, const jnode *at, int tid, jv v, const jv *args, int nargs, jv *out);
/* coverage: how many times each filter, test and method ran (for the tests) */
extern const char *const tt_chat_filter_names[];
extern const char *const tt_chat_test_names[];
extern const char *const tt_chat_method_names[];
extern unsigned long tt_chat_filter_hits[], tt_chat_test_hits[], tt_chat_method_hits[];
int tt_chat_n_filters(void);
int tt_chat_n_tests(void);
int tt_chat_n_methods(void);

enum { /* the methods (access.c finds them by name, methods.c calls them) */
    M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_STARTSWITH, M_ENDSWITH, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_REPLACE, M_FIND, M_COUNT, M_JOIN, M_GET, M_ITEMS, M_KEYS, M_VALUES, M_CYCLE, M_CHANGED, M_N
};

/* ---- methods (access.c, methods.c) and strings (strings.c) ------------------------------------------------------------- */
/* The method id of obj.name, -1 when obj has no such attribute (so the lookup falls to obj[name]),
 * -2 when Python has it but titan's renderer does not (refused). */
int jm_lookup(jv obj, const char *name);
int jm_call(jrender *r, const jnode *at, const jmethod *m, const jv *args, int nargs, const char **kwnames,
            const jv *kwvals, int nkw, jv *out);
/* Python's str methods the filters share */
typedef enum { CASE_UPPER, CASE_LOWER, CASE_TITLE_METHOD, CASE_CAPITALIZE } case_op;
int js_case(jarena *a, jv s, case_op op, jv *out);
int js_strip(jarena *a, jv s, const jv *chars, int left, int right, jv *out);
int js_replace(jarena *a, jv s, jv old, jv new_, int64_t count, jv *out);
int js_split(jarena *a, jv s, const jv *sep, int64_t maxsplit, int right, jv *out);
int js_join(jrender *r, const jnode *at, jv sep, jv items, jv *out);
/* a str value with the same markup flag as like */
int js_new(jarena *a, const char *s, size_t n, jv like, jv *out);

#endif

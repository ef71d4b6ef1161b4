/* value.h — the values a chat template computes with (jinja2's Python objects: None, bool, int, float,
 * str, list/tuple, dict, Undefined, macros, namespaces), the arena they live in, and the Python
 * semantics they share: str(), repr(), truth, ==, <, json.dumps. Private to src/chat/. */
#ifndef TT_CHAT_VALUE_H
#define TT_CHAT_VALUE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    JV_UNDEF,  /* jinja2's Undefined: prints "", iterates empty, is false; most other uses fail */
    JV_NONE,
    JV_BOOL,
    JV_INT,    /* Python int within int64; leaving that range is an error, never a wrong number */
    JV_FLOAT,
    JV_STR,    /* UTF-8, NUL-terminated; JVF_MARKUP: a markupsafe.Markup (from |safe) */
    JV_LIST,   /* JVF_TUPLE: a tuple */
    JV_DICT,   /* insertion-ordered */
    JV_NS,     /* namespace(): the one mutable object */
    JV_MACRO,  /* a macro, or the caller of a call block */
    JV_FUNC,   /* a global function: raise_exception, strftime_now, namespace, range, dict */
    JV_METHOD, /* a bound method: "a b".split, d.items, loop.cycle */
    JV_LOOP,   /* the loop variable of a for loop */
    JV_ITER,   /* a one-pass iterator (what map, select, reverse, items ... return): no len, no index */
} jv_kind;

/* JVF_VIEW: a dict's items(), keys() or values() (id 1, 2, 3): a len, no index;
 * JVF_RANGE: a range object */
enum { JVF_TUPLE = 1, JVF_MARKUP = 2, JVF_VIEW = 4, JVF_RANGE = 8 };

typedef struct jiter {
    const struct jlist *items;
    size_t pos;
    const char *tname; /* Python's type name: "generator", "list_reverseiterator" */
} jiter;

typedef struct jstr {
    size_t len;
    char s[]; /* len bytes and a NUL */
} jstr;

struct jlist;
struct jdict;
struct jns;
struct jmacro_val;
struct jmethod;
struct jloop;

typedef struct jv {
    uint8_t kind, flags;
    uint16_t id; /* JV_FUNC: which function */
    union {
        int b;
        int64_t i;
        double f;
        const jstr *s;
        const struct jlist *l;
        const struct jdict *d;
        struct jns *ns;
        const struct jmacro_val *m;
        const struct jmethod *meth;
        struct jloop *loop;
        jiter *it;
        const char *uname; /* JV_UNDEF: what was missing, for messages (may be NULL) */
    } u;
} jv;

typedef struct jlist {
    size_t n;
    jv v[];
} jlist;

typedef struct jdict {
    size_t n;
    jv *keys, *vals;
} jdict;

typedef struct jns {
    size_t n, cap;
    jv *keys, *vals; /* string keys */
} jns;

typedef struct jmethod {
    jv self;
    int id; /* a method id (methods.c) */
} jmethod;

/* ---- the arena: every value of one render (or one template's constants) ------------------------ */
typedef struct jchunk jchunk;
typedef struct {
    jchunk *head;
    size_t total, limit; /* bytes taken; an allocation past limit fails (limit 0: none) */
} jarena;
void *ja_alloc(jarena *a, size_t bytes); /* zeroed, 16-aligned; NULL + tt_errorf past the limit */
void ja_free(jarena *a);

/* ---- a growing byte buffer (output, string building) ------------------------------------------ */
typedef struct {
    char *p;
    size_t len, cap, limit; /* limit 0: none */
} jbuf;
int jb_put(jbuf *b, const void *s, size_t n); /* 0, or -1 + tt_errorf past the limit or out of memory */
int jb_puts(jbuf *b, const char *s);
int jb_putc(jbuf *b, char c);
int jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jb_free(jbuf *b);

/* ---- making values ------------------------------------------------------------------------------ */
static inline jv jv_undef(const char *name) { jv v = {JV_UNDEF, 0, 0, {.uname = name}}; return v; }
static inline jv jv_none(void) { jv v = {JV_NONE, 0, 0, {.i = 0}}; return v; }
static inline jv jv_bool(int b) { jv v = {JV_BOOL, 0, 0, {.b = !!b}}; return v; }
static inline jv jv_int(int64_t i) { jv v = {JV_INT, 0, 0, {.i = i}}; return v; }
static inline jv jv_float(double f) { jv v = {JV_FLOAT, 0, 0, {.f = f}}; return v; }
int jv_str(jarena *a, const char *s, size_t n, jv *out); /* copies */
int jv_cstr(jarena *a, const char *s, jv *out);
jlist *jv_list_new(jarena *a, size_t n); /* n items, to fill */
int jv_list(jarena *a, const jv *items, size_t n, int tuple, jv *out);
jdict *jv_dict_new(jarena *a, size_t cap); /* n = 0; keys, vals of cap items */
/* d[key] = val, as Python: an existing key keeps its place. Keys must be hashable. */
void jv_dict_set(jdict *d, jv key, jv val);
int jv_dict_get(const jdict *d, jv key, jv *out); /* 1 found */
int jv_dict_get_str(const jdict *d, const char *key, jv *out);

static inline int jv_is_str(jv v) { return v.kind == JV_STR; }
static inline int jv_is_num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
const char *jv_type_name(jv v); /* Python's: "str", "int", "list", "dict", "NoneType", "Undefined" */

/* ---- Python semantics --------------------------------------------------------------------------- */
int jv_truthy(jv v);
extern _Thread_local int jv_too_deep; /* set when ==, < or hashing met a value nested too deep */
int jv_hashable(jv v);
int jv_eq(jv a, jv b);                        /* ==; never fails */
int jv_cmp(jv a, jv b, int *res);             /* <: -1/0/1 in *res; -1 + tt_errorf when Python raises */
int jv_to_str(jarena *a, jv v, jv *out);      /* str(v) as a JV_STR (undefined: "") */
int jv_write_str(jbuf *b, jv v);              /* str(v) appended */
int jv_write_repr(jbuf *b, jv v);             /* repr(v) appended */
void jv_write_float(char *out, size_t cap, double f); /* repr(float): shortest round trip, Python's form */
/* json.dumps(v, ensure_ascii, indent (NULL: none; a str or int value), separators (item, key) or
 * NULL, sort_keys) as transformers' tojson calls it */
int jv_write_json(jbuf *b, jv v, int ensure_ascii, const jv *indent, const char *item_sep, const char *key_sep,
                  int sort_keys);
/* The html escape markupsafe.escape applies (& < > " '). */
int jv_write_escaped(jbuf *b, const char *s, size_t n);

/* ---- UTF-8 -------------------------------------------------------------------------------------- */
/* Decode one code point at s (n bytes left) into *cp; returns its length (1 for a bad byte, taken as
 * U+FFFD would be wrong, so callers validate first: strings here are valid UTF-8). */
int u8_dec(const char *s, size_t n, uint32_t *cp);
int u8_enc(uint32_t cp, char *out); /* bytes written (1-4) */
size_t u8_count(const char *s, size_t n); /* code points */
int u8_valid(const char *s, size_t n);
/* byte offset of code point index i (clamped to n) */
size_t u8_offset(const char *s, size_t n, size_t i);
int u8_isspace(uint32_t cp); /* Python's str.isspace */

#endif

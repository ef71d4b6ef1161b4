/* toml.h — a small, strict reader for the TOML subset that titan's configs use:
 * it turns a document into a flat list of "table.key" = scalar-or-array entries. */
#ifndef TT_TOML_H
#define TT_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The accepted subset (docs/config.md has the full list): comments, [table] and
 * [a.b] headers, bare / "quoted" / 'literal' / dotted keys, basic strings with
 * escapes, literal strings, decimal integers, finite floats, booleans, and
 * arrays of scalars of one type (on one line or several). Everything else
 * (inline tables, arrays of tables, multi-line strings, dates and times,
 * hex/octal/binary integers, inf/nan, duplicate keys, redefined tables) is
 * rejected with "NAME:LINE: message". */

typedef enum { TT_TOML_STRING, TT_TOML_INT, TT_TOML_FLOAT, TT_TOML_BOOL, TT_TOML_ARRAY } tt_toml_type;

typedef struct tt_toml_value {
    tt_toml_type type;
    int line;                    /* line the value starts on (1-based) */
    char *str;                   /* STRING: NUL-terminated UTF-8 (never holds a NUL) */
    int64_t i;                   /* INT */
    double f;                    /* FLOAT, always finite */
    bool b;                      /* BOOL */
    struct tt_toml_value *items; /* ARRAY: scalars, all of one type */
    size_t n_items;
} tt_toml_value;

typedef struct {
    /* Full key from the root, components joined by '.': "training.steps".
     * A component that is not a valid bare key is written as a quoted basic
     * string, so keys stay unambiguous: a."b.c". */
    char *key;
    int line; /* line of the key */
    tt_toml_value value;
} tt_toml_entry;

typedef struct {
    tt_toml_entry *entries; /* in document order */
    size_t n;
} tt_toml_doc;

/* Parse len bytes of text; name is used in error messages ("name:LINE: ...").
 * Returns NULL and sets the error on any input outside the subset. */
tt_toml_doc *tt_toml_parse(const char *text, size_t len, const char *name);
tt_toml_doc *tt_toml_parse_file(const char *path);
/* The bytes of a file (NUL-terminated, *len excludes the NUL; at most 1 GiB),
 * or NULL with an error naming the path. Caller free()s. */
char *tt_toml_read_file(const char *path, size_t *len);
void tt_toml_free(tt_toml_doc *doc);
/* The entry with this full key, or NULL. */
const tt_toml_entry *tt_toml_get(const tt_toml_doc *doc, const char *key);

/* Parse a whole NUL-terminated string as one scalar value (integer, float,
 * boolean or quoted string), e.g. a command-line value. Returns 0, or -1 with
 * an error message that has no "name:LINE:" prefix. Free with tt_toml_value_clear. */
int tt_toml_parse_scalar(const char *text, tt_toml_value *out);
void tt_toml_value_clear(tt_toml_value *v);
/* "string", "integer", "float", "boolean", "array" */
const char *tt_toml_type_name(tt_toml_type t);
/* true if the n bytes at s are valid UTF-8 with no NUL */
bool tt_toml_valid_utf8(const char *s, size_t n);
/* true if s is a non-empty bare key (A-Z a-z 0-9 _ -) */
bool tt_toml_is_bare_key(const char *s);

#endif

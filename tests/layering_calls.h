/* layering_calls.h — test_layering's call graph between the library's object
 * files: which file references a global symbol that another file defines, read
 * from `nm -P -g` (functions and data alike: both tie one file to another). */
#ifndef TT_TEST_LAYERING_CALLS_H
#define TT_TEST_LAYERING_CALLS_H
#include "layering_graph.h"

typedef struct lc_objects lc_objects;

lc_objects *lc_new(void);
void lc_free(lc_objects *o);
/* One object file's symbols as `nm -P -g` prints them ("name type [value size]"
 * a line; type U, w or v: referenced, any other: defined), under the name of its
 * source file. */
void lc_add_nm(lc_objects *o, const char *file, const char *nm_text);
/* Runs nm on obj_path and adds what it prints under file; nonzero when nm fails. */
int lc_add_object(lc_objects *o, const char *file, const char *obj_path);
/* One edge in g from each file to each other file that defines a symbol it
 * references ("uses tt_foo"). */
void lc_graph(const lc_objects *o, lg_graph *g);
int lc_n_objects(const lc_objects *o);
/* The first file that references (does not define) the symbol name, or NULL. */
const char *lc_user_of(const lc_objects *o, const char *name);

#endif

/* memplan.h — the static memory plan: every activation gets an offset in one
 * arena, reusing the bytes of values that are no longer live. */
#ifndef TT_MEMPLAN_H
#define TT_MEMPLAN_H
#include "ir/graph.h"

typedef struct {
    size_t *offset;     /* per value id: its bytes in the arena (a view: inside its root's); SIZE_MAX: not in it */
    int *first, *last;  /* per root value id: first node writing it (or a view of it) and last node reading it;
                           -1 for values no node writes; outputs the host reads live to n_nodes */
    size_t arena_bytes; /* the planned peak */
    size_t naive_bytes; /* sum of all activation sizes, for comparison */
} tt_memplan;

/* Liveness only (first/last of each root), used by the eager executor too. */
tt_err tt_liveness(const tt_graph *g, int **first, int **last);
tt_err tt_memplan_build(const tt_graph *g, tt_memplan *plan);
void tt_memplan_free(tt_memplan *plan);
#endif

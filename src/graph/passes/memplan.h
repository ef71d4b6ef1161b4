/* memplan.h — the static memory plan: every activation gets an offset in one
 * arena, reusing the bytes of values that are no longer live. */
#ifndef TT_MEMPLAN_H
#define TT_MEMPLAN_H
#include "ir/graph.h"

typedef struct {
    size_t *offset;     /* per value id; SIZE_MAX for values not in the arena */
    int *first, *last;  /* per value id: producing node and last reading node */
    size_t arena_bytes; /* the planned peak */
    size_t naive_bytes; /* sum of all activation sizes, for comparison */
} tt_memplan;

/* Liveness only (first/last), used by the eager executor too. */
tt_err tt_liveness(const tt_graph *g, int **first, int **last);
tt_err tt_memplan_build(const tt_graph *g, tt_memplan *plan);
void tt_memplan_free(tt_memplan *plan);
#endif

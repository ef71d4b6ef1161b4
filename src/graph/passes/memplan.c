/* memplan.c — liveness analysis and a greedy best-fit placement of all
 * activations of one graph into a single arena (largest values first). */
#include <stdint.h>
#include <stdlib.h>

#include "graph/passes/memplan.h"

#define ALIGN 64

tt_err tt_liveness(const tt_graph *g, int **first_out, int **last_out)
{
    int nv = g->n_values;
    int *first = malloc((size_t)(nv + 1) * sizeof *first), *last = malloc((size_t)(nv + 1) * sizeof *last);
    if (!first || !last) {
        free(first);
        free(last);
        return tt_errorf("out of memory planning memory");
    }
    /* A view's reads and writes are its root's: the root is live from the
     * first node that writes it (or a view of it) to the last that reads it. */
    for (int v = 0; v < nv; v++) first[v] = last[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_out; k++) {
            const int r = tt_value_root(n->out[k])->id;
            if (first[r] < 0) first[r] = i;
            last[r] = i;
        }
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k]->role == TT_ROLE_ACT) last[tt_value_root(n->in[k])->id] = i;
    }
    for (int v = 0; v < nv; v++) {
        const int r = tt_value_root(g->values[v])->id;
        if (g->values[v]->is_output && first[r] >= 0) last[r] = g->n_nodes;
    }
    *first_out = first;
    *last_out = last;
    return 0;
}

static const tt_value *const *sort_vals;
static int by_size_desc(const void *a, const void *b)
{
    size_t sa = tt_value_bytes(sort_vals[*(const int *)a]), sb = tt_value_bytes(sort_vals[*(const int *)b]);
    if (sa != sb) return sa < sb ? 1 : -1;
    return *(const int *)a - *(const int *)b; /* stable: the plan is deterministic */
}

static int by_start(const void *a, const void *b)
{
    size_t x = ((const size_t *)a)[0], y = ((const size_t *)b)[0];
    return x < y ? -1 : x > y;
}

tt_err tt_memplan_build(const tt_graph *g, tt_memplan *plan)
{
    *plan = (tt_memplan){0};
    int nv = g->n_values;
    if (tt_liveness(g, &plan->first, &plan->last)) return -1;
    plan->offset = malloc((size_t)(nv + 1) * sizeof *plan->offset);
    int *order = malloc((size_t)(nv + 1) * sizeof *order), *placed = malloc((size_t)(nv + 1) * sizeof *placed);
    if (!plan->offset || !order || !placed) {
        free(order);
        free(placed);
        tt_memplan_free(plan);
        return tt_errorf("out of memory planning memory");
    }
    int n = 0;
    for (int v = 0; v < nv; v++) {
        plan->offset[v] = SIZE_MAX;
        if (g->values[v]->role == TT_ROLE_ACT && !g->values[v]->base && plan->first[v] >= 0) order[n++] = v;
    }
    sort_vals = (const tt_value *const *)g->values;
    qsort(order, (size_t)n, sizeof *order, by_size_desc);

    /* Place each value in the smallest gap that fits between the placed
     * values whose lifetimes intersect its own (best fit), else at the end. */
    size_t (*iv)[2] = malloc((size_t)(nv + 1) * sizeof *iv);
    if (!iv) {
        free(order);
        free(placed);
        tt_memplan_free(plan);
        return tt_errorf("out of memory planning memory");
    }
    int n_placed = 0;
    for (int i = 0; i < n; i++) {
        int v = order[i], k = 0;
        size_t size = (tt_value_bytes(g->values[v]) + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        plan->naive_bytes += size;
        for (int j = 0; j < n_placed; j++) {
            int u = placed[j];
            if (plan->last[u] < plan->first[v] || plan->last[v] < plan->first[u]) continue;
            iv[k][0] = plan->offset[u];
            iv[k][1] = plan->offset[u] + ((tt_value_bytes(g->values[u]) + ALIGN - 1) & ~(size_t)(ALIGN - 1));
            k++;
        }
        qsort(iv, (size_t)k, sizeof *iv, by_start);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, end = 0;
        for (int j = 0; j < k; j++) {
            if (iv[j][0] > end && iv[j][0] - end >= size && iv[j][0] - end < best_gap) {
                best = end;
                best_gap = iv[j][0] - end;
            }
            if (iv[j][1] > end) end = iv[j][1];
        }
        size_t off = best != SIZE_MAX ? best : end;
        plan->offset[v] = off;
        placed[n_placed++] = v;
        if (off + size > plan->arena_bytes) plan->arena_bytes = off + size;
    }
    for (int v = 0; v < nv; v++) { /* views sit inside their placed roots */
        tt_value *x = g->values[v];
        const int r = tt_value_root(x)->id;
        if (x->base && plan->offset[r] != SIZE_MAX) plan->offset[v] = plan->offset[r] + tt_value_root_offset(x);
    }
    free(iv);
    free(order);
    free(placed);
    return 0;
}

void tt_memplan_free(tt_memplan *plan)
{
    free(plan->offset);
    free(plan->first);
    free(plan->last);
    *plan = (tt_memplan){0};
}

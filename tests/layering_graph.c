/* layering_graph.c — the file graph of test_layering and its circles: Tarjan's
 * strongly connected components, each reported with one shortest cycle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layering_graph.h"

typedef struct {
    int to;
    char *why;
} edge;

typedef struct {
    char *name;
    edge *out;
    int n_out, cap_out;
} node;

struct lg_graph {
    node *nodes;
    int n, cap, n_edges;
};

static void *grow(void *p, int *cap, size_t size)
{
    *cap = *cap ? 2 * *cap : 16;
    void *q = realloc(p, (size_t)*cap * size);
    if (!q) abort();
    return q;
}

static char *dup(const char *s)
{
    char *d = strdup(s);
    if (!d) abort();
    return d;
}

lg_graph *lg_new(void)
{
    lg_graph *g = calloc(1, sizeof *g);
    if (!g) abort();
    return g;
}

void lg_free(lg_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        for (int k = 0; k < g->nodes[i].n_out; k++) free(g->nodes[i].out[k].why);
        free(g->nodes[i].out);
        free(g->nodes[i].name);
    }
    free(g->nodes);
    free(g);
}

/* a few hundred files: a linear search is fast enough */
int lg_node(lg_graph *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->nodes[i].name, name) == 0) return i;
    if (g->n == g->cap) g->nodes = grow(g->nodes, &g->cap, sizeof *g->nodes);
    g->nodes[g->n] = (node){dup(name), NULL, 0, 0};
    return g->n++;
}

void lg_edge(lg_graph *g, int from, int to, const char *why)
{
    if (from == to) return;
    node *a = &g->nodes[from];
    for (int k = 0; k < a->n_out; k++)
        if (a->out[k].to == to) return;
    if (a->n_out == a->cap_out) a->out = grow(a->out, &a->cap_out, sizeof *a->out);
    a->out[a->n_out++] = (edge){to, dup(why)};
    g->n_edges++;
}

int lg_n_nodes(const lg_graph *g) { return g->n; }
int lg_n_edges(const lg_graph *g) { return g->n_edges; }

/* ---- Tarjan's components ---- */
typedef struct {
    const lg_graph *g;
    int *index, *low, *on_stack, *stack, *comp;
    int next_index, sp, n_comp;
} tarjan;

static void strongconnect(tarjan *t, int v)
{
    t->index[v] = t->low[v] = t->next_index++;
    t->stack[t->sp++] = v;
    t->on_stack[v] = 1;
    const node *a = &t->g->nodes[v];
    for (int k = 0; k < a->n_out; k++) {
        const int w = a->out[k].to;
        if (t->index[w] < 0) {
            strongconnect(t, w);
            if (t->low[w] < t->low[v]) t->low[v] = t->low[w];
        } else if (t->on_stack[w] && t->index[w] < t->low[v]) t->low[v] = t->index[w];
    }
    if (t->low[v] != t->index[v]) return;
    int w;
    do {
        w = t->stack[--t->sp];
        t->on_stack[w] = 0;
        t->comp[w] = t->n_comp;
    } while (w != v);
    t->n_comp++;
}

static const lg_graph *sort_graph; /* for the comparators (qsort has no context) */
static int by_name(const void *a, const void *b)
{
    return strcmp(sort_graph->nodes[*(const int *)a].name, sort_graph->nodes[*(const int *)b].name);
}
static int by_first(const void *a, const void *b)
{
    return strcmp(sort_graph->nodes[**(int *const *)a].name, sort_graph->nodes[**(int *const *)b].name);
}

static void append(char **s, size_t *len, size_t *cap, const char *text)
{
    const size_t n = strlen(text);
    if (*len + n + 1 > *cap) {
        *cap = 2 * (*len + n + 1);
        *s = realloc(*s, *cap);
        if (!*s) abort();
    }
    memcpy(*s + *len, text, n + 1);
    *len += n;
}

/* The shortest cycle from start back to it inside component c (breadth first). */
static char *shortest_cycle(const lg_graph *g, const int *comp, int start)
{
    int *prev = malloc(sizeof *prev * (size_t)g->n), *prev_edge = malloc(sizeof *prev_edge * (size_t)g->n),
        *queue = malloc(sizeof *queue * (size_t)g->n);
    if (!prev || !prev_edge || !queue) abort();
    for (int i = 0; i < g->n; i++) prev[i] = -1;
    int head = 0, tail = 0, last = -1, last_edge = -1;
    queue[tail++] = start;
    prev[start] = start;
    while (head < tail && last < 0) {
        const int u = queue[head++];
        const node *a = &g->nodes[u];
        for (int k = 0; k < a->n_out && last < 0; k++) {
            const int w = a->out[k].to;
            if (comp[w] != comp[start]) continue;
            if (w == start) last = u, last_edge = k;
            else if (prev[w] < 0) prev[w] = u, prev_edge[w] = k, queue[tail++] = w;
        }
    }
    /* the path start -> ... -> last, walked back from last */
    int n = 0;
    for (int v = last; v != start; v = prev[v]) queue[n++] = v;
    char *s = NULL;
    size_t len = 0, cap = 0;
    append(&s, &len, &cap, g->nodes[start].name);
    for (int i = n - 1; i >= -1; i--) {
        const int v = i >= 0 ? queue[i] : start;
        const edge *e = i >= 0 ? &g->nodes[prev[v]].out[prev_edge[v]] : &g->nodes[last].out[last_edge];
        append(&s, &len, &cap, " -> ");
        append(&s, &len, &cap, g->nodes[v].name);
        append(&s, &len, &cap, " (");
        append(&s, &len, &cap, e->why);
        append(&s, &len, &cap, ")");
    }
    free(prev), free(prev_edge), free(queue);
    return s;
}

int lg_circles(const lg_graph *g, lg_circle_fn fn, void *ctx)
{
    const size_t n = (size_t)(g->n ? g->n : 1);
    tarjan t = {g, malloc(n * sizeof(int)), malloc(n * sizeof(int)), calloc(n, sizeof(int)), malloc(n * sizeof(int)),
                malloc(n * sizeof(int)), 0, 0, 0};
    if (!t.index || !t.low || !t.on_stack || !t.stack || !t.comp) abort();
    for (int i = 0; i < g->n; i++) t.index[i] = -1;
    for (int i = 0; i < g->n; i++)
        if (t.index[i] < 0) strongconnect(&t, i);
    /* the members of each component of more than one node, sorted by name */
    int **members = calloc((size_t)(t.n_comp ? t.n_comp : 1), sizeof *members);
    int n_circles = 0, *size = calloc((size_t)(t.n_comp ? t.n_comp : 1), sizeof *size);
    if (!members || !size) abort();
    for (int i = 0; i < g->n; i++) size[t.comp[i]]++;
    sort_graph = g;
    for (int c = 0; c < t.n_comp; c++) {
        if (size[c] < 2) continue;
        int *m = members[n_circles++] = malloc(sizeof *m * (size_t)(size[c] + 1));
        if (!m) abort();
        int k = 1;
        for (int i = 0; i < g->n; i++)
            if (t.comp[i] == c) m[k++] = i;
        m[0] = size[c]; /* the count, ahead of the members */
        qsort(m + 1, (size_t)size[c], sizeof *m, by_name);
    }
    for (int c = 0; c < n_circles; c++) members[c]++; /* sort by the first member */
    qsort(members, (size_t)n_circles, sizeof *members, by_first);
    for (int c = 0; c < n_circles; c++) {
        const int *m = members[c], cnt = m[-1];
        const char **names = malloc(sizeof *names * (size_t)cnt);
        if (!names) abort();
        for (int i = 0; i < cnt; i++) names[i] = g->nodes[m[i]].name;
        char *cycle = shortest_cycle(g, t.comp, m[0]);
        fn(ctx, &(lg_circle){cnt, names, cycle});
        free(cycle);
        free(names);
        free(members[c] - 1);
    }
    free(members), free(size);
    free(t.index), free(t.low), free(t.on_stack), free(t.stack), free(t.comp);
    return n_circles;
}

/* layering_graph.h — test_layering's dependency graph between files (includes,
 * or calls between object files) and its finder of circles: the strongly
 * connected components of more than one file, each named by one cycle. */
#ifndef TT_TEST_LAYERING_GRAPH_H
#define TT_TEST_LAYERING_GRAPH_H

typedef struct lg_graph lg_graph;

lg_graph *lg_new(void);
void lg_free(lg_graph *g);
/* The node of that name (added when new). */
int lg_node(lg_graph *g, const char *name);
/* from depends on to; why says how ("#include \"x.h\"", "uses tt_foo"): the
 * first reason given for a pair is kept. A node's edge to itself is dropped (a
 * file including its own header, a file calling itself). */
void lg_edge(lg_graph *g, int from, int to, const char *why);
int lg_n_nodes(const lg_graph *g);
int lg_n_edges(const lg_graph *g);

/* One circle: the component's members (sorted by name) and one shortest cycle
 * through its first member, as text: "a -> b (why) -> a (why)". */
typedef struct {
    int n;
    const char *const *members;
    const char *cycle;
} lg_circle;
typedef void (*lg_circle_fn)(void *ctx, const lg_circle *c);
/* Calls fn for every component of more than one node, in name order of their
 * first members; returns how many there are. */
int lg_circles(const lg_graph *g, lg_circle_fn fn, void *ctx);

#endif

/* graph.h — the graph IR: values (shape, dtype, role) and nodes (op id,
 * inputs, outputs, attributes, scope), and the container that records them.
 * Models build graphs through the op builders in ops/ops.h; passes and the
 * executor read them. */
#ifndef TT_GRAPH_H
#define TT_GRAPH_H

#include "core/core.h"
#include "core/tensor.h"

typedef enum {
    TT_ROLE_ACT = 0, /* intermediate: lives within one run, placed by the memory plan */
    TT_ROLE_PARAM,   /* persistent weight, bound to a tensor */
    TT_ROLE_STATE,   /* persistent non-weight: grad accumulators, moments, KV cache */
    TT_ROLE_INPUT,   /* fed by the host before each run: token ids, targets, scalars */
    TT_ROLE_CONST,   /* computed once at build time, owned by the graph (RoPE tables) */
} tt_role;

#define TT_MAX_IN 8
#define TT_MAX_OUT 4

typedef struct tt_node tt_node;

typedef struct tt_value {
    int id;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    tt_role role;
    tt_node *producer; /* NULL for non-activations */
    int out_index;
    int is_output;     /* kept alive to the end of the run so the host can read it */
    char name[96];
    void *data;        /* bound buffer (persistent, input, const) or set by the executor */
} tt_value;

typedef struct {
    int64_t i[8];
    double f[4];
} tt_attrs;

struct tt_node {
    int id;
    int op;
    int n_in, n_out;
    tt_value *in[TT_MAX_IN];
    tt_value *out[TT_MAX_OUT];
    tt_attrs a;
    char scope[64];
};

typedef struct tt_graph {
    tt_node **nodes;
    int n_nodes, cap_nodes;
    tt_value **values;
    int n_values, cap_values;
    char scope[64];   /* scope given to new nodes, e.g. "layers.3.attn" */
    void **owned;     /* const buffers owned by the graph */
    int n_owned, cap_owned;
    int failed;       /* a builder error happened: tt_last_error() says which */
    /* Mixed precision: TT_BF16 makes the activations that embeddings produce
     * from fp32 tables bf16, and every op after them follows its inputs (fp32
     * weights, fp32 statistics and fp32 parameter gradients stay fp32). */
    tt_dtype act_dtype;
} tt_graph;

tt_graph *tt_graph_new(void);
void tt_graph_free(tt_graph *g);
void tt_graph_set_scope(tt_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* New values. Shapes are given as ndim + dims. */
tt_value *tt_value_new(tt_graph *g, tt_role role, tt_dtype dt, int ndim, const int64_t *shape);
tt_value *tt_graph_bind(tt_graph *g, tt_role role, const tt_tensor *t); /* param/state/input view */
tt_value *tt_graph_input(tt_graph *g, const char *name, tt_dtype dt, int ndim, const int64_t *shape);
tt_value *tt_graph_const(tt_graph *g, tt_dtype dt, int ndim, const int64_t *shape, void **data);
void tt_graph_mark_output(tt_graph *g, tt_value *v);

/* A node with outputs already created by the caller (ops/ use this). */
tt_node *tt_node_new(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                     const tt_attrs *a);
/* A copy of n (op, attributes, scope) reading in[0..n->n_in) instead of n's
 * inputs, with fresh activation outputs shaped like n's; appended last. */
tt_node *tt_node_clone(tt_graph *g, const tt_node *n, tt_value *const *in);
/* Replace the node order by order[0..g->n_nodes), a permutation of the
 * graph's nodes, and renumber node ids to the new positions. Refused (graph
 * unchanged) unless every node appears once and each activation a node reads
 * is produced by an earlier node. Passes that insert nodes use this. */
tt_err tt_graph_set_order(tt_graph *g, tt_node *const *order);
/* The same for a subset: order[0..n) are distinct nodes of the graph in a
 * valid order; the nodes not in it are removed (and freed), and the values
 * they produced are left without a producer. Passes that replace nodes use this. */
tt_err tt_graph_set_nodes(tt_graph *g, tt_node *const *order, int n);
/* Record a build error once (builders return NULL after it). */
void *tt_graph_fail(tt_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline int64_t tt_value_numel(const tt_value *v) { return tt_numel(v->ndim, v->shape); }
static inline size_t tt_value_bytes(const tt_value *v)
{
    return (size_t)tt_value_numel(v) * tt_dtype_size(v->dtype);
}
const char *tt_role_name(tt_role r);
/* "f32[64, 128]" into buf */
const char *tt_value_desc(const tt_value *v, char *buf, size_t n);

#endif

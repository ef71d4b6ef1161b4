/* graph.h — the graph IR: values (shape, dtype, role, and for a view its base
 * and byte offset), nodes (op id, any number of inputs and outputs, typed
 * attributes, scope and unit), and the container that records them. Models
 * build graphs through the op builders in ops/ops.h; passes and the executor
 * read them. The IR holds no host pointers into backend memory: a root value
 * may be bound to backend memory (tt_mem), which only the backend resolves. */
#ifndef TT_GRAPH_H
#define TT_GRAPH_H

#include "core/core.h"
#include "core/tensor.h"

typedef enum {
    TT_ROLE_ACT = 0, /* intermediate: lives within one run, placed by the memory plan */
    TT_ROLE_PARAM,   /* persistent weight (a unit's flat buffer, or a view of one) */
    TT_ROLE_STATE,   /* persistent non-weight: grad accumulators, moments, KV cache */
    TT_ROLE_INPUT,   /* written by the host before each run: token ids, targets, scalars */
    TT_ROLE_CONST,   /* computed once at build time on the host (RoPE tables), uploaded once */
    TT_ROLE_FROZEN,  /* persistent weight that is not trained (LoRA's base): no gradient, no optimizer state */
} tt_role;

/* A backend buffer: opaque to everything above the backend, which only ever
 * passes it back to the backend that made it. */
typedef struct tt_buf tt_buf;
/* Bytes at `off` in a backend buffer. */
typedef struct {
    tt_buf *buf;
    size_t off;
} tt_mem;

typedef struct tt_node tt_node;

typedef struct tt_value {
    int id;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    tt_role role;      /* a view has its base's role */
    /* A view: the bytes [offset, offset + its size) of base, which may itself
     * be a view (a chain ends at a root). Parameters are views of their unit's
     * flat buffer; passes know them by (unit, offset), never by address. A
     * view that a node produces is valid from that node on: the wait of a
     * collective produces a view of what the collective writes, and readers
     * read views of it, so they come after the wait. */
    struct tt_value *base;
    size_t offset;
    int unit;          /* the model unit a param/state root holds, or a view's base's; -1: none */
    tt_node *producer; /* NULL for values no node makes */
    int out_index;
    int is_output;     /* kept alive to the end of the run so the host can read it */
    char name[96];
    tt_mem mem;        /* a root bound to backend memory (tt_value_bind); buf NULL: the executor provides it */
    void *const_data;  /* TT_ROLE_CONST: the host data, owned by the graph */
} tt_value;

/* Node attributes are a typed struct per op (ops/ops.h declares them), held
 * by the node as a copy: no fixed number of integer or float slots. */
struct tt_node {
    int id;
    int op;
    int n_in, n_out, cap_out;
    tt_value **in, **out;
    unsigned accumulate; /* bit k: output k is added into, not overwritten (the op table says which may) */
    int unit;            /* the model unit the node computes for (forward and its backward); -1: none */
    void *attrs;         /* the op's attribute struct, or NULL */
    size_t attrs_size;
    char scope[64];
};

/* What the model builder says of a unit: its name and whether it is a
 * repeated transformer block (activation checkpointing works block by block). */
typedef struct {
    char name[48];
    int block;
} tt_unit_info;

typedef struct tt_graph {
    tt_node **nodes;
    int n_nodes, cap_nodes;
    tt_value **values;
    int n_values, cap_values;
    char scope[64];   /* scope given to new nodes, e.g. "layers.3.attention" */
    int unit;         /* unit given to new nodes, -1 outside any */
    tt_unit_info *units;
    int n_units, cap_units;
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
/* Units: declared once (the model's bind), then set as the current unit while
 * the model builds its nodes. */
int tt_graph_add_unit(tt_graph *g, const char *name, int block);
void tt_graph_set_unit(tt_graph *g, int unit);

/* New values. Shapes are given as ndim + dims. */
tt_value *tt_value_new(tt_graph *g, tt_role role, tt_dtype dt, int ndim, const int64_t *shape);
/* A view of base at a byte offset, with its own dtype and shape; it must lie
 * inside base (a view of a view stays one: its chain ends at the root). */
tt_value *tt_value_view(tt_graph *g, tt_value *base, size_t offset, tt_dtype dt, int ndim, const int64_t *shape);
tt_value *tt_graph_input(tt_graph *g, const char *name, tt_dtype dt, int ndim, const int64_t *shape);
/* A constant: *data receives a host buffer of its size to fill now. */
tt_value *tt_graph_const(tt_graph *g, tt_dtype dt, int ndim, const int64_t *shape, void **data);
void tt_graph_mark_output(tt_graph *g, tt_value *v);
/* Bind a root param, state or input value to backend memory that outlives
 * the executors of the graph (the train state's buffers, a KV cache). */
void tt_value_bind(tt_value *v, tt_mem mem);

/* The root of a value (itself, or the end of its chain of bases) and its
 * byte offset in it. */
static inline tt_value *tt_value_root(tt_value *v)
{
    while (v->base) v = v->base;
    return v;
}
static inline size_t tt_value_root_offset(const tt_value *v)
{
    size_t off = 0;
    for (; v->base; v = v->base) off += v->offset;
    return off;
}

/* A node with outputs already created by the caller (ops/ use this); attrs
 * (attrs_size bytes, or NULL) is copied. */
tt_node *tt_node_new(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                     const void *attrs, size_t attrs_size);
/* Append v as a new last output of n (an op whose backward adds outputs to
 * its forward node, as the fused loss does). */
tt_err tt_node_add_output(tt_graph *g, tt_node *n, tt_value *v);
/* A copy of n (op, attributes, scope, unit) reading in[0..n->n_in) instead
 * of n's inputs, with fresh activation outputs shaped like n's; appended last. */
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

/* graph.c — creating values and nodes, and the graph's own bookkeeping. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"

tt_graph *tt_graph_new(void)
{
    tt_graph *g = calloc(1, sizeof *g);
    if (!g) tt_errorf("out of memory");
    else g->unit = -1;
    return g;
}

static void node_free(tt_node *n)
{
    if (!n) return;
    free(n->in);
    free(n->out);
    free(n->attrs);
    free(n);
}

void tt_graph_free(tt_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) node_free(g->nodes[i]);
    for (int i = 0; i < g->n_values; i++) free(g->values[i]);
    for (int i = 0; i < g->n_owned; i++) tt_free(g->owned[i]);
    free(g->nodes);
    free(g->values);
    free(g->owned);
    free(g->units);
    free(g);
}

void tt_graph_set_scope(tt_graph *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->scope, sizeof g->scope, fmt, ap);
    va_end(ap);
}

/* Grow *arr (elements of `size` bytes) to hold `need`. */
static int grow_n(void *arr, int *cap, int need, size_t size)
{
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*(void **)arr, (size_t)nc * size);
    if (!p) return tt_errorf("out of memory growing graph");
    *(void **)arr = p;
    *cap = nc;
    return 0;
}
static int grow(void ***arr, int *cap, int need) { return grow_n(arr, cap, need, sizeof **arr); }

int tt_graph_add_unit(tt_graph *g, const char *name, int block)
{
    if (g->failed) return -1;
    if (grow_n(&g->units, &g->cap_units, g->n_units + 1, sizeof *g->units)) {
        g->failed = 1;
        return -1;
    }
    tt_unit_info *u = &g->units[g->n_units];
    snprintf(u->name, sizeof u->name, "%s", name);
    u->block = block;
    return g->n_units++;
}

void tt_graph_set_unit(tt_graph *g, int unit) { g->unit = unit; }

void *tt_graph_fail(tt_graph *g, const char *fmt, ...)
{
    if (!g->failed) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (g->scope[0]) tt_errorf("%s: %s", g->scope, msg);
        else tt_errorf("%s", msg);
        g->failed = 1;
    }
    return NULL;
}

tt_value *tt_value_new(tt_graph *g, tt_role role, tt_dtype dt, int ndim, const int64_t *shape)
{
    if (g->failed) return NULL;
    if (ndim < 0 || ndim > TT_MAX_DIMS) return tt_graph_fail(g, "value with %d dims", ndim);
    if (grow((void ***)&g->values, &g->cap_values, g->n_values + 1)) {
        g->failed = 1;
        return NULL;
    }
    tt_value *v = calloc(1, sizeof *v);
    if (!v) return tt_graph_fail(g, "out of memory");
    v->id = g->n_values;
    v->unit = -1;
    v->role = role;
    v->dtype = dt;
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) v->shape[i] = shape[i];
    g->values[g->n_values++] = v;
    return v;
}

tt_value *tt_value_view(tt_graph *g, tt_value *base, size_t offset, tt_dtype dt, int ndim, const int64_t *shape)
{
    if (g->failed) return NULL;
    if (!base) return tt_graph_fail(g, "view of a missing value");
    tt_value *v = tt_value_new(g, base->role, dt, ndim, shape);
    if (!v) return NULL;
    /* inside the value it is made from (a view's bounds are within its root's) */
    if (offset > tt_value_bytes(base) || tt_value_bytes(v) > tt_value_bytes(base) - offset)
        return tt_graph_fail(g, "view of %zu bytes at offset %zu is outside '%s' (%zu bytes)", tt_value_bytes(v), offset,
                             base->name, tt_value_bytes(base));
    v->base = base;
    v->offset = offset;
    v->unit = base->unit;
    return v;
}

void tt_value_bind(tt_value *v, tt_mem mem)
{
    if (v) v->mem = mem;
}

tt_value *tt_graph_input(tt_graph *g, const char *name, tt_dtype dt, int ndim, const int64_t *shape)
{
    tt_value *v = tt_value_new(g, TT_ROLE_INPUT, dt, ndim, shape);
    if (v) snprintf(v->name, sizeof v->name, "%s", name);
    return v;
}

tt_value *tt_graph_const(tt_graph *g, tt_dtype dt, int ndim, const int64_t *shape, void **data)
{
    tt_value *v = tt_value_new(g, TT_ROLE_CONST, dt, ndim, shape);
    if (!v) return NULL;
    if (grow(&g->owned, &g->cap_owned, g->n_owned + 1) || !(v->const_data = tt_alloc(tt_value_bytes(v) + 1))) {
        g->failed = 1;
        return NULL;
    }
    g->owned[g->n_owned++] = v->const_data;
    *data = v->const_data;
    return v;
}

void tt_graph_mark_output(tt_graph *g, tt_value *v)
{
    (void)g;
    if (v) v->is_output = 1;
}

tt_node *tt_node_new(tt_graph *g, int op, int n_in, tt_value *const *in, int n_out, tt_value *const *out,
                     const void *attrs, size_t attrs_size)
{
    if (g->failed) return NULL;
    if (n_in < 0 || n_out < 0) return tt_graph_fail(g, "node with %d inputs and %d outputs", n_in, n_out);
    for (int i = 0; i < n_in; i++)
        if (!in[i]) return tt_graph_fail(g, "node input %d is missing", i);
    for (int i = 0; i < n_out; i++)
        if (!out[i]) return tt_graph_fail(g, "node output %d is missing", i);
    if (grow((void ***)&g->nodes, &g->cap_nodes, g->n_nodes + 1)) {
        g->failed = 1;
        return NULL;
    }
    tt_node *n = calloc(1, sizeof *n);
    if (n) {
        n->in = calloc((size_t)n_in + 1, sizeof *n->in);
        n->out = calloc((size_t)n_out + 1, sizeof *n->out);
        n->attrs = attrs && attrs_size ? malloc(attrs_size) : NULL;
    }
    if (!n || !n->in || !n->out || (attrs && attrs_size && !n->attrs)) {
        node_free(n);
        return tt_graph_fail(g, "out of memory");
    }
    n->id = g->n_nodes;
    n->op = op;
    n->n_in = n_in;
    n->n_out = n->cap_out = n_out;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    for (int i = 0; i < n_out; i++) {
        n->out[i] = out[i];
        out[i]->producer = n;
        out[i]->out_index = i;
    }
    if (n->attrs) {
        memcpy(n->attrs, attrs, attrs_size);
        n->attrs_size = attrs_size;
    }
    n->unit = g->unit;
    snprintf(n->scope, sizeof n->scope, "%s", g->scope);
    g->nodes[g->n_nodes++] = n;
    return n;
}

tt_err tt_node_add_output(tt_graph *g, tt_node *n, tt_value *v)
{
    if (g->failed || !v) return -1;
    if (n->n_out == n->cap_out) {
        tt_value **p = realloc(n->out, ((size_t)n->cap_out * 2 + 2) * sizeof *p);
        if (!p) {
            tt_graph_fail(g, "out of memory");
            return -1;
        }
        n->out = p;
        n->cap_out = n->cap_out * 2 + 2;
    }
    v->producer = n;
    v->out_index = n->n_out;
    n->out[n->n_out++] = v;
    return 0;
}

tt_node *tt_node_clone(tt_graph *g, const tt_node *n, tt_value *const *in)
{
    if (g->failed) return NULL;
    tt_value **out = calloc((size_t)n->n_out + 1, sizeof *out);
    if (!out) return tt_graph_fail(g, "out of memory");
    tt_node *c = NULL;
    int o = 0;
    for (; o < n->n_out; o++)
        if (!(out[o] = tt_value_new(g, TT_ROLE_ACT, n->out[o]->dtype, n->out[o]->ndim, n->out[o]->shape))) break;
    if (o == n->n_out) c = tt_node_new(g, n->op, n->n_in, in, n->n_out, out, n->attrs, n->attrs_size);
    free(out);
    if (c) {
        snprintf(c->scope, sizeof c->scope, "%s", n->scope);
        c->unit = n->unit;
        c->accumulate = n->accumulate;
    }
    return c;
}

/* An activation may be read once its root has been written and every view
 * along its chain that some node produces (a collective's wait) has been. */
static int ready(const tt_value *v, const char *made)
{
    const tt_value *r = v;
    for (; r->base; r = r->base)
        if (r->producer && !made[r->id]) return 0;
    return made[r->id] || (v != r && made[v->id]);
}

tt_err tt_graph_set_nodes(tt_graph *g, tt_node *const *order, int n)
{
    int nn = g->n_nodes;
    /* seen[] marks nodes by their current id; made[] marks produced values */
    char *seen = calloc((size_t)nn + 1, 1), *made = calloc((size_t)g->n_values + 1, 1);
    tt_err rc = 0;
    if (!seen || !made) rc = tt_errorf("out of memory reordering the graph");
    if (!rc && (n < 0 || n > nn)) rc = tt_errorf("new node order: %d nodes for a graph of %d", n, nn);
    for (int i = 0; i < n && !rc; i++) {
        const tt_node *x = order[i];
        if (!x || x->id < 0 || x->id >= nn || g->nodes[x->id] != x || seen[x->id]) {
            rc = tt_errorf("new node order: position %d is not a distinct node of the graph", i);
            break;
        }
        seen[x->id] = 1;
        for (int k = 0; k < x->n_in && !rc; k++) {
            const tt_value *v = x->in[k];
            if (v->role == TT_ROLE_ACT && !ready(v, made))
                rc = tt_errorf("new node order: %s%snode at position %d (op %d) reads value %d before it is produced",
                               x->scope, x->scope[0] ? ": " : "", i, x->op, v->id);
        }
        for (int k = 0; k < x->n_out; k++) /* writing a view of an activation makes (part of) its root */
            made[x->out[k]->id] = made[tt_value_root(x->out[k])->id] = 1;
    }
    if (!rc) {
        for (int i = 0; i < nn; i++) { /* the nodes left out go; values they made have no producer now */
            tt_node *x = g->nodes[i];
            if (seen[i]) continue;
            for (int k = 0; k < x->n_out; k++)
                if (x->out[k]->producer == x) x->out[k]->producer = NULL;
            node_free(x);
        }
        memmove(g->nodes, order, (size_t)n * sizeof *g->nodes);
        g->n_nodes = n;
        for (int i = 0; i < n; i++) g->nodes[i]->id = i;
    }
    free(seen);
    free(made);
    return rc;
}

tt_err tt_graph_set_order(tt_graph *g, tt_node *const *order)
{
    return tt_graph_set_nodes(g, order, g->n_nodes);
}

const char *tt_role_name(tt_role r)
{
    static const char *names[] = {"activation", "param", "state", "input", "const", "frozen"};
    return (unsigned)r < sizeof names / sizeof *names ? names[r] : "?";
}

const char *tt_value_desc(const tt_value *v, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%s[", tt_dtype_name(v->dtype));
    for (int i = 0; i < v->ndim && k > 0 && (size_t)k < n; i++)
        k += snprintf(buf + k, n - (size_t)k, i ? ", %lld" : "%lld", (long long)v->shape[i]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
    return buf;
}

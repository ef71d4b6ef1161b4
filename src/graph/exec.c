/* exec.c — the executor: binds activation buffers (from the arena, or one
 * allocation per value) and runs each node's kernel in order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/exec.h"

struct tt_exec {
    tt_graph *g;
    const tt_backend *be;
    tt_exec_mode mode;
    tt_memplan plan;
    char *arena;
    double flops;
    double *t_start, *t_dur;
};

tt_exec *tt_exec_new(tt_graph *g, const tt_backend *be, tt_exec_mode mode)
{
    if (g->failed) return NULL;
    for (int i = 0; i < g->n_values; i++) {
        const tt_value *v = g->values[i];
        if (v->role != TT_ROLE_ACT && !v->data) {
            tt_errorf("%s value '%s' has no buffer bound", tt_role_name(v->role), v->name);
            return NULL;
        }
    }
    tt_exec *e = calloc(1, sizeof *e);
    if (!e) {
        tt_errorf("out of memory");
        return NULL;
    }
    e->g = g;
    e->be = be;
    e->mode = mode;
    if (tt_memplan_build(g, &e->plan)) {
        free(e);
        return NULL;
    }
    if (mode == TT_EXEC_GRAPH) {
        e->arena = be->alloc(e->plan.arena_bytes);
        if (!e->arena) {
            tt_exec_free(e);
            return NULL;
        }
        for (int i = 0; i < g->n_values; i++)
            if (e->plan.offset[i] != SIZE_MAX) g->values[i]->data = e->arena + e->plan.offset[i];
    }
    for (int i = 0; i < g->n_nodes; i++) e->flops += tt_ops[g->nodes[i]->op].flops(g->nodes[i]);
    return e;
}

static tt_err node_error(const tt_node *n)
{
    char shapes[512] = "";
    size_t k = 0;
    for (int i = 0; i < n->n_in && k < sizeof shapes - 64; i++) {
        char d[96];
        k += (size_t)snprintf(shapes + k, sizeof shapes - k, "%s%s", i ? ", " : "", tt_value_desc(n->in[i], d, sizeof d));
    }
    return tt_error_prefix("%s%s%s (inputs %s): ", n->scope, n->scope[0] ? ": " : "", tt_op_name(n->op), shapes);
}

static tt_err check_finite(const tt_node *n)
{
    for (int o = 0; o < n->n_out; o++) {
        const tt_value *v = n->out[o];
        int64_t cnt = tt_value_numel(v);
        for (int64_t i = 0; i < cnt; i++) {
            double x = v->dtype == TT_F32    ? ((const float *)v->data)[i]
                       : v->dtype == TT_F64  ? ((const double *)v->data)[i]
                       : v->dtype == TT_BF16 ? tt_bf16_to_f32(((const uint16_t *)v->data)[i])
                                             : 0.0;
            /* attention's logsumexp is -inf for rows that see no key (padding) */
            if (isnan(x) || (isinf(x) && !((n->op == TT_OP_ATTENTION || n->op == TT_OP_ATTENTION_QKV) && o == 1 && x < 0))) {
                char d[96];
                tt_errorf("output %d %s has %s at element %lld", o, tt_value_desc(v, d, sizeof d),
                          isnan(x) ? "NaN" : "Inf", (long long)i);
                return node_error(n);
            }
        }
    }
    return 0;
}

tt_err tt_exec_run(tt_exec *e)
{
    tt_graph *g = e->g;
    int eager = e->mode != TT_EXEC_GRAPH;
    int reference = e->mode == TT_EXEC_DEBUG;
    tt_err rc = 0;
    if (eager) /* outputs kept from the previous run */
        for (int v = 0; v < g->n_values; v++)
            if (g->values[v]->role == TT_ROLE_ACT && g->values[v]->data) {
                e->be->free(g->values[v]->data);
                g->values[v]->data = NULL;
            }
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        tt_node *n = g->nodes[i];
        if (eager) /* one allocation per activation, made when it is produced (a state output has its buffer) */
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o]->role == TT_ROLE_ACT && !(n->out[o]->data = e->be->alloc(tt_value_bytes(n->out[o]))))
                    rc = -1;
        void *in[TT_MAX_IN], *out[TT_MAX_OUT];
        for (int k = 0; k < n->n_in; k++) in[k] = n->in[k]->data;
        for (int k = 0; k < n->n_out; k++) out[k] = n->out[k]->data;
        double t0 = e->t_start ? tt_now() : 0;
        if (!rc && (rc = e->be->run(n, in, out, reference))) node_error(n);
        if (e->t_start) {
            e->t_start[i] = t0;
            e->t_dur[i] = tt_now() - t0;
        }
        if (!rc && reference) rc = check_finite(n);
        if (eager) /* free what this node read or made for the last time */
            for (int v = 0; v < g->n_values; v++) {
                tt_value *x = g->values[v];
                if (x->role == TT_ROLE_ACT && x->data && e->plan.last[v] == i && !x->is_output) {
                    e->be->free(x->data);
                    x->data = NULL;
                }
            }
    }
    return rc;
}

void tt_exec_free(tt_exec *e)
{
    if (!e) return;
    for (int v = 0; v < e->g->n_values; v++) {
        tt_value *x = e->g->values[v];
        if (x->role != TT_ROLE_ACT) continue;
        if (e->mode != TT_EXEC_GRAPH && x->data) e->be->free(x->data);
        x->data = NULL;
    }
    if (e->arena) e->be->free(e->arena);
    tt_memplan_free(&e->plan);
    free(e);
}

size_t tt_exec_arena_bytes(const tt_exec *e) { return e->plan.arena_bytes; }
double tt_exec_flops(const tt_exec *e) { return e->flops; }
void tt_exec_set_timing(tt_exec *e, double *start, double *dur)
{
    e->t_start = start;
    e->t_dur = start ? dur : NULL;
}
const tt_graph *tt_exec_graph(const tt_exec *e) { return e->g; }

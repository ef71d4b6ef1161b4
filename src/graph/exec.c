/* exec.c — the executor: resolves every value to backend memory (the arena,
 * one allocation per activation, bound memory or its own) and enqueues each
 * node's kernel in order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "graph/exec.h"

#define ALIGN 64

struct tt_exec {
    tt_graph *g;
    const tt_backend *be;
    tt_queue *q;
    int own_queue;
    tt_exec_mode mode;
    tt_memplan plan;
    tt_buf *arena;     /* graph mode: every activation */
    size_t arena_cap;  /* its bytes */
    int borrowed;      /* the arena is another executor's (tt_exec_new_sharing) */
    tt_buf *owned;     /* roots nobody bound: inputs, constants, unbound params and state */
    size_t *owned_off; /* per value id: its offset in owned, SIZE_MAX if not there */
    tt_buf **act;      /* eager and debug: per root activation, its allocation while live */
    tt_mem *args;      /* one node's inputs then outputs */
    int max_args;
    double flops;
    double *t_start, *t_dur;
    const tt_node *nonfinite;
    tt_coll_req **req; /* per node id: the collective a start node began, until its wait */
    double progress_seconds; /* timed runs: spent advancing collectives between nodes */
    double last_progress;    /* when they were last advanced (tt_now()) */
    int pending;
    void *check;       /* host copy of a value being checked for NaN/Inf */
    size_t check_cap;
};

static size_t up(size_t b) { return (b + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

static void exec_release(tt_exec *e)
{
    if (!e) return;
    /* work still queued may use the buffers (a run that failed before a read) */
    if (e->q) e->be->finish(e->q);
    for (int v = 0; e->act && v < e->g->n_values; v++)
        if (e->act[v]) e->be->free(e->act[v]);
    if (e->arena && !e->borrowed) e->be->free(e->arena);
    if (e->owned) e->be->free(e->owned);
    if (e->own_queue && e->q) e->be->queue_free(e->q);
    tt_memplan_free(&e->plan);
    free(e->owned_off);
    free(e->act);
    free(e->args);
    free(e->check);
    free(e->req);
    free(e);
}

/* The memory of root value r now, or buf NULL when it has none. */
static tt_mem root_mem(const tt_exec *e, const tt_value *r)
{
    if (r->role == TT_ROLE_ACT) {
        if (e->mode == TT_EXEC_GRAPH)
            return e->plan.offset[r->id] == SIZE_MAX ? (tt_mem){0} : (tt_mem){e->arena, e->plan.offset[r->id]};
        return (tt_mem){e->act[r->id], 0};
    }
    if (r->mem.buf) return r->mem;
    return e->owned_off[r->id] == SIZE_MAX ? (tt_mem){0} : (tt_mem){e->owned, e->owned_off[r->id]};
}

static tt_mem value_mem(const tt_exec *e, const tt_value *v)
{
    tt_mem m = root_mem(e, tt_value_root((tt_value *)v));
    if (m.buf) m.off += tt_value_root_offset(v);
    return m;
}

tt_err tt_exec_mem(const tt_exec *e, const tt_value *v, tt_mem *out)
{
    *out = value_mem(e, v);
    return out->buf ? 0 : tt_errorf("value '%s' (%d) has no memory now", v->name, v->id);
}

tt_exec *tt_exec_new(tt_graph *g, const tt_backend *be, tt_queue *q, tt_exec_mode mode)
{
    return tt_exec_new_sharing(g, be, q, mode, NULL);
}

tt_exec *tt_exec_new_sharing(tt_graph *g, const tt_backend *be, tt_queue *q, tt_exec_mode mode, tt_exec *with)
{
    if (g->failed) return NULL;
    tt_exec *e = calloc(1, sizeof *e);
    if (!e) {
        tt_errorf("out of memory");
        return NULL;
    }
    e->g = g;
    e->be = be;
    e->mode = mode;
    e->q = q;
    if (!q) {
        e->own_queue = 1;
        if (!(e->q = be->queue_new())) goto fail;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        if (n->n_in + n->n_out > e->max_args) e->max_args = n->n_in + n->n_out;
        e->flops += tt_ops[n->op]->flops(n);
        if (!(tt_ops[n->op]->flags & TT_OPF_COMM) && !be->supports(n->op, tt_node_dtype(n))) {
            tt_errorf("backend %s has no kernel for %s in %s (%s)", be->name, tt_op_name(n->op),
                      tt_dtype_name(tt_node_dtype(n)), n->scope[0] ? n->scope : "no scope");
            goto fail;
        }
    }
    e->args = calloc((size_t)e->max_args + 1, sizeof *e->args);
    e->req = calloc((size_t)g->n_nodes + 1, sizeof *e->req);
    e->owned_off = malloc(((size_t)g->n_values + 1) * sizeof *e->owned_off);
    if (mode != TT_EXEC_GRAPH) e->act = calloc((size_t)g->n_values + 1, sizeof *e->act);
    if (!e->args || !e->req || !e->owned_off || (mode != TT_EXEC_GRAPH && !e->act)) {
        tt_errorf("out of memory");
        goto fail;
    }
    if (tt_memplan_build(g, &e->plan)) goto fail;

    /* roots that are not activations and that nobody bound get memory here,
     * but for params and state no node touches (a unit's whole weights,
     * once the FSDP pass has moved every reader onto gathered buckets) */
    size_t owned = 0;
    unsigned char *touched = calloc((size_t)g->n_values + 1, 1); /* per root: some node reads or writes it */
    if (!touched) {
        tt_errorf("out of memory");
        goto fail;
    }
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_in + g->nodes[i]->n_out; k++) {
            const tt_node *n = g->nodes[i];
            touched[tt_value_root(k < n->n_in ? n->in[k] : n->out[k - n->n_in])->id] = 1;
        }
    for (int i = 0; i < g->n_values; i++) {
        const tt_value *v = g->values[i];
        const int unused = !touched[i] && (v->role == TT_ROLE_PARAM || v->role == TT_ROLE_STATE || v->role == TT_ROLE_FROZEN);
        e->owned_off[i] = SIZE_MAX;
        if (v->base || v->role == TT_ROLE_ACT || v->mem.buf || unused) continue;
        e->owned_off[i] = owned;
        owned += up(tt_value_bytes(v));
    }
    free(touched);
    if (owned && !(e->owned = be->alloc(owned))) goto fail;
    for (int i = 0; i < g->n_values; i++) {
        const tt_value *v = g->values[i];
        if (v->role == TT_ROLE_CONST && !v->base && v->const_data &&
            be->upload(e->q, value_mem(e, v), v->const_data, tt_value_bytes(v)))
            goto fail;
    }
    if (mode == TT_EXEC_GRAPH && with && with->be == be && with->arena && with->arena_cap >= e->plan.arena_bytes) {
        e->arena = with->arena, e->arena_cap = with->arena_cap, e->borrowed = 1;
    } else if (mode == TT_EXEC_GRAPH && e->plan.arena_bytes) {
        if (!(e->arena = be->alloc(e->plan.arena_bytes))) goto fail;
        e->arena_cap = e->plan.arena_bytes;
    }
    if (be->finish(e->q)) goto fail;
    return e;
fail:
    exec_release(e);
    return NULL;
}

static tt_err node_error(const tt_node *n) { return tt_backend_node_error(n); }

/* Debug mode: each value the node wrote, copied back to the host and scanned. */
static tt_err check_finite(tt_exec *e, const tt_node *n)
{
    const unsigned writes = tt_ops[n->op]->writes_ins;
    for (int k = 0; k < n->n_out + n->n_in; k++) {
        const int o = k < n->n_out ? k : -1;
        if (o < 0 && !((writes >> (k - n->n_out)) & 1)) continue;
        const tt_value *v = o >= 0 ? n->out[o] : n->in[k - n->n_out];
        if (v->dtype != TT_F32 && v->dtype != TT_F64 && v->dtype != TT_BF16) continue;
        const size_t bytes = tt_value_bytes(v);
        if (bytes > e->check_cap) {
            free(e->check);
            e->check_cap = 0;
            if (!(e->check = malloc(bytes))) return tt_errorf("out of memory checking for NaN/Inf");
            e->check_cap = bytes;
        }
        if (tt_backend_read(e->be, e->q, e->check, value_mem(e, v), bytes)) return -1;
        const int64_t cnt = tt_value_numel(v);
        const int neg_inf_ok = o >= 0 && ((tt_ops[n->op]->neg_inf_outs >> o) & 1);
        for (int64_t i = 0; i < cnt; i++) {
            const double x = v->dtype == TT_F32   ? ((const float *)e->check)[i]
                             : v->dtype == TT_F64 ? ((const double *)e->check)[i]
                                                  : tt_bf16_to_f32(((const uint16_t *)e->check)[i]);
            if (isnan(x) || (isinf(x) && !(neg_inf_ok && x < 0))) {
                char d[96];
                e->nonfinite = n;
                tt_errorf("%s %d %s has %s at element %lld", o >= 0 ? "output" : "in-place input", o >= 0 ? o : k - n->n_out,
                          tt_value_desc(v, d, sizeof d), isnan(x) ? "NaN" : "Inf", (long long)i);
                return node_error(n);
            }
        }
    }
    return 0;
}

/* A collective: its start on the dist layer, or its wait. The start records
 * an event after its producers, which the collective waits on before it
 * touches a byte; its wait orders the readers (enqueued after it) after the
 * transfer (dist.h says how each transport keeps both). */
static tt_err run_comm(tt_exec *e, const tt_node *n, const tt_mem *in, const tt_mem *out)
{
    tt_dist *d = tt_dist_get();
    if (!d) return -1;
    const tt_backend *be = e->be;
    if (n->op == TT_OP_COMM_WAIT) {
        const tt_node *s = n->in[0]->producer;
        tt_coll_req *r = s ? e->req[s->id] : NULL;
        if (!r) return tt_errorf("the wait of a collective that was not started");
        e->req[s->id] = NULL;
        e->pending--;
        return tt_coll_wait_bufs(d, r, be, e->q);
    }
    const tt_comm_attrs *a = TT_ATTRS(n, tt_comm_attrs);
    tt_coll c = {.group = (tt_group_id)a->group, .op = (tt_reduce_op)a->reduce, .root = a->root,
                 .dtype = n->in[0]->dtype, .what = a->what[0] ? a->what : tt_op_name(n->op)};
    size_t *counts = NULL;
    tt_err rc = 0;
    switch (n->op) {
    case TT_OP_ALL_GATHER: c.kind = TT_COLL_ALL_GATHER, c.count = (size_t)tt_value_numel(n->in[0]); break;
    case TT_OP_REDUCE_SCATTER: c.kind = TT_COLL_REDUCE_SCATTER, c.count = (size_t)tt_value_numel(n->out[0]); break;
    case TT_OP_ALL_REDUCE: c.kind = TT_COLL_ALL_REDUCE, c.count = (size_t)tt_value_numel(n->in[0]); break;
    case TT_OP_BROADCAST: /* every rank's x into y (a copy on the queue), then the root's y everywhere */
        c.kind = TT_COLL_BROADCAST, c.count = (size_t)tt_value_numel(n->in[0]);
        if ((in[0].buf != out[0].buf || in[0].off != out[0].off) &&
            be->copy(e->q, out[0], in[0], tt_value_bytes(n->in[0])))
            return -1;
        break;
    case TT_OP_ALL_TO_ALLV: { /* the counts and displacements, downloaded and waited for: the host posts them */
        const size_t gs = (size_t)tt_value_numel(n->in[1]);
        int64_t *v = malloc(4 * gs * sizeof *v);
        if (!v || !(counts = malloc(4 * gs * sizeof *counts))) {
            free(v);
            return tt_errorf("out of memory");
        }
        for (int k = 0; k < 4 && !rc; k++) rc = be->download(e->q, v + k * gs, in[1 + k], gs * sizeof *v);
        tt_event *got = rc ? NULL : be->record(e->q);
        if (!rc) rc = got ? be->sync(got) : -1;
        for (size_t i = 0; i < 4 * gs && !rc; i++)
            if (v[i] < 0) rc = tt_errorf("all_to_allv: a negative count or displacement (%lld)", (long long)v[i]);
            else counts[i] = (size_t)v[i];
        free(v);
        c.kind = TT_COLL_ALL_TO_ALLV, c.scounts = counts, c.sdispls = counts + gs, c.rcounts = counts + 2 * gs;
        c.rdispls = counts + 3 * gs;
        break;
    }
    default: return tt_errorf("%s is no collective", tt_op_name(n->op));
    }
    if (!rc) {
        tt_coll_bufs b = {.be = be, .q = e->q, .ready = be->record(e->q), .send = in[0], .recv = out[0]};
        if (!b.ready) rc = -1;
        else if (!(rc = tt_coll_start_bufs(d, &c, &b, &e->req[n->id]))) e->pending++;
    }
    free(counts); /* the dist layer keeps its own copy while the transfer is in flight */
    return rc;
}

tt_err tt_exec_run(tt_exec *e)
{
    tt_graph *g = e->g;
    const int eager = e->mode != TT_EXEC_GRAPH;
    tt_err rc = 0;
    e->nonfinite = NULL;
    if (eager) /* outputs kept from the previous run */
        for (int v = 0; v < g->n_values; v++)
            if (e->act[v]) {
                e->be->free(e->act[v]);
                e->act[v] = NULL;
            }
    for (int i = 0; i < g->n_nodes && !rc; i++) {
        tt_node *n = g->nodes[i];
        if (eager) /* one allocation per activation root, made by the first node that writes it */
            for (int o = 0; o < n->n_out && !rc; o++) {
                const tt_value *r = tt_value_root(n->out[o]);
                if (r->role == TT_ROLE_ACT && !e->act[r->id] && !(e->act[r->id] = e->be->alloc(tt_value_bytes(r))))
                    rc = -1;
            }
        for (int k = 0; k < n->n_in && !rc; k++)
            if (!(e->args[k] = value_mem(e, n->in[k])).buf)
                rc = tt_errorf("input %d ('%s') has no memory", k, n->in[k]->name);
        for (int k = 0; k < n->n_out && !rc; k++)
            if (!(e->args[n->n_in + k] = value_mem(e, n->out[k])).buf)
                rc = tt_errorf("output %d has no memory", k);
        const double t0 = e->t_start ? tt_now() : 0;
        const int comm = (tt_ops[n->op]->flags & TT_OPF_COMM) != 0;
        if (!rc) rc = comm ? run_comm(e, n, e->args, e->args + n->n_in) : e->be->run(e->q, n, e->args, e->args + n->n_in);
        if (e->t_start) { /* a node's time is its work's: on a queue that runs later, wait for it */
            if (!rc) rc = e->be->finish(e->q);
            e->t_start[i] = t0;
            e->t_dur[i] = tt_now() - t0;
        }
        /* let transfers in flight move, at most every millisecond (each call polls every request; small
         * nodes come far more often than a transfer needs): communication time, not the node's */
        const double now = e->pending ? tt_now() : 0;
        if (!rc && e->pending && now - e->last_progress >= 1e-3) {
            tt_dist_progress(tt_dist_get());
            e->last_progress = tt_now();
            if (e->t_start) e->progress_seconds += e->last_progress - now;
        }
        if (rc) {
            node_error(n);
            break;
        }
        /* a started collective's output is valid only after its wait */
        if (e->mode == TT_EXEC_DEBUG && !(comm && n->op != TT_OP_COMM_WAIT) && (rc = check_finite(e, n))) break;
        if (eager) /* free what this node read or made for the last time */
            for (int k = 0; k < n->n_in + n->n_out; k++) {
                const tt_value *r = tt_value_root(k < n->n_in ? n->in[k] : n->out[k - n->n_in]);
                if (r->role == TT_ROLE_ACT && e->act[r->id] && e->plan.last[r->id] == i) {
                    e->be->free(e->act[r->id]);
                    e->act[r->id] = NULL;
                }
            }
    }
    if (!rc && e->pending) rc = tt_errorf("%d collectives were started and never waited for", e->pending);
    return rc;
}

tt_err tt_exec_write(tt_exec *e, const tt_value *v, const void *src, size_t bytes)
{
    if (v->role == TT_ROLE_ACT) return tt_errorf("'%s' is an activation: the graph computes it", v->name);
    if (bytes != tt_value_bytes(v))
        return tt_errorf("'%s' holds %zu bytes, not %zu", v->name, tt_value_bytes(v), bytes);
    tt_mem m;
    if (tt_exec_mem(e, v, &m)) return -1;
    return e->be->upload(e->q, m, src, bytes);
}

tt_err tt_exec_read_range(tt_exec *e, const tt_value *v, size_t off, void *dst, size_t bytes)
{
    const tt_value *r = tt_value_root((tt_value *)v);
    if (v->role == TT_ROLE_ACT && !v->is_output && !r->is_output)
        return tt_errorf("'%s' is not an output of the graph: its bytes may be reused", v->name);
    if (off > tt_value_bytes(v) || bytes > tt_value_bytes(v) - off)
        return tt_errorf("'%s' holds %zu bytes: cannot read %zu at %zu", v->name, tt_value_bytes(v), bytes, off);
    tt_mem m;
    if (tt_exec_mem(e, v, &m)) return -1;
    return tt_backend_read(e->be, e->q, dst, tt_mem_at(m, off), bytes);
}

tt_err tt_exec_read(tt_exec *e, const tt_value *v, void *dst, size_t bytes)
{
    if (bytes != tt_value_bytes(v)) return tt_errorf("'%s' holds %zu bytes, not %zu", v->name, tt_value_bytes(v), bytes);
    return tt_exec_read_range(e, v, 0, dst, bytes);
}

void tt_exec_free(tt_exec *e) { exec_release(e); }

size_t tt_exec_arena_bytes(const tt_exec *e) { return e->plan.arena_bytes; }
double tt_exec_flops(const tt_exec *e) { return e->flops; }
void tt_exec_set_timing(tt_exec *e, double *start, double *dur)
{
    e->t_start = start;
    e->t_dur = start ? dur : NULL;
}
double tt_exec_take_progress_seconds(tt_exec *e)
{
    const double s = e->progress_seconds;
    e->progress_seconds = 0;
    return s;
}

const tt_graph *tt_exec_graph(const tt_exec *e) { return e->g; }
const tt_node *tt_exec_nonfinite(const tt_exec *e) { return e->nonfinite; }

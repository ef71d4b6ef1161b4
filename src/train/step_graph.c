/* step_graph.c — records the training, optimizer and evaluation graphs once;
 * the loop then replays them with fresh inputs. */
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/passes/accum.h"
#include "train/step_graph.h"

static tt_err views(const tt_model *m, float *buf, const char *prefix, tt_tensor **out)
{
    tt_tensor *t = calloc((size_t)m->n_params, sizeof *t);
    if (!t) return tt_errorf("out of memory");
    for (int i = 0; i < m->n_params; i++) {
        t[i] = m->params[i].t;
        snprintf(t[i].name, sizeof t[i].name, "%s%s", prefix, m->params[i].t.name);
        t[i].data = buf + ((float *)m->params[i].t.data - m->storage);
    }
    *out = t;
    return 0;
}

tt_err tt_optim_state_init(tt_optim_state *s, const tt_model *m)
{
    memset(s, 0, sizeof *s);
    size_t bytes = m->numel * sizeof(float);
    if (!(s->grad = tt_alloc(bytes)) || !(s->m = tt_alloc(bytes)) || !(s->v = tt_alloc(bytes)) ||
        views(m, s->grad, "grad.", &s->t_grad) || views(m, s->m, "optim.exp_avg.", &s->t_m) ||
        views(m, s->v, "optim.exp_avg_sq.", &s->t_v)) {
        tt_optim_state_free(s);
        return -1;
    }
    return 0;
}

void tt_optim_state_free(tt_optim_state *s)
{
    tt_free(s->grad);
    tt_free(s->m);
    tt_free(s->v);
    free(s->t_grad);
    free(s->t_m);
    free(s->t_v);
    memset(s, 0, sizeof *s);
}

static tt_value *host_input(tt_graph *g, const char *name, tt_dtype dt, int64_t n, void *data)
{
    tt_value *v = tt_graph_input(g, name, dt, 1, &n);
    if (v) v->data = data;
    return v;
}

/* The gradient of every parameter value the forward reads, summed into the
 * gradient buffer at the same place as the value's data in the parameter
 * storage: so a fused weight (the fusion pass's joined q/k/v, say) sends its
 * gradient to its parts' accumulators without knowing them. */
static tt_err accumulate_grads(tt_graph *g, tt_value *loss, const tt_model *m, float *grad)
{
    int np = 0, nv = g->n_values;
    tt_value **wrt = calloc((size_t)nv + 1, sizeof *wrt), **grads = calloc((size_t)nv + 1, sizeof *grads);
    if (!wrt || !grads) {
        free(wrt);
        free(grads);
        return tt_errorf("out of memory building the step graph");
    }
    for (int v = 0; v < nv; v++)
        if (g->values[v]->role == TT_ROLE_PARAM) wrt[np++] = g->values[v];
    tt_err rc = tt_autodiff(g, loss, np, wrt, grads);
    tt_graph_set_scope(g, "grad_accum");
    for (int i = 0; i < np && !rc; i++) {
        if (!grads[i]) continue;
        const float *d = wrt[i]->data;
        if (d < m->storage || d + tt_value_numel(wrt[i]) > m->storage + m->numel) {
            rc = tt_errorf("parameter value '%s' is not in the model's storage", wrt[i]->name);
            break;
        }
        tt_tensor t = {0};
        snprintf(t.name, sizeof t.name, "grad.%.*s", (int)sizeof t.name - 6, wrt[i]->name);
        t.dtype = TT_F32, t.ndim = wrt[i]->ndim;
        memcpy(t.shape, wrt[i]->shape, sizeof t.shape);
        t.data = grad + (d - m->storage);
        tt_accum(g, tt_graph_bind(g, TT_ROLE_STATE, &t), grads[i]);
    }
    free(wrt);
    free(grads);
    return rc || g->failed ? -1 : 0;
}

tt_err tt_build_micro_graph(tt_step_graph *sg, const tt_model *m, float *grad, tt_step_io *io, int with_grad,
                            tt_ac_mode ac)
{
    memset(sg, 0, sizeof *sg);
    tt_graph *g = sg->g = tt_graph_new();
    tt_value **vals = calloc((size_t)m->n_params, sizeof *vals);
    if (!g || !vals) {
        free(vals);
        tt_graph_free(g);
        sg->g = NULL;
        return tt_errorf("out of memory building the step graph");
    }
    int64_t n = (int64_t)io->B * io->T;
    g->act_dtype = io->act_dtype;
    tt_model_bind(g, m, vals);
    tt_fwd_inputs in = {io->B, io->T, host_input(g, "ids", TT_I32, n, io->ids), host_input(g, "pos", TT_I32, n, io->pos),
                        host_input(g, "doc", TT_I32, n, io->doc), NULL, NULL, NULL};
    tt_value *targets = host_input(g, "targets", TT_I32, n, io->targets);
    tt_value *scale = host_input(g, "loss_scale", TT_F32, 1, &io->scale);
    tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
    tt_graph_set_scope(g, "loss");
    sg->loss = tt_ce_linear(g, h, head, targets, scale, -100);
    tt_graph_mark_output(g, sg->loss);
    free(vals);
    tt_err rc = g->failed ? -1 : 0;
    if (!rc && !io->no_fuse) rc = tt_fuse(g, &sg->fused);
    int n_fwd = g->n_nodes;
    if (!rc && with_grad) rc = accumulate_grads(g, sg->loss, m, grad);
    if (!rc && with_grad && !io->no_fuse) rc = tt_fold_accum(g, &sg->folded);
    sg->ac = with_grad ? ac : TT_AC_NONE;
    if (!rc && sg->ac != TT_AC_NONE) {
        /* plan the graph as autodiff left it too, so the log can say what checkpointing saves */
        tt_memplan plan;
        if (!(rc = tt_memplan_build(g, &plan))) {
            sg->arena_no_ac = plan.arena_bytes;
            tt_memplan_free(&plan);
            rc = tt_remat(g, n_fwd, sg->ac, &sg->remat);
        }
    }
    if (rc) tt_step_graph_free(sg);
    return rc;
}

tt_err tt_build_micro_step(tt_step_graph *sg, const tt_model *m, tt_optim_state *s, tt_step_io *io, int with_grad,
                           const tt_backend *be, tt_exec_mode mode, tt_ac_mode ac)
{
    if (tt_build_micro_graph(sg, m, s->grad, io, with_grad, ac)) return -1;
    if (!(sg->exec = tt_exec_new(sg->g, be, mode))) {
        tt_step_graph_free(sg);
        return -1;
    }
    if (sg->ac == TT_AC_NONE) sg->arena_no_ac = tt_exec_arena_bytes(sg->exec);
    return 0;
}

/* One value over a whole flat buffer laid out like the parameters. */
static tt_value *flat(tt_graph *g, tt_role role, const char *name, float *data, size_t numel)
{
    tt_tensor t = {0};
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = TT_F32;
    t.ndim = 1;
    t.shape[0] = (int64_t)numel;
    t.data = data;
    return tt_graph_bind(g, role, &t);
}

/* The optimizer is one multi-tensor step over the flat buffers: one sum of
 * squares over every gradient, one AdamW over every parameter, with weight
 * decay on the element ranges of the parameters that decay. */
tt_err tt_build_optim_step(tt_step_graph *sg, const tt_model *m, tt_optim_state *s, tt_step_io *io,
                           const tt_adamw_cfg *cfg, const tt_backend *be, tt_exec_mode mode)
{
    memset(sg, 0, sizeof *sg);
    tt_graph *g = sg->g = tt_graph_new();
    if (!g) return -1;
    /* the decayed ranges, adjacent parameters merged */
    int64_t (*rng)[2] = calloc((size_t)m->n_params + 1, sizeof *rng);
    if (!rng) {
        tt_graph_free(g);
        sg->g = NULL;
        return tt_errorf("out of memory");
    }
    int nr = 0;
    for (int i = 0; i < m->n_params; i++) {
        const int64_t a = (float *)m->params[i].t.data - m->storage, n = tt_numel(m->params[i].t.ndim, m->params[i].t.shape);
        if (m->params[i].no_decay || !n) continue;
        if (nr && rng[nr - 1][1] == a) rng[nr - 1][1] = a + n;
        else rng[nr][0] = a, rng[nr][1] = a + n, nr++;
    }
    void *dr = NULL;
    tt_value *decay = nr ? tt_graph_const(g, TT_I64, 2, (int64_t[]){nr, 2}, &dr) : NULL;
    if (decay) memcpy(dr, rng, (size_t)nr * sizeof *rng);
    free(rng);
    tt_value *grad = flat(g, TT_ROLE_STATE, "grad", s->grad, m->numel);
    tt_graph_set_scope(g, "optimizer.clip");
    sg->sumsq = tt_sumsq(g, grad, NULL);
    tt_graph_mark_output(g, sg->sumsq);
    tt_value *hp = host_input(g, "optimizer_hparams", TT_F64, 4, io->hp);
    tt_graph_set_scope(g, "optimizer.adamw");
    /* no parameter decays: weight decay 0 everywhere (the op decays everything without ranges) */
    tt_adamw(g, flat(g, TT_ROLE_PARAM, "params", m->storage, m->numel), grad,
             flat(g, TT_ROLE_STATE, "optim.exp_avg", s->m, m->numel), flat(g, TT_ROLE_STATE, "optim.exp_avg_sq", s->v, m->numel),
             sg->sumsq, hp, decay, cfg->beta1, cfg->beta2, cfg->eps, nr ? cfg->weight_decay : 0.0);
    if (g->failed || !(sg->exec = tt_exec_new(g, be, mode))) {
        tt_step_graph_free(sg);
        return -1;
    }
    return 0;
}

void tt_step_graph_free(tt_step_graph *sg)
{
    tt_exec_free(sg->exec);
    tt_graph_free(sg->g);
    memset(sg, 0, sizeof *sg);
}

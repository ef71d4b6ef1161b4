/* step_graph.c — records the training, optimizer and evaluation graphs once;
 * the loop then replays them with fresh inputs. */
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "graph/autodiff.h"
#include "graph/passes/accum.h"
#include "graph/passes/ep.h"
#include "graph/passes/fsdp.h"
#include "graph/passes/lora.h"
#include "graph/passes/weights16.h"
#include "train/step_graph.h"

static tt_value *input(tt_graph *g, const char *name, tt_dtype dt, int64_t n)
{
    return tt_graph_input(g, name, dt, 1, &n);
}

/* The gradient of every parameter value the forward reads, summed into the
 * gradient accumulator of its unit at the same offset: parameters are known
 * by (unit, offset), so a fused weight (the fusion pass's joined q/k/v, a view
 * over its parts) sends its gradient to its parts' accumulators without
 * knowing them. */
static tt_err accumulate_grads(tt_step_graph *sg, const tt_model *m)
{
    tt_graph *g = sg->g;
    int np = 0, nv = g->n_values;
    tt_value **wrt = calloc((size_t)nv + 1, sizeof *wrt), **grads = calloc((size_t)nv + 1, sizeof *grads);
    if (!wrt || !grads) {
        free(wrt);
        free(grads);
        return tt_errorf("out of memory building the step graph");
    }
    for (int v = 0; v < nv; v++)
        if (g->values[v]->role == TT_ROLE_PARAM && g->values[v]->base) wrt[np++] = g->values[v];
    tt_err rc = tt_autodiff(g, sg->n_losses, sg->losses, np, wrt, grads);
    tt_graph_set_scope(g, "grad_accum");
    for (int k = 0; k < m->n_units && !rc; k++) {
        const int64_t n = m->units[k].numel;
        if (!n) continue; /* (LoRA: a unit without adapters) */
        if (!(sg->grad_units[k] = tt_value_new(g, TT_ROLE_STATE, TT_F32, 1, &n))) rc = -1;
        else {
            sg->grad_units[k]->unit = k;
            snprintf(sg->grad_units[k]->name, sizeof sg->grad_units[k]->name, "grad.%s", m->units[k].name);
        }
    }
    for (int i = 0; i < np && !rc; i++) {
        if (!grads[i]) continue;
        const tt_value *p = wrt[i];
        tt_graph_set_unit(g, p->unit);
        tt_value *acc = tt_value_view(g, sg->grad_units[p->unit], p->offset, TT_F32, p->ndim, p->shape);
        if (acc) snprintf(acc->name, sizeof acc->name, "grad.%.*s", (int)sizeof acc->name - 6, p->name);
        tt_accum(g, acc, grads[i]);
    }
    tt_graph_set_unit(g, -1);
    free(wrt);
    free(grads);
    return rc || g->failed ? -1 : 0;
}

const tt_model *tt_step_trained_model(const tt_model *m, const tt_step_cfg *c)
{
    return c->lora ? c->lora->adapters : m;
}

int tt_step_weights16_fits(tt_dtype act_dtype, int lora, int shards, int ep)
{
    return act_dtype == TT_BF16 && !lora && shards <= 1 && ep <= 1;
}

static int weights16_fits(const tt_step_cfg *c)
{
    return tt_step_weights16_fits(c->act_dtype, c->lora != NULL, c->sh ? c->sh->shards : 1, c->sh ? c->sh->ep : 1);
}

tt_err tt_step_use_weights16(tt_step_cfg *c, tt_train_state *s)
{
    if (!weights16_fits(c)) return 0;
    if (tt_state_alloc_w16(s)) return -1;
    c->weights16 = 1;
    return 0;
}

/* LoRA: every target's base weight by (unit, bytes) with its adapter's values, for the pass; a target of several
 * weights (GPT-2's c_attn) is a site for each, with the rows of B that are its */
static tt_err apply_lora(tt_step_graph *sg, const tt_model *m, const tt_step_cfg *c, tt_value *const *avals,
                         int with_grad)
{
    const tt_lora *l = c->lora;
    const tt_frozen_layout *fl = &c->frozen->layout;
    int n = 0;
    for (int t = 0; t < l->n_targets; t++) n += l->targets[t].n_parts;
    tt_lora_site *sites = calloc((size_t)n + 1, sizeof *sites);
    if (!sites) return tt_errorf("out of memory");
    n = 0;
    for (int t = 0; t < l->n_targets; t++) {
        const tt_lora_target *x = &l->targets[t];
        tt_value *B = avals[x->b];
        for (int i = x->base, row0 = 0; i < x->base + x->n_parts; row0 += (int)m->params[i].shape[0], i++) {
            tt_value *b = x->n_parts == 1 ? B
                          : tt_value_view(sg->g, tt_value_root(B), tt_value_root_offset(B) + (size_t)row0 * (size_t)B->shape[1] * sizeof(float),
                                          B->dtype, 2, (int64_t[]){m->params[i].shape[0], B->shape[1]});
            sites[n++] = (tt_lora_site){m->params[i].unit, fl->offset[i],
                                        (size_t)tt_param_numel(&m->params[i]) * tt_dtype_size(fl->dtype[i]),
                                        avals[x->a], b, t, x->module};
        }
    }
    const int drop = with_grad && l->dropout > 0; /* evaluation runs without dropout */
    if (drop) sg->rng = input(sg->g, "lora_rng", TT_I64, 2);
    const tt_lora_pass_cfg lc = {n, sites, l->scale, drop ? l->dropout : 0, sg->rng};
    tt_err rc = tt_lora_pass(sg->g, &lc, &sg->lora_applied);
    free(sites);
    return rc;
}

/* The tokens per expert of every MoE layer stay readable after a run. */
static tt_err keep_moe_offsets(tt_step_graph *sg)
{
    tt_graph *g = sg->g;
    for (int v = 0; v < g->n_values; v++) sg->n_moe += tt_moe_is_offsets(g->values[v]);
    if (!sg->n_moe) return 0;
    if (!(sg->moe_offsets = calloc((size_t)sg->n_moe, sizeof *sg->moe_offsets))) return tt_errorf("out of memory");
    for (int v = 0, i = 0; v < g->n_values; v++)
        if (tt_moe_is_offsets(g->values[v])) {
            tt_graph_mark_output(g, g->values[v]);
            sg->moe_offsets[i++] = g->values[v];
        }
    return 0;
}

/* Across ranks: the FSDP pass, then its schedule for overlap. Under LoRA it runs twice: on the frozen base's units
 * when the base is sharded (gathers of its words, nothing reduced), then on the adapters' as on any trained units. */
static tt_err distribute(tt_step_graph *sg, const tt_step_cfg *c, int n_fwd, int with_grad)
{
    tt_graph *g = sg->g;
    sg->distributed = 1;
    if (c->lora && tt_frozen_is_sharded(c->frozen)) {
        tt_fsdp_cfg fc = tt_sharding_fsdp_cfg(&c->frozen->sh);
        fc.frozen = 1;
        fc.reshard_after_forward = c->reshard_after_forward;
        fc.reduce = 0;
        if (tt_fsdp(g, n_fwd, sg->units, NULL, sg->n_units, &fc, &sg->frozen_fsdp)) return -1;
        n_fwd = sg->frozen_fsdp.n_fwd;
    }
    tt_fsdp_cfg fc = tt_sharding_fsdp_cfg(c->sh);
    fc.param_dtype = c->act_dtype;
    fc.reduce_dtype = c->reduce_dtype;
    fc.reshard_after_forward = c->reshard_after_forward;
    fc.reduce = !c->no_sync;
    fc.grads_persistent = c->accumulates && c->sh->shards > 1;
    tt_value *const *trained = c->lora ? sg->adapter_units : sg->units;
    if (tt_fsdp(g, n_fwd, trained, with_grad ? sg->grad_units : NULL, sg->n_units, &fc, &sg->fsdp)) return -1;
    return c->no_overlap ? tt_fsdp_serialize(g) : tt_fsdp_schedule(g);
}

tt_err tt_build_micro_graph(tt_step_graph *sg, const tt_model *m, const tt_step_cfg *c, int with_grad, tt_ac_mode ac)
{
    memset(sg, 0, sizeof *sg);
    tt_graph *g = sg->g = tt_graph_new();
    const tt_model *tm = tt_step_trained_model(m, c);
    tt_value **vals = calloc((size_t)m->n_params + 1, sizeof *vals);
    tt_value **avals = c->lora ? calloc((size_t)tm->n_params + 1, sizeof *avals) : NULL;
    sg->n_units = m->n_units;
    sg->units = calloc((size_t)m->n_units + 1, sizeof *sg->units);
    sg->grad_units = calloc((size_t)m->n_units + 1, sizeof *sg->grad_units);
    if (c->lora) sg->adapter_units = calloc((size_t)m->n_units + 1, sizeof *sg->adapter_units);
    if (c->weights16) sg->units16 = calloc((size_t)m->n_units + 1, sizeof *sg->units16);
    if (!g || !vals || !sg->units || !sg->grad_units || (c->lora && (!avals || !sg->adapter_units)) ||
        (c->weights16 && !sg->units16)) {
        free(vals);
        free(avals);
        tt_step_graph_free(sg);
        return tt_errorf("out of memory building the step graph");
    }
    const int64_t n = (int64_t)c->B * c->T;
    g->act_dtype = c->act_dtype;
    if (c->weights16 && !weights16_fits(c)) {
        free(vals);
        free(avals);
        tt_step_graph_free(sg);
        return tt_errorf("the step graph: a bf16 copy of the weights is read in mixed precision, by a run that "
                         "trains the model's weights whole on each rank");
    }
    tt_err rc = c->lora ? tt_lora_bind(g, m, &c->frozen->layout, c->lora, vals, sg->units, avals, sg->adapter_units)
                        : tt_model_bind(g, m, vals, sg->units);
    sg->ids = input(g, "ids", TT_I32, n);
    sg->pos = input(g, "pos", TT_I32, n);
    sg->doc = input(g, "doc", TT_I32, n);
    sg->targets = input(g, "targets", TT_I32, n);
    sg->scale = input(g, "loss_scale", TT_F32, 1);
    const int aux = with_grad && m->cfg.moe.n_experts > 0 && (m->cfg.moe.aux_coef > 0 || m->cfg.moe.z_coef > 0);
    if (aux) sg->aux_scale = input(g, "aux_scale", TT_F32, 1);
    tt_fwd_inputs in = {.B = c->B, .T = c->T, .ids = sg->ids, .pos = sg->pos, .doc = sg->doc, .aux_scale = sg->aux_scale};
    tt_value *head = NULL, *h = rc ? NULL : tt_model_forward(g, m, vals, &in, &head);
    tt_graph_set_scope(g, "loss");
    sg->losses[sg->n_losses++] = tt_model_loss(g, m, h, head, sg->targets, sg->scale, -100);
    tt_graph_mark_output(g, sg->losses[0]);
    for (int v = 0; v < g->n_values && !rc; v++) /* the MoE layers' auxiliary losses: more roots */
        if (tt_moe_is_aux_loss(g->values[v])) {
            if (sg->n_losses == TT_MAX_LOSSES) rc = tt_errorf("more than %d loss roots", TT_MAX_LOSSES);
            else tt_graph_mark_output(g, sg->losses[sg->n_losses++] = g->values[v]);
        }
    free(vals);
    if (!rc && keep_moe_offsets(sg)) rc = -1;
    if (!rc && g->failed) rc = -1;
    if (!rc && c->sh && c->sh->ep > 1) { /* this rank's experts, and token rows exchanged over its expert group */
        const tt_ep_cfg ec = {c->sh->ep, c->sh->place, TT_GROUP_EXPERT, c->ep_recv_factor};
        rc = tt_ep(g, &ec);
    }
    if (!rc && !c->no_fuse) rc = tt_fuse(g, &sg->fused);
    if (!rc && c->lora) rc = apply_lora(sg, m, c, avals, with_grad);
    free(avals);
    int n_fwd = g->n_nodes;
    if (!rc && with_grad) rc = accumulate_grads(sg, tm);
    if (!rc && with_grad && !c->no_fuse) rc = tt_fold_accum(g, &sg->folded);
    sg->ac = with_grad ? ac : TT_AC_NONE;
    if (!rc) {
        /* plan the graph as autodiff left it too, so the log can say what checkpointing saves */
        tt_memplan plan;
        if (!(rc = tt_memplan_build(g, &plan))) {
            sg->arena_no_ac = plan.arena_bytes;
            tt_memplan_free(&plan);
            if (sg->ac != TT_AC_NONE) rc = tt_remat(g, n_fwd, sg->ac, &sg->remat);
        }
    }
    /* after remat: its recomputed products read weights too */
    if (!rc && c->weights16) rc = tt_weights16(g, sg->units, sg->units16, sg->n_units, &sg->weights16_read);
    if (!rc && c->sh && c->sh->shards * c->sh->replicas > 1) rc = distribute(sg, c, n_fwd, with_grad);
    if (rc) tt_step_graph_free(sg);
    return rc;
}

/* The trained units (the model's, or LoRA's adapters') on the state: each bucket's slices where the FSDP pass ran,
 * and whole units where the state is not sharded (one process, data parallel). */
static void bind_state(tt_step_graph *sg, const tt_step_cfg *c, tt_train_state *s)
{
    tt_value *const *units = c->lora ? sg->adapter_units : sg->units;
    for (int b = 0; sg->distributed && b < c->sh->n_buckets; b++) {
        if (sg->fsdp.param_shard[b]) tt_value_bind(sg->fsdp.param_shard[b], tt_state_bucket_mem(s, TT_STATE_PARAM, b));
        if (sg->fsdp.grad_shard[b]) tt_value_bind(sg->fsdp.grad_shard[b], tt_state_bucket_mem(s, TT_STATE_GRAD, b));
        if (sg->fsdp.grad_full[b]) tt_value_bind(sg->fsdp.grad_full[b], tt_state_grad_full_mem(s, b));
    }
    if (tt_state_is_sharded(s)) return;
    for (int k = 0; k < sg->n_units; k++) {
        if (units[k]) tt_value_bind(units[k], tt_state_unit_mem(s, TT_STATE_PARAM, k));
        if (sg->units16 && sg->units16[k]) tt_value_bind(sg->units16[k], tt_state_w16_unit_mem(s, k));
        /* (across ranks the pass moved the gradients onto its buckets') */
        if (!sg->distributed && sg->grad_units[k])
            tt_value_bind(sg->grad_units[k], tt_state_unit_mem(s, TT_STATE_GRAD, k));
    }
}

/* LoRA's frozen base: each bucket's slices where the pass sharded it, else its whole units. */
static void bind_frozen(tt_step_graph *sg, const tt_frozen_base *f)
{
    if (sg->frozen_fsdp.param_shard) {
        for (int b = 0; b < f->sh.n_buckets; b++)
            if (sg->frozen_fsdp.param_shard[b])
                tt_value_bind(sg->frozen_fsdp.param_shard[b], tt_frozen_bucket_mem(f, b));
        return;
    }
    for (int k = 0; k < sg->n_units; k++)
        if (sg->units[k]) tt_value_bind(sg->units[k], tt_frozen_unit_mem(f, k));
}

tt_err tt_build_micro_step(tt_step_graph *sg, const tt_model *m, tt_train_state *s, const tt_step_cfg *c,
                           int with_grad, tt_exec_mode mode, tt_ac_mode ac, tt_exec *share)
{
    if (c->weights16 && !s->w16)
        return tt_errorf("the step graph reads the weights' bf16 copy, and the state keeps none (tt_step_use_weights16)");
    if (tt_build_micro_graph(sg, m, c, with_grad, ac)) return -1;
    bind_state(sg, c, s);
    if (c->lora) bind_frozen(sg, c->frozen);
    if (!(sg->exec = tt_exec_new_sharing(sg->g, s->be, s->q, mode, share))) {
        tt_step_graph_free(sg);
        return -1;
    }
    return 0;
}

/* One value over a whole buffer of the state (the model's flat layout, or
 * this rank's shard buffer). */
static tt_value *flat_at(tt_graph *g, tt_role role, tt_dtype dt, const char *name, tt_train_state *s, tt_mem mem)
{
    const int64_t n = s->numel;
    tt_value *v = tt_value_new(g, role, dt, 1, &n);
    if (v) {
        snprintf(v->name, sizeof v->name, "%s", name);
        tt_value_bind(v, mem);
    }
    return v;
}
static tt_value *flat(tt_graph *g, tt_role role, const char *name, tt_train_state *s, tt_state_kind kind)
{
    return flat_at(g, role, TT_F32, name, s, tt_state_mem(s, kind));
}

/* The element ranges of the state's buffers that decay, adjacent ones merged. */
typedef struct {
    int64_t (*r)[2];
    int n;
} ranges;

static tt_err add_range(void *ctx, int64_t flat_at, int64_t at, int64_t n)
{
    (void)flat_at;
    ranges *rs = ctx;
    if (rs->n && rs->r[rs->n - 1][1] == at) rs->r[rs->n - 1][1] = at + n;
    else rs->r[rs->n][0] = at, rs->r[rs->n][1] = at + n, rs->n++;
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const int64_t x = (*(const int64_t(*)[2])a)[0], y = (*(const int64_t(*)[2])b)[0];
    return x < y ? -1 : x > y;
}

/* The optimizer is one multi-tensor step over the flat buffers: one sum of
 * squares over every gradient, the clipping factor of its norm, one AdamW
 * over every parameter, with weight decay on the element ranges of the
 * parameters that decay. On a sharded state each rank steps its own slices:
 * the squared norm is its slices' sum, summed over the shard group (the
 * replicas hold the same slices). */
tt_err tt_build_optim_step(tt_step_graph *sg, const tt_model *m, tt_train_state *s, const tt_adamw_cfg *cfg,
                           tt_exec_mode mode)
{
    memset(sg, 0, sizeof *sg);
    tt_graph *g = sg->g = tt_graph_new();
    if (!g) return -1;
    const tt_sharding *sh = s->sh;
    /* a parameter splits into at most one piece a bucket */
    const size_t cap = (size_t)m->n_params * (sh ? (size_t)sh->n_buckets : 1) + 1;
    ranges rs = {calloc(cap, sizeof *rs.r), 0};
    if (!rs.r) {
        tt_step_graph_free(sg);
        return tt_errorf("out of memory");
    }
    for (int i = 0; i < m->n_params; i++) {
        const int64_t a = m->params[i].offset, n = tt_param_numel(&m->params[i]);
        if (m->params[i].no_decay || !n) continue;
        if (sh) tt_sharding_pieces(sh, sh->shard_rank, a, a + n, add_range, &rs);
        else add_range(&rs, a, a, n);
    }
    /* in the order of the shard buffer (under expert parallelism a block's shared experts come before its
     * routed experts there, after them in the flat layout), adjacent ranges merged: the op walks them in order */
    qsort(rs.r, (size_t)rs.n, sizeof *rs.r, by_start);
    int nr = 0;
    for (int i = 0; i < rs.n; i++)
        if (nr && rs.r[nr - 1][1] == rs.r[i][0]) rs.r[nr - 1][1] = rs.r[i][1];
        else rs.r[nr][0] = rs.r[i][0], rs.r[nr][1] = rs.r[i][1], nr++;
    void *dr = NULL;
    tt_value *decay = nr ? tt_graph_const(g, TT_I64, 2, (int64_t[]){nr, 2}, &dr) : NULL;
    if (decay) memcpy(dr, rs.r, (size_t)nr * sizeof *rs.r);
    free(rs.r);
    tt_value *grad = flat(g, TT_ROLE_STATE, "grad", s, TT_STATE_GRAD);
    tt_graph_set_scope(g, "optimizer.clip");
    sg->sumsq = tt_sumsq(g, grad, NULL);
    if (tt_state_is_sharded(s)) {
        tt_value *y = tt_all_reduce(g, sg->sumsq, NULL, TT_GROUP_SHARD, TT_REDUCE_SUM, "gradient norm");
        sg->sumsq = y ? tt_comm_wait(g, y) : NULL;
    }
    tt_graph_mark_output(g, sg->sumsq);
    tt_value *clip = tt_clip_coef_of(g, sg->sumsq, cfg->max_norm);
    sg->hp = input(g, "optimizer_hparams", TT_F64, 2);
    tt_graph_set_scope(g, "optimizer.adamw");
    /* no parameter decays: weight decay 0 everywhere (the op decays everything without ranges); the weights'
     * bf16 copy, where the state keeps one, written in the same pass */
    tt_value *p16 = s->w16 ? flat_at(g, TT_ROLE_STATE, TT_BF16, "params.bf16", s, tt_state_w16_mem(s)) : NULL;
    if (s->w16 && !p16) g->failed = 1;
    tt_adamw(g, flat(g, TT_ROLE_PARAM, "params", s, TT_STATE_PARAM), grad,
             flat(g, TT_ROLE_STATE, "optim.exp_avg", s, TT_STATE_EXP_AVG),
             flat(g, TT_ROLE_STATE, "optim.exp_avg_sq", s, TT_STATE_EXP_AVG_SQ), clip, sg->hp, decay, p16,
             cfg->beta1, cfg->beta2, cfg->eps, nr ? cfg->weight_decay : 0.0);
    if (g->failed || !(sg->exec = tt_exec_new(g, s->be, s->q, mode))) {
        tt_step_graph_free(sg);
        return -1;
    }
    return 0;
}

tt_err tt_step_set_batch(tt_step_graph *sg, const int32_t *ids, const int32_t *targets, const int32_t *pos,
                         const int32_t *doc, float scale, float aux_scale)
{
    const size_t bytes = tt_value_bytes(sg->ids);
    if (tt_exec_write(sg->exec, sg->ids, ids, bytes) || tt_exec_write(sg->exec, sg->targets, targets, bytes) ||
        tt_exec_write(sg->exec, sg->pos, pos, bytes) || tt_exec_write(sg->exec, sg->doc, doc, bytes) ||
        tt_exec_write(sg->exec, sg->scale, &scale, sizeof scale) ||
        (sg->aux_scale && tt_exec_write(sg->exec, sg->aux_scale, &aux_scale, sizeof aux_scale)))
        return tt_error_prefix("the step's inputs: ");
    return 0;
}

tt_err tt_step_set_rng(tt_step_graph *sg, uint64_t seed, uint64_t counter)
{
    const int64_t v[2] = {(int64_t)seed, (int64_t)counter};
    return sg->rng ? tt_exec_write(sg->exec, sg->rng, v, sizeof v) : 0;
}

tt_err tt_step_loss(tt_step_graph *sg, double *loss)
{
    float l;
    if (tt_exec_read(sg->exec, sg->losses[0], &l, sizeof l)) return -1;
    *loss = l;
    return 0;
}

tt_err tt_step_aux_loss(tt_step_graph *sg, double *loss)
{
    double sum = 0;
    for (int k = 1; k < sg->n_losses; k++) {
        float l;
        if (tt_exec_read(sg->exec, sg->losses[k], &l, sizeof l)) return -1;
        sum += l;
    }
    *loss = sum;
    return 0;
}

tt_err tt_optim_set_hp(tt_step_graph *sg, double lr, long step)
{
    const double hp[2] = {lr, (double)step};
    return tt_exec_write(sg->exec, sg->hp, hp, sizeof hp);
}

tt_err tt_optim_sumsq(tt_step_graph *sg, double *sumsq)
{
    float s;
    if (tt_exec_read(sg->exec, sg->sumsq, &s, sizeof s)) return -1;
    *sumsq = s;
    return 0;
}

void tt_step_graph_free(tt_step_graph *sg)
{
    tt_exec_free(sg->exec);
    tt_graph_free(sg->g);
    tt_fsdp_result_free(&sg->fsdp);
    tt_fsdp_result_free(&sg->frozen_fsdp);
    free(sg->units);
    free(sg->grad_units);
    free(sg->adapter_units);
    free(sg->units16);
    free(sg->moe_offsets);
    memset(sg, 0, sizeof *sg);
}

/* model_plan.c — the model plan: sizes, FLOPs and memory of a config,
 * allocating nothing big (activations are measured by building and planning
 * the real step graph with no memory behind it). `titan plan` prints it; a
 * training run writes it as plan.json (run.c). */
#include <cjson/cJSON.h>
#include <string.h>

#include "config/resolve.h"
#include "dist/dist.h"
#include "graph/passes/memplan.h"
#include "graph/passes/remat.h"
#include "train/model_plan.h"
#include "train/parallel.h"
#include "train/sharding.h"
#include "train/step_graph.h"

/* Bytes a rank sends for the collectives of g, as ring algorithms send them:
 * gathers (all-gather), expert parallelism's exchanges (all-to-all and the
 * counts before it; the rows of an even routing) and reductions (the rest). */
static void comm_bytes(const tt_graph *g, tt_model_plan *p)
{
    p->gather_bytes = p->reduce_bytes = p->exchange_bytes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        if (!(tt_ops[n->op]->flags & TT_OPF_COMM) || n->op == TT_OP_COMM_WAIT) continue;
        const tt_comm_attrs *a = TT_ATTRS(n, tt_comm_attrs);
        const int gs = a->group == TT_GROUP_SHARD          ? p->shards
                       : a->group == TT_GROUP_REPLICATE    ? p->replicas
                       : a->group == TT_GROUP_EXPERT       ? p->ep
                       : a->group == TT_GROUP_EXPERT_SHARD ? p->shards / p->ep
                                                           : p->shards * p->replicas;
        const double share = gs > 1 ? (double)(gs - 1) / gs : 0;
        const double in = (double)tt_value_bytes(n->in[0]), out = (double)tt_value_bytes(n->out[0]);
        if (a->group == TT_GROUP_EXPERT) /* an exchange moves the rank's rows, not its receive buffer's bound */
            p->exchange_bytes += share * (n->op == TT_OP_ALL_GATHER ? out : in < out ? in : out);
        else if (n->op == TT_OP_ALL_GATHER) p->gather_bytes += share * (double)tt_value_bytes(n->out[0]);
        else if (n->op == TT_OP_ALL_REDUCE) p->reduce_bytes += 2 * share * (double)tt_value_bytes(n->in[0]);
        else p->reduce_bytes += share * (double)tt_value_bytes(n->in[0]);
    }
}


/* One micro-step of the model m under an activation checkpointing mode, from
 * the memory plan of the step graph the run would build (the same passes,
 * the configured dtype). The graph binds no memory: planning reads shapes and
 * lifetimes, never values. */
static tt_err plan_mode(tt_model_plan *p, const tt_model *m, const tt_sharding *sh, const tt_config *c, tt_ac_mode ac,
                        const tt_lora *lora, const tt_frozen_base *frozen)
{
    tt_step_cfg sc = {.B = p->B, .T = p->T, .act_dtype = p->dtype, .lora = lora, .frozen = frozen};
    if (sh) { /* the graph a rank of the mesh runs: the one that ends an optimizer step */
        tt_parallel_step_cfg(c, sh, &sc);
        sc.accumulates = p->accum > 1;
    }
    sc.weights16 = p->w16_bytes > 0;
    tt_step_graph sg;
    tt_memplan plan;
    tt_err rc = tt_build_micro_graph(&sg, m, &sc, 1, ac);
    if (rc) return rc;
    if (!(rc = tt_memplan_build(sg.g, &plan))) {
        p->modes[ac] = (tt_plan_ac){plan.arena_bytes, plan.naive_bytes, sg.remat};
        if (ac == TT_AC_NONE) { /* what the passes merged does not depend on the mode */
            p->fused = sg.fused;
            p->folded = sg.folded;
        }
        if (ac == p->ac && sh) comm_bytes(sg.g, p);
        tt_memplan_free(&plan);
    }
    tt_step_graph_free(&sg);
    return rc;
}

tt_err tt_model_plan_build(const tt_config *c, tt_model_plan *p)
{
    memset(p, 0, sizeof *p);
    if (tt_model_cfg_from_config(c, &p->mc, &p->ext, NULL)) return -1;
    p->ac = c->activation_checkpoint.mode;
    if ((unsigned)p->ac > TT_AC_FULL) return tt_errorf("activation_checkpoint.mode: unknown mode %d", (int)p->ac);
    if (tt_model_count_params(&p->mc, &p->matmul_params) <= 0) return tt_error_prefix("model: ");
    tt_model_count_active(&p->mc, &p->ext, &p->active_params);
    tt_model *m = tt_model_new_ext(&p->mc, &p->ext); /* the layout only: no weights */
    if (!m) return tt_error_prefix("model: ");
    p->params = (int64_t)m->numel; /* with the biases a Hugging Face config adds */
    p->B = c->training.local_batch_size;
    p->T = c->training.seq_len;
    p->flops_per_token = tt_model_flops_per_token(&p->mc, p->T);
    p->dtype = tt_config_act_dtype(c);
    p->param_bytes = p->grad_bytes = 4.0 * (double)p->params;
    p->optim_bytes = 2 * p->param_bytes;
    /* the mesh, without launching it: -1 shards is the rest of the smallest world it fits (one process, or
     * the expert parallel degree) */
    p->ep = c->parallelism.expert_parallel_degree;
    p->replicas = c->parallelism.data_parallel_replicate_degree;
    p->shards = c->parallelism.data_parallel_shard_degree > 0 ? c->parallelism.data_parallel_shard_degree : p->ep;
    const int world = p->replicas * p->shards;
    const int global = c->training.global_batch_size > 0 ? c->training.global_batch_size : p->B * world;
    p->accum = global / (p->B * world) > 0 ? global / (p->B * world) : 1;
    tt_sharding sh = {0};
    tt_lora lora = {0};
    tt_frozen_base fb = {0}; /* its layout and slices: planning binds no memory */
    tt_lora_spec spec;
    const size_t bucket_bytes = (size_t)c->parallelism.fsdp_bucket_bytes;
    tt_err rc = tt_parallel_check_experts(p->ep, p->shards, &p->mc);
    if (!rc && (p->lora = tt_config_lora_on(c))) {
        p->lora_base_dtype = tt_config_lora_base_dtype(c);
        if (!(rc = tt_parallel_check_lora(p->ep)) && !(rc = tt_config_lora_spec(c, &spec)) &&
            !(rc = tt_lora_new(m, &spec, &lora))) {
            p->lora_targets = lora.n_targets;
            p->adapter_params = (int64_t)lora.adapters->numel;
        }
    }
    /* a rank of the mesh (the first: every rank holds as much) trains the model's layout, or the adapters' */
    const tt_model *trained = p->lora ? lora.adapters : m;
    if (!rc && world > 1) rc = tt_sharding_init(&sh, trained, p->shards, p->replicas, 0, p->ep, bucket_bytes);
    if (!rc && p->lora && !(rc = tt_frozen_plan(&fb, m, p->lora_base_dtype, world > 1 ? &sh : NULL, bucket_bytes))) {
        p->frozen_bytes = (double)fb.layout.bytes;
        p->param_bytes = p->frozen_bytes + 4.0 * (double)p->adapter_params;
        p->grad_bytes = 4.0 * (double)p->adapter_params;
        p->optim_bytes = 2 * p->grad_bytes;
    }
    if (!rc && tt_step_weights16_fits(p->dtype, p->lora, p->shards, p->ep)) {
        p->w16_bytes = 2.0 * (double)p->params; /* the weights' bf16 copy for the bf16 products */
    }
    if (!rc && world > 1) {
        p->n_buckets = sh.n_buckets;
        p->rank_state_bytes = 16.0 * (double)sh.numel + p->w16_bytes; /* fp32 weights, gradients, two moments: each
                                                                            its slices; a whole state's bf16 copy */
        if (p->accum > 1 && p->shards > 1)
            for (int b = 0; b < sh.n_buckets; b++) p->full_grad_bytes += 4.0 * (double)sh.buckets[b].padded;
        p->rank_state_bytes += p->full_grad_bytes;
        if (p->lora) { /* and its slices of the frozen base, in the base's dtypes */
            p->rank_frozen_bytes = (double)tt_frozen_rank_bytes(&fb);
            p->rank_state_bytes += p->rank_frozen_bytes;
        }
    }
    for (int k = TT_AC_NONE; k <= TT_AC_FULL && !rc; k++)
        rc = plan_mode(p, m, world > 1 ? &sh : NULL, c, (tt_ac_mode)k, p->lora ? &lora : NULL, p->lora ? &fb : NULL);
    tt_sharding_free(&sh);
    tt_frozen_free(&fb);
    tt_lora_free(&lora);
    tt_model_free(m);
    return rc;
}

const char *tt_model_plan_source(const tt_config *c)
{
    return c->model.hf_assets_path[0] ? c->model.hf_assets_path : c->model.flavor;
}

cJSON *tt_model_plan_json(const tt_model_plan *p, const tt_config *c)
{
    const tt_model_cfg *mc = &p->mc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "titan-plan-1");
    cJSON *m = cJSON_AddObjectToObject(o, "model");
    if (!m) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddStringToObject(m, "arch", tt_arch_name(mc->arch));
    cJSON_AddStringToObject(m, c->model.hf_assets_path[0] ? "hf_assets_path" : "flavor", tt_model_plan_source(c));
    const struct { const char *k; int v; } shape[] = {
        {"dim", mc->dim}, {"n_layers", mc->n_layers}, {"n_heads", mc->n_heads}, {"n_kv_heads", mc->n_kv_heads},
        {"head_dim", mc->head_dim}, {"ffn_dim", mc->ffn_dim}, {"vocab_size", mc->vocab_size},
    };
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) cJSON_AddNumberToObject(m, shape[i].k, shape[i].v);
    cJSON_AddBoolToObject(m, "tie_embeddings", mc->tie_embeddings);
    cJSON_AddNumberToObject(o, "params", (double)p->params);
    cJSON_AddNumberToObject(o, "matmul_params", (double)p->matmul_params);
    cJSON_AddNumberToObject(o, "active_params", (double)p->active_params);
    if (mc->moe.n_experts > 0) {
        cJSON *e = cJSON_AddObjectToObject(m, "moe");
        cJSON_AddNumberToObject(e, "num_experts", mc->moe.n_experts);
        cJSON_AddNumberToObject(e, "top_k", mc->moe.top_k);
        cJSON_AddNumberToObject(e, "moe_ffn_dim", mc->moe.ffn_dim);
        cJSON_AddNumberToObject(e, "shared_ffn_dim", mc->moe.n_shared ? mc->moe.shared_ffn : 0);
        int layers = 0;
        for (int l = 0; l < mc->n_layers; l++) layers += tt_model_layer_is_moe(mc, l);
        cJSON_AddNumberToObject(e, "moe_layers", layers);
        cJSON_AddNumberToObject(e, "n_dense_layers", mc->moe.n_dense_layers);
        cJSON_AddNumberToObject(e, "decoder_sparse_step", mc->moe.sparse_step > 0 ? mc->moe.sparse_step : 1);
        cJSON_AddStringToObject(e, "score_func", mc->moe.score_func == TT_SCORE_SIGMOID ? "sigmoid" : "softmax");
        cJSON_AddBoolToObject(e, "route_norm", mc->moe.route_norm);
        cJSON_AddNumberToObject(e, "route_scale", mc->moe.route_scale);
        cJSON_AddBoolToObject(e, "score_before_experts", mc->moe.score_before);
        cJSON_AddNumberToObject(e, "num_expert_groups", mc->moe.n_group);
        cJSON_AddBoolToObject(e, "balancing_bias", mc->moe.has_bias);
    }
    cJSON_AddNumberToObject(o, "local_batch_size", p->B);
    cJSON_AddNumberToObject(o, "seq_len", p->T);
    cJSON_AddNumberToObject(o, "flops_per_token", p->flops_per_token);
    cJSON_AddStringToObject(o, "flops_formula", "6*N + 12*L*d*T");
    cJSON_AddStringToObject(o, "compute_dtype", tt_dtype_name(p->dtype));
    cJSON *mem = cJSON_AddObjectToObject(o, "memory_bytes");
    cJSON_AddNumberToObject(mem, "params", p->param_bytes);
    cJSON_AddNumberToObject(mem, "params_bf16", p->w16_bytes);
    cJSON_AddNumberToObject(mem, "grads", p->grad_bytes);
    cJSON_AddNumberToObject(mem, "optimizer", p->optim_bytes);
    if (p->lora) {
        cJSON *l = cJSON_AddObjectToObject(o, "lora");
        cJSON_AddNumberToObject(l, "rank", c->lora.rank);
        cJSON_AddNumberToObject(l, "targets", p->lora_targets);
        cJSON_AddNumberToObject(l, "adapter_params", (double)p->adapter_params);
        cJSON_AddNumberToObject(l, "frozen_bytes", p->frozen_bytes);
        cJSON_AddStringToObject(l, "base_dtype", tt_dtype_name(p->lora_base_dtype));
    }
    cJSON_AddNumberToObject(mem, "activations", (double)p->modes[p->ac].arena);
    const double state = p->param_bytes + p->w16_bytes + p->grad_bytes + p->optim_bytes;
    cJSON_AddNumberToObject(mem, "total", state + (double)p->modes[p->ac].arena);
    cJSON *ac = cJSON_AddObjectToObject(o, "activation_checkpoint");
    cJSON_AddStringToObject(ac, "mode", tt_ac_mode_name(p->ac));
    for (int k = TT_AC_NONE; k <= TT_AC_FULL; k++) {
        const tt_plan_ac *a = &p->modes[k];
        cJSON *e = cJSON_AddObjectToObject(ac, tt_ac_mode_name((tt_ac_mode)k));
        cJSON_AddNumberToObject(e, "activation_bytes", (double)a->arena);
        cJSON_AddNumberToObject(e, "activation_bytes_without_reuse", (double)a->naive);
        cJSON_AddNumberToObject(e, "total_bytes", state + (double)a->arena);
        cJSON_AddNumberToObject(e, "recomputed_nodes", a->remat.nodes);
        cJSON_AddNumberToObject(e, "recomputed_flops_fraction",
                                a->remat.graph_flops > 0 ? a->remat.flops / a->remat.graph_flops : 0.0);
    }
    if (p->replicas * p->shards > 1) {
        cJSON *par = cJSON_AddObjectToObject(o, "parallelism");
        cJSON_AddNumberToObject(par, "replicate", p->replicas);
        cJSON_AddNumberToObject(par, "shard", p->shards);
        cJSON_AddNumberToObject(par, "buckets", p->n_buckets);
        cJSON_AddNumberToObject(par, "accumulation_steps", p->accum);
        cJSON_AddNumberToObject(par, "rank_state_bytes", p->rank_state_bytes);
        if (p->lora) cJSON_AddNumberToObject(par, "rank_frozen_bytes", p->rank_frozen_bytes);
        cJSON_AddNumberToObject(par, "rank_total_bytes", p->rank_state_bytes + (double)p->modes[p->ac].arena);
        cJSON_AddNumberToObject(par, "expert_parallel", p->ep);
        cJSON_AddNumberToObject(par, "rank_sent_bytes_per_step",
                                p->accum * (p->gather_bytes + p->exchange_bytes) + p->reduce_bytes);
        cJSON_AddNumberToObject(par, "rank_exchange_bytes_per_step", p->accum * p->exchange_bytes);
    }
    cJSON *f = cJSON_AddObjectToObject(o, "fused");
    cJSON_AddNumberToObject(f, "qkv_rope_attention", p->fused.qkv);
    cJSON_AddNumberToObject(f, "gate_up", p->fused.gate_up);
    cJSON_AddNumberToObject(f, "add_rmsnorm", p->fused.add_norm);
    cJSON_AddNumberToObject(f, "folded_accumulations", p->folded);
    return o;
}

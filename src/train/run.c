/* run.c — setting a run up (model, optimizer state, data, graphs, metrics,
 * resume) and the checkpoint save/restore of the whole train state. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/ckpt_files.h"
#include "formats/safetensors.h"
#include "hf/hf_model.h"
#include "data/shard.h"
#include "tokenizer/tokenizer_byte.h"
#include "train/parallel.h"
#include "train/run.h"

/* The auxiliary losses of the config, on an MoE model (a Hugging Face one included). */
static void moe_losses_from_config(const tt_model_config *m, tt_model_cfg *o)
{
    if (o->moe.n_experts <= 0) return;
    o->moe.aux_coef = m->router_aux_loss_coef;
    o->moe.aux_seq = m->router_aux_loss_seq;
    o->moe.z_coef = m->router_z_loss_coef;
}

tt_err tt_model_cfg_from_config(const tt_config *c, tt_model_cfg *o, tt_model_ext *ext, tt_hf_config *hf)
{
    const tt_model_config *m = &c->model;
    memset(o, 0, sizeof *o);
    if (ext) memset(ext, 0, sizeof *ext);
    if (m->hf_assets_path[0]) { /* the architecture is the HF folder's config.json */
        tt_hf_config hc;
        if (tt_hf_config_read(m->hf_assets_path, &hc)) return tt_error_prefix("model.hf_assets_path: ");
        tt_hf_detect_layout(m->hf_assets_path, &hc.model, &hc.ext);
        moe_losses_from_config(m, &hc.model);
        *o = hc.model;
        if (ext) *ext = hc.ext;
        if (hf) *hf = hc;
        return 0;
    }
    o->arch = m->name == TT_MODEL_GPT2 ? TT_ARCH_GPT2 : TT_ARCH_LLAMA;
    o->dim = m->dim;
    o->n_layers = m->n_layers;
    o->n_heads = m->n_heads;
    o->n_kv_heads = m->n_kv_heads;
    o->head_dim = m->head_dim;
    o->ffn_dim = m->ffn_dim;
    o->vocab_size = m->vocab_size;
    o->max_seq_len = m->max_seq_len;
    o->norm_eps = m->norm_eps;
    o->rope.theta = m->rope_theta;
    o->rope.llama3 = m->rope_scaling == TT_ROPE_SCALING_LLAMA3;
    o->rope.factor = m->rope_factor;
    o->rope.low_freq_factor = m->rope_low_freq_factor;
    o->rope.high_freq_factor = m->rope_high_freq_factor;
    o->rope.original_max_pos = m->rope_original_max_position_embeddings;
    o->tie_embeddings = m->tie_embeddings;
    o->qkv_bias = m->qkv_bias;
    o->qk_norm = m->qk_norm;
    if (m->kv_lora_rank > 0) /* TorchTitan's MLA rotates adjacent pairs (a complex view): interleaved */
        o->mla = (tt_mla_cfg){.q_lora_rank = m->q_lora_rank, .kv_lora_rank = m->kv_lora_rank,
                              .qk_nope = m->qk_nope_head_dim, .qk_rope = m->qk_rope_head_dim, .v_head = m->v_head_dim,
                              .rope_interleave = 1};
    if (m->num_experts > 0)
        o->moe = (tt_moe_cfg){.n_experts = m->num_experts, .top_k = m->top_k,
                              .ffn_dim = m->moe_ffn_dim ? m->moe_ffn_dim : m->ffn_dim,
                              .n_shared = m->num_shared_experts,
                              .shared_ffn = m->num_shared_experts * (m->moe_ffn_dim ? m->moe_ffn_dim : m->ffn_dim),
                              .n_dense_layers = m->n_dense_layers,
                              .sparse_step = m->decoder_sparse_step,
                              .score_func = m->score_func == TT_SCORE_FUNC_SIGMOID ? TT_SCORE_SIGMOID : TT_SCORE_SOFTMAX,
                              .route_norm = m->route_norm, .score_before = m->score_before_experts,
                              .n_group = m->num_expert_groups, .topk_group = m->num_limited_groups,
                              .route_scale = m->route_scale, .has_bias = m->load_balance_coeff > 0,
                              .shared_gate = m->shared_expert_gate};
    moe_losses_from_config(m, o);
    return 0;
}

const tt_backend *tt_config_backend(const tt_config *c)
{
    return tt_backend_get(c->training.exec_mode == TT_EXEC_DEBUG ? "ref" : c->training.backend);
}

tt_dtype tt_config_act_dtype(const tt_config *c)
{
    return c->training.mixed_precision_param == TT_PARAM_BFLOAT16 ? TT_BF16 : TT_F32;
}

/* The data: the built-in corpus (generated once into dump_folder/data) or
 * the user's shards. */
static tt_err open_data(tt_run *r, int training)
{
    const tt_config *c = r->cfg;
    char train_path[TT_CONFIG_PATH_MAX + 64], val_path[TT_CONFIG_PATH_MAX + 64];
    int B = c->training.local_batch_size, T = c->training.seq_len;
    /* (evaluating a given validation shard needs no corpus) */
    if (strcmp(c->training.dataset, "synthetic") == 0 && !c->training.dataset_path[0] &&
        (training || !c->validation.dataset_path[0])) {
        tt_corpus_cfg cc = tt_corpus_cfg_default();
        cc.seed = (uint64_t)c->synthetic.seed;
        cc.train_tokens = c->synthetic.train_tokens;
        cc.val_tokens = c->synthetic.val_tokens;
        /* whole documents fit one window, so the floor is exactly what validation scores */
        if (cc.max_doc_tokens > T) cc.max_doc_tokens = T;
        char dir[TT_CONFIG_PATH_MAX + 16];
        snprintf(dir, sizeof dir, "%s/data", c->job.dump_folder);
        /* rank 0 writes it; the others read what it wrote */
        tt_err rc = r->rank == 0 && (tt_mkdir_p(dir) || tt_corpus_prepare(&cc, dir, &r->corpus));
        if (r->world > 1 && tt_dist_barrier(r->dist, "rank 0 writing the synthetic corpus")) return -1;
        if (rc || (r->rank != 0 && tt_corpus_prepare(&cc, dir, &r->corpus))) return tt_error_prefix("synthetic corpus: ");
        snprintf(train_path, sizeof train_path, "%s/train.bin", dir);
        snprintf(val_path, sizeof val_path, "%s/val.bin", dir);
        r->builtin_corpus = 1;
    } else {
        snprintf(train_path, sizeof train_path, "%s", c->training.dataset_path[0] ? c->training.dataset_path : c->training.dataset);
        snprintf(val_path, sizeof val_path, "%s", c->validation.dataset_path);
    }
    /* every rank takes its B windows of each global batch */
    tt_loader_cfg tc = {train_path, T, B, (uint64_t)c->training.seed, TT_LOADER_TRAIN, r->rank, r->world};
    tt_loader_cfg vc = {val_path, T, c->validation.local_batch_size, 0, TT_LOADER_VAL, r->rank, r->world};
    if (training && !(r->train_loader = tt_loader_open(&tc))) return -1;
    if (val_path[0] && (c->validation.enable || !training) && !(r->val_loader = tt_loader_open(&vc))) return -1;
    return 0;
}

static tt_err check_vocab(const tt_run *r, const tt_loader *ld)
{
    uint32_t v = tt_loader_vocab_size(ld);
    if ((int64_t)v > r->model->cfg.vocab_size)
        return tt_errorf("the data's vocabulary has %u tokens but the model's embedding has %d rows%s", v,
                         r->model->cfg.vocab_size,
                         r->has_hf ? " (prepare the data with the model's tokenizer: titan prepare)" : " (model.vocab_size)");
    return 0;
}

/* What a training run leaves in its dump folder when it starts, for `titan
 * report` and for whoever looks later: the resolved config (config.toml, which
 * --config reads back) and the model plan with the run's backend, peak and,
 * on the built-in corpus, its floor (plan.json). Rewritten at every start, so
 * a resumed run shows the config it resumed with. */
static tt_err write_run_files(const tt_run *r, const tt_model_plan *p)
{
    const tt_config *c = r->cfg;
    char path[TT_CONFIG_PATH_MAX + 32];
    char *toml = tt_config_to_toml(c);
    snprintf(path, sizeof path, "%s/config.toml", c->job.dump_folder);
    tt_err rc = toml ? tt_write_file_atomic(path, toml, strlen(toml)) : -1;
    free(toml);
    if (rc) return tt_error_prefix("writing %s: ", path);

    cJSON *o = tt_model_plan_json(p, c);
    if (o) {
        cJSON_AddStringToObject(o, "backend", r->be->name);
        cJSON_AddStringToObject(o, "exec_mode",
                                r->mode == TT_EXEC_GRAPH ? "graph" : r->mode == TT_EXEC_EAGER ? "eager" : "debug");
        cJSON_AddNumberToObject(o, "accumulation_steps", r->accum_steps);
        cJSON *pk = cJSON_AddObjectToObject(o, "peak");
        cJSON_AddNumberToObject(pk, "gflops", r->peak_gflops);
        cJSON_AddStringToObject(pk, "dtype", tt_dtype_name(r->step_cfg.act_dtype));
        cJSON_AddStringToObject(pk, "source", r->peak_source ? r->peak_source : "config");
        if (r->builtin_corpus) { /* the loss no model can beat on this data (README: the built-in corpus) */
            cJSON *co = cJSON_AddObjectToObject(o, "corpus");
            cJSON_AddNumberToObject(co, "floor_nats", r->corpus.floor_nats);
            cJSON_AddNumberToObject(co, "unigram_nats", r->corpus.unigram_nats);
        }
    }
    char *text = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/plan.json", c->job.dump_folder);
    rc = text ? tt_write_file_atomic(path, text, strlen(text)) : tt_errorf("out of memory");
    cJSON_free(text);
    return rc ? tt_error_prefix("writing %s: ", path) : 0;
}

/* Every rank built the same model (a model.hf_assets_path whose config.json
 * differs between machines would not show in the config): its parameters'
 * names, shapes and places in the flat layout, as text, the same bytes on
 * every rank. */
static tt_err check_same_model(tt_run *r)
{
    const tt_model *m = r->model;
    size_t cap = 64 + (size_t)m->n_params * 160, k = 0;
    char *text = malloc(cap);
    if (!text) return tt_errorf("out of memory");
    k += (size_t)snprintf(text + k, cap - k, "%s %zu\n", tt_arch_name(m->cfg.arch), m->numel);
    for (int i = 0; i < m->n_params && k < cap; i++) {
        const tt_param *p = &m->params[i];
        k += (size_t)snprintf(text + k, cap - k, "%s %d %lld %lld %lld\n", p->name, p->ndim, (long long)p->shape[0],
                              (long long)(p->ndim > 1 ? p->shape[1] : 0), (long long)p->offset);
    }
    tt_err rc = tt_dist_check_same(r->dist, text, k < cap ? k : cap, "the model (parameter names, shapes and layout)");
    free(text);
    return rc;
}

/* The job (parallel.h); commands that load a model whole run in one process. */
static tt_err open_job(tt_run *r, tt_run_purpose purpose)
{
    if (tt_process_world() > 1 && purpose != TT_RUN_TRAIN && purpose != TT_RUN_EVAL)
        return tt_errorf("this command runs in one process (it loads any checkpoint whole): start it without "
                         "mpirun or srun");
    if (tt_parallel_join(r->cfg, &r->dist)) return -1;
    r->rank = tt_dist_rank(r->dist), r->world = tt_dist_world(r->dist);
    return 0;
}

tt_err tt_run_open(tt_run *r, const tt_config *cfg, tt_run_purpose purpose)
{
    int training = purpose == TT_RUN_TRAIN;
    if (purpose == TT_RUN_HF && !cfg->model.hf_assets_path[0])
        return tt_errorf("no Hugging Face folder given (model.hf_assets_path / --hf DIR)");
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    const tt_config *c = cfg;
    tt_model_cfg mc;
    if (tt_model_cfg_from_config(c, &mc, &r->ext, &r->hf)) return -1;
    r->has_hf = c->model.hf_assets_path[0] != 0;
    if (mc.arch == TT_ARCH_GPT2 && purpose != TT_RUN_MODEL && purpose != TT_RUN_HF && c->training.seq_len > mc.max_seq_len)
        return tt_errorf("training.seq_len = %d exceeds the model's %d learned positions%s%s", c->training.seq_len,
                         mc.max_seq_len, r->has_hf ? " in " : "", r->has_hf ? c->model.hf_assets_path : "");
    r->mode = c->training.exec_mode;
    if (open_job(r, purpose)) return -1;
    if (!(r->be = tt_config_backend(c)) || !(r->q = r->be->queue_new())) return -1;
    int B = c->training.local_batch_size, T = c->training.seq_len;
    /* TorchTitan's global batch: local x data-parallel ranks x accumulation */
    int global = c->training.global_batch_size > 0 ? c->training.global_batch_size : B * r->world;
    if (global % (B * r->world))
        return tt_errorf("training.global_batch_size = %d is not a multiple of local_batch_size x ranks = %d x %d", global,
                         B, r->world);
    r->accum_steps = global / (B * r->world);
    if (r->accum_steps < 1 || r->accum_steps > TT_MAX_ACCUM)
        return tt_errorf("training.global_batch_size / (local_batch_size x ranks) = %d: must be within [1, %d]",
                         r->accum_steps, TT_MAX_ACCUM);
    if (c->checkpoint.folder[0] == '/') /* an absolute folder stands on its own */
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", c->checkpoint.folder);
    else
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s/%s", c->job.dump_folder, c->checkpoint.folder);
    if (tt_mkdir_p(c->job.dump_folder)) goto fail;
    if (!(r->model = tt_model_new_ext(&mc, &r->ext))) goto fail;
    if (r->world > 1 && check_same_model(r)) goto fail;
    const size_t mem0 = r->be->bytes_in_use();
    const int ep = tt_dist_group_size(r->dist, TT_GROUP_EXPERT);
    if (tt_parallel_check_experts(ep, tt_dist_group_size(r->dist, TT_GROUP_SHARD), &mc) ||
        tt_moe_balance_init(&r->balance, r->model, c->model.load_balance_coeff, ep,
                            tt_dist_group_rank(r->dist, TT_GROUP_EXPERT)))
        goto fail;
    if (tt_sharding_init(&r->sh, r->model, tt_dist_group_size(r->dist, TT_GROUP_SHARD),
                         tt_dist_group_size(r->dist, TT_GROUP_REPLICATE), tt_dist_group_rank(r->dist, TT_GROUP_SHARD),
                         ep, (size_t)c->parallelism.fsdp_bucket_bytes) ||
        tt_state_init_sharded(&r->state, r->model, r->world > 1 ? &r->sh : NULL, r->be, r->q, training))
        goto fail;
    tt_param_store weights = tt_state_store(&r->state, TT_STATE_PARAM);
    if (tt_model_init_weights(r->model, (uint64_t)c->training.seed, &weights)) goto fail;
    if (purpose != TT_RUN_MODEL && purpose != TT_RUN_HF && open_data(r, training)) goto fail;
    if ((r->train_loader && check_vocab(r, r->train_loader)) || (r->val_loader && check_vocab(r, r->val_loader)))
        goto fail;

    /* graphs */
    r->step_cfg = (tt_step_cfg){.B = B, .T = T, .act_dtype = tt_config_act_dtype(c)};
    if (r->world > 1) {
        tt_parallel_step_cfg(c, &r->sh, &r->step_cfg);
    }
    if (training) {
        r->micro = calloc((size_t)r->accum_steps, sizeof *r->micro);
        if (!r->micro) goto fail;
        for (int a = 0; a < r->accum_steps; a++)
            if (!(r->micro[a] = tt_batch_new(B, T))) goto fail;
        tt_adamw_cfg ac = {c->optimizer.beta1, c->optimizer.beta2, c->optimizer.eps, c->optimizer.weight_decay,
                           c->training.max_norm};
        /* accumulating over several ranks: the micro-steps before the last accumulate full gradients, and the
         * last reduces them once (its own graph; both run in one arena) */
        r->step_cfg.accumulates = r->world > 1 && r->accum_steps > 1;
        if (r->step_cfg.accumulates && tt_state_is_sharded(&r->state) && tt_state_alloc_grad_full(&r->state)) goto fail;
        /* what the state holds, measured, on the rank that holds the most */
        int64_t held = (int64_t)(r->be->bytes_in_use() - mem0);
        if (r->world > 1 &&
            tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, &held, 1, TT_I64, TT_REDUCE_MAX, "the train state's size"))
            goto fail;
        r->state_bytes = (double)held;
        if (tt_build_micro_step(&r->train, r->model, &r->state, &r->step_cfg, 1, r->mode, c->activation_checkpoint.mode,
                                NULL) ||
            tt_build_optim_step(&r->optim, r->model, &r->state, &ac, r->mode))
            goto fail;
        if (r->step_cfg.accumulates) {
            tt_step_cfg ns = r->step_cfg;
            ns.no_sync = 1;
            if (tt_build_micro_step(&r->train_nosync, r->model, &r->state, &ns, 1, r->mode,
                                    c->activation_checkpoint.mode, r->train.exec))
                goto fail;
        }
        r->arena_bytes = tt_exec_arena_bytes(r->train.exec);
        if (tt_lr_sched_init(&r->sched, c->training.steps, c->lr_scheduler.warmup_steps,
                             c->lr_scheduler.has_decay_ratio ? c->lr_scheduler.decay_ratio : -1.0,
                             c->lr_scheduler.decay_type == TT_LR_DECAY_COSINE ? "cosine"
                             : c->lr_scheduler.decay_type == TT_LR_DECAY_SQRT ? "sqrt" : "linear",
                             c->lr_scheduler.min_lr_factor))
            goto fail;
    }
    if (r->val_loader) {
        if (!(r->val_batch = tt_batch_new(c->validation.local_batch_size, T))) goto fail;
        tt_step_cfg vc = r->step_cfg;
        vc.B = r->val_batch->B;
        if (tt_build_micro_step(&r->eval, r->model, &r->state, &vc, 0, r->mode, TT_AC_NONE, NULL)) goto fail;
    }

    if (tt_run_restore(r, !training && purpose != TT_RUN_HF)) goto fail;
    if (r->step == 0 && (c->checkpoint.initial_load_in_hf || purpose == TT_RUN_HF)) {
        /* a fresh run starts from Hugging Face weights */
        const char *dir = c->checkpoint.initial_load_path[0] ? c->checkpoint.initial_load_path : c->model.hf_assets_path;
        if (!dir[0]) {
            tt_errorf("checkpoint.initial_load_in_hf needs checkpoint.initial_load_path or model.hf_assets_path");
            goto fail;
        }
        if (tt_hf_load_weights(r->model, dir, &weights)) goto fail;
        if (training) tt_log("initial weights loaded from Hugging Face folder %s", dir);
    }

    /* throughput accounting */
    r->flops_per_token = tt_model_flops_per_token(&mc, T);
    if (c->metrics.peak_tflops > 0) {
        r->peak_gflops = c->metrics.peak_tflops * 1e3;
        r->peak_source = "config";
    } else if (training) {
        tt_backend_peak pk;
        if (r->be->peak(0, &pk)) goto fail;
        /* MFU against the device's peak in the compute dtype (bf16 when mixed precision runs bf16 matmuls) */
        r->peak_gflops = pk.gflops[r->step_cfg.act_dtype] > 0 ? pk.gflops[r->step_cfg.act_dtype] : pk.gflops[TT_F32];
        r->peak_source = pk.source;
    }
    if (training) {
        int64_t n = 0, mm = 0;
        n = tt_model_count_params(&mc, &mm);
        char ac[160] = "";
        const tt_step_graph *tr = &r->train;
        if (tr->ac != TT_AC_NONE) /* what checkpointing saves, and what it costs */
            snprintf(ac, sizeof ac, " (%.1f MiB without; %d nodes recomputed, +%.1f%% FLOPs)",
                     tr->arena_no_ac / 1048576.0, tr->remat.nodes,
                     tr->remat.graph_flops > 0 ? 100 * tr->remat.flops / tr->remat.graph_flops : 0.0);
        const int bf16 = r->step_cfg.act_dtype == TT_BF16;
        tt_log("model %s (%s): %.2fM parameters, %.2f MFLOPs/token | %d x %d tokens x %d accumulation | backend %s, "
               "exec %s | activation checkpoint %s: arena %.1f MiB%s | compute %s | peak %.0f GFLOP/s %s (%s)",
               tt_arch_name(mc.arch), r->has_hf ? c->model.hf_assets_path : c->model.flavor, n / 1e6,
               r->flops_per_token / 1e6, B, T, r->accum_steps, r->be->name,
               r->mode == TT_EXEC_GRAPH ? "graph" : r->mode == TT_EXEC_EAGER ? "eager" : "debug",
               tt_ac_mode_name(tr->ac), r->arena_bytes / 1048576.0, ac,
               !bf16 ? "fp32"
               : tt_config_is_set(c, "training.mixed_precision_param")
                   ? "bf16 (fp32 master weights)"
                   : "bf16 (fp32 master weights; the backend's default where the hardware has bf16 dot products)",
               r->peak_gflops, bf16 ? "bf16" : "f32", r->peak_source);
        char moe[320];
        tt_model_moe_describe(&mc, moe, sizeof moe);
        if (moe[0]) tt_log("%s", moe);
        char experts[64] = "";
        if (r->sh.ep > 1)
            snprintf(experts, sizeof experts, ", experts over %d (%d a rank)", r->sh.ep, mc.moe.n_experts / r->sh.ep);
        if (r->world > 1)
            tt_log("%d ranks: %d replicas x %d shards%s (%d buckets) | train state %.2f MiB a rank (weights, gradients "
                   "and AdamW moments%s, measured) | %d threads a rank",
                   r->world, r->sh.replicas, r->sh.shards, experts, r->sh.n_buckets, r->state_bytes / 1048576.0,
                   r->state.grad_full ? ", and the full gradients micro-steps accumulate" : "", tt_num_threads());
        else
            tt_log("train state %.2f MiB (weights, gradients and AdamW moments, measured)", r->state_bytes / 1048576.0);
        tt_model_plan plan;
        if (tt_model_plan_build(c, &plan)) goto fail;
        tt_log("activation checkpointing, the planned arena of a micro-step: none %.1f MiB, selective %.1f MiB, "
               "full %.1f MiB (configured: %s)",
               plan.modes[0].arena / 1048576.0, plan.modes[1].arena / 1048576.0, plan.modes[2].arena / 1048576.0,
               tt_ac_mode_name(tr->ac));
        tt_log("graph passes: fuse (%d qkv + RoPE into attention, %d gate/up, %d add + rmsnorm), %d gradient "
               "accumulations folded into their matmuls, %d nodes in the step graph",
               tr->fused.qkv, tr->fused.gate_up, tr->fused.add_norm, tr->folded, tr->g->n_nodes);
        if (r->builtin_corpus)
            tt_log("synthetic corpus: %lld train / %lld val tokens, floor %.4f nats/token, unigram %.4f (gap %.4f)",
                   (long long)r->corpus.train_tokens, (long long)r->corpus.val_tokens, r->corpus.floor_nats,
                   r->corpus.unigram_nats, r->corpus.gap_nats);
        /* the run's files are rank 0's */
        if (r->rank == 0 && write_run_files(r, &plan)) goto fail;
        if (tt_metrics_open(&r->metrics, c->metrics.save_jsonl && r->rank == 0 ? c->job.dump_folder : NULL,
                            r->step > 0, r->flops_per_token, r->peak_gflops, r->step, c->training.steps))
            goto fail;
        r->metrics.peak_source = r->peak_source; /* named where MFU is not stated */
        if (r->rank == 0 && tt_metrics_open_tensorboard(&r->metrics, c, r->builtin_corpus ? &r->corpus : NULL))
            goto fail;
    }
    return 0;
fail:
    tt_run_close(r);
    return -1;
}

void tt_run_close(tt_run *r)
{
    tt_metrics_close(&r->metrics);
    tt_step_graph_free(&r->train_nosync); /* before train: it may run in train's arena */
    tt_step_graph_free(&r->train);
    tt_step_graph_free(&r->optim);
    tt_step_graph_free(&r->eval);
    if (r->micro)
        for (int a = 0; a < r->accum_steps; a++) tt_batch_free(r->micro[a]);
    free(r->micro);
    tt_batch_free(r->val_batch);
    tt_loader_close(r->train_loader);
    tt_loader_close(r->val_loader);
    if (r->state.be) tt_state_free(&r->state);
    if (r->q) r->be->queue_free(r->q);
    tt_model_free(r->model);
    tt_moe_balance_free(&r->balance);
    tt_sharding_free(&r->sh);
    memset(r, 0, sizeof *r);
}

tt_err tt_run_whole_weights(tt_run *r, tt_train_state *gathered, tt_train_state **whole)
{
    *whole = NULL;
    memset(gathered, 0, sizeof *gathered);
    if (!tt_state_is_sharded(&r->state)) {
        *whole = r->rank == 0 ? &r->state : NULL;
        return 0;
    }
    float *flat = malloc((r->model->numel ? r->model->numel : 1) * sizeof *flat);
    tt_err rc = flat ? tt_state_gather(&r->state, TT_STATE_PARAM, flat)
                     : tt_errorf("out of memory for the whole model (%zu floats)", r->model->numel);
    if (!rc && r->rank == 0) {
        if (!(rc = tt_state_init(gathered, r->model, r->be, r->q, 0)) &&
            !(rc = tt_state_upload(gathered, TT_STATE_PARAM, flat)))
            *whole = gathered;
        else if (gathered->be)
            tt_state_free(gathered);
    }
    free(flat);
    return rc;
}

/* The Hugging Face export of a run's model: ids of the tokenizer it was
 * trained with, and that tokenizer.json when it came from an HF folder. */
tt_err tt_run_export_hf(tt_run *r, const char *out_dir)
{
    tt_hf_export_opts o = tt_hf_export_defaults();
    o.max_shard_bytes = (size_t)r->cfg->checkpoint.hf_max_shard_mb * 1000 * 1000;
    char tok[TT_CONFIG_PATH_MAX + 32];
    if (r->has_hf) {
        o.bos_token_id = r->hf.bos_token_id;
        o.n_eos = r->hf.n_eos;
        memcpy(o.eos_token_ids, r->hf.eos_token_ids, sizeof o.eos_token_ids);
        snprintf(tok, sizeof tok, "%s/tokenizer.json", r->cfg->model.hf_assets_path);
        struct stat st;
        if (stat(tok, &st) == 0) o.tokenizer_json = tok;
    } else { /* the byte tokenizer: BOS 256, EOS 257 */
        o.bos_token_id = 256;
        o.n_eos = 1;
        o.eos_token_ids[0] = 257;
    }
    tt_train_state gathered, *w;
    if (tt_run_whole_weights(r, &gathered, &w)) return tt_error_prefix("export to %s: ", out_dir);
    if (!w) return 0; /* rank 0 writes it */
    tt_param_store weights = tt_state_store(w, TT_STATE_PARAM);
    tt_err rc = tt_hf_export(r->model, out_dir, &o, &weights);
    if (w == &gathered) tt_state_free(&gathered);
    if (rc) return -1; /* tt_hf_export names the folder */
    if (!r->has_hf) { /* the byte tokenizer, written as a tokenizer.json transformers reads */
        char *json = tt_byte_tokenizer_hf_json();
        snprintf(tok, sizeof tok, "%s/tokenizer.json", out_dir);
        rc = json ? tt_write_file_atomic(tok, json, strlen(json)) : -1;
        free(json);
        if (rc) return tt_error_prefix("export to %s: ", out_dir);
    }
    tt_log("exported step %ld as a Hugging Face folder: %s", r->step, out_dir);
    return 0;
}

tt_err tt_export(const tt_config *cfg, const char *out_dir)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_MODEL)) return -1;
    tt_err rc = tt_run_export_hf(&r, out_dir);
    tt_run_close(&r);
    return rc;
}

/* run_open.c — setting a run up: the job, model, optimizer state, data,
 * graphs and metrics, resumed from its checkpoint or started from Hugging
 * Face weights. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/resolve.h"
#include "formats/ckpt_files.h"
#include "hf/hf_model.h"
#include "hf/peft_adapter.h"
#include "train/checkpoint.h"
#include "train/model_plan.h"
#include "train/parallel.h"
#include "train/run_open.h"

/* The data: the built-in corpus (generated once into dump_folder/data) or
 * the user's shards. */
/* A conversation shard's accounting, so that nothing the loader cuts or leaves out goes unsaid. */
static void log_chat_data(const tt_loader *l, const char *path, int T)
{
    tt_loader_chat_stats st;
    if (!l || !tt_loader_chat_stats_of(l, &st)) return;
    tt_log("%s: %lld conversations, %lld trained tokens an epoch; windows of %d tokens: %lld conversations cut at "
           "turns, %lld turns truncated (%lld trained tokens dropped), %lld pieces with nothing to train left out",
           path, (long long)st.docs, (long long)st.targets, T, (long long)st.split, (long long)st.truncated,
           (long long)st.dropped_targets, (long long)st.skipped);
}

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
    log_chat_data(r->train_loader, train_path, T);
    log_chat_data(r->val_loader, val_path, T);
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
 * on the built-in corpus, its floor, and the threads and OpenMP wait settings
 * it ran with (plan.json). Rewritten at every start, so
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
        /* the threads and the OpenMP wait settings tokens/s was measured under */
        char waits[160];
        cJSON_AddNumberToObject(o, "threads", tt_num_threads());
        cJSON_AddStringToObject(o, "openmp_waits", tt_openmp_wait_desc(waits, sizeof waits));
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

/* The layout over the job's mesh of the model m a run trains (its flat layout when the job has one process). */
static tt_err layout_state(tt_run *r, const tt_model *m, int ep)
{
    return tt_sharding_init(&r->sh, m, tt_dist_group_size(r->dist, TT_GROUP_SHARD),
                            tt_dist_group_size(r->dist, TT_GROUP_REPLICATE),
                            tt_dist_group_rank(r->dist, TT_GROUP_SHARD), ep,
                            (size_t)r->cfg->parallelism.fsdp_bucket_bytes);
}

/* The model's state: its fp32 weights (with the optimizer when training), this rank's slices of them under FSDP,
 * from the seed (a checkpoint or a Hugging Face folder may replace them later). */
static tt_err open_state(tt_run *r, int training, int ep)
{
    if (layout_state(r, r->model, ep) ||
        tt_state_init_sharded(&r->state, r->model, r->world > 1 ? &r->sh : NULL, r->be, r->q, training))
        return -1;
    tt_param_store weights = tt_state_store(&r->state, TT_STATE_PARAM);
    return tt_model_init_weights(r->model, (uint64_t)r->cfg->training.seed, &weights);
}

/* LoRA: the adapters and their state, the frozen base (its linear weights in lora.base_dtype) with its weights
 * from the Hugging Face folder (or the seed), and the hash a checkpoint keeps of them. Across ranks the adapters'
 * state is laid out over the mesh as a model's is, and the base is sliced over the same shard group. */
static tt_err open_lora(tt_run *r, int training, int ep)
{
    const tt_config *c = r->cfg;
    tt_lora_spec spec;
    const tt_dtype bdt = tt_config_lora_base_dtype(c);
    if (tt_parallel_check_lora(ep)) return -1;
    if (bdt == TT_BF16 && tt_config_act_dtype(c) != TT_BF16)
        return tt_errorf("lora.base_dtype = bfloat16 needs bf16 compute (training.mixed_precision_param = bfloat16), "
                         "or set lora.base_dtype = float32");
    const char *adapter = c->lora.adapter_path;
    if (tt_config_lora_spec(c, &spec)) return -1;
    if (tt_lora_new(r->model, &spec, &r->lora)) return adapter[0] ? tt_error_prefix("lora.adapter_path %s: ", adapter) : -1;
    r->lora_spec = spec;
    r->has_lora = 1;
    const tt_sharding *mesh = r->world > 1 ? &r->sh : NULL;
    const size_t bucket_bytes = (size_t)c->parallelism.fsdp_bucket_bytes;
    if (layout_state(r, r->lora.adapters, 1) ||
        tt_frozen_init_sharded(&r->frozen, r->model, bdt, mesh, bucket_bytes, r->be, r->q) ||
        tt_state_init_sharded(&r->state, r->lora.adapters, mesh, r->be, r->q, training))
        return -1;
    tt_param_store base = tt_frozen_store(&r->frozen), ad = tt_state_store(&r->state, TT_STATE_PARAM);
    if (tt_model_init_weights(r->model, (uint64_t)c->training.seed, &base) ||
        (adapter[0] ? tt_peft_adapter_load(adapter, &r->lora, &ad)
                    : tt_model_init_weights(r->lora.adapters, (uint64_t)c->training.seed + 1, &ad)))
        return -1;
    const char *dir = c->checkpoint.initial_load_path[0] ? c->checkpoint.initial_load_path : c->model.hf_assets_path;
    if (dir[0] && tt_hf_load_weights(r->model, dir, &base)) return -1;
    if (tt_frozen_hash(&r->frozen, &r->base_hash)) return -1;
    r->step_cfg.lora = &r->lora;
    r->step_cfg.frozen = &r->frozen;
    char sliced[96] = "";
    if (tt_frozen_is_sharded(&r->frozen))
        snprintf(sliced, sizeof sliced, ", sliced over %d shards (%.2f MiB a rank)", r->frozen.sh.shards,
                 (double)tt_frozen_rank_bytes(&r->frozen) / 1048576.0);
    if (training)
        tt_log("LoRA: rank %d, scale %g, %d linear layers adapted (%zu adapter parameters%s%s), base %s%s in %s%s",
               r->lora.rank, r->lora.scale, r->lora.n_targets, r->lora.adapters->numel, adapter[0] ? " from " : "",
               adapter, dir[0] ? dir : "from the seed", dir[0] ? "" : " (no model.hf_assets_path)",
               bdt == TT_BF16 ? "bf16 (linear weights)" : "fp32", sliced);
    return 0;
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
    r->step_cfg = (tt_step_cfg){.B = B, .T = T, .act_dtype = tt_config_act_dtype(c)};
    /* a Hugging Face model's routers may have no bias (Mixtral, Qwen-MoE, OLMoE): the coefficient has nothing to move */
    if (training && !tt_config_lora_on(c) && mc.moe.n_experts > 0 && !mc.moe.has_bias &&
        c->model.load_balance_coeff > 0)
        tt_log("model.load_balance_coeff = %g does nothing: the routers of %s have no selection bias (the expert "
               "load is only measured)",
               c->model.load_balance_coeff, c->model.hf_assets_path);
    /* the balancing bias is the base's: frozen under LoRA */
    if (tt_parallel_check_experts(ep, tt_dist_group_size(r->dist, TT_GROUP_SHARD), &mc) ||
        tt_moe_balance_init(&r->balance, r->model, tt_config_lora_on(c) ? 0 : c->model.load_balance_coeff, ep,
                            tt_dist_group_rank(r->dist, TT_GROUP_EXPERT)))
        goto fail;
    if (tt_config_lora_on(c) ? open_lora(r, training, ep) : open_state(r, training, ep)) goto fail;
    tt_param_store weights = tt_state_store(&r->state, TT_STATE_PARAM);
    if (purpose != TT_RUN_MODEL && purpose != TT_RUN_HF && open_data(r, training)) goto fail;
    if ((r->train_loader && check_vocab(r, r->train_loader)) || (r->val_loader && check_vocab(r, r->val_loader)))
        goto fail;

    /* graphs */
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
        if (tt_step_use_weights16(&r->step_cfg, &r->state)) goto fail;
        /* what the state holds, measured, on the rank that holds the most */
        int64_t held = (int64_t)(r->be->bytes_in_use() - mem0);
        if (r->world > 1 &&
            tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, &held, 1, TT_I64, TT_REDUCE_MAX, "the train state's size"))
            goto fail;
        r->state_bytes = (double)held;
        if (tt_build_micro_step(&r->train, r->model, &r->state, &r->step_cfg, 1, r->mode, c->activation_checkpoint.mode,
                                NULL) ||
            tt_build_optim_step(&r->optim, tt_run_trained(r), &r->state, &ac, r->mode))
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

    /* evaluating or generating needs a checkpoint, unless its weights are a base and a PEFT adapter */
    if (tt_run_restore(r, !training && purpose != TT_RUN_HF && !(r->has_lora && c->lora.adapter_path[0]))) goto fail;
    if (r->step == 0 && !r->has_lora && (c->checkpoint.initial_load_in_hf || purpose == TT_RUN_HF)) {
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
    if (r->has_lora) { /* no gradient products for the frozen weights; the adapters' own */
        int64_t matmul_params = 0;
        tt_model_count_params(&mc, &matmul_params);
        r->flops_per_token = tt_lora_flops_per_token(r->flops_per_token, matmul_params, (int64_t)r->lora.adapters->numel);
    }
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
        if (c->job.description[0]) tt_log("job.description: %s", c->job.description);
        tt_log("model %s (%s): %.2fM parameters, %.2f MFLOPs/token | %d x %d tokens x %d accumulation | backend %s, "
               "exec %s | activation checkpoint %s: arena %.1f MiB%s | compute %s | peak %.0f GFLOP/s %s (%s)",
               tt_arch_name(mc.arch), r->has_hf ? c->model.hf_assets_path : c->model.flavor, n / 1e6,
               r->flops_per_token / 1e6, B, T, r->accum_steps, r->be->name,
               r->mode == TT_EXEC_GRAPH ? "graph" : r->mode == TT_EXEC_EAGER ? "eager" : "debug",
               tt_ac_mode_name(tr->ac), r->arena_bytes / 1048576.0, ac,
               !bf16 ? "fp32"
               : tt_config_is_set(c, "training.mixed_precision_param")
                   ? "bf16 (fp32 master weights)"
                   : "bf16 (fp32 master weights; the backend's default where the hardware has bf16 arithmetic)",
               r->peak_gflops, bf16 ? "bf16" : "f32", r->peak_source);
        char moe[320];
        tt_model_moe_describe(&mc, &r->ext, moe, sizeof moe);
        if (moe[0]) tt_log("%s", moe);
        char experts[64] = "";
        if (r->sh.ep > 1)
            snprintf(experts, sizeof experts, ", experts over %d (%d a rank)", r->sh.ep, mc.moe.n_experts / r->sh.ep);
        const char *held = r->has_lora      ? "the frozen base, the adapters' weights, gradients and AdamW moments"
                           : r->state.w16 ? "weights, their bf16 copy for the bf16 products, gradients and AdamW moments"
                                          : "weights, gradients and AdamW moments";
        if (r->world > 1)
            tt_log("%d ranks: %d replicas x %d shards%s (%d buckets) | train state %.2f MiB a rank (%s%s, measured) | "
                   "%d threads a rank",
                   r->world, r->sh.replicas, r->sh.shards, experts, r->sh.n_buckets, r->state_bytes / 1048576.0, held,
                   r->state.grad_full ? ", and the full gradients micro-steps accumulate" : "", tt_num_threads());
        else
            tt_log("train state %.2f MiB (%s, measured)", r->state_bytes / 1048576.0, held);
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

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
#include "train/run.h"

tt_err tt_model_cfg_from_config(const tt_config *c, tt_model_cfg *o, tt_model_ext *ext, tt_hf_config *hf)
{
    const tt_model_config *m = &c->model;
    memset(o, 0, sizeof *o);
    if (ext) memset(ext, 0, sizeof *ext);
    if (m->hf_assets_path[0]) { /* the architecture is the HF folder's config.json */
        tt_hf_config hc;
        if (tt_hf_config_read(m->hf_assets_path, &hc)) return tt_error_prefix("model.hf_assets_path: ");
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
        if (tt_mkdir_p(dir) || tt_corpus_prepare(&cc, dir, &r->corpus)) return tt_error_prefix("synthetic corpus: ");
        snprintf(train_path, sizeof train_path, "%s/train.bin", dir);
        snprintf(val_path, sizeof val_path, "%s/val.bin", dir);
        r->builtin_corpus = 1;
    } else {
        snprintf(train_path, sizeof train_path, "%s", c->training.dataset_path[0] ? c->training.dataset_path : c->training.dataset);
        snprintf(val_path, sizeof val_path, "%s", c->validation.dataset_path);
    }
    tt_loader_cfg tc = {train_path, T, B, (uint64_t)c->training.seed, TT_LOADER_TRAIN, 0, 1};
    tt_loader_cfg vc = {val_path, T, c->validation.local_batch_size, 0, TT_LOADER_VAL, 0, 1};
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

static tt_err restore(tt_run *r, int require);

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
    if (!(r->be = tt_config_backend(c)) || !(r->q = r->be->queue_new())) return -1;
    int B = c->training.local_batch_size, T = c->training.seq_len;
    int global = c->training.global_batch_size > 0 ? c->training.global_batch_size : B;
    r->accum_steps = global / B;
    if (r->accum_steps < 1 || r->accum_steps > TT_MAX_ACCUM)
        return tt_errorf("training.global_batch_size / local_batch_size = %d: must be within [1, %d]", r->accum_steps,
                         TT_MAX_ACCUM);
    if (c->checkpoint.folder[0] == '/') /* an absolute folder stands on its own */
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", c->checkpoint.folder);
    else
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s/%s", c->job.dump_folder, c->checkpoint.folder);
    if (tt_mkdir_p(c->job.dump_folder)) goto fail;
    if (!(r->model = tt_model_new_ext(&mc, &r->ext))) goto fail;
    if (tt_state_init(&r->state, r->model, r->be, r->q, training)) goto fail;
    tt_param_store weights = tt_state_store(&r->state, TT_STATE_PARAM);
    if (tt_model_init_weights(r->model, (uint64_t)c->training.seed, &weights)) goto fail;
    if (purpose != TT_RUN_MODEL && purpose != TT_RUN_HF && open_data(r, training)) goto fail;
    if ((r->train_loader && check_vocab(r, r->train_loader)) || (r->val_loader && check_vocab(r, r->val_loader)))
        goto fail;

    /* graphs */
    r->step_cfg = (tt_step_cfg){.B = B, .T = T, .act_dtype = tt_config_act_dtype(c)};
    if (training) {
        r->micro = calloc((size_t)r->accum_steps, sizeof *r->micro);
        if (!r->micro) goto fail;
        for (int a = 0; a < r->accum_steps; a++)
            if (!(r->micro[a] = tt_batch_new(B, T))) goto fail;
        tt_adamw_cfg ac = {c->optimizer.beta1, c->optimizer.beta2, c->optimizer.eps, c->optimizer.weight_decay,
                           c->training.max_norm};
        if (tt_build_micro_step(&r->train, r->model, &r->state, &r->step_cfg, 1, r->mode, c->activation_checkpoint.mode) ||
            tt_build_optim_step(&r->optim, r->model, &r->state, &ac, r->mode))
            goto fail;
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
        if (tt_build_micro_step(&r->eval, r->model, &r->state, &vc, 0, r->mode, TT_AC_NONE)) goto fail;
    }

    if (restore(r, !training && purpose != TT_RUN_HF)) goto fail;
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
        if (write_run_files(r, &plan)) goto fail;
        if (tt_metrics_open(&r->metrics, c->metrics.save_jsonl ? c->job.dump_folder : NULL, r->step > 0,
                            r->flops_per_token, r->peak_gflops, r->step, c->training.steps))
            goto fail;
        r->metrics.peak_source = r->peak_source; /* named where MFU is not stated */
        if (tt_metrics_open_tensorboard(&r->metrics, c, r->builtin_corpus ? &r->corpus : NULL)) goto fail;
    }
    return 0;
fail:
    tt_run_close(r);
    return -1;
}

/* ---- checkpoints ---------------------------------------------------------- */

/* One tensor of the train state in a checkpoint: which buffer and parameter
 * it is, and its name (moments carry their own prefix). */
typedef struct {
    tt_train_state *s;
    tt_state_kind kind;
    int param;
    char name[128];
} ckpt_entry;

/* The writer fetches each tensor from the backend as it reaches it. */
static tt_err fetch_entry(void *ctx, void *dst, size_t bytes)
{
    const ckpt_entry *e = ctx;
    return tt_backend_read(e->s->be, e->s->q, dst, tt_state_param_mem(e->s, e->kind, e->param), bytes);
}

/* Every tensor of the train state, in a fixed order: weights, then moments. */
static int state_tensors(tt_run *r, ckpt_entry *ent, tt_st_tensor *out)
{
    static const tt_state_kind kinds[3] = {TT_STATE_PARAM, TT_STATE_EXP_AVG, TT_STATE_EXP_AVG_SQ};
    int n = 0;
    const tt_model *m = r->model;
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < m->n_params; i++) {
            const tt_param *p = &m->params[i];
            ckpt_entry *e = &ent[n];
            tt_st_tensor *t = &out[n++];
            *e = (ckpt_entry){&r->state, kinds[part], i, ""};
            snprintf(e->name, sizeof e->name, "%s%s", tt_state_kind_prefix(kinds[part]), p->name);
            memset(t, 0, sizeof *t);
            t->name = e->name;
            snprintf(t->dtype, sizeof t->dtype, "F32");
            t->ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++) t->shape[d] = p->shape[d];
            t->nbytes = (size_t)tt_param_numel(p) * sizeof(float);
            t->fetch = fetch_entry;
            t->fetch_ctx = e;
        }
    return n;
}

tt_err tt_run_save(tt_run *r)
{
    int nt = 3 * r->model->n_params;
    tt_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
    ckpt_entry *ent = calloc((size_t)nt, sizeof *ent);
    if (!ts || !ent) {
        free(ts);
        free(ent);
        return tt_errorf("out of memory saving a checkpoint");
    }
    state_tensors(r, ent, ts);
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", "titan-checkpoint-1");
    cJSON_AddNumberToObject(meta, "step", (double)r->step);
    cJSON_AddStringToObject(meta, "model", tt_arch_name(r->model->cfg.arch));
    char *toml = tt_config_to_toml(r->cfg);
    cJSON_AddStringToObject(meta, "config", toml ? toml : "");
    free(toml);
    /* The loader position is where the first micro-batch of the next step starts. */
    tt_loader_state ls = tt_loader_get_state(r->train_loader);
    cJSON *jl = cJSON_AddObjectToObject(meta, "data");
    cJSON_AddNumberToObject(jl, "epoch", (double)ls.epoch);
    cJSON_AddNumberToObject(jl, "cursor", (double)ls.cursor);
    cJSON_AddNumberToObject(meta, "training_seed", (double)r->cfg->training.seed);
    char *text = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
    tt_err rc = text ? tt_ckpt_save(r->ckpt_dir, r->step, nt, ts, text) : tt_errorf("out of memory");
    free(text);
    free(ts);
    free(ent);
    if (!rc && r->cfg->checkpoint.keep_latest_k > 0) rc = tt_ckpt_prune(r->ckpt_dir, r->cfg->checkpoint.keep_latest_k);
    if (rc) return tt_error_prefix("saving checkpoint step %ld: ", r->step);
    tt_log("checkpoint saved: %s/step-%ld", r->ckpt_dir, r->step);
    return 0;
}

static tt_err load_from(tt_run *r, tt_ckpt *ck, const char *where)
{
    const tt_safetensors *st = tt_ckpt_tensors(ck);
    int nt = 3 * r->model->n_params;
    tt_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
    ckpt_entry *ent = calloc((size_t)nt, sizeof *ent);
    tt_err rc = ts && ent ? 0 : tt_errorf("out of memory");
    if (!rc) state_tensors(r, ent, ts);
    for (int i = 0; i < nt && !rc; i++) {
        const tt_st_tensor *s = tt_st_find(st, ts[i].name);
        if (!s) rc = tt_errorf("%s: tensor '%s' is missing", where, ts[i].name);
        else if (strcmp(s->dtype, "F32") || s->nbytes != ts[i].nbytes || s->ndim != ts[i].ndim ||
                 memcmp(s->shape, ts[i].shape, sizeof(int64_t) * (size_t)s->ndim))
            rc = tt_errorf("%s: tensor '%s' has shape or dtype different from the model's (was the config changed?)",
                           where, ts[i].name);
        else if (r->state.buf[ent[i].kind]) /* moments only where the run keeps an optimizer */
            rc = tt_backend_write(r->be, r->q, tt_state_param_mem(&r->state, ent[i].kind, ent[i].param), s->data,
                                  s->nbytes);
    }
    free(ts);
    free(ent);
    if (rc) return rc;
    cJSON *meta = cJSON_Parse(tt_ckpt_meta_json(ck));
    cJSON *js = cJSON_GetObjectItem(meta, "step"), *jd = cJSON_GetObjectItem(meta, "data");
    cJSON *je = jd ? cJSON_GetObjectItem(jd, "epoch") : NULL, *jc = jd ? cJSON_GetObjectItem(jd, "cursor") : NULL;
    if (!cJSON_IsNumber(js) || !cJSON_IsNumber(je) || !cJSON_IsNumber(jc) || js->valuedouble < 0)
        rc = tt_errorf("%s/meta.json: missing or bad 'step' / 'data' fields", where);
    else {
        r->step = (long)js->valuedouble;
        tt_loader_state ls = {(int64_t)je->valuedouble, (int64_t)jc->valuedouble};
        if (r->train_loader && tt_loader_set_state(r->train_loader, ls)) rc = tt_error_prefix("%s: ", where);
    }
    cJSON_Delete(meta);
    return rc;
}

/* Resume from checkpoint.load_step, or else the newest checkpoint. A bad one
 * is an error unless checkpoint.fallback_to_previous allows an older one. */
static tt_err restore(tt_run *r, int require)
{
    long steps[256];
    int n;
    if (r->cfg->checkpoint.load_step >= 0) {
        steps[0] = r->cfg->checkpoint.load_step;
        n = 1;
    } else if ((n = tt_ckpt_list(r->ckpt_dir, steps, 256)) <= 0) {
        if (require) return tt_errorf("%s: no checkpoint found (train first, or set job.dump_folder)", r->ckpt_dir);
        return 0; /* nothing saved yet: a fresh run */
    }
    for (int k = n - 1; k >= 0; k--) {
        char where[4200];
        snprintf(where, sizeof where, "%s/step-%ld", r->ckpt_dir, steps[k]);
        tt_ckpt *ck = tt_ckpt_open(r->ckpt_dir, steps[k]);
        tt_err rc = ck ? load_from(r, ck, where) : -1;
        tt_ckpt_close(ck);
        if (!rc) {
            if (require) fprintf(stderr, "loaded %s (step %ld)\n", where, r->step); /* stdout carries the output */
            else tt_log("resumed from %s (step %ld)", where, r->step);
            return 0;
        }
        if (!r->cfg->checkpoint.fallback_to_previous || k == 0)
            return tt_error_prefix("cannot resume (set checkpoint.fallback_to_previous = true to use an older "
                                   "checkpoint, or move the bad one away): ");
        tt_warn("%s; falling back to the previous checkpoint", tt_last_error());
    }
    return 0;
}

void tt_run_close(tt_run *r)
{
    tt_metrics_close(&r->metrics);
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
    memset(r, 0, sizeof *r);
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
    tt_param_store weights = tt_state_store(&r->state, TT_STATE_PARAM);
    if (tt_hf_export(r->model, out_dir, &o, &weights)) return tt_error_prefix("export to %s: ", out_dir);
    if (!r->has_hf) { /* the byte tokenizer, written as a tokenizer.json transformers reads */
        char *json = tt_byte_tokenizer_hf_json();
        snprintf(tok, sizeof tok, "%s/tokenizer.json", out_dir);
        tt_err rc = json ? tt_write_file_atomic(tok, json, strlen(json)) : -1;
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

/* checkpoint.c — a run's train state saved and restored, by every rank of
 * the job together. A whole state (one process, or data parallel ranks that
 * all hold everything) is saved as the group of files "state", one tensor a
 * parameter and moment. A sharded state is saved as a group a shard,
 * "shard-<s>-of-<S>" (one tensor a bucket and kind), with the layout in
 * meta.json. The ranks that hold the same bytes share the writing: each
 * writes a part of its group, G.part-<k>-of-<P>.safetensors (one writer:
 * G.safetensors). Either loads into any layout: each rank copies the pieces
 * of the saved tensors that fall in its slices, so a run resumes on any
 * number of ranks. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "formats/ckpt_files.h"
#include "formats/safetensors.h"
#include "train/checkpoint.h"
#include "train/ckpt_layout.h"
#include "train/parallel.h"

static const tt_state_kind saved_kinds[3] = {TT_STATE_PARAM, TT_STATE_EXP_AVG, TT_STATE_EXP_AVG_SQ};

/* Whether every rank succeeded: rc of each, reduced. On the ranks that did,
 * an error naming one that did not (its own message says why). */
static tt_err agree(tt_run *r, tt_err rc, const char *what)
{
    if (r->world == 1) return rc;
    int32_t bad = rc ? r->rank + 1 : 0;
    if (tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, &bad, 1, TT_I32, TT_REDUCE_MAX, what)) return -1;
    if (rc) return rc;
    return bad ? tt_errorf("%s: rank %d failed (its message says why)", what, bad - 1) : 0;
}

/* ---- what a checkpoint's meta.json says besides its files ------------------ */

static char *meta_text(tt_run *r, const tt_sharding *layout)
{
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", "titan-checkpoint-1");
    cJSON_AddNumberToObject(meta, "step", (double)r->step);
    cJSON_AddStringToObject(meta, "model", tt_arch_name(r->model->cfg.arch));
    char *toml = tt_config_to_toml(r->cfg);
    cJSON_AddStringToObject(meta, "config", toml ? toml : "");
    free(toml);
    /* The loader position is where the first micro-batch of the next step
     * starts: a global cursor, the same on every rank and for any rank count. */
    tt_loader_state ls = tt_loader_get_state(r->train_loader);
    cJSON *jl = cJSON_AddObjectToObject(meta, "data");
    cJSON_AddNumberToObject(jl, "epoch", (double)ls.epoch);
    cJSON_AddNumberToObject(jl, "cursor", (double)ls.cursor);
    cJSON_AddNumberToObject(meta, "training_seed", (double)r->cfg->training.seed);
    if (r->has_lora) { /* the adapters only: the base they adapt, and a hash of its weights, to refuse another */
        cJSON *jl = cJSON_AddObjectToObject(meta, "lora");
        char hash[20];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->base_hash);
        cJSON_AddStringToObject(jl, "base", r->cfg->model.hf_assets_path);
        cJSON_AddStringToObject(jl, "base_hash", hash);
        cJSON_AddNumberToObject(jl, "rank", r->lora.rank);
        cJSON_AddNumberToObject(jl, "targets", r->lora.n_targets);
    }
    if (layout) { /* each bucket: [offset, numel, padded] in the flat layout, or its pieces */
        cJSON *jo = cJSON_AddObjectToObject(meta, "layout");
        cJSON_AddNumberToObject(jo, "shards", layout->shards);
        cJSON_AddNumberToObject(jo, "expert_parallel", layout->ep);
        cJSON_AddNumberToObject(jo, "numel", (double)tt_run_trained(r)->numel);
        cJSON *jb = cJSON_AddArrayToObject(jo, "buckets");
        for (int b = 0; b < layout->n_buckets; b++) {
            const tt_fsdp_bucket *bk = &layout->buckets[b];
            if (bk->n_segs == 1 && !bk->expert) {
                const double v[3] = {(double)bk->offset, (double)bk->numel, (double)bk->padded};
                cJSON_AddItemToArray(jb, cJSON_CreateDoubleArray(v, 3));
                continue;
            }
            /* pieces [flat, n, ep_stride]: an expert bucket's as shard rank 0 holds them, each next place in
             * the expert group ep_stride further on */
            cJSON *e = cJSON_CreateObject(), *jp = cJSON_AddArrayToObject(e, "pieces");
            for (int k = 0; k < bk->n_segs; k++) {
                const double v[3] = {(double)(bk->seg[k].flat - layout->place * bk->ep_stride[k]), (double)bk->seg[k].n,
                                     (double)bk->ep_stride[k]};
                cJSON_AddItemToArray(jp, cJSON_CreateDoubleArray(v, 3));
            }
            cJSON_AddNumberToObject(e, "padded", (double)bk->padded);
            cJSON_AddBoolToObject(e, "experts", bk->expert);
            cJSON_AddItemToArray(jb, e);
        }
    }
    char *text = cJSON_PrintUnformatted(meta);
    cJSON_Delete(meta);
    if (!text) tt_errorf("out of memory");
    return text;
}

/* ---- save ------------------------------------------------------------------ */

/* One tensor of the train state: which buffer, and where in it. */
typedef struct {
    tt_train_state *s;
    tt_state_kind kind;
    size_t off; /* bytes */
    char name[128];
    double slow; /* seconds of comm.fault_kind = slow_save before it (tests) */
} ckpt_entry;

/* The writer fetches each tensor from the backend as it reaches it. */
static tt_err fetch_entry(void *ctx, void *dst, size_t bytes)
{
    const ckpt_entry *e = ctx;
    if (e->slow > 0) tt_fault_slow_work(e->slow);
    return tt_backend_read(e->s->be, e->s->q, dst, (tt_mem){e->s->buf[e->kind], e->off}, bytes);
}

/* slow_save's time spread over a rank's n tensors (those with bytes: the
 * writer fetches no empty one), so it keeps writing all along */
static void slow_entries(const tt_run *r, ckpt_entry *ent, const tt_st_tensor *ts, int n)
{
    const double s = tt_fault_slow_seconds(r->cfg, r->rank, r->step);
    int full = 0;
    for (int i = 0; i < n; i++) full += ts[i].nbytes > 0;
    if (s <= 0 || !full) return;
    tt_warn("comm.fault_kind = slow_save at step %ld: writing for %g s", r->step, s);
    for (int i = 0; i < n; i++) ent[i].slow = ts[i].nbytes > 0 ? s / full : 0;
}

static void entry(tt_st_tensor *t, ckpt_entry *e, int ndim, const int64_t *shape)
{
    memset(t, 0, sizeof *t);
    t->name = e->name;
    snprintf(t->dtype, sizeof t->dtype, "F32");
    t->ndim = ndim;
    t->nbytes = sizeof(float);
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d], t->nbytes *= (size_t)shape[d];
    t->fetch = fetch_entry;
    t->fetch_ctx = e;
}

/* The whole state's tensors, in a fixed order: weights, then moments. */
static int whole_tensors(tt_run *r, ckpt_entry *ent, tt_st_tensor *out)
{
    int n = 0;
    const tt_model *m = tt_run_trained(r);
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < m->n_params; i++, n++) {
            const tt_param *p = &m->params[i];
            ent[n] = (ckpt_entry){&r->state, saved_kinds[part], (size_t)p->offset * sizeof(float), "", 0};
            snprintf(ent[n].name, sizeof ent[n].name, "%s%s", tt_state_kind_prefix(saved_kinds[part]), p->name);
            entry(&out[n], &ent[n], p->ndim, p->shape);
        }
    return n;
}

/* A shard's tensors: every bucket's slice of each kind, "<kind prefix>bucket.<b>". */
static int shard_tensors(tt_run *r, ckpt_entry *ent, tt_st_tensor *out)
{
    int n = 0;
    const tt_sharding *sh = &r->sh;
    for (int part = 0; part < 3; part++)
        for (int b = 0; b < sh->n_buckets; b++, n++) {
            const int64_t len = sh->buckets[b].padded / tt_sharding_group_size(sh, b);
            ent[n] = (ckpt_entry){&r->state, saved_kinds[part], (size_t)sh->shard_offset[b] * sizeof(float), "", 0};
            snprintf(ent[n].name, sizeof ent[n].name, "%sbucket.%d", tt_state_kind_prefix(saved_kinds[part]), b);
            entry(&out[n], &ent[n], 1, &len);
        }
    return n;
}

/* The name of group g of a state saved as `groups`: "state" (a whole state), or a shard's, "shard-<s>-of-<S>" */
static void group_name(char *buf, size_t n, int g, int groups)
{
    if (groups == 1) snprintf(buf, n, "state");
    else snprintf(buf, n, "shard-%05d-of-%05d", g, groups);
}

/* The file of part k of P of a group: G.safetensors when one rank writes it all, else G.part-<k>-of-<P>.safetensors */
static void part_file(char *buf, size_t n, const char *group, int k, int parts)
{
    if (parts == 1) snprintf(buf, n, "%s.safetensors", group);
    else snprintf(buf, n, "%s.part-%05d-of-%05d.safetensors", group, k, parts);
}

/* The tensors [*first, *first + *count) of ts that part k of P writes: a run of them, split by bytes (a tensor goes
 * to the part its middle byte falls in), the same on every rank. */
static void part_range(const tt_st_tensor *ts, int n, int parts, int k, int *first, int *count)
{
    double total = 0, at = 0;
    for (int i = 0; i < n; i++) total += (double)ts[i].nbytes;
    *first = n, *count = 0;
    for (int i = 0; i < n; i++) {
        const double mid = at + 0.5 * (double)ts[i].nbytes;
        at += (double)ts[i].nbytes;
        int part = total > 0 ? (int)(mid * parts / total) : 0;
        if (part > parts - 1) part = parts - 1;
        if (part != k) continue;
        if (*first == n) *first = i;
        ++*count;
    }
}

/* Save the state as `groups` groups of files: one ("state") when every rank holds it all, or one a shard. The
 * ranks that hold a group's bytes (every rank of a data parallel run; a shard's ranks in each replica) write a part
 * of it each, so that no rank writes alone while the others wait. This rank's group is g, of tensors ts (n), and it
 * writes part `part` of `parts`. Rank 0 begins the temporary folder and, once every part is written, commits
 * meta.json with each file's checksums. */
static tt_err save_parts(tt_run *r, const char *meta, int groups, int g, int part, int parts, ckpt_entry *ent,
                         tt_st_tensor *ts, int n)
{
    const int nf = groups * parts, me = g * parts + part;
    char (*names)[96] = calloc((size_t)nf, sizeof *names);
    const char **files = calloc((size_t)nf, sizeof *files);
    tt_ckpt_sums *sums = calloc((size_t)nf, sizeof *sums); /* per file, filled by its writer */
    tt_err rc = names && files && sums ? 0 : tt_errorf("out of memory");
    if (!rc && r->rank == 0) rc = tt_ckpt_begin(r->ckpt_dir, r->step);
    rc = agree(r, rc, "starting the checkpoint");
    int first, count;
    part_range(ts, n, parts, part, &first, &count);
    if (!rc && count > 0) { /* a part of no tensors (more ranks than tensors) makes no file */
        char group[48], file[96];
        group_name(group, sizeof group, g, groups);
        part_file(file, sizeof file, group, part, parts);
        slow_entries(r, ent + first, ts + first, count);
        rc = tt_ckpt_write_part(r->ckpt_dir, r->step, file, count, ts + first, &sums[me]);
    }
    rc = agree(r, rc, "writing the checkpoint's files");
    /* every file's checksums to rank 0 (one writer a file, the others' zeros: the sum is its figures, bit for bit) */
    if (!rc && r->world > 1 &&
        tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, sums, (size_t)nf * sizeof *sums / sizeof(int64_t), TT_I64,
                           TT_REDUCE_SUM, "the checkpoint's checksums"))
        rc = -1;
    if (!rc && r->rank == 0) {
        int listed = 0;
        for (int f = 0; f < nf; f++) {
            if (!sums[f].size) continue; /* a part with no tensors: no file (a written one has at least its header) */
            char group[48];
            group_name(group, sizeof group, f / parts, groups);
            part_file(names[listed], sizeof names[listed], group, f % parts, parts);
            if (listed != f) sums[listed] = sums[f];
            files[listed] = names[listed];
            listed++;
        }
        rc = tt_ckpt_commit(r->ckpt_dir, r->step, meta, listed, files, sums);
    }
    rc = agree(r, rc, "committing the checkpoint");
    if (rc && r->rank == 0) tt_ckpt_abort(r->ckpt_dir, r->step);
    free(names);
    free(files);
    free(sums);
    return rc;
}

tt_err tt_run_save(tt_run *r)
{
    const int sharded = tt_state_is_sharded(&r->state);
    const int nt = 3 * (sharded ? r->sh.n_buckets : tt_run_trained(r)->n_params);
    char *meta = meta_text(r, sharded ? &r->sh : NULL);
    tt_st_tensor *ts = calloc((size_t)nt, sizeof *ts);
    ckpt_entry *ent = calloc((size_t)nt, sizeof *ent);
    tt_err rc = meta && ts && ent ? 0 : tt_errorf("out of memory");
    /* a whole state: every rank holds it and writes a part; a sharded one: the shard's ranks in every replica */
    const int parts = sharded ? tt_dist_group_size(r->dist, TT_GROUP_REPLICATE) : r->world;
    const int part = sharded ? tt_dist_group_rank(r->dist, TT_GROUP_REPLICATE) : r->rank;
    if (!rc && sharded) shard_tensors(r, ent, ts);
    else if (!rc) whole_tensors(r, ent, ts);
    rc = agree(r, rc, "preparing the checkpoint");
    if (!rc)
        rc = save_parts(r, meta, sharded ? r->sh.shards : 1, sharded ? r->sh.shard_rank : 0, part, parts, ent, ts, nt);
    free(meta);
    free(ts);
    free(ent);
    if (!rc && r->rank == 0 && r->cfg->checkpoint.keep_latest_k > 0)
        rc = tt_ckpt_prune(r->ckpt_dir, r->cfg->checkpoint.keep_latest_k);
    if (agree(r, rc, "saving the checkpoint")) return tt_error_prefix("saving checkpoint step %ld: ", r->step);
    tt_log("checkpoint saved: %s/step-%ld%s", r->ckpt_dir, r->step,
           sharded && parts > 1 ? " (a part of each shard a replica)"
           : sharded            ? " (one file a shard)"
           : parts > 1          ? " (a part a rank)"
                                : "");
    return 0;
}

/* ---- load ------------------------------------------------------------------ */

/* Where a kind's saved values lie: file st of checkpoint ck, its flat element `first` at data */
typedef struct {
    tt_ckpt *ck;
    const tt_safetensors *st;
    const float *data;
    int64_t first;
} saved_at;

static tt_err check_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const saved_at *s = ctx;
    (void)at;
    return tt_ckpt_check(s->ck, s->st, s->data + (flat - s->first), (size_t)n * sizeof(float));
}

/* The flat range [first, first + n) of a kind, saved at s, into the rank's part of it; moments only where the run
 * keeps an optimizer. The bytes the rank takes (its pieces, on a sharded state) are checked against their chunks'
 * checksums first, and no others are read. */
static tt_err load_range(tt_run *r, tt_state_kind kind, const saved_at *s, int64_t n)
{
    if (!r->state.buf[kind]) return 0;
    const tt_err rc = tt_state_is_sharded(&r->state)
                          ? tt_sharding_pieces(r->state.sh, r->state.sh->shard_rank, s->first, s->first + n, check_piece,
                                               (void *)s)
                          : tt_ckpt_check(s->ck, s->st, s->data, (size_t)n * sizeof(float));
    return rc ? rc : tt_state_write_range(&r->state, kind, s->first, n, s->data);
}

/* A saved tensor: there, F32 and numel long, and (ndim > 0) of that shape. */
static tt_err check_tensor(const tt_st_tensor *t, const char *name, int64_t numel, int ndim, const int64_t *shape,
                           const char *where)
{
    if (!t) return tt_errorf("%s: tensor '%s' is missing", where, name);
    if (strcmp(t->dtype, "F32") || t->nbytes != (size_t)numel * sizeof(float) ||
        (ndim > 0 && (t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim))))
        return tt_errorf("%s: tensor '%s' has shape or dtype different from the model's (was the config changed?)",
                         where, name);
    return 0;
}

/* The tensor `name` of a group's files (the state's, or a shard's), checked; *st its file */
static tt_err find_tensor(tt_ckpt *ck, const char *group, const char *name, int64_t numel, int ndim,
                          const int64_t *shape, const char *where, const tt_st_tensor **t, const tt_safetensors **st)
{
    const int files = tt_ckpt_find(ck, group, name, t, st);
    if (files < 0) return tt_error_prefix("%s: ", where);
    if (files == 0) return tt_errorf("%s: %s.safetensors is not in the checkpoint, nor are its parts", where, group);
    return check_tensor(*t, name, numel, ndim, shape, where);
}

static tt_err load_whole(tt_run *r, tt_ckpt *ck, const char *where)
{
    const tt_model *m = tt_run_trained(r);
    tt_err rc = 0;
    for (int part = 0; part < 3 && !rc; part++)
        for (int i = 0; i < m->n_params && !rc; i++) {
            const tt_param *p = &m->params[i];
            char name[160];
            snprintf(name, sizeof name, "%s%s", tt_state_kind_prefix(saved_kinds[part]), p->name);
            const tt_st_tensor *t;
            const tt_safetensors *st;
            if (!(rc = find_tensor(ck, "state", name, tt_param_numel(p), p->ndim, p->shape, where, &t, &st))) {
                const saved_at s = {ck, st, t->data, p->offset};
                rc = load_range(r, saved_kinds[part], &s, tt_param_numel(p));
            }
        }
    return rc;
}

/* A piece of a saved slice into the loading rank's state. */
typedef struct {
    tt_run *r;
    tt_state_kind kind;
    tt_ckpt *ck;
    const tt_safetensors *st;
    const float *data;
} load_ctx;

static tt_err load_piece(void *ctx, int64_t flat, int64_t at, int64_t n)
{
    const load_ctx *l = ctx;
    const saved_at s = {l->ck, l->st, l->data + at, flat};
    return load_range(l->r, l->kind, &s, n);
}

static tt_err load_sharded(tt_run *r, tt_ckpt *ck, const cJSON *jo, const char *where)
{
    tt_sharding saved;
    if (tt_ckpt_layout_read(jo, tt_run_trained(r), &saved, where)) return -1;
    tt_err rc = 0;
    for (int s = 0; s < saved.shards && !rc; s++) {
        char group[48];
        group_name(group, sizeof group, s, saved.shards);
        for (int part = 0; part < 3 && !rc; part++)
            for (int b = 0; b < saved.n_buckets && !rc; b++) {
                char name[64];
                snprintf(name, sizeof name, "%sbucket.%d", tt_state_kind_prefix(saved_kinds[part]), b);
                const int64_t len = saved.buckets[b].padded / tt_sharding_group_size(&saved, b);
                const tt_st_tensor *t;
                const tt_safetensors *st;
                if ((rc = find_tensor(ck, group, name, len, 0, NULL, where, &t, &st))) break;
                /* the saved slice's pieces of the flat layout (padding left out) */
                load_ctx l = {r, saved_kinds[part], ck, st, t->data};
                rc = tt_sharding_slice_pieces(&saved, b, s, load_piece, &l);
            }
    }
    tt_sharding_free(&saved);
    return rc;
}

/* A LoRA checkpoint holds adapters for one base: resuming needs LoRA on a base of the same weights. */
static tt_err check_lora(const tt_run *r, const cJSON *meta, const char *where)
{
    const cJSON *jl = cJSON_GetObjectItem(meta, "lora"), *jh = jl ? cJSON_GetObjectItem(jl, "base_hash") : NULL;
    const cJSON *jb = jl ? cJSON_GetObjectItem(jl, "base") : NULL;
    if (!jl != !r->has_lora)
        return tt_errorf("%s holds %s, and this run %s (lora.rank)", where, jl ? "LoRA adapters" : "a model's weights",
                         r->has_lora ? "trains adapters" : "trains the weights");
    if (!jl) return 0;
    char hash[20];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->base_hash);
    if (!cJSON_IsString(jh) || strcmp(jh->valuestring, hash))
        return tt_errorf("%s: its adapters were trained on another base (%s, weights hash %s), not on this run's "
                         "(%s, hash %s)",
                         where, cJSON_IsString(jb) ? jb->valuestring : "?", cJSON_IsString(jh) ? jh->valuestring : "?",
                         r->cfg->model.hf_assets_path[0] ? r->cfg->model.hf_assets_path : "random", hash);
    return 0;
}

static tt_err load_from(tt_run *r, tt_ckpt *ck, const char *where)
{
    cJSON *meta = cJSON_Parse(tt_ckpt_meta_json(ck));
    const cJSON *jo = cJSON_GetObjectItem(meta, "layout");
    /* a layout: one group of files a shard; none: the whole state's, "state" */
    tt_err rc = check_lora(r, meta, where) ? -1 : jo ? load_sharded(r, ck, jo, where) : load_whole(r, ck, where);
    cJSON *js = cJSON_GetObjectItem(meta, "step"), *jd = cJSON_GetObjectItem(meta, "data");
    cJSON *je = jd ? cJSON_GetObjectItem(jd, "epoch") : NULL, *jc = jd ? cJSON_GetObjectItem(jd, "cursor") : NULL;
    if (rc) {
    } else if (!cJSON_IsNumber(js) || !cJSON_IsNumber(je) || !cJSON_IsNumber(jc) || js->valuedouble < 0)
        rc = tt_errorf("%s/meta.json: missing or bad 'step' / 'data' fields", where);
    else {
        r->step = (long)js->valuedouble;
        tt_loader_state ls = {(int64_t)je->valuedouble, (int64_t)jc->valuedouble};
        if (r->train_loader && tt_loader_set_state(r->train_loader, ls)) rc = tt_error_prefix("%s: ", where);
    }
    cJSON_Delete(meta);
    return rc;
}

/* What each rank read of the checkpoint it resumed from (data, then metadata: meta.json and the files' headers),
 * said once by rank 0: each rank reads the chunks of its own slices. */
static void log_bytes_read(tt_run *r, const uint64_t got[2])
{
    int64_t *all = calloc(2 * (size_t)r->world, sizeof *all);
    if (!all) return;
    all[2 * r->rank] = (int64_t)got[0], all[2 * r->rank + 1] = (int64_t)got[1];
    if (r->world == 1 || !tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, all, 2 * (size_t)r->world, TT_I64, TT_REDUCE_SUM,
                                             "the checkpoint's bytes read")) {
        char line[1024];
        size_t at = 0;
        for (int k = 0; k < r->world && k < 16 && at < sizeof line; k++)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s rank %d %lld + %lld", k ? "," : "", k,
                                   (long long)all[2 * k], (long long)all[2 * k + 1]);
        if (r->world > 16 && at < sizeof line) snprintf(line + at, sizeof line - at, ", ... (%d ranks)", r->world);
        tt_log("checkpoint bytes read (data + metadata):%s", line);
    }
    free(all);
}

/* ---- which checkpoints the ranks see -------------------------------------- */

/* A rank's view of the checkpoint folder: how many, the oldest and the
 * newest, and a hash of the whole list. */
enum { VIEW_N, VIEW_OLDEST, VIEW_NEWEST, VIEW_HASH, VIEW_FIELDS };

static void view_of(const long *steps, int n, int64_t *v)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < n; i++) h = tt_hash64(h ^ (uint64_t)steps[i], (uint64_t)i);
    v[VIEW_N] = n, v[VIEW_OLDEST] = n ? steps[0] : -1, v[VIEW_NEWEST] = n ? steps[n - 1] : -1;
    memcpy(&v[VIEW_HASH], &h, sizeof h);
}

static int same_view(const int64_t *all, int i, int j)
{
    return !memcmp(all + (size_t)i * VIEW_FIELDS, all + (size_t)j * VIEW_FIELDS, VIEW_FIELDS * sizeof *all);
}

/* "rank 0 sees 2, step-2 to step-4" / "ranks 1, 3 see none": the ranks that share rank first's view, and it. */
static void describe_view(char *buf, size_t size, const int64_t *all, int world, int first)
{
    const int64_t *v = all + (size_t)first * VIEW_FIELDS;
    char ranks[96] = "", what[96];
    size_t len = 0;
    int n = 0;
    for (int j = first; j < world; j++) {
        if (!same_view(all, first, j)) continue;
        if (n < 6) len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", n ? ", " : "", j);
        n++;
    }
    if (v[VIEW_N] == 0) snprintf(what, sizeof what, "none");
    else if (v[VIEW_N] == 1) snprintf(what, sizeof what, "step-%lld", (long long)v[VIEW_NEWEST]);
    else
        snprintf(what, sizeof what, "%lld, step-%lld to step-%lld", (long long)v[VIEW_N], (long long)v[VIEW_OLDEST],
                 (long long)v[VIEW_NEWEST]);
    snprintf(buf, size, "rank%s %s%s see%s %s", n > 1 ? "s" : "", ranks, n > 6 ? " and more" : "", n > 1 ? "" : "s",
             what);
}

/* An error naming each different view of the folder and the ranks that have it (at most 4 views). */
static tt_err views_differ(const tt_run *r, const int64_t *all)
{
    char msg[1024] = "", one[256];
    size_t len = 0;
    int views = 0;
    for (int j = 0; j < r->world; j++) {
        int seen = 0;
        for (int i = 0; i < j && !seen; i++) seen = same_view(all, i, j);
        if (seen) continue;
        if (views++ == 4) {
            snprintf(msg + len, sizeof msg - len, "; and other views");
            break;
        }
        describe_view(one, sizeof one, all, r->world, j);
        len += (size_t)snprintf(msg + len, len < sizeof msg ? sizeof msg - len : 0, "%s%s", j ? "; " : "", one);
        if (len >= sizeof msg) break;
    }
    return tt_errorf("%s: the ranks do not see the same checkpoints (node-local dump folders, or a network file "
                     "system that has not caught up?): %s. Every rank must see the same ones to resume",
                     r->ckpt_dir, msg);
}

/* Every rank must resume from the same list: with node-local dump folders,
 * or a file system that lags, a rank that saw none would start fresh while
 * the others load, and one that saw an older newest would load another step. */
static tt_err agree_on_checkpoints(tt_run *r, const long *steps, int n)
{
    if (agree(r, n < 0 ? -1 : 0, "listing the checkpoints")) return -1;
    if (r->world == 1) return 0;
    int64_t *all = calloc((size_t)r->world * VIEW_FIELDS, sizeof *all);
    tt_err rc = all ? 0 : tt_errorf("out of memory comparing the checkpoints of %d ranks", r->world);
    if (all) view_of(steps, n, all + (size_t)r->rank * VIEW_FIELDS);
    /* each rank fills its own row, so the sum is every rank's */
    if (agree(r, rc, "comparing the checkpoints the ranks see") ||
        tt_dist_all_reduce(r->dist, TT_GROUP_WORLD, all, (size_t)r->world * VIEW_FIELDS, TT_I64, TT_REDUCE_SUM,
                           "the checkpoints each rank sees")) {
        free(all);
        return -1;
    }
    for (int j = 1; j < r->world && !rc; j++)
        if (!same_view(all, 0, j)) rc = views_differ(r, all);
    free(all);
    return rc;
}

tt_err tt_run_restore(tt_run *r, int require)
{
    long steps[256];
    int n = r->world > 1 || r->cfg->checkpoint.load_step < 0 ? tt_ckpt_list(r->ckpt_dir, steps, 256) : 0;
    if (agree_on_checkpoints(r, steps, n)) return -1;
    if (r->cfg->checkpoint.load_step >= 0) {
        steps[0] = r->cfg->checkpoint.load_step;
        n = 1;
    } else if (n == 0) {
        if (require) return tt_errorf("%s: no checkpoint found (train first, or set job.dump_folder)", r->ckpt_dir);
        return 0; /* nothing saved yet: a fresh run */
    }
    for (int k = n - 1; k >= 0; k--) {
        char where[4200];
        snprintf(where, sizeof where, "%s/step-%ld", r->ckpt_dir, steps[k]);
        tt_ckpt *ck = tt_ckpt_open(r->ckpt_dir, steps[k]);
        tt_err rc = ck ? load_from(r, ck, where) : -1;
        uint64_t got[2] = {0, 0};
        if (ck) tt_ckpt_bytes_read(ck, &got[0], &got[1]);
        tt_ckpt_close(ck);
        rc = agree(r, rc, where); /* every rank resumes from the same step, or none does */
        if (!rc) {
            if (require) fprintf(stderr, "loaded %s (step %ld)\n", where, r->step); /* stdout carries the output */
            else {
                tt_log("resumed from %s (step %ld)", where, r->step);
                log_bytes_read(r, got);
            }
            return 0;
        }
        if (!r->cfg->checkpoint.fallback_to_previous || k == 0)
            return tt_error_prefix("cannot resume (set checkpoint.fallback_to_previous = true to use an older "
                                   "checkpoint, or move the bad one away): ");
        tt_warn("%s; falling back to the previous checkpoint", tt_last_error());
    }
    return 0;
}

/* ckpt_layout.c — the layout a sharded checkpoint's meta.json records (see
 * ckpt_layout.h), read and checked against the model before any of it is
 * used or sized. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/ckpt_layout.h"

static int64_t json_int(const cJSON *j, int64_t lo, int64_t hi, int *ok)
{
    if (!cJSON_IsNumber(j) || j->valuedouble < (double)lo || j->valuedouble > (double)hi ||
        (double)(int64_t)j->valuedouble != j->valuedouble) {
        *ok = 0;
        return 0;
    }
    return (int64_t)j->valuedouble;
}

/* One bucket of a saved layout: [offset, numel, padded], or {"pieces":
 * [[flat, n, ep_stride], ...], "padded", "experts"}. */
static int read_bucket(const cJSON *e, int64_t numel, tt_fsdp_bucket *bk)
{
    int ok = 1;
    memset(bk, 0, sizeof *bk);
    if (cJSON_IsArray(e)) {
        ok = cJSON_GetArraySize(e) == 3;
        const int64_t off = json_int(cJSON_GetArrayItem(e, 0), 0, numel, &ok);
        const int64_t n = json_int(cJSON_GetArrayItem(e, 1), 0, numel, &ok);
        bk->padded = json_int(cJSON_GetArrayItem(e, 2), 0, INT64_MAX / 4, &ok);
        bk->offset = off, bk->numel = n, bk->n_segs = 1, bk->seg[0] = (tt_fsdp_seg){off, n};
        return ok;
    }
    const cJSON *jp = cJSON_GetObjectItem(e, "pieces"), *jx = cJSON_GetObjectItem(e, "experts");
    const int np = cJSON_IsArray(jp) ? cJSON_GetArraySize(jp) : 0;
    if (!cJSON_IsObject(e) || np < 1 || np > TT_FSDP_MAX_SEGS || !cJSON_IsBool(jx)) return 0;
    bk->expert = cJSON_IsTrue(jx);
    bk->padded = json_int(cJSON_GetObjectItem(e, "padded"), 0, INT64_MAX / 4, &ok);
    for (int k = 0; k < np && ok; k++) {
        const cJSON *q = cJSON_GetArrayItem(jp, k);
        ok = cJSON_IsArray(q) && cJSON_GetArraySize(q) == 3;
        bk->seg[k].flat = json_int(cJSON_GetArrayItem(q, 0), 0, numel, &ok);
        bk->seg[k].n = json_int(cJSON_GetArrayItem(q, 1), 0, numel, &ok);
        bk->ep_stride[k] = json_int(cJSON_GetArrayItem(q, 2), 0, numel, &ok);
        bk->numel += bk->seg[k].n;
    }
    bk->n_segs = np, bk->offset = bk->seg[0].flat;
    return ok;
}

static int by_flat(const void *a, const void *b)
{
    const int64_t x = ((const tt_fsdp_seg *)a)->flat, y = ((const tt_fsdp_seg *)b)->flat;
    return x < y ? -1 : x > y;
}

/* A saved layout's bucket count and expert degree, against what the model
 * allows (a unit is one bucket or shares one, an MoE block under expert
 * parallelism two; the degree divides every MoE block's experts), and the
 * memory its pieces take checked, all before anything is allocated. */
static tt_err check_layout_size(const tt_model *m, int nb, int ep, const char *where)
{
    int moe = 0;
    for (int u = 0; u < m->n_units; u++) {
        const tt_unit *un = &m->units[u];
        if (un->n_experts <= 0) continue;
        moe++;
        if (un->n_experts % ep)
            return tt_errorf("%s/meta.json: layout 'expert_parallel' = %d does not divide the %d experts of %s", where,
                             ep, un->n_experts, un->name);
    }
    if (ep > 1 && !moe)
        return tt_errorf("%s/meta.json: layout 'expert_parallel' = %d, but the model has no experts", where, ep);
    const int most = m->n_units + (ep > 1 ? moe : 0);
    if (nb > most)
        return tt_errorf("%s/meta.json: layout 'buckets' lists %d buckets; the model's %d units make at most %d", where,
                         nb, m->n_units, most);
    const size_t bytes = (size_t)nb * (sizeof(tt_fsdp_bucket) + TT_FSDP_MAX_SEGS * (size_t)ep * sizeof(tt_fsdp_seg));
    return tt_mem_check(bytes, "%s/meta.json: layout's %d buckets at %d expert places", where, nb, ep);
}

/* The saved layout, checked against the model before any of it is used:
 * every bucket padded to a multiple of the ranks that slice it, and the
 * pieces of all of them (an expert bucket's at every place of the expert
 * group) covering every parameter exactly once. */
tt_err tt_ckpt_layout_read(const cJSON *jo, const tt_model *m, tt_sharding *out, const char *where)
{
    memset(out, 0, sizeof *out);
    const cJSON *jb = cJSON_GetObjectItem(jo, "buckets"), *je = cJSON_GetObjectItem(jo, "expert_parallel");
    int ok = cJSON_IsObject(jo) && cJSON_IsArray(jb);
    const int S = (int)json_int(cJSON_GetObjectItem(jo, "shards"), 1, 1 << 20, &ok);
    const int ep = je ? (int)json_int(je, 1, 1 << 20, &ok) : 1; /* absent before expert parallelism */
    const int64_t numel = json_int(cJSON_GetObjectItem(jo, "numel"), 0, INT64_MAX / 2, &ok);
    const int nb = ok ? cJSON_GetArraySize(jb) : 0;
    if (!ok || nb < 1 || S % ep)
        return tt_errorf("%s/meta.json: 'layout' needs shards >= 1 (a multiple of expert_parallel), numel and "
                         "buckets", where);
    if (numel != (int64_t)m->numel)
        return tt_errorf("%s/meta.json: the checkpoint holds %lld parameters, the model %zu (was the config changed?)",
                         where, (long long)numel, m->numel);
    if (check_layout_size(m, nb, ep, where)) return -1;
    out->shards = S, out->replicas = 1, out->ep = ep, out->n_buckets = nb;
    out->buckets = calloc((size_t)nb, sizeof *out->buckets);
    tt_fsdp_seg *all = calloc((size_t)nb * TT_FSDP_MAX_SEGS * (size_t)ep, sizeof *all);
    if (!out->buckets || !all) {
        free(all);
        tt_sharding_free(out);
        return tt_errorf("out of memory");
    }
    int n = 0;
    tt_err rc = 0;
    for (int b = 0; b < nb && !rc; b++) {
        tt_fsdp_bucket *bk = &out->buckets[b];
        const int fine = read_bucket(cJSON_GetArrayItem(jb, b), numel, bk);
        const int g = fine && bk->expert ? S / ep : S;
        if (!fine || bk->padded < bk->numel || bk->padded % g)
            rc = tt_errorf("%s/meta.json: layout bucket %d is malformed, or not padded to a multiple of %d shards (the "
                           "ranks that slice it)", where, b, g);
        for (int k = 0; k < bk->n_segs && !rc; k++)
            for (int e = 0; e < (bk->expert ? ep : 1); e++)
                all[n++] = (tt_fsdp_seg){bk->seg[k].flat + e * bk->ep_stride[k], bk->seg[k].n};
    }
    qsort(all, (size_t)n, sizeof *all, by_flat);
    int64_t next = 0;
    for (int i = 0; i < n && !rc; i++) {
        if (all[i].flat != next)
            rc = tt_errorf("%s/meta.json: the layout's buckets %s element %lld of %lld parameters", where,
                           all[i].flat > next ? "miss" : "repeat", (long long)(all[i].flat > next ? next : all[i].flat),
                           (long long)numel);
        next = all[i].flat + all[i].n;
    }
    if (!rc && next != numel)
        rc = tt_errorf("%s/meta.json: the layout's buckets cover %lld of %lld parameters", where, (long long)next,
                       (long long)numel);
    free(all);
    if (rc) tt_sharding_free(out);
    return rc;
}

/* harness.c — the shared pieces of the test harness. */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/autodiff.h"
#include "harness.h"

int th_failed, th_passed;

int th_done(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, th_passed, th_failed);
    return th_failed ? 1 : 0;
}

static int under_ci(void)
{
    const char *ci = getenv("CI");
    return ci && !strcmp(ci, "true");
}

int th_skip(const char *name, const char *why)
{
    if (under_ci()) {
        printf("%s: FAIL: %s (CI=true: nothing may be skipped)\n", name, why);
        return 1;
    }
    printf("%s: SKIPPED: %s\n", name, why);
    return 77;
}

void th_skip_part(const char *why)
{
    if (under_ci()) {
        printf("FAIL %s (CI=true: nothing may be skipped)\n", why);
        th_failed++;
    } else {
        printf("skipped: %s\n", why);
    }
}

void th_cpu_lacks(const char *what) { printf("not run on this CPU: %s\n", what); }

void *th_alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1); /* calloc checks n * size for overflow */
    if (!p) {
        fprintf(stderr, "test: out of memory allocating %zu x %zu bytes\n", n, size);
        exit(1);
    }
    return p;
}

int32_t *th_doc_ids(tt_rng *r, int B, int T)
{
    int32_t *d = th_alloc((size_t)B * T, sizeof(int32_t));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) d[b * T + t] = t == 0 ? 100 * b : d[b * T + t - 1] + (tt_rng_below(r, 4) == 0);
    return d;
}

char *th_read_file(const char *path, size_t *len)
{
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct stat st; /* a directory opens too, and seeks to a meaningless end */
    char *buf = NULL;
    long n = -1;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0) {
        buf = th_alloc((size_t)n + 1, 1);
        /* all n bytes, and the end of the file right after them */
        if (fread(buf, 1, (size_t)n, f) == (size_t)n && fgetc(f) == EOF && !ferror(f)) {
            buf[n] = '\0';
            if (len) *len = (size_t)n;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

const char *th_shared_dir(void)
{
    static char path[4096];
    const char *env = getenv("TITAN_SHARED_DIR");
    snprintf(path, sizeof path, "%s", env ? env : TITAN_SOURCE_DIR "/../shared");
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? path : NULL;
}

th_train_graph th_train_graph_build(const tt_model *m, int B, int T)
{
    th_train_graph t;
    memset(&t, 0, sizeof t);
    t.g = tt_graph_new();
    t.grads = th_alloc((size_t)m->n_params, sizeof *t.grads);
    t.units = th_alloc((size_t)m->n_units, sizeof *t.units);
    t.B = B;
    t.T = T;
    tt_graph *g = t.g;
    tt_value **vals = th_alloc((size_t)m->n_params, sizeof *vals); /* the parameter views */
    CHECK_MSG(tt_model_bind(g, m, vals, t.units) == 0, "%s", tt_last_error());
    int64_t n = (int64_t)B * T;
    t.ids = tt_graph_input(g, "ids", TT_I32, 1, &n);
    t.pos = tt_graph_input(g, "pos", TT_I32, 1, &n);
    t.doc = tt_graph_input(g, "doc", TT_I32, 1, &n);
    tt_fwd_inputs in = {.B = B, .T = T, .ids = t.ids, .pos = t.pos, .doc = t.doc};
    t.targets = tt_graph_input(g, "targets", TT_I32, 1, &n);
    t.scale = tt_graph_input(g, "scale", TT_F32, 1, (int64_t[]){1});
    tt_value *head = NULL, *h = tt_model_forward(g, m, vals, &in, &head);
    t.loss = tt_model_loss(g, m, h, head, t.targets, t.scale, -100);
    tt_graph_mark_output(g, t.loss);
    t.n_fwd = g->n_nodes; /* the backward starts here */
    /* every view of the weights the forward made (the parameters, and views over several of them, as an MoE
     * layer's experts), as the step graph differentiates them */
    t.wrt = th_alloc((size_t)g->n_values, sizeof *t.wrt);
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v]->role == TT_ROLE_PARAM && g->values[v]->base) t.wrt[t.n_wrt++] = g->values[v];
    tt_value **all = th_alloc((size_t)t.n_wrt + 1, sizeof *all);
    CHECK_MSG(tt_autodiff(g, 1, &t.loss, t.n_wrt, t.wrt, all) == 0, "%s", tt_last_error());
    for (int i = 0; i < t.n_wrt; i++)
        if (all[i]) tt_graph_mark_output(g, all[i]);
    for (int i = 0; i < m->n_params; i++) /* the parameters' own */
        for (int k = 0; k < t.n_wrt; k++)
            if (t.wrt[k] == vals[i]) t.grads[i] = all[k];
    t.wgrads = all;
    free(vals);
    return t;
}

int th_train_graph_upload(tt_exec *e, const tt_model *m, const th_train_graph *t, const float *weights,
                          const int32_t *ids, const int32_t *targets, const int32_t *pos, const int32_t *doc,
                          const float *scale)
{
    const size_t nb = (size_t)t->B * t->T * sizeof(int32_t);
    int rc = 0;
    for (int k = 0; k < m->n_units && !rc; k++)
        rc = tt_exec_write(e, t->units[k], weights + m->units[k].offset, (size_t)m->units[k].numel * sizeof(float));
    if (!rc)
        rc = tt_exec_write(e, t->ids, ids, nb) || tt_exec_write(e, t->pos, pos, nb) || tt_exec_write(e, t->doc, doc, nb) ||
             tt_exec_write(e, t->targets, targets, nb) || tt_exec_write(e, t->scale, scale, sizeof *scale);
    CHECK_MSG(rc == 0, "upload: %s", tt_last_error());
    return rc;
}

int th_train_graph_grads(tt_exec *e, const tt_model *m, const th_train_graph *t, float *grad)
{
    int rc = 0;
    memset(grad, 0, m->numel * sizeof(float));
    for (int k = 0; k < t->n_wrt; k++) { /* each view's gradient added at its place in the flat layout */
        const tt_value *v = t->wrt[k], *root = v;
        size_t off = 0;
        for (; root->base; root = root->base) off += root->offset;
        if (!t->wgrads[k]) continue;
        const size_t cnt = (size_t)tt_value_numel(v);
        float *tmp = th_alloc(cnt + 1, sizeof(float));
        const int ok = tt_exec_read(e, t->wgrads[k], tmp, cnt * sizeof(float)) == 0;
        CHECK_MSG(ok, "reading the gradient of %s: %s", v->name, tt_last_error());
        float *dst = grad + m->units[v->unit].offset + off / sizeof(float);
        for (size_t x = 0; ok && x < cnt; x++) dst[x] += tmp[x];
        free(tmp);
        if (!ok) rc = -1;
    }
    return rc;
}

void th_train_graph_free(th_train_graph *t)
{
    free(t->grads);
    free(t->wrt);
    free(t->wgrads);
    free(t->units);
    tt_graph_free(t->g);
}

int th_write_file(const char *root, const char *rel, const char *text)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", root, rel) >= sizeof path) return -1;
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

void th_rm_tree(const char *root) { nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

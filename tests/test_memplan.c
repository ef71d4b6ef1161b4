/* test_memplan.c — the static memory plan never gives two simultaneously live activations the same arena bytes
 * (every recipe and HF fixture, both dtypes, all AC modes, fused or not), and activation views through the executor. */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/exec.h"
#include "graph/passes/memplan.h"
#include "harness.h"
#include "hf/hf_config.h"
#include "models/model.h"
#include "ops/ops.h"
#include "config/resolve.h"
#include "train/step_graph.h"
#include "train/step_graph.h"

/* ---- an independent checker of a memory plan ------------------------------------------------- */

/* Liveness computed here from the node order (not the plan's first/last): a root activation is live
 * from the first node that writes it or a view of it (as an output, or an input the op writes in
 * place) to the last node that reads or writes it or a view of it; outputs live to the end. */
typedef struct {
    int *first, *last;
    int read_before_write; /* activations a node reads (or accumulates into) before any node wrote them */
} liveness;

static void live_compute(const tt_graph *g, liveness *L)
{
    const int nv = g->n_values;
    L->first = th_alloc((size_t)nv + 1, sizeof *L->first);
    L->last = th_alloc((size_t)nv + 1, sizeof *L->last);
    L->read_before_write = 0;
    for (int v = 0; v < nv; v++) L->first[v] = L->last[v] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        const unsigned writes_ins = tt_ops[n->op]->writes_ins;
        for (int k = 0; k < n->n_in; k++) { /* reads happen before the node's writes */
            const tt_value *r = tt_value_root(n->in[k]);
            if (r->role != TT_ROLE_ACT) continue;
            if (L->first[r->id] < 0) {
                if (!((writes_ins >> k) & 1)) L->read_before_write++;
                L->first[r->id] = i;
            }
            L->last[r->id] = i;
        }
        for (int k = 0; k < n->n_out; k++) {
            const tt_value *r = tt_value_root(n->out[k]);
            if (r->role != TT_ROLE_ACT) continue;
            if (L->first[r->id] < 0) {
                if ((n->accumulate >> k) & 1) L->read_before_write++;
                L->first[r->id] = i;
            }
            L->last[r->id] = i;
        }
    }
    for (int v = 0; v < nv; v++) {
        const tt_value *r = tt_value_root(g->values[v]);
        if (g->values[v]->is_output && r->role == TT_ROLE_ACT && L->first[r->id] >= 0) L->last[r->id] = g->n_nodes;
    }
}

static void live_free(liveness *L)
{
    free(L->first);
    free(L->last);
}

typedef struct {
    long roots, views;     /* placed activation roots checked, views of them checked */
    long overlaps;         /* pairs of live-together roots sharing bytes */
    long outside;          /* placed ranges past arena_bytes */
    long unplaced;         /* activations a node reads or writes with no place */
    long view_mismatch;    /* a view's offset that is not its root's plus its own */
    long read_before_write;
} plan_report;

static const int *g_sort_key; /* qsort of value ids by g_sort_key[id], then id */
static int by_key(const void *a, const void *b)
{
    const int x = *(const int *)a, y = *(const int *)b;
    if (g_sort_key[x] != g_sort_key[y]) return g_sort_key[x] < g_sort_key[y] ? -1 : 1;
    return x - y;
}

static long problems(const plan_report *r)
{
    return r->overlaps + r->outside + r->unplaced + r->view_mismatch + r->read_before_write;
}

/* Check offsets/arena against the graph. Prints up to `verbose` problems with names. */
static plan_report check_plan(const tt_graph *g, const size_t *offset, size_t arena_bytes, int verbose)
{
    plan_report rep = {0};
    liveness L;
    live_compute(g, &L);
    rep.read_before_write = L.read_before_write;
    const int nv = g->n_values;
    int printed = 0;
#define SAY(...)                                                                                                       \
    do {                                                                                                               \
        if (printed++ < verbose) fprintf(stderr, __VA_ARGS__);                                                         \
    } while (0)

    /* every activation a node touches resolves to a placed root */
    for (int i = 0; i < g->n_nodes; i++) {
        const tt_node *n = g->nodes[i];
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            const tt_value *v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
            const tt_value *r = tt_value_root((tt_value *)v);
            if (r->role == TT_ROLE_ACT && offset[r->id] == SIZE_MAX) {
                rep.unplaced++;
                SAY("  node %d (%s): activation %d '%s' has no place\n", i, tt_op_name(n->op), r->id, r->name);
            }
        }
    }
    /* placed roots inside the arena; views at their root's offset plus their own */
    int *order = th_alloc((size_t)nv + 1, sizeof *order), *byend = th_alloc((size_t)nv + 1, sizeof *byend);
    int n = 0;
    for (int v = 0; v < nv; v++) {
        const tt_value *x = g->values[v];
        if (x->role != TT_ROLE_ACT) continue;
        if (x->base) {
            if (offset[x->base->id] != SIZE_MAX) {
                rep.views++;
                if (offset[v] != offset[x->base->id] + x->offset) {
                    rep.view_mismatch++;
                    SAY("  view %d '%s': offset %zu, root at %zu + %zu\n", v, x->name, offset[v], offset[x->base->id],
                        x->offset);
                }
            }
            continue;
        }
        if (offset[v] == SIZE_MAX || L.first[v] < 0) continue;
        const size_t bytes = tt_value_bytes(x);
        if (offset[v] > arena_bytes || bytes > arena_bytes - offset[v]) {
            rep.outside++;
            SAY("  value %d '%s': [%zu, %zu) outside the arena of %zu bytes\n", v, x->name, offset[v], offset[v] + bytes,
                arena_bytes);
        }
        rep.roots++;
        if (bytes) order[n++] = v;
    }
    /* sweep over node positions: insert each root at its first node into the set of live roots kept
     * sorted by offset (pairwise disjoint unless a problem was found), after dropping those whose last
     * node is before it; a range overlaps some live range iff it overlaps its neighbours in that order */
    g_sort_key = L.first; /* insertion order */
    qsort(order, (size_t)n, sizeof *order, by_key);
    memcpy(byend, order, (size_t)n * sizeof *order);
    g_sort_key = L.last; /* removal order */
    qsort(byend, (size_t)n, sizeof *byend, by_key);
    int *live = th_alloc((size_t)n + 1, sizeof *live), n_live = 0, e = 0;
    for (int i = 0; i < n; i++) {
        const int v = order[i];
        const int t = L.first[v];
        for (; e < n && L.last[byend[e]] < t; e++) { /* no longer live at t: drop it */
            const int u = byend[e];
            for (int j = 0; j < n_live; j++)
                if (live[j] == u) {
                    memmove(live + j, live + j + 1, (size_t)(n_live - j - 1) * sizeof *live);
                    n_live--;
                    break;
                }
        }
        const size_t s = offset[v], end = s + tt_value_bytes(g->values[v]);
        int lo = 0, hi = n_live; /* first live range starting at or after s */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (offset[live[mid]] < s) lo = mid + 1;
            else hi = mid;
        }
        int hit = -1;
        if (lo > 0 && offset[live[lo - 1]] + tt_value_bytes(g->values[live[lo - 1]]) > s) hit = live[lo - 1];
        else if (lo < n_live && offset[live[lo]] < end) hit = live[lo];
        if (hit >= 0) {
            rep.overlaps++;
            const tt_value *a = g->values[hit], *b = g->values[v];
            SAY("  overlap: %d '%s' [%zu, %zu) live [%d, %d] and %d '%s' [%zu, %zu) live [%d, %d]\n", a->id, a->name,
                offset[a->id], offset[a->id] + tt_value_bytes(a), L.first[a->id], L.last[a->id], b->id, b->name, s, end,
                L.first[v], L.last[v]);
        }
        memmove(live + lo + 1, live + lo, (size_t)(n_live - lo) * sizeof *live);
        live[lo] = v;
        n_live++;
    }
#undef SAY
    free(live);
    free(order);
    free(byend);
    live_free(&L);
    return rep;
}

/* The checker can fail: corrupt copies of a real plan in three ways and expect each to be reported. */
static void check_checker(const tt_graph *g, const tt_memplan *plan, const char *what)
{
    const int nv = g->n_values;
    liveness L;
    live_compute(g, &L);
    size_t *bad = th_alloc((size_t)nv + 1, sizeof *bad);
    /* two placed roots live at the same time, the later one moved onto the earlier one's bytes */
    int u = -1, v = -1;
    for (int a = 0; a < nv && v < 0; a++) {
        const tt_value *x = g->values[a];
        if (x->role != TT_ROLE_ACT || x->base || plan->offset[a] == SIZE_MAX || L.first[a] < 0) continue;
        for (int b = a + 1; b < nv; b++) {
            const tt_value *y = g->values[b];
            if (y->role != TT_ROLE_ACT || y->base || plan->offset[b] == SIZE_MAX || L.first[b] < 0) continue;
            if (L.first[a] <= L.last[b] && L.first[b] <= L.last[a]) {
                u = a;
                v = b;
                break;
            }
        }
    }
    CHECK_MSG(v >= 0, "%s: no two activations live at the same time", what);
    if (v >= 0) {
        memcpy(bad, plan->offset, (size_t)nv * sizeof *bad);
        bad[v] = bad[u];
        for (int w = 0; w < nv; w++) /* its views move with it */
            if (g->values[w]->base == g->values[v]) bad[w] = bad[v] + g->values[w]->offset;
        size_t arena = plan->arena_bytes;
        if (bad[v] + tt_value_bytes(g->values[v]) > arena) arena = bad[v] + tt_value_bytes(g->values[v]);
        plan_report r = check_plan(g, bad, arena, 0);
        CHECK_MSG(r.overlaps >= 1 && r.outside == 0 && r.unplaced == 0 && r.view_mismatch == 0,
                  "%s: moving %d onto %d: %ld overlaps, %ld outside, %ld unplaced, %ld view mismatches", what, v, u,
                  r.overlaps, r.outside, r.unplaced, r.view_mismatch);
        /* the same value past the arena's end */
        memcpy(bad, plan->offset, (size_t)nv * sizeof *bad);
        bad[v] = plan->arena_bytes;
        for (int w = 0; w < nv; w++)
            if (g->values[w]->base == g->values[v]) bad[w] = bad[v] + g->values[w]->offset;
        r = check_plan(g, bad, plan->arena_bytes, 0);
        CHECK_MSG(r.outside == 1, "%s: value past the arena not reported (%ld)", what, r.outside);
        /* and without a place */
        memcpy(bad, plan->offset, (size_t)nv * sizeof *bad);
        bad[v] = SIZE_MAX;
        r = check_plan(g, bad, plan->arena_bytes, 0);
        CHECK_MSG(r.unplaced >= 1, "%s: unplaced value not reported", what);
    }
    free(bad);
    live_free(&L);
}

/* ---- the real micro-step graphs ---------------------------------------------------------------- */

typedef struct {
    long graphs, roots, views, values, nodes;
} totals;

static void check_model(const char *what, const tt_model *m, int B, int T, totals *tot)
{
    static const tt_dtype dts[2] = {TT_F32, TT_BF16};
    for (int di = 0; di < 2; di++)
        for (int ac = TT_AC_NONE; ac <= TT_AC_FULL; ac++)
            for (int nf = 0; nf < 2; nf++) {
                char name[256];
                snprintf(name, sizeof name, "%s B=%d T=%d %s ac=%d%s", what, B, T, tt_dtype_name(dts[di]), ac,
                         nf ? " no_fuse" : "");
                tt_step_cfg cfg = {.B = B, .T = T, .act_dtype = dts[di], .no_fuse = nf};
                tt_step_graph sg;
                if (tt_build_micro_graph(&sg, m, &cfg, 1, (tt_ac_mode)ac)) {
                    CHECK_MSG(0, "%s: building: %s", name, tt_last_error());
                    continue;
                }
                tt_memplan plan;
                if (tt_memplan_build(sg.g, &plan)) {
                    CHECK_MSG(0, "%s: planning: %s", name, tt_last_error());
                    tt_step_graph_free(&sg);
                    continue;
                }
                plan_report r = check_plan(sg.g, plan.offset, plan.arena_bytes, 5);
                CHECK_MSG(problems(&r) == 0,
                          "%s: %ld overlaps, %ld outside the arena, %ld unplaced, %ld view offsets, %ld read before "
                          "written (%ld roots)",
                          name, r.overlaps, r.outside, r.unplaced, r.view_mismatch, r.read_before_write, r.roots);
                CHECK_MSG(r.roots > 0, "%s: no activations", name);
                check_checker(sg.g, &plan, name);
                tot->graphs++;
                tot->roots += r.roots;
                tot->views += r.views;
                tot->values += sg.g->n_values;
                tot->nodes += sg.g->n_nodes;
                tt_memplan_free(&plan);
                tt_step_graph_free(&sg);
            }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entries of dir: files ending in `suffix`, or (suffix NULL) folders holding config.json. */
static int list_dir(const char *dir, const char *suffix, char **names, int cap)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        const char *s = de->d_name;
        if (s[0] == '.') continue;
        char path[2048];
        struct stat st;
        if (suffix) {
            size_t ls = strlen(s), lx = strlen(suffix);
            if (ls <= lx || strcmp(s + ls - lx, suffix)) continue;
        } else {
            snprintf(path, sizeof path, "%s/%s/config.json", dir, s);
            if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        }
        names[n] = malloc(strlen(s) + 1);
        if (!names[n]) break;
        strcpy(names[n++], s);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    return n;
}

/* A guard on B*T for graph building: shapes do not change the graph's size (llama3_8b's 1 x 8192, 32 layers,
 * builds and plans its 12 graphs in about 0.2 s in Release), so every current recipe runs at its own shape. */
enum { MAX_BT = 65536 };

static void test_memplan_real_graphs(void)
{
    totals tot = {0};
    const double t0 = tt_now();
    char *names[64];
    const char *cdir = TITAN_SOURCE_DIR "/configs";
    int nr = list_dir(cdir, ".toml", names, 64);
    CHECK_MSG(nr > 0, "no recipes in %s", cdir);
    for (int i = 0; i < nr; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", cdir, names[i]);
        const double t1 = tt_now();
        tt_config *c = th_alloc(1, sizeof *c);
        tt_config_defaults(c);
        tt_model_cfg mc;
        tt_model_ext ext;
        tt_model *m = NULL;
        if (tt_config_load_file(c, path) || tt_config_finalize(c) || tt_model_cfg_from_config(c, &mc, &ext, NULL) ||
            !(m = tt_model_new_ext(&mc, &ext))) {
            CHECK_MSG(0, "%s: %s", path, tt_last_error());
        } else {
            int B = c->training.local_batch_size, T = c->training.seq_len;
            while ((long)B * T > MAX_BT && B > 1) B--;
            if ((long)B * T > MAX_BT) T = MAX_BT;
            const long g0 = tot.graphs;
            check_model(names[i], m, B, T, &tot);
            printf("  %-18s %d layers, B=%d T=%d: %ld graphs in %.2f s\n", names[i], mc.n_layers, B, T,
                   tot.graphs - g0, tt_now() - t1);
        }
        tt_model_free(m);
        free(c);
        free(names[i]);
    }
    const char *hdir = TITAN_SOURCE_DIR "/tests/fixtures/hf";
    int nh = list_dir(hdir, NULL, names, 64);
    CHECK_MSG(nh >= 6, "%d Hugging Face fixtures in %s, expected at least 6", nh, hdir);
    for (int i = 0; i < nh; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", hdir, names[i]);
        tt_hf_config hc;
        tt_model *m = NULL;
        if (tt_hf_config_read(path, &hc) || !(m = tt_model_new_ext(&hc.model, &hc.ext))) {
            CHECK_MSG(0, "%s: %s", path, tt_last_error());
        } else {
            char what[128];
            snprintf(what, sizeof what, "hf/%s", names[i]);
            check_model(what, m, 2, 16, &tot);
        }
        tt_model_free(m);
        free(names[i]);
    }
    printf("memplan: %ld graphs (%d recipes, %d HF fixtures) checked: %ld nodes, %ld values, %ld placed activation "
           "roots, %ld activation views, in %.2f s\n",
           tot.graphs, nr, nh, tot.nodes, tot.values, tot.roots, tot.views, tt_now() - t0);
    CHECK(tot.graphs == (long)(nr + nh) * 12);
}

/* ---- activation views through the executor ------------------------------------------------------- */

enum { N = 5 }; /* columns: a row is 20 bytes, so row views sit at offsets that are not 64-aligned */

typedef struct {
    tt_value *v;
    float *host; /* inputs: what to upload; outputs: what to expect */
} io;

typedef struct {
    io in[8], out[8];
    int n_in, n_out;
} exec_case;

static float *fill(int64_t n, int seed)
{
    float *p = th_alloc((size_t)n, sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = 0.25f * (float)((i * 7 + seed * 3) % 11 - 5); /* exact in f32 */
    return p;
}

static tt_value *in_val(tt_graph *g, exec_case *c, const char *name, int rows, int seed)
{
    tt_value *v = tt_graph_input(g, name, TT_F32, 2, (int64_t[]){rows, N});
    if (v) c->in[c->n_in++] = (io){v, fill((int64_t)rows * N, seed)};
    return v;
}

static void out_val(tt_graph *g, exec_case *c, tt_value *v, float *expect)
{
    tt_graph_mark_output(g, v);
    c->out[c->n_out++] = (io){v, expect};
}

static tt_value *row_view(tt_graph *g, tt_value *base, int row0, int rows)
{
    return tt_value_view(g, base, (size_t)row0 * N * sizeof(float), TT_F32, 2, (int64_t[]){rows, N});
}

/* Make the last node write its output 0 into `into` (a view) instead of the fresh value it made, as
 * tests/test_backend_ops.c's accumulate_into redirects an output (without the accumulate bit). */
static void redirect_output(tt_graph *g, tt_value *into)
{
    if (g->failed || !into) return;
    tt_node *n = g->nodes[g->n_nodes - 1];
    n->out[0]->producer = NULL;
    n->out[0] = into;
    into->producer = n;
    into->out_index = 0;
}

static void host_matmul(const float *x, const float *w, float *y, int M, int K)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float s = 0;
            for (int k = 0; k < K; k++) s += x[i * K + k] * w[k * N + j];
            y[i * N + j] = s;
        }
}

static float *host_add(const float *a, const float *b, int rows)
{
    float *y = th_alloc((size_t)rows * N, sizeof *y);
    for (int i = 0; i < rows * N; i++) y[i] = a[i] + b[i];
    return y;
}

static void run_case(const char *what, tt_graph *g, exec_case *c)
{
    CHECK_MSG(!g->failed, "%s: building: %s", what, tt_last_error());
    if (!g->failed) { /* its plan passes the checker too: these graphs have activation views */
        tt_memplan plan;
        CHECK_MSG(tt_memplan_build(g, &plan) == 0, "%s: planning: %s", what, tt_last_error());
        plan_report r = check_plan(g, plan.offset, plan.arena_bytes, 5);
        CHECK_MSG(problems(&r) == 0 && r.views >= 2,
                  "%s plan: %ld overlaps, %ld outside the arena, %ld unplaced, %ld view offsets, %ld read before "
                  "written, %ld views",
                  what, r.overlaps, r.outside, r.unplaced, r.view_mismatch, r.read_before_write, r.views);
        check_checker(g, &plan, what);
        tt_memplan_free(&plan);
    }
    static const struct {
        tt_exec_mode mode;
        const char *be, *name;
    } modes[3] = {{TT_EXEC_GRAPH, "cpu", "graph/cpu"}, {TT_EXEC_EAGER, "cpu", "eager/cpu"}, {TT_EXEC_DEBUG, "ref", "debug/ref"}};
    for (int mi = 0; mi < 3 && !g->failed; mi++) {
        const tt_backend *be = tt_backend_get(modes[mi].be);
        CHECK_MSG(be != NULL, "no backend %s", modes[mi].be);
        if (!be) continue;
        tt_exec *e = tt_exec_new(g, be, NULL, modes[mi].mode);
        CHECK_MSG(e != NULL, "%s %s: %s", what, modes[mi].name, tt_last_error());
        if (!e) continue;
        int ok = 1;
        for (int i = 0; i < c->n_in && ok; i++)
            ok = tt_exec_write(e, c->in[i].v, c->in[i].host, tt_value_bytes(c->in[i].v)) == 0;
        CHECK_MSG(ok, "%s %s: writing inputs: %s", what, modes[mi].name, tt_last_error());
        for (int rep = 0; rep < 2 && ok; rep++) { /* twice: a second run over the same memory gives the same */
            ok = tt_exec_run(e) == 0;
            CHECK_MSG(ok, "%s %s: run: %s", what, modes[mi].name, tt_last_error());
            for (int o = 0; o < c->n_out && ok; o++) {
                const tt_value *v = c->out[o].v;
                const int64_t cnt = tt_value_numel(v);
                float *got = th_alloc((size_t)cnt, sizeof *got);
                int rc = tt_exec_read(e, v, got, tt_value_bytes(v));
                CHECK_MSG(rc == 0, "%s %s: reading output %d: %s", what, modes[mi].name, o, tt_last_error());
                int bad = rc ? -1 : 0;
                for (int64_t i = 0; i < cnt && !rc; i++)
                    if (fabsf(got[i] - c->out[o].host[i]) > 1e-5f * (1 + fabsf(c->out[o].host[i]))) {
                        if (bad++ < 3)
                            fprintf(stderr, "  %s %s output %d [%lld]: %g, expected %g\n", what, modes[mi].name, o,
                                    (long long)i, got[i], c->out[o].host[i]);
                    }
                if (!rc)
                    CHECK_MSG(bad == 0, "%s %s run %d: output %d ('%s') has %d wrong elements", what, modes[mi].name,
                              rep, o, v->name, bad);
                free(got);
            }
        }
        tt_exec_free(e);
    }
    for (int i = 0; i < c->n_in; i++) free(c->in[i].host);
    for (int i = 0; i < c->n_out; i++) free(c->out[i].host);
    tt_graph_free(g);
}

/* (a) nodes read row views of a matmul output: Z1 = Y[0:2] + C, Z2 = Y[2:4] + Z1, Z3 = Y[1:3] + Y[3:5]. */
static void test_exec_read_views(void)
{
    enum { M = 5, K = 3 };
    tt_graph *g = tt_graph_new();
    exec_case c = {0};
    tt_value *X = tt_graph_input(g, "X", TT_F32, 2, (int64_t[]){M, K});
    tt_value *W = tt_graph_input(g, "W", TT_F32, 2, (int64_t[]){K, N});
    float *x = fill(M * K, 1), *w = fill(K * N, 2);
    c.in[c.n_in++] = (io){X, x};
    c.in[c.n_in++] = (io){W, w};
    tt_value *C = in_val(g, &c, "C", 2, 3);
    tt_value *Y = tt_matmul(g, X, W, 0, 0);
    tt_value *Z1 = tt_add(g, row_view(g, Y, 0, 2), C);
    tt_value *Z2 = tt_add(g, row_view(g, Y, 2, 2), Z1);
    tt_value *Z3 = tt_add(g, row_view(g, Y, 1, 2), row_view(g, Y, 3, 2));
    float y[M * N];
    host_matmul(x, w, y, M, K);
    float *z1 = host_add(y, c.in[2].host, 2);
    float *z2 = host_add(y + 2 * N, z1, 2);
    float *z3 = host_add(y + N, y + 3 * N, 2);
    if (!g->failed) {
        out_val(g, &c, Z1, z1);
        out_val(g, &c, Z2, z2);
        out_val(g, &c, Z3, z3);
    } else {
        free(z1);
        free(z2);
        free(z3);
    }
    run_case("read views", g, &c);
}

/* (b) two nodes write row views of one activation root, a third reads the root; the root and one
 * view of it are read back as outputs too. */
static void test_exec_write_views(void)
{
    tt_graph *g = tt_graph_new();
    exec_case c = {0};
    tt_value *A = in_val(g, &c, "A", 2, 1), *Bv = in_val(g, &c, "B", 2, 2), *Cv = in_val(g, &c, "C", 3, 3),
             *D = in_val(g, &c, "D", 3, 4), *E = in_val(g, &c, "E", 5, 5);
    tt_value *R = tt_value_new(g, TT_ROLE_ACT, TT_F32, 2, (int64_t[]){5, N});
    if (R) snprintf(R->name, sizeof R->name, "R");
    tt_value *V0 = row_view(g, R, 0, 2), *V1 = row_view(g, R, 2, 3);
    tt_add(g, Cv, D); /* the later rows first: the root's first writer is not its first view */
    redirect_output(g, V1);
    tt_add(g, A, Bv);
    redirect_output(g, V0);
    tt_value *S = tt_add(g, R, E);
    float r[5 * N];
    for (int i = 0; i < 2 * N; i++) r[i] = c.in[0].host[i] + c.in[1].host[i];
    for (int i = 0; i < 3 * N; i++) r[2 * N + i] = c.in[2].host[i] + c.in[3].host[i];
    float *s = host_add(r, c.in[4].host, 5);
    float *rr = th_alloc(5 * N, sizeof *rr), *v1 = th_alloc(3 * N, sizeof *v1);
    memcpy(rr, r, sizeof r);
    memcpy(v1, r + 2 * N, 3 * N * sizeof *v1);
    if (!g->failed) {
        CHECK(V0->base == R && V0->offset == 0 && V1->base == R && V1->offset == 2 * N * sizeof(float));
        out_val(g, &c, S, s);
        out_val(g, &c, R, rr);
        c.out[c.n_out++] = (io){V1, v1}; /* a view of an output root reads back too */
    } else {
        free(s);
        free(rr);
        free(v1);
    }
    run_case("write views", g, &c);
}

/* (c) views of views: offsets add up, both when a node reads one and when a node writes one. */
static void test_exec_view_of_view(void)
{
    enum { M = 6, K = 2 };
    const size_t row = N * sizeof(float);
    tt_graph *g = tt_graph_new();
    exec_case c = {0};
    tt_value *X = tt_graph_input(g, "X", TT_F32, 2, (int64_t[]){M, K});
    tt_value *W = tt_graph_input(g, "W", TT_F32, 2, (int64_t[]){K, N});
    float *x = fill(M * K, 6), *w = fill(K * N, 7);
    c.in[c.n_in++] = (io){X, x};
    c.in[c.n_in++] = (io){W, w};
    tt_value *F = in_val(g, &c, "F", 2, 8);
    tt_value *A = in_val(g, &c, "A", 2, 9), *Bv = in_val(g, &c, "B", 2, 10), *Cv = in_val(g, &c, "C", 2, 11),
             *D = in_val(g, &c, "D", 2, 12), *E = in_val(g, &c, "E", 4, 13);
    /* read: Y rows 1..5, then rows 2..3 of that = Y rows 3..4 */
    tt_value *Y = tt_matmul(g, X, W, 0, 0);
    tt_value *outer = row_view(g, Y, 1, 5);
    tt_value *inner = row_view(g, outer, 2, 2);
    tt_value *Z = tt_add(g, inner, F);
    /* write: root R (4 rows); rows 0..1 through a view, rows 2..3 through rows 1..2 of a flat view of rows 1..3 */
    tt_value *R = tt_value_new(g, TT_ROLE_ACT, TT_F32, 2, (int64_t[]){4, N});
    if (R) snprintf(R->name, sizeof R->name, "R");
    tt_value *r_outer = tt_value_view(g, R, row, TT_F32, 1, (int64_t[]){3 * N}); /* rows 1..3 flat */
    tt_value *r_inner = row_view(g, r_outer, 1, 2);
    tt_value *r_row0 = row_view(g, R, 0, 2);
    tt_add(g, Cv, D);
    redirect_output(g, r_inner);
    tt_add(g, A, Bv);
    redirect_output(g, r_row0);
    tt_value *S = tt_add(g, R, E);
    float y[M * N];
    host_matmul(x, w, y, M, K);
    float *z = host_add(y + 3 * N, c.in[2].host, 2);
    float r[4 * N];
    for (int i = 0; i < 2 * N; i++) r[i] = c.in[3].host[i] + c.in[4].host[i];
    for (int i = 0; i < 2 * N; i++) r[2 * N + i] = c.in[5].host[i] + c.in[6].host[i];
    float *s = host_add(r, c.in[7].host, 4);
    if (!g->failed) {
        /* a view of a view keeps its base; its root and root offset add up */
        CHECK_MSG(tt_value_root(inner) == Y && tt_value_root_offset(inner) == 3 * row,
                  "inner view: root %d offset %zu", tt_value_root(inner)->id, tt_value_root_offset(inner));
        CHECK(inner->base == outer && inner->offset == 2 * row);
        CHECK(outer->base == Y && outer->offset == row);
        CHECK(r_outer->base == R && r_outer->offset == row);
        CHECK(tt_value_root(r_inner) == R && tt_value_root_offset(r_inner) == 2 * row);
        out_val(g, &c, Z, z);
        out_val(g, &c, S, s);
    } else {
        free(z);
        free(s);
    }
    run_case("view of view", g, &c);
}

/* tt_value_view refuses views that do not fit inside their base and marks the graph failed. */
static void test_view_bounds(void)
{
    const size_t row = N * sizeof(float); /* the base: 4 rows, 80 bytes */
    static const struct {
        const char *what;
        int of_view;   /* 1: a view of the view of rows 1..1 (offset 20, 20 bytes) */
        size_t offset; /* bytes */
        int rows;
        int ok;
    } cases[] = {
        {"the whole base", 0, 0, 4, 1},
        {"the last row", 0, 3 * 5 * 4, 1, 1},
        {"one row past the end", 0, 3 * 5 * 4, 2, 0},
        {"one byte past the end", 0, 4, 4, 0},
        {"starting past the end", 0, 100, 1, 0},
        {"an empty view at the end", 0, 80, 0, 1},
        {"a view of a view inside it", 1, 0, 1, 1},
        {"a view of a view past the root", 1, 3 * 5 * 4, 1, 0},
        {"a view of a view whose offsets wrap around", 1, SIZE_MAX - 5 * 4 + 1, 1, 0},
        {"a huge offset", 0, SIZE_MAX, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tt_graph *g = tt_graph_new();
        tt_value *base = tt_value_new(g, TT_ROLE_ACT, TT_F32, 2, (int64_t[]){4, N});
        tt_value *b = cases[i].of_view ? row_view(g, base, 1, 1) : base;
        CHECK(b != NULL && !g->failed);
        tt_value *v = tt_value_view(g, b, cases[i].offset, TT_F32, 2, (int64_t[]){cases[i].rows, N});
        if (cases[i].ok) {
            CHECK_MSG(v != NULL && !g->failed, "%s: refused: %s", cases[i].what, tt_last_error());
            if (v)
                CHECK(tt_value_root(v) == base &&
                      tt_value_root_offset(v) == cases[i].offset + (cases[i].of_view ? row : 0));
        } else {
            CHECK_MSG(v == NULL && g->failed, "%s (offset %zu, %d rows): accepted at root offset %zu", cases[i].what,
                      cases[i].offset, cases[i].rows, v ? v->offset : 0);
            /* a failed graph builds nothing more */
            if (g->failed) CHECK(tt_value_view(g, base, 0, TT_F32, 1, (int64_t[]){1}) == NULL);
        }
        tt_graph_free(g);
    }
}

int main(void)
{
    const double t0 = tt_now();
    test_view_bounds();
    test_exec_read_views();
    test_exec_write_views();
    test_exec_view_of_view();
    test_memplan_real_graphs();
    printf("test_memplan: %.2f s\n", tt_now() - t0);
    return th_done("test_memplan");
}

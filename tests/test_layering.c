/* test_layering.c — every project #include in src/, include/ and tools/ obeys the layer table
 * of DESIGN.md (no arrow into the backend implementations, CLI on the public API only) and resolves,
 * and no files include each other in a circle, nor call each other in one (read from the library's
 * object files with nm), but the GEMM's dispatch into its ISA variants; and no object file calls
 * asprintf, whose leaks the sanitizer build's MPI tests do not report. */
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "layering_calls.h"
#include "layering_graph.h"

/* ---- layers --------------------------------------------------------------------------------- */

enum layer {
    L_CORE, L_IR, L_OPS, L_MODELS, L_BACKEND, L_DIST, L_GRAPH,
    L_FORMATS, L_TOKENIZER, L_DATA, L_HF, L_CHAT, L_CONFIG, L_TRAIN, L_COMMANDS,
    L_CLI,       /* tools/ */
    L_PUBLIC,    /* include/ (the public API: "titan/...") */
    L_GENERATED, /* default_config.h, made by CMake for the CLI */
    L_UNKNOWN,   /* a folder the table does not name, or outside the tree */
};

static const struct {
    const char *dir; /* folder under src/ */
    enum layer layer;
    int rank; /* lower may be included by higher */
} src_layers[] = {
    {"core", L_CORE, 0},       {"ir", L_IR, 1},           {"ops", L_OPS, 2},   {"models", L_MODELS, 3},
    {"backend", L_BACKEND, 3}, {"dist", L_DIST, 4},       {"graph", L_GRAPH, 5}, {"formats", L_FORMATS, 6},
    {"tokenizer", L_TOKENIZER, 6}, {"data", L_DATA, 6},   {"hf", L_HF, 6}, {"chat", L_CHAT, 6},
    /* the config reader (recipes, CLI keys, flavors); generation, eval, plan, report, benchmarks */
    {"config", L_CONFIG, 7},   {"train", L_TRAIN, 8},     {"commands", L_COMMANDS, 9},
};
#define N_SRC_LAYERS (sizeof src_layers / sizeof src_layers[0])
#define RANK_CLI 10

enum backend_part { BP_NONE, BP_IFACE, BP_HOST, BP_IMPL };

typedef struct {
    enum layer layer;
    int rank;
    const char *name;       /* the layer's folder, for messages */
    enum backend_part part; /* inside src/backend/: the interface, host/, or an implementation */
    char sub[64];           /* the implementation's folder (cpu, ref, later cuda) */
} where;

static int is_io(enum layer l)
{
    return l == L_FORMATS || l == L_TOKENIZER || l == L_DATA || l == L_HF || l == L_CHAT;
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* Which layer a path relative to the tree's root (with '/') belongs to. */
static where layer_of(const char *rel)
{
    where w = {L_UNKNOWN, 99, "?", BP_NONE, ""};
    if (starts(rel, "include/")) return (where){L_PUBLIC, -1, "include", BP_NONE, ""};
    if (starts(rel, "tools/")) return (where){L_CLI, RANK_CLI, "tools", BP_NONE, ""};
    if (!starts(rel, "src/")) return w;
    const char *p = rel + 4, *slash = strchr(p, '/');
    if (!slash) return w; /* a file straight in src/ belongs to no layer */
    for (size_t i = 0; i < N_SRC_LAYERS; i++) {
        size_t n = strlen(src_layers[i].dir);
        if ((size_t)(slash - p) != n || strncmp(p, src_layers[i].dir, n) != 0) continue;
        w.layer = src_layers[i].layer, w.rank = src_layers[i].rank, w.name = src_layers[i].dir;
        if (w.layer == L_BACKEND) {
            const char *rest = slash + 1, *s2 = strchr(rest, '/');
            if (!s2) w.part = BP_IFACE;
            else {
                size_t m = (size_t)(s2 - rest);
                if (m >= sizeof w.sub) m = sizeof w.sub - 1;
                memcpy(w.sub, rest, m);
                w.sub[m] = 0;
                w.part = strcmp(w.sub, "host") == 0 ? BP_HOST : BP_IMPL;
            }
        }
        return w;
    }
    return w;
}

/* The rule an include from `from` (file `rel`) to `to` (file `to_rel`) breaks, or NULL. The tag
 * (first word) names the rule for the synthetic cases; the rest is the message. */
static const char *rule_broken(const where *from, const char *rel, const where *to, const char *to_rel)
{
    static char msg[512];
    if (from->layer == L_PUBLIC)
        return to->layer == L_PUBLIC && starts(to_rel, "include/titan/")
                   ? NULL
                   : "public: public headers include/titan/*.h include only \"titan/...\" headers";
    if (from->layer == L_CLI)
        return (to->layer == L_PUBLIC && starts(to_rel, "include/titan/")) || to->layer == L_GENERATED
                   ? NULL
                   : "cli: the CLI (tools/) includes only the public headers \"titan/...\" and "
                     "\"default_config.h\", nothing from src/";
    if (from->layer == L_UNKNOWN) return NULL; /* reported once for the file itself */
    /* from here on: a file in a known folder of src/ */
    if (to->layer == L_PUBLIC) return NULL; /* the public API is below every layer */
    if (to->layer == L_UNKNOWN || to->layer == L_GENERATED) {
        snprintf(msg, sizeof msg, "unknown: %.400s is in no layer of the table (or outside src/ and include/)", to_rel);
        return msg;
    }
    if (to->part == BP_HOST || to->part == BP_IMPL) {
        if (from->layer != L_BACKEND) {
            snprintf(msg, sizeof msg,
                     "backend-impl: no file outside src/backend/ includes the backend implementations "
                     "(cpu/, ref/, host/), not even %s/ (the interface, backend/backend.h, is for graph, config, "
                     "train and commands)",
                     from->name);
            return msg;
        }
        if (from->part == BP_IMPL && to->part == BP_IMPL && strcmp(from->sub, to->sub) != 0) {
            snprintf(msg, sizeof msg,
                     "backend-siblings: inside src/backend/, %s/ may include host/ and backend.h but not %s/",
                     from->sub, to->sub);
            return msg;
        }
        if (from->part == BP_HOST && to->part == BP_IMPL) {
            snprintf(msg, sizeof msg, "backend-host: host/ is shared by the implementations and includes none of "
                                      "them (%s/)", to->sub);
            return msg;
        }
        if (from->part == BP_IFACE && rel[strlen(rel) - 1] == 'h')
            return "backend-iface: the backend interface header must not pull in an implementation (graph, "
                   "config, train and commands include it)";
    }
    if (is_io(from->layer) && (to->layer == L_GRAPH || to->layer == L_BACKEND || to->layer == L_CONFIG ||
                               to->layer == L_TRAIN || to->layer == L_COMMANDS)) {
        snprintf(msg, sizeof msg,
                 "io: %s (with formats, tokenizer, data, hf, chat) may include each other, core, ir, ops and models; "
                 "never graph, backend, config, train or commands (%s)",
                 from->name, to->name);
        return msg;
    }
    /* the config reader validates names against the backends (training.backend) but builds no graph */
    if (from->layer == L_CONFIG && (to->layer == L_GRAPH || to->layer == L_TRAIN || to->layer == L_COMMANDS)) {
        snprintf(msg, sizeof msg,
                 "config: the config reader (config/) includes the io layers and below, and the backend interface; "
                 "never graph, train or commands (%s)",
                 to->name);
        return msg;
    }
    if ((from->layer == L_MODELS && to->layer == L_BACKEND) || (from->layer == L_BACKEND && to->layer == L_MODELS))
        return "siblings: models and backend are siblings: neither includes the other";
    if (from->layer == L_DIST && (to->layer == L_MODELS || (to->layer == L_BACKEND && to->part != BP_IFACE)))
        return "dist: the communication layer (dist/) includes only core, ir, ops and the backend interface "
               "(backend/backend.h: collectives take backend buffers and a queue), never models";
    if (to->rank > from->rank) {
        snprintf(msg, sizeof msg, "upward: %s (rank %d) may not include the higher layer %s (rank %d)", from->name,
                 from->rank, to->name, to->rank);
        return msg;
    }
    return NULL;
}

/* ---- the checker ---------------------------------------------------------------------------- */

typedef struct checker checker;
/* Called for every project include (rule NULL: allowed) and for file-level problems (line 0). */
typedef void (*report_fn)(checker *c, const char *file, int line, const char *inc, const char *rule);
struct checker {
    char root[PATH_MAX];   /* realpath of the tree */
    char gen_dir[PATH_MAX]; /* where default_config.h is generated ("" if none) */
    report_fn report;
    lg_graph *inc; /* the include graph between files (foo.c and foo.h: the one node "foo") */
    int files, includes, violations;
    /* the synthetic cases record their violations here */
    struct rec {
        char file[256];
        char tag[32];
    } recs[64];
    int n_recs;
};

static int path_join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n >= 0 && (size_t)n < cap;
}

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Resolve `inc` included from root/rel. Quoted: next to the file, then src/, then include/ (and
 * default_config.h in the generated folder, for the CLI); angle: src/, include/ only. Writes the
 * target's path relative to the root (or "generated/...") to to_rel; 0 if nothing matches. */
static int resolve(const checker *c, const char *rel, const char *inc, int quoted, char *to_rel, size_t cap)
{
    char dir[PATH_MAX], cand[PATH_MAX], real[PATH_MAX];
    const char *bases[3];
    int nb = 0;
    if (quoted) {
        if (!path_join(dir, sizeof dir, c->root, rel)) return 0;
        *strrchr(dir, '/') = 0;
        bases[nb++] = dir;
    }
    char src[PATH_MAX], inc_dir[PATH_MAX];
    if (!path_join(src, sizeof src, c->root, "src") || !path_join(inc_dir, sizeof inc_dir, c->root, "include"))
        return 0;
    bases[nb++] = src;
    bases[nb++] = inc_dir;
    for (int i = 0; i < nb; i++) {
        if (!path_join(cand, sizeof cand, bases[i], inc) || !is_file(cand) || !realpath(cand, real)) continue;
        size_t n = strlen(c->root);
        int inside = strncmp(real, c->root, n) == 0 && real[n] == '/';
        int w = inside ? snprintf(to_rel, cap, "%s", real + n + 1)
                       : snprintf(to_rel, cap, "(outside the tree) %s", real);
        return w >= 0 && (size_t)w < cap;
    }
    if (quoted && c->gen_dir[0] && strcmp(inc, "default_config.h") == 0 &&
        path_join(cand, sizeof cand, c->gen_dir, inc) && is_file(cand)) {
        int w = snprintf(to_rel, cap, "generated/%s", inc);
        return w >= 0 && (size_t)w < cap ? 2 : 0;
    }
    return 0;
}

static void record(checker *c, const char *file, const char *rule)
{
    if (c->n_recs >= (int)(sizeof c->recs / sizeof c->recs[0])) return;
    struct rec *r = &c->recs[c->n_recs++];
    snprintf(r->file, sizeof r->file, "%s", file);
    size_t n = strcspn(rule, ":");
    if (n >= sizeof r->tag) n = sizeof r->tag - 1;
    memcpy(r->tag, rule, n);
    r->tag[n] = 0;
}

/* A file's node in the include graph: its path without the extension, so that a .c and its .h
 * (and an .inc beside them) are one node, and a .c including its own header is no edge. */
static const char *stem(const char *rel, char *out, size_t cap)
{
    snprintf(out, cap, "%s", rel);
    char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
    if (dot && (!slash || dot > slash)) *dot = 0;
    return out;
}

static void check_include(checker *c, const char *rel, const where *from, int line, const char *inc, int quoted)
{
    char to_rel[PATH_MAX];
    int how = resolve(c, rel, inc, quoted, to_rel, sizeof to_rel);
    if (!how) {
        if (!quoted) return; /* <...> that is not ours: a system header */
        c->includes++;
        c->report(c, rel, line, inc,
                  "unresolved: does not resolve to an existing file under src/, include/ or next to the "
                  "including file");
        return;
    }
    c->includes++;
    if (how == 1 && !starts(to_rel, "(outside")) {
        char a[PATH_MAX], b[PATH_MAX], why[1024];
        snprintf(why, sizeof why, "%.400s:%d #include \"%.400s\"", rel, line, inc);
        lg_edge(c->inc, lg_node(c->inc, stem(rel, a, sizeof a)), lg_node(c->inc, stem(to_rel, b, sizeof b)), why);
    }
    where to = how == 2 ? (where){L_GENERATED, 99, "generated", BP_NONE, ""} : layer_of(to_rel);
    c->report(c, rel, line, inc, rule_broken(from, rel, &to, to_rel));
}

/* Scan one file's #include lines, outside comments. */
static void scan_file(checker *c, const char *rel)
{
    char path[PATH_MAX];
    if (!path_join(path, sizeof path, c->root, rel)) return;
    FILE *f = fopen(path, "rb");
    if (!f) {
        c->report(c, rel, 0, "", "unreadable: cannot open the file");
        return;
    }
    c->files++;
    where from = layer_of(rel);
    if (from.layer == L_UNKNOWN)
        c->report(c, rel, 0, "",
                  "unknown: the file's folder is in no layer of the table (add it to DESIGN.md and this test)");
    char buf[8192];
    int lineno = 0, in_comment = 0;
    while (fgets(buf, sizeof buf, f)) {
        lineno++;
        char *p = buf;
        if (in_comment) {
            char *e = strstr(p, "*/");
            if (!e) continue;
            p = e + 2;
            in_comment = 0;
        }
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#') {
            char *q = p + 1;
            while (*q == ' ' || *q == '\t') q++;
            if (strncmp(q, "include", 7) == 0 && (q[7] == ' ' || q[7] == '\t' || q[7] == '"' || q[7] == '<')) {
                q += 7;
                while (*q == ' ' || *q == '\t') q++;
                char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
                char *end = close ? strchr(q + 1, close) : NULL;
                if (end) {
                    char inc[PATH_MAX];
                    snprintf(inc, sizeof inc, "%.*s", (int)(end - q - 1), q + 1);
                    check_include(c, rel, &from, lineno, inc, close == '"');
                    p = end + 1;
                }
            }
        }
        /* track block comments opened on this line (strings and // comments skipped) */
        for (; *p; p++) {
            if (*p == '"' || *p == '\'') {
                char qc = *p++;
                while (*p && *p != qc) p += (*p == '\\' && p[1]) ? 2 : 1;
                if (!*p) break;
            } else if (p[0] == '/' && p[1] == '/') break;
            else if (p[0] == '/' && p[1] == '*') {
                char *e = strstr(p + 2, "*/");
                if (!e) {
                    in_comment = 1;
                    break;
                }
                p = e + 1;
            }
        }
    }
    fclose(f);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int scanned_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    static const char *exts[] = {".c", ".h", ".inc", ".cu", ".cuh"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (strcmp(dot, exts[i]) == 0) return 1;
    return 0;
}

/* Walk root/rel recursively (sorted, hidden entries and symlinks skipped). */
static void walk(checker *c, const char *rel)
{
    char path[PATH_MAX];
    if (!path_join(path, sizeof path, c->root, rel)) return;
    DIR *d = opendir(path);
    if (!d) return; /* a tree without tools/ or include/ is fine */
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof *names);
            if (!names) abort();
        }
        if (!(names[n++] = strdup(e->d_name))) abort();
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char sub[PATH_MAX], full[PATH_MAX];
        struct stat st;
        if (path_join(sub, sizeof sub, rel, names[i]) && path_join(full, sizeof full, c->root, sub) &&
            lstat(full, &st) == 0) {
            if (S_ISDIR(st.st_mode)) walk(c, sub);
            else if (S_ISREG(st.st_mode) && scanned_ext(names[i])) scan_file(c, sub);
        }
        free(names[i]);
    }
    free(names);
}

static int check_tree(checker *c, const char *root, const char *gen_dir, report_fn report)
{
    lg_free(c->inc);
    memset(c, 0, sizeof *c);
    c->inc = lg_new();
    if (!realpath(root, c->root)) return -1;
    snprintf(c->gen_dir, sizeof c->gen_dir, "%s", gen_dir ? gen_dir : "");
    c->report = report;
    walk(c, "src");
    walk(c, "include");
    walk(c, "tools");
    return 0;
}

/* ---- reports -------------------------------------------------------------------------------- */

static void report_real(checker *c, const char *file, int line, const char *inc, const char *rule)
{
    if (rule) c->violations++;
    if (line == 0) CHECK_MSG(rule == NULL, "%s: %s", file, rule);
    else CHECK_MSG(rule == NULL, "%s:%d: #include \"%s\" breaks the rule %s", file, line, inc, rule);
}

static void report_synthetic(checker *c, const char *file, int line, const char *inc, const char *rule)
{
    (void)line, (void)inc;
    if (!rule) return;
    c->violations++;
    record(c, file, rule);
}

/* ---- circles -------------------------------------------------------------------------------- */

/* The circles allowed, each a named entry: a circle is allowed when every file in it is the entry's
 * stem in its folder or a variant of it (stem_*): the GEMM's front end (gemm.c) dispatches into a
 * kernel per ISA (gemm_avx512.c, ...), which call back into its shared packing and edge code. */
static const struct {
    const char *name, *dir, *stem;
} allowed_circles[] = {
    {"the GEMM's dispatch into its ISA variants", "src/backend/cpu/", "gemm"},
};

/* file (a node: "src/backend/cpu/gemm_avx2" or "src/backend/cpu/gemm_avx2.c") is entry k's */
static int in_allowed(const char *file, size_t k)
{
    const char *dir = allowed_circles[k].dir, *st = allowed_circles[k].stem;
    if (!starts(file, dir) || !starts(file + strlen(dir), st)) return 0;
    const char *rest = file + strlen(dir) + strlen(st);
    return !strchr(rest, '/') && (*rest == 0 || *rest == '.' || *rest == '_');
}

static const char *allowed_by(const lg_circle *c)
{
    for (size_t k = 0; k < sizeof allowed_circles / sizeof allowed_circles[0]; k++) {
        int all = 1;
        for (int i = 0; i < c->n && all; i++) all = in_allowed(c->members[i], k);
        if (all) return allowed_circles[k].name;
    }
    return NULL;
}

typedef struct {
    const char *kind; /* "include", "call" */
    int real;         /* the real tree: each circle a failed check; synthetic: recorded */
    int bad, allowed;
    char recs[16][512]; /* synthetic: "a, b" or "allowed: a, b" */
    int n_recs;
} circles;

static void on_circle(void *ctx, const lg_circle *c)
{
    circles *r = ctx;
    const char *why = allowed_by(c);
    char members[4096] = "";
    for (int i = 0; i < c->n; i++)
        snprintf(members + strlen(members), sizeof members - strlen(members), "%s%s", i ? ", " : "", c->members[i]);
    why ? r->allowed++ : r->bad++;
    if (r->real && why) printf("  allowed %s circle (%s): %s\n", r->kind, why, members);
    if (r->real) CHECK_MSG(why != NULL, "%s circle between %d files: %s\n    one cycle: %s", r->kind, c->n, members,
                           c->cycle);
    if (!r->real && r->n_recs < (int)(sizeof r->recs / sizeof r->recs[0]))
        snprintf(r->recs[r->n_recs++], sizeof r->recs[0], "%s%.500s", why ? "allowed: " : "", members);
}

/* The circles found against the ones expected (each once, and no other). */
static void expect_circles(const circles *r, const char *const *want, int n_want)
{
    for (int i = 0; i < n_want; i++) {
        int hits = 0;
        for (int k = 0; k < r->n_recs; k++) hits += strcmp(r->recs[k], want[i]) == 0;
        CHECK_MSG(hits == 1, "synthetic %s circles: expected '%s' once, found it %d times", r->kind, want[i], hits);
    }
    CHECK_MSG(r->n_recs == n_want, "synthetic %s circles: %d found, %d expected", r->kind, r->n_recs, n_want);
    for (int k = 0; k < r->n_recs && r->n_recs != n_want; k++) fprintf(stderr, "    found: %s\n", r->recs[k]);
}

/* The library's object files under dir (CMake's TITAN_BINARY_DIR/CMakeFiles/titan.dir/src/...), each
 * named by its source (src/x/y.c); an object whose source is gone (left from an older tree) is skipped. */
static void add_objects(lc_objects *o, const char *dir, const char *rel, int *failed)
{
    char path[PATH_MAX];
    if (!path_join(path, sizeof path, dir, rel)) return;
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX], full[PATH_MAX], src[PATH_MAX];
        struct stat st;
        if (!path_join(sub, sizeof sub, rel, e->d_name) || !path_join(full, sizeof full, dir, sub) ||
            lstat(full, &st) != 0)
            continue;
        const size_t n = strlen(sub);
        if (S_ISDIR(st.st_mode)) add_objects(o, dir, sub, failed);
        else if (n > 4 && strcmp(sub + n - 4, ".c.o") == 0) {
            snprintf(src, sizeof src, "%s/%.*s", TITAN_SOURCE_DIR, (int)(n - 2), sub);
            if (!is_file(src)) continue;
            snprintf(src, sizeof src, "%.*s", (int)(n - 2), sub);
            if (lc_add_object(o, src, full)) {
                CHECK_MSG(0, "nm failed on %s (is binutils' nm on the PATH?)", full);
                ++*failed;
            }
        }
    }
    closedir(d);
}

/* ---- synthetic trees ------------------------------------------------------------------------ */

static const struct {
    const char *file, *text;
    const char *tag; /* the rule it must break, NULL: allowed */
} cases[] = {
    /* targets (allowed includes of their own) */
    {"src/core/core.h", "#include \"titan/titan.h\"\n", NULL},
    {"src/ir/graph.h", "#include \"core/core.h\"\n", NULL},
    {"src/models/model.h", "#include \"ir/graph.h\"\n", NULL},
    {"src/backend/backend.h", "#include \"core/core.h\"\n", NULL},
    {"src/backend/cpu/kernels.h", "#include \"backend/backend.h\"\n", NULL},
    {"src/backend/ref/ref_kernels.h", "#include \"../host/host.h\"\n", NULL},
    {"src/backend/host/host.h", "#include \"backend/backend.h\"\n", NULL},
    {"src/graph/exec.h", "#include \"backend/backend.h\"\n", NULL},
    {"src/train/run.h", "#include \"graph/exec.h\"\n", NULL},
    {"include/titan/titan.h", "#include <stdio.h>\n", NULL},
    {"generated/default_config.h", "", NULL},
    /* the cases */
    {"src/models/x.c", "#include <stdio.h>\n#include \"models/model.h\"\n#include \"backend/cpu/kernels.h\"\n",
     "backend-impl"},
    {"tools/y.c", "#include \"titan/titan.h\"\n#include \"default_config.h\"\n#include \"train/run.h\"\n", "cli"},
    {"src/graph/z.c", "#include \"backend/ref/ref_kernels.h\"\n", "backend-impl"},
    {"src/graph/w.c", "#include \"backend/backend.h\"\n#include \"graph/exec.h\"\n#include \"models/model.h\"\n",
     NULL},
    /* the other rules */
    {"src/train/t.c", "#include \"backend/backend.h\"\n#include \"backend/host/host.h\"\n", "backend-impl"},
    {"src/train/ok.c", "#include \"backend/backend.h\"\n#include \"graph/exec.h\"\n#include \"train/run.h\"\n",
     NULL},
    {"src/models/m.c", "#include \"backend/backend.h\"\n", "siblings"},
    {"src/backend/b.c", "#include \"models/model.h\"\n", "siblings"},
    {"src/backend/cpu/k.c", "#include \"backend/ref/ref_kernels.h\"\n", "backend-siblings"},
    {"src/backend/cpu/k2.c", "#include \"kernels.h\"\n#include \"backend/host/host.h\"\n", NULL},
    {"src/backend/host/h.c", "#include \"backend/cpu/kernels.h\"\n", "backend-host"},
    {"src/backend/iface.h", "#include \"backend/cpu/kernels.h\"\n", "backend-iface"},
    {"src/formats/f.c", "#include \"graph/exec.h\"\n", "io"},
    {"src/hf/h.c", "#include \"models/model.h\"\n#include \"formats/f.h\"\n", NULL},
    {"src/formats/f.h", "#include \"core/core.h\"\n", NULL},
    {"src/data/d.c", "#include \"backend/backend.h\"\n", "io"},
    {"src/tokenizer/tk.c", "#include \"train/run.h\"\n", "io"},
    {"src/core/c.c", "#include \"ir/graph.h\"\n", "upward"},
    {"src/dist/dist.h", "#include \"core/core.h\"\n#include \"ir/graph.h\"\n", NULL},
    {"src/dist/bufs.c", "#include \"dist/dist.h\"\n#include \"backend/backend.h\"\n", NULL},
    {"src/dist/bad.c", "#include \"backend/host/host.h\"\n", "backend-impl"},
    {"src/dist/bad2.c", "#include \"models/model.h\"\n", "dist"},
    {"src/dist/bad3.c", "#include \"graph/exec.h\"\n", "upward"},
    {"src/graph/uses_dist.c", "#include \"dist/dist.h\"\n#include \"graph/exec.h\"\n", NULL},
    {"src/train/uses_dist.c", "#include \"dist/dist.h\"\n", NULL},
    {"src/ops/o2.c", "#include \"dist/dist.h\"\n", "upward"},
    {"src/backend/b2.c", "#include \"dist/dist.h\"\n", "upward"},
    {"src/ops/o.c", "#include \"../models/model.h\"\n", "upward"},
    {"include/titan/p.h", "#include \"titan/titan.h\"\n#include \"core/core.h\"\n", "public"},
    {"tools/cli2.c", "#include \"backend/backend.h\"\n", "cli"},
    {"src/data/missing.c", "#include \"data/nope.h\"\n", "unresolved"},
    {"src/newlayer/n.c", "#include \"core/core.h\"\n", "unknown"},
    /* the config reader and the commands, the layers on either side of train */
    {"src/config/config.h", "#include \"titan/titan.h\"\n", NULL},
    {"src/config/config.c",
     "#include \"config/config.h\"\n#include \"formats/f.h\"\n#include \"models/model.h\"\n"
     "#include \"backend/backend.h\"\n#include \"dist/dist.h\"\n",
     NULL},
    {"src/config/cg.c", "#include \"graph/exec.h\"\n", "config"},
    {"src/config/ct.c", "#include \"train/run.h\"\n", "config"},
    {"src/config/cc.c", "#include \"commands/generate.h\"\n", "config"},
    {"src/config/ck.c", "#include \"backend/cpu/kernels.h\"\n", "backend-impl"},
    {"src/formats/fc.c", "#include \"config/config.h\"\n", "io"},
    {"src/hf/hc.c", "#include \"commands/generate.h\"\n", "io"},
    {"src/train/tc.c", "#include \"config/config.h\"\n#include \"train/run.h\"\n", NULL},
    {"src/train/tcmd.c", "#include \"commands/generate.h\"\n", "upward"},
    {"src/commands/generate.h", "#include \"train/run.h\"\n", NULL},
    {"src/commands/generate.c",
     "#include \"commands/generate.h\"\n#include \"config/config.h\"\n#include \"graph/exec.h\"\n"
     "#include \"backend/backend.h\"\n",
     NULL},
    {"src/commands/bad.c", "#include \"backend/ref/ref_kernels.h\"\n", "backend-impl"},
    {"tools/cli3.c", "#include \"commands/generate.h\"\n", "cli"},
    /* include circles (allowed includes, each): three files of data/ through a .c and its .h, two io
     * folders, an ISA dispatch outside the GEMM's, the GEMM's own (allowed), and a GEMM in another folder */
    {"src/data/cyc_a.h", "#include \"data/cyc_b.h\"\n", NULL},
    {"src/data/cyc_b.h", "", NULL},
    {"src/data/cyc_b.c", "#include \"cyc_b.h\"\n#include \"data/cyc_c.h\"\n", NULL},
    {"src/data/cyc_c.h", "", NULL},
    {"src/data/cyc_c.c", "#include \"cyc_c.h\"\n#include \"cyc_a.h\"\n", NULL},
    {"src/formats/two.h", "#include \"tokenizer/two.h\"\n", NULL},
    {"src/tokenizer/two.h", "", NULL},
    {"src/tokenizer/two.c", "#include \"tokenizer/two.h\"\n#include \"formats/two.h\"\n", NULL},
    {"src/backend/cpu/attention.c", "#include \"attention_avx9.h\"\n", NULL},
    {"src/backend/cpu/attention_avx9.h", "", NULL},
    {"src/backend/cpu/attention_avx9.c", "#include \"attention.h\"\n", NULL},
    {"src/backend/cpu/attention.h", "", NULL},
    {"src/backend/cpu/gemm.h", "", NULL},
    {"src/backend/cpu/gemm.c", "#include \"backend/cpu/gemm.h\"\n#include \"gemm_avx9.h\"\n", NULL},
    {"src/backend/cpu/gemm_avx9.h", "", NULL},
    {"src/backend/cpu/gemm_avx9.c", "#include \"backend/cpu/gemm.h\"\n", NULL},
    {"src/backend/ref/gemm.c", "#include \"gemm_x.h\"\n", NULL},
    {"src/backend/ref/gemm_x.h", "", NULL},
    {"src/backend/ref/gemm_x.c", "#include \"gemm.h\"\n", NULL},
    {"src/backend/ref/gemm.h", "", NULL},
    /* the parser: spaced directives count, angle brackets naming our headers count, comments do not */
    {"src/models/spaced.c", "  #  include   \"backend/cpu/kernels.h\"\n", "backend-impl"},
    {"src/models/angle.c", "#include <backend/cpu/kernels.h>\n", "backend-impl"},
    {"src/models/comment.c",
     "/* an old note:\n#include \"backend/cpu/kernels.h\"\n*/\n// #include \"backend/cpu/kernels.h\"\n"
     "static const char *s = \"/*\"; /* */\n#include \"models/model.h\"\n",
     NULL},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *const include_circles[] = {
    "src/backend/cpu/attention, src/backend/cpu/attention_avx9",
    "allowed: src/backend/cpu/gemm, src/backend/cpu/gemm_avx9",
    "src/backend/ref/gemm, src/backend/ref/gemm_x",
    "src/data/cyc_a, src/data/cyc_b, src/data/cyc_c",
    "src/formats/two, src/tokenizer/two",
};

/* What nm prints of a few objects: a and b use each other (a uses b's data too), c is only used, a
 * weak reference to nothing is no edge; the GEMM's front end and an ISA kernel call each other
 * (allowed); a pair like it in ref/ is not the GEMM's. */
static const struct {
    const char *file, *nm;
} objects[] = {
    {"src/x/a.c", "x_a T 0 10\nx_b U\nprintf U\nx_table U\n"},
    {"src/x/b.c", "x_b T 10 4\nx_table D 0 40\nx_c U\nx_a U\n"},
    {"src/x/c.c", "x_c T 0 1\nmemcpy U\n"},
    {"src/y/lone.c", "y_lone T 0 1\nx_c U\nweak_thing w\n"},
    {"src/backend/cpu/gemm.c", "tt_gemm T 0 9\ngemm_pack T 9 9\ngemm_avx9_kernel U\n"},
    {"src/backend/cpu/gemm_avx9.c", "gemm_avx9_kernel T 0 9\ngemm_pack U\n"},
    {"src/backend/ref/r.c", "r_one T 0 9\nr_two U\n"},
    {"src/backend/ref/gemm_r.c", "r_two T 0 9\nr_one U\n"},
};
static const char *const call_circles[] = {
    "allowed: src/backend/cpu/gemm.c, src/backend/cpu/gemm_avx9.c",
    "src/backend/ref/gemm_r.c, src/backend/ref/r.c",
    "src/x/a.c, src/x/b.c",
};

static void synthetic(void)
{
    char root[] = "/tmp/test_layering_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    for (size_t i = 0; i < N_CASES; i++)
        CHECK_MSG(th_write_file(root, cases[i].file, cases[i].text) == 0, "cannot write %s", cases[i].file);
    char gen[PATH_MAX];
    snprintf(gen, sizeof gen, "%s/generated", root);
    static checker c;
    CHECK(check_tree(&c, root, gen, report_synthetic) == 0);
    int expected = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        if (starts(cases[i].file, "generated/")) continue;
        int hits = 0, right = 0;
        for (int r = 0; r < c.n_recs; r++)
            if (strcmp(c.recs[r].file, cases[i].file) == 0) {
                hits++;
                right += cases[i].tag && strcmp(c.recs[r].tag, cases[i].tag) == 0;
            }
        if (cases[i].tag) {
            expected++;
            CHECK_MSG(hits == 1 && right == 1, "synthetic %s: expected one '%s' violation, got %d (%d of that rule)",
                      cases[i].file, cases[i].tag, hits, right);
        } else {
            const char *first = "";
            for (int r = c.n_recs - 1; r >= 0; r--)
                if (strcmp(c.recs[r].file, cases[i].file) == 0) first = c.recs[r].tag;
            CHECK_MSG(hits == 0, "synthetic %s: allowed, yet %d violation(s) reported (first: '%s')", cases[i].file,
                      hits, first);
        }
    }
    CHECK_MSG(c.violations == expected, "synthetic tree: %d violations, expected %d", c.violations, expected);
    circles inc = {"include", 0, 0, 0, {{0}}, 0};
    lg_circles(c.inc, on_circle, &inc);
    expect_circles(&inc, include_circles, (int)(sizeof include_circles / sizeof include_circles[0]));
    printf("  synthetic tree: checked %d files and %d project includes, %d violations (%d expected), "
           "%d include circles (%d allowed)\n",
           c.files, c.includes, c.violations, expected, inc.bad + inc.allowed, inc.allowed);
    lg_free(c.inc);
    c.inc = NULL;
    th_rm_tree(root);

    /* the call graph's circles, from nm's text of made-up objects */
    lc_objects *o = lc_new();
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) lc_add_nm(o, objects[i].file, objects[i].nm);
    lg_graph *g = lg_new();
    lc_graph(o, g);
    circles calls = {"call", 0, 0, 0, {{0}}, 0};
    lg_circles(g, on_circle, &calls);
    expect_circles(&calls, call_circles, (int)(sizeof call_circles / sizeof call_circles[0]));
    CHECK_MSG(lg_n_edges(g) == 8, "synthetic objects: %d uses between files, expected 8", lg_n_edges(g));
    printf("  synthetic objects: %d files, %d uses between them, %d call circles (%d allowed)\n", lg_n_nodes(g),
           lg_n_edges(g), calls.bad + calls.allowed, calls.allowed);
    lg_free(g);
    lc_free(o);
}

/* The call graph of the library's object files: a circle between files fails, but the GEMM's. Without
 * the objects (a build elsewhere), CI fails and a local run skips; 1 when skipped. */
static int call_circles_of_tree(void)
{
    const char *objs = TITAN_BINARY_DIR "/CMakeFiles/titan.dir";
    char src_objs[PATH_MAX];
    struct stat st;
    if (!path_join(src_objs, sizeof src_objs, objs, "src") || stat(src_objs, &st) != 0 || !S_ISDIR(st.st_mode)) {
        const char *ci = getenv("CI");
        const int in_ci = ci && strcmp(ci, "true") == 0;
        CHECK_MSG(!in_ci, "the library's object files are not in %s (CMake's layout for the target titan): the call "
                          "circles cannot be checked", src_objs);
        if (!in_ci) printf("  no object files in %s: the call circles are not checked\n", src_objs);
        return !in_ci;
    }
    lc_objects *o = lc_new();
    int failed = 0;
    add_objects(o, objs, "src", &failed);
    lg_graph *g = lg_new();
    lc_graph(o, g);
    /* the walk found the library (an empty folder would pass vacuously) */
    CHECK_MSG(lc_n_objects(o) >= 50 && lg_n_edges(g) >= 200, "only %d object files and %d uses between them in %s",
              lc_n_objects(o), lg_n_edges(g), src_objs);
    circles calls = {"call", 1, 0, 0, {{0}}, 0};
    lg_circles(g, on_circle, &calls);
    printf("  object files: %d files of src/, %d uses between them, %d call circles (%d allowed)\n", lc_n_objects(o),
           lg_n_edges(g), calls.bad + calls.allowed, calls.allowed);
    /* no asprintf: the sanitizer build's leak check hides what it allocates (tests/lsan_openmpi.supp) */
    static const char *const hidden[] = {"asprintf", "vasprintf", "__asprintf_chk", "__vasprintf_chk"};
    for (size_t k = 0; k < sizeof hidden / sizeof hidden[0]; k++) {
        const char *user = lc_user_of(o, hidden[k]);
        CHECK_MSG(!user, "%s calls %s, whose leaks tests/lsan_openmpi.supp hides: use malloc and snprintf", user,
                  hidden[k]);
    }
    lg_free(g);
    lc_free(o);
    return 0;
}

int main(void)
{
    synthetic();

    static checker c;
    CHECK_MSG(check_tree(&c, TITAN_SOURCE_DIR, TITAN_BINARY_DIR "/generated", report_real) == 0,
              "cannot open the source tree %s", TITAN_SOURCE_DIR);
    /* the walk found the tree (a wrong root would pass vacuously) */
    CHECK_MSG(c.files >= 50 && c.includes >= 100, "only %d files and %d includes found", c.files, c.includes);
    circles inc = {"include", 1, 0, 0, {{0}}, 0};
    lg_circles(c.inc, on_circle, &inc);
    printf("  source tree: checked %d files and %d project includes (src/, include/, tools/), %d violations, "
           "%d include circles (%d allowed)\n",
           c.files, c.includes, c.violations, inc.bad + inc.allowed, inc.allowed);
    lg_free(c.inc);
    c.inc = NULL;

    const int skipped = call_circles_of_tree();
    if (skipped && !th_failed) return th_skip("test_layering", "the call circles need the library's object files");
    return th_done("test_layering");
}

/* test_no_host_ptr.c — the graph layer (src/graph/) and the dist layer (src/dist/) never take a
 * backend buffer's host address: no call of the backend's host_ptr and no cast of a tt_mem's buf,
 * but in the one named place, tt_mpi_host_addr in src/dist/dist_mpi.c (MPI moves host memory). */
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define ALLOWED_FILE "src/dist/dist_mpi.c"
#define ALLOWED_FN "tt_mpi_host_addr"

typedef struct {
    regex_t host_ptr, buf_cast, fn_start;
    int files, hits;          /* files scanned, forbidden uses found */
    char first[512];          /* the first one, for the message */
} scan;

/* The text with comments, strings and character literals blanked (newlines kept), so a comment
 * may name host_ptr. */
static void blank(char *s)
{
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            for (; *p && !(p[0] == '*' && p[1] == '/'); p++)
                if (*p != '\n') *p = ' ';
            if (*p) p[0] = p[1] = ' ', p++;
        } else if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++) *p = ' ';
            if (!*p) break;
        } else if (*p == '"' || *p == '\'') {
            const char q = *p;
            for (p++; *p && *p != q && *p != '\n'; p++) {
                if (*p == '\\' && p[1]) *p++ = ' ';
                *p = ' ';
            }
            if (!*p) break;
        }
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void hit(scan *c, const char *rel, int line, const char *what)
{
    if (!c->hits++) snprintf(c->first, sizeof c->first, "%s:%d: %s", rel, line, what);
}

/* One file: each line's forbidden uses; in the allowed file, host_ptr inside ALLOWED_FN's body
 * (from its definition's line to the next "}" in column 0) passes. */
static void scan_file(scan *c, const char *root, const char *rel)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *text = slurp(path);
    if (!text) {
        hit(c, rel, 0, "unreadable");
        return;
    }
    c->files++;
    blank(text);
    const int allowed_file = strcmp(rel, ALLOWED_FILE) == 0;
    int line = 0, in_fn = 0;
    for (char *s = text, *next; s && *s; s = next) {
        char *nl = strchr(s, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        line++;
        if (allowed_file && regexec(&c->fn_start, s, 0, NULL, 0) == 0) in_fn = 1;
        if (regexec(&c->host_ptr, s, 0, NULL, 0) == 0 && !in_fn)
            hit(c, rel, line, "takes a backend buffer's host address (host_ptr)");
        if (regexec(&c->buf_cast, s, 0, NULL, 0) == 0) hit(c, rel, line, "casts a backend buffer (a tt_mem's buf) to a pointer");
        if (in_fn && s[0] == '}') in_fn = 0;
    }
    free(text);
}

static int is_source(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".inc"));
}

static void walk(scan *c, const char *root, const char *rel)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX], full[PATH_MAX];
        struct stat st;
        if (snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name) >= (int)sizeof sub ||
            snprintf(full, sizeof full, "%s/%s", root, sub) >= (int)sizeof full || lstat(full, &st))
            continue;
        if (S_ISDIR(st.st_mode)) walk(c, root, sub);
        else if (S_ISREG(st.st_mode) && is_source(e->d_name)) scan_file(c, root, sub);
    }
    closedir(d);
}

static void scan_init(scan *c)
{
    memset(c, 0, sizeof *c);
    /* the member, called or taken: be->host_ptr(m), .host_ptr = ... */
    int rc = regcomp(&c->host_ptr, "(^|[^A-Za-z0-9_])host_ptr([^A-Za-z0-9_]|$)", REG_EXTENDED | REG_NOSUB);
    /* (char *)m.buf, (const uint8_t *) x->send.buf, (void *)(b.buf) ... */
    rc |= regcomp(&c->buf_cast,
                  "\\([[:space:]]*(const[[:space:]]+)?(void|char|unsigned[[:space:]]+char|u?int[0-9]+_t|float|double|"
                  "uint16_t)[[:space:]]*\\*[[:space:]]*\\)[[:space:]]*\\(?[[:space:]]*[A-Za-z_][]A-Za-z0-9_.>[-]*"
                  "(\\.|->)buf([^A-Za-z0-9_]|$)",
                  REG_EXTENDED | REG_NOSUB);
    rc |= regcomp(&c->fn_start, "^[A-Za-z_].*[^A-Za-z0-9_]" ALLOWED_FN "\\(", REG_EXTENDED | REG_NOSUB);
    if (rc) {
        fprintf(stderr, "test_no_host_ptr: a pattern does not compile\n");
        exit(1);
    }
}

static void scan_free(scan *c)
{
    regfree(&c->host_ptr);
    regfree(&c->buf_cast);
    regfree(&c->fn_start);
}

static void scan_tree(scan *c, const char *root)
{
    walk(c, root, "src/graph");
    walk(c, root, "src/dist");
}

/* ---- a synthetic tree: every forbidden form is found, the allowed place and comments are not ---- */

static const struct {
    const char *file, *text;
    int hits; /* forbidden uses it holds */
} cases[] = {
    {"src/graph/exec.c",
     "/* the executor never calls host_ptr */\n"
     "static void *f(const tt_backend *be, tt_mem m) { return be->host_ptr(m); }\n"
     "static const char *s = \"host_ptr in a string\";\n",
     1},
    {"src/graph/passes/p.c", "float *x = (float *)m.buf + m.off;\nconst char *y = (const char *) (e->out.buf);\n", 2},
    {"src/dist/dist.c", "void *p = d->host_ptr;\nint ok = b->send.buf && b->recv.buf; /* no cast */\n", 1},
    {"src/dist/dist_mpi.c",
     "tt_err tt_mpi_host_addr(const tt_backend *be, tt_mem m, void **out)\n{\n    *out = be->host_ptr(m);\n"
     "    return 0;\n}\n\nstatic void *g(const tt_backend *be, tt_mem m) { return be->host_ptr(m); }\n",
     1},
    {"src/train/elsewhere.c", "void *p = be->host_ptr(m);\n", 0}, /* outside the two layers: not this rule */
};

static void synthetic(void)
{
    char root[] = "/tmp/test_no_host_ptr_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK_MSG(0, "mkdtemp failed");
        return;
    }
    int expected = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_MSG(th_write_file(root, cases[i].file, cases[i].text) == 0, "cannot write %s", cases[i].file);
        expected += cases[i].hits;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) { /* each file alone */
        scan c;
        scan_init(&c);
        if (!strncmp(cases[i].file, "src/graph/", 10) || !strncmp(cases[i].file, "src/dist/", 9))
            scan_file(&c, root, cases[i].file);
        CHECK_MSG(c.hits == cases[i].hits, "synthetic %s: %d forbidden uses found, expected %d (first: %s)",
                  cases[i].file, c.hits, cases[i].hits, c.first);
        scan_free(&c);
    }
    scan c;
    scan_init(&c);
    scan_tree(&c, root);
    CHECK_MSG(c.files == 4 && c.hits == expected, "synthetic tree: %d files, %d forbidden uses (expected 4, %d)",
              c.files, c.hits, expected);
    printf("  synthetic tree: %d files, %d forbidden uses found (%d expected)\n", c.files, c.hits, expected);
    scan_free(&c);
    th_rm_tree(root);
}

int main(void)
{
    synthetic();
    scan c;
    scan_init(&c);
    scan_tree(&c, TITAN_SOURCE_DIR);
    /* the walk found the layers (a wrong root would pass vacuously) */
    CHECK_MSG(c.files >= 10, "only %d files found under src/graph and src/dist", c.files);
    CHECK_MSG(c.hits == 0, "%d place(s) take a backend buffer's host address outside %s in %s; the first: %s", c.hits,
              ALLOWED_FN, ALLOWED_FILE, c.first);
    printf("  source tree: %d files of src/graph and src/dist, %d host addresses taken outside %s\n", c.files, c.hits,
           ALLOWED_FN);
    scan_free(&c);
    return th_done("test_no_host_ptr");
}

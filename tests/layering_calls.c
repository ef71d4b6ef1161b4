/* layering_calls.c — test_layering's call graph between object files, read
 * from nm: each reference goes to the file that defines the symbol. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layering_calls.h"

typedef struct {
    char *name;
    int file;
    int defined;
} sym;

struct lc_objects {
    char **files;
    int n_files, cap_files;
    sym *syms;
    int n_syms, cap_syms;
};

lc_objects *lc_new(void)
{
    lc_objects *o = calloc(1, sizeof *o);
    if (!o) abort();
    return o;
}

void lc_free(lc_objects *o)
{
    if (!o) return;
    for (int i = 0; i < o->n_files; i++) free(o->files[i]);
    for (int i = 0; i < o->n_syms; i++) free(o->syms[i].name);
    free(o->files), free(o->syms), free(o);
}

int lc_n_objects(const lc_objects *o) { return o->n_files; }

const char *lc_user_of(const lc_objects *o, const char *name)
{
    for (int i = 0; i < o->n_syms; i++)
        if (!o->syms[i].defined && strcmp(o->syms[i].name, name) == 0) return o->files[o->syms[i].file];
    return NULL;
}

void lc_add_nm(lc_objects *o, const char *file, const char *nm_text)
{
    if (o->n_files == o->cap_files) {
        o->cap_files = o->cap_files ? 2 * o->cap_files : 64;
        if (!(o->files = realloc(o->files, sizeof *o->files * (size_t)o->cap_files))) abort();
    }
    const int f = o->n_files++;
    if (!(o->files[f] = strdup(file))) abort();
    for (const char *line = nm_text; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        char name[512], type[8];
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(end - line), line);
        if (sscanf(buf, "%511s %7s", name, type) == 2 && type[1] == 0) {
            if (o->n_syms == o->cap_syms) {
                o->cap_syms = o->cap_syms ? 2 * o->cap_syms : 1024;
                if (!(o->syms = realloc(o->syms, sizeof *o->syms * (size_t)o->cap_syms))) abort();
            }
            const int undef = type[0] == 'U' || type[0] == 'w' || type[0] == 'v';
            o->syms[o->n_syms++] = (sym){strdup(name), f, !undef};
            if (!o->syms[o->n_syms - 1].name) abort();
        }
        line = *end ? end + 1 : end;
    }
}

int lc_add_object(lc_objects *o, const char *file, const char *obj_path)
{
    if (strchr(obj_path, '\'')) return -1; /* it goes into a shell command in single quotes */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "nm -P -g '%s' 2>/dev/null", obj_path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t len = 0, cap = 1 << 16;
    char *text = malloc(cap);
    if (!text) abort();
    size_t got;
    while ((got = fread(text + len, 1, cap - len - 1, p)) > 0)
        if ((len += got) + 1 == cap && !(text = realloc(text, cap *= 2))) abort();
    text[len] = 0;
    const int rc = pclose(p);
    if (rc == 0) lc_add_nm(o, file, text);
    free(text);
    return rc == 0 ? 0 : -1;
}

static int by_name(const void *a, const void *b)
{
    const sym *x = a, *y = b;
    const int c = strcmp(x->name, y->name);
    return c ? c : x->file - y->file;
}

void lc_graph(const lc_objects *o, lg_graph *g)
{
    /* the defined symbols, sorted by name (a symbol defined twice, weak or common: its first file) */
    sym *defs = malloc(sizeof *defs * (size_t)(o->n_syms ? o->n_syms : 1));
    if (!defs) abort();
    int n_defs = 0;
    for (int i = 0; i < o->n_syms; i++)
        if (o->syms[i].defined) defs[n_defs++] = o->syms[i];
    qsort(defs, (size_t)n_defs, sizeof *defs, by_name);
    int *node = malloc(sizeof *node * (size_t)(o->n_files ? o->n_files : 1));
    if (!node) abort();
    for (int f = 0; f < o->n_files; f++) node[f] = lg_node(g, o->files[f]);
    for (int i = 0; i < o->n_syms; i++) {
        const sym *u = &o->syms[i];
        if (u->defined) continue;
        int lo = 0, hi = n_defs; /* the first definition of the name */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (strcmp(defs[mid].name, u->name) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo == n_defs || strcmp(defs[lo].name, u->name) != 0) continue; /* a system library's */
        char why[600];
        snprintf(why, sizeof why, "uses %s", u->name);
        lg_edge(g, node[u->file], node[defs[lo].file], why);
    }
    free(node);
    free(defs);
}

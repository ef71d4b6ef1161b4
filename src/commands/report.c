/* report.c — `titan report`: one self-contained HTML page (inline CSS and
 * SVG, no scripts, nothing fetched) of one or more runs' dump folders: their
 * curves overlaid, summary, model plan, config and per-op profile. Every file
 * it reads is untrusted: sizes are capped, missing files and fields are shown
 * as absent, malformed parts are skipped and said so, text is escaped. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "formats/safetensors.h"
#include "formats/toml.h"
#include "commands/svg_plot.h"

#define MAX_RUNS 10                 /* one colour each; more would not read at a glance */
#define METRICS_LIMIT (256u << 20)  /* metrics.jsonl: about a million logged steps */
#define JSON_LIMIT (16u << 20)      /* summary.json, plan.json */
#define CONFIG_LIMIT (4u << 20)     /* config.toml */
#define TRACE_LIMIT (64u << 20)     /* one step's Chrome trace */
#define MAX_NOTES 32
#define MAX_OPS 256
#define PLOT_W 580
#define PLOT_H 320

/* Tableau 10: distinct, and readable on white. */
static const char *const palette[MAX_RUNS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* ---- one run's data ------------------------------------------------------------ */

/* Columns of numbers, one row per logged step; NaN where a record lacks a field. */
enum { T_STEP, T_LOSS, T_GNORM, T_LR, T_TPS, T_MFU, T_RSS, T_ARENA, T_NCOL };
static const char *const train_keys[T_NCOL] = {"step", "loss", "grad_norm", "lr", "tokens_per_sec", "mfu",
                                               "peak_rss_bytes", "arena_bytes"};
enum { V_STEP, V_LOSS, V_NCOL };
static const char *const val_keys[V_NCOL] = {"step", "val_loss"};
#define COL_VAL_LOSS T_NCOL /* in a plot_def: the validation table's loss */

typedef struct {
    int ncol, n, cap;
    double *v[T_NCOL];
} table;

typedef struct {
    char name[64];
    double us, gflop;
    long calls;
} op_agg;

typedef struct {
    const char *dir; /* as given */
    char label[96];  /* short: the folder's name */
    const char *color;
    table train, val;
    long records_other; /* records with neither loss nor val_loss */
    int has_metrics;
    cJSON *summary, *plan;
    char *config_text;
    tt_toml_doc *config;
    double floor_nats; /* NaN: no floor known */
    /* the newest per-op profile */
    char trace_path[4800];
    long trace_step;
    op_agg *ops;
    int n_ops;
    double trace_us;
    long trace_events, trace_skipped;
    char notes[MAX_NOTES][400];
    int n_notes;
} report_run;

/* A problem found reading a run: on the page, and on the log. */
__attribute__((format(printf, 3, 4))) static void note(report_run *r, FILE *log, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (log) fprintf(log, "warning: %s: %s\n", r->dir, buf);
    if (r->n_notes < MAX_NOTES) snprintf(r->notes[r->n_notes++], sizeof r->notes[0], "%s", buf);
}

static void table_init(table *t, int ncol)
{
    memset(t, 0, sizeof *t);
    t->ncol = ncol;
}

static void table_free(table *t)
{
    for (int c = 0; c < t->ncol; c++) free(t->v[c]);
    memset(t, 0, sizeof *t);
}

/* Append a row. A step at or below the last one means the run was resumed
 * from an earlier checkpoint and logged those steps again: the new records
 * replace the old ones from that step on, so steps always increase. */
static tt_err table_push(table *t, const double *row)
{
    while (t->n > 0 && t->v[0][t->n - 1] >= row[0]) t->n--;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        for (int c = 0; c < t->ncol; c++) {
            double *p = realloc(t->v[c], (size_t)cap * sizeof *p);
            if (!p) return tt_errorf("out of memory reading metrics.jsonl");
            t->v[c] = p;
        }
        t->cap = cap;
    }
    for (int c = 0; c < t->ncol; c++) t->v[c][t->n] = row[c];
    t->n++;
    return 0;
}

/* A field as a finite number, or NaN (absent, null, not a number). */
static double num(const cJSON *o, const char *key)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(j) && isfinite(j->valuedouble) ? j->valuedouble : NAN;
}

/* A dotted path into nested objects: "peak.gflops". */
static const cJSON *at(const cJSON *o, const char *path)
{
    char part[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof part) return NULL;
        memcpy(part, path, n);
        part[n] = 0;
        o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, part) : NULL;
        path += n + (path[n] == '.');
    }
    return o;
}
static double num_at(const cJSON *o, const char *path)
{
    const cJSON *j = at(o, path);
    return cJSON_IsNumber(j) && isfinite(j->valuedouble) ? j->valuedouble : NAN;
}
static const char *str_at(const cJSON *o, const char *path)
{
    const cJSON *j = at(o, path);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* path inside the run's folder */
static void run_path(char *buf, size_t n, const report_run *r, const char *name)
{
    size_t l = strlen(r->dir);
    snprintf(buf, n, "%s%s%s", r->dir, l && r->dir[l - 1] == '/' ? "" : "/", name);
}

/* A file of the run: NULL, silently, when it is not there; NULL with a note
 * when it is there but unreadable or too big. */
static char *read_part(report_run *r, FILE *log, const char *name, size_t limit, size_t *len)
{
    char path[4400];
    struct stat st;
    run_path(path, sizeof path, r, name);
    if (stat(path, &st) != 0 && errno == ENOENT) return NULL;
    char *text = tt_read_file(path, limit, len);
    if (!text) note(r, log, "%s skipped: %s", name, tt_last_error());
    return text;
}

static cJSON *read_json_object(report_run *r, FILE *log, const char *name)
{
    size_t len;
    char *text = read_part(r, log, name, JSON_LIMIT, &len);
    if (!text) return NULL;
    cJSON *o = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(o)) {
        note(r, log, "%s skipped: %s", name, o ? "not a JSON object" : "not valid JSON");
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* metrics.jsonl: train records {"step","loss",...} and validation records
 * {"step","val_loss",...} (train/metrics.h). */
static tt_err read_metrics(report_run *r, FILE *log)
{
    size_t len;
    char *text = read_part(r, log, "metrics.jsonl", METRICS_LIMIT, &len);
    r->has_metrics = text != NULL;
    if (!text) return 0;
    long line_no = 0, bad_first[3] = {0}, n_bad = 0;
    tt_err rc = 0;
    for (size_t off = 0; off < len && !rc;) {
        const char *line = text + off, *nl = memchr(line, '\n', len - off);
        size_t n = nl ? (size_t)(nl - line) : len - off;
        off += n + (nl != NULL);
        line_no++;
        if (n == 0) continue;
        cJSON *o = cJSON_ParseWithLength(line, n);
        double step = num(o, "step");
        if (!cJSON_IsObject(o) || !(step >= 0 && step <= 1e15)) {
            if (!nl && !o) /* a last line without its newline: the run is writing it */
                note(r, log, "metrics.jsonl: the last line is incomplete (a run still writing?): skipped");
            else if (n_bad++ < 3)
                bad_first[n_bad - 1] = line_no;
            cJSON_Delete(o);
            continue;
        }
        double row[T_NCOL];
        if (cJSON_GetObjectItemCaseSensitive(o, "val_loss")) {
            for (int c = 0; c < V_NCOL; c++) row[c] = num(o, val_keys[c]);
            rc = table_push(&r->val, row);
        } else if (cJSON_GetObjectItemCaseSensitive(o, "loss")) {
            for (int c = 0; c < T_NCOL; c++) row[c] = num(o, train_keys[c]);
            rc = table_push(&r->train, row);
            /* a resumed run logging this step again makes the old validations from it on stale too */
            while (r->val.n > 0 && r->val.v[V_STEP][r->val.n - 1] >= step) r->val.n--;
        } else {
            r->records_other++;
        }
        cJSON_Delete(o);
    }
    free(text);
    if (n_bad) {
        char lines[96];
        int k = snprintf(lines, sizeof lines, "line %ld", bad_first[0]);
        for (long i = 1; i < n_bad && i < 3; i++)
            k += snprintf(lines + k, sizeof lines - (size_t)k, ", %ld", bad_first[i]);
        note(r, log, "metrics.jsonl: %ld line%s not a JSON object with a step (%s%s): skipped", n_bad,
             n_bad == 1 ? " is" : "s are", lines, n_bad > 3 ? ", ..." : "");
    }
    if (r->records_other)
        note(r, log, "metrics.jsonl: %ld record%s with neither loss nor val_loss: not plotted", r->records_other,
             r->records_other == 1 ? "" : "s");
    return rc;
}

/* The floor: summary.json's, else the one plan.json recorded at the start. */
static double run_floor(const report_run *r)
{
    double f = num_at(r->summary, "floor_nats");
    return isfinite(f) ? f : num_at(r->plan, "corpus.floor_nats");
}

/* ---- the per-op profile ------------------------------------------------------------ */

/* <dump>/<profiling.save_traces_folder>/iteration_<step>/rank0_trace.json,
 * the newest step; 0 when there is none. */
static int find_trace(report_run *r)
{
    const char *folder = "profile_traces";
    const tt_toml_entry *e = r->config ? tt_toml_get(r->config, "profiling.save_traces_folder") : NULL;
    if (e && e->value.type == TT_TOML_STRING && e->value.str[0]) folder = e->value.str;
    char dir[4400];
    if (folder[0] == '/') snprintf(dir, sizeof dir, "%s", folder);
    else run_path(dir, sizeof dir, r, folder);
    DIR *d = opendir(dir);
    if (!d) return 0;
    long best = -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *s = de->d_name;
        if (strncmp(s, "iteration_", 10)) continue;
        s += 10;
        size_t nd = strspn(s, "0123456789");
        if (nd == 0 || nd > 15 || s[nd]) continue;
        long step = strtol(s, NULL, 10);
        char path[4400 + 300];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/rank0_trace.json", dir, de->d_name);
        if (step > best && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            best = step;
            snprintf(r->trace_path, sizeof r->trace_path, "%s", path);
        }
    }
    closedir(d);
    if (best < 0) return 0;
    r->trace_step = best;
    return 1;
}

static int by_time(const void *a, const void *b)
{
    double x = ((const op_agg *)a)->us, y = ((const op_agg *)b)->us;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The time of each op over the trace's "X" events (`bench step --trace`'s
 * format: name = op, dur in µs, args.gflop). */
static void read_trace(report_run *r, FILE *log)
{
    if (!find_trace(r)) return;
    size_t len;
    char *text = tt_read_file(r->trace_path, TRACE_LIMIT, &len);
    if (!text) {
        note(r, log, "profile trace skipped: %s", tt_last_error());
        r->trace_path[0] = 0;
        return;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *ev = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(ev)) {
        note(r, log, "profile trace %s skipped: %s", r->trace_path,
             root ? "no traceEvents array" : "not valid JSON");
        cJSON_Delete(root);
        r->trace_path[0] = 0;
        return;
    }
    r->ops = calloc(MAX_OPS, sizeof *r->ops);
    const cJSON *x;
    cJSON_ArrayForEach(x, ev)
    {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(x, "ph");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(x, "name");
        if (cJSON_IsString(ph) && strcmp(ph->valuestring, "X")) continue; /* metadata and other phases */
        double dur = num(x, "dur"), gflop = num_at(x, "args.gflop");
        if (!cJSON_IsString(ph) || !cJSON_IsString(name) || !(dur >= 0 && dur < 1e15) || !r->ops) {
            r->trace_skipped++;
            continue;
        }
        int k = 0; /* its row: a name seen before, a new row, or past MAX_OPS - 1 names the last row for the rest */
        while (k < r->n_ops && strncmp(r->ops[k].name, name->valuestring, sizeof r->ops[k].name - 1)) k++;
        if (k == r->n_ops && k == MAX_OPS) k = MAX_OPS - 1;
        else if (k == r->n_ops)
            snprintf(r->ops[r->n_ops++].name, sizeof r->ops[0].name, "%s",
                     k == MAX_OPS - 1 ? "(other ops)" : name->valuestring);
        r->ops[k].us += dur;
        r->ops[k].calls++;
        if (gflop >= 0 && gflop < 1e15) r->ops[k].gflop += gflop;
        r->trace_us += dur;
        r->trace_events++;
    }
    cJSON_Delete(root);
    if (r->trace_skipped)
        note(r, log, "profile trace %s: %ld event%s without a name, \"ph\" or a valid duration: skipped", r->trace_path,
             r->trace_skipped, r->trace_skipped == 1 ? "" : "s");
    if (r->ops) qsort(r->ops, (size_t)r->n_ops, sizeof *r->ops, by_time);
}

/* ---- reading a run ------------------------------------------------------------------ */

static tt_err read_run(report_run *r, FILE *log)
{
    struct stat st;
    if (stat(r->dir, &st) != 0) return tt_errorf("%s: %s", r->dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tt_errorf("%s: not a folder (give a run's job.dump_folder)", r->dir);
    static const char *const parts[] = {"metrics.jsonl", "summary.json", "config.toml", "plan.json"};
    int found = 0;
    for (int i = 0; i < 4; i++) {
        char path[4400];
        run_path(path, sizeof path, r, parts[i]);
        found += stat(path, &st) == 0;
    }
    if (!found)
        return tt_errorf("%s: not a run's dump folder: no metrics.jsonl, summary.json, config.toml or plan.json there",
                         r->dir);
    table_init(&r->train, T_NCOL);
    table_init(&r->val, V_NCOL);
    if (read_metrics(r, log)) return -1;
    if (!r->has_metrics) note(r, log, "no metrics.jsonl: nothing to plot (metrics.save_jsonl = false?)");
    r->summary = read_json_object(r, log, "summary.json");
    r->plan = read_json_object(r, log, "plan.json");
    size_t len;
    if ((r->config_text = read_part(r, log, "config.toml", CONFIG_LIMIT, &len))) {
        if (!(r->config = tt_toml_parse(r->config_text, len, "config.toml")))
            note(r, log, "config.toml is not TOML titan reads (%s): shown as text", tt_last_error());
    }
    r->floor_nats = run_floor(r);
    read_trace(r, log);
    return 0;
}

static void free_run(report_run *r)
{
    table_free(&r->train);
    table_free(&r->val);
    cJSON_Delete(r->summary);
    cJSON_Delete(r->plan);
    free(r->config_text);
    tt_toml_free(r->config);
    free(r->ops);
}

/* A run's short name: its folder's ("outputs" for "outputs/"), numbered by
 * its place on the command line when two runs' folders share a name. */
static void make_labels(report_run *runs, int n)
{
    int dup[MAX_RUNS] = {0};
    for (int i = 0; i < n; i++) {
        char buf[4096], real[4096];
        snprintf(buf, sizeof buf, "%s", runs[i].dir);
        size_t l = strlen(buf);
        while (l > 1 && buf[l - 1] == '/') buf[--l] = 0;
        const char *base = strrchr(buf, '/');
        base = base && base[1] ? base + 1 : buf;
        if ((!strcmp(base, ".") || !strcmp(base, "..")) && realpath(buf, real) && strrchr(real, '/')[1])
            base = strrchr(real, '/') + 1;
        snprintf(runs[i].label, sizeof runs[i].label, "%.80s", base);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) dup[i] |= i != j && !strcmp(runs[i].label, runs[j].label);
    for (int i = 0; i < n; i++)
        if (dup[i]) {
            size_t l = strlen(runs[i].label);
            snprintf(runs[i].label + l, sizeof runs[i].label - l, " (%d)", i + 1);
        }
}

/* ---- formatting ---------------------------------------------------------------------- */

static void esc(FILE *o, const char *s) { tt_html_escape(o, s, -1); }

/* "—" for NaN; integers grouped by thousands; else 4 significant digits. */
static void put_num(FILE *o, double v)
{
    if (!isfinite(v)) {
        fputs("&mdash;", o);
        return;
    }
    if (v == floor(v) && fabs(v) < 1e15) {
        char d[32], g[48];
        long long x = (long long)v;
        int n = snprintf(d, sizeof d, "%lld", x < 0 ? -x : x), k = 0;
        if (x < 0) g[k++] = '-';
        for (int i = 0; i < n; i++) {
            if (i && (n - i) % 3 == 0) g[k++] = ',';
            g[k++] = d[i];
        }
        g[k] = 0;
        fputs(g, o);
    } else {
        fprintf(o, "%.4g", v);
    }
}

static void put_bytes(FILE *o, double b)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (!isfinite(b) || b < 0) {
        fputs("&mdash;", o);
        return;
    }
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    fprintf(o, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
}

/* A JSON value in a table cell. */
static void put_json(FILE *o, const cJSON *j)
{
    if (!j || cJSON_IsNull(j)) fputs("&mdash;", o);
    else if (cJSON_IsNumber(j)) put_num(o, j->valuedouble);
    else if (cJSON_IsString(j)) tt_html_escape(o, j->valuestring, 2000);
    else if (cJSON_IsBool(j)) fputs(cJSON_IsTrue(j) ? "true" : "false", o);
    else {
        char *t = cJSON_PrintUnformatted(j);
        fputs("<code>", o);
        tt_html_escape(o, t ? t : "", 600);
        if (t && strlen(t) > 600) fputs("&hellip;", o);
        fputs("</code>", o);
        cJSON_free(t);
    }
}

static void put_toml(FILE *o, const tt_toml_value *v)
{
    switch (v->type) {
    case TT_TOML_STRING: fputc('"', o), tt_html_escape(o, v->str, 300), fputc('"', o); break;
    case TT_TOML_INT: fprintf(o, "%lld", (long long)v->i); break;
    case TT_TOML_FLOAT: fprintf(o, "%.10g", v->f); break;
    case TT_TOML_BOOL: fputs(v->b ? "true" : "false", o); break;
    case TT_TOML_ARRAY:
        fputc('[', o);
        for (size_t i = 0; i < v->n_items && i < 32; i++) {
            if (i) fputs(", ", o);
            put_toml(o, &v->items[i]);
        }
        fputs(v->n_items > 32 ? ", &hellip;]" : "]", o);
        break;
    }
}

static int toml_equal(const tt_toml_value *a, const tt_toml_value *b)
{
    if (a->type != b->type) return 0;
    switch (a->type) {
    case TT_TOML_STRING: return !strcmp(a->str, b->str);
    case TT_TOML_INT: return a->i == b->i;
    case TT_TOML_FLOAT: return a->f == b->f;
    case TT_TOML_BOOL: return a->b == b->b;
    case TT_TOML_ARRAY:
        if (a->n_items != b->n_items) return 0;
        for (size_t i = 0; i < a->n_items; i++)
            if (!toml_equal(&a->items[i], &b->items[i])) return 0;
        return 1;
    }
    return 0;
}

static void swatch(FILE *o, const report_run *r)
{
    fprintf(o, "<span class=\"sw\" style=\"background:%s\"></span>", r->color);
}

/* ---- the page ---------------------------------------------------------------------------- */

static const char *css =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:24px 32px;color:#222;"
    "background:#fafafa;max-width:1240px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;"
    "padding-bottom:4px}h3{font-size:14px;margin:16px 0 6px}"
    ".sub{color:#666;font-size:13px;margin:0 0 12px}"
    "table{border-collapse:collapse;font-size:13px;background:#fff}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    "tr.diff td{background:#fff8e0}table.plan th,table.summary th{min-width:9em}table.plan td{max-width:26em}"
    ".sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px}"
    ".plots{display:grid;grid-template-columns:repeat(2,580px);gap:16px 24px}"
    ".plots svg{background:#fff;border:1px solid #e4e4e4;border-radius:4px}"
    ".notes{background:#fff4f0;border:1px solid #f0c0b0;padding:8px 14px;font-size:13px}"
    ".notes li{margin:2px 0}"
    "pre{background:#fff;border:1px solid #ddd;padding:8px 12px;font-size:12px;overflow:auto}"
    "pre.cfg{columns:3 300px;column-gap:24px}"
    ".bar{display:inline-block;height:9px;background:#7fa7d0;vertical-align:middle;margin-right:6px}"
    ".none{color:#777;font-style:italic}";

static void page_runs(FILE *o, report_run *runs, int n)
{
    fputs("<h2>Runs</h2>\n<table class=\"runs\"><tr><th>run</th><th>status</th><th>logged steps</th>"
          "<th>last train loss</th><th>last validation loss</th><th>corpus floor</th><th>folder</th></tr>\n", o);
    for (int i = 0; i < n; i++) {
        report_run *r = &runs[i];
        const table *t = &r->train, *v = &r->val;
        fputs("<tr><td>", o);
        swatch(o, r);
        esc(o, r->label);
        fputs("</td><td>", o);
        const tt_toml_entry *steps = r->config ? tt_toml_get(r->config, "training.steps") : NULL;
        double last = t->n ? t->v[T_STEP][t->n - 1] : NAN;
        if (r->summary) {
            fputs("finished, ", o);
            put_num(o, num(r->summary, "steps"));
            fputs(" steps", o);
        } else {
            fputs("running or stopped", o);
            if (isfinite(last)) fputs(" at step ", o), put_num(o, last);
            if (steps && steps->value.type == TT_TOML_INT) fprintf(o, " of %lld", (long long)steps->value.i);
        }
        fprintf(o, "</td><td class=\"n\">%d train, %d validation</td><td class=\"n\">", t->n, v->n);
        put_num(o, t->n ? t->v[T_LOSS][t->n - 1] : NAN);
        fputs("</td><td class=\"n\">", o);
        put_num(o, v->n ? v->v[V_LOSS][v->n - 1] : NAN);
        fputs("</td><td class=\"n\">", o);
        put_num(o, r->floor_nats);
        fputs("</td><td><code>", o);
        esc(o, r->dir);
        fputs("</code>", o);
        /* what the run trained, from its plan and config (a description key may be the default job's) */
        const cJSON *pm = r->plan ? cJSON_GetObjectItemCaseSensitive(r->plan, "model") : NULL;
        const cJSON *arch = cJSON_GetObjectItemCaseSensitive(pm, "arch");
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(pm, "flavor");
        const int hf = !cJSON_IsString(src);
        if (hf) src = cJSON_GetObjectItemCaseSensitive(pm, "hf_assets_path");
        const tt_toml_entry *ds = r->config ? tt_toml_get(r->config, "training.dataset") : NULL;
        if (cJSON_IsString(arch) && cJSON_IsString(src)) {
            fputs("<br>", o);
            tt_html_escape(o, arch->valuestring, 40);
            fputs(hf ? " from " : " ", o);
            tt_html_escape(o, src->valuestring, 300);
        }
        if (ds && ds->value.type == TT_TOML_STRING && ds->value.str[0]) {
            fputs(strcmp(ds->value.str, "synthetic") ? "<br>data: " : "<br>data: the built-in corpus", o);
            if (strcmp(ds->value.str, "synthetic")) tt_html_escape(o, ds->value.str, 300);
        }
        fputs("</td></tr>\n", o);
    }
    fputs("</table>\n", o);
    int any = 0;
    for (int i = 0; i < n; i++) any |= runs[i].n_notes > 0;
    if (!any) return;
    fputs("<h3>What could not be read</h3>\n<ul class=\"notes\">\n", o);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < runs[i].n_notes; k++) {
            fputs("<li>", o);
            swatch(o, &runs[i]);
            esc(o, runs[i].label);
            fputs(": ", o);
            esc(o, runs[i].notes[k]);
            fputs("</li>\n", o);
        }
    fputs("</ul>\n", o);
}

/* One curve per run (and kind) of a column; y is scaled by `scale`. */
typedef struct {
    const char *id, *title, *y_title;
    int col;           /* T_* of the train table */
    int col2;          /* a second curve of the train table (dashed), or -1 */
    const char *name1, *name2;
    double scale;
    int log_auto, y_zero;
} plot_def;

static void plot(FILE *o, report_run *runs, int n, const plot_def *d, double **scratch)
{
    tt_svg_series s[2 * MAX_RUNS];
    tt_svg_hline h[MAX_RUNS];
    char labels[3 * MAX_RUNS][140]; /* the curves', then the floors' */
    int ns = 0, nh = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        report_run *r = &runs[i];
        for (int k = 0; k < 2; k++) {
            int col = k ? d->col2 : d->col;
            const char *what = k ? d->name2 : d->name1;
            const table *t = &r->train;
            if (col < 0) continue;
            double *y = scratch[ns];
            int is_val = col == COL_VAL_LOSS;
            if (is_val) t = &r->val;
            for (int j = 0; j < t->n; j++) {
                y[j] = (is_val ? t->v[V_LOSS][j] : t->v[col][j]) * d->scale;
                if (isfinite(y[j]) && y[j] > 0) lo = fmin(lo, y[j]), hi = fmax(hi, y[j]);
            }
            if (n == 1) snprintf(labels[ns], sizeof labels[0], "%s", what);
            else if (d->col2 < 0) snprintf(labels[ns], sizeof labels[0], "%s", r->label);
            else snprintf(labels[ns], sizeof labels[0], "%s %s", r->label, what);
            s[ns] = (tt_svg_series){labels[ns], r->color, t->v[0], y, t->n, k, is_val || t->n <= 40, i,
                                    is_val ? "val_loss" : train_keys[col]};
            ns++;
        }
        if (!strcmp(d->id, "loss") && isfinite(r->floor_nats)) {
            snprintf(labels[2 * MAX_RUNS + nh], sizeof labels[0], "corpus floor %.4f", r->floor_nats);
            h[nh] = (tt_svg_hline){r->floor_nats, labels[2 * MAX_RUNS + nh], r->color, i};
            lo = fmin(lo, r->floor_nats);
            nh++;
        }
    }
    tt_svg_plot p = {d->id, d->title, "step", d->y_title, PLOT_W, PLOT_H, d->log_auto && lo > 0 && hi / lo >= 8,
                     d->y_zero, s, ns, h, nh};
    tt_svg_plot_write(o, &p);
}

static void page_plots(FILE *o, report_run *runs, int n)
{
    int most = 1;
    for (int i = 0; i < n; i++) most = runs[i].train.n > most ? runs[i].train.n : most;
    for (int i = 0; i < n; i++) most = runs[i].val.n > most ? runs[i].val.n : most;
    double *scratch[2 * MAX_RUNS];
    for (int k = 0; k < 2 * n; k++)
        if (!(scratch[k] = malloc((size_t)most * sizeof(double)))) {
            for (int j = 0; j < k; j++) free(scratch[j]);
            fputs("<p class=\"none\">out of memory drawing the plots</p>\n", o);
            return;
        }
    const double gib = 1.0 / (1024.0 * 1024.0 * 1024.0);
    const plot_def defs[] = {
        {"loss", "Loss", "loss (nats/token)", T_LOSS, COL_VAL_LOSS, "train", "validation", 1, 1, 0},
        {"lr", "Learning rate", "learning rate", T_LR, -1, "lr", NULL, 1, 0, 1},
        {"grad_norm", "Gradient norm", "gradient norm (L2, before clipping)", T_GNORM, -1, "grad norm", NULL, 1, 1, 0},
        {"tokens_per_sec", "Throughput", "tokens/s", T_TPS, -1, "tokens/s", NULL, 1, 0, 1},
        {"mfu", "MFU", "MFU (% of peak)", T_MFU, -1, "MFU", NULL, 1, 0, 1},
        {"memory", "Memory", "memory (GiB)", T_RSS, T_ARENA, "peak RSS", "activation arena", gib, 0, 1},
    };
    fputs("<h2>Curves</h2>\n<div class=\"plots\">\n", o);
    for (size_t k = 0; k < sizeof defs / sizeof defs[0]; k++) plot(o, runs, n, &defs[k], scratch);
    fputs("</div>\n", o);
    for (int k = 0; k < 2 * n; k++) free(scratch[k]);
}

static void page_summary(FILE *o, report_run *runs, int n)
{
    fputs("<h2>Summary</h2>\n", o);
    int any = 0;
    for (int i = 0; i < n; i++) any |= runs[i].summary != NULL;
    if (!any) {
        fputs("<p class=\"none\">No summary.json: a run writes it when it has trained all its steps.</p>\n", o);
        return;
    }
    fputs("<table class=\"summary\"><tr><th></th>", o);
    for (int i = 0; i < n; i++) fputs("<th>", o), swatch(o, &runs[i]), esc(o, runs[i].label), fputs("</th>", o);
    fputs("</tr>\n", o);
    /* the union of the keys, in the order the runs list them */
    for (int i = 0; i < n; i++) {
        const cJSON *k;
        cJSON_ArrayForEach(k, runs[i].summary)
        {
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = cJSON_GetObjectItemCaseSensitive(runs[j].summary, k->string) != NULL;
            if (seen || !k->string) continue;
            fputs("<tr><td>", o);
            esc(o, k->string);
            fputs("</td>", o);
            for (int j = 0; j < n; j++) {
                fputs("<td class=\"n\">", o);
                put_json(o, cJSON_GetObjectItemCaseSensitive(runs[j].summary, k->string));
                fputs("</td>", o);
            }
            fputs("</tr>\n", o);
        }
    }
    fputs("</table>\n", o);
}

static void cell_num(FILE *o, const cJSON *plan, const char *path)
{
    fputs("<td class=\"n\">", o);
    put_num(o, num_at(plan, path));
    fputs("</td>", o);
}

static void cell_bytes(FILE *o, const cJSON *plan, const char *path)
{
    fputs("<td class=\"n\">", o);
    put_bytes(o, num_at(plan, path));
    fputs("</td>", o);
}

static void page_plan(FILE *o, report_run *runs, int n)
{
    fputs("<h2>Model plan</h2>\n", o);
    int any = 0;
    for (int i = 0; i < n; i++) any |= runs[i].plan != NULL;
    if (!any) {
        fputs("<p class=\"none\">No plan.json (a training run writes it when it starts).</p>\n", o);
        return;
    }
    fputs("<table class=\"plan\"><tr><th></th>", o);
    for (int i = 0; i < n; i++) fputs("<th>", o), swatch(o, &runs[i]), esc(o, runs[i].label), fputs("</th>", o);
    fputs("</tr>\n<tr><td>model</td>", o);
    for (int i = 0; i < n; i++) {
        const cJSON *p = runs[i].plan;
        const char *src = str_at(p, "model.flavor") ? str_at(p, "model.flavor") : str_at(p, "model.hf_assets_path");
        fputs("<td>", o);
        if (p) {
            tt_html_escape(o, str_at(p, "model.arch") ? str_at(p, "model.arch") : "?", 64);
            fputs(" ", o);
            tt_html_escape(o, src ? src : "", 300);
            fputs(": dim ", o), put_num(o, num_at(p, "model.dim"));
            fputs(", ", o), put_num(o, num_at(p, "model.n_layers")), fputs(" layers, ", o);
            put_num(o, num_at(p, "model.n_heads")), fputs(" heads (", o), put_num(o, num_at(p, "model.n_kv_heads"));
            fputs(" kv), ffn ", o), put_num(o, num_at(p, "model.ffn_dim")), fputs(", vocab ", o);
            put_num(o, num_at(p, "model.vocab_size"));
        } else {
            fputs("<span class=\"none\">no plan.json</span>", o);
        }
        fputs("</td>", o);
    }
    static const struct { const char *label, *path; int bytes; } rows[] = {
        {"parameters", "params", 0},
        {"parameters in matmuls", "matmul_params", 0},
        {"FLOPs per token (6&middot;N + 12&middot;L&middot;d&middot;T)", "flops_per_token", 0},
        {"local batch (sequences)", "local_batch_size", 0},
        {"sequence length (tokens)", "seq_len", 0},
        {"gradient accumulation steps", "accumulation_steps", 0},
        {"threads", "threads", 0},
        {"peak (GFLOP/s)", "peak.gflops", 0},
        {"memory: parameters (fp32)", "memory_bytes.params", 1},
        {"memory: the parameters' bf16 copy", "memory_bytes.params_bf16", 1},
        {"memory: gradients", "memory_bytes.grads", 1},
        {"memory: AdamW moments", "memory_bytes.optimizer", 1},
        {"memory: activations, checkpointing none", "activation_checkpoint.none.activation_bytes", 1},
        {"memory: activations, checkpointing selective", "activation_checkpoint.selective.activation_bytes", 1},
        {"memory: activations, checkpointing full", "activation_checkpoint.full.activation_bytes", 1},
        {"memory: total, configured checkpointing", "memory_bytes.total", 1},
        {"corpus floor (nats/token)", "corpus.floor_nats", 0},
        {"corpus unigram entropy (nats/token)", "corpus.unigram_nats", 0},
    };
    static const struct { const char *label, *path; } texts[] = {
        {"compute dtype", "compute_dtype"},
        {"activation checkpointing", "activation_checkpoint.mode"},
        {"backend", "backend"},
        {"exec mode", "exec_mode"},
        {"OpenMP waits", "openmp_waits"},
        {"peak dtype", "peak.dtype"},
        {"peak source", "peak.source"},
    };
    fputs("</tr>\n", o);
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        fprintf(o, "<tr><td>%s</td>", rows[k].label);
        for (int i = 0; i < n; i++) (rows[k].bytes ? cell_bytes : cell_num)(o, runs[i].plan, rows[k].path);
        fputs("</tr>\n", o);
    }
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        fprintf(o, "<tr><td>%s</td>", texts[k].label);
        for (int i = 0; i < n; i++) {
            const char *s = str_at(runs[i].plan, texts[k].path);
            fputs("<td>", o);
            if (s) tt_html_escape(o, s, 200);
            else fputs("&mdash;", o);
            fputs("</td>", o);
        }
        fputs("</tr>\n", o);
    }
    fputs("</table>\n", o);
}

static void page_profile(FILE *o, report_run *runs, int n)
{
    fputs("<h2>Per-op profile</h2>\n", o);
    for (int i = 0; i < n; i++) {
        report_run *r = &runs[i];
        fputs("<h3>", o);
        swatch(o, r);
        esc(o, r->label);
        fputs("</h3>\n", o);
        if (!r->trace_path[0] || !r->ops) {
            fputs("<p class=\"none\">None recorded (no profile_traces/iteration_&lt;step&gt;/rank0_trace.json in the "
                  "run's folder; set profiling.enable_profiling).</p>\n", o);
            continue;
        }
        fputs("<p class=\"sub\">Step ", o);
        put_num(o, (double)r->trace_step);
        fprintf(o, ": %ld events, %.2f ms in ops; from <code>", r->trace_events, r->trace_us / 1e3);
        esc(o, r->trace_path);
        fputs("</code></p>\n<table class=\"profile\"><tr><th>op</th><th>ms</th><th>share</th><th>calls</th>"
              "<th>GFLOP/s</th></tr>\n", o);
        for (int k = 0; k < r->n_ops; k++) {
            const op_agg *a = &r->ops[k];
            double share = r->trace_us > 0 ? a->us / r->trace_us : 0;
            fputs("<tr><td>", o);
            esc(o, a->name);
            fprintf(o, "</td><td class=\"n\">%.3f</td><td><span class=\"bar\" style=\"width:%.0fpx\"></span>%.1f%%</td>"
                       "<td class=\"n\">%ld</td><td class=\"n\">",
                    a->us / 1e3, 160 * share, 100 * share, a->calls);
            put_num(o, a->us > 0 && a->gflop > 0 ? round(10 * a->gflop / (a->us * 1e-6)) / 10 : NAN);
            fputs("</td></tr>\n", o);
        }
        fputs("</table>\n", o);
    }
}

static void page_config(FILE *o, report_run *runs, int n)
{
    fputs("<h2>Config</h2>\n", o);
    int with_config = 0;
    for (int i = 0; i < n; i++) with_config += runs[i].config != NULL;
    if (with_config > 1) { /* the keys whose values differ between the runs that have a config */
        int rows = 0;
        for (int i = 0; i < n; i++) {
            if (!runs[i].config) continue;
            for (size_t e = 0; e < runs[i].config->n; e++) {
                const tt_toml_entry *en = &runs[i].config->entries[e];
                int seen = 0, differs = 0;
                for (int j = 0; j < i && !seen; j++) seen = runs[j].config && tt_toml_get(runs[j].config, en->key);
                if (seen) continue;
                for (int j = 0; j < n; j++) {
                    const tt_toml_entry *x = runs[j].config ? tt_toml_get(runs[j].config, en->key) : NULL;
                    differs |= runs[j].config && (!x || !toml_equal(&x->value, &en->value));
                }
                if (!differs) continue;
                if (!rows++) {
                    fputs("<p class=\"sub\">Keys that differ between the runs:</p>\n<table class=\"cfgdiff\"><tr>"
                          "<th>key</th>", o);
                    for (int j = 0; j < n; j++)
                        fputs("<th>", o), swatch(o, &runs[j]), esc(o, runs[j].label), fputs("</th>", o);
                    fputs("</tr>\n", o);
                }
                fputs("<tr class=\"diff\"><td>", o);
                esc(o, en->key);
                fputs("</td>", o);
                for (int j = 0; j < n; j++) {
                    const tt_toml_entry *x = runs[j].config ? tt_toml_get(runs[j].config, en->key) : NULL;
                    fputs("<td>", o);
                    if (x) put_toml(o, &x->value);
                    else fputs("&mdash;", o);
                    fputs("</td>", o);
                }
                fputs("</tr>\n", o);
            }
        }
        if (rows) fputs("</table>\n", o);
        else fputs("<p class=\"sub\">The runs' configs have the same values.</p>\n", o);
        if (with_config < n)
            fputs("<p class=\"sub\">(Runs without a config.toml are left out of the comparison.)</p>\n", o);
    }
    for (int i = 0; i < n; i++) {
        report_run *r = &runs[i];
        fprintf(o, "<details%s><summary>", n == 1 ? " open" : "");
        swatch(o, r);
        esc(o, r->label);
        fputs(": config.toml</summary>\n", o);
        if (r->config_text) {
            fputs("<pre class=\"cfg\">", o);
            esc(o, r->config_text);
            fputs("</pre>\n", o);
        } else {
            fputs("<p class=\"none\">No config.toml (a training run writes its resolved config when it starts)."
                  "</p>\n", o);
        }
        fputs("</details>\n", o);
    }
}

tt_err tt_report(const char *const *run_dirs, int n_runs, const char *out_path, FILE *log)
{
    if (n_runs < 1) return tt_errorf("report: give at least one run folder");
    if (n_runs > MAX_RUNS)
        return tt_errorf("report: %d run folders; at most %d fit one page (one colour each)", n_runs, MAX_RUNS);
    if (!out_path || !out_path[0]) return tt_errorf("report: no output path");
    report_run *runs = calloc((size_t)n_runs, sizeof *runs);
    if (!runs) return tt_errorf("report: out of memory");
    tt_err rc = 0;
    for (int i = 0; i < n_runs; i++) {
        runs[i].dir = run_dirs[i];
        runs[i].color = palette[i];
        runs[i].floor_nats = NAN;
    }
    for (int i = 0; i < n_runs && !rc; i++) rc = read_run(&runs[i], log);
    if (!rc) {
        make_labels(runs, n_runs);
        char *page = NULL;
        size_t len = 0;
        FILE *o = open_memstream(&page, &len);
        if (!o) {
            rc = tt_errorf("report: out of memory");
        } else {
            fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                  /* nothing may be fetched or run: the page is only what is in it */
                  "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                  "style-src 'unsafe-inline'\">\n<title>titan report: ", o);
            for (int i = 0; i < n_runs; i++) fputs(i ? ", " : "", o), esc(o, runs[i].label);
            fprintf(o, "</title>\n<style>%s</style>\n</head><body>\n<h1>titan report</h1>\n<p class=\"sub\">", css);
            for (int i = 0; i < n_runs; i++) fputs(i ? ", " : "", o), swatch(o, &runs[i]), esc(o, runs[i].label);
            fputs(" &middot; curves from metrics.jsonl, one point per logged step</p>\n", o);
            page_runs(o, runs, n_runs);
            page_plots(o, runs, n_runs);
            page_summary(o, runs, n_runs);
            page_plan(o, runs, n_runs);
            page_profile(o, runs, n_runs);
            page_config(o, runs, n_runs);
            fputs("</body></html>\n", o);
            if (fclose(o) != 0 || !page) rc = tt_errorf("report: out of memory");
            else rc = tt_write_file_atomic(out_path, page, len);
            free(page);
            if (rc) tt_error_prefix("report: ");
            else if (log) fprintf(log, "report of %d run%s written to %s (%zu bytes)\n", n_runs, n_runs == 1 ? "" : "s",
                                  out_path, len);
        }
    }
    for (int i = 0; i < n_runs; i++) free_run(&runs[i]);
    free(runs);
    return rc;
}

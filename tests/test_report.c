/* test_report.c — `titan report` (tt_report) and what a run writes for it:
 * config.toml and plan.json from a real short training run match the config
 * and `titan plan`'s numbers; the page's SVG plots are parsed back (plot box,
 * axes with ticks, a legend entry per run and curve, exactly one polyline
 * vertex per logged step, inside the box, mapping back to the logged value,
 * the floor line); malformed and missing inputs are refused or skipped with a
 * message; text from the files is escaped. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report_fixture.h"
#include "titan/titan.h"
#include "train/model_plan.h"

/* ---- reading the page back ------------------------------------------------------ */

/* The text of one <svg class="plot" data-plot="id"> ... </svg>, NUL-terminated
 * (malloc'd), or NULL. */
static char *plot_svg(const char *html, const char *id)
{
    char head[128];
    snprintf(head, sizeof head, "<svg class=\"plot\" data-plot=\"%s\"", id);
    const char *a = strstr(html, head), *b = a ? strstr(a, "</svg>") : NULL;
    if (!b) return NULL;
    size_t n = (size_t)(b - a) + 6;
    char *s = th_alloc(n + 1, 1);
    memcpy(s, a, n);
    return s;
}

/* An attribute of the tag that starts at tag (up to its '>'); "" when absent. */
static const char *attr(const char *tag, const char *name, char *out, size_t n)
{
    char key[64];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *end = strchr(tag, '>'), *p = strstr(tag, key);
    out[0] = 0;
    if (!p || (end && p > end)) return out;
    p += strlen(key);
    const char *q = strchr(p, '"');
    if (!q) return out;
    size_t len = (size_t)(q - p) < n - 1 ? (size_t)(q - p) : n - 1;
    memcpy(out, p, len);
    out[len] = 0;
    return out;
}

static double attr_num(const char *tag, const char *name)
{
    char v[64];
    attr(tag, name, v, sizeof v);
    return v[0] ? strtod(v, NULL) : NAN;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

typedef struct {
    double x, y, w, h, x0, x1, y0, y1;
    int log;
} box;

static box plot_box(const char *svg)
{
    box b = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, 0};
    const char *t = strstr(svg, "<rect class=\"plot-box\"");
    if (!t) return b;
    b = (box){attr_num(t, "x"), attr_num(t, "y"), attr_num(t, "width"), attr_num(t, "height"), attr_num(t, "data-x0"),
              attr_num(t, "data-x1"), attr_num(t, "data-y0"), attr_num(t, "data-y1"), (int)attr_num(t, "data-log-y")};
    return b;
}

/* pixel -> value on the box's axes */
static double value_x(const box *b, double px) { return b->x0 + (px - b->x) / b->w * (b->x1 - b->x0); }
static double value_y(const box *b, double py)
{
    double f = (b->y + b->h - py) / b->h;
    return b->log ? pow(10, log10(b->y0) + f * (log10(b->y1) - log10(b->y0))) : b->y0 + f * (b->y1 - b->y0);
}

/* The vertices of the polyline of (run, series) in px (at most cap); -1 when absent. */
static int curve(const char *svg, int run, const char *series, double *px, double *py, int cap)
{
    char want[96];
    snprintf(want, sizeof want, "<polyline class=\"series\" data-run=\"%d\" data-series=\"%s\"", run, series);
    const char *t = strstr(svg, want);
    if (!t) return -1;
    const char *p = strstr(t, " points=\"");
    if (!p) return -1;
    p += 9;
    int n = 0;
    while (*p && *p != '"') {
        char *e;
        double x = strtod(p, &e);
        if (*e != ',') return -2;
        double y = strtod(e + 1, &e);
        if (n < cap) px[n] = x, py[n] = y;
        n++;
        p = e;
        while (*p == ' ') p++;
    }
    return n;
}

static int legend_has(const char *svg, int run, const char *series)
{
    char want[96];
    snprintf(want, sizeof want, "class=\"legend-entry\" data-run=\"%d\" data-series=\"%s\"", run, series);
    return strstr(svg, want) != NULL;
}

/* Both axes with at least two numbered ticks and a title. */
static void check_axes(const char *svg, const char *id)
{
    const char *x = strstr(svg, "<g class=\"axis x-axis\""), *y = strstr(svg, "<g class=\"axis y-axis\"");
    CHECK_MSG(x && y, "%s: axes missing", id);
    if (!x || !y) return;
    char *xs = th_alloc((size_t)(y - x) + 1, 1);
    memcpy(xs, x, (size_t)(y - x));
    int xt = count(xs, "class=\"tick-label\""), yt = count(y, "class=\"tick-label\"");
    CHECK_MSG(xt >= 2 && yt >= 2, "%s: %d x ticks, %d y ticks", id, xt, yt);
    CHECK_MSG(count(xs, "class=\"tick\"") == xt, "%s: x tick marks and labels differ", id);
    CHECK_MSG(strstr(xs, "class=\"axis-title x-title\"") && strstr(y, "class=\"axis-title y-title\""),
              "%s: axis titles missing", id);
    const char *lab = strstr(xs, "class=\"tick-label\"");
    const char *txt = lab ? strchr(lab, '>') : NULL;
    CHECK_MSG(txt && ((txt[1] >= '0' && txt[1] <= '9') || txt[1] == '-'), "%s: x tick label is not a number", id);
    free(xs);
}

/* A curve has exactly one vertex per logged value (the finite ones), each
 * inside the plot box, at the step and value logged. */
static void check_curve(const char *svg, const char *id, int run, const char *series, const double *xs,
                        const double *ys, int n, double y_scale)
{
    double px[256], py[256];
    int want = 0;
    for (int i = 0; i < n; i++) want += isfinite(ys[i]);
    int got = curve(svg, run, series, px, py, 256);
    CHECK_MSG(got == want, "%s: run %d %s has %d points, want %d (one per logged step)", id, run, series, got, want);
    CHECK_MSG(legend_has(svg, run, series), "%s: no legend entry for run %d %s", id, run, series);
    box b = plot_box(svg);
    CHECK_MSG(isfinite(b.x) && b.w > 100 && b.h > 100, "%s: no plot box", id);
    for (int i = 0, j = 0; i < n && j < got && got == want; i++) {
        if (!isfinite(ys[i])) continue;
        int inside = px[j] >= b.x - 1e-6 && px[j] <= b.x + b.w + 1e-6 && py[j] >= b.y - 1e-6 &&
                     py[j] <= b.y + b.h + 1e-6;
        CHECK_MSG(inside, "%s: run %d %s point %d (%.2f, %.2f) outside the box (%.1f %.1f %.1f %.1f)", id, run, series,
                  j, px[j], py[j], b.x, b.y, b.w, b.h);
        double vx = value_x(&b, px[j]), vy = value_y(&b, py[j]), want_y = ys[i] * y_scale;
        CHECK_MSG(fabs(vx - xs[i]) <= 1e-3 * (b.x1 - b.x0), "%s: run %d %s point %d is at step %g, logged %g", id, run,
                  series, j, vx, xs[i]);
        CHECK_MSG(fabs(vy - want_y) <= 2e-3 * fabs(want_y) + 1e-4 * fabs(b.y1 - b.y0),
                  "%s: run %d %s point %d reads %g, logged %g", id, run, series, j, vy, want_y);
        j++;
    }
}

/* Whether some tick label's text has the character c. */
static int tick_label_has(const char *svg, char c)
{
    for (const char *p = strstr(svg, "class=\"tick-label\""); p; p = strstr(p + 1, "class=\"tick-label\"")) {
        const char *a = strchr(p, '>'), *b = a ? strchr(a, '<') : NULL;
        if (b && memchr(a, c, (size_t)(b - a))) return 1;
    }
    return 0;
}

static int has_curve(const char *svg, int run, const char *series)
{
    return curve(svg, run, series, NULL, NULL, 0) >= 0;
}

/* The floor line of a run, as the value it maps back to (NaN: none). */
static double floor_line(const char *svg, int run)
{
    char want[64];
    snprintf(want, sizeof want, "<line class=\"hline\" data-run=\"%d\"", run);
    const char *t = strstr(svg, want);
    if (!t) return NAN;
    box b = plot_box(svg);
    return value_y(&b, attr_num(t, "y1"));
}

/* A file's text (free() it); a CHECK that it could be read. */
static char *slurp(const char *path)
{
    char *s = th_read_file(path, NULL);
    CHECK_MSG(s != NULL, "%s: cannot read it", path);
    return s;
}

/* tt_report with its log captured; returns its status, the log in *log_text. */
static int report(const char *const *dirs, int n, const char *out, char **log_text)
{
    FILE *log = tmpfile();
    int rc = tt_report(dirs, n, out, log);
    long len = log ? ftell(log) : 0;
    *log_text = th_alloc((size_t)len + 1, 1);
    if (log) {
        rewind(log);
        size_t got = fread(*log_text, 1, (size_t)len, log);
        (*log_text)[got] = 0;
        fclose(log);
    }
    return rc;
}

/* ---- a real run -------------------------------------------------------------------- */

static const char *jstr(const cJSON *o, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    return s ? s : "";
}

static int set(tt_config *c, const char *key, const char *value)
{
    int rc = tt_config_set(c, key, value, "test");
    CHECK_MSG(rc == 0, "%s = %s: %s", key, value, tt_last_error());
    return rc;
}

static const char *const real_keys[][2] = {
    {"model.dim", "32"}, {"model.n_layers", "1"}, {"model.n_heads", "2"}, {"model.n_kv_heads", "2"},
    {"model.ffn_dim", "64"}, {"training.steps", "4"}, {"training.local_batch_size", "2"},
    {"training.seq_len", "256"}, {"synthetic.train_tokens", "20000"}, {"synthetic.val_tokens", "3000"},
    {"validation.enable", "true"}, {"validation.freq", "2"}, {"validation.steps", "2"},
    {"metrics.log_freq", "1"}, {"metrics.save_jsonl", "true"}, {"metrics.peak_tflops", "1"},
    {"checkpoint.enable", "false"}, {"generate.max_new_tokens", "0"},
    {"activation_checkpoint.mode", "selective"}, {"job.description", "real <run>"},
};

/* Train 4 steps; check config.toml reads back to the run's config and plan.json
 * holds the plan titan plan prints (tt_model_plan_build) and the run's figures. */
static int real_run(const char *dir)
{
    tt_config *c = th_alloc(1, sizeof *c), *back = th_alloc(1, sizeof *back);
    tt_config_defaults(c);
    int rc = set(c, "job.dump_folder", dir);
    for (size_t i = 0; i < sizeof real_keys / sizeof real_keys[0]; i++) rc |= set(c, real_keys[i][0], real_keys[i][1]);
    rc |= tt_config_finalize(c);
    CHECK_MSG(rc == 0, "config: %s", tt_last_error());
    if (!rc) {
        rc = tt_train(c);
        CHECK_MSG(rc == 0, "training: %s", tt_last_error());
    }
    char path[4200];
    if (!rc) { /* config.toml: the resolved config, which --config reads back to the same values */
        snprintf(path, sizeof path, "%s/config.toml", dir);
        tt_config_defaults(back);
        int lr = tt_config_load_file(back, path);
        CHECK_MSG(lr == 0, "%s: %s", path, tt_last_error());
        if (!lr) lr = tt_config_finalize(back);
        CHECK_MSG(lr == 0 && memcmp(c, back, offsetof(tt_config, set_by_user_)) == 0,
                  "config.toml does not read back to the run's config");
    }
    if (!rc) { /* plan.json: the plan's numbers and the run's */
        snprintf(path, sizeof path, "%s/plan.json", dir);
        char *text = slurp(path), *sum = NULL;
        snprintf(path, sizeof path, "%s/summary.json", dir);
        sum = slurp(path);
        cJSON *p = text ? cJSON_Parse(text) : NULL, *s = sum ? cJSON_Parse(sum) : NULL;
        tt_model_plan want;
        int pr = tt_model_plan_build(c, &want);
        CHECK_MSG(pr == 0, "plan: %s", tt_last_error());
        CHECK_MSG(cJSON_IsObject(p) && cJSON_IsObject(s), "plan.json or summary.json does not parse");
        if (cJSON_IsObject(p) && cJSON_IsObject(s) && !pr) {
            double params = cJSON_GetNumberValue(cJSON_GetObjectItem(p, "params"));
            CHECK_MSG(params == (double)want.params && params == cJSON_GetNumberValue(cJSON_GetObjectItem(s, "params")),
                      "plan.json params %g, plan %lld, summary %g", params, (long long)want.params,
                      cJSON_GetNumberValue(cJSON_GetObjectItem(s, "params")));
            double fpt = cJSON_GetNumberValue(cJSON_GetObjectItem(p, "flops_per_token"));
            CHECK(fpt == want.flops_per_token &&
                  fpt == cJSON_GetNumberValue(cJSON_GetObjectItem(s, "flops_per_token")));
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(p, "matmul_params")) == (double)want.matmul_params);
            cJSON *ac = cJSON_GetObjectItem(p, "activation_checkpoint");
            CHECK(!strcmp(jstr(ac, "mode"), "selective"));
            static const char *modes[3] = {"none", "selective", "full"};
            for (int k = 0; k < 3; k++)
                CHECK_MSG(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(ac, modes[k]),
                                                                   "activation_bytes")) == (double)want.modes[k].arena,
                          "plan.json %s arena", modes[k]);
            cJSON *mem = cJSON_GetObjectItem(p, "memory_bytes");
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "params")) == 4.0 * (double)want.params);
            /* a bf16 run keeps its weights' bf16 copy too */
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "params_bf16")) == want.w16_bytes &&
                  want.w16_bytes == (want.dtype == TT_BF16 ? 2.0 * (double)want.params : 0.0));
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "optimizer")) == 8.0 * (double)want.params);
            CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(mem, "activations")) ==
                  (double)want.modes[TT_AC_SELECTIVE].arena);
            cJSON *pk = cJSON_GetObjectItem(p, "peak");
            CHECK_MSG(cJSON_GetNumberValue(cJSON_GetObjectItem(pk, "gflops")) == 1000 &&
                          !strcmp(jstr(pk, "source"), "config"),
                      "plan.json peak: metrics.peak_tflops 1 is 1000 GFLOP/s from the config");
            CHECK(!strcmp(jstr(p, "backend"), "cpu"));
            CHECK(cJSON_GetStringValue(cJSON_GetObjectItem(p, "compute_dtype")) != NULL);
            double floor_p = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "corpus"), "floor_nats"));
            CHECK_MSG(floor_p > 0 && floor_p == cJSON_GetNumberValue(cJSON_GetObjectItem(s, "floor_nats")),
                      "plan.json floor %g vs summary's", floor_p);
        }
        cJSON_Delete(p);
        cJSON_Delete(s);
        free(text);
        free(sum);
    }
    free(c);
    free(back);
    return rc;
}

/* The real run's logged values, read from its metrics.jsonl. */
static int real_values(const char *dir, double *step, double *loss, double *vstep, double *vloss, int *nv)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *text = slurp(path), *save = NULL;
    int n = 0;
    *nv = 0;
    for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        double s = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "step"));
        if (cJSON_GetObjectItem(o, "val_loss") && *nv < 16)
            vstep[*nv] = s, vloss[(*nv)++] = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "val_loss"));
        else if (n < 16)
            step[n] = s, loss[n++] = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "loss"));
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

/* ---- the page ------------------------------------------------------------------------ */

static void check_page(const char *tmp, const char *a, const char *b, const char *c)
{
    const char *dirs[3] = {a, b, c};
    char out[4200], *log = NULL;
    snprintf(out, sizeof out, "%s/report.html", tmp);
    int rc = report(dirs, 3, out, &log);
    CHECK_MSG(rc == 0, "report: %s", tt_last_error());
    printf("report log:\n%s", log);
    /* what was skipped, said on the log and on the page */
    CHECK_MSG(strstr(log, "2 lines are not a JSON object with a step (line 3, 5)"), "bad lines of run B not reported");
    CHECK_MSG(strstr(log, "last line is incomplete"), "the half-written line of run B not reported");
    CHECK_MSG(strstr(log, "2 events without a name"), "the trace's bad events not reported");
    char *html = rc ? NULL : slurp(out);
    if (!html) {
        free(log);
        return;
    }
    CHECK_MSG(strstr(html, "2 lines are not a JSON object with a step"), "the page does not list the bad lines");

    /* nothing runs and nothing is fetched; text from the files is escaped */
    CHECK_MSG(!strstr(html, "<script") && !strstr(html, "<SCRIPT"), "the page has a script");
    CHECK_MSG(!strstr(html, "src=\"http") && !strstr(html, "href=\"http") && !strstr(html, "url("),
              "the page refers to something outside it");
    CHECK_MSG(strstr(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; \\&quot;quotes\\&quot;") ||
                  strstr(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;"),
              "the config's description is not escaped");
    CHECK_MSG(strstr(html, "&lt;b&gt;bold&lt;/b&gt;") && !strstr(html, "<b>bold"),
              "summary.json's extra is not escaped");
    CHECK_MSG(strstr(html, "&lt;attention&gt;") && !strstr(html, "<attention>"), "an op name is not escaped");
    CHECK_MSG(strstr(html, "run &lt;b&gt; &amp; &quot;q&quot;"), "run B's folder name is not escaped");

    /* loss: train and validation curves per run, the floors */
    char *svg = plot_svg(html, "loss");
    CHECK_MSG(svg != NULL, "no loss plot");
    if (svg) {
        check_axes(svg, "loss");
        check_curve(svg, "loss", 0, "loss", ra_step, ra_loss, RA_N, 1);
        check_curve(svg, "loss", 0, "val_loss", ra_vstep, ra_vloss, RA_NV, 1);
        double bstep[RB_N] = {1, 2, 3, 4, 5};
        check_curve(svg, "loss", 1, "loss", bstep, rb_loss, RB_N, 1);
        CHECK_MSG(!has_curve(svg, 1, "val_loss") && !legend_has(svg, 1, "val_loss"),
                  "run B has no validation: no curve, no legend entry");
        double st[16], lo[16], vs[16], vl[16];
        int nv, nt = real_values(c, st, lo, vs, vl, &nv);
        CHECK_MSG(nt == 4 && nv == 2, "the real run logged %d steps and %d validations", nt, nv);
        check_curve(svg, "loss", 2, "loss", st, lo, nt, 1);
        check_curve(svg, "loss", 2, "val_loss", vs, vl, nv, 1);
        CHECK_MSG(fabs(floor_line(svg, 0) - RA_FLOOR) < 1e-3, "run A's floor line reads %g", floor_line(svg, 0));
        CHECK_MSG(isnan(floor_line(svg, 1)), "run B has no floor, yet a floor line");
        CHECK_MSG(floor_line(svg, 2) > 0, "the real run's floor line is missing");
        CHECK_MSG(plot_box(svg).log == 1, "loss from 6 down to a floor of 0.5 is drawn on a log axis");
        CHECK_MSG(count(svg, "class=\"legend-entry\"") == 5, "loss legend: %d entries, want 5",
                  count(svg, "class=\"legend-entry\""));
        free(svg);
    }
    /* the other plots: run A's values; run B logged only the loss */
    static const struct { const char *id, *series; const double *y; double scale; } plots[] = {
        {"lr", "lr", ra_lr, 1},
        {"grad_norm", "grad_norm", ra_gnorm, 1},
        {"tokens_per_sec", "tokens_per_sec", ra_tps, 1},
        {"mfu", "mfu", ra_mfu, 1},
    };
    for (size_t k = 0; k < sizeof plots / sizeof plots[0]; k++) {
        svg = plot_svg(html, plots[k].id);
        CHECK_MSG(svg != NULL, "no %s plot", plots[k].id);
        if (!svg) continue;
        if (!strcmp(plots[k].id, "lr")) /* 1e-4 .. 3e-3: one power of ten in the title, not 0.010 beside 8e-3 */
            CHECK_MSG(strstr(svg, "learning rate (\u00d710\u207b\u00b3)") && !tick_label_has(svg, 'e'),
                      "lr tick labels do not share the power of ten");
        if (!strcmp(plots[k].id, "tokens_per_sec")) /* 50,000 reads 50k */
            CHECK_MSG(tick_label_has(svg, 'k'), "tokens/s tick labels are not short");
        check_axes(svg, plots[k].id);
        check_curve(svg, plots[k].id, 0, plots[k].series, ra_step, plots[k].y, RA_N, plots[k].scale);
        CHECK_MSG(!has_curve(svg, 1, plots[k].series) && !legend_has(svg, 1, plots[k].series),
                  "%s: run B logged none", plots[k].id);
        CHECK_MSG(has_curve(svg, 2, plots[k].series) && legend_has(svg, 2, plots[k].series), "%s: real run missing",
                  plots[k].id);
        free(svg);
    }
    svg = plot_svg(html, "memory");
    CHECK_MSG(svg != NULL, "no memory plot");
    if (svg) {
        double rss[RA_N], arena[RA_N];
        for (int i = 0; i < RA_N; i++) rss[i] = RA_RSS, arena[i] = RA_ARENA;
        check_axes(svg, "memory");
        check_curve(svg, "memory", 0, "peak_rss_bytes", ra_step, rss, RA_N, 1.0 / 1073741824.0);
        check_curve(svg, "memory", 0, "arena_bytes", ra_step, arena, RA_N, 1.0 / 1073741824.0);
        free(svg);
    }
    /* the tables */
    CHECK_MSG(strstr(html, "1,234,567"), "run A's parameter count (summary, plan) is not on the page");
    CHECK_MSG(strstr(html, "memory: activations, checkpointing full"), "the plan's memory rows are missing");
    CHECK_MSG(strstr(html, "<td>matmul</td><td class=\"n\">4.000</td>"), "the profile's matmul row (4 ms) is missing");
    CHECK_MSG(strstr(html, "<td class=\"n\">2,000</td>"), "matmul: 8 GFLOP in 4 ms is 2,000 GFLOP/s");
    CHECK_MSG(!strstr(html, "stale_op"), "the older profile (iteration_5) is shown instead of the newest");
    CHECK_MSG(strstr(html, "None recorded"), "runs without a profile do not say so");
    CHECK_MSG(strstr(html, "running or stopped at step 5"), "run B's status");
    CHECK_MSG(strstr(html, "finished, 60 steps"), "run A's status");
    CHECK_MSG(strstr(html, "Keys that differ between the runs") && strstr(html, "<td>training.steps</td>"),
              "the config table of differing keys");
    free(html);
    free(log);
}

/* Bad input: refused with a message, or skipped and said so. */
static void check_bad_input(const char *tmp, const char *a)
{
    char p[4200], q[4200], out[4200], *log = NULL;
    snprintf(out, sizeof out, "%s/bad.html", tmp);
    const char *dirs[12];

    snprintf(p, sizeof p, "%s/no-such-run", tmp);
    dirs[0] = p;
    CHECK_MSG(report(dirs, 1, out, &log) != 0 && strstr(tt_last_error(), "no-such-run") &&
                  strstr(tt_last_error(), "No such file"),
              "a missing folder: %s", tt_last_error());
    free(log);

    snprintf(p, sizeof p, "%s/empty", tmp);
    rf_mkdir(p);
    CHECK_MSG(report(dirs, 1, out, &log) != 0 && strstr(tt_last_error(), "not a run's dump folder"),
              "an empty folder: %s", tt_last_error());
    free(log);

    snprintf(p, sizeof p, "%s/empty/file", tmp);
    rf_write(tmp, "empty/file", "x");
    CHECK_MSG(report(dirs, 1, out, &log) != 0 && strstr(tt_last_error(), "not a folder"), "a file: %s",
              tt_last_error());
    free(log);

    for (int i = 0; i < 11; i++) dirs[i] = a;
    CHECK_MSG(report(dirs, 11, out, &log) != 0 && strstr(tt_last_error(), "at most 10"), "11 runs: %s",
              tt_last_error());
    free(log);
    CHECK_MSG(report(dirs, 0, out, &log) != 0, "no runs");
    free(log);

    snprintf(q, sizeof q, "%s/no-such-folder/r.html", tmp);
    CHECK_MSG(report(dirs, 1, q, &log) != 0 && strstr(tt_last_error(), "no-such-folder"), "unwritable output: %s",
              tt_last_error());
    free(log);

    /* broken files are skipped with a message; the page is still written */
    snprintf(p, sizeof p, "%s/broken", tmp);
    rf_mkdir(p);
    rf_write(p, "summary.json", "[1, 2]");
    rf_write(p, "plan.json", "{\"params\": ");
    rf_write(p, "config.toml", "this is = = not toml\n");
    snprintf(q, sizeof q, "%s/broken/profile_traces", tmp);
    rf_mkdir(q);
    snprintf(q, sizeof q, "%s/broken/profile_traces/iteration_3", tmp);
    rf_mkdir(q);
    rf_write(q, "rank0_trace.json", "{\"traceEvents\": 7}");
    /* a metrics.jsonl past the size limit: a sparse file, nothing read */
    snprintf(q, sizeof q, "%s/broken/metrics.jsonl", tmp);
    int fd = open(q, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)(256u << 20) + 1) == 0);
    if (fd >= 0) close(fd);
    dirs[0] = p;
    int rc = report(dirs, 1, out, &log);
    CHECK_MSG(rc == 0, "a run with broken files: %s", tt_last_error());
    CHECK_MSG(strstr(log, "metrics.jsonl skipped") && strstr(log, "limit"), "oversized metrics.jsonl: %s", log);
    CHECK_MSG(strstr(log, "summary.json skipped: not a JSON object"), "summary.json array: %s", log);
    CHECK_MSG(strstr(log, "plan.json skipped: not valid JSON"), "plan.json: %s", log);
    CHECK_MSG(strstr(log, "config.toml is not TOML"), "config.toml: %s", log);
    CHECK_MSG(strstr(log, "no traceEvents array"), "trace: %s", log);
    char *html = rc ? NULL : slurp(out);
    if (html) {
        CHECK_MSG(strstr(html, "this is = = not toml"), "the unparsable config is shown as text");
        char *svg = plot_svg(html, "loss");
        CHECK_MSG(svg && strstr(svg, "nothing logged") && !strstr(svg, "<polyline"), "an empty plot says so");
        free(svg);
    }
    free(html);
    free(log);
}

int main(void)
{
    char tmp[] = "/tmp/titan_report_XXXXXX";
    if (!mkdtemp(tmp)) return th_skip("test_report", "no temporary folder");
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, "%s/run-a", tmp);
    snprintf(b, sizeof b, "%s/run <b> & \"q\"", tmp);
    snprintf(c, sizeof c, "%s/run-real", tmp);
    int rc = rf_run_a(a) | rf_run_b(b);
    if (!rc && !real_run(c)) check_page(tmp, a, b, c);
    check_bad_input(tmp, a);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (th_failed == 0 && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return th_done("test_report");
}

/* test_profiling.c — profiling.enable_profiling: a short run with gradient
 * accumulation writes a Chrome trace at steps profile_freq, 2 * profile_freq,
 * ... and no others, each one event per node of every micro-step's graph run
 * and of the optimizer's, in execution order; `titan report` shows the newest
 * one's per-op table; an absolute save_traces_folder is used as given; one
 * that cannot be written to stops no run; a run without profiling writes
 * none. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "harness.h"
#include "train/run_open.h"

static int set(tt_config *c, const char *key, const char *value)
{
    int rc = tt_config_set(c, key, value, "test");
    CHECK_MSG(rc == 0, "%s = %s: %s", key, value, tt_last_error());
    return rc;
}

/* A tiny model, 2 micro-batches a step; profiling as given (folder NULL = the default). */
static tt_config *config(const char *dump, int steps, int profile_freq, const char *folder)
{
    tt_config *c = th_alloc(1, sizeof *c);
    char s[32];
    tt_config_defaults(c);
    int rc = set(c, "job.dump_folder", dump) | set(c, "metrics.peak_tflops", "1") | set(c, "model.dim", "32") |
             set(c, "model.n_layers", "2") | set(c, "model.n_heads", "2") | set(c, "model.n_kv_heads", "2") |
             set(c, "model.ffn_dim", "64") | set(c, "training.local_batch_size", "2") |
             set(c, "training.global_batch_size", "4") | set(c, "training.seq_len", "256") |
             set(c, "synthetic.train_tokens", "20000") | set(c, "synthetic.val_tokens", "2000") |
             set(c, "checkpoint.enable", "false") | set(c, "generate.max_new_tokens", "0");
    snprintf(s, sizeof s, "%d", steps);
    rc |= set(c, "training.steps", s);
    if (profile_freq > 0) {
        snprintf(s, sizeof s, "%d", profile_freq);
        rc |= set(c, "profiling.enable_profiling", "true") | set(c, "profiling.profile_freq", s);
    }
    if (folder) rc |= set(c, "profiling.save_traces_folder", folder);
    if (!rc) rc = tt_config_finalize(c);
    CHECK_MSG(rc == 0, "config: %s", tt_last_error());
    return c;
}

/* The iteration_<step> folders under dir, as a bit set of steps < 64; -1 when dir cannot be read. */
static long long iterations(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    long long bits = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int step;
        char tail;
        if (sscanf(de->d_name, "iteration_%d%c", &step, &tail) == 1 && step >= 0 && step < 64) bits |= 1LL << step;
        else if (de->d_name[0] != '.') bits |= 1LL << 63; /* anything else is a failure too */
    }
    closedir(d);
    return bits;
}

/* One trace: valid JSON, one "X" event per node of the train graph for each of the `accum` micro-steps, then
 * one per node of the optimizer graph, named by their ops, in order. */
static void check_trace(const char *path, const tt_graph *train, const tt_graph *optim, int accum)
{
    size_t len;
    char *text = tt_read_file(path, 64u << 20, &len);
    CHECK_MSG(text != NULL, "%s", tt_last_error());
    cJSON *root = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK_MSG(cJSON_IsArray(ev), "%s: no traceEvents array", path);
    const int want = accum * train->n_nodes + optim->n_nodes;
    CHECK_MSG(cJSON_GetArraySize(ev) == want, "%s: %d events, the step graphs have %d nodes", path,
              cJSON_GetArraySize(ev), want);
    int k = 0, bad = 0;
    double last_ts = -1;
    const cJSON *x;
    cJSON_ArrayForEach(x, ev)
    {
        const int micro = k / train->n_nodes, is_optim = micro >= accum;
        const tt_node *nd = is_optim ? optim->nodes[k - accum * train->n_nodes] : train->nodes[k % train->n_nodes];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(x, "name"), *ph = cJSON_GetObjectItemCaseSensitive(x, "ph");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(x, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(x, "dur");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(x, "args");
        const cJSON *graph = cJSON_GetObjectItemCaseSensitive(args, "graph");
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(args, "micro_step");
        const cJSON *gf = cJSON_GetObjectItemCaseSensitive(args, "gflop");
        int ok = cJSON_IsString(name) && !strcmp(name->valuestring, tt_op_name(nd->op)) && cJSON_IsString(ph) &&
                 !strcmp(ph->valuestring, "X") && cJSON_IsNumber(ts) && ts->valuedouble >= last_ts &&
                 cJSON_IsNumber(dur) && dur->valuedouble >= 0 && cJSON_IsNumber(gf) && cJSON_IsString(graph) &&
                 !strcmp(graph->valuestring, is_optim ? "optimizer" : "train_step") &&
                 (is_optim ? ms == NULL : cJSON_IsNumber(ms) && ms->valueint == micro);
        if (!ok && bad++ < 3) fprintf(stderr, "%s: event %d does not match its node (%s)\n", path, k, tt_op_name(nd->op));
        if (cJSON_IsNumber(ts)) last_ts = ts->valuedouble;
        k++;
    }
    CHECK_MSG(bad == 0, "%s: %d events out of place", path, bad);
    cJSON_Delete(root);
}

int main(void)
{
    char tmp[] = "/tmp/tt_test_profiling_XXXXXX";
    if (!mkdtemp(tmp)) return th_skip("test_profiling", "no temporary folder");
    char run[256], plain[256], abs_dir[256], probe[256], dir[300], path[400];
    snprintf(run, sizeof run, "%s/run", tmp);
    snprintf(plain, sizeof plain, "%s/plain", tmp);
    snprintf(abs_dir, sizeof abs_dir, "%s/elsewhere/traces", tmp);
    snprintf(probe, sizeof probe, "%s/probe", tmp);

    /* the step graphs the run replays, from a run set up the same way in another folder */
    tt_config *c = config(probe, 5, 2, NULL);
    tt_run r;
    int opened = tt_run_open(&r, c, TT_RUN_TRAIN) == 0;
    CHECK_MSG(opened, "%s", tt_last_error());
    if (!opened) return th_done("test_profiling");
    CHECK(r.accum_steps == 2);

    /* 5 steps, a trace every 2: steps 2 and 4 */
    tt_config *cr = config(run, 5, 2, NULL);
    CHECK_MSG(tt_train(cr) == 0, "%s", tt_last_error());
    snprintf(dir, sizeof dir, "%s/profile_traces", run);
    CHECK_MSG(iterations(dir) == ((1LL << 2) | (1LL << 4)), "%s holds iteration folders %llx", dir,
              (unsigned long long)iterations(dir));
    for (int step = 2; step <= 4; step += 2) {
        snprintf(path, sizeof path, "%s/iteration_%d/rank0_trace.json", dir, step);
        check_trace(path, r.train.g, r.optim.g, r.accum_steps);
    }

    /* the report shows the newest trace's per-op table */
    snprintf(path, sizeof path, "%s/report.html", tmp);
    const char *runs[1] = {run};
    CHECK_MSG(tt_report(runs, 1, path, NULL) == 0, "%s", tt_last_error());
    size_t len;
    char *html = tt_read_file(path, 16u << 20, &len);
    CHECK(html && strstr(html, "<table class=\"profile\">"));
    char want[128];
    snprintf(want, sizeof want, "Step 4: %d events", 2 * r.train.g->n_nodes + r.optim.g->n_nodes);
    CHECK_MSG(html && strstr(html, want), "the report does not say \"%s\"", want);
    CHECK(html && strstr(html, "<td>matmul</td>") && !strstr(html, "None recorded"));
    free(html);

    /* an absolute folder is used as given; every step traced with profile_freq 1 */
    tt_config *ca = config(run, 2, 1, abs_dir);
    CHECK_MSG(tt_train(ca) == 0, "%s", tt_last_error());
    CHECK(iterations(abs_dir) == ((1LL << 1) | (1LL << 2)));
    snprintf(path, sizeof path, "%s/iteration_1/rank0_trace.json", abs_dir);
    check_trace(path, r.train.g, r.optim.g, r.accum_steps);

    /* a folder that cannot be made (under a file) is a warning: the run trains on */
    snprintf(path, sizeof path, "%s/afile", tmp);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    snprintf(dir, sizeof dir, "%s/afile/traces", tmp);
    tt_config *cb = config(run, 2, 1, dir);
    CHECK_MSG(tt_train(cb) == 0, "an unwritable trace folder stopped the run: %s", tt_last_error());
    free(cb);

    /* without profiling, no traces */
    tt_config *cp = config(plain, 3, 0, NULL);
    CHECK_MSG(tt_train(cp) == 0, "%s", tt_last_error());
    snprintf(dir, sizeof dir, "%s/profile_traces", plain);
    struct stat st;
    CHECK(stat(dir, &st) != 0);

    tt_run_close(&r);
    free(c), free(cr), free(ca), free(cp);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
    return th_done("test_profiling");
}

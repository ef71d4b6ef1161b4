/* test_metrics.c — FLOP/MFU arithmetic (attention as executed on hand-made
 * batches, and against a brute-force count of the attention mask), MFU that
 * is never stated above 100% (a peak below what a run did), the console line,
 * metrics.jsonl records (train, validation, append on resume) and
 * summary.json. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "train/metrics.h"

/* A file's text, kept until the next call (callers do not free it); NULL if it cannot be read. */
static char *slurp(const char *path)
{
    static char *text;
    free(text);
    return text = th_read_file(path, NULL);
}

/* Run one logger call with stdout sent to a file; return what it printed. */
static int saved_fd = -1;
static void capture_begin(const char *path)
{
    fflush(stdout);
    saved_fd = dup(1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
}
static char *capture_end(const char *path)
{
    fflush(stdout);
    dup2(saved_fd, 1);
    close(saved_fd);
    return slurp(path);
}

/* Parse line i (0-based) of a jsonl file. */
static cJSON *jsonl_line(const char *path, int i)
{
    char *text = slurp(path);
    if (!text) return NULL;
    for (; i > 0 && text; i--) {
        text = strchr(text, '\n');
        if (text) text++;
    }
    if (!text || !*text) return NULL;
    char *nl = strchr(text, '\n');
    if (nl) *nl = '\0';
    return cJSON_Parse(text);
}

static int count_lines(const char *path)
{
    char *t = slurp(path);
    int n = 0;
    for (; t && *t; t++) n += *t == '\n';
    return t ? n : -1;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

int main(void)
{
    /* 6*N + 12*L*(H*hd)*T */
    CHECK_NEAR(tt_tflops(1000.0, 1e9), 1.0, 1e-12);
    CHECK_NEAR(tt_mfu_percent(1000.0, 1e9, 2000.0), 50.0, 1e-9);
    CHECK(tt_mfu_percent(1000.0, 1e9, 0.0) == 0.0);

    /* attention as executed: k_i = the keys token i sees, causal within its run of equal document ids.
     * Row 0 holds documents of 3, 2 and 3 tokens: k = 1 2 3 | 1 2 | 1 2 3 (15); row 1 one document: 1..8 (36). */
    const int32_t docs[16] = {0, 0, 0, 1, 1, 2, 2, 2, 5, 5, 5, 5, 5, 5, 5, 5};
    CHECK(tt_attention_keys(docs, 2, 8, 0) == 15 + 36);
    /* a window of 2: k = 1 2 2 | 1 2 | 1 2 2 (13) and 1 2 2 2 2 2 2 2 (15) */
    CHECK(tt_attention_keys(docs, 2, 8, 2) == 13 + 15);
    CHECK(tt_attention_keys(NULL, 2, 8, 0) == 2 * 36); /* no document ids: one causal document a row */
    CHECK(tt_attention_keys(docs, 2, 8, 100) == 15 + 36);
    /* 3 layers of d = 2 heads x 4 = 8; layer 0 attends fully, layers 1 and 2 through the window of 2. The formula:
     * 1000 FLOPs/token of matmuls + 12 * 3 * 8 * 8 of full attention = 3304; as executed over the 16 tokens:
     * 16 * 1000 + 12 * 8 * (51 + 2 * 28) */
    tt_model_cfg mc = {.n_layers = 3, .n_heads = 2, .n_kv_heads = 2, .head_dim = 4, .window = 2};
    static tt_model_ext ext;
    ext.full_attention[0] = 1;
    CHECK_NEAR(tt_batch_flops_attention_executed(&mc, &ext, 3304.0, docs, 2, 8), 16 * 1000.0 + 96.0 * 107, 1e-9);
    mc.window = 0; /* no window anywhere: all three layers see 51 keys */
    CHECK_NEAR(tt_batch_flops_attention_executed(&mc, NULL, 3304.0, docs, 2, 8), 16 * 1000.0 + 96.0 * 153, 1e-9);
    /* against the attention mask itself (the ref kernel's rule: j <= i, i - j < window, same document), counted
     * pair by pair on random batches */
    tt_rng rng = {7, 0};
    for (int trial = 0; trial < 6; trial++) {
        const int B = 3, T = 37 + trial, window = trial % 3 == 0 ? 0 : 3 * trial;
        int32_t *doc = th_doc_ids(&rng, B, T);
        double pairs = 0;
        for (int bb = 0; bb < B; bb++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++)
                    pairs += (window <= 0 || i - j < window) && doc[bb * T + j] == doc[bb * T + i];
        CHECK_MSG(tt_attention_keys(doc, B, T, window) == pairs, "trial %d: %g keys, the mask has %g",
                  trial, tt_attention_keys(doc, B, T, window), pairs);
        free(doc);
    }

    /* MFU is stated only up to 100%: 1000 tok/s x 1 GFLOP/token (0.8 with attention as executed) */
    tt_mfu f;
    tt_mfu_judge(1000.0, 1e9, 0.8e9, 2000.0, "cached", &f);
    CHECK(f.mfu == 50.0 && fabs(f.mfu_executed - 40.0) < 1e-9 && !f.peak_wrong && !f.note[0]);
    tt_mfu_judge(1000.0, 1e9, 0.8e9, 500.0, "cached", &f); /* 800 GFLOP/s done against a 500 GFLOP/s peak */
    CHECK_MSG(f.peak_wrong && isnan(f.mfu) && isnan(f.mfu_executed) && strstr(f.note, "looks wrong") &&
                  strstr(f.note, "500 GFLOP/s, cached") && strstr(f.note, "800 GFLOP/s") && strstr(f.note, "bench peak"),
              "%s", f.note);
    tt_mfu_judge(1000.0, 1e9, 0.8e9, 500.0, "config", &f);
    CHECK_MSG(f.peak_wrong && strstr(f.note, "metrics.peak_tflops"), "%s", f.note);
    tt_mfu_judge(1000.0, 1e9, 0.0, 900.0, "cached", &f); /* unknown executed FLOPs: the formula's are what was done */
    CHECK(f.peak_wrong && isnan(f.mfu) && isnan(f.mfu_executed));
    tt_mfu_judge(1000.0, 1e9, 0.5e9, 900.0, "cached", &f); /* 111% by the formula, 500 of 900 GFLOP/s done */
    CHECK_MSG(!f.peak_wrong && isnan(f.mfu) && fabs(f.mfu_executed - 500.0 / 9) < 1e-9 &&
                  strstr(f.note, "above 100%") && strstr(f.note, "55.56% with attention as executed"),
              "%s", f.note);
    tt_mfu_judge(1000.0, 1e9, 0.8e9, 0.0, NULL, &f); /* no peak: 0, as before */
    CHECK(f.mfu == 0.0 && isnan(f.mfu_executed) && !f.peak_wrong && !f.note[0]);

    char b[32];
    CHECK(strcmp(tt_format_eta(192.0, b, sizeof b), "0:03:12") == 0);
    CHECK(strcmp(tt_format_eta(3661.0, b, sizeof b), "1:01:01") == 0);
    CHECK(strcmp(tt_format_eta(59.6, b, sizeof b), "0:01:00") == 0);
    CHECK(strcmp(tt_format_eta(108000.0, b, sizeof b), "30:00:00") == 0);
    CHECK(strcmp(tt_format_eta(0.0, b, sizeof b), "0:00:00") == 0);
    CHECK(strcmp(tt_format_eta(-1.0, b, sizeof b), "?") == 0);
    CHECK(strcmp(tt_format_eta(NAN, b, sizeof b), "?") == 0);

    char dir[] = "/tmp/tt_test_metrics_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char dump[256], jsonl[300], out[300], summary[300];
    snprintf(dump, sizeof dump, "%s/run/a", dir); /* nested: the logger creates it */
    snprintf(jsonl, sizeof jsonl, "%s/metrics.jsonl", dump);
    snprintf(summary, sizeof summary, "%s/summary.json", dump);
    snprintf(out, sizeof out, "%s/stdout.txt", dir);

    /* 1e6 FLOPs/token at 5123.4 tok/s = 5.1234e9 FLOP/s: 0.01 TFLOP/s, and
     * 17.11% of a 29.94 GFLOP/s peak */
    tt_metrics m;
    CHECK(tt_metrics_open(&m, dump, 0, 1e6, 29.94, 0, 70) == 0);
    m.peak_source = "cached";
    tt_metrics_step r = {.step = 10, .loss = 3.12341, .grad_norm = 1.23449, .lr = 3e-3, .tokens_per_sec = 5123.4,
                         .peak_rss_bytes = (size_t)(0.12 * 1073741824.0), .arena_bytes = 53687091, .elapsed_sec = 32.0,
                         .flops_per_token_executed = 0.5e6};
    capture_begin(out);
    tt_err e1 = tt_metrics_log_step(&m, &r);
    char *line = capture_end(out);
    CHECK(e1 == 0);
    /* eta = (70 - 10) * 32 / 10 = 192 s */
    const char *want = "step:  10  loss:  3.1234  grad_norm:  1.2345  lr: 3.0e-03  memory: 0.12GiB(rss) 0.05GiB(arena)  "
                       "tps: 5,123  tflops: 0.01  mfu: 17.11%  eta: 0:03:12\n";
    CHECK_MSG(line && strcmp(line, want) == 0, "got \"%s\"", line ? line : "(null)");

    CHECK(m.peak_wrong_step == 0);
    /* 1,234,567 tok/s x 0.5 MFLOP/token as executed = 617 GFLOP/s done, against a 29.94 GFLOP/s peak: the MFU
     * (4,123% by the formula) is not stated, and the run learns the peak looks wrong */
    r.step = 20, r.loss = 2.5, r.grad_norm = NAN, r.tokens_per_sec = 1234567.0, r.elapsed_sec = 64.0;
    capture_begin(out);
    tt_err e2 = tt_metrics_log_step(&m, &r);
    line = capture_end(out);
    CHECK(e2 == 0);
    CHECK_MSG(line && strstr(line, "tps: 1,234,567  ") != NULL, "got \"%s\"", line ? line : "(null)");
    CHECK_MSG(line && strstr(line, "mfu: n/a (the peak looks wrong)  eta") && !strstr(line, "4123"), "got \"%s\"",
              line ? line : "(null)");
    CHECK(m.peak_wrong_step == 20 && fabs(m.peak_wrong_gflops - 1234567.0 * 0.5e6 / 1e9) < 1e-6);
    capture_begin(out);
    tt_err e3 = tt_metrics_log_val(&m, 20, log(3.42), 65536, 65.0);
    line = capture_end(out);
    CHECK(e3 == 0);
    CHECK_MSG(line && strcmp(line, "validate step: 20  loss: 1.2296  ppl: 3.42  tokens: 65,536\n") == 0, "got \"%s\"",
              line ? line : "(null)");
    CHECK_NEAR(tt_metrics_mean_tps(&m), (5123.4 + 1234567.0) / 2, 1e-6);
    CHECK(isnan(tt_metrics_mean_mfu(&m))); /* the mean is above the peak too */
    tt_run_summary sm = {0};
    tt_metrics_summarize_mfu(&m, &sm, "f32");
    CHECK(isnan(sm.mfu_mean) && isnan(sm.mfu_mean_attention_executed) && sm.mfu_note &&
          strstr(sm.mfu_note, "looks wrong") && sm.peak_gflops == 29.94);
    CHECK_NEAR(sm.flops_per_token_attention_executed, 0.5e6, 1e-6);
    /* the peak measured again (as the run does): the whole run's mean is against it */
    m.peak_gflops = 2000.0;
    tt_metrics_summarize_mfu(&m, &sm, "f32");
    CHECK_NEAR(sm.mfu_mean, tt_mfu_percent((5123.4 + 1234567.0) / 2, 1e6, 2000.0), 1e-9);
    CHECK_NEAR(sm.mfu_mean, (tt_mfu_percent(5123.4, 1e6, 2000.0) + tt_mfu_percent(1234567.0, 1e6, 2000.0)) / 2, 1e-9);
    CHECK_NEAR(sm.mfu_mean_attention_executed, sm.mfu_mean / 2, 1e-9);
    CHECK(sm.mfu_note == NULL);
    tt_metrics_close(&m);

    CHECK(count_lines(jsonl) == 3);
    cJSON *o = jsonl_line(jsonl, 0);
    CHECK(o != NULL);
    CHECK(num(o, "step") == 10);
    CHECK_NEAR(num(o, "loss"), 3.12341, 1e-12);
    CHECK_NEAR(num(o, "grad_norm"), 1.23449, 1e-12);
    CHECK_NEAR(num(o, "lr"), 3e-3, 1e-15);
    CHECK_NEAR(num(o, "tokens_per_sec"), 5123.4, 1e-9);
    CHECK_NEAR(num(o, "tflops"), 5123.4e6 * 1e-12, 1e-15);
    CHECK_NEAR(num(o, "mfu"), tt_mfu_percent(5123.4, 1e6, 29.94), 1e-12);
    CHECK_NEAR(num(o, "mfu_attention_executed"), tt_mfu_percent(5123.4, 0.5e6, 29.94), 1e-12);
    CHECK(cJSON_GetObjectItem(o, "mfu_note") == NULL);
    CHECK(num(o, "peak_rss_bytes") == (double)(size_t)(0.12 * 1073741824.0));
    CHECK(num(o, "arena_bytes") == 53687091.0);
    CHECK(num(o, "elapsed_sec") == 32.0);
    CHECK_NEAR(num(o, "eta_sec"), 192.0, 1e-9);
    CHECK(cJSON_GetObjectItem(o, "val_loss") == NULL);
    cJSON_Delete(o);
    o = jsonl_line(jsonl, 1);
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "grad_norm"))); /* NaN -> null */
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "mfu")) &&
          cJSON_IsNull(cJSON_GetObjectItem(o, "mfu_attention_executed")));
    const cJSON *note = o ? cJSON_GetObjectItem(o, "mfu_note") : NULL;
    CHECK_MSG(cJSON_IsString(note) && strstr(note->valuestring, "29.94 GFLOP/s, cached") &&
                  strstr(note->valuestring, "looks wrong"),
              "%s", cJSON_IsString(note) ? note->valuestring : "(no mfu_note)");
    cJSON_Delete(o);
    o = jsonl_line(jsonl, 2);
    CHECK(o && num(o, "step") == 20 && cJSON_GetObjectItem(o, "loss") == NULL);
    CHECK(o && fabs(num(o, "val_loss") - log(3.42)) < 1e-12 && fabs(num(o, "val_ppl") - 3.42) < 1e-9);
    CHECK(o && num(o, "val_tokens") == 65536);
    cJSON_Delete(o);

    /* a resumed run appends; a fresh run starts the file over */
    CHECK(tt_metrics_open(&m, dump, 1, 1e6, 0.0, 20, 70) == 0);
    r.step = 21, r.elapsed_sec = 5.0, r.grad_norm = 1.0;
    capture_begin(out);
    tt_metrics_log_step(&m, &r);
    line = capture_end(out);
    CHECK(line && strstr(line, "mfu: 0.00%  eta: 0:04:05\n") != NULL); /* 49 steps left at 5 s/step */
    tt_metrics_close(&m);
    CHECK(count_lines(jsonl) == 4);
    CHECK(tt_metrics_open(&m, dump, 0, 1e6, 0.0, 0, 70) == 0);
    tt_metrics_close(&m);
    CHECK(count_lines(jsonl) == 0);
    /* no dump folder: console only */
    CHECK(tt_metrics_open(&m, NULL, 0, 1e6, 0.0, 0, 70) == 0 && m.jsonl == NULL);
    capture_begin(out);
    CHECK(tt_metrics_log_step(&m, &r) == 0);
    capture_end(out);
    tt_metrics_close(&m);
    /* over 100% by the formula only (5.1 GFLOP/s of it, 2.6 done, a 4 GFLOP/s peak): the executed figure stands */
    CHECK(tt_metrics_open(&m, NULL, 0, 1e6, 4.0, 0, 70) == 0);
    r.tokens_per_sec = 5123.4;
    capture_begin(out);
    CHECK(tt_metrics_log_step(&m, &r) == 0);
    line = capture_end(out);
    CHECK_MSG(line && strstr(line, "mfu: n/a (over 100%: full attention counted)"), "got \"%s\"", line ? line : "");
    CHECK(m.peak_wrong_step == 0);
    tt_metrics_close(&m);
    /* a dump folder that is a file */
    CHECK(tt_metrics_open(&m, jsonl, 0, 1e6, 0.0, 0, 70) != 0);

    /* summary.json with the built-in corpus */
    tt_run_summary s = {.steps = 70, .params = 123456, .final_train_loss = 2.0, .final_val_loss = 2.5,
                        .builtin_corpus = 1, .floor_nats = 2.0, .unigram_nats = 4.0, .total_tokens = 1 << 20,
                        .wall_seconds = 100.0, .mean_tokens_per_sec = 10485.76, .flops_per_token = 1e6,
                        .mfu_mean = 12.5, .peak_source = "measured", .extra_json = "{\"model\": \"tiny\", \"n\": [1, 2]}"};
    CHECK(tt_metrics_write_summary(dump, &s) == 0);
    char *text = slurp(summary);
    o = text ? cJSON_Parse(text) : NULL;
    CHECK(o != NULL);
    CHECK(num(o, "steps") == 70 && num(o, "params") == 123456 && !cJSON_GetObjectItem(o, "description"));
    CHECK(num(o, "final_train_loss") == 2.0 && num(o, "final_val_loss") == 2.5);
    CHECK(num(o, "floor_nats") == 2.0 && num(o, "unigram_nats") == 4.0);
    CHECK_NEAR(num(o, "gap_closed"), 0.75, 1e-12);     /* (4 - 2.5) / (4 - 2) */
    CHECK_NEAR(num(o, "val_over_floor"), 1.25, 1e-12); /* 2.5 / 2 */
    CHECK(num(o, "total_tokens") == 1048576 && num(o, "wall_seconds") == 100.0);
    CHECK(num(o, "mean_tokens_per_sec") == 10485.76 && num(o, "flops_per_token") == 1e6 && num(o, "mfu_mean") == 12.5);
    CHECK(!cJSON_GetObjectItem(o, "mfu_mean_attention_executed") && !cJSON_GetObjectItem(o, "mfu_note") &&
          !cJSON_GetObjectItem(o, "peak_gflops")); /* not counted, nothing to say, unknown */
    const cJSON *ps = cJSON_GetObjectItem(o, "peak_source");
    CHECK(cJSON_IsString(ps) && strcmp(ps->valuestring, "measured") == 0);
    const cJSON *ex = cJSON_GetObjectItem(o, "extra");
    CHECK(ex && cJSON_IsString(cJSON_GetObjectItem(ex, "model")) && cJSON_GetArraySize(cJSON_GetObjectItem(ex, "n")) == 2);
    cJSON_Delete(o);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", summary);
    struct stat st;
    CHECK(stat(tmp, &st) != 0); /* the temporary was renamed away */

    /* the executed figures, a peak, and an MFU that is not stated */
    s.flops_per_token_attention_executed = 0.7e6, s.mfu_mean_attention_executed = 8.75, s.peak_gflops = 99.5;
    s.mfu_mean = NAN, s.mfu_note = "the peak looks wrong";
    CHECK(tt_metrics_write_summary(dump, &s) == 0);
    o = cJSON_Parse(slurp(summary));
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "mfu_mean")) && num(o, "mfu_mean_attention_executed") == 8.75);
    CHECK(o && num(o, "flops_per_token_attention_executed") == 0.7e6 && num(o, "peak_gflops") == 99.5);
    CHECK(o && cJSON_IsString(cJSON_GetObjectItem(o, "mfu_note")));
    cJSON_Delete(o);
    s.flops_per_token_attention_executed = 0, s.peak_gflops = 0, s.mfu_note = NULL, s.mfu_mean = 12.5;

    /* without the built-in corpus the corpus fields are absent; no val loss -> null */
    s.builtin_corpus = 0, s.final_val_loss = NAN, s.extra_json = NULL, s.peak_source = NULL;
    CHECK(tt_metrics_write_summary(dump, &s) == 0);
    o = cJSON_Parse(slurp(summary));
    CHECK(o && !cJSON_GetObjectItem(o, "gap_closed") && !cJSON_GetObjectItem(o, "floor_nats"));
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "final_val_loss")) && !cJSON_GetObjectItem(o, "extra"));
    CHECK(o && strcmp(cJSON_GetObjectItem(o, "peak_source")->valuestring, "config") == 0);
    cJSON_Delete(o);
    s.builtin_corpus = 1;
    CHECK(tt_metrics_write_summary(dump, &s) == 0);
    o = cJSON_Parse(slurp(summary));
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "gap_closed")) && cJSON_IsNull(cJSON_GetObjectItem(o, "val_over_floor")));
    cJSON_Delete(o);

    /* bad extra JSON: an error, and the summary already there is untouched */
    char before[4096];
    snprintf(before, sizeof before, "%s", slurp(summary));
    s.extra_json = "{\"a\": ";
    CHECK(tt_metrics_write_summary(dump, &s) != 0);
    CHECK(strstr(tt_last_error(), "extra") != NULL);
    CHECK(strcmp(before, slurp(summary)) == 0);
    CHECK(tt_metrics_write_summary(NULL, &s) != 0);

    /* a run whose configured peak is far below what it does: it trains, and states no MFU (the log line, every
     * record, summary.json), naming the key; it does not measure a configured peak */
    tt_config *c = th_alloc(1, sizeof *c);
    char run[200];
    snprintf(run, sizeof run, "%.150s/lowpeak", dir);
    tt_config_defaults(c);
    const char *kv[][2] = {{"job.dump_folder", run}, {"metrics.peak_tflops", "1e-9"}, {"metrics.save_jsonl", "true"},
                           {"metrics.log_freq", "1"}, {"training.steps", "2"}, {"model.dim", "32"},
                           {"model.n_layers", "1"}, {"model.n_heads", "2"}, {"model.n_kv_heads", "2"},
                           {"model.ffn_dim", "64"}, {"training.local_batch_size", "2"},
                           {"synthetic.train_tokens", "20000"}, {"synthetic.val_tokens", "2000"},
                           {"checkpoint.enable", "false"}, {"generate.max_new_tokens", "0"},
                           {"training.mixed_precision_param", "float32"},
                           {"job.description", "a peak far too low"}};
    int rc = 0;
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) rc |= tt_config_set(c, kv[i][0], kv[i][1], "test");
    if (!rc) rc = tt_config_finalize(c);
    snprintf(out, sizeof out, "%s/train.txt", dir);
    capture_begin(out);
    if (!rc) rc = tt_train(c);
    line = capture_end(out);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    CHECK_MSG(line && strstr(line, "mfu: n/a (the peak looks wrong)") && !strstr(line, "measuring it again") &&
                  strstr(line, "MFU n/a of the 1e-06 GFLOP/s f32 peak (config)"),
              "%s", line ? line : "");
    CHECK_MSG(line && strstr(line, "job.description: a peak far too low\n"), "%s", line ? line : ""); /* the header */
    snprintf(jsonl, sizeof jsonl, "%s/metrics.jsonl", run);
    for (int i = 0; i < 2; i++) {
        o = jsonl_line(jsonl, i);
        CHECK(o && num(o, "step") == i + 1 && cJSON_IsNull(cJSON_GetObjectItem(o, "mfu")) &&
              cJSON_IsString(cJSON_GetObjectItem(o, "mfu_note")));
        cJSON_Delete(o);
    }
    snprintf(summary, sizeof summary, "%s/summary.json", run);
    o = cJSON_Parse(slurp(summary));
    const cJSON *sn = o ? cJSON_GetObjectItem(o, "mfu_note") : NULL;
    CHECK(o && cJSON_IsNull(cJSON_GetObjectItem(o, "mfu_mean")) &&
          cJSON_IsNull(cJSON_GetObjectItem(o, "mfu_mean_attention_executed")) &&
          num(o, "flops_per_token_attention_executed") > 0 &&
          num(o, "flops_per_token_attention_executed") < num(o, "flops_per_token"));
    CHECK_MSG(cJSON_IsString(sn) && strstr(sn->valuestring, "metrics.peak_tflops"), "%s",
              cJSON_IsString(sn) ? sn->valuestring : "(no mfu_note)");
    const cJSON *sd = o ? cJSON_GetObjectItem(o, "description") : NULL;
    CHECK(cJSON_IsString(sd) && !strcmp(sd->valuestring, "a peak far too low"));
    cJSON_Delete(o);
    free(c);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return th_done("test_metrics");
}

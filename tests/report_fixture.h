/* report_fixture.h — run folders built by hand for the `titan report` tests
 * (test_report.c, test_report_render.c): metrics.jsonl with known values,
 * summary.json, config.toml, plan.json and Chrome traces. */
#ifndef TT_REPORT_FIXTURE_H
#define TT_REPORT_FIXTURE_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "titan/config.h"

static int rf_mkdir(const char *path)
{
    int rc = mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
    CHECK_MSG(rc == 0, "mkdir %s", path);
    return rc;
}

static int rf_write(const char *dir, const char *name, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    int rc = f && fputs(text, f) >= 0 ? 0 : -1;
    if (f && fclose(f)) rc = -1;
    CHECK_MSG(rc == 0, "writing %s", path);
    return rc;
}

/* Run A: a finished run with validation, a floor, a resume that logged steps
 * 50 and 60 again (the second values win), and a record whose grad_norm is
 * null (written for NaN). The plotted values after that: */
#define RA_N 7
static const double ra_step[RA_N] = {1, 10, 20, 30, 40, 50, 60};
static const double ra_loss[RA_N] = {5.5, 3.0, 2.0, 1.5, 1.2, 1.0, 0.9};
static const double ra_lr[RA_N] = {1e-4, 1e-3, 2e-3, 3e-3, 2e-3, 1e-3, 5e-4};
static const double ra_gnorm[RA_N] = {4.0, 2.0, 1.5, NAN, 1.0, 0.8, 0.7}; /* step 30: null */
static const double ra_tps[RA_N] = {20000, 50000, 52000, 51000, 53000, 52500, 54000};
static const double ra_mfu[RA_N] = {20, 50, 52, 51, 53, 52.5, 54};
#define RA_NV 3
static const double ra_vstep[RA_NV] = {20, 40, 60};
static const double ra_vloss[RA_NV] = {2.1, 1.3, 1.0};
#define RA_FLOOR 0.5
#define RA_RSS (150.0 * 1048576)
#define RA_ARENA (70.0 * 1048576)
#define RA_DESCRIPTION "<script>alert('x')</script> & \"quotes\""

static int rf_run_a(const char *dir)
{
    if (rf_mkdir(dir)) return -1;
    char buf[16384];
    size_t k = 0;
    for (int i = 0; i < RA_N; i++) {
        /* the first pass logs 50 and 60 with other values; the resume from step 40 logs them again */
        if (i == RA_N - 2) {
            k += (size_t)snprintf(buf + k, sizeof buf - k,
                                  "{\"step\":50,\"loss\":1.1,\"grad_norm\":0.9,\"lr\":1e-3,\"tokens_per_sec\":1,"
                                  "\"mfu\":1,\"peak_rss_bytes\":1,\"arena_bytes\":1}\n"
                                  "{\"step\":60,\"loss\":0.95,\"grad_norm\":0.9,\"lr\":1e-3,\"tokens_per_sec\":1,"
                                  "\"mfu\":1,\"peak_rss_bytes\":1,\"arena_bytes\":1}\n"
                                  "{\"step\":60,\"val_loss\":9,\"val_ppl\":1,\"val_tokens\":10,\"elapsed_sec\":1}\n");
        }
        char gn[32];
        if (isnan(ra_gnorm[i])) snprintf(gn, sizeof gn, "null");
        else snprintf(gn, sizeof gn, "%.17g", ra_gnorm[i]);
        k += (size_t)snprintf(buf + k, sizeof buf - k,
                              "{\"step\":%g,\"loss\":%.17g,\"grad_norm\":%s,\"lr\":%.17g,\"tokens_per_sec\":%.17g,"
                              "\"tflops\":0.3,\"mfu\":%.17g,\"peak_rss_bytes\":%.17g,\"arena_bytes\":%.17g,"
                              "\"elapsed_sec\":%d,\"eta_sec\":null}\n",
                              ra_step[i], ra_loss[i], gn, ra_lr[i], ra_tps[i], ra_mfu[i], RA_RSS, RA_ARENA, i);
        for (int v = 0; v < RA_NV; v++)
            if (ra_vstep[v] == ra_step[i])
                k += (size_t)snprintf(buf + k, sizeof buf - k,
                                      "{\"step\":%g,\"val_loss\":%.17g,\"val_ppl\":3.0,\"val_tokens\":1000,"
                                      "\"elapsed_sec\":%d}\n",
                                      ra_vstep[v], ra_vloss[v], i);
    }
    int rc = rf_write(dir, "metrics.jsonl", buf);
    snprintf(buf, sizeof buf,
             "{\"steps\": 60, \"params\": 1234567, \"final_train_loss\": 0.9, \"final_val_loss\": 1.0,\n"
             " \"floor_nats\": %g, \"unigram_nats\": 3.0, \"gap_closed\": 0.8, \"val_over_floor\": 2.0,\n"
             " \"total_tokens\": 245760, \"wall_seconds\": 12.5, \"mean_tokens_per_sec\": 51000,\n"
             " \"flops_per_token\": 7500000, \"mfu_mean\": 48.2, \"peak_source\": \"measured\",\n"
             " \"extra\": {\"note\": \"<b>bold</b>\"}}\n",
             RA_FLOOR);
    rc |= rf_write(dir, "summary.json", buf);
    rc |= rf_write(dir, "plan.json",
                   "{\"format\": \"titan-plan-1\","
                   " \"model\": {\"arch\": \"llama\", \"flavor\": \"debugmodel\", \"dim\": 128,"
                   " \"n_layers\": 4, \"n_heads\": 4, \"n_kv_heads\": 4, \"head_dim\": 32, \"ffn_dim\": 384,"
                   " \"vocab_size\": 258, \"tie_embeddings\": false},"
                   " \"params\": 1234567, \"matmul_params\": 1200000, \"local_batch_size\": 16, \"seq_len\": 256,"
                   " \"flops_per_token\": 7500000, \"compute_dtype\": \"bf16\","
                   " \"memory_bytes\": {\"params\": 4938268, \"grads\": 4938268, \"optimizer\": 9876536,"
                   " \"activations\": 77594624, \"total\": 97347696},"
                   " \"activation_checkpoint\": {\"mode\": \"none\", \"none\": {\"activation_bytes\": 77594624},"
                   " \"selective\": {\"activation_bytes\": 67108864}, \"full\": {\"activation_bytes\": 29360128}},"
                   " \"backend\": \"cpu\", \"exec_mode\": \"graph\", \"accumulation_steps\": 1,"
                   " \"peak\": {\"gflops\": 1049, \"dtype\": \"bf16\", \"source\": \"measured\"},"
                   " \"corpus\": {\"floor_nats\": 0.5, \"unigram_nats\": 3.0}}\n");
    /* the config: every key, as a run writes it, with a description that needs escaping */
    tt_config *c = th_alloc(1, sizeof *c);
    tt_config_defaults(c);
    char *toml = NULL;
    if (tt_config_set(c, "job.description", RA_DESCRIPTION, "test") ||
        tt_config_set(c, "training.steps", "60", "test") || tt_config_finalize(c) || !(toml = tt_config_to_toml(c))) {
        CHECK_MSG(0, "config: %s", tt_last_error());
        rc = -1;
    } else {
        rc |= rf_write(dir, "config.toml", toml);
    }
    free(toml);
    free(c);
    /* two profiles: the newest (step 10) is the one shown */
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/profile_traces", dir);
    rc |= rf_mkdir(sub);
    snprintf(sub, sizeof sub, "%s/profile_traces/iteration_5", dir);
    rc |= rf_mkdir(sub);
    rc |= rf_write(sub, "rank0_trace.json",
                   "{\"traceEvents\":[{\"name\":\"stale_op\",\"ph\":\"X\",\"ts\":0,\"dur\":9000}]}");
    snprintf(sub, sizeof sub, "%s/profile_traces/iteration_10", dir);
    rc |= rf_mkdir(sub);
    rc |= rf_write(sub, "rank0_trace.json",
                   "{\"traceEvents\":["
                   "{\"name\":\"matmul\",\"cat\":\"layers.0\",\"ph\":\"X\",\"ts\":0,\"dur\":1000,\"pid\":0,\"tid\":0,"
                   "\"args\":{\"scope\":\"layers.0.attention\",\"graph\":\"train_step\",\"gflop\":2.0}},"
                   "{\"name\":\"matmul\",\"ph\":\"X\",\"ts\":1000,\"dur\":3000,\"args\":{\"gflop\":6.0}},"
                   "{\"name\":\"<attention>\",\"ph\":\"X\",\"ts\":4000,\"dur\":500,\"args\":{\"gflop\":0.5}},"
                   "{\"name\":\"process_name\",\"ph\":\"M\",\"args\":{\"name\":\"titan\"}},"
                   "{\"name\":\"bad_dur\",\"ph\":\"X\",\"ts\":0,\"dur\":-5},"
                   "{\"ph\":\"X\",\"ts\":0,\"dur\":5}"
                   "],\"displayTimeUnit\":\"ms\"}");
    snprintf(sub, sizeof sub, "%s/profile_traces/iteration_x", dir); /* not a step: ignored */
    rc |= rf_mkdir(sub);
    return rc;
}

/* Run B: still in progress, no validation, no summary, plan or config; two
 * bad lines (3: not JSON, 5: no step) and a half-written last line. */
#define RB_N 5
static const double rb_loss[RB_N] = {6, 5, 4, 3, 2};

static int rf_run_b(const char *dir)
{
    if (rf_mkdir(dir)) return -1;
    return rf_write(dir, "metrics.jsonl",
                    "{\"step\":1,\"loss\":6}\n"
                    "{\"step\":2,\"loss\":5}\n"
                    "{not json\n"
                    "{\"step\":3,\"loss\":4}\n"
                    "{\"loss\":3.5}\n"
                    "{\"step\":4,\"loss\":3}\n"
                    "{\"step\":5,\"loss\":2}\n"
                    "{\"step\":6,\"lo");
}

#endif

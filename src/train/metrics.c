/* metrics.c — what a run reports: a TorchTitan-style console line, a
 * metrics.jsonl record and TensorBoard scalars per logged step, validation
 * lines, and summary.json. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "train/metrics.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

double tt_tflops(double tokens_per_sec, double flops_per_token) { return tokens_per_sec * flops_per_token * 1e-12; }

double tt_mfu_percent(double tokens_per_sec, double flops_per_token, double peak_gflops)
{
    if (!(peak_gflops > 0.0)) return 0.0;
    return 100.0 * tokens_per_sec * flops_per_token / (peak_gflops * 1e9);
}

char *tt_format_eta(double seconds, char *buf, size_t n)
{
    if (!(seconds >= 0.0) || !isfinite(seconds) || seconds > 1e15) {
        snprintf(buf, n, "?");
        return buf;
    }
    long long s = (long long)(seconds + 0.5);
    snprintf(buf, n, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

/* "5,123,456": round to an integer and group digits by thousands, as Python's {:,}. */
static char *format_grouped(double v, char *buf, size_t n)
{
    if (!isfinite(v) || fabs(v) >= 1e18) {
        snprintf(buf, n, "%g", v);
        return buf;
    }
    char digits[32];
    long long x = llround(v);
    int len = snprintf(digits, sizeof digits, "%lld", x < 0 ? -x : x);
    size_t o = 0;
    if (x < 0 && o + 1 < n) buf[o++] = '-';
    for (int i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < n) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

/* mkdir -p */
static tt_err make_dirs(const char *path)
{
    char tmp[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof tmp) return tt_errorf("metrics: bad dump folder path \"%.200s\"", path);
    memcpy(tmp, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (tmp[i] != '/' && tmp[i] != '\0') continue;
        char c = tmp[i];
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return tt_errorf("metrics: cannot create folder %s: %s", tmp, strerror(errno));
        tmp[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return tt_errorf("metrics: %s is not a folder", path);
    return TT_OK;
}

/* One JSON line, flushed, so a killed run leaves only whole records. */
static tt_err write_record(tt_metrics *m, cJSON *o)
{
    if (!o) return tt_errorf("metrics: out of memory building a record");
    tt_err err = TT_OK;
    if (m->jsonl) {
        char *line = cJSON_PrintUnformatted(o);
        if (!line || fprintf(m->jsonl, "%s\n", line) < 0 || fflush(m->jsonl) != 0)
            err = tt_errorf("metrics: cannot write metrics.jsonl: %s", line ? strerror(errno) : "out of memory");
        cJSON_free(line);
    }
    cJSON_Delete(o);
    return err;
}

tt_err tt_metrics_open(tt_metrics *m, const char *dump_folder, int append, double flops_per_token,
                       double peak_gflops, long start_step, long total_steps)
{
    memset(m, 0, sizeof *m);
    m->flops_per_token = flops_per_token;
    m->peak_gflops = peak_gflops;
    m->start_step = start_step;
    m->total_steps = total_steps;
    if (!dump_folder || !dump_folder[0]) return TT_OK;
    if (make_dirs(dump_folder) != 0) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dump_folder);
    m->jsonl = fopen(path, append ? "a" : "w");
    if (!m->jsonl) return tt_errorf("metrics: cannot open %s: %s", path, strerror(errno));
    return TT_OK;
}

tt_err tt_metrics_open_tensorboard(tt_metrics *m, const tt_config *c, const tt_corpus_stats *corpus)
{
    if (!c->metrics.enable_tensorboard) return TT_OK;
    if (!c->job.dump_folder[0]) return tt_errorf("metrics.enable_tensorboard needs a job.dump_folder");
    char dir[2 * TT_CONFIG_PATH_MAX + 2];
    snprintf(dir, sizeof dir, "%s%s%s", c->job.dump_folder, c->metrics.save_tb_folder[0] ? "/" : "",
             c->metrics.save_tb_folder);
    if (!(m->tb = tt_tb_open(dir))) return tt_error_prefix("metrics.enable_tensorboard: ");
    m->has_floor = corpus != NULL;
    if (corpus) m->floor_train = corpus->train_floor_nats, m->floor_val = corpus->floor_nats;
    if (tt_tb_write_session_start(m->tb, m->start_step + 1)) return -1;
    tt_log("tensorboard: writing %s (tensorboard --logdir %s)", tt_tb_path(m->tb), dir);
    return TT_OK;
}

/* The record's figures as scalars of one Event, if TensorBoard is on. */
static tt_err write_tb(tt_metrics *m, long step, int n, const char *const *tags, const double *v)
{
    if (!m->tb) return TT_OK;
    float f[16];
    for (int i = 0; i < n; i++) f[i] = (float)v[i];
    return tt_tb_write_scalars(m->tb, step, n, tags, f);
}

tt_err tt_metrics_log_step(tt_metrics *m, const tt_metrics_step *r)
{
    double tflops = tt_tflops(r->tokens_per_sec, m->flops_per_token);
    double mfu = tt_mfu_percent(r->tokens_per_sec, m->flops_per_token, m->peak_gflops);
    long done = r->step - m->start_step;
    double eta = done > 0 && m->total_steps > 0 ? (double)(m->total_steps - r->step) * r->elapsed_sec / done : -1.0;
    if (eta < 0.0 && done > 0) eta = 0.0; /* past total_steps */
    m->n_records++;
    m->sum_tps += r->tokens_per_sec;
    m->sum_mfu += mfu;

    char tps[48], eta_s[48];
    tt_log("step: %3ld  loss: %7.4f  grad_norm: %7.4f  lr: %.1e  memory: %.2fGiB(rss) %.2fGiB(arena)  "
           "tps: %s  tflops: %.2f  mfu: %.2f%%  eta: %s",
           r->step, r->loss, r->grad_norm, r->lr, (double)r->peak_rss_bytes / GIB, (double)r->arena_bytes / GIB,
           format_grouped(r->tokens_per_sec, tps, sizeof tps), tflops, mfu, tt_format_eta(eta, eta_s, sizeof eta_s));

    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)r->step);
        cJSON_AddNumberToObject(o, "loss", r->loss);
        cJSON_AddNumberToObject(o, "grad_norm", r->grad_norm);
        cJSON_AddNumberToObject(o, "lr", r->lr);
        cJSON_AddNumberToObject(o, "tokens_per_sec", r->tokens_per_sec);
        cJSON_AddNumberToObject(o, "tflops", tflops);
        cJSON_AddNumberToObject(o, "mfu", mfu);
        cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)r->peak_rss_bytes);
        cJSON_AddNumberToObject(o, "arena_bytes", (double)r->arena_bytes);
        cJSON_AddNumberToObject(o, "elapsed_sec", r->elapsed_sec);
        cJSON_AddNumberToObject(o, "eta_sec", eta >= 0.0 ? eta : NAN);
    }
    if (write_record(m, o)) return -1;

    const char *tags[9] = {"loss_metrics/global_avg_loss", "lr", "throughput(tps)", "tflops", "mfu(%)",
                           "memory/peak_rss(GiB)", "memory/arena(GiB)"};
    double v[9] = {r->loss, r->lr, r->tokens_per_sec, tflops, mfu, (double)r->peak_rss_bytes / GIB,
                   (double)r->arena_bytes / GIB};
    int n = 7;
    if (!isnan(r->grad_norm)) tags[n] = "grad_norm", v[n++] = r->grad_norm;
    if (m->has_floor) tags[n] = "loss_metrics/corpus_floor", v[n++] = m->floor_train;
    return write_tb(m, r->step, n, tags, v);
}

tt_err tt_metrics_log_val(tt_metrics *m, long step, double val_loss, long tokens, double elapsed_sec)
{
    char tok[48];
    double ppl = exp(val_loss);
    tt_log("validate step: %ld  loss: %.4f  ppl: %.2f  tokens: %s", step, val_loss, ppl,
           format_grouped((double)tokens, tok, sizeof tok));
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)step);
        cJSON_AddNumberToObject(o, "val_loss", val_loss);
        cJSON_AddNumberToObject(o, "val_ppl", ppl);
        cJSON_AddNumberToObject(o, "val_tokens", (double)tokens);
        cJSON_AddNumberToObject(o, "elapsed_sec", elapsed_sec);
    }
    if (write_record(m, o)) return -1;
    const char *tags[3] = {"validation_metrics/loss", "validation_metrics/perplexity",
                           "validation_metrics/corpus_floor"};
    double v[3] = {val_loss, ppl, m->floor_val};
    return write_tb(m, step, m->has_floor ? 3 : 2, tags, v);
}

double tt_metrics_mean_tps(const tt_metrics *m) { return m->n_records ? m->sum_tps / m->n_records : 0.0; }
double tt_metrics_mean_mfu(const tt_metrics *m) { return m->n_records ? m->sum_mfu / m->n_records : 0.0; }

void tt_metrics_close(tt_metrics *m)
{
    if (m->jsonl) fclose(m->jsonl);
    m->jsonl = NULL;
    if (tt_tb_close(m->tb)) tt_warn("%s", tt_last_error());
    m->tb = NULL;
}

/* Write text to dir/name through dir/name.tmp: fsync the file, rename, fsync
 * the folder, so a crash leaves either the old file or the whole new one. */
static tt_err write_atomic(const char *dir, const char *name, const char *text)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return tt_errorf("metrics: cannot create %s: %s", tmp, strerror(errno));
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tt_errorf("metrics: cannot write %s: %s", path, strerror(e));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd); /* best effort: some file systems refuse fsync on folders */
        close(dfd);
    }
    return TT_OK;
}

tt_err tt_metrics_write_summary(const char *dump_folder, const tt_run_summary *s)
{
    if (!dump_folder || !dump_folder[0]) return tt_errorf("metrics: summary.json needs a dump folder");
    cJSON *extra = NULL;
    if (s->extra_json) {
        extra = cJSON_Parse(s->extra_json);
        if (!extra) {
            const char *at = cJSON_GetErrorPtr();
            return tt_errorf("metrics: summary extra JSON does not parse near \"%.40s\"", at ? at : "");
        }
    }
    if (make_dirs(dump_folder) != 0) {
        cJSON_Delete(extra);
        return -1;
    }
    cJSON *o = cJSON_CreateObject();
    if (!o) {
        cJSON_Delete(extra);
        return tt_errorf("metrics: out of memory building summary.json");
    }
    cJSON_AddNumberToObject(o, "steps", (double)s->steps);
    cJSON_AddNumberToObject(o, "params", (double)s->params);
    cJSON_AddNumberToObject(o, "final_train_loss", s->final_train_loss);
    cJSON_AddNumberToObject(o, "final_val_loss", s->final_val_loss);
    if (s->builtin_corpus) {
        cJSON_AddNumberToObject(o, "floor_nats", s->floor_nats);
        cJSON_AddNumberToObject(o, "unigram_nats", s->unigram_nats);
        /* NaN (written as null) when there is no val loss or the corpus has no gap */
        double gap = s->unigram_nats - s->floor_nats;
        cJSON_AddNumberToObject(o, "gap_closed", gap != 0.0 ? (s->unigram_nats - s->final_val_loss) / gap : NAN);
        cJSON_AddNumberToObject(o, "val_over_floor", s->floor_nats != 0.0 ? s->final_val_loss / s->floor_nats : NAN);
    }
    cJSON_AddNumberToObject(o, "total_tokens", (double)s->total_tokens);
    cJSON_AddNumberToObject(o, "wall_seconds", s->wall_seconds);
    cJSON_AddNumberToObject(o, "mean_tokens_per_sec", s->mean_tokens_per_sec);
    cJSON_AddNumberToObject(o, "flops_per_token", s->flops_per_token);
    cJSON_AddNumberToObject(o, "mfu_mean", s->mfu_mean);
    cJSON_AddStringToObject(o, "peak_source", s->peak_source ? s->peak_source : "config");
    if (extra) cJSON_AddItemToObject(o, "extra", extra);

    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return tt_errorf("metrics: out of memory printing summary.json");
    tt_err err = write_atomic(dump_folder, "summary.json", text);
    cJSON_free(text);
    return err;
}

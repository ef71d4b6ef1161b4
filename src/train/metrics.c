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

double tt_attention_keys(const int32_t *doc_ids, int B, int T, int window)
{
    double keys = 0;
    for (int b = 0; b < B; b++) {
        const int32_t *doc = doc_ids ? doc_ids + (size_t)b * T : NULL;
        int start = 0; /* where the run of equal document ids that holds token i begins */
        for (int i = 0; i < T; i++) {
            if (doc && i > 0 && doc[i] != doc[i - 1]) start = i;
            int k = i - start + 1;
            keys += window > 0 && k > window ? window : k;
        }
    }
    return keys;
}

double tt_batch_flops_attention_executed(const tt_model_cfg *mc, const tt_model_ext *ext, double flops_per_token,
                                         const int32_t *doc_ids, int B, int T)
{
    const tt_attn_dims ad = tt_model_attn_dims(mc); /* 12 d per key and token: 6 H (d_qk + d_v) */
    const double d = (double)mc->n_heads * (ad.qk + ad.v) / 2, tokens = (double)B * T;
    double full = -1, windowed = -1, attn = 0; /* Σ k_i without and with the window, each counted once */
    for (int l = 0; l < mc->n_layers; l++) {
        int w = tt_model_layer_window(mc, ext, l);
        double *sum = w > 0 ? &windowed : &full;
        if (*sum < 0) *sum = tt_attention_keys(doc_ids, B, T, w);
        attn += 12.0 * d * *sum;
    }
    return (flops_per_token - 12.0 * mc->n_layers * d * T) * tokens + attn;
}

void tt_mfu_judge(double tokens_per_sec, double flops_per_token, double flops_per_token_executed, double peak_gflops,
                  const char *peak_source, tt_mfu *out)
{
    memset(out, 0, sizeof *out);
    const int known = flops_per_token_executed > 0;
    out->mfu = tt_mfu_percent(tokens_per_sec, flops_per_token, peak_gflops);
    out->mfu_executed = known && peak_gflops > 0 ? tt_mfu_percent(tokens_per_sec, flops_per_token_executed, peak_gflops)
                                                 : NAN;
    out->done_gflops = tokens_per_sec * (known ? flops_per_token_executed : flops_per_token) / 1e9;
    if (!(peak_gflops > 0)) return;
    if (out->done_gflops > peak_gflops) { /* more than the hardware can do: the peak is what is wrong */
        out->peak_wrong = 1;
        snprintf(out->note, sizeof out->note,
                 "the peak (%.4g GFLOP/s, %s) is below the %.4g GFLOP/s of model FLOPs this run did%s: it looks "
                 "wrong%s",
                 peak_gflops, peak_source ? peak_source : "given", out->done_gflops,
                 known ? " (attention as executed)" : "",
                 peak_source && !strcmp(peak_source, "config") ? " (metrics.peak_tflops)"
                                                              : "; `titan bench peak` measures it again");
        out->mfu = out->mfu_executed = NAN;
    } else if (out->mfu > 100.0) {
        snprintf(out->note, sizeof out->note,
                 "the formula's MFU is above 100%% (%.1f%%): it counts full attention over all T positions, which "
                 "the causal kernels do not compute; %.2f%% with attention as executed",
                 out->mfu, out->mfu_executed);
        out->mfu = NAN;
    }
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
    tt_mfu f;
    tt_mfu_judge(r->tokens_per_sec, m->flops_per_token, r->flops_per_token_executed, m->peak_gflops, m->peak_source, &f);
    long done = r->step - m->start_step;
    double eta = done > 0 && m->total_steps > 0 ? (double)(m->total_steps - r->step) * r->elapsed_sec / done : -1.0;
    if (eta < 0.0 && done > 0) eta = 0.0; /* past total_steps */
    m->n_records++;
    m->sum_tps += r->tokens_per_sec;
    if (r->flops_per_token_executed > 0) {
        m->sum_tps_executed += r->tokens_per_sec;
        m->sum_flops_executed += r->tokens_per_sec * r->flops_per_token_executed;
    }
    if (f.peak_wrong) m->peak_wrong_step = r->step, m->peak_wrong_gflops = f.done_gflops;
    const int kind = f.peak_wrong ? 1 : f.note[0] ? 2 : 0;
    if (kind && !(m->warned & kind)) {
        tt_warn("step %ld: MFU not stated: %s", r->step, f.note);
        m->warned |= kind;
    }

    char tps[48], eta_s[48], mfu_s[64];
    if (isfinite(f.mfu)) snprintf(mfu_s, sizeof mfu_s, "%.2f%%", f.mfu);
    else
        snprintf(mfu_s, sizeof mfu_s, "n/a (%s)",
                 f.peak_wrong ? "the peak looks wrong" : "over 100%: full attention counted");
    char comm[256] = "";
    int at = r->world > 1 ? snprintf(comm, sizeof comm, "comm wait: %.1f%%  ", 100 * r->comm_wait_frac) : 0;
    if (r->has_aux) at += snprintf(comm + at, sizeof comm - (size_t)at, "aux: %.5f  ", r->aux_loss);
    if (r->moe_layers > 0) { /* the worst layer of each: the load's spread, and the bias's */
        double mx = 0, mn = INFINITY, sp = 0;
        for (int i = 0; i < r->moe_layers; i++)
            mx = fmax(mx, r->moe_load_max[i]), mn = fmin(mn, r->moe_load_min[i]), sp = fmax(sp, r->moe_bias_spread[i]);
        at += snprintf(comm + at, sizeof comm - (size_t)at, "experts: load %.2f-%.2f of mean, bias spread %.4f  ", mn,
                       mx, sp);
    }
    if (r->ep > 1)
        snprintf(comm + at, sizeof comm - (size_t)at, "received %.2fx mean, a2a wait %.1f%%  ", r->ep_recv_max_over_mean,
                 100 * r->ep_wait_frac);
    char trained[64] = "";
    if (r->trained_per_sec > 0) { /* conversations: the tokens the loss trains, beside all of them */
        char t[32];
        snprintf(trained, sizeof trained, " (trained %s)", format_grouped(r->trained_per_sec, t, sizeof t));
    }
    tt_log("step: %3ld  loss: %7.4f  grad_norm: %7.4f  lr: %.1e  memory: %.2fGiB(rss) %.2fGiB(arena)  "
           "tps: %s%s  tflops: %.2f  mfu: %s  %seta: %s",
           r->step, r->loss, r->grad_norm, r->lr, (double)r->peak_rss_bytes / GIB, (double)r->arena_bytes / GIB,
           format_grouped(r->tokens_per_sec, tps, sizeof tps), trained, tflops, mfu_s, comm,
           tt_format_eta(eta, eta_s, sizeof eta_s));

    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddNumberToObject(o, "step", (double)r->step);
        cJSON_AddNumberToObject(o, "loss", r->loss);
        cJSON_AddNumberToObject(o, "grad_norm", r->grad_norm);
        cJSON_AddNumberToObject(o, "lr", r->lr);
        cJSON_AddNumberToObject(o, "tokens_per_sec", r->tokens_per_sec);
        if (r->trained_per_sec > 0) cJSON_AddNumberToObject(o, "trained_tokens_per_sec", r->trained_per_sec);
        cJSON_AddNumberToObject(o, "tflops", tflops);
        cJSON_AddNumberToObject(o, "mfu", f.mfu);
        if (r->flops_per_token_executed > 0) cJSON_AddNumberToObject(o, "mfu_attention_executed", f.mfu_executed);
        if (f.note[0]) cJSON_AddStringToObject(o, "mfu_note", f.note);
        cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)r->peak_rss_bytes);
        cJSON_AddNumberToObject(o, "arena_bytes", (double)r->arena_bytes);
        cJSON_AddNumberToObject(o, "elapsed_sec", r->elapsed_sec);
        cJSON_AddNumberToObject(o, "eta_sec", eta >= 0.0 ? eta : NAN);
        if (r->world > 1) {
            cJSON_AddNumberToObject(o, "world", r->world);
            cJSON_AddNumberToObject(o, "comm_wait_frac", r->comm_wait_frac);
        }
        if (r->has_aux) cJSON_AddNumberToObject(o, "aux_loss", r->aux_loss);
        if (r->moe_layers > 0) { /* per MoE layer */
            cJSON_AddItemToObject(o, "moe_load_max", cJSON_CreateDoubleArray(r->moe_load_max, r->moe_layers));
            cJSON_AddItemToObject(o, "moe_load_min", cJSON_CreateDoubleArray(r->moe_load_min, r->moe_layers));
            cJSON_AddItemToObject(o, "moe_bias_spread", cJSON_CreateDoubleArray(r->moe_bias_spread, r->moe_layers));
        }
        if (r->ep > 1) {
            cJSON_AddNumberToObject(o, "ep_recv_max_over_mean", r->ep_recv_max_over_mean);
            cJSON_AddNumberToObject(o, "ep_wait_frac", r->ep_wait_frac);
        }
    }
    if (write_record(m, o)) return -1;

    const char *tags[10] = {"loss_metrics/global_avg_loss", "lr", "throughput(tps)", "tflops",
                            "memory/peak_rss(GiB)", "memory/arena(GiB)"};
    double v[10] = {r->loss, r->lr, r->tokens_per_sec, tflops, (double)r->peak_rss_bytes / GIB,
                    (double)r->arena_bytes / GIB};
    int n = 6;
    if (isfinite(f.mfu)) tags[n] = "mfu(%)", v[n++] = f.mfu; /* a figure that is not stated is not plotted */
    if (r->flops_per_token_executed > 0 && isfinite(f.mfu_executed))
        tags[n] = "mfu_attention_executed(%)", v[n++] = f.mfu_executed;
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

void tt_metrics_mean_mfu_judged(const tt_metrics *m, tt_mfu *out)
{
    /* the mean of tps_r * fpt_r over the records is mean(tps) * (sum tps_r * fpt_r / sum tps_r) */
    double fpt_exec = m->sum_tps_executed > 0 ? m->sum_flops_executed / m->sum_tps_executed : 0.0;
    tt_mfu_judge(tt_metrics_mean_tps(m), m->flops_per_token, fpt_exec, m->n_records ? m->peak_gflops : 0.0,
                 m->peak_source, out);
}

double tt_metrics_mean_mfu(const tt_metrics *m)
{
    tt_mfu f;
    tt_metrics_mean_mfu_judged(m, &f);
    return f.mfu;
}

void tt_metrics_summarize_mfu(tt_metrics *m, tt_run_summary *s, const char *dtype)
{
    tt_mfu f;
    tt_metrics_mean_mfu_judged(m, &f);
    const double fpt_exec = m->sum_tps_executed > 0 ? m->sum_flops_executed / m->sum_tps_executed : 0.0;
    s->mfu_mean = f.mfu;
    s->mfu_mean_attention_executed = f.mfu_executed;
    s->flops_per_token_attention_executed = fpt_exec;
    s->peak_gflops = m->peak_gflops;
    snprintf(m->mean_note, sizeof m->mean_note, "%s", f.note);
    s->mfu_note = m->mean_note[0] ? m->mean_note : NULL;
    if (!m->n_records || !(m->peak_gflops > 0)) return;
    char formula[32] = "n/a", pct[32] = "n/a", executed[200] = "";
    if (isfinite(f.mfu)) snprintf(formula, sizeof formula, "%.2f%%", f.mfu);
    if (isfinite(f.mfu_executed)) snprintf(pct, sizeof pct, "%.2f%%", f.mfu_executed);
    if (fpt_exec > 0)
        snprintf(executed, sizeof executed, "; %s with attention as executed (%.4g MFLOP/token: causal, within documents)",
                 pct, fpt_exec / 1e6);
    tt_log("MFU %s of the %.4g GFLOP/s %s peak (%s), counting %.4g MFLOP/token (6*N + 12*L*d*T: full attention)%s%s%s",
           formula, m->peak_gflops, dtype, m->peak_source ? m->peak_source : "given", m->flops_per_token / 1e6,
           executed, f.note[0] ? "; not stated: " : "", f.note);
}

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
    if (s->description && s->description[0]) cJSON_AddStringToObject(o, "description", s->description);
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
    if (s->world > 1) cJSON_AddNumberToObject(o, "world", s->world);
    if (s->train_state_bytes > 0) cJSON_AddNumberToObject(o, "train_state_bytes_per_rank", s->train_state_bytes);
    cJSON_AddNumberToObject(o, "total_tokens", (double)s->total_tokens);
    cJSON_AddNumberToObject(o, "wall_seconds", s->wall_seconds);
    cJSON_AddNumberToObject(o, "mean_tokens_per_sec", s->mean_tokens_per_sec);
    cJSON_AddNumberToObject(o, "flops_per_token", s->flops_per_token);
    cJSON_AddNumberToObject(o, "mfu_mean", s->mfu_mean);
    if (s->flops_per_token_attention_executed > 0) {
        cJSON_AddNumberToObject(o, "flops_per_token_attention_executed", s->flops_per_token_attention_executed);
        cJSON_AddNumberToObject(o, "mfu_mean_attention_executed", s->mfu_mean_attention_executed);
    }
    if (s->mfu_note) cJSON_AddStringToObject(o, "mfu_note", s->mfu_note);
    if (s->peak_gflops > 0) cJSON_AddNumberToObject(o, "peak_gflops", s->peak_gflops);
    cJSON_AddStringToObject(o, "peak_source", s->peak_source ? s->peak_source : "config");
    if (extra) cJSON_AddItemToObject(o, "extra", extra);

    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return tt_errorf("metrics: out of memory printing summary.json");
    tt_err err = write_atomic(dump_folder, "summary.json", text);
    cJSON_free(text);
    return err;
}

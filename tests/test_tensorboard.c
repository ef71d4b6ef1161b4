/* test_tensorboard.c — TensorBoard event files: CRC-32C vectors, the writer
 * read back by our reader (values, steps, tags, file version, file name),
 * corrupt bytes refused, a cut-off tail left out; and a training run with
 * metrics.enable_tensorboard whose event files hold every logged figure of
 * every logged step, resumed into a second file. Where pip's tensorboard is
 * installed, tests/tensorboard_check.py loads the folder with its own reader. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/tfevents.h"
#include "harness.h"
#include "titan/config.h"
#include "titan/titan.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static int is_event_file(const struct dirent *d) { return strncmp(d->d_name, "events.out.tfevents.", 20) == 0; }

/* The event files of a folder in name order (TensorBoard's reading order); returns how many, names in out. */
static int event_files(const char *dir, char out[][512], int cap)
{
    struct dirent **list;
    int n = scandir(dir, &list, is_event_file, alphasort);
    if (n < 0) return 0;
    for (int i = 0; i < n; i++) {
        if (i < cap) snprintf(out[i], 512, "%s/%s", dir, list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return n < cap ? n : cap;
}

static const tt_tb_scalar *find(const tt_tb_events *e, const char *tag, int64_t step)
{
    for (size_t i = 0; i < e->n_scalars; i++)
        if (e->scalars[i].step == step && !strcmp(e->scalars[i].tag, tag)) return &e->scalars[i];
    return NULL;
}

/* ---- CRC-32C ------------------------------------------------------------------ */
static void test_crc(void)
{
    /* RFC 3720 B.4 and the usual check value */
    uint8_t b[32];
    CHECK(tt_crc32c("123456789", 9) == 0xE3069283u);
    CHECK(tt_crc32c("", 0) == 0);
    memset(b, 0, sizeof b);
    CHECK(tt_crc32c(b, 32) == 0x8A9136AAu);
    memset(b, 0xff, sizeof b);
    CHECK(tt_crc32c(b, 32) == 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(tt_crc32c(b, 32) == 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK(tt_crc32c(b, 32) == 0x113FDB5Cu);
    /* TFRecord's mask, as tensorboard's own reader computes it:
     *   python3 -c "from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c;
     *               import struct; print(hex(masked_crc32c(b'123456789')), hex(masked_crc32c(b'')),
     *               hex(masked_crc32c(struct.pack('<Q', 24))))" */
    CHECK(tt_crc32c_masked("123456789", 9) == 0xc78ab0e5u);
    CHECK(tt_crc32c_masked("", 0) == 0xa282ead8u);
    uint8_t h[12];
    tt_tfrecord_header(24, h);
    CHECK(h[0] == 24 && h[1] == 0 && h[7] == 0);
    CHECK(h[8] == 0xa3 && h[9] == 0x7f && h[10] == 0x4b && h[11] == 0x22); /* 0x224b7fa3, little-endian */
}

/* ---- writer and reader ---------------------------------------------------------- */
static const char *const TAGS[3] = {"loss_metrics/global_avg_loss", "lr", "memory/peak_rss(GiB)"};

/* Byte offsets where each record of a well-formed file starts (and the end), walked from the length fields. */
static int record_bounds(const uint8_t *p, size_t len, size_t *at, int cap)
{
    int n = 0;
    size_t off = 0;
    while (off + 12 <= len && n < cap) {
        uint64_t l = 0;
        for (int i = 0; i < 8; i++) l |= (uint64_t)p[off + i] << (8 * i);
        at[n++] = off;
        off += 16 + (size_t)l;
    }
    at[n] = off;
    return n;
}

static void test_write_read(const char *tmp)
{
    char dir[512], files[4][512];
    snprintf(dir, sizeof dir, "%s/unit/tb", tmp); /* created by the writer, parents included */
    double t0 = (double)time(NULL);
    tt_tb_writer *w = tt_tb_open(dir);
    CHECK_MSG(w != NULL, "%s", tt_last_error());
    if (!w) return;
    int rc = tt_tb_write_session_start(w, 1);
    for (int step = 1; step <= 5; step++) {
        float v[3] = {4.0f / (float)step, 1e-3f * (float)step, 0.125f};
        rc |= tt_tb_write_scalars(w, step, 3, TAGS, v);
    }
    const char *neg[1] = {"a/negative step"};
    float nv[1] = {-2.5f};
    rc |= tt_tb_write_scalars(w, -7, 1, neg, nv);
    /* a second writer in the same second gets a file of its own */
    tt_tb_writer *w2 = tt_tb_open(dir);
    CHECK_MSG(w2 && strcmp(tt_tb_path(w), tt_tb_path(w2)) != 0, "second writer: %s",
              w2 ? tt_tb_path(w2) : tt_last_error());
    char path[600];
    snprintf(path, sizeof path, "%s", tt_tb_path(w));
    rc |= tt_tb_close(w) | tt_tb_close(w2);
    CHECK_MSG(rc == 0, "writing: %s", tt_last_error());
    double t1 = (double)time(NULL) + 1;
    /* the clock of a shared or virtual machine may be stepped while the test runs (seen in CI): the times written
     * must be now within a minute, which still tells a real wall clock from zeros or garbage */
    t0 -= 60, t1 += 60;

    /* the name TensorFlow gives: events.out.tfevents.<10-digit seconds>.<hostname> */
    CHECK(event_files(dir, files, 4) == 2);
    const char *base = strrchr(path, '/') + 1;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    long long secs = 0;
    int used = 0;
    CHECK_MSG(sscanf(base, "events.out.tfevents.%10lld.%n", &secs, &used) == 1 && used == 31 &&
                  secs >= (long long)t0 - 1 && secs <= (long long)t1 && strcmp(base + used, host) == 0,
              "file name %s", base);

    tt_tb_events e;
    rc = tt_tb_read_file(path, &e);
    CHECK_MSG(rc == 0, "%s", tt_last_error());
    if (rc) return;
    CHECK_MSG(!strcmp(e.file_version, "brain.Event:2"), "file_version \"%s\"", e.file_version);
    CHECK(e.n_records == 1 + 1 + 5 + 1);
    CHECK(e.session_start_step == 1);
    CHECK(e.tail_bytes == 0);
    CHECK(e.n_scalars == 16);
    for (int step = 1; step <= 5 && e.n_scalars == 16; step++)
        for (int k = 0; k < 3; k++) {
            const tt_tb_scalar *s = &e.scalars[3 * (step - 1) + k];
            float want = k == 0 ? 4.0f / (float)step : k == 1 ? 1e-3f * (float)step : 0.125f;
            CHECK_MSG(s->step == step && !strcmp(s->tag, TAGS[k]) && s->value == want && s->wall_time >= t0 - 1 &&
                          s->wall_time <= t1,
                      "scalar %d: step %lld tag %s value %g time %.3f", 3 * (step - 1) + k, (long long)s->step, s->tag,
                      s->value, s->wall_time);
        }
    const tt_tb_scalar *s = find(&e, "a/negative step", -7);
    CHECK(s && s->value == -2.5f);
    tt_tb_events_free(&e);

    size_t len;
    uint8_t *bytes = (uint8_t *)th_read_file(path, &len);
    size_t at[16];
    int nrec = record_bounds(bytes, len, at, 15);
    CHECK(nrec == 8 && at[nrec] == len);

    /* any flipped byte is refused, by the length's or the data's CRC, with the record's offset */
    int refused = 0, named = 0;
    for (size_t i = 0; i < len; i++) {
        bytes[i] ^= 0x20;
        tt_tb_events c;
        if (tt_tb_parse(bytes, len, "flip.tfevents", &c) != 0) {
            refused++;
            const char *msg = tt_last_error();
            named += strstr(msg, "flip.tfevents: record ") == msg && strstr(msg, "CRC does not match") &&
                     strstr(msg, "corrupt");
            if (i == 0) printf("a flipped byte: %s\n", msg);
        } else
            tt_tb_events_free(&c);
        bytes[i] ^= 0x20;
    }
    CHECK_MSG(refused == (int)len && named == (int)len, "%d of %zu flipped bytes refused, %d with the message", refused,
              len, named);

    /* a file cut anywhere (a writer killed mid-record) reads every whole record before the cut and reports the rest */
    int ok = 0;
    for (size_t cut = 0; cut <= len; cut++) {
        int whole = 0;
        while (whole < nrec && at[whole + 1] <= cut) whole++;
        tt_tb_events c;
        if (tt_tb_parse(bytes, cut, "cut.tfevents", &c) != 0) {
            CHECK_MSG(0, "cut at %zu: %s", cut, tt_last_error());
            continue;
        }
        size_t want_scalars = whole <= 2 ? 0 : whole <= 7 ? (size_t)(3 * (whole - 2)) : 16;
        ok += c.n_records == whole && c.tail_bytes == cut - at[whole] && c.n_scalars == want_scalars;
        if (cut == len - 5)
            printf("cut 5 bytes short: %ld whole records, %zu tail bytes left out\n", c.n_records, c.tail_bytes);
        tt_tb_events_free(&c);
    }
    CHECK_MSG(ok == (int)len + 1, "%d of %zu cuts read as expected", ok, len + 1);
    free(bytes);
}

/* A record holding `payload` as its Event, framed with correct CRCs: what the protobuf decoder sees. */
static int parse_payload(const uint8_t *payload, size_t n, tt_tb_events *e)
{
    uint8_t buf[256];
    tt_tfrecord_header(n, buf);
    memcpy(buf + 12, payload, n);
    uint32_t c = tt_crc32c_masked(payload, n);
    for (int i = 0; i < 4; i++) buf[12 + n + i] = (uint8_t)(c >> (8 * i));
    return tt_tb_parse(buf, n + 16, "pb.tfevents", e);
}

static void test_protobuf(void)
{
    static const struct {
        const char *what;
        uint8_t p[24];
        size_t n;
        const char *error; /* NULL: accepted */
    } cases[] = {
        {"a group (wire type 3)", {0x0B}, 1, "wire type 3"},
        {"a step varint cut short", {0x10, 0x80}, 2, "varint runs past"},
        {"an 11-byte varint", {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 12,
         "exceeds 10 bytes"},
        {"a summary longer than the event", {0x2A, 0x05, 0x0A}, 3, "longer than the rest"},
        {"a wall_time that is not fixed64", {0x08, 0x01}, 2, "wall_time is not a fixed64"},
        {"a tag holding NUL", {0x2A, 0x0A, 0x0A, 0x08, 0x0A, 0x01, 0x00, 0x15, 0x00, 0x00, 0x80, 0x3f}, 12, "NUL"},
        {"field number 0", {0x02, 0x00}, 2, "field number"},
        /* accepted: an unknown field (source_metadata, 10) is skipped, and a value with no simple_value too */
        {"unknown fields", {0x52, 0x00, 0x10, 0x07, 0x2A, 0x05, 0x0A, 0x03, 0x0A, 0x01, 0x78}, 11, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tt_tb_events e;
        int rc = parse_payload(cases[i].p, cases[i].n, &e);
        if (cases[i].error)
            CHECK_MSG(rc != 0 && strstr(tt_last_error(), "pb.tfevents: record 0 at byte 0: bad Event: ") &&
                          strstr(tt_last_error(), cases[i].error),
                      "%s: rc %d, \"%s\"", cases[i].what, rc, rc ? tt_last_error() : "");
        else {
            CHECK_MSG(rc == 0 && e.n_records == 1 && e.n_scalars == 0, "%s: %s", cases[i].what,
                      rc ? tt_last_error() : "");
            if (!rc) tt_tb_events_free(&e);
        }
    }
    tt_tb_events e;
    CHECK(tt_tb_read_file("/nonexistent/events.out.tfevents.1", &e) != 0 && strstr(tt_last_error(), "/nonexistent/"));
}

/* ---- a training run ------------------------------------------------------------- */
static int set(tt_config *c, const char *key, const char *value)
{
    int rc = tt_config_set(c, key, value, "test");
    CHECK_MSG(rc == 0, "%s = %s: %s", key, value, tt_last_error());
    return rc;
}

static int train(const char *dump, int steps, int load_step)
{
    tt_config *c = th_alloc(1, sizeof *c);
    char s[32];
    tt_config_defaults(c);
    int rc = set(c, "job.dump_folder", dump) | set(c, "metrics.enable_tensorboard", "true") |
             set(c, "metrics.save_jsonl", "true") | set(c, "metrics.log_freq", "2") |
             set(c, "metrics.peak_tflops", "1") | set(c, "model.dim", "32") | set(c, "model.n_layers", "1") |
             set(c, "model.n_heads", "2") | set(c, "model.n_kv_heads", "2") | set(c, "model.ffn_dim", "64") |
             set(c, "training.local_batch_size", "2") | set(c, "training.seq_len", "256") |
             set(c, "training.mixed_precision_param", "float32") | set(c, "synthetic.train_tokens", "20000") |
             set(c, "synthetic.val_tokens", "2000") | set(c, "validation.enable", "true") |
             set(c, "validation.freq", "3") | set(c, "validation.steps", "2") | set(c, "checkpoint.enable", "true") |
             set(c, "checkpoint.interval", "3") | set(c, "checkpoint.keep_latest_k", "0") |
             set(c, "generate.max_new_tokens", "0");
    snprintf(s, sizeof s, "%d", steps);
    rc |= set(c, "training.steps", s);
    if (load_step >= 0) {
        snprintf(s, sizeof s, "%d", load_step);
        rc |= set(c, "checkpoint.load_step", s) | set(c, "checkpoint.enable", "false");
    }
    if (!rc) rc = tt_config_finalize(c);
    if (!rc) rc = tt_train(c);
    CHECK_MSG(rc == 0, "training %d steps: %s", steps, tt_last_error());
    free(c);
    return rc;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A record's figure and the scalar that must hold it. */
typedef struct {
    const char *field, *tag;
    double scale;
} figure;
static const figure train_figs[] = {
    {"loss", "loss_metrics/global_avg_loss", 1},     {"grad_norm", "grad_norm", 1},
    {"lr", "lr", 1},                                  {"tokens_per_sec", "throughput(tps)", 1},
    {"tflops", "tflops", 1},                          {"mfu", "mfu(%)", 1},
    {"mfu_attention_executed", "mfu_attention_executed(%)", 1},
    {"peak_rss_bytes", "memory/peak_rss(GiB)", GIB}, {"arena_bytes", "memory/arena(GiB)", GIB},
};
static const figure val_figs[] = {{"val_loss", "validation_metrics/loss", 1},
                                  {"val_ppl", "validation_metrics/perplexity", 1}};

/* Every record of metrics.jsonl from line `first` on has each figure in e at its step, as the float of the
 * record's value, and the corpus floors beside them; e holds nothing else. Returns the lines read. */
static int check_run(const tt_tb_events *e, const char *jsonl, int first, double floor_train, double floor_val)
{
    char *text = th_read_file(jsonl, NULL), *line = text;
    int i = 0, checked = 0;
    size_t expect = 0;
    for (char *nl; text && (nl = strchr(line, '\n')); line = nl + 1, i++) {
        *nl = '\0';
        if (i < first) continue;
        cJSON *o = cJSON_Parse(line);
        int val = cJSON_GetObjectItemCaseSensitive(o, "val_loss") != NULL;
        long step = (long)num(o, "step");
        const figure *f = val ? val_figs : train_figs;
        int n = val ? 2 : (int)(sizeof train_figs / sizeof train_figs[0]);
        for (int k = 0; k <= n; k++) {
            const char *tag = k < n ? f[k].tag : val ? "validation_metrics/corpus_floor" : "loss_metrics/corpus_floor";
            double want = k < n ? num(o, f[k].field) / f[k].scale : val ? floor_val : floor_train;
            const tt_tb_scalar *s = find(e, tag, step);
            CHECK_MSG(s && s->value == (float)want, "step %ld %s: %s %g", step, tag, s ? "holds" : "missing",
                      s ? s->value : 0.0);
            checked++;
        }
        expect += (size_t)n + 1;
        cJSON_Delete(o);
    }
    CHECK_MSG(e->n_scalars == expect, "%zu scalars in the event file, %zu figures in metrics.jsonl", e->n_scalars,
              expect);
    printf("%d figures of %d metrics.jsonl records found in the event file\n", checked, i - first);
    free(text);
    return i;
}

static void test_training(const char *tmp)
{
    char dump[512], tb[600], jsonl[600], corpus[600], files[4][512];
    snprintf(dump, sizeof dump, "%s/run", tmp);
    snprintf(tb, sizeof tb, "%s/tb", dump);
    snprintf(jsonl, sizeof jsonl, "%s/metrics.jsonl", dump);
    snprintf(corpus, sizeof corpus, "%s/data/corpus.json", dump);
    if (train(dump, 6, -1)) return;

    char *ctext = th_read_file(corpus, NULL);
    cJSON *cj = ctext ? cJSON_Parse(ctext) : NULL, *st = cJSON_GetObjectItemCaseSensitive(cj, "stats");
    double floor_val = num(st, "floor_nats"), floor_train = num(st, "train_floor_nats");
    CHECK_MSG(floor_val > 0 && floor_train > 0, "the corpus floors in %s", corpus);
    cJSON_Delete(cj);
    free(ctext);

    /* logged steps 1, 2, 4, 6; validation at 3, 6 */
    CHECK(event_files(tb, files, 4) == 1);
    tt_tb_events e;
    if (tt_tb_read_file(files[0], &e) != 0) {
        CHECK_MSG(0, "%s", tt_last_error());
        return;
    }
    CHECK(!strcmp(e.file_version, "brain.Event:2") && e.session_start_step == 1 && e.tail_bytes == 0);
    int lines = check_run(&e, jsonl, 0, floor_train, floor_val);
    CHECK_MSG(lines == 6, "%d records in metrics.jsonl", lines);
    CHECK(find(&e, "lr", 1) && find(&e, "lr", 2) && find(&e, "lr", 4) && find(&e, "lr", 6) && !find(&e, "lr", 3));
    CHECK(find(&e, "validation_metrics/loss", 3) && find(&e, "validation_metrics/loss", 6));
    tt_tb_events_free(&e);

    /* resumed from step 3 to step 8: a second file that starts a session at step 4, so TensorBoard replaces the
     * first run's steps 4 and 6 with this one's */
    if (train(dump, 8, 3)) return;
    CHECK(event_files(tb, files, 4) == 2);
    if (tt_tb_read_file(files[1], &e) != 0) {
        CHECK_MSG(0, "%s", tt_last_error());
        return;
    }
    CHECK_MSG(e.session_start_step == 4, "the resumed file starts a session at step %lld",
              (long long)e.session_start_step);
    check_run(&e, jsonl, lines, floor_train, floor_val);
    CHECK(!find(&e, "lr", 2) && find(&e, "lr", 4) && find(&e, "lr", 8) && find(&e, "validation_metrics/loss", 8));
    tt_tb_events_free(&e);

    /* pip's tensorboard, where installed, must read the folder as one run with the same figures */
    if (system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0) {
        th_skip_part("the tensorboard cross-check (python3 cannot import tensorboard: make venv)");
        return;
    }
    char cmd[2048], theirs[600];
    snprintf(theirs, sizeof theirs, "%s/written_by_tensorboard", tmp);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/tensorboard_check.py %s %s %s", TITAN_SOURCE_DIR, tb, jsonl, theirs);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s failed (%d)", cmd, rc);
    /* and our reader reads what tensorboard's writer wrote */
    if (event_files(theirs, files, 4) != 1 || tt_tb_read_file(files[0], &e) != 0) {
        CHECK_MSG(0, "no event file from tensorboard's writer in %s: %s", theirs, tt_last_error());
        return;
    }
    CHECK(!strcmp(e.file_version, "brain.Event:2") && e.n_records == 5 && e.session_start_step == 2 &&
          e.n_scalars == 6);
    for (int step = 1; step <= 3; step++) {
        const tt_tb_scalar *loss = find(&e, "loss", step), *lr = find(&e, "lr", step);
        CHECK_MSG(loss && loss->value == 1.0f / (float)step && loss->wall_time == 1.5 && lr && lr->value == 0.001f,
                  "tensorboard's file, step %d", step);
    }
    printf("read tensorboard's own event file: %zu scalars\n", e.n_scalars);
    tt_tb_events_free(&e);
}

int main(void)
{
    char tmp[] = "/tmp/titan_tb_XXXXXX";
    if (!mkdtemp(tmp)) return th_skip("test_tensorboard", "no temporary folder");
    test_crc();
    test_write_read(tmp);
    test_protobuf();
    test_training(tmp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return th_done("test_tensorboard");
}

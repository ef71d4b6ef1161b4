/* tfevents.c — TensorBoard event files by hand: CRC-32C, TFRecord framing,
 * Event/Summary protobufs encoded and decoded as varints and fixed fields. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "formats/safetensors.h" /* tt_mkdir_p */
#include "formats/tfevents.h"

/* ---- CRC-32C ------------------------------------------------------------------
 * Bit by bit: event records are tens of bytes, and a reader of a large file
 * still checks about 300 MB/s, so a table (or SSE4.2's crc32) is not worth it. */
uint32_t tt_crc32c(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

/* TFRecord stores CRCs rotated and offset, so that the CRC of data that
 * itself holds CRCs is not trivially related to them. */
uint32_t tt_crc32c_masked(const void *data, size_t len)
{
    uint32_t c = tt_crc32c(data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void le_store(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_load(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void tt_tfrecord_header(uint64_t len, uint8_t out[12])
{
    le_store(out, len, 8);
    le_store(out + 8, tt_crc32c_masked(out, 8), 4);
}

/* ---- protobuf encoding ---------------------------------------------------------
 * Field keys are (field number << 3) | wire type: 0 varint, 1 fixed64,
 * 2 length-delimited, 5 fixed32. */
enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
#define KEY(field, wire) ((uint8_t)((field) << 3 | (wire)))

/* Event fields */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5, EV_SESSION_LOG = 7 };
/* Summary: repeated Value value = 1; Value: tag = 1, simple_value = 2; SessionLog: status = 1 */
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} bytes;

static void put(bytes *b, const void *src, size_t n)
{
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_byte(bytes *b, uint8_t c) { put(b, &c, 1); }

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) n++;
    return n;
}

static void put_varint(bytes *b, uint64_t v)
{
    for (; v >= 0x80; v >>= 7) put_byte(b, (uint8_t)(v | 0x80));
    put_byte(b, (uint8_t)v);
}

static void put_fixed(bytes *b, uint64_t v, int n)
{
    uint8_t t[8];
    le_store(t, v, n);
    put(b, t, (size_t)n);
}

static void put_string(bytes *b, int field, const char *s, size_t n)
{
    put_byte(b, KEY(field, WIRE_LEN));
    put_varint(b, n);
    put(b, s, n);
}

/* ---- writer ----------------------------------------------------------------- */
struct tt_tb_writer {
    FILE *f;
    bytes rec; /* the record being built: 12 header bytes, the Event, then its CRC */
    char path[4200];
};

const char *tt_tb_path(const tt_tb_writer *w) { return w->path; }

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Start an Event: room for the header, then wall_time and step. */
static void event_begin(tt_tb_writer *w, int64_t step)
{
    static const uint8_t header[12];
    double t = wall_now();
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    w->rec.n = 0;
    put(&w->rec, header, sizeof header);
    put_byte(&w->rec, KEY(EV_WALL_TIME, WIRE_FIXED64));
    put_fixed(&w->rec, bits, 8);
    put_byte(&w->rec, KEY(EV_STEP, WIRE_VARINT));
    put_varint(&w->rec, (uint64_t)step); /* int64: negative steps take 10 bytes, as protobuf writes them */
}

/* Frame the Event and write the record, flushed. */
static tt_err event_end(tt_tb_writer *w)
{
    size_t len = w->rec.n - 12;
    if (!w->rec.oom) tt_tfrecord_header(len, w->rec.p);
    if (!w->rec.oom) put_fixed(&w->rec, tt_crc32c_masked(w->rec.p + 12, len), 4);
    if (w->rec.oom) return tt_errorf("%s: out of memory building an event record", w->path);
    if (fwrite(w->rec.p, 1, w->rec.n, w->f) != w->rec.n || fflush(w->f) != 0)
        return tt_errorf("%s: cannot write an event record: %s", w->path, strerror(errno));
    return TT_OK;
}

tt_tb_writer *tt_tb_open(const char *dir)
{
    if (!dir || !dir[0]) {
        tt_errorf("tensorboard: no folder for the event file");
        return NULL;
    }
    if (tt_mkdir_p(dir)) return NULL;
    /* the host's name as TensorFlow puts it in the file name, made safe for one */
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    for (char *s = host; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '-' || *s == '_'))
            *s = '_';

    tt_tb_writer *w = calloc(1, sizeof *w);
    if (!w) {
        tt_errorf("%s: out of memory", dir);
        return NULL;
    }
    long long secs = (long long)time(NULL);
    int fd = -1;
    for (int k = 0; k < 1000 && fd < 0; k++) {
        char suffix[16] = "";
        if (k) snprintf(suffix, sizeof suffix, ".%d", k);
        int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s%s", dir, secs, host, suffix);
        if (n < 0 || (size_t)n >= sizeof w->path) {
            tt_errorf("%s: folder path too long for an event file", dir);
            free(w);
            return NULL;
        }
        fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            tt_errorf("%s: cannot create: %s", w->path, strerror(errno));
            free(w);
            return NULL;
        }
    }
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        tt_errorf("%s: cannot create an event file%s", w->path, fd < 0 ? " (1000 files of this second exist)" : "");
        if (fd >= 0) close(fd);
        free(w);
        return NULL;
    }
    event_begin(w, 0);
    put_string(&w->rec, EV_FILE_VERSION, TT_TB_FILE_VERSION, strlen(TT_TB_FILE_VERSION));
    if (event_end(w)) {
        tt_tb_close(w);
        return NULL;
    }
    return w;
}

tt_err tt_tb_write_scalars(tt_tb_writer *w, int64_t step, int n, const char *const *tags, const float *values)
{
    /* Summary { Value { tag, simple_value } ... }: sizes first, since each
     * message is preceded by its length */
    size_t summary = 0;
    for (int i = 0; i < n; i++) {
        size_t tl = strlen(tags[i]), value = 1 + varint_len(tl) + tl + 5;
        summary += 1 + varint_len(value) + value;
    }
    event_begin(w, step);
    put_byte(&w->rec, KEY(EV_SUMMARY, WIRE_LEN));
    put_varint(&w->rec, summary);
    for (int i = 0; i < n; i++) {
        size_t tl = strlen(tags[i]);
        uint32_t bits;
        memcpy(&bits, &values[i], sizeof bits);
        put_byte(&w->rec, KEY(SUMMARY_VALUE, WIRE_LEN));
        put_varint(&w->rec, 1 + varint_len(tl) + tl + 5);
        put_string(&w->rec, VALUE_TAG, tags[i], tl);
        put_byte(&w->rec, KEY(VALUE_SIMPLE, WIRE_FIXED32));
        put_fixed(&w->rec, bits, 4);
    }
    return event_end(w);
}

tt_err tt_tb_write_session_start(tt_tb_writer *w, int64_t step)
{
    event_begin(w, step);
    put_byte(&w->rec, KEY(EV_SESSION_LOG, WIRE_LEN));
    put_varint(&w->rec, 2);
    put_byte(&w->rec, KEY(SESSION_STATUS, WIRE_VARINT));
    put_varint(&w->rec, SESSION_START);
    return event_end(w);
}

tt_err tt_tb_close(tt_tb_writer *w)
{
    if (!w) return TT_OK;
    tt_err err = TT_OK;
    if (w->f && fclose(w->f) != 0) err = tt_errorf("%s: cannot close: %s", w->path, strerror(errno));
    free(w->rec.p);
    free(w);
    return err;
}

/* ---- protobuf decoding -------------------------------------------------------
 * Each decoder returns NULL, or what is wrong (a fixed string: the caller
 * names the file, record and offset). */
typedef struct {
    const uint8_t *p, *end;
} pbuf;

static int get_varint(pbuf *b, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        if (i == 9 && c > 1) return -1; /* bits beyond 64 */
        x |= (uint64_t)(c & 0x7f) << (7 * i);
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* One field: its number and wire type, and its value: a number (varint,
 * fixed64, fixed32) or the bytes of a length-delimited field. */
typedef struct {
    uint64_t number;
    unsigned wire;
    uint64_t num;
    pbuf sub;
} pfield;

static const char *next_field(pbuf *b, pfield *f)
{
    uint64_t key;
    if (get_varint(b, &key)) return "a field key runs past the end of its message or exceeds 10 bytes";
    f->number = key >> 3, f->wire = (unsigned)(key & 7);
    if (f->number == 0 || f->number > 0x1FFFFFFF) return "a field number outside [1, 2^29)";
    switch (f->wire) {
    case WIRE_VARINT:
        if (get_varint(b, &f->num)) return "a varint runs past the end of its message or exceeds 10 bytes";
        return NULL;
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
        size_t n = f->wire == WIRE_FIXED64 ? 8 : 4;
        if ((size_t)(b->end - b->p) < n) return "a fixed-size field runs past the end of its message";
        f->num = le_load(b->p, (int)n);
        b->p += n;
        return NULL;
    }
    case WIRE_LEN: {
        uint64_t n;
        if (get_varint(b, &n)) return "a length runs past the end of its message or exceeds 10 bytes";
        if (n > (uint64_t)(b->end - b->p)) return "a length-delimited field is longer than the rest of its message";
        f->sub = (pbuf){b->p, b->p + n};
        b->p += n;
        return NULL;
    }
    default:
        return "a field of wire type 3, 4, 6 or 7 (groups or invalid)";
    }
}

static const char *add_scalar(tt_tb_events *e, size_t *cap, const pbuf *tag, float value)
{
    size_t tl = (size_t)(tag->end - tag->p);
    if (tl && memchr(tag->p, 0, tl)) return "a Summary.Value tag holds a NUL byte";
    if (e->n_scalars == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        tt_tb_scalar *s = realloc(e->scalars, nc * sizeof *s);
        if (!s) return "out of memory";
        e->scalars = s, *cap = nc;
    }
    char *t = malloc(tl + 1);
    if (!t) return "out of memory";
    if (tl) memcpy(t, tag->p, tl);
    t[tl] = '\0';
    e->scalars[e->n_scalars++] = (tt_tb_scalar){0, 0.0, value, t};
    return NULL;
}

/* Summary.Value: a scalar when it has simple_value, else skipped. */
static const char *decode_value(pbuf b, tt_tb_events *e, size_t *cap)
{
    pbuf tag = {b.p, b.p}; /* proto3's default: "" */
    int has_simple = 0;
    float value = 0.0f;
    while (b.p < b.end) {
        pfield f;
        const char *why = next_field(&b, &f);
        if (why) return why;
        if (f.number == VALUE_TAG) {
            if (f.wire != WIRE_LEN) return "Summary.Value.tag is not length-delimited";
            tag = f.sub;
        } else if (f.number == VALUE_SIMPLE) {
            if (f.wire != WIRE_FIXED32) return "Summary.Value.simple_value is not a fixed32 float";
            uint32_t bits = (uint32_t)f.num;
            memcpy(&value, &bits, sizeof value);
            has_simple = 1;
        }
    }
    return has_simple ? add_scalar(e, cap, &tag, value) : NULL;
}

static const char *decode_summary(pbuf b, tt_tb_events *e, size_t *cap)
{
    while (b.p < b.end) {
        pfield f;
        const char *why = next_field(&b, &f);
        if (why) return why;
        if (f.number != SUMMARY_VALUE) continue;
        if (f.wire != WIRE_LEN) return "Summary.value is not length-delimited";
        if ((why = decode_value(f.sub, e, cap))) return why;
    }
    return NULL;
}

static const char *decode_event(pbuf b, tt_tb_events *e, size_t *cap)
{
    size_t first = e->n_scalars; /* this event's scalars get its step and time, wherever those fields come */
    int64_t step = 0;
    double wall = 0.0;
    int start = 0;
    while (b.p < b.end) {
        pfield f;
        const char *why = next_field(&b, &f);
        if (why) return why;
        switch (f.number) {
        case EV_WALL_TIME:
            if (f.wire != WIRE_FIXED64) return "Event.wall_time is not a fixed64 double";
            memcpy(&wall, &f.num, sizeof wall);
            break;
        case EV_STEP:
            if (f.wire != WIRE_VARINT) return "Event.step is not a varint";
            step = (int64_t)f.num;
            break;
        case EV_FILE_VERSION: {
            if (f.wire != WIRE_LEN) return "Event.file_version is not length-delimited";
            size_t n = (size_t)(f.sub.end - f.sub.p);
            if (n >= sizeof e->file_version) return "Event.file_version is longer than 63 bytes";
            if (n && memchr(f.sub.p, 0, n)) return "Event.file_version holds a NUL byte";
            if (n) memcpy(e->file_version, f.sub.p, n);
            e->file_version[n] = '\0';
            break;
        }
        case EV_SUMMARY:
            if (f.wire != WIRE_LEN) return "Event.summary is not length-delimited";
            if ((why = decode_summary(f.sub, e, cap))) return why;
            break;
        case EV_SESSION_LOG: {
            if (f.wire != WIRE_LEN) return "Event.session_log is not length-delimited";
            pbuf s = f.sub;
            while (s.p < s.end) {
                pfield g;
                if ((why = next_field(&s, &g))) return why;
                if (g.number == SESSION_STATUS && g.wire != WIRE_VARINT) return "SessionLog.status is not a varint";
                if (g.number == SESSION_STATUS) start = g.num == SESSION_START;
            }
            break;
        }
        default: /* fields this reader does not use (graph_def, log_message, ...) */
            break;
        }
    }
    for (size_t i = first; i < e->n_scalars; i++) e->scalars[i].step = step, e->scalars[i].wall_time = wall;
    if (start) e->session_start_step = step;
    return NULL;
}

/* ---- reader ----------------------------------------------------------------- */
void tt_tb_events_free(tt_tb_events *e)
{
    for (size_t i = 0; i < e->n_scalars; i++) free(e->scalars[i].tag);
    free(e->scalars);
    memset(e, 0, sizeof *e);
    e->session_start_step = -1;
}

tt_err tt_tb_parse(const void *data, size_t len, const char *name, tt_tb_events *out)
{
    memset(out, 0, sizeof *out);
    out->session_start_step = -1;
    const uint8_t *p = data;
    size_t off = 0, cap = 0;
    while (off < len) {
        size_t left = len - off;
        if (left < 12) { /* not even a whole header: a record cut short */
            out->tail_bytes = left;
            break;
        }
        uint64_t n = le_load(p + off, 8);
        uint32_t stored = (uint32_t)le_load(p + off + 8, 4), crc = tt_crc32c_masked(p + off, 8);
        if (stored != crc) {
            tt_errorf("%s: record %ld at byte %zu: the length's CRC does not match (stored 0x%08x, computed 0x%08x): "
                      "the file is corrupt", name, out->n_records, off, stored, crc);
            goto fail;
        }
        if (left < 16 || n > left - 16) { /* a whole, checked header whose data is not all there yet */
            out->tail_bytes = left;
            break;
        }
        const uint8_t *rec = p + off + 12;
        stored = (uint32_t)le_load(rec + n, 4), crc = tt_crc32c_masked(rec, (size_t)n);
        if (stored != crc) {
            tt_errorf("%s: record %ld at byte %zu: the data's CRC does not match (stored 0x%08x, computed 0x%08x "
                      "over %llu bytes): the file is corrupt", name, out->n_records, off, stored, crc,
                      (unsigned long long)n);
            goto fail;
        }
        const char *why = decode_event((pbuf){rec, rec + n}, out, &cap);
        if (why) {
            tt_errorf("%s: record %ld at byte %zu: bad Event: %s", name, out->n_records, off, why);
            goto fail;
        }
        out->n_records++;
        off += 16 + (size_t)n;
    }
    return TT_OK;
fail:
    tt_tb_events_free(out);
    return -1;
}

tt_err tt_tb_read_file(const char *path, tt_tb_events *out)
{
    void *base;
    size_t len;
    memset(out, 0, sizeof *out);
    out->session_start_step = -1;
    if (tt_map_file(path, &base, &len)) return -1;
    tt_err err = tt_tb_parse(base, len, path, out);
    tt_unmap_file(base, len);
    return err;
}

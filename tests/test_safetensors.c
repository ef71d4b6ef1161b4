/* test_safetensors.c — safetensors round trips (single and sharded), one
 * hand-made bad file per validation rule, and the tiny GPT-2 fixture. */
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "formats/safetensors.h"

static char tmpdir[64];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void path_in_tmp(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tmpdir, name); }

/* A raw file: 8-byte little-endian length, the header bytes, data_len zero bytes. */
static void write_raw_len(const char *path, uint64_t hlen, const char *hdr, size_t hdr_bytes, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    uint8_t lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (uint8_t)(hlen >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(hdr, 1, hdr_bytes, f);
    for (size_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
}

static void write_raw(const char *path, const char *hdr, size_t data_len)
{
    write_raw_len(path, strlen(hdr), hdr, strlen(hdr), data_len);
}

/* Opening must fail, and the message must contain each of the given pieces. */
static void expect_bad(const char *name, const char *hdr, size_t data_len, const char *want1, const char *want2)
{
    char path[256];
    path_in_tmp(path, sizeof path, name);
    if (hdr) write_raw(path, hdr, data_len);
    tt_safetensors *st = tt_st_open(path);
    CHECK_MSG(st == NULL, "%s: opened a bad file", name);
    if (st) {
        tt_st_close(st);
        return;
    }
    const char *msg = tt_last_error();
    if (getenv("SHOWERR")) printf("  %s\n", msg);
    CHECK_MSG(strstr(msg, name) != NULL, "%s: error does not name the file: %s", name, msg);
    CHECK_MSG(!want1 || strstr(msg, want1), "%s: error lacks '%s': %s", name, want1, msg);
    CHECK_MSG(!want2 || strstr(msg, want2), "%s: error lacks '%s': %s", name, want2, msg);
}

static tt_st_tensor mk(const char *name, const char *dtype, int ndim, const int64_t *shape, const void *data, size_t nbytes)
{
    tt_st_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    snprintf(t.dtype, sizeof t.dtype, "%s", dtype);
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
    t.data = data;
    t.nbytes = nbytes;
    return t;
}

static void check_same(const tt_st_tensor *a, const tt_st_tensor *b)
{
    CHECK_MSG(strcmp(a->name, b->name) == 0, "%s vs %s", a->name, b->name);
    CHECK_MSG(strcmp(a->dtype, b->dtype) == 0, "%s: dtype %s vs %s", a->name, a->dtype, b->dtype);
    CHECK(a->ndim == b->ndim);
    for (int d = 0; d < a->ndim && d < b->ndim; d++) CHECK(a->shape[d] == b->shape[d]);
    CHECK(a->nbytes == b->nbytes);
    CHECK_MSG(a->nbytes == b->nbytes && (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0),
              "%s: data differs", a->name);
}

static void test_round_trip(void)
{
    float w[6] = {1, -2, 3.5f, 4, 5, 6e-7f};
    uint16_t bf[4] = {0x3f80, 0xc000, 0x7f80, 0x0001};
    int64_t ids[2] = {-1, INT64_MAX};
    uint8_t bytes[3] = {1, 2, 255};
    double scalar = 3.141592653589793;
    tt_st_tensor in[6] = {
        mk("h.0.attn.weight", "F32", 2, (int64_t[]){2, 3}, w, sizeof w),
        mk("bf", "BF16", 1, (int64_t[]){4}, bf, sizeof bf),
        mk("odd", "U8", 1, (int64_t[]){3}, bytes, 3),
        mk("ids", "I64", 1, (int64_t[]){2}, ids, sizeof ids),
        mk("pi", "F64", 0, NULL, &scalar, 8),
        mk("empty \"quoted\"\n", "F32", 2, (int64_t[]){0, 5}, NULL, 0),
    };
    const char *mk_keys[] = {"step", "note"}, *mk_vals[] = {"20", "tab\there \"q\""};
    char path[256];
    path_in_tmp(path, sizeof path, "rt.safetensors");
    CHECK_MSG(tt_st_write(path, 6, in, mk_keys, mk_vals, 2) == 0, "%s", tt_last_error());

    FILE *f = fopen(path, "rb");
    uint8_t lb[8] = {0};
    CHECK(f && fread(lb, 1, 8, f) == 8);
    if (f) fclose(f);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lb[i];
    CHECK_MSG(hlen % 8 == 0 && hlen > 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0); /* the temporary is gone */

    tt_safetensors *st = tt_st_open(path);
    CHECK_MSG(st != NULL, "%s", tt_last_error());
    if (!st) return;
    CHECK(tt_st_count(st) == 6);
    for (int i = 0; i < 6 && i < tt_st_count(st); i++) check_same(tt_st_get(st, i), &in[i]); /* order kept */
    CHECK((uintptr_t)tt_st_get(st, 0)->data % 8 == 0);
    CHECK(tt_st_find(st, "ids") == tt_st_get(st, 3));
    CHECK(tt_st_find(st, "nope") == NULL);
    CHECK(tt_st_get(st, 6) == NULL && tt_st_get(st, -1) == NULL);
    CHECK(tt_st_metadata(st, "format") && strcmp(tt_st_metadata(st, "format"), "pt") == 0);
    CHECK(tt_st_metadata(st, "step") && strcmp(tt_st_metadata(st, "step"), "20") == 0);
    CHECK(tt_st_metadata(st, "note") && strcmp(tt_st_metadata(st, "note"), mk_vals[1]) == 0);
    CHECK(tt_st_metadata(st, "absent") == NULL && tt_st_metadata_count(st) == 3);
    tt_st_close(st);

    /* the same image parsed from memory, and every prefix of it (all but the
     * whole must fail cleanly: this is where truncation bugs would show) */
    size_t len = 0;
    char *img = tt_read_file(path, 1 << 20, &len);
    CHECK(img != NULL);
    if (!img) return;
    CHECK(tt_st_parse(img, len, "mem", &st) == 0 && tt_st_count(st) == 6);
    tt_st_close(st);
    int prefix_ok = 0;
    for (size_t n = 0; n < len; n++) {
        if (tt_st_parse(img, n, "mem", &st) == 0) {
            prefix_ok++;
            tt_st_close(st);
        }
    }
    CHECK_MSG(prefix_ok == 0, "%d truncated images parsed", prefix_ok);
    /* random byte flips must never crash; count how many parse at all */
    uint64_t seed = 12345;
    for (int it = 0; it < 3000; it++) {
        char *m = malloc(len);
        memcpy(m, img, len);
        for (int k = 0; k < 3; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % (8 + hlen);
            m[at] = (char)(seed >> 13);
        }
        if (tt_st_parse(m, len, "mut", &st) == 0) tt_st_close(st);
        free(m);
    }
    free(img);

    /* the writer refuses what it could not read back */
    tt_st_tensor dup[2] = {in[0], in[0]};
    CHECK(tt_st_write(path, 2, dup, NULL, NULL, 0) != 0 && strstr(tt_last_error(), "twice"));
    tt_st_tensor bad = in[0];
    bad.nbytes = 20;
    CHECK(tt_st_write(path, 1, &bad, NULL, NULL, 0) != 0 && strstr(tt_last_error(), "needs 24 bytes"));
    bad = in[0];
    snprintf(bad.dtype, sizeof bad.dtype, "F31");
    CHECK(tt_st_write(path, 1, &bad, NULL, NULL, 0) != 0 && strstr(tt_last_error(), "F31"));
    st = tt_st_open(path); /* the failed writes left the good file alone */
    CHECK(st && tt_st_count(st) == 6);
    tt_st_close(st);
}

static void test_sharded(void)
{
    float data[5][100];
    tt_st_tensor in[5];
    char names[5][32];
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 100; j++) data[i][j] = (float)(i * 1000 + j);
        snprintf(names[i], sizeof names[i], "layer.%d.w", i);
        in[i] = mk(names[i], "F32", 2, (int64_t[]){10, 10}, data[i], sizeof data[i]);
    }
    char dir[256], p[512];
    path_in_tmp(dir, sizeof dir, "sharded/out");
    /* 400 bytes each, at most 1000 per shard: [0,1] [2,3] [4] */
    CHECK_MSG(tt_st_write_sharded(dir, "model", 5, in, 1000) == 0, "%s", tt_last_error());
    snprintf(p, sizeof p, "%s/model-00003-of-00003.safetensors", dir);
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/model-00002-of-00003.safetensors", dir);
    tt_safetensors *one = tt_st_open(p);
    CHECK(one && tt_st_count(one) == 2 && tt_st_find(one, "layer.3.w"));
    tt_st_close(one);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(access(p, F_OK) != 0);

    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    size_t len = 0;
    char *text = tt_read_file(p, 1 << 20, &len);
    cJSON *idx = text ? cJSON_Parse(text) : NULL;
    const cJSON *ts = cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "metadata"), "total_size");
    CHECK(cJSON_IsNumber(ts) && ts->valuedouble == 2000);
    const cJSON *wm = cJSON_GetObjectItem(cJSON_GetObjectItem(idx, "weight_map"), "layer.4.w");
    CHECK(cJSON_IsString(wm) && strcmp(wm->valuestring, "model-00003-of-00003.safetensors") == 0);
    cJSON_Delete(idx);

    const char *ways[2] = {dir, p};
    for (int w = 0; w < 2; w++) {
        tt_safetensors *st = tt_st_open_dir(ways[w]);
        CHECK_MSG(st != NULL, "%s", tt_last_error());
        if (!st) continue;
        CHECK(tt_st_count(st) == 5);
        for (int i = 0; i < 5; i++) {
            const tt_st_tensor *t = tt_st_find(st, names[i]);
            CHECK(t != NULL);
            if (t) check_same(t, &in[i]);
        }
        CHECK(tt_st_metadata(st, "format") != NULL);
        tt_st_close(st);
    }

    /* an index that lies about where a tensor is */
    char *lie = text ? strstr(text, "\"layer.4.w\": \"model-00003") : NULL;
    CHECK(lie != NULL);
    if (lie) {
        lie[strlen("\"layer.4.w\": \"model-0000")] = '1';
        char bad[512];
        snprintf(bad, sizeof bad, "%s/bad.index.json", dir);
        CHECK(tt_write_file_atomic(bad, text, len) == 0);
        tt_safetensors *st = tt_st_open_dir(bad);
        CHECK(st == NULL && strstr(tt_last_error(), "layer.4.w") && strstr(tt_last_error(), "bad.index.json"));
        tt_st_close(st);
    }
    free(text);
    /* a tensor the index puts in a shard whose header lacks it, its data still
     * there: the error names it, not only the bytes nobody claims */
    {
        char shard[512], idx[512];
        snprintf(shard, sizeof shard, "%s/gap-1.safetensors", dir);
        write_raw(shard,
                  "{\"layer.0.a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"layer.0.c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                  12);
        snprintf(idx, sizeof idx, "%s/gap.index.json", dir);
        const char *gap_index = "{\"weight_map\": {\"layer.0.a\": \"gap-1.safetensors\", \"layer.0.b\": \"gap-1.safetensors\","
                                " \"layer.0.c\": \"gap-1.safetensors\"}}";
        CHECK(tt_write_file_atomic(idx, gap_index, strlen(gap_index)) == 0);
        tt_safetensors *st = tt_st_open_dir(idx);
        const char *msg = tt_last_error();
        CHECK_MSG(st == NULL && strstr(msg, "gap.index.json: tensor 'layer.0.b' is missing from the header of gap-1.safetensors") &&
                      strstr(msg, "bytes [4, 8)"),
                  "%s", msg);
        tt_st_close(st);
    }
    /* an index naming a file outside the folder is refused */
    char esc[512];
    snprintf(esc, sizeof esc, "%s/esc.index.json", dir);
    const char *etext = "{\"weight_map\": {\"a\": \"../x.safetensors\"}}";
    CHECK(tt_write_file_atomic(esc, etext, strlen(etext)) == 0);
    CHECK(tt_st_open_dir(esc) == NULL && strstr(tt_last_error(), "relative"));

    /* rewriting as one file removes the index, and readers follow */
    CHECK_MSG(tt_st_write_sharded(dir, "model", 5, in, 0) == 0, "%s", tt_last_error());
    CHECK(access(p, F_OK) != 0);
    tt_safetensors *st = tt_st_open_dir(dir);
    CHECK(st && tt_st_count(st) == 5);
    tt_st_close(st);
}

static void test_bad_files(void)
{
    char path[256];
    /* a good file, then cut short */
    float w[4] = {1, 2, 3, 4};
    tt_st_tensor t = mk("w", "F32", 1, (int64_t[]){4}, w, sizeof w);
    path_in_tmp(path, sizeof path, "trunc.safetensors");
    CHECK(tt_st_write(path, 1, &t, NULL, NULL, 0) == 0);
    struct stat sb;
    stat(path, &sb);
    CHECK(truncate(path, sb.st_size - 6) == 0);
    expect_bad("trunc.safetensors", NULL, 0, "truncated", "data section");

    path_in_tmp(path, sizeof path, "short.safetensors");
    write_raw_len(path, 0, "", 0, 0);
    CHECK(truncate(path, 5) == 0);
    expect_bad("short.safetensors", NULL, 0, "too short", NULL);

    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    path_in_tmp(path, sizeof path, "hlen.safetensors");
    write_raw_len(path, 1000, h, strlen(h), 4);
    expect_bad("hlen.safetensors", NULL, 0, "header length 1000", "truncated");
    path_in_tmp(path, sizeof path, "huge.safetensors");
    write_raw_len(path, 200000000, h, strlen(h), 4);
    expect_bad("huge.safetensors", NULL, 0, "limit", NULL);

    expect_bad("utf8.safetensors", "{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "UTF-8", NULL);
    expect_bad("overlong.safetensors", "{\"w\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "UTF-8", NULL);
    expect_bad("array.safetensors", "[1, 2, 3]       ", 0, "JSON object", NULL);
    expect_bad("syntax.safetensors", "{\"w\": {\"dtype\": }", 0, "not valid JSON", NULL);
    expect_bad("string.safetensors", "{\"w\": \"F32\"}", 0, "tensor 'w'", "not a JSON object");
    expect_bad("dtype.safetensors", "{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w'",
               "unknown dtype \"F33\"");
    expect_bad("nodtype.safetensors", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w'", "dtype");
    expect_bad("noshape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'w'", "shape");
    expect_bad("nooff.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w'", "data_offsets");
    expect_bad("negdim.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "tensor 'w'",
               "shape[0]");
    expect_bad("fracdim.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "tensor 'w'",
               "shape[0]");
    expect_bad("threeoff.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
               "tensor 'w'", "[begin, end]");
    expect_bad("backwards.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
               "tensor 'w'", "end before");
    expect_bad("overlap.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, "tensor 'b'", "overlap tensor 'a'");
    /* data no tensor claims: a tensor missing from the header, between its neighbours */
    expect_bad("gap.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
               12, "bytes [4, 8) of the data section belong to no tensor",
               "a tensor is missing from the header after tensor 'a' [0, 4) and before tensor 'b' [8, 12)");
    expect_bad("start.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
               "bytes [0, 4) of the data section", "missing from the header before tensor 'a' [4, 8)");
    expect_bad("tail.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
               "bytes [4, 8) of the data section", "missing from the header after tensor 'a' [0, 4)");
    expect_bad("none.safetensors", "{}      ", 4, "bytes [0, 4) of the data section", "the header, which lists none");
    expect_bad("size.safetensors",
               "{\"h.0.attn.c_attn.weight\":{\"dtype\":\"F32\",\"shape\":[10,4],\"data_offsets\":[0,100]}}", 100,
               "tensor 'h.0.attn.c_attn.weight': data_offsets [0, 100) but shape [10, 4] x F32 needs 160 bytes", NULL);
    expect_bad("overflow.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,4]}}", 4,
               "tensor 'w'", "overflows");
    expect_bad("bits.safetensors", "{\"w\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "tensor 'w'",
               "whole number of bytes");
    expect_bad("dup.safetensors",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
               8, "tensor 'w'", "twice");
    expect_bad("meta.safetensors",
               "{\"__metadata__\":{\"format\":\"pt\",\"n\":1},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               4, "__metadata__", "'n' is not a string");
    expect_bad("metaarr.safetensors", "{\"__metadata__\":[]}", 0, "__metadata__", "not a JSON object");
    {
        /* embedded NUL: write_raw uses strlen, so build this one by hand */
        const char hdr[] = "{}\0 garbage";
        path_in_tmp(path, sizeof path, "nul.safetensors");
        write_raw_len(path, sizeof hdr - 1, hdr, sizeof hdr - 1, 0);
        expect_bad("nul.safetensors", NULL, 0, "NUL", NULL);
    }

    /* legal corner cases: no tensors at all, sub-byte dtypes, every dtype */
    path_in_tmp(path, sizeof path, "emptyobj.safetensors");
    write_raw(path, "{}      ", 0);
    tt_safetensors *st = tt_st_open(path);
    CHECK_MSG(st && tt_st_count(st) == 0, "%s", tt_last_error());
    tt_st_close(st);
    path_in_tmp(path, sizeof path, "f4.safetensors");
    write_raw(path,
              "{\"a\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[0,2]},"
              "\"b\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[2,3]},"
              "\"c\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[3,5]}}",
              5);
    st = tt_st_open(path);
    CHECK_MSG(st && tt_st_count(st) == 3, "%s", tt_last_error());
    if (st) CHECK(tt_st_get(st, 0)->nbytes == 2 && tt_st_find(st, "b")->ndim == 0);
    tt_st_close(st);
    const char *all[] = {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "I64", "U64", "F64"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK_MSG(tt_st_dtype_bits(all[i]) > 0, "%s", all[i]);
    tt_dtype d;
    CHECK(tt_st_dtype_to_tt("BF16", &d) == 0 && d == TT_BF16 && strcmp(tt_st_dtype_from_tt(TT_I64), "I64") == 0);
    CHECK(tt_st_dtype_to_tt("U8", &d) != 0);
}

static void test_utf8(void)
{
    CHECK(tt_utf8_invalid_at("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15) == 15);
    CHECK(tt_utf8_invalid_at("\xed\xa0\x80", 3) == 0);     /* surrogate */
    CHECK(tt_utf8_invalid_at("\xe0\x80\xaf", 3) == 0);     /* overlong */
    CHECK(tt_utf8_invalid_at("ab\xf4\x90\x80\x80", 6) == 2); /* > U+10FFFF */
    CHECK(tt_utf8_invalid_at("ab\xe2\x82", 4) == 2);        /* cut short */
}

static int test_fixture(void)
{
    const char *shared = th_shared_dir();
    char p[4096];
    snprintf(p, sizeof p, "%s/fixtures/hf/tiny-random-gpt2/model.safetensors", shared ? shared : "");
    if (!shared || access(p, R_OK) != 0) {
        th_skip_part("test_safetensors: the tiny-random-gpt2 fixture (absent)");
        return 0;
    }
    tt_safetensors *st = tt_st_open(p);
    CHECK_MSG(st != NULL, "%s", tt_last_error());
    snprintf(p, sizeof p, "%s/fixtures/hf/tiny-random-gpt2/config.json", shared);
    size_t len = 0;
    char *text = tt_read_file(p, 1 << 20, &len);
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    int n_embd = cJSON_GetObjectItem(cfg, "n_embd") ? cJSON_GetObjectItem(cfg, "n_embd")->valueint : -1;
    int n_layer = cJSON_GetObjectItem(cfg, "n_layer") ? cJSON_GetObjectItem(cfg, "n_layer")->valueint : -1;
    int vocab = cJSON_GetObjectItem(cfg, "vocab_size") ? cJSON_GetObjectItem(cfg, "vocab_size")->valueint : -1;
    cJSON_Delete(cfg);
    free(text);
    CHECK(n_embd > 0 && n_layer > 0 && vocab > 0);
    if (st) {
        /* GPT-2 has 12 tensors per block plus wte, wpe, ln_f.{weight,bias} */
        CHECK_MSG(tt_st_count(st) == 12 * n_layer + 4, "%d tensors", tt_st_count(st));
        const tt_st_tensor *qkv = tt_st_find(st, "transformer.h.0.attn.c_attn.weight");
        CHECK(qkv && qkv->ndim == 2 && qkv->shape[0] == n_embd && qkv->shape[1] == 3 * n_embd);
        const tt_st_tensor *wte = tt_st_find(st, "transformer.wte.weight");
        CHECK(wte && wte->ndim == 2 && wte->shape[0] == vocab && wte->shape[1] == n_embd &&
              strcmp(wte->dtype, "F32") == 0 && wte->nbytes == (size_t)vocab * n_embd * 4);
        char last[128];
        snprintf(last, sizeof last, "transformer.h.%d.mlp.c_fc.bias", n_layer - 1);
        CHECK(tt_st_find(st, last) != NULL);
        if (wte) {
            float v;
            memcpy(&v, wte->data, 4);
            CHECK(v == v && fabsf(v) < 10);
        }
        tt_st_close(st);
    }
    return 0;
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tt_st_XXXXXX");
    if (!mkdtemp(tmpdir)) return th_skip("test_safetensors", "cannot create a temporary directory");
    test_utf8();
    test_round_trip();
    test_sharded();
    test_bad_files();
    test_fixture();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return th_done("test_safetensors");
}

/* test_ckpt_files.c — checkpoint folders: save/list/prune/open round trip,
 * checkpoints in parts, leftovers of interrupted saves, and refusal of truncated, corrupt and
 * malformed checkpoints; a reader of part of a file checks (and reads) the chunks it takes and no
 * others, and a checkpoint written before chunk checksums is checked whole; XXH64 against the
 * published test vectors. */
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "formats/ckpt_files.h"

static char tmpdir[64];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static float w[64], m1[64];
static tt_st_tensor tensors[2];

static void make_tensors(float bias)
{
    for (int i = 0; i < 64; i++) {
        w[i] = bias + (float)i * 0.5f;
        m1[i] = -bias * (float)i;
    }
    tt_st_tensor a = {.name = "layers.0.w", .dtype = "F32", .ndim = 2, .shape = {8, 8}, .data = w, .nbytes = sizeof w};
    tt_st_tensor b = {.name = "opt.m1.layers.0.w", .dtype = "F32", .ndim = 1, .shape = {64}, .data = m1, .nbytes = sizeof m1};
    tensors[0] = a;
    tensors[1] = b;
}

static void test_xxh64(void)
{
    const char *nobody = "Nobody inspects the spammish repetition";
    CHECK(tt_xxh64("", 0, 0) == 0xEF46DB3751D8E999ull);
    CHECK(tt_xxh64("a", 1, 0) == 0xD24EC4F1A98C6E5Bull);
    CHECK(tt_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
    CHECK(tt_xxh64(nobody, strlen(nobody), 0) == 0xFBCEA83C8A378BF1ull);
    CHECK(tt_xxh64("abc", 3, 1) != tt_xxh64("abc", 3, 0));
}

static void test_round_trip(const char *folder)
{
    long steps[8];
    CHECK(tt_ckpt_list(folder, steps, 8) == 0); /* folder absent: no checkpoints, no error */
    long latest = -1;
    CHECK(tt_ckpt_latest(folder, &latest) == 0);

    /* a seed above 2^53 must survive: the caller's text is not re-printed */
    const char *meta = "{\n  \"step\": 10,\n  \"rng\": {\"seed\": 18446744073709551557, \"counter\": 7},\n"
                       "  \"config\": \"x\"\n}\n";
    for (long s = 10; s <= 30; s += 10) {
        make_tensors((float)s);
        CHECK_MSG(tt_ckpt_save(folder, s, 2, tensors, s == 20 ? "{}" : meta) == 0, "%s", tt_last_error());
    }
    int n = tt_ckpt_list(folder, steps, 8);
    CHECK(n == 3 && steps[0] == 10 && steps[1] == 20 && steps[2] == 30);
    CHECK(tt_ckpt_list(folder, steps, 1) == 1 && steps[0] == 30); /* the newest fit */
    CHECK(tt_ckpt_list(folder, steps, 2) == 2 && steps[0] == 20 && steps[1] == 30);
    CHECK(tt_ckpt_list(folder, NULL, 0) == 3 && tt_ckpt_list(folder, steps, 0) == 0);
    CHECK(tt_ckpt_latest(folder, &latest) == 1 && latest == 30);

    tt_ckpt *ck = tt_ckpt_open(folder, 30);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        const tt_safetensors *st = tt_ckpt_tensors(ck);
        CHECK(tt_st_count(st) == 2);
        const tt_st_tensor *t = tt_st_find(st, "opt.m1.layers.0.w");
        CHECK(t && t->nbytes == sizeof m1 && memcmp(t->data, m1, sizeof m1) == 0);
        const char *mj = tt_ckpt_meta_json(ck);
        CHECK(strstr(mj, "18446744073709551557") != NULL);
        cJSON *root = cJSON_Parse(mj);
        CHECK(cJSON_GetObjectItem(root, "step") && cJSON_GetObjectItem(root, "step")->valueint == 10);
        const cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "files"), "state.safetensors");
        CHECK(f && cJSON_GetObjectItem(f, "size") && cJSON_IsString(cJSON_GetObjectItem(f, "xxh64")));
        cJSON_Delete(root);
        tt_ckpt_close(ck);
    }
    ck = tt_ckpt_open(folder, 20); /* an empty caller object still gets "files" */
    CHECK_MSG(ck && strstr(tt_ckpt_meta_json(ck), "\"files\""), "%s", ck ? tt_ckpt_meta_json(ck) : tt_last_error());
    tt_ckpt_close(ck);
    CHECK(tt_ckpt_open(folder, 25) == NULL && strstr(tt_last_error(), "step-25"));

    /* saving the same step again replaces it whole */
    make_tensors(99.0f);
    CHECK_MSG(tt_ckpt_save(folder, 20, 2, tensors, "{\"again\": true}") == 0, "%s", tt_last_error());
    ck = tt_ckpt_open(folder, 20);
    CHECK(ck && strstr(tt_ckpt_meta_json(ck), "again") && memcmp(tt_st_get(tt_ckpt_tensors(ck), 0)->data, w, sizeof w) == 0);
    tt_ckpt_close(ck);
    CHECK(tt_ckpt_list(folder, steps, 8) == 3);

    /* the caller may not set "files"; meta must be a JSON object */
    CHECK(tt_ckpt_save(folder, 40, 2, tensors, "{\"files\": 1}") != 0 && strstr(tt_last_error(), "reserved"));
    CHECK(tt_ckpt_save(folder, 40, 2, tensors, "[1]") != 0 && strstr(tt_last_error(), "JSON object"));
    CHECK(tt_ckpt_save(folder, 40, 2, tensors, "{\"a\": }") != 0 && strstr(tt_last_error(), "invalid JSON"));
    CHECK(tt_ckpt_list(folder, steps, 8) == 3); /* and nothing was left behind as a step */

    /* an interrupted save: a .tmp folder, which list ignores and prune removes */
    char p[512];
    snprintf(p, sizeof p, "%s/.step-50.tmp", folder);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/.step-50.tmp/state.safetensors", folder);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
    snprintf(p, sizeof p, "%s/step-60", folder); /* a step folder without meta.json */
    CHECK(mkdir(p, 0755) == 0);
    n = tt_ckpt_list(folder, steps, 8);
    CHECK(n == 3 && steps[2] == 30);
    CHECK(tt_ckpt_prune(folder, 0) == 0); /* k <= 0 keeps every checkpoint, cleans leftovers */
    snprintf(p, sizeof p, "%s/.step-50.tmp", folder);
    CHECK(!exists(p));
    CHECK(tt_ckpt_list(folder, steps, 8) == 3);
    CHECK(tt_ckpt_prune(folder, 2) == 0);
    n = tt_ckpt_list(folder, steps, 8);
    CHECK(n == 2 && steps[0] == 20 && steps[1] == 30);
    snprintf(p, sizeof p, "%s/step-10", folder);
    CHECK(!exists(p));
    snprintf(p, sizeof p, "%s/step-60", folder);
    CHECK(exists(p)); /* not ours to delete */
}

static void flip_byte(const char *path, long at)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    CHECK(fd >= 0 && pread(fd, &c, 1, at) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
}

static void expect_open_fails(const char *folder, long step, const char *want1, const char *want2)
{
    tt_ckpt *ck = tt_ckpt_open(folder, step);
    CHECK_MSG(ck == NULL, "step %ld opened", step);
    tt_ckpt_close(ck);
    const char *msg = tt_last_error();
    if (getenv("SHOWERR")) printf("  %s\n", msg);
    CHECK_MSG(strstr(msg, want1) != NULL, "error lacks '%s': %s", want1, msg);
    CHECK_MSG(!want2 || strstr(msg, want2), "error lacks '%s': %s", want2, msg);
}

static void test_damage(const char *folder)
{
    char state[512], meta[512];
    make_tensors(1.0f);
    for (long s = 1; s <= 4; s++) CHECK(tt_ckpt_save(folder, s, 2, tensors, "{\"step\": 1}") == 0);

    /* truncated state file */
    snprintf(state, sizeof state, "%s/step-1/state.safetensors", folder);
    struct stat sb;
    stat(state, &sb);
    CHECK(truncate(state, sb.st_size - 100) == 0);
    expect_open_fails(folder, 1, "step-1/state.safetensors: size", "truncated checkpoint");

    /* one flipped bit in the tensor data: only the checksum can tell (this small file is one chunk, the header's,
     * checked on open; test_chunks has a file of several) */
    snprintf(state, sizeof state, "%s/step-2/state.safetensors", folder);
    flip_byte(state, sb.st_size - 5);
    expect_open_fails(folder, 2, "step-2/state.safetensors: bytes 0..", "corrupt checkpoint");

    /* malformed meta.json: the error names the file and the line */
    snprintf(meta, sizeof meta, "%s/step-3/meta.json", folder);
    FILE *f = fopen(meta, "w");
    fputs("{\n  \"step\": 1,\n  \"files\": {\n    \"state.safetensors\": {\"size\": 10 \"xxh64\": \"0\"}\n  }\n}\n", f);
    fclose(f);
    expect_open_fails(folder, 3, "step-3/meta.json:4:", "invalid JSON");

    /* a meta.json cut short */
    snprintf(meta, sizeof meta, "%s/step-4/meta.json", folder);
    stat(meta, &sb);
    CHECK(truncate(meta, sb.st_size / 2) == 0);
    expect_open_fails(folder, 4, "step-4/meta.json", NULL);
}

static void test_meta_validate(void)
{
    const char *ok = "{\"files\": {\"state.safetensors\": {\"size\": 12, \"xxh64\": \"0123456789abcdef\"}}}";
    CHECK_MSG(tt_ckpt_meta_validate(ok, strlen(ok), "m.json") == 0, "%s", tt_last_error());
    CHECK(tt_ckpt_meta_validate(ok, strlen(ok) - 1, "m.json") != 0); /* not NUL-terminated: len rules */
    struct { const char *text, *want; } bad[] = {
        {"[]", "not a JSON object"},
        {"{}", "no \"files\""},
        {"{\"files\": []}", "not a JSON object"},
        {"{\"files\": {}}", "no file"},
        {"{\"files\": {\"state.bin\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\"}}}", ".safetensors"},
        {"{\"files\": {\"state.safetensors\": {\"size\": -1, \"xxh64\": \"0123456789abcdef\"}}}", "size"},
        {"{\"files\": {\"state.safetensors\": {\"size\": 1.5, \"xxh64\": \"0123456789abcdef\"}}}", "size"},
        {"{\"files\": {\"state.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789ABCDEF\"}}}", "xxh64"},
        {"{\"files\": {\"state.safetensors\": {\"size\": 1, \"xxh64\": \"0123\"}}}", "xxh64"},
        {"{\"files\": {\"../x\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\"}}}", "plain file name"},
        {"{\"files\": {\"state.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\"},"
         " \"state.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\"}}}",
         "twice"},
        {"{\"files\": {}, \"files\": {}}", "twice"},
        {"{\"a\": \"\xff\"}", "UTF-8"},
        {"{\"a\": 1,\n\n\"b\" 2}", "m.json:3:"},
        {"{\"files\": {\"s.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\", \"chunk\": 65536}}}", "chunks"},
        {"{\"files\": {\"s.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\", \"chunk\": 65535, "
         "\"chunks\": \"0123456789abcdef\"}}}", "power of two"},
        {"{\"files\": {\"s.safetensors\": {\"size\": 1, \"xxh64\": \"0123456789abcdef\", \"chunk\": 65536, "
         "\"chunks\": \"0123456789abcdef0\"}}}", "chunks"},
        {"{\"files\": {\"s.safetensors\": {\"size\": 300000, \"xxh64\": \"0123456789abcdef\", \"chunk\": 65536, "
         "\"chunks\": \"0123456789abcdef\"}}}", "5 checksums"},
        {"{\"files\": {\"s.safetensors\": {\"size\": 9007199254740992, \"xxh64\": \"0123456789abcdef\", "
         "\"chunk\": 65536, \"chunks\": \"\"}}}", "at most 4096"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tt_ckpt_meta_validate(bad[i].text, strlen(bad[i].text), "m.json");
        const char *msg = tt_last_error();
        CHECK_MSG(rc != 0 && strstr(msg, "m.json") && strstr(msg, bad[i].want), "case %zu: rc %d, '%s'", i, rc,
                  rc ? msg : "");
    }
}

/* meta.json as a checkpoint written before chunk checksums has it: each file's size and XXH64 alone */
static void drop_chunks(const char *folder, long step)
{
    char meta[512], *text;
    snprintf(meta, sizeof meta, "%s/step-%ld/meta.json", folder, step);
    size_t len;
    CHECK((text = tt_read_file(meta, 1 << 24, &len)) != NULL);
    cJSON *root = cJSON_Parse(text);
    for (cJSON *f = cJSON_GetObjectItem(root, "files")->child; f; f = f->next) {
        cJSON_DeleteItemFromObject(f, "chunk");
        cJSON_DeleteItemFromObject(f, "chunks");
    }
    char *out = cJSON_Print(root);
    CHECK(tt_write_file_atomic(meta, out, strlen(out)) == 0);
    free(out);
    free(text);
    cJSON_Delete(root);
}

/* A file of several chunks: a reader checks the chunks of the bytes it takes, once, and reads no other; a flipped
 * byte is found when its chunk is read, naming it; the header's chunks are checked on open; a checkpoint without
 * chunk checksums is checked whole on open. */
static void test_chunks(const char *folder)
{
    enum { N = (5 * TT_CKPT_MIN_CHUNK + 400) / 4 }; /* 5 chunks and a bit: 6 */
    float *big = calloc(N, sizeof *big);
    for (int i = 0; i < N; i++) big[i] = (float)i;
    tt_st_tensor t = {.name = "big", .dtype = "F32", .ndim = 1, .shape = {N}, .data = big, .nbytes = N * sizeof *big};
    CHECK(tt_ckpt_chunk_size(1) == TT_CKPT_MIN_CHUNK && tt_ckpt_chunk_size(TT_CKPT_MIN_CHUNK * TT_CKPT_MAX_CHUNKS + 1) ==
                                                           2 * TT_CKPT_MIN_CHUNK);
    for (long s = 1; s <= 3; s++) CHECK_MSG(tt_ckpt_save(folder, s, 1, &t, "{}") == 0, "%s", tt_last_error());
    char state[512];
    tt_ckpt *ck = tt_ckpt_open(folder, 1);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        const tt_safetensors *st = tt_ckpt_tensors(ck);
        const tt_st_tensor *b = tt_st_find(st, "big");
        uint64_t data, meta;
        tt_ckpt_bytes_read(ck, &data, &meta);
        CHECK_MSG(data == 0 && meta > TT_CKPT_MIN_CHUNK && meta < TT_CKPT_MIN_CHUNK + 2048, "open read %llu + %llu",
                  (unsigned long long)data, (unsigned long long)meta);
        /* 100 floats inside the fourth chunk (the data starts after a header of under 200 bytes): that chunk
         * alone, once */
        const char *mid = (const char *)b->data + 3 * TT_CKPT_MIN_CHUNK + 1000;
        CHECK(tt_ckpt_check(ck, st, mid, 400) == 0 && tt_ckpt_check(ck, st, mid, 400) == 0);
        tt_ckpt_bytes_read(ck, &data, &meta);
        CHECK_MSG(data == TT_CKPT_MIN_CHUNK, "read %llu", (unsigned long long)data);
        /* the whole tensor: the rest of the file, the header's chunk (read on open) not again */
        struct stat sb;
        snprintf(state, sizeof state, "%s/step-1/state.safetensors", folder);
        CHECK(stat(state, &sb) == 0 && tt_ckpt_check(ck, st, b->data, b->nbytes) == 0);
        tt_ckpt_bytes_read(ck, &data, &meta);
        CHECK_MSG(data == (uint64_t)sb.st_size - TT_CKPT_MIN_CHUNK, "read %llu of %lld", (unsigned long long)data,
                  (long long)sb.st_size);
        CHECK(tt_ckpt_check(ck, st, (const char *)b->data + b->nbytes, 1) != 0); /* past the file's end */
        tt_ckpt_close(ck);
    }
    /* a flipped byte in the fifth chunk: found when that chunk is read, not before */
    snprintf(state, sizeof state, "%s/step-2/state.safetensors", folder);
    flip_byte(state, 4 * TT_CKPT_MIN_CHUNK + 17);
    ck = tt_ckpt_open(folder, 2);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        const tt_safetensors *st = tt_ckpt_tensors(ck);
        const tt_st_tensor *b = tt_st_find(st, "big");
        CHECK(tt_ckpt_check(ck, st, b->data, 1000) == 0);
        CHECK(tt_ckpt_check(ck, st, b->data, b->nbytes) != 0 && strstr(tt_last_error(), "(chunk 4)") &&
              strstr(tt_last_error(), "corrupt checkpoint"));
        tt_ckpt_close(ck);
    }
    /* a flipped byte in the header: refused on open, before the header is believed */
    snprintf(state, sizeof state, "%s/step-3/state.safetensors", folder);
    flip_byte(state, 20);
    expect_open_fails(folder, 3, "step-3/state.safetensors: bytes 0..", "(chunk 0)");
    /* a checkpoint written before chunk checksums: checked whole on open */
    drop_chunks(folder, 2);
    expect_open_fails(folder, 2, "step-2/state.safetensors: XXH64 checksum", "corrupt checkpoint");
    CHECK_MSG(tt_ckpt_save(folder, 4, 1, &t, "{}") == 0, "%s", tt_last_error());
    drop_chunks(folder, 4);
    ck = tt_ckpt_open(folder, 4);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        uint64_t data, meta;
        tt_ckpt_bytes_read(ck, &data, &meta);
        CHECK(data > (uint64_t)t.nbytes && tt_ckpt_check(ck, tt_ckpt_tensors(ck), tt_st_get(tt_ckpt_tensors(ck), 0)->data, 8) == 0);
        tt_ckpt_close(ck);
    }
    free(big);
}

/* A checkpoint in parts (what the ranks of a sharded run write): invisible
 * until committed, then every part opens; a missing part fails the open. */
static void test_parts(const char *folder)
{
    const char *files[2] = {"shard-00000-of-00002.safetensors", "shard-00001-of-00002.safetensors"};
    static tt_ckpt_sums sums[2];
    long steps[4];
    CHECK_MSG(tt_ckpt_begin(folder, 7) == 0, "%s", tt_last_error());
    for (int k = 0; k < 2; k++) {
        make_tensors((float)k);
        CHECK_MSG(tt_ckpt_write_part(folder, 7, files[k], 2, tensors, &sums[k]) == 0, "%s", tt_last_error());
    }
    CHECK(tt_ckpt_list(folder, steps, 4) == 0); /* not there before the commit */
    CHECK(tt_ckpt_write_part(folder, 7, "../x.safetensors", 2, tensors, &sums[0]) != 0 &&
          strstr(tt_last_error(), "plain file name"));
    CHECK_MSG(tt_ckpt_commit(folder, 7, "{\"step\": 7}", 2, files, sums) == 0, "%s", tt_last_error());
    CHECK(tt_ckpt_list(folder, steps, 4) == 1 && steps[0] == 7);
    tt_ckpt *ck = tt_ckpt_open(folder, 7);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        CHECK(tt_ckpt_tensors(ck) == NULL && tt_ckpt_file(ck, "nope.safetensors") == NULL);
        const tt_safetensors *st = tt_ckpt_file(ck, files[1]);
        const tt_st_tensor *t = st ? tt_st_find(st, "layers.0.w") : NULL;
        CHECK(t && memcmp(t->data, w, sizeof w) == 0); /* the second part holds the second tensors */
        CHECK(tt_ckpt_file(ck, files[0]) != NULL);
        tt_ckpt_close(ck);
    }
    char p[256];
    snprintf(p, sizeof p, "%s/step-7/%s", folder, files[0]);
    CHECK(unlink(p) == 0);
    CHECK(tt_ckpt_open(folder, 7) == NULL && strstr(tt_last_error(), "shard-00000-of-00002") &&
          strstr(tt_last_error(), "missing"));
    tt_ckpt_begin(folder, 8); /* an abandoned save leaves no step and nothing after abort */
    tt_ckpt_abort(folder, 8);
    snprintf(p, sizeof p, "%s/.step-8.tmp", folder);
    CHECK(!exists(p));
}

/* A group of files in parts (data parallel ranks each write a part of the state): a tensor is found in the part
 * that holds it, files of another name are not the group's, and a tensor in two parts is an error. */
static void test_groups(const char *folder)
{
    const char *files[3] = {"state.part-00000-of-00002.safetensors", "state.part-00001-of-00002.safetensors",
                            "statex.safetensors"};
    static tt_ckpt_sums sums[3];
    for (int step = 1; step <= 2; step++) {
        CHECK_MSG(tt_ckpt_begin(folder, step) == 0, "%s", tt_last_error());
        make_tensors((float)step);
        /* step 1: part 0 the weight, part 1 the moment; step 2: both parts the weight */
        CHECK(tt_ckpt_write_part(folder, step, files[0], 1, &tensors[0], &sums[0]) == 0);
        CHECK(tt_ckpt_write_part(folder, step, files[1], 1, &tensors[step == 1 ? 1 : 0], &sums[1]) == 0);
        CHECK(tt_ckpt_write_part(folder, step, files[2], 2, tensors, &sums[2]) == 0);
        CHECK_MSG(tt_ckpt_commit(folder, step, "{}", 3, files, sums) == 0, "%s", tt_last_error());
    }
    const tt_st_tensor *t;
    const tt_safetensors *st;
    tt_ckpt *ck = tt_ckpt_open(folder, 1);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        CHECK(tt_ckpt_find(ck, "state", "layers.0.w", &t, &st) == 2 && st == tt_ckpt_file(ck, files[0]) && t &&
              t->nbytes == sizeof w);
        CHECK(tt_ckpt_find(ck, "state", "opt.m1.layers.0.w", &t, &st) == 2 && st == tt_ckpt_file(ck, files[1]) && t);
        CHECK(tt_ckpt_find(ck, "state", "nope", &t, &st) == 2 && !t && !st);
        CHECK(tt_ckpt_find(ck, "shard-00000-of-00002", "layers.0.w", &t, &st) == 0 && !t);
        tt_ckpt_close(ck);
    }
    ck = tt_ckpt_open(folder, 2);
    CHECK_MSG(ck != NULL, "%s", tt_last_error());
    if (ck) {
        CHECK(tt_ckpt_find(ck, "state", "layers.0.w", &t, &st) < 0 && strstr(tt_last_error(), "in two files of state"));
        tt_ckpt_close(ck);
    }
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tt_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) return th_skip("test_ckpt_files", "cannot create a temporary directory");
    char folder[128], folder2[128];
    snprintf(folder, sizeof folder, "%s/outputs/checkpoint", tmpdir);
    snprintf(folder2, sizeof folder2, "%s/damaged", tmpdir);
    test_xxh64();
    test_meta_validate();
    test_round_trip(folder);
    test_damage(folder2);
    snprintf(folder2, sizeof folder2, "%s/parts", tmpdir);
    test_parts(folder2);
    snprintf(folder2, sizeof folder2, "%s/groups", tmpdir);
    test_groups(folder2);
    snprintf(folder2, sizeof folder2, "%s/chunks", tmpdir);
    test_chunks(folder2);
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return th_done("test_ckpt_files");
}

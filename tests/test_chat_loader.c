/* test_chat_loader.c — conversation shards (version 2) and how the loader serves them: the
 * sections round-trip, a conversation that fits is one piece, a longer one is cut at its turns with
 * its prefix repeated, a turn longer than a window is truncated and counted, pieces with nothing to
 * train are left out and counted, every trained token is a target exactly once (or counted as
 * dropped), targets follow the mask, and a damaged shard is refused with its file named. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "data/loader.h"
#include "data/shard.h"
#include "harness.h"

#define PAD 1
#define VOCAB 50000
#define T 16

static char g_dir[64];

/* token i of document d says where it came from */
static int32_t tok_of(int d, int i) { return 100 * (d + 1) + i; }

typedef struct {
    int n, prefix, n_cuts;
    int cuts[8];
    const char *mask; /* one char a token: '1' trained, anything else not */
} doc_spec;

static void write_shard(const char *path, const doc_spec *docs, int n_docs)
{
    tt_shard_writer *w = tt_shard_writer_open_chat(path, 2, PAD, VOCAB);
    CHECK_MSG(w != NULL, "%s", tt_last_error());
    for (int d = 0; w && d < n_docs; d++) {
        int32_t t[128];
        uint8_t m[128];
        uint64_t c[8];
        for (int i = 0; i < docs[d].n; i++) t[i] = tok_of(d, i), m[i] = docs[d].mask[i] == '1';
        for (int k = 0; k < docs[d].n_cuts; k++) c[k] = (uint64_t)docs[d].cuts[k];
        CHECK_MSG(tt_shard_writer_append_doc(w, t, m, (size_t)docs[d].n, (uint32_t)docs[d].prefix, c, docs[d].n_cuts) == 0,
                  "%s", tt_last_error());
    }
    if (w) CHECK_MSG(tt_shard_writer_close(w) == 0, "%s", tt_last_error());
}

/* masks: S = prefix (system), u = user turn, a/1 = assistant reply (1 trained) */
static const doc_spec DOCS[] = {
    /* 0: fits one window (11 tokens) */
    {11, 3, 1, {6}, "SSSuu111uu1"},
    /* 1: 40 tokens, prefix 4, turns at 12, 20, 30: cut at turns, prefix repeated */
    {40, 4, 3, {12, 20, 30}, "SSSSuuu11111uuu11111uuuu111111uuu1111111"},
    /* 2: a turn of 30 tokens (longer than the window) between cuts 5 and 35 */
    {40, 2, 2, {5, 35}, "SSu11uuuuu1111111111111111111111111uu111"},
    /* 3: nothing trained in its second piece */
    {30, 0, 1, {14}, "uu11111111111uuuuuuuuuuuuuuuuu"},
};
#define N_DOCS ((int)(sizeof DOCS / sizeof *DOCS))

static int mask_total(void)
{
    int k = 0;
    for (int d = 0; d < N_DOCS; d++)
        for (int i = 1; i < DOCS[d].n; i++) k += DOCS[d].mask[i] == '1';
    return k;
}

static void test_pieces(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/chat.bin", g_dir);
    write_shard(path, DOCS, N_DOCS);
    tt_shard *s = tt_shard_open(path);
    CHECK_MSG(s != NULL, "%s", tt_last_error());
    if (!s) return;
    CHECK(s->hdr.version == TT_SHARD_VERSION_CHAT && s->hdr.doc_count == N_DOCS && s->hdr.cut_count == 7);
    CHECK(tt_shard_doc_start(s, 1) == 11 && tt_shard_doc_prefix(s, 1) == 4 && tt_shard_cut(s, 0) == 6 &&
          tt_shard_cut(s, 1) == 11 + 12 && s->mask[11 + 7] == 1 && s->mask[11 + 6] == 0);
    tt_shard_close(s);

    tt_loader_cfg cfg = {path, T, 1, 0, TT_LOADER_VAL, 0, 1};
    tt_loader *l = tt_loader_open(&cfg);
    CHECK_MSG(l != NULL, "%s", tt_last_error());
    if (!l) return;
    tt_loader_chat_stats st;
    CHECK(tt_loader_chat_stats_of(l, &st) == 1);
    CHECK_MSG(st.docs == N_DOCS && st.split == 3 && st.truncated == 1 && st.skipped == 1,
              "docs %lld split %lld truncated %lld skipped %lld", (long long)st.docs, (long long)st.split,
              (long long)st.truncated, (long long)st.skipped);
    /* doc 2's long turn keeps T + 1 - 2 tokens from 5 and drops [22, 35) */
    int dropped = 0;
    for (int i = 5 + T + 1 - 2; i < 35; i++) dropped += DOCS[2].mask[i] == '1';
    CHECK_MSG(st.dropped_targets == dropped, "dropped %lld, want %d", (long long)st.dropped_targets, dropped);
    CHECK_MSG(st.targets + st.dropped_targets == mask_total(), "%lld targets + %lld dropped != %d trained",
              (long long)st.targets, (long long)st.dropped_targets, mask_total());

    /* walk every window: targets follow the mask, and each is the next input of its piece */
    int32_t in[T], tg[T], pos[T], doc[T];
    int64_t scored = 0;
    int bad = 0, starts_with_prefix = 0, later_pieces = 0;
    for (int64_t w = 0; w < tt_loader_num_windows(l); w++) {
        int64_t k = tt_loader_window(l, w, in, tg, pos, doc);
        CHECK(k >= 0);
        scored += k;
        for (int t = 0; t < T; t++) {
            if (tg[t] == TT_IGNORE_INDEX) continue;
            int d = tg[t] / 100 - 1, i = tg[t] % 100;
            if (d < 0 || d >= N_DOCS || DOCS[d].mask[i] != '1') bad++;
            /* the next input of the same piece, when there is one */
            if (t + 1 < T && doc[t + 1] == doc[t] && in[t + 1] != tg[t]) bad++;
        }
        /* a piece that jumps within its document: the repeated prefix, then a later turn */
        for (int t = 1; t < T; t++) {
            if (doc[t] != doc[t - 1] || in[t] == PAD || in[t] == in[t - 1] + 1) continue;
            int d = in[t] / 100 - 1, start = t - pos[t];
            later_pieces++;
            starts_with_prefix += d >= 0 && d < N_DOCS && pos[t] == DOCS[d].prefix && in[start] % 100 == 0;
        }
    }
    CHECK_MSG(bad == 0, "%d targets that the mask does not flag or that are not the next input", bad);
    CHECK_MSG(scored == st.targets, "windows score %lld, the loader counted %lld", (long long)scored, (long long)st.targets);
    CHECK_MSG(later_pieces == 5 && starts_with_prefix == 5, "%d pieces jump, %d of them right after their prefix",
              later_pieces, starts_with_prefix);
    tt_loader_close(l);
}

/* one byte changed at off (from the end when negative) must make the shard refused, naming it */
static void expect_refused(const char *good, long off, uint8_t val, const char *want, const char *why)
{
    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad.bin", g_dir);
    FILE *f = fopen(good, "rb");
    uint8_t buf[4096];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 64 && n < sizeof buf);
    size_t at = off < 0 ? n + (size_t)off : (size_t)off;
    if (at < n) buf[at] = val;
    f = fopen(bad, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    tt_shard *s = tt_shard_open(bad);
    CHECK_MSG(s == NULL && strstr(tt_last_error(), "bad.bin") && strstr(tt_last_error(), want), "%s: got \"%s\"", why,
              s ? "(accepted)" : tt_last_error());
    tt_shard_close(s);
}

static void test_bad_shards(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/small.bin", g_dir);
    static const doc_spec two[] = {{6, 1, 1, {3}, "Su1u11"}, {5, 0, 0, {0}, "u1111"}};
    write_shard(path, two, 2);
    /* layout: 64 header, 11 tokens x 2 = 22 (+2 pad), mask 11 (+5 pad) at 88, doc_off 3 x 8 at 104, prefix 2 x 4
     * at 128, cut 1 x 8 at 136; 144 bytes */
    expect_refused(path, 88 + 2, 2, "not 0 or 1", "a mask byte of 2");
    expect_refused(path, 88 + 6, 1, "first token", "a document's first token flagged");
    expect_refused(path, 104 + 8, 12, "out of order", "a document that ends past the next one's end");
    expect_refused(path, 128, 6, "prefix", "a prefix as long as its document");
    expect_refused(path, 136, 1, "cut", "a cut inside the prefix");
    expect_refused(path, 50, 1, "header byte", "a reserved header byte set");
    expect_refused(path, 32, 3, "", "a document count that does not match the size");
    /* counts whose section offsets would wrap around 2^64 to this very size (72 bytes) */
    uint8_t h[72] = "TTSHARD";
    const uint64_t tokens = ((uint64_t)1 << 61) - 8, docs = ((uint64_t)1 << 59) + 3;
    h[8] = 2, h[12] = 4, h[20] = 10;
    for (int i = 0; i < 8; i++) h[24 + i] = (uint8_t)(tokens >> (8 * i)), h[32 + i] = (uint8_t)(docs >> (8 * i));
    tt_shard_header hd;
    CHECK_MSG(tt_shard_validate(h, sizeof h, "wrap.bin", &hd) != 0 && strstr(tt_last_error(), "wrap.bin"),
              "counts that wrap the layout: \"%s\"", tt_last_error());
    tt_shard_writer *w = tt_shard_writer_open_chat(path, 2, PAD, VOCAB);
    int32_t t[3] = {5, 6, 7};
    uint8_t m[3] = {1, 1, 1};
    uint64_t c[1] = {0};
    CHECK(w && tt_shard_writer_append_doc(w, t, m, 3, 0, c, 0) != 0); /* a first token flagged */
    m[0] = 0;
    CHECK(w && tt_shard_writer_append_doc(w, t, m, 3, 1, c, 1) != 0); /* a cut at the prefix */
    CHECK(w && tt_shard_writer_append(w, t, 3) != 0);                 /* loose tokens */
    tt_shard_writer_abort(w);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tt_test_chat_loader_XXXXXX");
    if (!mkdtemp(g_dir)) return th_skip("test_chat_loader", "cannot make a temporary directory");
    test_pieces();
    test_bad_shards();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return th_done("test_chat_loader");
}

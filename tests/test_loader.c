/* test_loader.c — token shards and the data loader: packing invariants,
 * shuffle determinism, exact state save/restore, the validation pass's scored
 * tokens matching the corpus's, and clear errors on bad files. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "harness.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/shard.h"
#include "tokenizer/tokenizer_byte.h"

#define BOS 7
#define VOCAB 300

static char g_dir[64];

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

/* Documents of the given lengths: BOS then tokens that encode (doc, index),
 * so a token says where it came from. */
static int64_t write_docs(const char *path, const int *lens, int ndocs, uint32_t width)
{
    tt_shard_writer *w = tt_shard_writer_open(path, width, BOS, VOCAB);
    CHECK_MSG(w != NULL, "%s", tt_last_error());
    if (!w) return 0;
    int64_t total = 0;
    for (int d = 0; d < ndocs; d++) {
        int32_t t[512];
        t[0] = BOS;
        for (int i = 1; i < lens[d]; i++) t[i] = 10 + (d * 31 + i) % (VOCAB - 10);
        CHECK(tt_shard_writer_append(w, t, (size_t)lens[d]) == 0);
        total += lens[d];
    }
    CHECK(tt_shard_writer_count(w) == (uint64_t)total);
    CHECK(tt_shard_writer_close(w) == 0);
    return total;
}

static tt_loader *open_loader(const char *path, int T, int B, uint64_t seed, tt_loader_mode mode, int rank,
                              int world)
{
    tt_loader_cfg cfg = {path, T, B, seed, mode, rank, world};
    tt_loader *l = tt_loader_open(&cfg);
    CHECK_MSG(l != NULL, "%s", tt_last_error());
    return l;
}

/* ---- packing -------------------------------------------------------------- */
/* token i of document d as write_docs writes it */
static int32_t doc_token(int d, int i) { return i == 0 ? BOS : 10 + (d * 31 + i) % (VOCAB - 10); }

static void test_packing(void)
{
    enum { T = 16 };
    /* 40 tokens is cut into 16 + 16 + 8; 16 exactly fills a window; 17 is one
     * piece of 16 whose last target is the document's last token; 33 is two
     * pieces of 16 (never a 1-token piece with nothing to score) */
    const int lens[] = {5, 9, 3, 16, 40, 1, 7, 12, 4, 4, 4, 4, 20, 2, 17, 33, 3};
    const int nd = (int)(sizeof lens / sizeof lens[0]);
    char path[128];
    path_in(path, sizeof path, "pack.bin");
    write_docs(path, lens, nd, 2);
    tt_loader *l = open_loader(path, T, 3, 1, TT_LOADER_TRAIN, 0, 1);
    if (!l) return;
    /* expected pieces in order: (document, first token, inputs), and expected
     * windows by greedy packing */
    struct {
        int doc, off, len;
    } pieces[64];
    int np = 0;
    for (int d = 0; d < nd; d++)
        for (int off = 0; off == 0 || off + 1 < lens[d]; off += T) {
            pieces[np].doc = d;
            pieces[np].off = off;
            pieces[np++].len = lens[d] - off < T ? lens[d] - off : T;
        }
    int nwin = 0, used = T;
    for (int p = 0; p < np; p++) {
        if (used + pieces[p].len > T) nwin++, used = 0;
        used += pieces[p].len;
    }
    CHECK(tt_loader_num_docs(l) == np);
    CHECK(tt_loader_num_windows(l) == nwin);
    CHECK(tt_loader_vocab_size(l) == VOCAB && tt_loader_bos_id(l) == BOS);

    int32_t in[T], tg[T], pos[T], doc[T];
    int p = 0, bad_in = 0, bad_tg = 0, bad_pos = 0, bad_ign = 0, bad_doc = 0, split = 0;
    int64_t scored_total = 0;
    /* every token of a document after its first is a target exactly once */
    int targeted[32][64];
    memset(targeted, 0, sizeof targeted);
    for (int64_t w = 0; w < nwin; w++) {
        int64_t sc = tt_loader_window(l, w, in, tg, pos, doc);
        int64_t count = 0;
        int o = 0, d = 0;
        /* the window holds whole pieces, in order */
        while (p < np && o + pieces[p].len <= T) {
            const int dd = pieces[p].doc, off = pieces[p].off, n = pieces[p].len;
            for (int j = 0; j < n; j++) {
                bad_in += in[o + j] != doc_token(dd, off + j);
                bad_pos += pos[o + j] != j; /* a continued piece restarts at 0 */
                bad_doc += doc[o + j] != d;
                /* the next token of the document, read past the piece's inputs
                 * for its last target, or ignored at the document's end */
                if (off + j + 1 < lens[dd]) {
                    bad_tg += tg[o + j] != doc_token(dd, off + j + 1);
                    targeted[dd][off + j + 1]++;
                } else {
                    bad_ign += tg[o + j] != TT_IGNORE_INDEX;
                }
            }
            o += n;
            p++;
            d++;
            /* greedy: the next piece did not fit, or this was the last */
        }
        for (int t = o; t < T; t++) bad_ign += tg[t] != TT_IGNORE_INDEX || in[t] != BOS || doc[t] != d;
        for (int t = 0; t < T; t++) count += tg[t] != TT_IGNORE_INDEX;
        CHECK(count == sc);
        scored_total += sc;
        if (p < np && o + pieces[p].len <= T) split++;
    }
    CHECK(p == np); /* every piece placed exactly once, in order */
    CHECK(tt_loader_window(l, nwin, in, tg, pos, doc) == -1 && tt_loader_window(l, -1, in, tg, pos, doc) == -1);
    CHECK_MSG(bad_in == 0 && bad_tg == 0 && bad_pos == 0 && bad_ign == 0 && bad_doc == 0 && split == 0,
              "inputs %d, targets %d, positions %d, ignored %d, doc ids %d, split %d wrong", bad_in, bad_tg, bad_pos,
              bad_ign, bad_doc, split);
    int64_t want = 0, once = 1;
    for (int d = 0; d < nd; d++) {
        want += lens[d] - 1;
        for (int i = 1; i < lens[d]; i++) once &= targeted[d][i] == 1;
    }
    CHECK_MSG(scored_total == want && once, "scored %lld targets, documents have %lld after their first tokens",
              (long long)scored_total, (long long)want);
    /* a document that fits is never split: the 16-token one is one window */
    tt_loader_window(l, 2, in, tg, pos, doc);
    CHECK(in[0] == BOS && pos[15] == 15 && doc[15] == 0 && tg[15] == TT_IGNORE_INDEX);
    /* the 40-token document: pieces of 16, 16, 8, each its own document and
     * each non-final one reading 17 tokens: its last target is the next
     * piece's first input */
    int32_t in2[T], tg2[T], pos2[T], doc2[T];
    tt_loader_window(l, 3, in, tg, pos, doc);
    tt_loader_window(l, 4, in2, tg2, pos2, doc2);
    CHECK(in[0] == BOS && pos[0] == 0 && pos[15] == 15 && tg[14] == in[15] && tg[15] == in2[0]);
    CHECK(in2[0] != BOS && pos2[0] == 0 && tg2[15] != TT_IGNORE_INDEX);
    tt_loader_window(l, 5, in, tg, pos, doc);
    CHECK(tg2[15] == in[0] && pos[0] == 0 && tg[7] == TT_IGNORE_INDEX);
    /* the 17-token document: one window of 16 inputs, all 16 scored */
    CHECK(tt_loader_window(l, nwin - 4, in, tg, pos, doc) == 16 && in[0] == BOS && tg[15] == doc_token(14, 16));
    tt_loader_close(l);

    /* a shard that does not start with BOS: the leading tokens are a document */
    tt_shard_writer *w = tt_shard_writer_open(path, 4, BOS, VOCAB);
    int32_t t[6] = {11, 12, BOS, 13, 14, 15};
    CHECK(tt_shard_writer_append(w, t, 6) == 0 && tt_shard_writer_close(w) == 0);
    l = open_loader(path, 8, 1, 0, TT_LOADER_VAL, 0, 1);
    if (!l) return;
    tt_batch *b = tt_batch_new(1, 8);
    CHECK(tt_loader_next(l, b) == 1);
    CHECK(b->inputs[0] == 11 && b->targets[0] == 12 && b->targets[1] == TT_IGNORE_INDEX && b->positions[2] == 0 &&
          b->doc_ids[2] == 1 && b->targets[4] == 15 && b->doc_ids[6] == 2 && b->n_scored == 4);
    CHECK(tt_loader_next(l, b) == 0);
    tt_batch_free(b);
    tt_loader_close(l);
}

/* ---- training order ------------------------------------------------------ */
static int batches_equal(const tt_batch *a, const tt_batch *b)
{
    size_t n = (size_t)a->B * (size_t)a->T * sizeof(int32_t);
    return a->n_scored == b->n_scored && !memcmp(a->inputs, b->inputs, n) && !memcmp(a->targets, b->targets, n) &&
           !memcmp(a->positions, b->positions, n) && !memcmp(a->doc_ids, b->doc_ids, n);
}

/* which window a row is: its inputs match that window's */
static int64_t row_window(const tt_loader *l, const int32_t *row, int T)
{
    int32_t in[64], tg[64], pos[64], doc[64];
    for (int64_t w = 0; w < tt_loader_num_windows(l); w++) {
        tt_loader_window(l, w, in, tg, pos, doc);
        if (!memcmp(in, row, sizeof(int32_t) * (size_t)T)) return w;
    }
    return -1;
}

static void test_shuffle_and_state(void)
{
    enum { T = 32, B = 4, ND = 150 };
    int lens[ND];
    for (int d = 0; d < ND; d++) lens[d] = 2 + (d * 37) % 29;
    char path[128];
    path_in(path, sizeof path, "order.bin");
    write_docs(path, lens, ND, 2);
    tt_loader *a = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 0, 1);
    tt_loader *b = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 0, 1);
    tt_loader *c = open_loader(path, T, B, 43, TT_LOADER_TRAIN, 0, 1);
    if (!a || !b || !c) return;
    const int64_t W = tt_loader_num_windows(a);
    tt_batch *x = tt_batch_new(B, T), *y = tt_batch_new(B, T), *z = tt_batch_new(B, T);
    /* same seed, same stream; another seed, another order; each epoch is a
     * permutation of all windows */
    int same = 1, differ = 0;
    int64_t seen[2][512];
    memset(seen, 0, sizeof seen);
    int64_t taken = 0, in_order = 0;
    while (taken < 2 * W) {
        CHECK(tt_loader_next(a, x) == 1 && tt_loader_next(b, y) == 1 && tt_loader_next(c, z) == 1);
        same &= batches_equal(x, y);
        differ += !batches_equal(x, z);
        for (int r = 0; r < B && taken < 2 * W; r++, taken++) {
            int64_t w = row_window(a, x->inputs + r * T, T);
            if (w >= 0) seen[taken / W][w]++;
            in_order += w == taken % W;
        }
    }
    CHECK(same);
    CHECK(differ > 0);
    CHECK(in_order < W); /* it is shuffled */
    int perm_ok = 1;
    for (int e = 0; e < 2; e++)
        for (int64_t w = 0; w < W; w++) perm_ok &= seen[e][w] == 1; /* windows are distinct in content here */
    CHECK_MSG(perm_ok, "an epoch is not a permutation of the %lld windows", (long long)W);
    CHECK(tt_loader_num_batches(a) == (W + B - 1) / B);

    /* save mid-run (and across an epoch edge), restore into a fresh loader */
    for (int k = 0; k < 3; k++) tt_loader_next(a, x);
    for (int trial = 0; trial < 2; trial++) {
        tt_loader_state s = tt_loader_get_state(a);
        tt_loader *d = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 0, 1);
        if (!d) break;
        CHECK(tt_loader_set_state(d, s) == 0);
        CHECK(tt_loader_get_state(d).epoch == s.epoch && tt_loader_get_state(d).cursor == s.cursor);
        int eq = 1;
        for (int k = 0; k < (int)(W / B) + 2; k++) { /* runs past the next epoch boundary */
            tt_loader_next(a, x);
            tt_loader_next(d, y);
            eq &= batches_equal(x, y);
        }
        CHECK_MSG(eq, "restored loader diverged (trial %d, epoch %lld cursor %lld)", trial, (long long)s.epoch,
                  (long long)s.cursor);
        tt_loader_close(d);
    }
    CHECK(tt_loader_get_state(a).epoch >= 3);
    /* bad states are refused */
    CHECK(tt_loader_set_state(b, (tt_loader_state){0, W}) != 0 && strstr(tt_last_error(), "order.bin"));
    CHECK(tt_loader_set_state(b, (tt_loader_state){-1, 0}) != 0);
    CHECK(tt_loader_set_state(b, (tt_loader_state){0, -3}) != 0);
    /* reset goes back to the start of epoch 0 */
    tt_loader *f = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 0, 1);
    tt_loader_reset(a);
    tt_loader_next(a, x);
    tt_loader_next(f, y);
    CHECK(batches_equal(x, y));
    /* a batch of the wrong shape is refused */
    tt_batch *wrong = tt_batch_new(B + 1, T);
    CHECK(tt_loader_next(a, wrong) == -1);
    tt_batch_free(wrong);

    /* data parallel: two ranks of B split the global batch of the one-rank
     * loader with 2B */
    tt_loader *g = open_loader(path, T, 2 * B, 42, TT_LOADER_TRAIN, 0, 1);
    tt_loader *r0 = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 0, 2);
    tt_loader *r1 = open_loader(path, T, B, 42, TT_LOADER_TRAIN, 1, 2);
    tt_batch *gb = tt_batch_new(2 * B, T);
    int dp_ok = 1;
    for (int k = 0; k < 30; k++) {
        tt_loader_next(g, gb);
        tt_loader_next(r0, x);
        tt_loader_next(r1, y);
        size_t half = (size_t)B * T * sizeof(int32_t);
        dp_ok &= !memcmp(gb->inputs, x->inputs, half) && !memcmp(gb->inputs + B * T, y->inputs, half) &&
                 !memcmp(gb->targets + B * T, y->targets, half);
        dp_ok &= tt_loader_get_state(r0).cursor == tt_loader_get_state(g).cursor;
    }
    CHECK(dp_ok);
    tt_batch_free(gb);
    tt_loader_close(g);
    tt_loader_close(r0);
    tt_loader_close(r1);
    tt_loader_close(f);
    tt_batch_free(x);
    tt_batch_free(y);
    tt_batch_free(z);
    tt_loader_close(a);
    tt_loader_close(b);
    tt_loader_close(c);
}

/* ---- validation pass over the built-in corpus ----------------------------- */
/* (token, next token) pair counts: within the shard's documents, and over
 * what a loader scores */
#define NPAIR (TT_BYTE_VOCAB * TT_BYTE_VOCAB)
static void shard_pairs(const char *path, int64_t *pairs)
{
    tt_shard *s = tt_shard_open(path);
    CHECK_MSG(s != NULL, "%s", tt_last_error());
    for (uint64_t i = 0; s && i + 1 < s->hdr.token_count; i++) {
        uint32_t a = tt_shard_token(s, i), b = tt_shard_token(s, i + 1);
        if (b != s->hdr.bos_id) pairs[a * TT_BYTE_VOCAB + b]++;
    }
    tt_shard_close(s);
}

static void test_val_scored(void)
{
    char train[128], val[128];
    path_in(train, sizeof train, "train.bin");
    path_in(val, sizeof val, "val.bin");
    tt_corpus_cfg cfg = tt_corpus_cfg_default();
    cfg.train_tokens = 20000;
    cfg.val_tokens = 60000;
    cfg.max_doc_tokens = 256;
    tt_corpus_stats st;
    CHECK_MSG(tt_corpus_write(&cfg, train, val, &st) == 0, "%s", tt_last_error());
    int64_t *want = calloc(2 * NPAIR, sizeof *want), *got = want ? want + NPAIR : NULL;
    if (!want) return;
    shard_pairs(val, want);
    /* T = 256 holds every document whole; at 64 and 100 the long ones are cut
     * into pieces, and still every corpus token after a BOS is scored once */
    const int Ts[] = {256, 64, 100}, B = 8;
    for (int ti = 0; ti < 3; ti++) {
        const int T = Ts[ti];
        int64_t total[3] = {0, 0, 0}, padded[2] = {0, 0};
        memset(got, 0, NPAIR * sizeof *got);
        /* one rank, then two ranks: the pass scores every corpus token once */
        for (int world = 1; world <= 2; world++)
            for (int rank = 0; rank < world; rank++) {
                tt_loader *l = open_loader(val, T, B, 0, TT_LOADER_VAL, rank, world);
                if (!l) goto out;
                tt_batch *b = tt_batch_new(B, T);
                int64_t nb = 0, padded_rows = 0;
                int rc;
                while ((rc = tt_loader_next(l, b)) == 1) {
                    nb++;
                    total[world - 1 + rank] += b->n_scored;
                    for (int r = 0; r < B; r++) {
                        int all_ignored = 1;
                        for (int t = 0; t < T; t++) {
                            const int32_t x = b->inputs[r * T + t], y = b->targets[r * T + t];
                            all_ignored &= y == TT_IGNORE_INDEX;
                            if (world == 1 && y != TT_IGNORE_INDEX) got[x * TT_BYTE_VOCAB + y]++;
                        }
                        padded_rows += all_ignored;
                    }
                }
                CHECK(rc == 0 && nb == tt_loader_num_batches(l));
                padded[world - 1] += padded_rows;
                if (rank == world - 1) /* the last batch is topped up with fully ignored rows */
                    CHECK(padded[world - 1] == nb * B * world - tt_loader_num_windows(l));
                CHECK(tt_loader_next(l, b) == 0); /* stays ended */
                tt_loader_reset(l);
                CHECK(tt_loader_next(l, b) == 1 && tt_loader_get_state(l).cursor == B * world);
                CHECK(tt_loader_set_state(l, (tt_loader_state){1, 0}) != 0);
                tt_batch_free(b);
                tt_loader_close(l);
            }
        CHECK_MSG(total[0] == st.val_scored_tokens, "T %d: loader scored %lld tokens, corpus %lld", T,
                  (long long)total[0], (long long)st.val_scored_tokens);
        CHECK(total[1] + total[2] == st.val_scored_tokens);
        /* and they are the documents' own (token, next token) pairs */
        CHECK_MSG(!memcmp(want, got, NPAIR * sizeof *got), "T %d: scored pairs differ from the documents'", T);
        printf("val, T %d: %lld scored tokens in the loader == corpus count %lld\n", T, (long long)total[0],
               (long long)st.val_scored_tokens);
    }
out:
    free(want);
}

/* ---- bad files --------------------------------------------------------------- */
static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
}

static void test_bad_files(void)
{
    char path[128];
    const int lens[] = {10, 20, 30};
    path_in(path, sizeof path, "good.bin");
    int64_t n = write_docs(path, lens, 3, 2);
    FILE *f = fopen(path, "rb");
    uint8_t buf[256];
    size_t size = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(size == 32 + 2 * (size_t)n);
    tt_shard *s = tt_shard_open(path);
    CHECK(s && s->hdr.token_count == (uint64_t)n && tt_shard_token(s, 0) == BOS);
    tt_shard_close(s);

    struct {
        const char *name, *expect;
        size_t off;
        uint8_t val;
        size_t len;
    } cases[] = {
        {"truncated.bin", "truncated", 0, 0, 0},
        {"magic.bin", "bad magic", 0, 'X', 1},
        {"version.bin", "version", 8, 9, 1},
        {"width.bin", "width", 12, 3, 1},
        {"token.bin", "vocab", 32 + 2 * 5 + 1, 0xff, 1}, /* token 5 becomes >= 65280 */
        {"bos.bin", "bos", 18, 1, 1},                    /* bos 7 + 65536 */
        {"vocab.bin", "vocab size is 0", 20, 0, 4},
        {"count.bin", "overflow", 31, 0xff, 1},
        {"trailing.bin", "trailing", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t b[300];
        memcpy(b, buf, size);
        size_t m = size;
        if (!strcmp(cases[i].name, "truncated.bin")) m = size - 3;
        else if (!strcmp(cases[i].name, "trailing.bin")) b[m++] = 0;
        else memset(b + cases[i].off, cases[i].val, cases[i].len);
        path_in(path, sizeof path, cases[i].name);
        write_raw(path, b, m);
        tt_shard *bad = tt_shard_open(path);
        CHECK(bad == NULL);
        tt_shard_close(bad);
        CHECK_MSG(strstr(tt_last_error(), cases[i].name) && strstr(tt_last_error(), cases[i].expect), "%s: \"%s\"",
                  cases[i].name, tt_last_error());
        tt_loader_cfg cfg = {path, 16, 2, 0, TT_LOADER_TRAIN, 0, 1};
        CHECK(tt_loader_open(&cfg) == NULL && strstr(tt_last_error(), cases[i].name));
    }
    /* the truncation message gives both sizes */
    path_in(path, sizeof path, "truncated.bin");
    tt_shard_open(path);
    char want[128];
    snprintf(want, sizeof want, "header says %lld tokens (%zu bytes) but file has %zu bytes", (long long)n, size,
             size - 3);
    CHECK_MSG(strstr(tt_last_error(), want), "%s", tt_last_error());

    path_in(path, sizeof path, "missing.bin");
    tt_loader_cfg cfg = {path, 16, 2, 0, TT_LOADER_TRAIN, 0, 1};
    CHECK(tt_loader_open(&cfg) == NULL && strstr(tt_last_error(), "missing.bin"));
    path_in(path, sizeof path, "tiny.bin");
    write_raw(path, "TTSHARD", 8);
    CHECK(tt_shard_open(path) == NULL && strstr(tt_last_error(), "tiny.bin"));
    write_raw(path, "", 0);
    CHECK(tt_shard_open(path) == NULL && strstr(tt_last_error(), "tiny.bin"));
    CHECK(tt_shard_open(g_dir) == NULL); /* a directory */

    /* an empty but valid shard has nothing to load */
    path_in(path, sizeof path, "empty.bin");
    tt_shard_writer *w = tt_shard_writer_open(path, 2, BOS, VOCAB);
    CHECK(w && tt_shard_writer_close(w) == 0);
    s = tt_shard_open(path);
    CHECK(s && s->hdr.token_count == 0);
    tt_shard_close(s);
    cfg.path = path;
    CHECK(tt_loader_open(&cfg) == NULL && strstr(tt_last_error(), "empty.bin"));
    /* bad loader shapes and ranks */
    path_in(path, sizeof path, "good.bin");
    tt_loader_cfg bad = {path, 0, 2, 0, TT_LOADER_TRAIN, 0, 1};
    CHECK(tt_loader_open(&bad) == NULL);
    bad = (tt_loader_cfg){path, 16, 2, 0, TT_LOADER_TRAIN, 2, 2};
    CHECK(tt_loader_open(&bad) == NULL && strstr(tt_last_error(), "rank"));

    /* the writer refuses bad tokens and settings, and leaves no file behind */
    path_in(path, sizeof path, "w.bin");
    CHECK(tt_shard_writer_open(path, 3, 0, 10) == NULL);
    CHECK(tt_shard_writer_open(path, 2, 0, 70000) == NULL);
    CHECK(tt_shard_writer_open(path, 2, 10, 10) == NULL);
    w = tt_shard_writer_open(path, 2, 0, 10);
    int32_t t[3] = {1, 10, 2};
    CHECK(tt_shard_writer_append(w, t, 3) != 0 && strstr(tt_last_error(), "w.bin"));
    CHECK(tt_shard_writer_close(w) != 0);
    CHECK(access(path, F_OK) != 0);
    /* 4-byte tokens round-trip large ids */
    w = tt_shard_writer_open(path, 4, 0, 100000);
    int32_t big[2] = {0, 99999};
    CHECK(tt_shard_writer_append(w, big, 2) == 0 && tt_shard_writer_close(w) == 0);
    s = tt_shard_open(path);
    CHECK(s && tt_shard_token(s, 1) == 99999);
    tt_shard_close(s);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tt_test_loader_XXXXXX");
    if (!mkdtemp(g_dir)) return th_skip("test_loader", "cannot make a temporary directory");
    test_packing();
    test_shuffle_and_state();
    test_val_scored();
    test_bad_files();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return th_done("test_loader");
}

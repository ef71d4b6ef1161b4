/* test_tokenizer.c — tokenizer.json parity with Hugging Face `tokenizers`:
 * for every fixture tokenizer (tools/gen_tokenizer_fixtures.py) and text, the
 * ids and the decoded text must equal what HF produced, both ways, the
 * streaming decoder must reassemble the same text, and the offsets encode
 * must give the plain encode's ids and HF's token starts; likewise the
 * published GPT-2 and Llama 2 tokenizers in ../shared. Also chat markup in
 * raw text, the byte tokenizer through the generic interface, thread safety,
 * and one bad file per refusal rule. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/core.h"
#include "harness.h"
#include "tokenizer/bpe_internal.h"
#include "tokenizer/tokenizer.h"

#define FIXTURES TITAN_SOURCE_DIR "/tests/fixtures/tokenizers"

static const char *const FLAVOURS[] = {"gpt2",          "gpt2_prefix",     "llama3",          "qwen2",
                                       "llama2",        "metaspace_first", "metaspace_split", "unk_fused",
                                       "unk_none",      "split_removed",   "split_prev",      "split_next",
                                       "split_contiguous", "split_invert", "split_empty",     NULL};

static cJSON *read_json(const char *path)
{
    char *s = th_read_file(path, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

/* ids of a JSON array */
static size_t json_ids(const cJSON *arr, int32_t *out, size_t cap)
{
    size_t n = 0;
    for (const cJSON *x = arr ? arr->child : NULL; x && n < cap; x = x->next) out[n++] = (int32_t)x->valueint;
    return n;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s (%zu):", what, n);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* tt_tokenizer_encode_offsets on text: the ids of the plain encode without
 * specials (plain, np) and of HF (want, nw), HF's starts (want_at), and
 * starts that never decrease. Grows *ids / *at / *cap for the next call. */
static int check_offsets(const char *name, int i, const tt_tokenizer *t, const char *text, const int32_t *plain,
                         size_t np, const int32_t *want, size_t nw, const cJSON *want_at, int32_t **ids,
                         uint32_t **at, size_t *cap)
{
    size_t n = 0;
    if (tt_tokenizer_encode_offsets(t, text, strlen(text), ids, at, &n, cap) != 0) {
        fprintf(stderr, "%s text %d: encode_offsets failed: %s\n", name, i, tt_last_error());
        return 0;
    }
    if (!same_ids(*ids, n, plain, np) || !same_ids(*ids, n, want, nw)) {
        fprintf(stderr, "%s text %d: encode_offsets ids differ from the plain encode's or HF's\n", name, i);
        print_ids("offsets", *ids, n);
        print_ids("plain  ", plain, np);
        return 0;
    }
    if ((size_t)cJSON_GetArraySize(want_at) != n) {
        fprintf(stderr, "%s text %d: %zu starts, HF has %d\n", name, i, n, cJSON_GetArraySize(want_at));
        return 0;
    }
    size_t k = 0;
    for (const cJSON *x = want_at->child; x; x = x->next, k++)
        if ((*at)[k] != (uint32_t)x->valueint || (k && (*at)[k] < (*at)[k - 1])) {
            fprintf(stderr, "%s text %d \"%s\": token %zu (id %d) starts at byte %u, HF says %d\n", name, i, text, k,
                    (*ids)[k], (*at)[k], x->valueint);
            return 0;
        }
    return 1;
}

/* expected decoded text: "key" or, when it holds NUL, "key_hex" (decoded_skip
 * is absent when equal to decoded); malloc'ed */
static char *expected_text(const cJSON *c, const char *key, size_t *len)
{
    const cJSON *v = cJSON_GetObjectItem(c, key);
    if (cJSON_IsString(v)) {
        *len = strlen(v->valuestring);
        return strdup(v->valuestring);
    }
    char hk[32];
    snprintf(hk, sizeof hk, "%s_hex", key);
    v = cJSON_GetObjectItem(c, hk);
    if (!cJSON_IsString(v)) /* no decoded_skip: the same text as decoded */
        return strcmp(key, "decoded_skip") == 0 ? expected_text(c, "decoded", len) : NULL;
    size_t n = strlen(v->valuestring) / 2;
    char *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned x;
        sscanf(v->valuestring + 2 * i, "%2x", &x);
        b[i] = (char)x;
    }
    b[n] = 0;
    *len = n;
    return b;
}

/* decode and stream-decode ids; both must give want */
static int check_decode_text(const tt_tokenizer *t, const char *name, const char *what, const int32_t *ids,
                             size_t n, int skip, const char *want, size_t want_n)
{
    char *got = NULL;
    size_t len = 0;
    int ok = 1;
    if (tt_tokenizer_decode(t, ids, n, skip, &got, &len) != 0) {
        fprintf(stderr, "%s %s: decode failed: %s\n", name, what, tt_last_error());
        return 0;
    }
    if (len != want_n || memcmp(got, want, len) != 0) {
        fprintf(stderr, "%s %s: decode(skip=%d) gives \"%.*s\", HF gives \"%s\"\n", name, what, skip, (int)len, got,
                want);
        ok = 0;
    }
    free(got);
    /* streaming: one id at a time, then finish */
    tt_tok_stream *s = tt_tok_stream_new(t, skip);
    if (!s) return 0;
    char *acc = malloc(1);
    size_t an = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece;
        size_t pn;
        int rc = i < n ? tt_tok_stream_feed(s, ids[i], &piece, &pn) : tt_tok_stream_finish(s, &piece, &pn);
        if (rc) {
            ok = 0;
            break;
        }
        acc = realloc(acc, an + pn + 1);
        memcpy(acc + an, piece, pn);
        an += pn;
    }
    if (an != want_n || memcmp(acc, want, an) != 0) {
        fprintf(stderr, "%s %s: streaming decode(skip=%d) gives \"%.*s\", HF gives \"%s\"\n", name, what, skip,
                (int)an, acc, want);
        ok = 0;
    }
    free(acc);
    tt_tok_stream_free(s);
    return ok;
}

/* decode and stream-decode ids; both must give HF's text (c[key]) */
static int check_decode(const tt_tokenizer *t, const char *name, const char *what, const int32_t *ids, size_t n,
                        int skip, const cJSON *c)
{
    size_t want_n = 0;
    char *want = expected_text(c, skip ? "decoded_skip" : "decoded", &want_n);
    if (!want) {
        fprintf(stderr, "%s %s: no expected text\n", name, what);
        return 0;
    }
    int ok = check_decode_text(t, name, what, ids, n, skip, want, want_n);
    free(want);
    return ok;
}

/* one tokenizer against its expected.json: every text both ways */
static void check_parity(const char *name, const tt_tokenizer *t, const cJSON *texts, const cJSON *exp)
{
    enum { CAP = 8192 };
    int32_t *want = malloc(CAP * sizeof *want), *pre = malloc(64 * sizeof *pre), *suf = malloc(64 * sizeof *suf);
    int32_t *full = malloc(CAP * sizeof *full);
    size_t npre = json_ids(cJSON_GetObjectItem(exp, "special_prefix"), pre, 64);
    size_t nsuf = json_ids(cJSON_GetObjectItem(exp, "special_suffix"), suf, 64);
    int32_t *ids = NULL, *oids = NULL;
    uint32_t *at = NULL;
    size_t n = 0, cap = 0, ocap = 0;
    int bad_enc = 0, bad_dec = 0, bad_off = 0, i = 0;
    const cJSON *c = cJSON_GetObjectItem(exp, "cases")->child;
    for (const cJSON *tx = texts->child; tx && c; tx = tx->next, c = c->next, i++) {
        const char *text = tx->valuestring;
        size_t nw = json_ids(cJSON_GetObjectItem(c, "ids"), want, CAP);
        int rc = tt_tokenizer_encode(t, text, strlen(text), 0, &ids, &n, &cap);
        if (rc != 0 || !same_ids(ids, n, want, nw)) {
            fprintf(stderr, "%s text %d \"%s\": ids differ from HF%s%s\n", name, i, text, rc ? ": " : "",
                    rc ? tt_last_error() : "");
            print_ids("titan", ids, rc ? 0 : n);
            print_ids("HF   ", want, nw);
            bad_enc++;
        }
        if (rc == 0 && !check_offsets(name, i, t, text, ids, n, want, nw, cJSON_GetObjectItem(c, "starts"), &oids, &at,
                                      &ocap))
            bad_off++;
        memcpy(full, pre, npre * sizeof *pre);
        memcpy(full + npre, want, nw * sizeof *want);
        memcpy(full + npre + nw, suf, nsuf * sizeof *suf);
        size_t nf = npre + nw + nsuf;
        rc = tt_tokenizer_encode(t, text, strlen(text), 1, &ids, &n, &cap);
        if (rc != 0 || !same_ids(ids, n, full, nf)) {
            fprintf(stderr, "%s text %d: ids with special tokens differ from HF\n", name, i);
            bad_enc++;
        }
        char what[32];
        snprintf(what, sizeof what, "text %d", i);
        if (!check_decode(t, name, what, full, nf, 0, c)) bad_dec++;
        if (!check_decode(t, name, what, full, nf, 1, c)) bad_dec++;
    }
    CHECK_MSG(i == cJSON_GetArraySize(texts), "%s: %d of %d texts have expected ids", name, i,
              cJSON_GetArraySize(texts));
    i = 0;
    for (const cJSON *d = cJSON_GetObjectItem(exp, "decodes")->child; d; d = d->next, i++) {
        size_t nd = json_ids(cJSON_GetObjectItem(d, "ids"), want, CAP);
        char what[32];
        snprintf(what, sizeof what, "random ids %d", i);
        if (!check_decode(t, name, what, want, nd, 0, d)) bad_dec++;
        if (!check_decode(t, name, what, want, nd, 1, d)) bad_dec++;
    }
    CHECK_MSG(bad_enc == 0, "%s: %d encodings differ from HF", name, bad_enc);
    CHECK_MSG(bad_dec == 0, "%s: %d decodings differ from HF", name, bad_dec);
    CHECK_MSG(bad_off == 0, "%s: %d offset encodings differ from HF", name, bad_off);
    CHECK_MSG(tt_tokenizer_vocab_size(t) == cJSON_GetObjectItem(exp, "vocab_size")->valueint,
              "%s: vocab size %d, HF %d", name, tt_tokenizer_vocab_size(t),
              cJSON_GetObjectItem(exp, "vocab_size")->valueint);
    free(ids);
    free(oids);
    free(at);
    free(want);
    free(full);
    free(pre);
    free(suf);
}

/* BOS / EOS each fixture should report (NULL: none) */
static const char *const BOS_EOS[][2] = {
    {"<|endoftext|>", "<|endoftext|>"}, {"<s>", "</s>"}, {"<|begin_of_text|>", "<|end_of_text|>"},
    {"<|endoftext|>", "<|endoftext|>"}, {"<s>", "</s>"}, {"<s>", "</s>"}, {"<s>", "</s>"},
    {"<s>", "</s>"}, {"<s>", "</s>"}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL},
    {NULL, NULL}};

static void test_fixtures(const cJSON *texts)
{
    for (int f = 0; FLAVOURS[f]; f++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", FIXTURES, FLAVOURS[f]);
        tt_tokenizer *t = tt_tokenizer_load(path);
        CHECK_MSG(t != NULL, "%s: %s", FLAVOURS[f], tt_last_error());
        snprintf(path, sizeof path, "%s/%s/expected.json", FIXTURES, FLAVOURS[f]);
        cJSON *exp = read_json(path);
        CHECK_MSG(exp != NULL, "cannot read %s", path);
        if (t && exp) check_parity(FLAVOURS[f], t, texts, exp);
        if (t) {
            int bos = BOS_EOS[f][0] ? tt_tokenizer_token_id(t, BOS_EOS[f][0]) : -1;
            int eos = BOS_EOS[f][1] ? tt_tokenizer_token_id(t, BOS_EOS[f][1]) : -1;
            CHECK_MSG((BOS_EOS[f][0] == NULL || bos >= 0) && tt_tokenizer_bos_id(t) == bos &&
                          tt_tokenizer_eos_id(t) == eos,
                      "%s: bos %d eos %d, want %d %d", FLAVOURS[f], tt_tokenizer_bos_id(t), tt_tokenizer_eos_id(t),
                      bos, eos);
        }
        cJSON_Delete(exp);
        tt_tokenizer_free(t);
    }
}

static void test_real(const cJSON *texts)
{
    const char *shared = th_shared_dir();
    if (!shared) {
        th_skip_part("test_tokenizer: the published GPT-2 / Llama 2 tokenizers (../shared is absent)");
        return;
    }
    static const char *const names[] = {"gpt2", "llama2"};
    static const int bos[] = {50256, 1}, eos[] = {50256, 2};
    for (int k = 0; k < 2; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/tokenizers/%s/tokenizer.json", shared, names[k]);
        tt_tokenizer *t = tt_tokenizer_load(path);
        CHECK_MSG(t != NULL, "%s: %s", names[k], tt_last_error());
        snprintf(path, sizeof path, "%s/real/%s.expected.json", FIXTURES, names[k]);
        cJSON *exp = read_json(path);
        CHECK_MSG(exp != NULL, "cannot read %s", path);
        if (t && exp) {
            char name[32];
            snprintf(name, sizeof name, "real %s", names[k]);
            check_parity(name, t, texts, exp);
            CHECK(tt_tokenizer_bos_id(t) == bos[k] && tt_tokenizer_eos_id(t) == eos[k]);
        }
        cJSON_Delete(exp);
        tt_tokenizer_free(t);
    }
}

/* ---- chat markup in raw text: one id per added token, starting where its text does ---- */

/* With add_special 0, every marker written in text must come out as its own
 * single id, starting at the marker's first byte, the next token starting
 * right after it; no other id may be a marker's. */
static void check_markup(const char *flavour, const char *text, const char *const *markers)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", FIXTURES, flavour);
    tt_tokenizer *t = tt_tokenizer_load(path);
    CHECK_MSG(t != NULL, "%s: %s", flavour, tt_last_error());
    if (!t) return;
    int32_t *ids = NULL;
    uint32_t *at = NULL;
    size_t n = 0, cap = 0;
    CHECK_MSG(tt_tokenizer_encode_offsets(t, text, strlen(text), &ids, &at, &n, &cap) == 0, "%s: %s", flavour,
              tt_last_error());
    size_t found = 0, marker_ids = 0;
    for (int m = 0; markers[m]; m++) {
        int id = tt_tokenizer_token_id(t, markers[m]);
        CHECK_MSG(id >= 0, "%s: no id for %s", flavour, markers[m]);
        for (size_t k = 0; k < n; k++) marker_ids += ids[k] == id;
        size_t len = strlen(markers[m]);
        for (const char *p = strstr(text, markers[m]); p; p = strstr(p + len, markers[m])) {
            uint32_t off = (uint32_t)(p - text);
            size_t k = 0;
            while (k < n && at[k] < off) k++;
            int ok = k < n && at[k] == off && ids[k] == id && (k + 1 == n || at[k + 1] == off + len);
            CHECK_MSG(ok, "%s: %s at byte %u is not one id %d starting there (token %zu: id %d at %u)", flavour,
                      markers[m], off, id, k, k < n ? ids[k] : -1, k < n ? at[k] : 0);
            found++;
        }
    }
    CHECK_MSG(found > 0 && found == marker_ids, "%s: %zu markers in the text, %zu marker ids", flavour, found,
              marker_ids);
    free(ids);
    free(at);
    tt_tokenizer_free(t);
}

static void test_chat_markup(void)
{
    static const char *const chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
    check_markup("qwen2", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", chatml);
    static const char *const llama3[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                         "<|eot_id|>", NULL};
    check_markup("llama3",
                 "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant"
                 "<|end_header_id|>\n\n",
                 llama3);
}

/* ---- the hand-written regex matchers agree with PCRE2 ------------------------------ */

static void test_fast_regex(void)
{
    static const char *const pats[] = {
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
        "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
    /* pieces whose every join is a corner: classes, contractions in both
     * cases, and the non-ASCII letters, digits, spaces and marks that must
     * send the fast path back to PCRE2 */
    static const char *const atoms[] = {
        "a", "Zq", "x", "0", "7", "123", " ", "  ", "\t", "\n", "\r", "\r\n", "'", "s", "t", "re", "ve", "ll",
        "d", "m", "S", "RE", "Ll", ".", ",", "(", "-", "_", "\x01", "\x7f", "\xc3\xa9", "\xc5\xbf", "\xe2\x84\xaa",
        "\xe4\xb8\xad", "\xd9\xa3", "\xe2\x91\xa0", "\xe2\x85\xab", "\xc2\xa0", "\xc2\x85", "\xe3\x80\x80",
        "\xe2\x80\xa8", "\xcc\x81", "\xf0\x9f\x98\x80", "\xc2\xab", "\xe2\x80\x8b"};
    const int n_atoms = (int)(sizeof atoms / sizeof *atoms);
    const char ok[] = "{" "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}" "}";
    tt_tokenizer *t = tt_tokenizer_parse(ok, strlen(ok), "ok.json");
    tok_scratch *sc = t ? tok_scratch_get(t) : NULL;
    CHECK(sc != NULL);
    if (!sc) {
        tt_tokenizer_free(t);
        return;
    }
    tt_rng rng = {7, 0};
    int bad = 0, fast_hits = 0;
    for (int k = 0; k < 3; k++) {
        tok_pattern fast, slow;
        CHECK(tok_pattern_compile(&fast, pats[k], strlen(pats[k]), 0, "t", "fast") == 0 && fast.fast == k + 1);
        CHECK(tok_pattern_compile(&slow, pats[k], strlen(pats[k]), 0, "t", "slow") == 0);
        slow.fast = 0;
        for (int r = 0; r < 3000; r++) {
            char text[256];
            size_t n = 0;
            int m = 1 + (int)tt_rng_below(&rng, 20);
            for (int i = 0; i < m; i++) {
                const char *a = atoms[tt_rng_below(&rng, (uint64_t)n_atoms)];
                memcpy(text + n, a, strlen(a));
                n += strlen(a);
            }
            tok_finder f1, f2;
            tok_finder_init(&f1, &fast, text, n, sc);
            tok_finder_init(&f2, &slow, text, n, sc);
            size_t a1, b1, a2, b2;
            for (;;) {
                size_t e;
                if (f1.pos < n && tok_fast_match(fast.fast, text, n, f1.pos, &e)) fast_hits++;
                int r1 = tok_finder_next(&f1, &a1, &b1), r2 = tok_finder_next(&f2, &a2, &b2);
                if (r1 != r2 || (r1 == 1 && (a1 != a2 || b1 != b2))) {
                    if (bad++ < 5)
                        fprintf(stderr, "pattern %d on \"%.*s\": fast match [%zu, %zu), PCRE2 [%zu, %zu)\n", k, (int)n,
                                text, r1 == 1 ? a1 : 0, r1 == 1 ? b1 : 0, r2 == 1 ? a2 : 0, r2 == 1 ? b2 : 0);
                    break;
                }
                if (r1 != 1) break;
            }
        }
        tok_pattern_free(&fast);
        tok_pattern_free(&slow);
    }
    CHECK_MSG(bad == 0, "%d strings split differently by the fast matchers and PCRE2", bad);
    CHECK(fast_hits > 10000); /* the fast paths did run */
    tok_scratch_put(t, sc);
    tt_tokenizer_free(t);
}

/* ---- byte tokenizer through the generic interface ------------------------------ */

static void test_byte(void)
{
    tt_tokenizer *t = tt_tokenizer_byte_new();
    CHECK(t && tt_tokenizer_vocab_size(t) == 258 && tt_tokenizer_bos_id(t) == 256 && tt_tokenizer_eos_id(t) == 257);
    const char text[] = "h\xc3\xa9llo\xff";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    CHECK(tt_tokenizer_encode(t, text, 7, 1, &ids, &n, &cap) == 0 && n == 8 && ids[0] == 256 && ids[2] == 0xc3 &&
          ids[7] == 0xff);
    char *out = NULL;
    size_t len = 0;
    CHECK(tt_tokenizer_decode(t, ids, n, 1, &out, &len) == 0 && len == 7 && memcmp(out, text, 7) == 0);
    free(out);
    CHECK(tt_tokenizer_encode(t, text, 7, 0, &ids, &n, &cap) == 0 && n == 7 && ids[0] == 'h');
    /* offsets: id i is byte i; the arrays grow from NULL */
    int32_t *oids = NULL;
    uint32_t *at = NULL;
    size_t on = 0, ocap = 0;
    CHECK(tt_tokenizer_encode_offsets(t, text, 7, &oids, &at, &on, &ocap) == 0 && on == 7 && ocap >= 7 &&
          same_ids(oids, on, ids, n) && at[0] == 0 && at[2] == 2 && at[6] == 6);
    CHECK(tt_tokenizer_encode_offsets(t, "", 0, &oids, &at, &on, &ocap) == 0 && on == 0);
    free(oids);
    free(at);
    tt_tok_stream *s = tt_tok_stream_new(t, 1);
    const char *piece;
    size_t pn;
    CHECK(s && tt_tok_stream_feed(s, 0xc3, &piece, &pn) == 0 && pn == 1 && (unsigned char)piece[0] == 0xc3);
    CHECK(tt_tok_stream_feed(s, 257, &piece, &pn) == 0 && pn == 0);
    CHECK(tt_tok_stream_finish(s, &piece, &pn) == 0 && pn == 0);
    tt_tok_stream_free(s);
    free(ids);
    tt_tokenizer_free(t);
}

/* ---- streaming: a character split over byte tokens waits for its last byte ---------- */

static void test_stream_holds(void)
{
    tt_tokenizer *t = tt_tokenizer_load(FIXTURES "/llama2/tokenizer.json");
    CHECK(t != NULL);
    if (!t) return;
    /* 中 = E4 B8 AD through byte fallback, then a normal token */
    int32_t ids[4];
    const char *names[3] = {"<0xE4>", "<0xB8>", "<0xAD>"};
    for (int i = 0; i < 3; i++) ids[i] = tt_tokenizer_token_id(t, names[i]);
    ids[3] = tt_tokenizer_token_id(t, "\xe2\x96\x81the");
    CHECK(ids[0] >= 0 && ids[1] >= 0 && ids[2] >= 0 && ids[3] >= 0);
    tt_tok_stream *s = tt_tok_stream_new(t, 1);
    const char *p;
    size_t pn;
    for (int i = 0; i < 3; i++) CHECK(tt_tok_stream_feed(s, ids[i], &p, &pn) == 0 && pn == 0);
    CHECK(tt_tok_stream_feed(s, ids[3], &p, &pn) == 0 && pn == 7 && memcmp(p, "\xe4\xb8\xad the", 7) == 0);
    CHECK(tt_tok_stream_finish(s, &p, &pn) == 0 && pn == 0);
    CHECK(tt_tok_stream_feed(s, ids[3], &p, &pn) != 0); /* finished */
    tt_tok_stream_free(s);
    tt_tokenizer_free(t);

    /* byte-level: the same character split over three byte tokens */
    t = tt_tokenizer_load(FIXTURES "/gpt2/tokenizer.json");
    CHECK(t != NULL);
    if (!t) return;
    int32_t *enc = NULL;
    size_t n = 0, cap = 0;
    CHECK(tt_tokenizer_encode(t, "\xe4\xb8\xad", 3, 0, &enc, &n, &cap) == 0 && n == 3);
    s = tt_tok_stream_new(t, 0);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(tt_tok_stream_feed(s, enc[i], &p, &pn) == 0);
        total += pn;
        if (i + 1 < n) CHECK(pn == 0);
    }
    CHECK(total == 3 && memcmp(p, "\xe4\xb8\xad", 3) == 0);
    /* a lone lead byte at the end becomes U+FFFD on finish */
    CHECK(tt_tok_stream_feed(s, enc[0], &p, &pn) == 0 && pn == 0);
    CHECK(tt_tok_stream_finish(s, &p, &pn) == 0 && pn == 3 && memcmp(p, "\xef\xbf\xbd", 3) == 0);
    tt_tok_stream_free(s);
    free(enc);
    tt_tokenizer_free(t);
}

/* ---- thread safety: concurrent encodes agree with a lone one ------------------------- */

typedef struct {
    const tt_tokenizer *t;
    const char *text;
    const int32_t *want; /* a lone encode's ids: with specials, or (offsets) without */
    const uint32_t *want_at; /* NULL, or a lone offsets encode's starts: this thread encodes with offsets */
    size_t n_want;
    int bad;
} thread_job;

static void *encode_thread(void *arg)
{
    thread_job *j = arg;
    int32_t *ids = NULL;
    uint32_t *at = NULL;
    size_t n = 0, cap = 0;
    for (int r = 0; r < 20; r++) {
        int rc = j->want_at ? tt_tokenizer_encode_offsets(j->t, j->text, strlen(j->text), &ids, &at, &n, &cap)
                            : tt_tokenizer_encode(j->t, j->text, strlen(j->text), 1, &ids, &n, &cap);
        if (rc != 0 || !same_ids(ids, n, j->want, j->n_want) ||
            (j->want_at && memcmp(at, j->want_at, n * sizeof *at) != 0))
            j->bad++;
    }
    free(ids);
    free(at);
    return NULL;
}

static void test_threads(const cJSON *texts)
{
    tt_tokenizer *t = tt_tokenizer_load(FIXTURES "/qwen2/tokenizer.json");
    CHECK(t != NULL);
    if (!t) return;
    /* all texts joined: long enough to overlap in time */
    size_t total = 0;
    for (const cJSON *x = texts->child; x; x = x->next) total += strlen(x->valuestring) + 1;
    char *text = malloc(total * 8 + 1);
    size_t at = 0;
    for (int rep = 0; rep < 8; rep++)
        for (const cJSON *x = texts->child; x; x = x->next) {
            size_t l = strlen(x->valuestring);
            memcpy(text + at, x->valuestring, l);
            at += l;
            text[at++] = '\n';
        }
    text[at] = 0;
    int32_t *want = NULL;
    size_t n = 0, cap = 0;
    CHECK(tt_tokenizer_encode(t, text, at, 1, &want, &n, &cap) == 0 && n > 1000);
    int32_t *want0 = NULL;
    uint32_t *want_at = NULL;
    size_t n0 = 0, cap0 = 0;
    CHECK(tt_tokenizer_encode_offsets(t, text, at, &want0, &want_at, &n0, &cap0) == 0 && n0 > 1000);
    enum { NT = 4 };
    pthread_t th[NT];
    thread_job jobs[NT];
    for (int i = 0; i < NT; i++) {
        /* half the threads encode plainly, half with offsets, at once */
        jobs[i] = i % 2 ? (thread_job){t, text, want0, want_at, n0, 0} : (thread_job){t, text, want, NULL, n, 0};
        pthread_create(&th[i], NULL, encode_thread, &jobs[i]);
    }
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].bad == 0, "thread %d: %d encodes differ", i, jobs[i].bad);
    }
    free(want);
    free(want0);
    free(want_at);
    free(text);
    tt_tokenizer_free(t);
}

/* ---- refusals: each bad file fails with a message naming the file and the problem ---- */

#define MODEL_OK "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"

static void expect_error(const char *json, const char *fragment)
{
    tt_tokenizer *t = tt_tokenizer_parse(json, strlen(json), "bad.json");
    const char *msg = tt_last_error();
    CHECK_MSG(t == NULL && strstr(msg, "bad.json") && strstr(msg, fragment), "for %s\n    got: %s\n    want: %s", json,
              t ? "(loaded)" : msg, fragment);
    tt_tokenizer_free(t);
}

static void test_errors(void)
{
    expect_error("{\"model\": {\"type\": \"BPE\",", "malformed JSON");
    expect_error("[1, 2]", "not a JSON object");
    expect_error("{}", "model is missing");
    expect_error("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "model.type 'Unigram' is not supported (BPE only)");
    expect_error("{\"model\":{\"type\":\"WordPiece\"}}", "model.type 'WordPiece' is not supported");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":[\"a\"],\"merges\":[]}}", "model.vocab is missing or not an object");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "model.vocab['a']");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1.5},\"merges\":[]}}", "must be an integer");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", "must be an integer");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999999},\"merges\":[]}}", "out of range");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", "id 0 is given to both");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":{}}}", "model.merges");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[7]}}", "model.merges[0] must be");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a  a\"]}}", "model.merges[0] must be");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",\"a c\"]}}",
                 "model.merges[1]: token 'c' is not in model.vocab");
    expect_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\",\"b\"]]}}",
                 "merged token 'ab' is not in model.vocab");
    expect_error("{\"model\":{\"type\":\"BPE\",\"byte_fallback\":\"yes\",\"vocab\":{},\"merges\":[]}}",
                 "model.byte_fallback must be true or false");
    expect_error("{\"model\":{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}}", "model.dropout");
    expect_error("{\"version\":\"2.0\"," MODEL_OK "}", "version '2.0' is not supported");
    expect_error("{\"added_tokens\":[{\"id\":99,\"content\":\"<x>\",\"special\":true}]," MODEL_OK "}",
                 "added_tokens[0].id 99 is out of range");
    expect_error("{\"added_tokens\":[{\"id\":0,\"content\":\"b\",\"special\":true}]," MODEL_OK "}",
                 "added_tokens[0].id 0 for 'b' does not match model.vocab");
    expect_error("{\"added_tokens\":[{\"id\":-3,\"content\":\"<x>\"}]," MODEL_OK "}", "added_tokens[0].id");
    expect_error("{\"added_tokens\":[{\"content\":\"<x>\"}]," MODEL_OK "}", "added_tokens[0].id is missing");
    expect_error("{\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"single_word\":true}]," MODEL_OK "}",
                 "single_word = true is not supported");
    expect_error("{\"added_tokens\":{}," MODEL_OK "}", "added_tokens must be an array");
    expect_error("{\"normalizer\":{\"type\":\"Lowercase\"}," MODEL_OK "}",
                 "normalizer.type 'Lowercase' is not supported");
    expect_error("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Precompiled\"}]},"
                 MODEL_OK "}",
                 "normalizer.normalizers[1].type 'Precompiled' is not supported");
    expect_error("{\"normalizer\":{\"type\":\"Replace\",\"pattern\":\" \",\"content\":\"x\"}," MODEL_OK "}",
                 "normalizer.pattern must be");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Whitespace\"}," MODEL_OK "}",
                 "pre_tokenizer.type 'Whitespace' is not supported");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"},"
                 MODEL_OK "}",
                 "pre_tokenizer.pattern: regex does not compile");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"a\"},\"behavior\":\"Sideways\"},"
                 MODEL_OK "}",
                 "pre_tokenizer.behavior 'Sideways'");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":"
                 "\"Metaspace\"}]}," MODEL_OK "}",
                 "pre_tokenizer.pretokenizers[1]: a pre-tokenizer after ByteLevel is not supported");
    expect_error("{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}," MODEL_OK "}",
                 "replacement must be exactly one character");
    expect_error("{\"decoder\":{\"type\":\"WordPiece\"}," MODEL_OK "}", "decoder.type 'WordPiece' is not supported");
    expect_error("{\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"Replace\","
                 "\"pattern\":{\"String\":\"a\"},\"content\":\"b\"}]}," MODEL_OK "}",
                 "decoder.decoders[1]: 'Replace' after the tokens were joined");
    expect_error("{\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":-1}," MODEL_OK "}", "decoder.start");
    expect_error("{\"post_processor\":{\"type\":\"BertProcessing\"}," MODEL_OK "}",
                 "post_processor.type 'BertProcessing' is not supported");
    expect_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
                 "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{}}," MODEL_OK "}",
                 "special_tokens['<s>'].ids is missing");
    expect_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
                 "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"ids\":[70]}}}," MODEL_OK "}",
                 "template id 70 is not in the vocabulary");
    expect_error("{\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"B\"}}]}," MODEL_OK
                 "}",
                 "may only hold sequence A");

    /* offsets HF moves (ByteLevel trim_offsets) or lets drift (byte fallback with a subword prefix) are
     * refused by name, while ids still work */
    static const char *const no_offsets[][2] = {
        {"{\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true}," MODEL_OK "}",
         "post_processor.trim_offsets = true is not supported by tt_tokenizer_encode_offsets"},
        {"{\"post_processor\":{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"}]}," MODEL_OK "}",
         "post_processor.processors[0].trim_offsets = true"},
        {"{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"continuing_subword_prefix\":\"##\",\"vocab\":"
         "{\"a\":0,\"##b\":1,\"ab\":2},\"merges\":[\"a ##b\"]}}",
         "model.byte_fallback with a continuing_subword_prefix"}};
    for (int k = 0; k < 3; k++) {
        tt_tokenizer *t = tt_tokenizer_parse(no_offsets[k][0], strlen(no_offsets[k][0]), "offs.json");
        CHECK_MSG(t != NULL, "%s", tt_last_error());
        if (!t) continue;
        int32_t *ids = NULL;
        uint32_t *at = NULL;
        size_t n = 0, cap = 0;
        CHECK(tt_tokenizer_encode(t, "ab", 2, 0, &ids, &n, &cap) == 0 && n >= 1);
        CHECK_MSG(tt_tokenizer_encode_offsets(t, "ab", 2, &ids, &at, &n, &cap) != 0 &&
                      strstr(tt_last_error(), "offs.json") && strstr(tt_last_error(), no_offsets[k][1]),
                  "got: %s", tt_last_error());
        free(ids);
        free(at);
        tt_tokenizer_free(t);
    }
    /* a text past 32-bit offsets is refused before it is read (so a short buffer serves) */
    if (SIZE_MAX > UINT32_MAX) {
        tt_tokenizer *t = tt_tokenizer_byte_new();
        int32_t *ids = NULL;
        uint32_t *at = NULL;
        size_t n = 0, cap = 0;
        CHECK(tt_tokenizer_encode_offsets(t, "x", (size_t)UINT32_MAX + 1, &ids, &at, &n, &cap) != 0 &&
              strstr(tt_last_error(), "too long for offsets") && ids == NULL && at == NULL);
        tt_tokenizer_free(t);
    }

    /* a file that does not exist names itself */
    CHECK(tt_tokenizer_load("/nonexistent/tokenizer.json") == NULL &&
          strstr(tt_last_error(), "/nonexistent/tokenizer.json"));

    /* the minimal valid file loads; invalid UTF-8 text is refused at its offset */
    const char ok[] = "{" MODEL_OK "}";
    tt_tokenizer *t = tt_tokenizer_parse(ok, strlen(ok), "ok.json");
    CHECK_MSG(t != NULL, "%s", tt_last_error());
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        CHECK(tt_tokenizer_encode(t, "abab", 4, 0, &ids, &n, &cap) == 0 && n == 2 && ids[0] == 2 && ids[1] == 2);
        CHECK(tt_tokenizer_encode(t, "ab\xc3(", 4, 0, &ids, &n, &cap) != 0 && strstr(tt_last_error(), "byte 2"));
        CHECK(tt_tokenizer_bos_id(t) == -1 && tt_tokenizer_eos_id(t) == -1 && tt_tokenizer_vocab_size(t) == 3);
        char *out = NULL;
        size_t len = 0;
        int32_t odd[] = {2, -5, 1, 1000000, 0};
        /* unknown ids are dropped, as HF does; no decoder joins with spaces */
        CHECK(tt_tokenizer_decode(t, odd, 5, 0, &out, &len) == 0 && strcmp(out, "ab b a") == 0);
        free(out);
        free(ids);
        tt_tokenizer_free(t);
    }
    /* an unk token missing from the vocabulary fails only when it is needed (as HF) */
    const char unk[] = "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0},\"merges\":[]}}";
    t = tt_tokenizer_parse(unk, strlen(unk), "unk.json");
    CHECK(t != NULL);
    if (t) {
        int32_t *ids = NULL;
        size_t n = 0, cap = 0;
        CHECK(tt_tokenizer_encode(t, "aa", 2, 0, &ids, &n, &cap) == 0 && n == 2);
        CHECK(tt_tokenizer_encode(t, "ab", 2, 0, &ids, &n, &cap) != 0 && strstr(tt_last_error(), "<unk>"));
        free(ids);
        tt_tokenizer_free(t);
    }
}

int main(void)
{
    cJSON *texts_doc = read_json(FIXTURES "/texts.json");
    const cJSON *texts = texts_doc ? cJSON_GetObjectItem(texts_doc, "texts") : NULL;
    CHECK_MSG(texts != NULL, "cannot read %s/texts.json", FIXTURES);
    if (texts) {
        test_fixtures(texts);
        test_real(texts);
        test_threads(texts);
    }
    test_chat_markup();
    test_fast_regex();
    test_byte();
    test_stream_holds();
    test_errors();
    cJSON_Delete(texts_doc);
    return th_done("test_tokenizer");
}

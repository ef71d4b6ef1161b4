/* bench_tokenizer.c — tokenizer throughput, single thread: encode and decode
 * MB/s on a multi-MB English + code text (the repository's own sources and
 * docs, repeated to --mb MB), for the published GPT-2 and Llama 2 tokenizers
 * in ../shared (or the files given).
 *
 *   bench_tokenizer [--mb 4] [--text FILE] [--dump-text FILE] [tokenizer.json ...]
 *
 * --dump-text writes the exact text, so HF tokenizers can be timed on it.
 * "offsets 4KB" times tt_tokenizer_encode_offsets on the same 4 KB chunks. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/tokenizer.h"

static char *text;
static size_t text_n, text_cap;

static void append(const char *s, size_t n)
{
    if (text_n + n + 1 > text_cap) {
        text_cap = (text_n + n + 1) * 2;
        text = realloc(text, text_cap);
        if (!text) exit(1);
    }
    memcpy(text + text_n, s, n);
    text_n += n;
    text[text_n] = 0;
}

static int append_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) append(buf, k);
    fclose(f);
    return 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int add_source(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_F && (ends_with(path, ".c") || ends_with(path, ".h") || ends_with(path, ".md") ||
                          ends_with(path, ".py") || ends_with(path, ".toml")))
        append_file(path);
    return 0;
}

/* the repository root, from where this file was compiled */
static void repo_root(char *out, size_t cap)
{
    const char *f = __FILE__;
    const char *cut = strstr(f, "bench/bench_tokenizer.c");
    if (f[0] == '/' && cut) snprintf(out, cap, "%.*s", (int)(cut - f), f);
    else snprintf(out, cap, "./");
}

static void bench(const char *path, double min_seconds)
{
    double t0 = tt_now();
    tt_tokenizer *t = tt_tokenizer_load(path);
    if (!t) {
        printf("%s: %s\n", path, tt_last_error());
        return;
    }
    double load = tt_now() - t0;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    /* warm-up, then as many whole-text encodes as fit in min_seconds */
    if (tt_tokenizer_encode(t, text, text_n, 0, &ids, &n, &cap)) {
        printf("%s: encode failed: %s\n", path, tt_last_error());
        tt_tokenizer_free(t);
        return;
    }
    int reps = 0;
    t0 = tt_now();
    do {
        tt_tokenizer_encode(t, text, text_n, 0, &ids, &n, &cap);
        reps++;
    } while (tt_now() - t0 < min_seconds);
    double enc = (tt_now() - t0) / reps;

    /* per document: one call per ~4 KB chunk cut at a newline */
    int32_t *cids = NULL;
    size_t cn = 0, ccap = 0, chunks = 0;
    t0 = tt_now();
    for (size_t at = 0; at < text_n;) {
        size_t end = at + 4096 < text_n ? at + 4096 : text_n;
        while (end < text_n && text[end - 1] != '\n') end++;
        tt_tokenizer_encode(t, text + at, end - at, 0, &cids, &cn, &ccap);
        chunks++;
        at = end;
    }
    double enc_chunks = tt_now() - t0;

    /* the same chunks with offsets (what chat fine-tuning asks for) */
    uint32_t *starts = NULL;
    int offs_ok = 1;
    ccap = 0;
    free(cids);
    cids = NULL;
    t0 = tt_now();
    for (size_t at = 0; at < text_n && offs_ok;) {
        size_t end = at + 4096 < text_n ? at + 4096 : text_n;
        while (end < text_n && text[end - 1] != '\n') end++;
        offs_ok = tt_tokenizer_encode_offsets(t, text + at, end - at, &cids, &starts, &cn, &ccap) == 0;
        at = end;
    }
    double enc_offsets = tt_now() - t0;
    free(starts);

    char *out = NULL;
    size_t len = 0;
    reps = 0;
    t0 = tt_now();
    do {
        free(out);
        tt_tokenizer_decode(t, ids, n, 0, &out, &len);
        reps++;
    } while (tt_now() - t0 < min_seconds);
    double dec = (tt_now() - t0) / reps;

    /* streaming decode, one id at a time */
    tt_tok_stream *s = tt_tok_stream_new(t, 0);
    size_t streamed = 0;
    t0 = tt_now();
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pn;
        tt_tok_stream_feed(s, ids[i], &p, &pn);
        streamed += pn;
    }
    double dec_stream = tt_now() - t0;
    tt_tok_stream_free(s);

    double mb = (double)text_n / 1e6;
    printf("%s\n  vocab %d, load %.0f ms, %.2f MB -> %zu tokens (%.2f bytes/token), round trip %s\n", path,
           tt_tokenizer_vocab_size(t), load * 1e3, mb, n, (double)text_n / (double)n,
           len == text_n && memcmp(out, text, len) == 0 ? "exact" : "differs (normalizer or unk)");
    printf("  encode         %7.2f MB/s  (%.2f M tokens/s)\n", mb / enc, (double)n / enc / 1e6);
    printf("  encode 4KB     %7.2f MB/s  (%zu calls)\n", mb / enc_chunks, chunks);
    if (offs_ok) printf("  offsets 4KB    %7.2f MB/s  (tt_tokenizer_encode_offsets)\n", mb / enc_offsets);
    else printf("  offsets 4KB    refused: %s\n", tt_last_error());
    printf("  decode         %7.2f MB/s  (%.2f M tokens/s)\n", (double)len / 1e6 / dec, (double)n / dec / 1e6);
    printf("  decode stream  %7.2f MB/s\n", (double)streamed / 1e6 / dec_stream);
    free(out);
    free(ids);
    free(cids);
    tt_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    double mb = 4;
    const char *dump = NULL;
    const char *paths[16];
    int n_paths = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) {
            if (append_file(argv[++i])) {
                fprintf(stderr, "cannot read %s\n", argv[i]);
                return 1;
            }
        } else if (!strcmp(argv[i], "--dump-text") && i + 1 < argc) dump = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--mb 4] [--text FILE] [--dump-text FILE] [tokenizer.json ...]\n", argv[0]);
            return 2;
        } else if (n_paths < 16) paths[n_paths++] = argv[i];
    }
    char root[4096], p1[4200], p2[4200], dir[4200];
    repo_root(root, sizeof root);
    if (!text_n) {
        static const char *const dirs[] = {"src", "tests", "tools", "bench", "docs", "configs"};
        for (int d = 0; d < 6; d++) {
            snprintf(dir, sizeof dir, "%s%s", root, dirs[d]);
            nftw(dir, add_source, 16, FTW_PHYS);
        }
        snprintf(dir, sizeof dir, "%s../shared/DESIGN.md", root);
        append_file(dir);
        if (!text_n) {
            fprintf(stderr, "no text found under %s; pass --text FILE\n", root);
            return 1;
        }
    }
    /* repeat to the requested size (the cache is bounded, so repeats stay honest) */
    size_t base = text_n, want = (size_t)(mb * 1e6);
    if (want > text_n) {
        text = realloc(text, want + 1);
        if (!text) return 1;
        text_cap = want + 1;
        while (text_n < want) {
            size_t k = base < want - text_n ? base : want - text_n;
            memcpy(text + text_n, text, k);
            text_n += k;
        }
        text[text_n] = 0;
    }
    /* cut at a character boundary */
    while (text_n && ((unsigned char)text[text_n - 1] & 0xC0) == 0x80) text_n--;
    while (text_n && ((unsigned char)text[text_n - 1] & 0x80)) text_n--;
    text[text_n] = 0;
    if (dump) {
        FILE *f = fopen(dump, "wb");
        if (!f || fwrite(text, 1, text_n, f) != text_n) return 1;
        fclose(f);
    }
    if (!n_paths) {
        snprintf(p1, sizeof p1, "%s../shared/fixtures/tokenizers/gpt2/tokenizer.json", root);
        snprintf(p2, sizeof p2, "%s../shared/fixtures/tokenizers/llama2/tokenizer.json", root);
        paths[n_paths++] = p1;
        paths[n_paths++] = p2;
    }
    printf("bench_tokenizer: %.2f MB of English + code, one thread\n", (double)text_n / 1e6);
    for (int i = 0; i < n_paths; i++) bench(paths[i], 1.0);
    free(text);
    return 0;
}

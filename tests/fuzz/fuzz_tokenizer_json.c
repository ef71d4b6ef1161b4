/* fuzz_tokenizer_json.c — libFuzzer target for the tokenizer.json loader: no
 * input may crash it, and any tokenizer that loads must encode and decode a
 * few small strings (and arbitrary ids) without crashing, with the streaming
 * decoder giving exactly what batch decode gives, and the offsets encode
 * (where it does not refuse) the plain encode's ids with starts that never
 * decrease and stay inside the text. Seeds: the files under
 * tests/fixtures/tokenizers/; dictionary: tokenizer_json.dict. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static void check_decode(const tt_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    char *out = NULL;
    size_t len = 0;
    if (tt_tokenizer_decode(t, ids, n, skip, &out, &len) != 0) return;
    tt_tok_stream *s = tt_tok_stream_new(t, skip);
    if (!s) {
        free(out);
        return;
    }
    size_t at = 0;
    int ok = 1;
    for (size_t i = 0; i <= n && ok; i++) {
        const char *p;
        size_t pn;
        if ((i < n ? tt_tok_stream_feed(s, ids[i], &p, &pn) : tt_tok_stream_finish(s, &p, &pn)) != 0) break;
        ok = at + pn <= len && memcmp(out + at, p, pn) == 0;
        at += pn;
        if (i == n && at != len) ok = 0;
    }
    tt_tok_stream_free(s);
    free(out);
    if (!ok) __builtin_trap(); /* the stream must reassemble the batch text */
}

/* the offsets encode of text against the plain one's ids */
static void check_offsets(const tt_tokenizer *t, const char *text, const int32_t *ids, size_t n)
{
    int32_t *oids = NULL;
    uint32_t *at = NULL;
    size_t on = 0, cap = 0, len = strlen(text);
    if (tt_tokenizer_encode_offsets(t, text, len, &oids, &at, &on, &cap) == 0) {
        if (on != n || (n && memcmp(oids, ids, n * sizeof *ids) != 0)) __builtin_trap();
        for (size_t i = 0; i < on; i++)
            if (at[i] >= len || (i && at[i] < at[i - 1])) __builtin_trap();
    }
    free(oids);
    free(at);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tt_tokenizer *t = tt_tokenizer_parse((const char *)data, size, "fuzz.json");
    if (!t) return 0;
    static const char *const texts[] = {"Hello world", "  <s>x</s> \xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\n\t 123 'll \xe2\x96\x81",
                                        "", "<|endoftext|><0x41>   "};
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        for (int special = 0; special < 2; special++)
            if (tt_tokenizer_encode(t, texts[k], strlen(texts[k]), special, &ids, &n, &cap) == 0) {
                for (size_t i = 0; i < n; i++)
                    if (ids[i] < 0 || ids[i] >= tt_tokenizer_vocab_size(t)) __builtin_trap();
                check_decode(t, ids, n, 0);
                check_decode(t, ids, n, 1);
                if (!special) check_offsets(t, texts[k], ids, n);
            }
    /* arbitrary ids, in and out of range, from the input's last bytes */
    int32_t raw[16];
    size_t nr = 0;
    for (size_t i = size; i > 0 && nr < 16; i--) raw[nr++] = (int32_t)((data[i - 1] * 2654435761u) >> (i % 17)) - 8;
    check_decode(t, raw, nr, 0);
    check_decode(t, raw, nr, 1);
    free(ids);
    tt_tokenizer_free(t);
    return 0;
}

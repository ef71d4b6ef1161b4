/* tokenizer.c — the generic tokenizer interface: the byte tokenizer and
 * tokenizer.json (BPE) behind one set of calls, plus file loading. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"
#include "tokenizer/tokenizer_byte.h"

tt_tokenizer *tt_tokenizer_byte_new(void)
{
    tt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        tt_errorf("tokenizer: out of memory");
        return NULL;
    }
    t->kind = TOK_BYTE;
    t->n_ids = TT_BYTE_VOCAB;
    t->bos = TT_BYTE_BOS;
    t->eos = TT_BYTE_EOS;
    pthread_mutex_init(&t->pool_lock, NULL);
    return t;
}

tt_tokenizer *tt_tokenizer_parse(const char *json, size_t len, const char *name_for_errors)
{
    return tok_bpe_parse(json, len, name_for_errors ? name_for_errors : "tokenizer.json");
}

tt_tokenizer *tt_tokenizer_load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tt_errorf("%s: cannot open the tokenizer file", path);
        return NULL;
    }
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        tt_errorf("%s: cannot read the tokenizer file", path);
        return NULL;
    }
    buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        tt_errorf("%s: out of memory (%ld bytes)", path, size);
        return NULL;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        tt_errorf("%s: short read (%zu of %ld bytes)", path, got, size);
        return NULL;
    }
    buf[size] = 0;
    tt_tokenizer *t = tok_bpe_parse(buf, (size_t)size, path);
    free(buf);
    return t;
}

void tt_tokenizer_free(tt_tokenizer *t)
{
    if (!t) return;
    if (t->kind == TOK_BYTE) {
        pthread_mutex_destroy(&t->pool_lock);
        free(t);
        return;
    }
    tok_bpe_free(t);
}

int tt_tokenizer_vocab_size(const tt_tokenizer *t) { return t->n_ids; }
int tt_tokenizer_bos_id(const tt_tokenizer *t) { return t->bos; }
int tt_tokenizer_eos_id(const tt_tokenizer *t) { return t->eos; }

int tt_tokenizer_token_id(const tt_tokenizer *t, const char *token)
{
    if (t->kind == TOK_BYTE) return strlen(token) == 1 ? (unsigned char)token[0] : -1;
    return tok_bpe_token_id(t, token);
}

tt_err tt_tokenizer_encode(const tt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                           size_t *n, size_t *cap)
{
    if (t->kind == TOK_BPE) return tok_bpe_encode((tt_tokenizer *)t, text, len, add_special, ids, n, cap);
    size_t need = len + (add_special ? 1 : 0);
    if (need < len) return tt_errorf("byte tokenizer: text too long");
    if (!*ids || *cap < need) {
        size_t c = need ? need : 1;
        int32_t *p = realloc(*ids, c * sizeof *p);
        if (!p) return tt_errorf("byte tokenizer: out of memory (%zu ids)", c);
        *ids = p;
        *cap = c;
    }
    return tt_byte_encode(text, len, add_special ? TT_BYTE_ADD_BOS : 0, *ids, *cap, n);
}

/* the byte tokenizer: id i is byte i, so it starts at i */
static tt_err byte_encode_offsets(const char *text, size_t len, int32_t **ids, uint32_t **starts, size_t *n,
                                  size_t *cap)
{
    size_t c = *ids && *starts ? *cap : 0;
    if (c < len || !*ids || !*starts) {
        c = len ? len : 1;
        int32_t *pi = realloc(*ids, c * sizeof *pi);
        if (pi) *ids = pi;
        uint32_t *ps = pi ? realloc(*starts, c * sizeof *ps) : NULL;
        if (ps) *starts = ps;
        if (!ps) {
            *cap = 0; /* whichever grew, neither is known to hold more */
            return tt_errorf("byte tokenizer: out of memory (%zu ids)", c);
        }
        *cap = c;
    }
    for (size_t i = 0; i < len; i++) (*starts)[i] = (uint32_t)i;
    return tt_byte_encode(text, len, 0, *ids, *cap, n);
}

tt_err tt_tokenizer_encode_offsets(const tt_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                   uint32_t **starts, size_t *n, size_t *cap)
{
    *n = 0;
    if (len > UINT32_MAX)
        return tt_errorf("tokenizer: a text of %zu bytes is too long for offsets (they are 32-bit: at most %u bytes)",
                         len, UINT32_MAX);
    if (t->kind == TOK_BPE) return tok_bpe_encode_offsets((tt_tokenizer *)t, text, len, ids, starts, n, cap);
    return byte_encode_offsets(text, len, ids, starts, n, cap);
}

/* ---- decoding ------------------------------------------------------------------- */

tt_tok_stream *tt_tok_stream_new(const tt_tokenizer *t, int skip_special)
{
    tt_tok_stream *s = calloc(1, sizeof *s);
    if (!s) {
        tt_errorf("tokenizer: out of memory");
        return NULL;
    }
    if (t->kind == TOK_BYTE) {
        s->t = t;
        return s;
    }
    if (tok_stream_init(s, t, skip_special)) {
        free(s);
        return NULL;
    }
    return s;
}

tt_err tt_tok_stream_feed(tt_tok_stream *s, int32_t id, const char **text, size_t *len)
{
    s->out.n = 0;
    int rc = 0;
    if (s->finished) rc = tt_errorf("tokenizer: feed after finish");
    else if (s->t->kind == TOK_BYTE) {
        if (id >= 0 && id < 256) {
            char c = (char)id;
            rc = tok_buf_put(&s->out, &c, 1);
        }
    } else rc = tok_stream_feed(s, id);
    if (!rc && !(rc = tok_buf_reserve(&s->out, 0))) s->out.p[s->out.n] = 0;
    *text = rc ? "" : s->out.p;
    *len = rc ? 0 : s->out.n;
    return rc;
}

tt_err tt_tok_stream_finish(tt_tok_stream *s, const char **text, size_t *len)
{
    s->out.n = 0;
    int rc = 0;
    if (!s->finished && s->t->kind == TOK_BPE) rc = tok_stream_finish(s);
    s->finished = 1;
    if (!rc && !(rc = tok_buf_reserve(&s->out, 0))) s->out.p[s->out.n] = 0;
    *text = rc ? "" : s->out.p;
    *len = rc ? 0 : s->out.n;
    return rc;
}

void tt_tok_stream_free(tt_tok_stream *s)
{
    if (!s) return;
    if (s->t->kind == TOK_BPE) tok_stream_release(s);
    else tok_buf_free(&s->out);
    free(s);
}

tt_err tt_tokenizer_decode(const tt_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out,
                           size_t *len)
{
    *out = NULL;
    *len = 0;
    if (t->kind == TOK_BYTE) {
        char *b = malloc(n + 1);
        if (!b) return tt_errorf("byte tokenizer: out of memory");
        size_t k = 0;
        if (tt_byte_decode(ids, n, TT_BYTE_SKIP_INVALID, (uint8_t *)b, n, &k)) {
            free(b);
            return -1;
        }
        b[k] = 0;
        *out = b;
        *len = k;
        return 0;
    }
    tt_tok_stream s;
    if (tok_stream_init(&s, t, skip_special)) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) rc = tok_stream_feed(&s, ids[i]);
    if (!rc) rc = tok_stream_finish(&s);
    if (!rc) rc = tok_buf_reserve(&s.out, 0);
    if (!rc) {
        s.out.p[s.out.n] = 0;
        *out = s.out.p;
        *len = s.out.n;
        s.out.p = NULL; /* handed to the caller */
        s.out.n = s.out.cap = 0;
    }
    tok_stream_release(&s);
    return rc;
}

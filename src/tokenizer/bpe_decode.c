/* bpe_decode.c — tokenizer.json decoders (Replace, ByteFallback, Fuse, Strip,
 * Metaspace, ByteLevel, in sequence) written as a stream: each token goes
 * through the token-level stages, is joined at the first Fuse / ByteLevel, and
 * the joined text goes through the stages after it. Batch decode is the same
 * stream fed every id, so streaming and batch output agree by construction. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

static const char REPLACEMENT_CHAR[] = "\xEF\xBF\xBD"; /* U+FFFD */

int tok_dec_check(const tt_tokenizer *t, const char *file)
{
    int n_bf = 0;
    for (int k = 0; k < t->n_decs; k++) {
        tok_dec_kind kd = t->decs[k].kind;
        if (kd == DEC_BYTE_FALLBACK && ++n_bf > 1)
            return tt_errorf("%s: decoder: more than one ByteFallback is not supported", file);
        if (k > t->dec_fuse_at && kd != DEC_STRIP && kd != DEC_METASPACE && kd != DEC_FUSE)
            return tt_errorf("%s: decoder.decoders[%d]: '%s' after the tokens were joined (by '%s' at [%d]) is not "
                             "supported",
                             file, k,
                             kd == DEC_REPLACE ? "Replace" : kd == DEC_BYTE_FALLBACK ? "ByteFallback" : "ByteLevel",
                             t->decs[t->dec_fuse_at].kind == DEC_FUSE ? "Fuse" : "ByteLevel", t->dec_fuse_at);
    }
    return 0;
}

/* ---- text after the join ------------------------------------------------------ */

static int push_text(tt_tok_stream *S, int k, const char *s, size_t n)
{
    const tt_tokenizer *t = S->t;
    if (k >= t->n_decs) return tok_buf_put(&S->out, s, n);
    const tok_decoder *d = &t->decs[k];
    if (d->kind == DEC_FUSE) return push_text(S, k + 1, s, n);
    if (d->kind == DEC_METASPACE) {
        char rc[4];
        if (!tok_find(s, n, rc, (size_t)tok_utf8_put(d->ch, rc))) return push_text(S, k + 1, s, n);
    }
    if (d->kind == DEC_STRIP && S->strip_left_done[k] && d->stop == 0) return push_text(S, k + 1, s, n);
    tok_buf *b = &S->stage[k];
    b->n = 0;
    char ch[4];
    int chn = tok_utf8_put(d->ch, ch);
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = tok_utf8_get(s + i, &adv);
        const char *c = s + i;
        i += adv;
        if (d->kind == DEC_METASPACE) {
            /* the joined text is one token, the first: with a prepend scheme
             * every replacement character goes, else each becomes a space */
            if (cp == d->ch) {
                if (d->prepend == PREPEND_NEVER && tok_buf_put(b, " ", 1)) return -1;
                continue;
            }
            if (tok_buf_put(b, c, adv)) return -1;
            continue;
        }
        /* Strip: up to `start` leading and `stop` trailing content characters */
        if (!S->strip_left_done[k]) {
            if (S->strip_left_cut[k] < d->start && cp == d->ch) {
                S->strip_left_cut[k]++;
                continue;
            }
            S->strip_left_done[k] = 1;
        }
        if (d->stop > 0 && cp == d->ch) {
            /* hold back a trailing run; only its last `stop` characters may go */
            if (S->strip_pending[k] == d->stop) {
                if (tok_buf_put(b, ch, (size_t)chn)) return -1;
            } else S->strip_pending[k]++;
            continue;
        }
        for (; S->strip_pending[k] > 0; S->strip_pending[k]--)
            if (tok_buf_put(b, ch, (size_t)chn)) return -1;
        if (tok_buf_put(b, c, adv)) return -1;
    }
    return b->n ? push_text(S, k + 1, b->p, b->n) : 0;
}

/* Rust's String::from_utf8_lossy as a stream: each maximal invalid subpart
 * becomes one U+FFFD; an incomplete sequence waits for more bytes. */
static int lossy_feed(tt_tok_stream *S, const uint8_t *s, size_t n, tok_buf *out)
{
    for (size_t i = 0; i < n; i++) {
        if (!S->u8_n) {
            /* the valid, complete part goes in one copy */
            size_t v = tok_utf8_invalid_at((const char *)s + i, n - i);
            if (v && tok_buf_put(out, s + i, v)) return -1;
            i += v;
            if (i == n) break;
        }
        uint8_t c = s[i];
        if (S->u8_n) {
            uint8_t lead = S->u8[0], lo = 0x80, hi = 0xBF;
            int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            if (S->u8_n == 1) {
                if (lead == 0xE0) lo = 0xA0;
                else if (lead == 0xED) hi = 0x9F;
                else if (lead == 0xF0) lo = 0x90;
                else if (lead == 0xF4) hi = 0x8F;
            }
            if (c >= lo && c <= hi) {
                S->u8[S->u8_n++] = c;
                if (S->u8_n == need) {
                    if (tok_buf_put(out, S->u8, (size_t)need)) return -1;
                    S->u8_n = 0;
                }
                continue;
            }
            S->u8_n = 0;
            if (tok_buf_put(out, REPLACEMENT_CHAR, 3)) return -1;
        }
        if (c < 0x80) {
            if (tok_buf_put(out, &c, 1)) return -1;
        } else if ((c >= 0xC2 && c <= 0xDF) || (c >= 0xE0 && c <= 0xF4)) {
            S->u8[0] = c;
            S->u8_n = 1;
        } else if (tok_buf_put(out, REPLACEMENT_CHAR, 3)) return -1;
    }
    return 0;
}

/* ByteLevel's bytes of one token: as UTF-8 text to the stages after it */
static int push_bytes(tt_tok_stream *S, int k, const uint8_t *bytes, size_t len)
{
    tok_buf *o = &S->lossy;
    o->n = 0;
    if (lossy_feed(S, bytes, len, o)) return -1;
    return o->n ? push_text(S, k + 1, o->p, o->n) : 0;
}

/* the join point: Fuse, ByteLevel (token characters back to bytes), or the
 * end of the chain (tokens concatenated; with no decoder at all, by spaces) */
static int push_joined(tt_tok_stream *S, const char *s, size_t n)
{
    const tt_tokenizer *t = S->t;
    int k = t->dec_fuse_at;
    if (k < t->n_decs && t->decs[k].kind == DEC_BYTE_LEVEL) {
        tok_buf *b = &S->stage[k];
        b->n = 0;
        if (tok_buf_reserve(b, n)) return -1;
        size_t nb = 0;
        int all = 1;
        for (size_t i = 0; i < n;) {
            size_t adv;
            int byte = tok_char_byte(tok_utf8_get(s + i, &adv));
            if (byte < 0) {
                all = 0;
                break;
            }
            b->p[nb++] = (char)byte;
            i += adv;
        }
        /* a token with a character outside the byte map is taken as UTF-8 */
        return all ? push_bytes(S, k, (const uint8_t *)b->p, nb) : push_bytes(S, k, (const uint8_t *)s, n);
    }
    if (t->dec_join_space && S->joined++ && push_text(S, k + 1, " ", 1)) return -1;
    return push_text(S, k + 1, s, n);
}

/* ---- token-level stages --------------------------------------------------------- */

static int push_tok(tt_tok_stream *S, int k, const char *s, size_t n);

/* "<0xNN>" -> NN (Rust's u8::from_str_radix also takes a '+' sign), else -1 */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            if (i == 3 && c == '+') continue;
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

/* ByteFallback: a run of byte tokens becomes its text if it is valid UTF-8,
 * else one U+FFFD per byte */
static int flush_group(tt_tok_stream *S, int k)
{
    tok_buf *g = &S->group;
    if (!g->n) return 0;
    int rc = 0;
    if (tok_utf8_invalid_at(g->p, g->n) == g->n) {
        rc = push_tok(S, k + 1, g->p, g->n);
    } else {
        for (size_t i = 0; i < g->n && !rc; i++) rc = push_tok(S, k + 1, REPLACEMENT_CHAR, 3);
    }
    g->n = 0;
    return rc;
}

static int push_tok(tt_tok_stream *S, int k, const char *s, size_t n)
{
    const tt_tokenizer *t = S->t;
    if (k >= t->dec_fuse_at) return push_joined(S, s, n);
    const tok_decoder *d = &t->decs[k];
    tok_buf *b = &S->stage[k];
    switch (d->kind) {
    case DEC_REPLACE:
        if (!d->pat.re && !tok_find(s, n, d->pat.lit, d->pat.lit_n)) return push_tok(S, k + 1, s, n);
        b->n = 0;
        if (tok_replace_all(&d->pat, s, n, d->str, d->str_n, S->sc, b) || tok_buf_reserve(b, 0)) return -1;
        return push_tok(S, k + 1, b->p, b->n);
    case DEC_BYTE_FALLBACK: {
        int v = byte_token(s, n);
        if (v >= 0) {
            char c = (char)v;
            return tok_buf_put(&S->group, &c, 1);
        }
        if (flush_group(S, k)) return -1;
        return push_tok(S, k + 1, s, n);
    }
    case DEC_STRIP: {
        size_t a = 0, e = n, adv;
        for (int i = 0; i < d->start && a < n && tok_utf8_get(s + a, &adv) == d->ch; i++) a += adv;
        for (int i = 0; i < d->stop && e > a; i++) {
            size_t p = e - 1;
            while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
            if (tok_utf8_get(s + p, &adv) != d->ch) break;
            e = p;
        }
        return push_tok(S, k + 1, s + a, e - a);
    }
    case DEC_METASPACE: {
        int first = S->count[k]++ == 0;
        b->n = 0;
        if (tok_buf_reserve(b, n)) return -1;
        for (size_t i = 0; i < n;) {
            size_t adv;
            uint32_t cp = tok_utf8_get(s + i, &adv);
            if (cp == d->ch) {
                if (!(first && d->prepend != PREPEND_NEVER) && tok_buf_put(b, " ", 1)) return -1;
            } else if (tok_buf_put(b, s + i, adv)) return -1;
            i += adv;
        }
        return push_tok(S, k + 1, b->p, b->n);
    }
    case DEC_FUSE:
    case DEC_BYTE_LEVEL: break; /* never before dec_fuse_at */
    }
    return tt_errorf("tokenizer: unknown decoder");
}

/* ---- the stream ------------------------------------------------------------------ */

int tok_stream_init(tt_tok_stream *S, const tt_tokenizer *t, int skip_special)
{
    memset(S, 0, sizeof *S);
    S->t = t;
    S->skip_special = skip_special;
    for (int k = 0; k < t->n_decs; k++)
        if (t->decs[k].kind == DEC_REPLACE && t->decs[k].pat.re) {
            S->sc = tok_scratch_get((tt_tokenizer *)t);
            if (!S->sc) return -1;
            break;
        }
    return 0;
}

void tok_stream_release(tt_tok_stream *S)
{
    if (S->sc) tok_scratch_put((tt_tokenizer *)S->t, S->sc);
    tok_buf_free(&S->out);
    tok_buf_free(&S->group);
    tok_buf_free(&S->lossy);
    for (int k = 0; k < TOK_MAX_STAGES; k++) tok_buf_free(&S->stage[k]);
    S->sc = NULL;
}

int tok_stream_feed(tt_tok_stream *S, int32_t id)
{
    const tt_tokenizer *t = S->t;
    if (id < 0 || id >= t->n_ids || !(t->id_flags[id] & TOK_ID_PRESENT)) return 0; /* HF drops unknown ids */
    if (S->skip_special && (t->id_flags[id] & TOK_ID_SPECIAL)) return 0;
    if (t->bl_off) /* ByteLevel first: its bytes were worked out at load */
        return push_bytes(S, 0, (const uint8_t *)t->bl_blob.p + t->bl_off[id], t->bl_len[id]);
    return push_tok(S, 0, t->id_blob.p + t->id_off[id], t->id_len[id]);
}

int tok_stream_finish(tt_tok_stream *S)
{
    const tt_tokenizer *t = S->t;
    for (int k = 0; k < t->dec_fuse_at; k++)
        if (t->decs[k].kind == DEC_BYTE_FALLBACK && flush_group(S, k)) return -1;
    if (S->u8_n) {
        S->u8_n = 0;
        if (push_text(S, t->dec_fuse_at + 1, REPLACEMENT_CHAR, 3)) return -1;
    }
    /* a trailing run held back by Strip is dropped */
    return 0;
}

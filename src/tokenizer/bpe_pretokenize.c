/* bpe_pretokenize.c — tokenizer.json pre-tokenizers (Split, ByteLevel,
 * Metaspace, in sequence), run depth-first: each stage splits its piece and
 * hands every sub-piece to the next stage, the last one to the BPE model, so
 * no list of pieces is ever built for a large text. */
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

static int run(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n, int at_origin);

/* One stage's splitter: turns find_matches' (span, is_match) sequence into
 * pieces per SplitDelimiterBehavior, holding at most one pending piece. */
typedef struct {
    const tt_tokenizer *t;
    tok_scratch *sc;
    int depth;
    const char *s;
    int at_origin;
    tok_split_behavior beh;
    int have, pend_match, prev_match;
    size_t pa, pb;
} splitter;

static int emit(splitter *sp, size_t a, size_t b)
{
    if (b <= a) return 0; /* HF drops empty pieces */
    return run(sp->t, sp->sc, sp->depth + 1, sp->s + a, b - a, sp->at_origin && a == 0);
}

static int flush(splitter *sp)
{
    if (!sp->have) return 0;
    sp->have = 0;
    return emit(sp, sp->pa, sp->pb);
}

static void hold(splitter *sp, size_t a, size_t b, int m)
{
    sp->have = 1;
    sp->pa = a;
    sp->pb = b;
    sp->pend_match = m;
}

static int element(splitter *sp, size_t a, size_t b, int m)
{
    int rc = 0;
    switch (sp->beh) {
    case SPLIT_ISOLATED: rc = emit(sp, a, b); break;
    case SPLIT_REMOVED:
        if (!m) rc = emit(sp, a, b);
        break;
    case SPLIT_MERGED_PREV:
        /* a match joins the piece before it, unless that was a match too */
        if (m && !sp->prev_match && sp->have) sp->pb = b;
        else {
            rc = flush(sp);
            hold(sp, a, b, m);
        }
        break;
    case SPLIT_MERGED_NEXT:
        /* a match joins the non-match after it */
        if (sp->have) {
            if (sp->pend_match && !m) {
                sp->have = 0;
                return emit(sp, sp->pa, b);
            }
            if ((rc = flush(sp))) return rc;
        }
        if (m) hold(sp, a, b, m);
        else rc = emit(sp, a, b);
        break;
    case SPLIT_CONTIGUOUS:
        if (sp->have && m == sp->pend_match) sp->pb = b;
        else {
            rc = flush(sp);
            hold(sp, a, b, m);
        }
        break;
    }
    sp->prev_match = m;
    return rc;
}

static int split(const tt_tokenizer *t, tok_scratch *sc, int depth, const tok_pattern *p, tok_split_behavior beh,
                 int invert, const char *s, size_t n, int at_origin)
{
    splitter sp = {.t = t, .sc = sc, .depth = depth, .s = s, .at_origin = at_origin, .beh = beh};
    tok_finder f;
    tok_finder_init(&f, p, s, n, sc);
    size_t prev = 0, a, b;
    int r;
    while ((r = tok_finder_next(&f, &a, &b)) == 1) {
        if (prev != a && element(&sp, prev, a, invert)) return -1;
        if (element(&sp, a, b, !invert)) return -1;
        prev = b;
    }
    if (r < 0) return -1;
    if (prev != n && element(&sp, prev, n, invert)) return -1;
    return flush(&sp);
}

static int starts_with(const char *s, size_t n, const char *p, size_t pn) { return n >= pn && memcmp(s, p, pn) == 0; }

static int run(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n, int at_origin)
{
    if (depth == t->n_pretoks) return tok_model_word(t, sc, s, n);
    const tok_pretok *pt = &t->pretoks[depth];
    tok_buf *buf = &sc->pre[depth];
    switch (pt->kind) {
    case PRE_SPLIT: return split(t, sc, depth, &pt->pat, pt->behavior, pt->invert, s, n, at_origin);
    case PRE_BYTE_LEVEL:
        if (pt->add_prefix_space && s[0] != ' ') {
            buf->n = 0;
            if (tok_buf_put(buf, " ", 1) || tok_buf_put(buf, s, n)) return -1;
            s = buf->p;
            n = buf->n;
        }
        /* the byte -> character map itself is left to the model, which then
         * starts from one symbol per byte (t->byte_level) */
        if (pt->use_regex) return split(t, sc, depth, &pt->pat, SPLIT_ISOLATED, 0, s, n, at_origin);
        return run(t, sc, depth + 1, s, n, at_origin);
    case PRE_METASPACE: {
        buf->n = 0;
        int prepend = !starts_with(s, n, pt->repl, (size_t)pt->repl_n) &&
                      (pt->prepend == PREPEND_ALWAYS || (pt->prepend == PREPEND_FIRST && at_origin));
        /* a space at the start also becomes the replacement, so test after replacing */
        if (s[0] == ' ') prepend = 0;
        if (prepend && tok_buf_put(buf, pt->repl, (size_t)pt->repl_n)) return -1;
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] != ' ') continue;
            if (tok_buf_put(buf, s + at, i - at) || tok_buf_put(buf, pt->repl, (size_t)pt->repl_n)) return -1;
            at = i + 1;
        }
        if (tok_buf_put(buf, s + at, n - at)) return -1;
        if (pt->split) return split(t, sc, depth, &pt->pat, SPLIT_MERGED_NEXT, 0, buf->p, buf->n, at_origin);
        return run(t, sc, depth + 1, buf->p, buf->n, at_origin);
    }
    }
    return tt_errorf("tokenizer: unknown pre-tokenizer");
}

int tok_pretokenize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, int at_origin)
{
    if (!n) return 0;
    return run(t, sc, 0, s, n, at_origin);
}

/* bpe_pretokenize.c — tokenizer.json pre-tokenizers (Split, ByteLevel,
 * Metaspace, in sequence), run depth-first: each stage splits its piece and
 * hands every sub-piece to the next stage, the last one to the BPE model, so
 * no list of pieces is ever built for a large text.
 *
 * For offsets, a piece's origins travel with it (a sub-piece's are a slice of
 * its parent's). The walk is written once, with a constant offs, and built
 * twice: run (offs 0) is the plain encode's, which so carries nothing per
 * piece for offsets, and run_offsets (offs 1) the offsets encode's. */
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

/* the walk's pieces are inlined into each of its two builds */
#define WALK static inline __attribute__((always_inline))

static int run(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n, int at_origin);
static int run_offsets(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n,
                       const uint32_t *orig, int at_origin);

/* One stage's splitter: turns find_matches' (span, is_match) sequence into
 * pieces per SplitDelimiterBehavior, holding at most one pending piece. */
typedef struct {
    const tt_tokenizer *t;
    tok_scratch *sc;
    int depth;
    const char *s;
    const uint32_t *orig; /* s's origins (offsets) */
    int at_origin;
    tok_split_behavior beh;
    int have, pend_match, prev_match;
    size_t pa, pb;
} splitter;

WALK int emit(splitter *sp, size_t a, size_t b, const int offs)
{
    if (b <= a) return 0; /* HF drops empty pieces */
    if (offs)
        return run_offsets(sp->t, sp->sc, sp->depth + 1, sp->s + a, b - a, sp->orig + a, sp->at_origin && a == 0);
    return run(sp->t, sp->sc, sp->depth + 1, sp->s + a, b - a, sp->at_origin && a == 0);
}

WALK int flush(splitter *sp, const int offs)
{
    if (!sp->have) return 0;
    sp->have = 0;
    return emit(sp, sp->pa, sp->pb, offs);
}

static void hold(splitter *sp, size_t a, size_t b, int m)
{
    sp->have = 1;
    sp->pa = a;
    sp->pb = b;
    sp->pend_match = m;
}

WALK int element(splitter *sp, size_t a, size_t b, int m, const int offs)
{
    int rc = 0;
    switch (sp->beh) {
    case SPLIT_ISOLATED: rc = emit(sp, a, b, offs); break;
    case SPLIT_REMOVED:
        if (!m) rc = emit(sp, a, b, offs);
        break;
    case SPLIT_MERGED_PREV:
        /* a match joins the piece before it, unless that was a match too */
        if (m && !sp->prev_match && sp->have) sp->pb = b;
        else {
            rc = flush(sp, offs);
            hold(sp, a, b, m);
        }
        break;
    case SPLIT_MERGED_NEXT:
        /* a match joins the non-match after it */
        if (sp->have) {
            if (sp->pend_match && !m) {
                sp->have = 0;
                return emit(sp, sp->pa, b, offs);
            }
            if ((rc = flush(sp, offs))) return rc;
        }
        if (m) hold(sp, a, b, m);
        else rc = emit(sp, a, b, offs);
        break;
    case SPLIT_CONTIGUOUS:
        if (sp->have && m == sp->pend_match) sp->pb = b;
        else {
            rc = flush(sp, offs);
            hold(sp, a, b, m);
        }
        break;
    }
    sp->prev_match = m;
    return rc;
}

WALK int split(const tt_tokenizer *t, tok_scratch *sc, int depth, const tok_pattern *p, tok_split_behavior beh,
               int invert, const char *s, size_t n, const uint32_t *orig, int at_origin, const int offs)
{
    splitter sp = {.t = t, .sc = sc, .depth = depth, .s = s, .orig = orig, .at_origin = at_origin, .beh = beh};
    tok_finder f;
    tok_finder_init(&f, p, s, n, sc);
    size_t prev = 0, a, b;
    int r;
    while ((r = tok_finder_next(&f, &a, &b)) == 1) {
        if (prev != a && element(&sp, prev, a, invert, offs)) return -1;
        if (element(&sp, a, b, !invert, offs)) return -1;
        prev = b;
    }
    if (r < 0) return -1;
    if (prev != n && element(&sp, prev, n, invert, offs)) return -1;
    return flush(&sp, offs);
}

static int split_plain(const tt_tokenizer *t, tok_scratch *sc, int depth, const tok_pattern *p,
                       tok_split_behavior beh, int invert, const char *s, size_t n, int at_origin)
{
    return split(t, sc, depth, p, beh, invert, s, n, NULL, at_origin, 0);
}

static int split_offsets(const tt_tokenizer *t, tok_scratch *sc, int depth, const tok_pattern *p,
                         tok_split_behavior beh, int invert, const char *s, size_t n, const uint32_t *orig,
                         int at_origin)
{
    return split(t, sc, depth, p, beh, invert, s, n, orig, at_origin, 1);
}

static int starts_with(const char *s, size_t n, const char *p, size_t pn) { return n >= pn && memcmp(s, p, pn) == 0; }

/* ByteLevel's prefix space: HF prepends it as the first character's
 * replacement, so it takes that character's origin */
static int prefix_space(tok_buf *buf, tok_orig *bo, const char **s, size_t *n, const uint32_t **orig)
{
    buf->n = 0;
    if (tok_buf_put(buf, " ", 1) || tok_buf_put(buf, *s, *n)) return -1;
    if (*orig) {
        bo->n = 0;
        if (tok_orig_put(bo, (*orig)[0], 1) || tok_orig_copy(bo, *orig, *n)) return -1;
        *orig = bo->p;
    }
    *s = buf->p;
    *n = buf->n;
    return 0;
}

/* Metaspace: every space becomes the replacement (which takes the space's
 * origin), and the replacement is prepended per prepend_scheme (taking the
 * first character's origin) */
static int metaspace(const tok_pretok *pt, tok_buf *buf, tok_orig *bo, const char *s, size_t n, const uint32_t *orig,
                     int at_origin)
{
    size_t rn = (size_t)pt->repl_n;
    buf->n = 0;
    bo->n = 0;
    int prepend = !starts_with(s, n, pt->repl, rn) &&
                  (pt->prepend == PREPEND_ALWAYS || (pt->prepend == PREPEND_FIRST && at_origin));
    /* a space at the start also becomes the replacement, so test after replacing */
    if (s[0] == ' ') prepend = 0;
    if (prepend && (tok_buf_put(buf, pt->repl, rn) || (orig && tok_orig_put(bo, orig[0], rn)))) return -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ') continue;
        if (tok_buf_put(buf, s + at, i - at) || tok_buf_put(buf, pt->repl, rn)) return -1;
        if (orig && (tok_orig_copy(bo, orig + at, i - at) || tok_orig_put(bo, orig[i], rn))) return -1;
        at = i + 1;
    }
    if (orig && tok_orig_copy(bo, orig + at, n - at)) return -1;
    return tok_buf_put(buf, s + at, n - at);
}

/* One stage over one piece, in either build (orig is NULL in the plain one). */
WALK int stage(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n, const uint32_t *orig,
               int at_origin, const int offs)
{
    if (depth == t->n_pretoks) return offs ? tok_model_word_offsets(t, sc, s, n, orig) : tok_model_word(t, sc, s, n);
    const tok_pretok *pt = &t->pretoks[depth];
    tok_buf *buf = &sc->pre[depth];
    tok_orig *bo = &sc->pre_orig[depth];
    const tok_pattern *p = &pt->pat;
    switch (pt->kind) {
    case PRE_SPLIT:
        if (offs) return split_offsets(t, sc, depth, p, pt->behavior, pt->invert, s, n, orig, at_origin);
        return split_plain(t, sc, depth, p, pt->behavior, pt->invert, s, n, at_origin);
    case PRE_BYTE_LEVEL:
        if (pt->add_prefix_space && s[0] != ' ' && prefix_space(buf, bo, &s, &n, &orig)) return -1;
        /* the byte -> character map itself is left to the model, which then
         * starts from one symbol per byte (t->byte_level) */
        if (pt->use_regex) {
            if (offs) return split_offsets(t, sc, depth, p, SPLIT_ISOLATED, 0, s, n, orig, at_origin);
            return split_plain(t, sc, depth, p, SPLIT_ISOLATED, 0, s, n, at_origin);
        }
        if (offs) return run_offsets(t, sc, depth + 1, s, n, orig, at_origin);
        return run(t, sc, depth + 1, s, n, at_origin);
    case PRE_METASPACE:
        if (metaspace(pt, buf, bo, s, n, orig, at_origin)) return -1;
        if (pt->split) {
            if (offs) return split_offsets(t, sc, depth, p, SPLIT_MERGED_NEXT, 0, buf->p, buf->n, bo->p, at_origin);
            return split_plain(t, sc, depth, p, SPLIT_MERGED_NEXT, 0, buf->p, buf->n, at_origin);
        }
        if (offs) return run_offsets(t, sc, depth + 1, buf->p, buf->n, bo->p, at_origin);
        return run(t, sc, depth + 1, buf->p, buf->n, at_origin);
    }
    return tt_errorf("tokenizer: unknown pre-tokenizer");
}

static int run(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n, int at_origin)
{
    return stage(t, sc, depth, s, n, NULL, at_origin, 0);
}

static int run_offsets(const tt_tokenizer *t, tok_scratch *sc, int depth, const char *s, size_t n,
                       const uint32_t *orig, int at_origin)
{
    return stage(t, sc, depth, s, n, orig, at_origin, 1);
}

int tok_pretokenize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                    int at_origin)
{
    if (!n) return 0;
    return orig ? run_offsets(t, sc, 0, s, n, orig, at_origin) : run(t, sc, 0, s, n, at_origin);
}

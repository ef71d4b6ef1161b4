/* loader.c — packs a shard's documents into windows once at open, then serves
 * (B, T) batches: shuffled per epoch for training, in order for validation.
 *
 * A document longer than T is cut into pieces of T inputs, and a piece reads
 * T + 1 tokens: its last target is the next piece's first token, so every
 * token of a document after its first is a target exactly once, however the
 * document is cut (the corpus floor counts exactly these). A continued piece
 * starts at position 0, like every row of TorchTitan's windows (RoPE over the
 * window, 0..T-1): the model sees no token before it, the positions it is
 * given are the ones generation uses for a context of that length, and they
 * stay below T whatever the document's length (GPT-2's learned positions
 * end at n_positions).
 *
 * A conversation shard (version 2) says where its documents start and which
 * tokens are trained. A conversation that fits a window is one piece. A longer
 * one is cut at its turn boundaries (the shard's cuts): each piece takes as
 * many whole turns as fit, and each later piece starts with the
 * conversation's prefix (its system message) again. A turn longer than a
 * window is truncated, and the rest of it dropped. A piece is self-contained:
 * its last token is a target only, never an input. Only the tokens the mask
 * flags are targets; a piece with none is left out. */
#include "data/loader.h"

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "data/shard.h"

struct tt_loader {
    tt_loader_cfg cfg;
    char *path;
    tt_shard *shard;
    int64_t n_pieces;     /* documents, those longer than T cut into pieces of T inputs */
    uint64_t *piece_off;  /* (n_pieces,) first token of each piece */
    int32_t *piece_len;   /* (n_pieces,) its inputs; a piece that does not end its document also reads the
                             token after them, as its last target */
    /* conversation shards: a piece is the document's first piece_pre tokens (from piece_doc) followed by
       piece_len + 1 - piece_pre tokens from piece_off */
    int32_t *piece_pre;
    uint64_t *piece_doc;
    int64_t piece_cap;
    tt_loader_chat_stats chat;
    int64_t n_windows;
    int64_t *win_first;   /* (n_windows + 1,) pieces [win_first[w], win_first[w+1]) fill window w */
    int64_t *perm;        /* train: (n_windows,) this epoch's window order */
    int64_t epoch, cursor;
};

tt_batch *tt_batch_new(int B, int T)
{
    size_t n;
    if (B < 1 || T < 1 || tt_mul_size((size_t)B, (size_t)T, &n) != 0 || n > INT32_MAX) {
        tt_errorf("batch: bad shape (%d, %d)", B, T);
        return NULL;
    }
    tt_batch *b = tt_alloc(sizeof *b);
    int32_t *mem = b ? tt_alloc(4 * n * sizeof(int32_t)) : NULL;
    if (!mem) {
        tt_free(b);
        return NULL;
    }
    b->B = B;
    b->T = T;
    b->inputs = mem;
    b->targets = mem + n;
    b->positions = mem + 2 * n;
    b->doc_ids = mem + 3 * n;
    return b;
}

void tt_batch_free(tt_batch *b)
{
    if (!b) return;
    tt_free(b->inputs);
    tt_free(b);
}

/* Fisher-Yates from a stream that depends only on (seed, epoch), so any rank
 * or a resumed run rebuilds the same order from the state alone. */
static void shuffle(tt_loader *l)
{
    tt_rng r = {tt_hash64(l->cfg.seed, (uint64_t)l->epoch), 0};
    for (int64_t i = 0; i < l->n_windows; i++) l->perm[i] = i;
    for (int64_t i = l->n_windows - 1; i > 0; i--) {
        int64_t j = (int64_t)tt_rng_below(&r, (uint64_t)i + 1);
        int64_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
}

void tt_loader_close(tt_loader *l)
{
    if (!l) return;
    tt_shard_close(l->shard);
    free(l->path);
    free(l->piece_off);
    free(l->piece_len);
    free(l->piece_pre);
    free(l->piece_doc);
    free(l->win_first);
    free(l->perm);
    tt_free(l);
}

/* ---- conversation shards -------------------------------------------------- */

/* token i of the conversation piece p (i < piece_len[p] + 1) */
static uint64_t chat_token_at(const tt_loader *l, int64_t p, int64_t i)
{
    return i < l->piece_pre[p] ? l->piece_doc[p] + (uint64_t)i : l->piece_off[p] + (uint64_t)(i - l->piece_pre[p]);
}

/* targets of a piece of n tokens: each token after its first that the mask flags */
static int64_t chat_piece_targets(const tt_loader *l, int64_t p, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 1; i < n; i++) k += l->shard->mask[chat_token_at(l, p, i)];
    return k;
}

static int64_t mask_count(const tt_shard *s, uint64_t a, uint64_t b)
{
    int64_t k = 0;
    for (uint64_t i = a; i < b; i++) k += s->mask[i];
    return k;
}

/* Add the piece of document d: its first pre tokens, then tokens [a, b). Left out (and counted) when
 * it trains nothing. */
static tt_err add_chat_piece(tt_loader *l, uint64_t d, int32_t pre, uint64_t a, uint64_t b)
{
    if (l->n_pieces == l->piece_cap) {
        int64_t c = l->piece_cap ? 2 * l->piece_cap : 1024;
        void *o = realloc(l->piece_off, sizeof(uint64_t) * (size_t)c), *n = o ? realloc(l->piece_len, sizeof(int32_t) * (size_t)c) : NULL;
        if (o) l->piece_off = o;
        if (n) l->piece_len = n;
        void *pr = n ? realloc(l->piece_pre, sizeof(int32_t) * (size_t)c) : NULL;
        if (pr) l->piece_pre = pr;
        void *dc = pr ? realloc(l->piece_doc, sizeof(uint64_t) * (size_t)c) : NULL;
        if (!dc) return tt_errorf("%s: out of memory indexing the conversations", l->path);
        l->piece_doc = dc;
        l->piece_cap = c;
    }
    const int64_t p = l->n_pieces;
    l->piece_off[p] = a;
    l->piece_doc[p] = tt_shard_doc_start(l->shard, d);
    l->piece_pre[p] = pre;
    l->piece_len[p] = (int32_t)((int64_t)pre + (int64_t)(b - a) - 1);
    int64_t k = chat_piece_targets(l, p, l->piece_len[p] + 1);
    if (k == 0) {
        l->chat.skipped++;
        return TT_OK;
    }
    l->chat.targets += k;
    l->n_pieces++;
    return TT_OK;
}

/* Cut each conversation into pieces of at most T + 1 tokens at its turn boundaries (see the top). */
static tt_err build_chat_pieces(tt_loader *l)
{
    const tt_shard *s = l->shard;
    const uint64_t T = (uint64_t)l->cfg.seq_len, n_cuts = s->hdr.cut_count;
    uint64_t k = 0; /* the first cut of the current document */
    l->chat.docs = (int64_t)s->hdr.doc_count;
    for (uint64_t d = 0; d < s->hdr.doc_count; d++) {
        const uint64_t a = tt_shard_doc_start(s, d), b = tt_shard_doc_start(s, d + 1);
        uint64_t k_end = k;
        while (k_end < n_cuts && tt_shard_cut(s, k_end) < b) k_end++;
        if (b - a <= T + 1) {
            if (add_chat_piece(l, d, 0, a, b)) return -1;
            k = k_end;
            continue;
        }
        l->chat.split++;
        /* a later piece repeats the prefix when it leaves most of the window to turns */
        const uint32_t P = (uint64_t)tt_shard_doc_prefix(s, d) * 2 <= T ? tt_shard_doc_prefix(s, d) : 0;
        uint32_t pre = 0;
        for (uint64_t at = a; at < b;) {
            const uint64_t room = T + 1 - pre; /* tokens this piece takes after the prefix */
            uint64_t end = 0;
            if (b - at <= room) end = b;
            while (k < k_end && tt_shard_cut(s, k) <= at) k++;
            for (uint64_t j = k; !end && j < k_end && tt_shard_cut(s, j) - at <= room; j++)
                if (j + 1 == k_end || tt_shard_cut(s, j + 1) - at > room) end = tt_shard_cut(s, j);
            uint64_t next = end;
            if (!end) { /* one turn longer than the window: keep its start, drop the rest */
                end = at + room;
                next = k < k_end ? tt_shard_cut(s, k) : b; /* the next turn: past end, as none fit */
                l->chat.truncated++;
                l->chat.dropped_targets += mask_count(s, end, next);
            }
            /* a later piece without its prefix cannot predict its first token */
            if (at > a && pre == 0) l->chat.dropped_targets += s->mask[at];
            if (add_chat_piece(l, d, (int32_t)pre, at, end)) return -1;
            at = next;
            pre = P;
        }
        k = k_end;
    }
    return TT_OK;
}

/* ---- packing ------------------------------------------------------------------ */

/* Split at BOS into documents, cut the ones longer than T, then pack pieces
 * greedily in order: a piece that does not fit what is left of a window
 * starts the next one. A document of n tokens has n - 1 targets; pieces start
 * every T tokens while targets are left, so a document of T + 1 tokens is one
 * piece whose last target is the document's last token (never a one-token
 * piece with nothing to score). */
static tt_err build_windows(tt_loader *l)
{
    const tt_shard *s = l->shard;
    const uint64_t n = s->hdr.token_count, T = (uint64_t)l->cfg.seq_len;
    const uint32_t bos = s->hdr.bos_id;
    for (int pass = 0; pass < 2 && !s->mask; pass++) {
        int64_t np = 0;
        uint64_t start = 0;
        for (uint64_t i = 1; i <= n; i++) {
            if (i < n && tt_shard_token(s, i) != bos) continue;
            /* document [start, i); tokens before a first BOS count as one too */
            for (uint64_t p = start; p == start || p + 1 < i; p += T) {
                if (pass) {
                    l->piece_off[np] = p;
                    l->piece_len[np] = (int32_t)(i - p < T ? i - p : T);
                }
                np++;
            }
            start = i;
        }
        if (!pass) {
            l->n_pieces = np;
            l->piece_off = malloc(sizeof(uint64_t) * (size_t)(np ? np : 1));
            l->piece_len = malloc(sizeof(int32_t) * (size_t)(np ? np : 1));
            if (!l->piece_off || !l->piece_len) return tt_errorf("%s: out of memory indexing %lld documents", l->path, (long long)np);
        }
    }
    if (s->mask && build_chat_pieces(l)) return -1;
    for (int pass = 0; pass < 2; pass++) {
        int64_t nw = 0;
        int64_t used = 0;
        for (int64_t p = 0; p < l->n_pieces; p++) {
            if (p == 0 || used + l->piece_len[p] > (int64_t)T) {
                if (pass) l->win_first[nw] = p;
                nw++;
                used = 0;
            }
            used += l->piece_len[p];
        }
        if (!pass) {
            l->n_windows = nw;
            l->win_first = malloc(sizeof(int64_t) * (size_t)(nw + 1));
            if (!l->win_first) return tt_errorf("%s: out of memory", l->path);
        } else {
            l->win_first[nw] = l->n_pieces;
        }
    }
    return TT_OK;
}

tt_loader *tt_loader_open(const tt_loader_cfg *cfg)
{
    const char *path = cfg->path ? cfg->path : "(null)";
    int world = cfg->world_size ? cfg->world_size : 1;
    size_t bt;
    if (cfg->seq_len < 1 || cfg->batch_size < 1 || tt_mul_size((size_t)cfg->seq_len, (size_t)cfg->batch_size, &bt) ||
        bt > INT32_MAX) {
        tt_errorf("%s: bad loader shape: batch_size %d, seq_len %d", path, cfg->batch_size, cfg->seq_len);
        return NULL;
    }
    if (world < 1 || cfg->rank < 0 || cfg->rank >= world) {
        tt_errorf("%s: loader rank %d is outside world size %d", path, cfg->rank, world);
        return NULL;
    }
    if (cfg->mode != TT_LOADER_TRAIN && cfg->mode != TT_LOADER_VAL) {
        tt_errorf("%s: unknown loader mode %d", path, (int)cfg->mode);
        return NULL;
    }
    if (!cfg->path) {
        tt_errorf("loader: no data path given");
        return NULL;
    }
    tt_loader *l = tt_alloc(sizeof *l);
    if (!l) return NULL;
    l->cfg = *cfg;
    l->cfg.world_size = world;
    l->path = tt_strdup(path);
    l->cfg.path = l->path;
    if (!l->path || !(l->shard = tt_shard_open(path)) || build_windows(l) != TT_OK) goto fail;
    if (l->n_windows == 0) {
        if (l->shard->mask) tt_errorf("%s: no conversation in the shard has a token to train", path);
        else tt_errorf("%s: shard holds no tokens", path);
        goto fail;
    }
    if (cfg->mode == TT_LOADER_TRAIN) {
        l->perm = malloc(sizeof(int64_t) * (size_t)l->n_windows);
        if (!l->perm) {
            tt_errorf("%s: out of memory", path);
            goto fail;
        }
        shuffle(l);
    }
    return l;
fail:
    tt_loader_close(l);
    return NULL;
}

int64_t tt_loader_num_windows(const tt_loader *l) { return l->n_windows; }
int64_t tt_loader_num_docs(const tt_loader *l) { return l->n_pieces; }
int tt_loader_chat_stats_of(const tt_loader *l, tt_loader_chat_stats *st)
{
    if (st) *st = l->chat;
    return l->shard->mask != NULL;
}
uint32_t tt_loader_vocab_size(const tt_loader *l) { return l->shard->hdr.vocab_size; }
uint32_t tt_loader_bos_id(const tt_loader *l) { return l->shard->hdr.bos_id; }
int64_t tt_loader_num_batches(const tt_loader *l)
{
    int64_t g = (int64_t)l->cfg.batch_size * l->cfg.world_size;
    return (l->n_windows + g - 1) / g;
}

static void fill_ignored(const tt_loader *l, int32_t *in, int32_t *tg, int32_t *pos, int32_t *doc)
{
    for (int t = 0; t < l->cfg.seq_len; t++) {
        in[t] = (int32_t)l->shard->hdr.bos_id;
        tg[t] = TT_IGNORE_INDEX;
        pos[t] = 0;
        doc[t] = 0;
    }
}

int64_t tt_loader_window(const tt_loader *l, int64_t w, int32_t *in, int32_t *tg, int32_t *pos, int32_t *doc)
{
    if (w < 0 || w >= l->n_windows)
        return tt_errorf("%s: window %lld is outside [0, %lld)", l->path, (long long)w, (long long)l->n_windows);
    const tt_shard *s = l->shard;
    const int T = l->cfg.seq_len;
    int o = 0, d = 0;
    int64_t scored = 0;
    for (int64_t p = l->win_first[w]; p < l->win_first[w + 1] && s->mask; p++, d++) {
        const int n = l->piece_len[p]; /* inputs; the piece has n + 1 tokens */
        for (int j = 0; j <= n; j++) {
            const uint64_t at = chat_token_at(l, p, j);
            const int32_t tok = (int32_t)tt_shard_token(s, at);
            if (j < n) {
                in[o + j] = tok;
                pos[o + j] = j;
                doc[o + j] = d;
            }
            if (j > 0) {
                tg[o + j - 1] = s->mask[at] ? tok : TT_IGNORE_INDEX;
                scored += s->mask[at];
            }
        }
        o += n;
    }
    for (int64_t p = l->win_first[w]; p < l->win_first[w + 1] && !s->mask; p++, d++) {
        const uint64_t off = l->piece_off[p], end = off + (uint64_t)l->piece_len[p];
        const int n = l->piece_len[p];
        for (int j = 0; j < n; j++) {
            in[o + j] = (int32_t)tt_shard_token(s, off + (uint64_t)j);
            pos[o + j] = j; /* a continued piece restarts at 0 too (top of the file) */
            doc[o + j] = d;
        }
        for (int j = 0; j + 1 < n; j++) tg[o + j] = in[o + j + 1];
        /* the piece's last target: the document's next token, which starts the
         * next piece; at the document's end there is none */
        const int more = end < s->hdr.token_count && tt_shard_token(s, end) != s->hdr.bos_id;
        tg[o + n - 1] = more ? (int32_t)tt_shard_token(s, end) : TT_IGNORE_INDEX;
        scored += n - 1 + more;
        o += n;
    }
    for (; o < T; o++) { /* padding: its own document, never scored */
        in[o] = (int32_t)s->hdr.bos_id;
        tg[o] = TT_IGNORE_INDEX;
        pos[o] = 0;
        doc[o] = d;
    }
    return scored;
}

static int64_t fill_row(const tt_loader *l, tt_batch *b, int row, int64_t w)
{
    size_t at = (size_t)row * (size_t)b->T;
    if (w < 0) {
        fill_ignored(l, b->inputs + at, b->targets + at, b->positions + at, b->doc_ids + at);
        return 0;
    }
    return tt_loader_window(l, w, b->inputs + at, b->targets + at, b->positions + at, b->doc_ids + at);
}

int tt_loader_next(tt_loader *l, tt_batch *b)
{
    const int B = l->cfg.batch_size;
    if (b->B != B || b->T != l->cfg.seq_len)
        return tt_errorf("%s: batch is (%d, %d) but the loader makes (%d, %d)", l->path, b->B, b->T, B,
                         l->cfg.seq_len);
    const int64_t g = (int64_t)B * l->cfg.world_size, mine = (int64_t)l->cfg.rank * B;
    b->n_scored = 0;
    if (l->cfg.mode == TT_LOADER_VAL) {
        if (l->cursor >= l->n_windows) return 0;
        for (int r = 0; r < B; r++) {
            int64_t w = l->cursor + mine + r;
            b->n_scored += fill_row(l, b, r, w < l->n_windows ? w : -1);
        }
        l->cursor += g;
        if (l->cursor > l->n_windows) l->cursor = l->n_windows;
        return 1;
    }
    /* train: every rank walks the whole global batch so all keep one state */
    for (int64_t i = 0; i < g; i++) {
        if (i >= mine && i < mine + B) b->n_scored += fill_row(l, b, (int)(i - mine), l->perm[l->cursor]);
        if (++l->cursor == l->n_windows) {
            l->epoch++;
            l->cursor = 0;
            shuffle(l);
        }
    }
    return 1;
}

void tt_loader_reset(tt_loader *l)
{
    int64_t old = l->epoch;
    l->epoch = 0;
    l->cursor = 0;
    if (l->cfg.mode == TT_LOADER_TRAIN && old != 0) shuffle(l);
}

tt_loader_state tt_loader_get_state(const tt_loader *l) { return (tt_loader_state){l->epoch, l->cursor}; }

tt_err tt_loader_set_state(tt_loader *l, tt_loader_state s)
{
    if (l->cfg.mode == TT_LOADER_VAL) {
        if (s.epoch != 0 || s.cursor < 0 || s.cursor > l->n_windows)
            return tt_errorf("%s: validation loader state {epoch %lld, cursor %lld} is outside {0, [0, %lld]}",
                             l->path, (long long)s.epoch, (long long)s.cursor, (long long)l->n_windows);
        l->cursor = s.cursor;
        return TT_OK;
    }
    if (s.epoch < 0 || s.cursor < 0 || s.cursor >= l->n_windows)
        return tt_errorf("%s: loader state {epoch %lld, cursor %lld} is invalid: this shard has %lld windows of %d "
                         "tokens (was it saved with other data or seq_len?)",
                         l->path, (long long)s.epoch, (long long)s.cursor, (long long)l->n_windows, l->cfg.seq_len);
    int64_t old = l->epoch;
    l->epoch = s.epoch;
    l->cursor = s.cursor;
    if (old != s.epoch) shuffle(l);
    return TT_OK;
}

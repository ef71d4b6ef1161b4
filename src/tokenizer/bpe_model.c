/* bpe_model.c — the BPE model: one pre-token -> ids. Initial symbols (one per
 * character, or per byte for byte-level tokenizers; unk / byte-fallback as in
 * HF), then merges by rank through a (left, right) -> (rank, merged) hash
 * table, with a per-scratch cache of frequent pre-tokens. For offsets, HF
 * gives each initial symbol a length in the string the model sees, and a
 * token starts where the lengths of the symbols before it add up to. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tokenizer/bpe_internal.h"

#define PAIR_EMPTY UINT64_MAX
#define SMALL_WORD 24          /* up to this many symbols a linear scan beats a heap */
#define CACHE_SLOTS 32768      /* power of two */
#define CACHE_MAX_ENTRIES 16384
#define CACHE_MAX_KEY 255      /* longer pre-tokens are rare and not cached */
#define CACHE_KEY_BYTES (1 << 20)
#define CACHE_IDS (1 << 18)

/* ---- merge table ---------------------------------------------------------- */

static inline size_t pair_slot(uint64_t key, size_t mask)
{
    key *= 0x9E3779B97F4A7C15ull;
    return (size_t)(key >> 32 ^ key) & mask;
}

int tok_pairs_build(tt_tokenizer *t, const int32_t *triples, size_t n_merges)
{
    size_t slots = 16;
    while (slots < n_merges * 2) slots *= 2;
    t->pairs = malloc(slots * sizeof *t->pairs);
    if (!t->pairs) return tt_errorf("tokenizer: out of memory (%zu merges)", n_merges);
    for (size_t i = 0; i < slots; i++) t->pairs[i].key = PAIR_EMPTY;
    t->pair_mask = slots - 1;
    for (size_t r = 0; r < n_merges; r++) {
        uint64_t key = (uint64_t)(uint32_t)triples[3 * r] << 32 | (uint32_t)triples[3 * r + 1];
        size_t j = pair_slot(key, t->pair_mask);
        while (t->pairs[j].key != PAIR_EMPTY && t->pairs[j].key != key) j = (j + 1) & t->pair_mask;
        /* a repeated merge takes its last rank, as HF's HashMap collect does */
        t->pairs[j].key = key;
        t->pairs[j].rank = (uint32_t)r;
        t->pairs[j].id = triples[3 * r + 2];
    }
    return 0;
}

static inline const tok_pair *pair_get(const tt_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t j = pair_slot(key, t->pair_mask);; j = (j + 1) & t->pair_mask) {
        const tok_pair *p = &t->pairs[j];
        if (p->key == key) return p;
        if (p->key == PAIR_EMPTY) return NULL;
    }
}

/* ---- scratch arrays --------------------------------------------------------- */

static int reserve_word(tok_scratch *sc, size_t n)
{
    if (n <= sc->sym_cap) return 0;
    size_t cap = sc->sym_cap ? sc->sym_cap : 64;
    while (cap < n) cap *= 2;
    int32_t *a = realloc(sc->sym, cap * sizeof *a), *b = NULL, *c = NULL, *d = NULL;
    if (a) sc->sym = a;
    if (a) b = realloc(sc->nid, cap * sizeof *b);
    if (b) sc->nid = b;
    if (b) c = realloc(sc->prev, cap * sizeof *c);
    if (c) sc->prev = c;
    if (c) d = realloc(sc->next, cap * sizeof *d);
    if (d) sc->next = d;
    uint32_t *r = d ? realloc(sc->rank, cap * sizeof *r) : NULL, *l = NULL, *at = NULL;
    if (r) sc->rank = r;
    if (r) l = realloc(sc->sym_len, cap * sizeof *l);
    if (l) sc->sym_len = l;
    if (l) at = realloc(sc->tok_at, cap * sizeof *at);
    if (at) sc->tok_at = at;
    tok_pair *h = at ? realloc(sc->heap, 3 * cap * sizeof *h) : NULL;
    if (!h) return tt_errorf("tokenizer: out of memory (a word of %zu symbols)", n);
    sc->heap = h;
    sc->sym_cap = cap;
    return 0;
}

/* ---- merging ---------------------------------------------------------------- */

/* Few symbols: repeatedly merge the lowest-rank pair, leftmost first. This is
 * exactly what HF's heap loop does, since a queued merge whose pair changed
 * can never match the new pair's merged id. */
static size_t merge_small(const tt_tokenizer *t, tok_scratch *sc, size_t m)
{
    int32_t *sym = sc->sym, *nid = sc->nid;
    uint32_t *rank = sc->rank;
    for (size_t i = 0; i + 1 < m; i++) {
        const tok_pair *p = pair_get(t, sym[i], sym[i + 1]);
        rank[i] = p ? p->rank : UINT32_MAX;
        nid[i] = p ? p->id : -1;
    }
    while (m > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < m; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == UINT32_MAX) break;
        sym[best] = nid[best];
        m--;
        memmove(sym + best + 1, sym + best + 2, (m - best - 1) * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (m > best + 2 ? m - best - 2 : 0) * sizeof *rank);
        memmove(nid + best + 1, nid + best + 2, (m > best + 2 ? m - best - 2 : 0) * sizeof *nid);
        if (best > 0) {
            const tok_pair *p = pair_get(t, sym[best - 1], sym[best]);
            rank[best - 1] = p ? p->rank : UINT32_MAX;
            nid[best - 1] = p ? p->id : -1;
        }
        if (best + 1 < m) {
            const tok_pair *p = pair_get(t, sym[best], sym[best + 1]);
            rank[best] = p ? p->rank : UINT32_MAX;
            nid[best] = p ? p->id : -1;
        }
    }
    return m;
}

/* min-heap on key = rank << 32 | position */
static void heap_push(tok_pair *h, size_t *n, uint64_t key, int32_t id)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].key <= key) break;
        h[i] = h[p];
        i = p;
    }
    h[i].key = key;
    h[i].id = id;
}

static tok_pair heap_pop(tok_pair *h, size_t *n)
{
    tok_pair top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1].key < h[c].key) c++;
        if (last.key <= h[c].key) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* Many symbols (a long word, or a whole text without a pre-tokenizer): HF's
 * Word::merge_all, a heap of candidate merges over a linked list. */
static size_t merge_large(const tt_tokenizer *t, tok_scratch *sc, size_t m)
{
    int32_t *sym = sc->sym, *prev = sc->prev, *next = sc->next;
    tok_pair *h = sc->heap;
    size_t hn = 0;
    for (size_t i = 0; i < m; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) {
        const tok_pair *p = pair_get(t, sym[i], sym[i + 1]);
        if (p) heap_push(h, &hn, (uint64_t)p->rank << 32 | i, p->id);
    }
    while (hn) {
        tok_pair top = heap_pop(h, &hn);
        int32_t pos = (int32_t)(uint32_t)top.key;
        if (sym[pos] < 0 || next[pos] < 0) continue;
        int32_t r = next[pos];
        const tok_pair *cur = pair_get(t, sym[pos], sym[r]);
        if (!cur || cur->id != top.id) continue; /* stale entry */
        sym[pos] = top.id;
        sym[r] = -1;
        next[pos] = next[r];
        if (next[r] >= 0) prev[next[r]] = pos;
        if (prev[pos] >= 0) {
            const tok_pair *p = pair_get(t, sym[prev[pos]], sym[pos]);
            if (p) heap_push(h, &hn, (uint64_t)p->rank << 32 | (uint32_t)prev[pos], p->id);
        }
        if (next[pos] >= 0) {
            const tok_pair *p = pair_get(t, sym[pos], sym[next[pos]]);
            if (p) heap_push(h, &hn, (uint64_t)p->rank << 32 | (uint32_t)pos, p->id);
        }
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) sym[k++] = sym[i];
    return k;
}

/* ---- cache ------------------------------------------------------------------ */

static inline uint64_t load64(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t load32(const char *s)
{
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
}

/* the key of s: its bytes for up to 16 bytes, else a hash; and a slot */
static inline size_t cache_key(const char *s, size_t n, uint64_t *k0, uint64_t *k1)
{
    if (n >= 8) {
        if (n <= 16) {
            *k0 = load64(s);
            *k1 = load64(s + n - 8);
        } else {
            *k0 = tok_hash(s, n);
            *k1 = 0;
        }
    } else if (n >= 4) {
        *k0 = load32(s) | load32(s + n - 4) << 32;
        *k1 = 0;
    } else {
        *k0 = (uint64_t)(uint8_t)s[0] | (uint64_t)(uint8_t)s[n / 2] << 8 | (uint64_t)(uint8_t)s[n - 1] << 16;
        *k1 = 0;
    }
    uint64_t h = (*k0 ^ (*k1 * 0x9E3779B97F4A7C15ull) ^ n) * 0xBF58476D1CE4E5B9ull;
    return (size_t)(h >> 40) & (CACHE_SLOTS - 1);
}

static void cache_clear(tok_cache *c)
{
    memset(c->ents, 0, CACHE_SLOTS * sizeof *c->ents);
    c->n = 0;
    c->keys.n = 0;
    c->n_ids = 0;
}

static inline int cache_hit(const tok_cache *c, const tok_cache_ent *e, const char *s, size_t n, uint64_t k0,
                            uint64_t k1)
{
    if (e->key_len != n || e->k0 != k0 || e->k1 != k1) return 0;
    return n <= 16 || memcmp(c->keys.p + e->key_off, s, n) == 0;
}

static const tok_cache_ent *cache_find(const tok_cache *c, size_t slot, const char *s, size_t n, uint64_t k0,
                                       uint64_t k1)
{
    if (!c->ents) return NULL;
    for (size_t j = slot; c->ents[j].key_len; j = (j + 1) & (CACHE_SLOTS - 1))
        if (cache_hit(c, &c->ents[j], s, n, k0, k1)) return &c->ents[j];
    return NULL;
}

/* 1 = found and emitted, 0 = absent, -1 = error */
static int cache_get(tok_scratch *sc, size_t slot, const char *s, size_t n, uint64_t k0, uint64_t k1)
{
    const tok_cache *c = &sc->cache;
    const tok_cache_ent *e = cache_find(c, slot, s, n, k0, k1);
    if (!e) return 0;
    if (e->n_ids == 1) return tok_emit(sc, (int32_t)e->ids) ? -1 : 1;
    for (int k = 0; k < e->n_ids; k++)
        if (tok_emit(sc, c->ids[e->ids + k])) return -1;
    return 1;
}

/* at: NULL, or (the offsets cache) where each token starts in the pre-token */
static void cache_put(tok_cache *c, size_t slot, const char *s, size_t n, uint64_t k0, uint64_t k1,
                      const int32_t *ids, const uint32_t *at, size_t n_ids)
{
    if (n_ids > UINT16_MAX || n_ids == 0) return;
    if (!c->ents) {
        c->ents = calloc(CACHE_SLOTS, sizeof *c->ents);
        c->ids = malloc(CACHE_IDS * sizeof *c->ids);
        if (at) c->starts = malloc(CACHE_IDS * sizeof *c->starts);
        if (!c->ents || !c->ids || (at && !c->starts) || tok_buf_reserve(&c->keys, CACHE_KEY_BYTES)) {
            free(c->ents);
            free(c->ids);
            free(c->starts);
            c->ents = NULL;
            c->ids = NULL;
            c->starts = NULL;
            return; /* no cache is only slower */
        }
    }
    size_t long_key = n > 16 ? n : 0, arena_ids = n_ids > 1 ? n_ids : 0;
    if (c->n >= CACHE_MAX_ENTRIES || c->keys.n + long_key > CACHE_KEY_BYTES || c->n_ids + arena_ids > CACHE_IDS)
        cache_clear(c);
    size_t j = slot;
    while (c->ents[j].key_len) j = (j + 1) & (CACHE_SLOTS - 1);
    tok_cache_ent *e = &c->ents[j];
    e->k0 = k0;
    e->k1 = k1;
    e->key_len = (uint16_t)n;
    e->n_ids = (uint16_t)n_ids;
    if (long_key) {
        e->key_off = (uint32_t)c->keys.n;
        memcpy(c->keys.p + c->keys.n, s, n); /* reserved at creation */
        c->keys.n += n;
    }
    if (n_ids == 1) e->ids = (uint32_t)ids[0]; /* a lone token starts at the pre-token's start */
    else {
        e->ids = (uint32_t)c->n_ids;
        memcpy(c->ids + c->n_ids, ids, n_ids * sizeof *ids);
        if (at) memcpy(c->starts + c->n_ids, at, n_ids * sizeof *at);
        c->n_ids += n_ids;
    }
    c->n++;
}

/* ---- initial symbols ---------------------------------------------------------- */

/* Look up one character as HF's merge_word does: with the continuing-subword
 * prefix unless first, the end-of-word suffix if last. */
static int32_t lookup_unit(const tt_tokenizer *t, tok_scratch *sc, const char *u, size_t un, int first, int last)
{
    if (!t->cont_prefix && !t->word_suffix) {
        if (un == 1 && !((unsigned char)u[0] & 0x80)) return t->ascii_id[(unsigned char)u[0]];
        return tok_strmap_get(&t->vocab, u, un);
    }
    sc->tmp.n = 0;
    if (!first && t->cont_prefix && tok_buf_put(&sc->tmp, t->cont_prefix, strlen(t->cont_prefix))) return -3;
    if (tok_buf_put(&sc->tmp, u, un)) return -3;
    if (last && t->word_suffix && tok_buf_put(&sc->tmp, t->word_suffix, strlen(t->word_suffix))) return -3;
    return tok_strmap_get(&t->vocab, sc->tmp.p, sc->tmp.n);
}

/* Length in bytes of the character byte b shows as (byte-level). */
static uint32_t shown_len(unsigned char b) { return tok_byte_to_char(b) < 0x80 ? 1 : 2; }

/* The initial symbols of s into sc->sym, as HF's merge_word makes them; how
 * many, or -1. track (offsets) also sets sc->sym_len[k], HF's length of
 * symbol k in the string the model sees: its character's bytes, 1 for each
 * byte-fallback token, the characters an unk stands for. Always inlined, so
 * that the plain encode's copy (track 0) carries no trace of it. */
static inline __attribute__((always_inline)) long initial_symbols(const tt_tokenizer *t, tok_scratch *sc,
                                                                  const char *s, size_t n, int track)
{
    /* Room for m + (bytes left) + have_unk symbols holds through the loop: a
     * unit of >= 1 byte yields one symbol, or a flushed unk (standing for
     * units that yielded none) and one; only byte fallback may need more. */
    if (reserve_word(sc, n + 9)) return -1;
    if (t->bl_all) {
        /* byte-level, every byte's character in the vocabulary: the common case */
        for (size_t i = 0; i < n; i++) sc->sym[i] = t->bl_id[(unsigned char)s[i]];
        if (track)
            for (size_t i = 0; i < n; i++) sc->sym_len[i] = shown_len((unsigned char)s[i]);
        return (long)n;
    }
#define PUSH(id_, len_) do { if (track) sc->sym_len[m] = (len_); sc->sym[m++] = (id_); } while (0)
    size_t m = 0;
    int have_unk = 0;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        char mapped[4];
        const char *u;
        size_t un, src;
        int32_t id;
        if (t->byte_level) {
            src = 1;
            un = (size_t)tok_utf8_put(tok_byte_to_char((unsigned char)s[i]), mapped);
            u = mapped;
            id = (!t->cont_prefix && !t->word_suffix) ? t->bl_id[(unsigned char)s[i]]
                                                      : lookup_unit(t, sc, u, un, i == 0, i + 1 == n);
        } else {
            src = un = tok_utf8_len((unsigned char)s[i]);
            if (i + un > n) return tt_errorf("tokenizer: truncated UTF-8 in a pre-token");
            u = s + i;
            id = lookup_unit(t, sc, u, un, i == 0, i + un == n);
        }
        if (id == -3) return -1;
        i += src;
        if (id >= 0) {
            if (have_unk) {
                PUSH(t->unk_id, unk_len);
                have_unk = 0;
            }
            PUSH(id, (uint32_t)un);
            continue;
        }
        /* byte fallback spells out the string HF looked up */
        const char *us = u;
        size_t usn = un;
        if (t->cont_prefix || t->word_suffix) {
            us = sc->tmp.p; /* built by lookup_unit */
            usn = sc->tmp.n;
        }
        if (t->byte_fallback) {
            size_t k = 0;
            while (k < usn && t->bf_id[(unsigned char)us[k]] >= 0) k++;
            if (k == usn) {
                /* HF emits the byte tokens without flushing a pending unk */
                if (reserve_word(sc, m + usn + (n - i) + 9)) return -1;
                for (k = 0; k < usn; k++) PUSH(t->bf_id[(unsigned char)us[k]], 1);
                continue;
            }
        }
        if (t->unk_id == -2)
            return tt_errorf("tokenizer: model.unk_token '%s' is not in the vocabulary", t->unk_name);
        if (t->unk_id >= 0) {
            if (have_unk && !t->fuse_unk) PUSH(t->unk_id, unk_len);
            if (!have_unk || !t->fuse_unk) unk_len = 0;
            unk_len += (uint32_t)un;
            have_unk = 1;
        }
        /* with no unk token the character is dropped, as in HF (and so is its length) */
    }
    if (have_unk) PUSH(t->unk_id, unk_len);
#undef PUSH
    return (long)m;
}

/* BPE over one piece of a pre-token, through the cache */
static int model_piece(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n)
{
    uint64_t k0 = 0, k1 = 0;
    size_t slot = 0;
    int cached = n <= CACHE_MAX_KEY;
    if (cached) {
        slot = cache_key(s, n, &k0, &k1);
        int r = cache_get(sc, slot, s, n, k0, k1);
        if (r) return r < 0 ? -1 : 0;
    }
    long ms = initial_symbols(t, sc, s, n, 0);
    if (ms < 0) return -1;
    size_t m = (size_t)ms;
    if (m > 1) m = m <= SMALL_WORD ? merge_small(t, sc, m) : merge_large(t, sc, m);
    size_t start = sc->out_n;
    for (size_t i = 0; i < m; i++)
        if (tok_emit(sc, sc->sym[i])) return -1;
    if (cached) cache_put(&sc->cache, slot, s, n, k0, k1, sc->out + start, NULL, m);
    return 0;
}

/* ---- offsets ---------------------------------------------------------------- */

/* Where each of the m final tokens starts in s, into sc->tok_at, from the
 * m0 initial symbols' lengths (sc->sym_len) and merge_large's list (each
 * final token sits at the index of its first initial symbol). HF counts in
 * the string the model sees; byte-level, that is s's bytes shown as
 * characters of 1 or 2 bytes, so positions are walked back to s's bytes. */
static int token_starts(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, size_t m0, size_t m)
{
    uint32_t *len = sc->sym_len;
    uint32_t pos = 0; /* exclusive prefix sums, in place */
    for (size_t k = 0; k < m0; k++) {
        uint32_t l = len[k];
        len[k] = pos;
        pos += l;
    }
    size_t src = 0;    /* s's byte whose character spans [shown, shown + its length) */
    uint32_t shown = 0;
    int32_t first = 0; /* the initial symbol that starts final token j */
    for (size_t j = 0; j < m; j++, first = sc->next[first]) {
        uint32_t p = len[first];
        if (!t->byte_level) src = p;
        else
            for (uint32_t l; src < n && shown + (l = shown_len((unsigned char)s[src])) <= p; src++) shown += l;
        if (src >= n)
            return tt_errorf("tokenizer: a token's offset falls past its pre-token (HF's offsets drift here); "
                             "offsets refused");
        sc->tok_at[j] = (uint32_t)src;
    }
    return 0;
}

/* a hit of the offsets cache: its ids, each where it starts */
static int emit_cached_at(tok_scratch *sc, const tok_cache_ent *e, const uint32_t *orig)
{
    const tok_cache *c = &sc->cache_offs;
    if (e->n_ids == 1) return tok_emit_at(sc, (int32_t)e->ids, orig[0]);
    for (int k = 0; k < e->n_ids; k++)
        if (tok_emit_at(sc, c->ids[e->ids + k], orig[c->starts[e->ids + k]])) return -1;
    return 0;
}

/* model_piece with offsets: the same ids (merge_large, whose result equals
 * merge_small's, keeps the list that says where tokens start), each emitted
 * with its start; a cache of its own keeps the starts beside the ids */
static int model_piece_offsets(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig)
{
    uint64_t k0 = 0, k1 = 0;
    size_t slot = 0;
    int cached = n <= CACHE_MAX_KEY;
    if (cached) {
        slot = cache_key(s, n, &k0, &k1);
        const tok_cache_ent *e = cache_find(&sc->cache_offs, slot, s, n, k0, k1);
        if (e) return emit_cached_at(sc, e, orig);
    }
    long ms = initial_symbols(t, sc, s, n, 1);
    if (ms < 0) return -1;
    size_t m0 = (size_t)ms, m = m0;
    if (m > 1) m = merge_large(t, sc, m);
    else sc->next[0] = -1;
    if (m && token_starts(t, sc, s, n, m0, m)) return -1;
    for (size_t j = 0; j < m; j++)
        if (tok_emit_at(sc, sc->sym[j], orig[sc->tok_at[j]])) return -1;
    if (cached) cache_put(&sc->cache_offs, slot, s, n, k0, k1, sc->sym, sc->tok_at, m);
    return 0;
}

#define META "\xe2\x96\x81" /* U+2581, SentencePiece's word marker */

/* One pre-token, in either build: offs 0 (tok_model_word, orig NULL) or 1
 * (tok_model_word_offsets); always inlined into each, so that the plain one
 * carries nothing for offsets. */
static inline __attribute__((always_inline)) int model_word(const tt_tokenizer *t, tok_scratch *sc, const char *s,
                                                            size_t n, const uint32_t *orig, const int offs)
{
    if (!n) return 0;
    if (t->ignore_merges) {
        int32_t id = tok_strmap_get(t->byte_level ? &t->vocab_bytes : &t->vocab, s, n);
        if (id >= 0) return offs ? tok_emit_at(sc, id, orig[0]) : tok_emit(sc, id);
    }
    /* (With no unk token, a character the vocabulary lacks is dropped along
     * with its length, and HF's later offsets in the word shift back by it:
     * the parts below would each start afresh, so offsets take the word whole.) */
    if (!t->meta_cut || (offs && t->unk_id == -1))
        return offs ? model_piece_offsets(t, sc, s, n, orig) : model_piece(t, sc, s, n);
    /* No token holds U+2581 after another character (t->meta_cut), so no
     * merge crosses the start of a U+2581 run: BPE on each part between them
     * gives what BPE on the whole does, and the parts are cached. This is what
     * keeps a SentencePiece-style tokenizer without a pre-tokenizer, whose
     * pre-token is the whole text, fast. (The parts' tokens also start where
     * the whole's would: the parts tile the word.) */
    size_t a = 0;
    for (const char *p = s + 1; (p = memchr(p, '\xe2', (size_t)(s + n - p))) != NULL; p++) {
        size_t at = (size_t)(p - s);
        if (at + 3 > n || memcmp(p, META, 3) != 0) continue;
        if (at >= 3 && memcmp(p - 3, META, 3) == 0) continue;
        if (offs ? model_piece_offsets(t, sc, s + a, at - a, orig + a) : model_piece(t, sc, s + a, at - a)) return -1;
        a = at;
    }
    return offs ? model_piece_offsets(t, sc, s + a, n - a, orig + a) : model_piece(t, sc, s + a, n - a);
}

int tok_model_word(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n)
{
    return model_word(t, sc, s, n, NULL, 0);
}

int tok_model_word_offsets(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig)
{
    return model_word(t, sc, s, n, orig, 1);
}

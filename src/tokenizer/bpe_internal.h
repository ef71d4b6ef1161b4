/* bpe_internal.h — the structures shared by the tokenizer.json (BPE) files:
 * the loaded tokenizer, its pipeline stages, and the per-call scratch state. */
#ifndef TT_BPE_INTERNAL_H
#define TT_BPE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* The two public types of tokenizer.h, declared again (C11 allows it) rather than included: tokenizer.c,
 * the front end over both kinds, includes this header, and this header includes nothing of the front's. */
typedef struct tt_tokenizer tt_tokenizer;
typedef struct tt_tok_stream tt_tok_stream;

enum { TOK_BYTE = 1, TOK_BPE = 2 };

#define TOK_MAX_ID (1 << 24)  /* ids and vocabulary sizes beyond this are refused */
#define TOK_MAX_STAGES 16     /* normalizers, pre-tokenizers or decoders, after flattening Sequences */

/* ---- small utilities (bpe_util.c) --------------------------------------- */

/* A growable byte buffer; p is NULL until the first byte is put. */
typedef struct { char *p; size_t n, cap; } tok_buf;
int tok_buf_reserve(tok_buf *b, size_t extra); /* room for n + extra bytes (+1 for a NUL) */
static inline int tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    if (b->n + n >= b->cap && tok_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}
void tok_buf_free(tok_buf *b);

/* Offsets (tt_tokenizer_encode_offsets). Wherever a stage holds a string s, an offsets encode also
 * hands it orig: orig[i] is the byte offset in the caller's text where the character that byte i of s
 * comes from starts (the start side of HF's NormalizedString alignments; every byte of a character
 * has the same one). A NULL orig is a plain encode: stages test it once per piece, never per byte. */
typedef struct { uint32_t *p; size_t n, cap; } tok_orig;
int tok_orig_reserve(tok_orig *o, size_t extra);
static inline int tok_orig_put(tok_orig *o, uint32_t v, size_t count) /* count copies of v */
{
    if (o->n + count > o->cap && tok_orig_reserve(o, count)) return -1;
    for (size_t i = 0; i < count; i++) o->p[o->n + i] = v;
    o->n += count;
    return 0;
}
static inline int tok_orig_copy(tok_orig *o, const uint32_t *src, size_t n)
{
    if (o->n + n > o->cap && tok_orig_reserve(o, n)) return -1;
    if (n) memcpy(o->p + o->n, src, n * sizeof *src);
    o->n += n;
    return 0;
}
void tok_orig_free(tok_orig *o);

uint64_t tok_hash(const void *s, size_t n);

/* string -> int32 map (keys are copied). Later puts of the same key overwrite. */
typedef struct { uint64_t hash; uint32_t off, len; int32_t val; } tok_strent;
typedef struct {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    size_t mask;
    tok_strent *ents;
    size_t n, cap;
    tok_buf keys;
} tok_strmap;
int tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t val);
int32_t tok_strmap_get(const tok_strmap *m, const char *s, size_t n); /* -1 if absent */
void tok_strmap_free(tok_strmap *m);

/* UTF-8 (input text is validated once, so the decoders below may trust it). */
size_t tok_utf8_invalid_at(const char *s, size_t n); /* n if valid */
static inline size_t tok_utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
uint32_t tok_utf8_get(const char *s, size_t *adv);   /* one code point from valid UTF-8 */
int tok_utf8_put(uint32_t cp, char *out);              /* 1..4 bytes written */
int tok_is_whitespace(uint32_t cp);                    /* Unicode White_Space (Rust char::is_whitespace) */
/* The GPT-2 byte <-> unicode map: byte b is shown as code point
 * tok_byte_to_char(b); tok_char_byte(cp) is the byte or -1. */
uint32_t tok_byte_to_char(int b);
int tok_char_byte(uint32_t cp);

/* A compiled pattern: a literal (tok_find) or a PCRE2 regex run with Oniguruma's
 * find_iter semantics (what HF tokenizers uses). */
typedef struct {
    pcre2_code *re; /* NULL for a non-empty literal */
    int jit;        /* JIT-compiled: matched with pcre2_jit_match, skipping checks */
    int fast;       /* TOK_FAST_*: a hand-written matcher decides ASCII matches */
    char *lit;
    size_t lit_n;
} tok_pattern;
/* Compile pattern (len n). is_literal: match the text as is. where names the
 * JSON path for errors. */
int tok_pattern_compile(tok_pattern *p, const char *pat, size_t n, int is_literal, const char *file,
                        const char *where);
void tok_pattern_free(tok_pattern *p);

/* bpe_regex_fast.c: GPT-2's, Llama 3's and Qwen2's pre-tokenizer regexes */
enum { TOK_FAST_GPT2 = 1, TOK_FAST_LLAMA3, TOK_FAST_QWEN2 };
int tok_fast_kind(const char *pat, size_t n); /* 0 if the pattern is none of them */
/* The match that starts at s[i] (these regexes match at every position):
 * 1 and *end, or 0 when it depends on non-ASCII text (ask PCRE2). */
int tok_fast_match(int kind, const char *s, size_t n, size_t i, size_t *end);

/* Per-call match state for one subject string. */
struct tok_scratch;
typedef struct {
    const tok_pattern *pat;
    const char *s;
    size_t n, pos;         /* next search start */
    size_t last_match_end; /* SIZE_MAX before the first match */
    struct tok_scratch *sc;
} tok_finder;
const char *tok_find(const char *s, size_t n, const char *pat, size_t m); /* like memmem */
void tok_finder_init(tok_finder *f, const tok_pattern *p, const char *s, size_t n, struct tok_scratch *sc);
/* 1 = a match [*a, *b), 0 = no more, -1 = error (message set) */
int tok_finder_next(tok_finder *f, size_t *a, size_t *b);

/* Leftmost-longest matcher over the added tokens (a byte trie). */
typedef struct { int32_t child, sibling, token; uint8_t byte; } tok_trie_node;
typedef struct {
    tok_trie_node *nodes;
    int n, cap;
    uint8_t first[256]; /* bytes that start some token */
    int n_first;        /* how many such bytes; with one, memchr finds candidates */
    uint8_t only_first;
} tok_trie;
int tok_trie_add(tok_trie *t, const char *s, size_t n, int32_t token);
/* Longest token starting at s[0..n): its index, *len set; -1 if none. */
int32_t tok_trie_match(const tok_trie *t, const char *s, size_t n, size_t *len);
void tok_trie_free(tok_trie *t);

/* ---- pipeline stages ----------------------------------------------------- */

typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef enum { PREPEND_NEVER, PREPEND_FIRST, PREPEND_ALWAYS } tok_prepend_scheme;

typedef enum { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_PREPEND, NORM_REPLACE, NORM_STRIP } tok_norm_kind;
typedef struct {
    tok_norm_kind kind;
    tok_pattern pat;  /* Replace */
    char *str;        /* Prepend: the prefix; Replace: the content */
    size_t str_n;
    int left, right;  /* Strip */
} tok_normalizer;

typedef enum { PRE_SPLIT, PRE_BYTE_LEVEL, PRE_METASPACE } tok_pre_kind;
typedef struct {
    tok_pre_kind kind;
    tok_pattern pat;              /* Split; ByteLevel with use_regex (GPT-2's); Metaspace split on the replacement */
    tok_split_behavior behavior;
    int invert;
    int add_prefix_space, use_regex; /* ByteLevel */
    char repl[4];                 /* Metaspace replacement character, UTF-8 */
    int repl_n;
    tok_prepend_scheme prepend;
    int split;
} tok_pretok;

typedef enum { DEC_REPLACE, DEC_BYTE_FALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE, DEC_BYTE_LEVEL } tok_dec_kind;
typedef struct {
    tok_dec_kind kind;
    tok_pattern pat;   /* Replace */
    char *str;         /* Replace content */
    size_t str_n;
    uint32_t ch;       /* Strip content / Metaspace replacement (code point) */
    int start, stop;   /* Strip */
    tok_prepend_scheme prepend; /* Metaspace */
} tok_decoder;

/* an added token (special or not), matched in the text before the model */
typedef struct {
    int32_t id;
    int special, lstrip, rstrip, normalized;
} tok_added;

/* merge table entry: (left << 32 | right) -> rank and merged id; key ~0 = empty */
typedef struct { uint64_t key; uint32_t rank; int32_t id; } tok_pair;

/* per-id flags */
#define TOK_ID_PRESENT 1
#define TOK_ID_SPECIAL 2

struct tt_tokenizer {
    int kind;
    /* ---- model ---- */
    tok_strmap vocab;        /* model token string -> id */
    tok_strmap vocab_bytes;  /* byte-level + ignore_merges: raw bytes of a token -> id */
    int32_t n_ids;           /* max id + 1 over the model and the added tokens */
    int32_t n_model;         /* entries in model.vocab (HF's model vocab size) */
    uint32_t *id_off, *id_len; /* id -> string in id_blob (added token content wins) */
    uint8_t *id_flags;
    tok_buf id_blob;
    tok_pair *pairs;
    size_t pair_mask;
    int32_t unk_id;          /* -1 none; -2 named but absent from the vocabulary */
    char *unk_name;
    int byte_fallback, fuse_unk, ignore_merges;
    char *cont_prefix, *word_suffix; /* continuing_subword_prefix, end_of_word_suffix (NULL = none) */
    int byte_level;          /* the last pre-tokenizer is ByteLevel: the model sees bytes */
    int32_t ascii_id[128];   /* id of a one-character ASCII token, or -1 */
    int32_t bl_id[256];      /* byte-level: id of the character that shows byte b, or -1 */
    int bl_all;              /* byte-level, all 256 present, no prefix/suffix */
    int meta_cut;            /* no token has U+2581 after another character: cut words there */
    int32_t bf_id[256];      /* id of "<0xNN>", or -1 */
    /* ---- added tokens ---- */
    tok_added *added;
    int n_added;
    tok_trie trie_raw, trie_norm; /* tokens with normalized=false / true (the latter normalized) */
    /* ---- pipeline ---- */
    tok_normalizer norms[TOK_MAX_STAGES];
    int n_norms;
    tok_pretok pretoks[TOK_MAX_STAGES];
    int n_pretoks;
    tok_decoder decs[TOK_MAX_STAGES];
    int n_decs;
    int dec_fuse_at;         /* index of the first Fuse/ByteLevel decoder, or n_decs */
    int dec_join_space;      /* no decoder: tokens are joined with " " */
    int32_t *tmpl_pre, *tmpl_post; /* TemplateProcessing ids around $A */
    int n_tmpl_pre, n_tmpl_post;
    int32_t bos, eos;
    uint32_t max_ovector;    /* the largest capture count + 1 of the regexes */
    uint32_t *bl_off, *bl_len; /* decoder starts with ByteLevel: each id's bytes in bl_blob */
    tok_buf bl_blob;
    char no_offsets[512];    /* why tt_tokenizer_encode_offsets is refused ("" = it is not) */
    /* ---- scratch pool (one per concurrent call) ---- */
    pthread_mutex_t pool_lock;
    struct tok_scratch *pool;
};

/* ---- per-call scratch ----------------------------------------------------- */

/* A cache of pre-token -> ids, per scratch (so per concurrent caller). A key
 * of up to 16 bytes is held in k0/k1 itself (overlapping loads cover every
 * byte, so equal words with equal length mean equal keys); a longer one is
 * hashed into k0 and compared in the key arena. One id is held in ids. */
typedef struct {
    uint64_t k0, k1;
    uint32_t ids, key_off; /* the id itself when n_ids == 1, else an offset in the id arena */
    uint16_t key_len, n_ids; /* key_len 0 = empty slot */
} tok_cache_ent;
typedef struct {
    tok_cache_ent *ents;
    int n;
    tok_buf keys;
    int32_t *ids;
    uint32_t *starts; /* offsets cache: beside ids[k], where that token starts in the pre-token */
    size_t n_ids;
} tok_cache;

typedef struct tok_scratch {
    struct tok_scratch *pool_next; /* pool link */
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    tok_buf norm[2];               /* normalizer double buffer */
    tok_buf pre[TOK_MAX_STAGES];   /* pre-tokenizer output, one per depth */
    tok_buf tmp;
    /* BPE word */
    int32_t *sym;                  /* symbol ids */
    int32_t *nid;                  /* merged id of the pair at i (small words) */
    int32_t *prev, *next;
    uint32_t *rank;
    tok_pair *heap;                /* candidate merges: key = rank << 32 | position, id = merged */
    size_t sym_cap;                /* the heap holds 3 * sym_cap */
    tok_cache cache;
    /* output of the current encode call */
    int32_t *out;
    size_t out_n, out_cap;
    /* offsets encodes only (see tok_orig) */
    uint32_t *starts;              /* where each id of out starts in the text */
    size_t starts_cap;             /* kept equal to out_cap by tok_starts_fit */
    tok_orig raw_orig;             /* of the text itself */
    tok_orig norm_orig[2];         /* of norm[0], norm[1] */
    tok_orig pre_orig[TOK_MAX_STAGES]; /* of pre[depth] */
    uint32_t *sym_len;             /* symbol k's length in the string the model sees (sym_cap) */
    uint32_t *tok_at;              /* final token k's first byte in the word (sym_cap) */
    tok_cache cache_offs;          /* pre-token -> ids and where each starts in it */
} tok_scratch;

/* bpe_scratch.c */
tok_scratch *tok_scratch_get(tt_tokenizer *t);
void tok_scratch_put(tt_tokenizer *t, tok_scratch *sc);
void tok_scratch_free(tok_scratch *sc);
int tok_out_grow(tok_scratch *sc);
static inline int tok_emit(tok_scratch *sc, int32_t id)
{
    if (sc->out_n == sc->out_cap && tok_out_grow(sc)) return -1;
    sc->out[sc->out_n++] = id;
    return 0;
}
int tok_starts_fit(tok_scratch *sc); /* starts grown to out_cap */
/* offsets encodes: an id and the byte of the text where it starts */
static inline int tok_emit_at(tok_scratch *sc, int32_t id, uint32_t start)
{
    if (tok_emit(sc, id) || (sc->starts_cap < sc->out_cap && tok_starts_fit(sc))) return -1;
    sc->starts[sc->out_n - 1] = start;
    return 0;
}

/* ---- stages (bpe_normalize.c, bpe_pretokenize.c, bpe_model.c) ------------ */

/* Run the normalizers over s; the result is in *out / *out_n (a scratch buffer or s). With orig (offsets),
 * *out_orig gets the result's origins; origin is where the piece starts in the text (what HF gives a
 * character inserted before all others). */
int tok_normalize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                  uint32_t origin, const char **out, size_t *out_n, const uint32_t **out_orig);
/* Replace every match of p in s by with (HF NormalizedString::replace) */
int tok_replace_all(const tok_pattern *p, const char *s, size_t n, const char *with, size_t with_n,
                    struct tok_scratch *sc, tok_buf *out);
/* Normalize one string outside any call (added tokens at load time); malloc'ed result. */
char *tok_normalize_alloc(const tt_tokenizer *t, const char *s, size_t n, size_t *out_n);
/* bpe_unicode_forms.c: NFC / NFD / NFKC / NFKD of s appended to out; with orig, the origins to out_orig */
int tok_unicode_form(tok_norm_kind k, const char *s, size_t n, const uint32_t *orig, uint32_t origin, tok_buf *out,
                     tok_orig *out_orig);
/* Pre-tokenize s and feed every pre-token to the model. at_origin: s starts at
 * offset 0 of the original text (Metaspace prepend_scheme "first"). orig: NULL, or s's origins. */
int tok_pretokenize(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig,
                    int at_origin);
/* BPE over one pre-token: appends its ids to sc->out; the offsets one also where each starts to sc->starts. */
int tok_model_word(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n);
int tok_model_word_offsets(const tt_tokenizer *t, tok_scratch *sc, const char *s, size_t n, const uint32_t *orig);
/* Build the merge table from the ranked (left, right, merged) triples. */
int tok_pairs_build(tt_tokenizer *t, const int32_t *triples, size_t n_merges);

/* ---- JSON loading (tokenizer_bpe.c) and decoding (bpe_decode.c) ---------- */
tt_tokenizer *tok_bpe_parse(const char *json, size_t len, const char *name);
void tok_bpe_free(tt_tokenizer *t);
/* tt_tokenizer_token_id of a tokenizer.json tokenizer: an added token's id, else the vocabulary's, -1 if none */
int tok_bpe_token_id(const tt_tokenizer *t, const char *token);
int tok_bpe_encode(tt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                   size_t *cap);
int tok_bpe_encode_offsets(tt_tokenizer *t, const char *text, size_t len, int32_t **ids, uint32_t **starts,
                           size_t *n, size_t *cap);
int tok_dec_check(const tt_tokenizer *t, const char *file); /* refuse decoder chains we cannot stream */

/* A decode stream (bpe_decode.c); tt_tokenizer_decode feeds one every id. */
struct tt_tok_stream {
    const tt_tokenizer *t;
    int skip_special;
    tok_scratch *sc;               /* for Replace decoders with a regex */
    tok_buf out;                   /* text produced by the current call */
    tok_buf lossy;                 /* ByteLevel: the UTF-8 text of one token's bytes */
    tok_buf stage[TOK_MAX_STAGES]; /* per-stage temporary token */
    tok_buf group;                 /* ByteFallback: pending bytes (one such stage is allowed) */
    int64_t count[TOK_MAX_STAGES]; /* tokens seen by each token-level stage */
    uint8_t u8[4];                 /* ByteLevel: an incomplete UTF-8 sequence */
    int u8_n;
    int strip_left_done[TOK_MAX_STAGES]; /* text-level Strip: leading part already passed */
    int strip_left_cut[TOK_MAX_STAGES];  /* characters stripped so far */
    int strip_pending[TOK_MAX_STAGES];   /* trailing content characters held back */
    int joined;                    /* join mode: a token was already written */
    int finished;
};
int tok_stream_init(tt_tok_stream *S, const tt_tokenizer *t, int skip_special);
int tok_stream_feed(tt_tok_stream *S, int32_t id);  /* appends to S->out */
int tok_stream_finish(tt_tok_stream *S);
void tok_stream_release(tt_tok_stream *S);

#endif

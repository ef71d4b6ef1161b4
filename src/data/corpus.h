/* corpus.h — the built-in synthetic corpus: English-like made-up text from a
 * seeded generative process whose every byte string has exactly one
 * derivation, so the exact NLL of the validation set (the entropy floor a
 * perfect model would reach) is known. Text is byte-tokenized into shards. */
#ifndef TT_CORPUS_H
#define TT_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "titan/titan.h"

typedef struct {
    uint64_t seed;
    int64_t train_tokens, val_tokens; /* whole documents are generated until each split has at least this many */
    int max_doc_tokens;               /* hard cap on one document, BOS and EOS included */
    int n_words;                      /* lexicon size over nouns, verbs, adjectives, adverbs and roles (>= 1000) */
    int n_names;                      /* capitalised entity names */
    double zipf;                      /* word frequencies within a class fall as rank^-zipf */
    double p_stop;                    /* chance the document ends after a body sentence (when not forced) */
    double p_attr;                    /* chance a reference reads "the ROLE Name" rather than "Name" */
    int min_entities, max_entities;   /* entities introduced per document, uniform in [min, max] */
} tt_corpus_cfg;

typedef struct {
    double floor_nats;       /* val: process NLL / scored tokens, nats per token */
    double unigram_nats;     /* val: entropy of the scored tokens' empirical distribution */
    double gap_nats;         /* unigram - floor */
    double train_floor_nats; /* the same floor over the train split */
    int64_t train_tokens, val_tokens, train_docs, val_docs, val_scored_tokens;
} tt_corpus_stats;

/* Defaults: 1000 words, 200 names, zipf 1.2, max 256 tokens per document. */
tt_corpus_cfg tt_corpus_cfg_default(void);
/* Check every field (and that the longest possible document fits the cap). */
tt_err tt_corpus_cfg_check(const tt_corpus_cfg *cfg);

/* ---- the generator ------------------------------------------------------ */
typedef enum { TT_WC_NOUN = 0, TT_WC_VERB, TT_WC_ADJ, TT_WC_ADV, TT_WC_ROLE, TT_WC_NAME, TT_WC_COUNT } tt_word_class;
typedef enum { TT_CORPUS_TRAIN = 0, TT_CORPUS_VAL = 1 } tt_corpus_split;

typedef struct tt_corpus tt_corpus; /* the lexicon and grammar built from a cfg */
tt_corpus *tt_corpus_new(const tt_corpus_cfg *cfg);
void tt_corpus_free(tt_corpus *c);
const tt_corpus_cfg *tt_corpus_config(const tt_corpus *c);

/* Document number `index` of a split, as tokens BOS ... EOS (byte ids), with
 * its exact NLL in nats under the process. tokens must hold cap >=
 * max_doc_tokens ids. Documents of a split are independent of each other
 * (each has its own RNG stream), and the two splits' streams are disjoint. */
tt_err tt_corpus_gen_doc(const tt_corpus *c, tt_corpus_split split, uint64_t index, int32_t *tokens, int cap,
                         int *n_tokens, double *nll);

/* Generate both splits into shard files (2-byte tokens, bos 256, vocab 258). */
tt_err tt_corpus_write(const tt_corpus_cfg *cfg, const char *train_path, const char *val_path, tt_corpus_stats *out);
/* dir/train.bin, dir/val.bin and dir/corpus.json (cfg + stats); when they
 * already exist for an equal cfg they are reused and only the stats read. */
tt_err tt_corpus_prepare(const tt_corpus_cfg *cfg, const char *dir, tt_corpus_stats *out);

/* {"config": {...}, "stats": {...}}; the seed is a decimal string so all 64
 * bits survive JSON. from_json fills cfg and/or stats (either may be NULL);
 * where names the source in errors. */
cJSON *tt_corpus_stats_to_json(const tt_corpus_cfg *cfg, const tt_corpus_stats *st);
tt_err tt_corpus_stats_from_json(const cJSON *j, const char *where, tt_corpus_cfg *cfg, tt_corpus_stats *st);
int tt_corpus_cfg_equal(const tt_corpus_cfg *a, const tt_corpus_cfg *b);

/* ---- the grammar, exposed so tests can re-parse documents independently --
 * A document is BOS, k in [min_entities, max_entities] intro sentences (the
 * intro template), then >= 1 body sentences, then EOS; sentences are joined
 * by one space. A sentence is its items joined by spaces, then '.'. Items:
 *   lowercase word  literal
 *   N V A D         a noun / verb / adjective / adverb (Zipf within class)
 *   R               a reference to an introduced entity, uniform among them:
 *                   "Name" (1 - p_attr) or "the ROLE Name" (p_attr)
 *   P O             (intro only) a new name, uniform among unused names, and
 *                   its role, Zipf among roles
 *   Y               a two-digit number 10..99, uniform
 * After each body sentence the document stops with p_stop, or surely when
 * one more sentence of the longest kind could not fit in max_doc_tokens. */
int tt_corpus_n_templates(void);
const char *tt_corpus_template(int i, double *weight);
const char *tt_corpus_intro_template(void);
int tt_corpus_class_size(const tt_corpus *c, tt_word_class cls);
/* Word `rank` (0 = most frequent) of a class, NUL-terminated. */
const char *tt_corpus_word(const tt_corpus *c, tt_word_class cls, int rank);
/* The most tokens a body / intro sentence can take, its '.' included. */
int tt_corpus_max_sentence_tokens(const tt_corpus *c, int intro);

#endif

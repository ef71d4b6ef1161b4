/* loader.h — batches of packed documents from one token shard (text, or conversations with a loss
 * mask whose long conversations are cut at turn boundaries; see loader.c): whole
 * documents packed greedily into seq_len windows (a longer one cut into
 * pieces of seq_len inputs, each piece's last target the next piece's first
 * token), targets masked at document ends and padding, positions restarting
 * per document and per piece, per-token document ids for the attention mask.
 * Every token of a document after its first is a target exactly once.
 * Training order is a seeded per-epoch shuffle whose position {epoch, cursor}
 * a checkpoint saves; validation is one ordered pass. */
#ifndef TT_LOADER_H
#define TT_LOADER_H

#include <stdint.h>

#include "titan/titan.h"

#define TT_IGNORE_INDEX (-100)

typedef enum { TT_LOADER_TRAIN = 0, TT_LOADER_VAL = 1 } tt_loader_mode;

typedef struct {
    const char *path;
    int seq_len;    /* T */
    int batch_size; /* B: windows per batch on this rank */
    uint64_t seed;  /* train: the shuffle seed */
    tt_loader_mode mode;
    int rank, world_size; /* data parallel: each global batch is world_size * B windows, rank r takes
                             the r-th B of them; world_size 0 means 1 */
} tt_loader_cfg;

/* One batch, every array (B, T) int32, row-major. */
typedef struct {
    int B, T;
    int32_t *inputs;    /* tokens; padding is bos_id */
    int32_t *targets;   /* next token of the same document (for a piece's last input, the first token of
                           the document's next piece), or TT_IGNORE_INDEX */
    int32_t *positions; /* 0 at each document start and at each piece of a cut document */
    int32_t *doc_ids;   /* 0, 1, ... per document within a row; padding gets its own */
    int64_t n_scored;   /* targets != TT_IGNORE_INDEX */
} tt_batch;

tt_batch *tt_batch_new(int B, int T);
void tt_batch_free(tt_batch *b);

/* the data position a checkpoint saves: the next window is the cursor-th of
 * epoch `epoch`'s permutation */
typedef struct {
    int64_t epoch, cursor;
} tt_loader_state;

typedef struct tt_loader tt_loader;
tt_loader *tt_loader_open(const tt_loader_cfg *cfg);
void tt_loader_close(tt_loader *l);
int64_t tt_loader_num_windows(const tt_loader *l);
int64_t tt_loader_num_docs(const tt_loader *l); /* pieces: documents after cutting ones longer than seq_len */
/* A conversation shard's accounting (version 2 shards; see loader.c): nothing is dropped unsaid. */
typedef struct {
    int64_t docs;            /* conversations */
    int64_t split;           /* conversations longer than a window, cut at turn boundaries */
    int64_t truncated;       /* turns longer than a window, truncated */
    int64_t dropped_targets; /* trained tokens that truncation (or a piece that cannot repeat its prefix) drops */
    int64_t skipped;         /* pieces with nothing to train, left out */
    int64_t targets;         /* trained tokens in one pass over the data */
} tt_loader_chat_stats;
/* 1 and *st for a conversation shard, 0 for a text shard (st may be NULL). */
int tt_loader_chat_stats_of(const tt_loader *l, tt_loader_chat_stats *st);
/* val: batches in one pass (the last one padded with fully ignored rows);
 * train: batches per epoch, rounded up */
int64_t tt_loader_num_batches(const tt_loader *l);
uint32_t tt_loader_vocab_size(const tt_loader *l);
uint32_t tt_loader_bos_id(const tt_loader *l);

/* Fill b (which must be B x T of this loader). Returns 1 with a batch, 0 when
 * a validation pass is over (train never ends), -1 on error. */
int tt_loader_next(tt_loader *l, tt_batch *b);
/* val: start the pass again; train: back to epoch 0, cursor 0 */
void tt_loader_reset(tt_loader *l);
tt_loader_state tt_loader_get_state(const tt_loader *l);
tt_err tt_loader_set_state(tt_loader *l, tt_loader_state s);

/* Window w (0 <= w < num_windows) into one row of T entries each; for tests
 * and tools. Returns the row's scored targets, or -1 for a bad w. */
int64_t tt_loader_window(const tt_loader *l, int64_t w, int32_t *inputs, int32_t *targets, int32_t *positions,
                         int32_t *doc_ids);

#endif

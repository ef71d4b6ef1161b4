/* prepare_internal.h — what `titan prepare`'s two readers share (prepare.c: text; prepare_chat.c:
 * conversations): the input file list, line reading, the validation hold-out and the progress line.
 * Private to src/data/. */
#ifndef TT_PREPARE_INTERNAL_H
#define TT_PREPARE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "titan/titan.h"

typedef struct {
    char **paths;
    int n, cap;
    uint64_t bytes; /* on disk, for the progress bar */
} tt_prep_files;

/* 1 .txt, 2 .jsonl, 3 .jsonl.gz, 0 none of them */
int tt_prep_kind_of(const char *path);
/* Add a file, or a folder's files in name order (top: path was named by the user, so a file of
 * another kind is an error rather than skipped). */
tt_err tt_prep_add_path(tt_prep_files *fl, const char *path, int top);

typedef struct {
    gzFile gz; /* reads .txt and .jsonl too (transparently) */
    int kind;
    const char *path;
    long line;
    char *buf;
    size_t cap;
} tt_prep_reader;
/* The next line (without '\n') into r->buf; 0 at the end, -1 on error. */
int tt_prep_read_line(tt_prep_reader *r, size_t *len);

/* Documents are held out by a hash of (seed, document index). */
int tt_prep_held_out(const tt_prepare_opts *o, uint64_t doc_index);
/* The error for a validation fraction that leaves one split empty. */
tt_err tt_prep_split_error(const tt_prepare_opts *o, uint64_t n_docs, int val_empty, int has_txt);
void tt_prep_progress(uint64_t done, uint64_t total, double t0, int final);
/* o->out_dir made if need be, and its train.bin and val.bin paths */
tt_err tt_prep_out_paths(const tt_prepare_opts *o, char path[2][4200]);

/* titan prepare --chat (prepare_chat.c) */
tt_err tt_prepare_chat(const tt_prepare_opts *o, FILE *log);

#endif

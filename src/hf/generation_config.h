/* generation_config.h — a Hugging Face folder's generation_config.json, and
 * the end-of-turn ids titan stops generating at: generation_config.json's
 * eos_token_id with config.json's, tokenizer_config.json's eos_token and the
 * tokenizer's own EOS, which is the list an export writes back. */
#ifndef TT_HF_GENERATION_CONFIG_H
#define TT_HF_GENERATION_CONFIG_H

#include <stddef.h>

#include "hf/hf_config.h"
#include "tokenizer/tokenizer.h"

/* generation_config.json's, config.json's (TT_HF_MAX_EOS each), tokenizer_config.json's and the tokenizer's */
#define TT_HF_MAX_END_OF_TURN (2 * TT_HF_MAX_EOS + 2)

typedef struct {
    int present;                     /* the folder has the file */
    int n_eos;                       /* eos_token_id: one id or a list; 0 when absent or null */
    int eos_token_ids[TT_HF_MAX_EOS];
} tt_hf_generation_config;

/* Read <dir>/generation_config.json (a missing file is no error: present 0).
 * eos_token_id must be a non-negative integer or a list of at most
 * TT_HF_MAX_EOS of them, each below vocab_size when vocab_size > 0; errors
 * name the file and the key. */
tt_err tt_hf_generation_config_read(const char *dir, int vocab_size, tt_hf_generation_config *g);
tt_err tt_hf_generation_config_parse(const char *json, size_t len, const char *path, int vocab_size,
                                     tt_hf_generation_config *g);

typedef struct {
    int n;
    int ids[TT_HF_MAX_END_OF_TURN];
} tt_hf_end_of_turn;

/* The ids that end a reply, each once, in this order: dir's
 * generation_config.json eos_token_id, config.json's (cfg, may be NULL), the
 * id of tokenizer_config.json's eos_token (an error naming the file when the
 * tokenizer has no such token), and the tokenizer's own EOS. dir may be NULL
 * (no folder): then only the tokenizer's EOS. */
tt_err tt_hf_end_of_turn_ids(const char *dir, const tt_hf_config *cfg, const tt_tokenizer *tk, tt_hf_end_of_turn *out);

/* generation_config.json for an export of dir's model: dir's own file (its
 * other keys and their number literals kept) with eos_token_id set to eot (a
 * number for one id, a list for several), or when dir has none (or dir is
 * NULL) a new one with bos_token_id (when >= 0) and eos_token_id. malloc'd
 * text, NULL + error. */
char *tt_hf_generation_config_json(const char *dir, int bos_token_id, const tt_hf_end_of_turn *eot);

#endif

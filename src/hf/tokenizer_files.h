/* tokenizer_files.h — the tokenizer-side files of a Hugging Face folder that
 * an export carries, so that the exported folder tokenizes and chats in
 * transformers as its source did: tokenizer.json, tokenizer_config.json with
 * the chat template, chat_template.jinja and special_tokens_map.json. */
#ifndef TT_HF_TOKENIZER_FILES_H
#define TT_HF_TOKENIZER_FILES_H

#include <stddef.h>

#include "titan/titan.h"

typedef struct cJSON cJSON;

typedef struct {
    const char *name; /* the file's name in the folder (a string constant) */
    char *data;       /* malloc'd */
    size_t len;
} tt_hf_file;

#define TT_HF_MAX_FILES 6
typedef struct {
    tt_hf_file f[TT_HF_MAX_FILES];
    int n;
} tt_hf_files;

/* What src_dir has is copied byte for byte; what it lacks is written from
 * what it has:
 *   tokenizer.json          copied when present;
 *   tokenizer_config.json   copied; when its chat template is only in
 *                           chat_template.jinja, the same with "chat_template"
 *                           added (its other values as written); without the
 *                           file, a PreTrainedTokenizerFast config naming
 *                           bos_token and eos_token (bos and eos: token
 *                           strings, NULL for none) and the template;
 *   chat_template.jinja     copied, or tokenizer_config.json's template (not
 *                           for a list of named templates: transformers would
 *                           take the file over the list);
 *   special_tokens_map.json copied, or tokenizer_config.json's special tokens
 *                           (bos and eos without that file).
 * Errors name the file. */
tt_err tt_hf_tokenizer_files(const char *src_dir, const char *bos, const char *eos, tt_hf_files *out);
/* path's JSON object, read so that cJSON_Print writes its numbers as they were written (cJSON alone would
 * print each as a double: 1e30's integer digits, a float's last digits changed). NULL + error naming the
 * file when it cannot be read, is not JSON or not an object; *missing (may be NULL) is 1 when it does not
 * exist. */
cJSON *tt_hf_json_read_object(const char *path, size_t limit, int *missing);
/* Add a file (takes data, which it frees on error); a file of the same name is replaced. */
tt_err tt_hf_files_add(tt_hf_files *f, const char *name, char *data, size_t len);
/* The file named name, or NULL. */
const tt_hf_file *tt_hf_files_find(const tt_hf_files *f, const char *name);
/* Each file written to dir atomically (tmp + rename), in order. */
tt_err tt_hf_files_write(const char *dir, const tt_hf_files *f);
void tt_hf_files_free(tt_hf_files *f);

#endif

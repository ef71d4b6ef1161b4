/* tokenizer.h — one interface over titan's tokenizers: the byte tokenizer and
 * Hugging Face tokenizer.json files with a BPE model (GPT-2 / Llama 3 / Qwen2
 * byte-level, Llama 2 / Mistral SentencePiece style), with id parity to HF
 * `tokenizers`. */
#ifndef TT_TOKENIZER_H
#define TT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

typedef struct tt_tokenizer tt_tokenizer;

/* The byte tokenizer (ids 0..255 = bytes, 256 = BOS, 257 = EOS). */
tt_tokenizer *tt_tokenizer_byte_new(void);
/* A tokenizer.json file, or the same JSON from memory (name_for_errors starts
 * every error message). NULL + tt_last_error() on failure; anything the loader
 * does not implement is refused by name with its JSON path. */
tt_tokenizer *tt_tokenizer_load(const char *path);
tt_tokenizer *tt_tokenizer_parse(const char *json, size_t len, const char *name_for_errors);
void tt_tokenizer_free(tt_tokenizer *t);

/* max id + 1 (model vocabulary and added tokens): the embedding rows needed */
int tt_tokenizer_vocab_size(const tt_tokenizer *t);
/* -1 = none. Taken from the TemplateProcessing post-processor (a special token
 * before / after $A), else from well-known added tokens: BOS "<s>",
 * "<|begin_of_text|>", "<|startoftext|>", "<bos>", "<|endoftext|>"; EOS "</s>",
 * "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<eos>". */
int tt_tokenizer_bos_id(const tt_tokenizer *t);
int tt_tokenizer_eos_id(const tt_tokenizer *t);
/* id of a token string (added tokens first, then the model vocabulary); -1 if none */
int tt_tokenizer_token_id(const tt_tokenizer *t, const char *token);

/* text (UTF-8; invalid UTF-8 is an error naming the byte offset) -> ids.
 * add_special: apply the post-processor template (BOS ...). *ids is grown with
 * realloc as needed (*ids may be NULL with *cap 0; free it with free()); *n is
 * set to the number of ids. Thread-safe: any number of threads may encode with
 * one tokenizer at once. */
tt_err tt_tokenizer_encode(const tt_tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids,
                           size_t *n, size_t *cap);
/* text -> ids as tt_tokenizer_encode(t, text, len, 0, ...) gives them (no post-processor: HF's
 * encode(text, add_special_tokens=False)), and where each token starts: (*starts)[i] is the byte
 * offset in text of the first byte of the character HF tokenizers' offsets[i][0] names (a token that
 * holds part of a multi-byte character starts where that character starts). Starts never decrease.
 * *ids and *starts grow together with realloc (both may be NULL with *cap 0; free() them); *cap is the
 * capacity of each. Thread-safe as tt_tokenizer_encode. A text longer than UINT32_MAX bytes, and a
 * tokenizer whose HF offsets titan does not reproduce (a ByteLevel post-processor with trim_offsets,
 * byte fallback with a subword prefix / suffix), are refused with an error naming why. */
tt_err tt_tokenizer_encode_offsets(const tt_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                   uint32_t **starts, size_t *n, size_t *cap);
/* ids -> text, malloc'ed and NUL-terminated in *out (free() it), *len bytes.
 * skip_special drops special tokens. Ids the tokenizer does not know are
 * dropped, as HF does (sampling from a padded embedding can produce them). */
tt_err tt_tokenizer_decode(const tt_tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **out,
                           size_t *len);

/* Streaming decode for generation: feed one id at a time and get the text that
 * is final so far (held back: incomplete UTF-8 of byte-level tokens, runs of
 * byte-fallback tokens, and what a trailing Strip may still remove). The
 * pieces of all feeds plus finish concatenate to tt_tokenizer_decode's text.
 * *text stays valid until the next call on the stream. */
typedef struct tt_tok_stream tt_tok_stream;
tt_tok_stream *tt_tok_stream_new(const tt_tokenizer *t, int skip_special);
tt_err tt_tok_stream_feed(tt_tok_stream *s, int32_t id, const char **text, size_t *len);
tt_err tt_tok_stream_finish(tt_tok_stream *s, const char **text, size_t *len);
void tt_tok_stream_free(tt_tok_stream *s);

#endif

/* tokenizer_byte.h — the byte-level tokenizer: ids 0..255 are bytes, 256 is
 * BOS, 257 is EOS (vocab 258). The built-in corpus and any raw text use it. */
#ifndef TT_TOKENIZER_BYTE_H
#define TT_TOKENIZER_BYTE_H

#include <stddef.h>
#include <stdint.h>

#include "titan/titan.h"

#define TT_BYTE_BOS 256
#define TT_BYTE_EOS 257
#define TT_BYTE_VOCAB 258

/* encode flags */
#define TT_BYTE_ADD_BOS 1
#define TT_BYTE_ADD_EOS 2
/* decode flag: skip ids outside [0, 258) instead of failing */
#define TT_BYTE_SKIP_INVALID 4

/* bytes -> ids. ids must hold cap entries; n bytes need n (+1 per BOS/EOS
 * flag) of them. *n_out = ids written. */
tt_err tt_byte_encode(const void *bytes, size_t n, int flags, int32_t *ids, size_t cap, size_t *n_out);
/* ids -> bytes; BOS and EOS are dropped. An id outside the vocabulary is an
 * error (naming its position) unless TT_BYTE_SKIP_INVALID is set. out must
 * hold cap bytes; n ids never need more than n. */
tt_err tt_byte_decode(const int32_t *ids, size_t n, int flags, uint8_t *out, size_t cap, size_t *n_out);

/* The byte tokenizer as a Hugging Face tokenizer.json (ByteLevel BPE with no
 * merges, <|bos|> = 256 prepended, <|eos|> = 257), so an exported model
 * works with `tokenizers` and transformers. malloc'ed; NULL on error. */
char *tt_byte_tokenizer_hf_json(void);

#endif

/* chat_sample.h — what one conversation trains on. A conversation is rendered with its model's chat
 * template, and the rendered text says which of its bytes are trained: every assistant turn's reply
 * and end-of-turn marker (the bytes that render(messages[:i+1]) adds to
 * render(messages[:i], add_generation_prompt)), or what the template's {% generation %} blocks
 * write, or all of it. It also says where a conversation too long for a window may be cut (before
 * each user turn that follows an assistant's) and which leading part every later piece repeats (the
 * system message). Then the same in tokens: ids, a 0/1 target flag per token, cuts and prefix. */
#ifndef TT_CHAT_SAMPLE_H
#define TT_CHAT_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "chat/chat_template.h"
#include "titan/titan.h"

typedef struct tt_tokenizer tt_tokenizer;

typedef enum { TT_CHAT_TRAIN_ASSISTANT = 0, TT_CHAT_TRAIN_ALL = 1 } tt_chat_train_on;

/* One training sample: a rendered text and the parts of it that matter. */
typedef struct {
    char *text;        /* NUL-terminated */
    size_t len;
    size_t *rstart, *rend; /* (n_ranges,) trained byte ranges [rstart, rend), in order, not overlapping */
    int n_ranges;
    size_t *cut;       /* (n_cuts,) byte offsets where a later piece may start, increasing */
    int n_cuts;
    size_t prefix;     /* the leading bytes every later piece repeats (0: none) */
} tt_chat_sample;

/* What a conversation becomes: one sample, or, when the template rewrites earlier turns (Qwen3's
 * drops their reasoning, so an earlier turn's rendering is no prefix of a later one's), one sample
 * per trained assistant turn, each trained on its last turn only. */
typedef struct {
    tt_chat_sample *s;
    int n;
    int per_turn; /* 1: the prefix property failed and each sample is one turn */
} tt_chat_samples;

/* messages and tools as tt_chat_conversation_of gives them; assistant turns before message
 * first_trained (TRL's prompt) are not trained. A conversation with nothing to train gives n = 0.
 * On error -1 with the message; *raised (may be NULL) is 1 when the template raised it. */
tt_err tt_chat_samples_of(const tt_chat_template *t, const tt_chat_specials *sp, const cJSON *messages,
                          const cJSON *tools, int first_trained, tt_chat_train_on on, tt_chat_samples *out,
                          int *raised);
void tt_chat_samples_free(tt_chat_samples *s);

/* A sample in tokens: the text encoded as transformers encodes apply_chat_template's output
 * (encode(text, add_special_tokens=False)). mask[t] is 1 when token t is a training target,
 * predicted from position t - 1: its first byte lies in a trained range (never t = 0). cut[] and
 * prefix are the sample's byte offsets moved to the first token that starts at or after them. */
typedef struct {
    int32_t *ids;
    uint8_t *mask;
    uint32_t *starts; /* each token's first byte in the text */
    size_t n, cap;
    uint64_t *cut;
    int n_cuts;
    uint64_t prefix;
    int64_t n_trained; /* tokens with mask 1 */
} tt_chat_tokens;

/* Encode s into tk (its buffers are reused from call to call; zero it first). */
tt_err tt_chat_tokens_of(const tt_tokenizer *tok, const tt_chat_sample *s, tt_chat_tokens *tk);
void tt_chat_tokens_free(tt_chat_tokens *tk);

#endif

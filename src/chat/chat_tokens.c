/* chat_tokens.c — a chat sample in tokens: the text encoded as transformers encodes
 * apply_chat_template's output, each token flagged as a target when its first byte lies in a
 * trained range, and the sample's cuts and prefix moved from bytes to tokens. */
#include <stdlib.h>
#include <string.h>

#include "chat/chat_sample.h"
#include "core/core.h"
#include "tokenizer/tokenizer.h"


/* the first token that starts at or after byte b */
static uint64_t token_at(const tt_chat_tokens *tk, size_t b, size_t from)
{
    size_t t = from;
    while (t < tk->n && tk->starts[t] < b) t++;
    return t;
}

tt_err tt_chat_tokens_of(const tt_tokenizer *tok, const tt_chat_sample *s, tt_chat_tokens *tk)
{
    size_t cap = tk->cap;
    if (tt_tokenizer_encode_offsets(tok, s->text, s->len, &tk->ids, &tk->starts, &tk->n, &cap)) return -1;
    if (cap > tk->cap || !tk->mask) {
        uint8_t *m = realloc(tk->mask, cap ? cap : 1);
        if (!m) return tt_errorf("out of memory");
        tk->mask = m;
    }
    tk->cap = cap;
    /* both lists are in order: one walk flags every token */
    tk->n_trained = 0;
    int r = 0;
    for (size_t t = 0; t < tk->n; t++) {
        while (r < s->n_ranges && s->rend[r] <= tk->starts[t]) r++;
        tk->mask[t] = t > 0 && r < s->n_ranges && s->rstart[r] <= tk->starts[t];
        tk->n_trained += tk->mask[t];
    }
    uint64_t *c = realloc(tk->cut, sizeof *c * (size_t)(s->n_cuts ? s->n_cuts : 1));
    if (!c) return tt_errorf("out of memory");
    tk->cut = c;
    tk->prefix = token_at(tk, s->prefix, 0);
    tk->n_cuts = 0;
    uint64_t last = tk->prefix;
    for (int k = 0; k < s->n_cuts; k++) {
        uint64_t at = token_at(tk, s->cut[k], (size_t)last);
        if (at > last && at < tk->n) c[tk->n_cuts++] = last = at; /* strictly inside, increasing */
    }
    return 0;
}

void tt_chat_tokens_free(tt_chat_tokens *tk)
{
    free(tk->ids), free(tk->mask), free(tk->starts), free(tk->cut);
    memset(tk, 0, sizeof *tk);
}

/* generate.h — text from a run's model: `titan generate`, a training run's
 * closing sample, and the generator that chat.c drives turn by turn. */
#ifndef TT_GENERATE_H
#define TT_GENERATE_H
#include <stdio.h>

#include "hf/generation_config.h"
#include "tokenizer/tokenizer.h"
#include "train/run.h"

/* A training run's closing sample of generate.prompt, fitted to the model and
 * logged: an empty prompt starts from the end-of-text token, the new tokens
 * stop at the model's last position (where `titan generate` refuses both). */
tt_err tt_run_sample(tt_run *r, FILE *out);

/* A model ready to continue token ids: its weights, the run's tokenizer, the
 * ids that end a turn, and the sampling stream of generate.seed, which goes
 * on from one reply to the next. */
typedef struct {
    const tt_model *model;
    tt_train_state *weights;
    const tt_config *cfg;
    tt_tokenizer *tk;
    tt_hf_end_of_turn stop; /* tt_hf_end_of_turn_ids of the run's folder */
    tt_rng rng;
    /* what tt_generator_open opened */
    tt_run run;
    tt_train_state gathered;
    int opened;
} tt_generator;

/* The run's model as `titan generate` opens it: from the newest (or
 * checkpoint.load_step) checkpoint, or with from_hf the weights of
 * model.hf_assets_path. The generator must stay where it is (it points into
 * itself) until tt_generator_close. */
tt_err tt_generator_open(tt_generator *g, const tt_config *cfg, int from_hf);
void tt_generator_close(tt_generator *g);
/* The positions the model was made for (config.json's
 * max_position_embeddings, GPT-2's n_positions, a flavor's max_seq_len); 0
 * when it does not say. */
int tt_generator_context(const tt_generator *g);

typedef struct {
    int32_t *ids;  /* the new ids, the end-of-turn one left out */
    int n;
    char *text;    /* their text as printed (special tokens skipped), NUL-terminated */
    size_t len;
    int end_id;    /* the end-of-turn id that ended the reply; -1: max_new tokens came first */
} tt_gen_reply;
void tt_gen_reply_free(tt_gen_reply *r);

/* Continue ids[0..n) (n >= 1, each in the vocabulary) by up to max_new
 * tokens, streaming their text to out as they come and a newline after them
 * (flushed), until an end-of-turn id, which is not printed. reply receives the
 * new ids and their text. The caller keeps n + max_new within the model's
 * positions. */
tt_err tt_generator_reply(tt_generator *g, const int32_t *ids, int n, int max_new, FILE *out, tt_gen_reply *reply);
#endif

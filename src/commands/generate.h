/* generate.h — text from a run's model: `titan generate`, and a training
 * run's closing sample. */
#ifndef TT_GENERATE_H
#define TT_GENERATE_H
#include <stdio.h>

#include "train/run.h"

/* A training run's closing sample of generate.prompt, fitted to the model and
 * logged: an empty prompt starts from the end-of-text token, the new tokens
 * stop at the model's last position (where `titan generate` refuses both). */
tt_err tt_run_sample(tt_run *r, FILE *out);
#endif

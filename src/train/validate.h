/* validate.h — the loss of a run's model on its validation data. */
#ifndef TT_VALIDATE_H
#define TT_VALIDATE_H
#include "train/run.h"

/* The mean loss over the validation batches (validation.steps of them, or
 * all: -1) and the tokens scored, summed over every rank of the job. */
tt_err tt_run_validate(tt_run *r, double *loss, long *tokens);
#endif

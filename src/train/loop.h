/* loop.h — the training loop: steps until training.steps, with metrics,
 * validation, checkpoints and preemption between them. */
#ifndef TT_LOOP_H
#define TT_LOOP_H
#include "train/hooks.h"
#include "train/run.h"

typedef struct {
    int completed; /* reached training.steps (not stopped by a request) */
} tt_loop_result;

/* Train r from its step to training.steps, calling the hooks around every
 * step; writes summary.json when it trained to the end. */
tt_err tt_train_loop(tt_run *r, const tt_step_hook *hooks, int n_hooks, tt_loop_result *out);
#endif

/* checkpoint.h — saving and restoring a run's whole train state (weights,
 * AdamW moments, step, RNG, data position) as sharded checkpoints. */
#ifndef TT_CHECKPOINT_H
#define TT_CHECKPOINT_H
#include "train/run.h"

/* Every rank calls both. A sharded state saves one file per shard with its
 * layout; any checkpoint loads into any layout (a run resumes on another
 * number of ranks). restore: checkpoint.load_step or the newest, falling back
 * as the config allows; require: an error when there is none. */
tt_err tt_run_save(tt_run *r);
tt_err tt_run_restore(tt_run *r, int require);
#endif

/* run_open.h — opening a run for a purpose: training, evaluation, or only
 * its model (from a checkpoint or Hugging Face weights). */
#ifndef TT_RUN_OPEN_H
#define TT_RUN_OPEN_H
#include "train/run.h"

typedef enum {
    TT_RUN_TRAIN, /* train and optimizer graphs; resumes from the latest checkpoint if any */
    TT_RUN_EVAL,  /* the validation data and eval graph; a checkpoint is required */
    TT_RUN_MODEL, /* only the model, loaded from a checkpoint (generation, export) */
    TT_RUN_HF,    /* only the model, with the weights of model.hf_assets_path */
} tt_run_purpose;
tt_err tt_run_open(tt_run *r, const tt_config *cfg, tt_run_purpose purpose);
#endif

/* train.c — `titan train`: a training run (train/run.h) through the loop
 * with the hooks its config asks for, then what closes a run that trained to
 * the end: the Hugging Face export (checkpoint.last_save_in_hf) and a
 * generated sample. */
#include <stdio.h>

#include "commands/generate.h"
#include "train/export.h"
#include "train/run_open.h"
#include "train/loop.h"
#include "train/parallel.h"

tt_err tt_train(const tt_config *cfg)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_TRAIN)) return -1;
    const tt_config *c = r.cfg;
    tt_step_hook hooks[TT_MAX_HOOKS];
    int n_hooks = 0;
    tt_loop_result res = {0};
    tt_err rc = tt_step_hooks_from_config(&r, hooks, &n_hooks) || tt_train_loop(&r, hooks, n_hooks, &res);
    if (!rc && res.completed && c->checkpoint.last_save_in_hf) {
        tt_fault_slow_work(tt_fault_slow_seconds(c, r.rank, r.step)); /* a test's slow export, rank 0 alone */
        char dir[TT_CONFIG_PATH_MAX + 8];
        snprintf(dir, sizeof dir, "%s/hf", c->job.dump_folder);
        rc = r.has_lora ? tt_run_export_peft(&r, dir) : tt_run_export_hf(&r, dir); /* LoRA: its adapter */
    }
    /* the closing sample fits itself to the model, and never fails a run that trained */
    if (!rc && res.completed && c->generate.max_new_tokens > 0 && tt_run_sample(&r, stdout))
        tt_warn("no closing sample: %s", tt_last_error());
    tt_step_hooks_free(hooks, n_hooks);
    tt_run_close(&r);
    return rc;
}

/* export.c — `titan export`: a checkpoint written as a Hugging Face folder. */
#include "train/export.h"
#include "train/run_open.h"

tt_err tt_export(const tt_config *cfg, const char *out_dir)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_MODEL)) return -1;
    tt_err rc = tt_run_export_hf(&r, out_dir);
    tt_run_close(&r);
    return rc;
}

/* export.c — `titan export`: a checkpoint written as a Hugging Face folder,
 * or a LoRA run's as its PEFT adapter or its merged model. */
#include "titan/titan.h"
#include "train/export.h"
#include "train/run_open.h"

tt_err tt_export(const tt_config *cfg, tt_export_kind kind, const char *out_dir)
{
    tt_run r;
    if (tt_run_open(&r, cfg, TT_RUN_MODEL)) return -1;
    tt_err rc = 0;
    if (r.has_lora && kind == TT_EXPORT_HF)
        rc = tt_errorf("the checkpoint holds LoRA adapters: export them with --peft (a PEFT adapter folder), or the "
                       "model with them merged with --merge");
    else if (!r.has_lora && kind != TT_EXPORT_HF)
        rc = tt_errorf("%s is for a LoRA run's checkpoint (lora.rank > 0), and this one holds a model's weights",
                       kind == TT_EXPORT_PEFT ? "--peft" : "--merge");
    else rc = kind == TT_EXPORT_PEFT ? tt_run_export_peft(&r, out_dir) : tt_run_export_hf(&r, out_dir);
    tt_run_close(&r);
    return rc;
}

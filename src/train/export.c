/* export.c — a run's model written as a Hugging Face folder (the end of a
 * training run with checkpoint.last_save_in_hf, and `titan export`). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "hf/hf_model.h"
#include "hf/peft_adapter.h"
#include "tokenizer/tokenizer_byte.h"
#include "train/export.h"

tt_dtype tt_run_export_dtype(const tt_run *r)
{
    switch (r->cfg->checkpoint.export_dtype) {
    case TT_EXPORT_DTYPE_FLOAT32: return TT_F32;
    case TT_EXPORT_DTYPE_BFLOAT16: return TT_BF16;
    case TT_EXPORT_DTYPE_AUTO: break;
    }
    if (!r->has_hf) return TT_F32;
    /* an F16 source is written in fp32: fp16's range would clip what training made */
    return tt_hf_weights_dtype(r->cfg->model.hf_assets_path, r->hf.torch_dtype) == TT_BF16 ? TT_BF16 : TT_F32;
}

tt_err tt_run_export_peft(tt_run *r, const char *out_dir)
{
    tt_train_state gathered, *w; /* the adapters whole, on rank 0: it writes them */
    if (tt_run_whole_trained(r, &gathered, &w)) return tt_error_prefix("export to %s: ", out_dir);
    if (!w) return 0;
    const tt_param_store ad = tt_state_store(w, TT_STATE_PARAM);
    tt_err rc = tt_peft_adapter_save(out_dir, r->model, &r->lora, &r->lora_spec, r->cfg->model.hf_assets_path, &ad);
    if (w == &gathered) tt_state_free(&gathered);
    if (rc) return -1;
    tt_log("exported step %ld's LoRA adapters (%d layers, rank %d) as a PEFT adapter folder: %s", r->step,
           r->lora.n_targets, r->lora.rank, out_dir);
    return 0;
}

/* The Hugging Face export of a run's model: ids of the tokenizer it was
 * trained with, and that tokenizer.json when it came from an HF folder. */
tt_err tt_run_export_hf(tt_run *r, const char *out_dir)
{
    tt_hf_export_opts o = tt_hf_export_defaults();
    o.max_shard_bytes = (size_t)r->cfg->checkpoint.hf_max_shard_mb * 1000 * 1000;
    o.dtype = tt_run_export_dtype(r);
    char tok[TT_CONFIG_PATH_MAX + 32];
    if (r->has_hf) {
        o.bos_token_id = r->hf.bos_token_id;
        o.n_eos = r->hf.n_eos;
        memcpy(o.eos_token_ids, r->hf.eos_token_ids, sizeof o.eos_token_ids);
        snprintf(tok, sizeof tok, "%s/tokenizer.json", r->cfg->model.hf_assets_path);
        struct stat st;
        if (stat(tok, &st) == 0) o.tokenizer_json = tok;
    } else { /* the byte tokenizer: BOS 256, EOS 257 */
        o.bos_token_id = 256;
        o.n_eos = 1;
        o.eos_token_ids[0] = 257;
    }
    tt_train_state gathered, *w;
    if (tt_run_whole_weights(r, &gathered, &w)) return tt_error_prefix("export to %s: ", out_dir);
    if (!w) return 0; /* rank 0 writes it */
    tt_param_store weights = tt_state_store(w, TT_STATE_PARAM);
    tt_err rc = tt_hf_export(r->model, out_dir, &o, &weights);
    if (w == &gathered) tt_state_free(&gathered);
    if (rc) return -1; /* tt_hf_export names the folder */
    if (!r->has_hf) { /* the byte tokenizer, written as a tokenizer.json transformers reads */
        char *json = tt_byte_tokenizer_hf_json();
        snprintf(tok, sizeof tok, "%s/tokenizer.json", out_dir);
        rc = json ? tt_write_file_atomic(tok, json, strlen(json)) : -1;
        free(json);
        if (rc) return tt_error_prefix("export to %s: ", out_dir);
    }
    tt_log("exported step %ld as a Hugging Face folder (%s weights): %s", r->step, tt_dtype_name(o.dtype), out_dir);
    return 0;
}

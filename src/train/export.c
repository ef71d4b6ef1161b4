/* export.c — a run's model written as a Hugging Face folder (the end of a
 * training run with checkpoint.last_save_in_hf, and `titan export`). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "hf/generation_config.h"
#include "hf/hf_model.h"
#include "hf/peft_adapter.h"
#include "hf/tokenizer_files.h"
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

/* The text of token id (added tokens included), malloc'd; NULL when id < 0 or on error */
static char *token_text(const tt_tokenizer *tk, int id)
{
    char *s = NULL;
    size_t len;
    const int32_t t = id;
    return id >= 0 && tt_tokenizer_decode(tk, &t, 1, 0, &s, &len) == 0 ? s : NULL;
}

/* What an export of a run from a Hugging Face folder carries beside the weights so that the folder tokenizes and
 * chats in transformers as its source did (tokenizer_files.h), and with generation its generation_config.json,
 * whose eos_token_id lists every id that ends a turn in titan (generation_config.h). Nothing when the run has no
 * folder or the folder no tokenizer.json (the run then has no tokenizer to export). */
static tt_err export_tokenizer_files(const tt_run *r, int generation, tt_hf_files *files)
{
    memset(files, 0, sizeof *files);
    const char *dir = r->cfg->model.hf_assets_path;
    char tok[TT_CONFIG_PATH_MAX + 32];
    struct stat st;
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    if (!r->has_hf || stat(tok, &st) != 0) return 0;
    tt_tokenizer *tk = tt_tokenizer_load(tok);
    if (!tk) return -1;
    tt_hf_end_of_turn eot;
    const int bos_id = tt_tokenizer_bos_id(tk) >= 0 ? tt_tokenizer_bos_id(tk) : r->hf.bos_token_id;
    const int eos_id = tt_tokenizer_eos_id(tk) >= 0 ? tt_tokenizer_eos_id(tk) : r->hf.n_eos ? r->hf.eos_token_ids[0] : -1;
    char *bos = token_text(tk, bos_id), *eos = token_text(tk, eos_id), *gen = NULL;
    tt_err rc = tt_hf_end_of_turn_ids(dir, &r->hf, tk, &eot) || tt_hf_tokenizer_files(dir, bos, eos, files);
    if (!rc && generation)
        rc = (gen = tt_hf_generation_config_json(dir, r->hf.bos_token_id, &eot)) == NULL ||
             tt_hf_files_add(files, "generation_config.json", gen, strlen(gen));
    free(bos);
    free(eos);
    tt_tokenizer_free(tk);
    if (rc) tt_hf_files_free(files);
    return rc;
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
    /* the tokenizer beside the adapter, as trainers save it, so that the folder alone chats with the base */
    tt_hf_files files;
    rc = export_tokenizer_files(r, 0, &files);
    if (!rc) rc = tt_hf_files_write(out_dir, &files);
    tt_hf_files_free(&files);
    if (rc) return tt_error_prefix("writing the adapter to %s: ", out_dir);
    tt_log("exported step %ld's LoRA adapters (%d layers, rank %d) as a PEFT adapter folder: %s", r->step,
           r->lora.n_targets, r->lora.rank, out_dir);
    return 0;
}

/* The Hugging Face export of a run's model: ids of the tokenizer it was
 * trained with, and when it came from an HF folder that folder's tokenizer
 * files with its chat template (export_tokenizer_files). */
tt_err tt_run_export_hf(tt_run *r, const char *out_dir)
{
    /* a model from an HF folder: its class and config.json's own ids; the tokenizer files with
     * generation_config.json come from the folder */
    tt_hf_export_opts o = r->has_hf ? tt_hf_export_opts_of(&r->hf) : tt_hf_export_defaults();
    o.max_shard_bytes = (size_t)r->cfg->checkpoint.hf_max_shard_mb * 1000 * 1000;
    o.dtype = tt_run_export_dtype(r);
    char tok[TT_CONFIG_PATH_MAX + 32];
    if (!r->has_hf) { /* the byte tokenizer: BOS 256, EOS 257 */
        o.bos_token_id = 256;
        o.n_eos = 1;
        o.eos_token_ids[0] = 257;
    }
    tt_train_state gathered, *w;
    if (tt_run_whole_weights(r, &gathered, &w)) return tt_error_prefix("export to %s: ", out_dir);
    if (!w) return 0; /* rank 0 writes it */
    tt_hf_files files;
    tt_err rc = export_tokenizer_files(r, 1, &files) ? tt_error_prefix("export to %s: ", out_dir) : 0;
    o.files = &files;
    tt_param_store weights = tt_state_store(w, TT_STATE_PARAM);
    if (!rc) rc = tt_hf_export(r->model, out_dir, &o, &weights); /* its errors name the folder */
    if (w == &gathered) tt_state_free(&gathered);
    tt_hf_files_free(&files);
    if (rc) return -1;
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

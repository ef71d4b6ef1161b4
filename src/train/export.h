/* export.h — a run's model as a Hugging Face folder. */
#ifndef TT_EXPORT_H
#define TT_EXPORT_H
#include "train/run.h"

/* Write the run's model as a Hugging Face folder (tt_hf_export), from rank 0
 * (every rank calls it: a sharded state is gathered first). A run from a
 * Hugging Face folder also gets the folder's tokenizer.json,
 * tokenizer_config.json with the chat template, chat_template.jinja,
 * special_tokens_map.json (hf/tokenizer_files.h) and generation_config.json
 * listing the end-of-turn ids (hf/generation_config.h). */
tt_err tt_run_export_hf(tt_run *r, const char *out_dir);
/* A LoRA run's adapters as a PEFT adapter folder (adapter_config.json, adapter_model.safetensors), with the
 * base folder's tokenizer files as above (not generation_config.json). */
tt_err tt_run_export_peft(tt_run *r, const char *out_dir);
/* The dtype it writes the weights in: checkpoint.export_dtype, where auto is
 * model.hf_assets_path's weights' dtype when that is bf16, else fp32. */
tt_dtype tt_run_export_dtype(const tt_run *r);
#endif

/* hf_model.h — load a Hugging Face model folder (config.json + safetensors,
 * single or sharded) into a titan model, and export a model back as a folder
 * that transformers.AutoModelForCausalLM.from_pretrained loads. */
#ifndef TT_HF_MODEL_H
#define TT_HF_MODEL_H

#include <stddef.h>

#include "hf/hf_config.h"
#include "hf/tokenizer_files.h"

/* Read <dir>/config.json and build the model; with weights, also load its
 * weights (F32, BF16 or F16, converted to fp32) into a new host buffer in the
 * model's flat layout (*weights, tt_free it). cfg_out (may be NULL) receives
 * the parsed config (family, bos/eos ids). NULL + an error naming the file
 * and the key or tensor. */
/* An MoE checkpoint's expert layout, from its tensor names: packed
 * (mlp.experts.gate_up_proj, as transformers 5 can save) or one tensor per
 * expert; sets x->hf_packed_experts. A folder without weights is left as is. */
void tt_hf_detect_layout(const char *dir, const tt_model_cfg *c, tt_model_ext *x);
tt_model *tt_hf_load(const char *dir, tt_hf_config *cfg_out, float **weights);

/* The dtype a folder keeps its weights in: torch_dtype (its config.json's
 * torch_dtype or dtype, as tt_hf_config_read gives it; may be NULL) when that
 * is float32, bfloat16 or float16, else the dtype of the first F32, BF16 or
 * F16 tensor of its safetensors; TT_F32 when neither tells. */
tt_dtype tt_hf_weights_dtype(const char *dir, const char *torch_dtype);

/* Load the weights of the folder into an existing model (for example one
 * built from a titan recipe). The folder's config.json, when present, must
 * describe the same math (sizes, norm epsilon, RoPE, windows, tied head,
 * biases; not max_position_embeddings, except GPT-2's n_positions); every
 * parameter must be present with the model's shape; a tensor that maps to no
 * parameter and is no known buffer is an error too. Each parameter goes to
 * dst as it is read (one parameter's staging buffer, never the whole model). */
tt_err tt_hf_load_weights(const tt_model *m, const char *dir, const tt_param_store *dst);

typedef struct {
    tt_hf_family family;       /* TT_HF_AUTO: the first class that can express the model */
    size_t max_shard_bytes;    /* 0: one model.safetensors; else shards + model.safetensors.index.json */
    int bos_token_id;          /* < 0: none */
    int has_pad, pad_token_id; /* config.json's pad_token_id (-1: null); has_pad 0: not written */
    int n_eos;                 /* eos ids (0 = none) */
    int eos_token_ids[TT_HF_MAX_EOS];
    const char *tokenizer_json;/* a tokenizer.json to copy into the folder, or NULL */
    const tt_hf_files *files;  /* more files (tokenizer_files.h), or NULL; a generation_config.json among them
                                  replaces the one written from the ids */
    tt_dtype dtype;            /* of the weights written: TT_F32, or TT_BF16 (each rounded to nearest even) */
} tt_hf_export_opts;

/* Options with no bos/eos, one file, fp32, family chosen from the model. */
tt_hf_export_opts tt_hf_export_defaults(void);
/* The defaults with a source config.json's ids (bos, eos, pad) and family: what exporting a model read from it
 * writes back */
tt_hf_export_opts tt_hf_export_opts_of(const tt_hf_config *src);

/* Write <dir>/model.safetensors (in o->dtype; sharded past max_shard_bytes) of
 * the weights in src, generation_config.json, tokenizer.json (copied when
 * given), o->files and, last, config.json (its torch_dtype naming o->dtype):
 * a folder with config.json is whole. Creates dir if needed. */
tt_err tt_hf_export(const tt_model *m, const char *dir, const tt_hf_export_opts *o, const tt_param_store *src);

#endif

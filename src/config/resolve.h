/* resolve.h — what a config means below it: the model's architecture, the
 * backend it runs on and its compute dtype. */
#ifndef TT_CONFIG_RESOLVE_H
#define TT_CONFIG_RESOLVE_H
#include "backend/backend.h"
#include "hf/hf_config.h"
#include "models/lora.h"
#include "models/model.h"
#include "titan/config.h"

/* The model's architecture: from model.hf_assets_path's config.json when
 * set, else from the model.* keys. ext and hf may be NULL. */
tt_err tt_model_cfg_from_config(const tt_config *c, tt_model_cfg *out, tt_model_ext *ext, tt_hf_config *hf);
/* The backend a config runs on: ref in debug mode, else training.backend. */
const tt_backend *tt_config_backend(const tt_config *c);
/* The compute dtype of a config (training.mixed_precision_param, resolved). */
tt_dtype tt_config_act_dtype(const tt_config *c);
/* The LoRA adapters a config asks for: the [lora] keys (lora.target_modules comma-separated names or all-linear),
 * or lora.adapter_path's config and tensors (the [lora] keys may not say otherwise; lora.dropout may) */
tt_err tt_config_lora_spec(const tt_config *c, tt_lora_spec *spec);
/* Whether a config trains LoRA adapters (lora.rank > 0, or lora.adapter_path set) */
int tt_config_lora_on(const tt_config *c);
/* The dtype of a LoRA run's frozen linear weights: lora.base_dtype when set, else the compute dtype */
tt_dtype tt_config_lora_base_dtype(const tt_config *c);
#endif

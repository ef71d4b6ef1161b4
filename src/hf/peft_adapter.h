/* peft_adapter.h — PEFT LoRA adapter folders (adapter_config.json and
 * adapter_model.safetensors) in and out for a base model's adapters
 * (models/lora.h): the spec an adapter folder gives, its A and B tensors
 * loaded under PEFT's names with their shapes checked, and a folder written
 * that PeftModel.from_pretrained loads. */
#ifndef TT_PEFT_ADAPTER_H
#define TT_PEFT_ADAPTER_H
#include "models/lora.h"

/* What DIR's adapter gives for base: r, alpha, rsLoRA and dropout from its adapter_config.json, and as targets the
 * modules its tensors adapt (each by its last name: q_proj, ...; tt_peft_adapter_load then checks the file holds
 * exactly those modules' A and B). Errors name the file and the field or tensor. */
tt_err tt_peft_adapter_spec(const char *dir, tt_lora_spec *spec);
/* Every target's A (r, in) and B (out, r) from DIR/adapter_model.safetensors (F32, BF16 or F16) into dst, the
 * adapters' parameters; a target missing from the file, a shape that differs, or a tensor of the file that is no
 * target's is refused by name. */
tt_err tt_peft_adapter_load(const char *dir, const tt_lora *l, const tt_param_store *dst);
/* DIR/adapter_model.safetensors (F32, PEFT's names; written atomically) and DIR/adapter_config.json: the
 * adapters read from src, spec's r, alpha, dropout and rsLoRA, the targets' last names, base_model the base's
 * folder (may be ""), fan_in_fan_out for a base whose linear weights are stored (in, out) (GPT-2's Conv1D). */
tt_err tt_peft_adapter_save(const char *dir, const tt_model *base, const tt_lora *l, const tt_lora_spec *spec,
                            const char *base_model, const tt_param_store *src);
#endif

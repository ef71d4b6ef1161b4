/* peft.h — PEFT's LoRA adapter format: adapter_config.json read (refusing
 * what titan does not honour) and written so PeftModel.from_pretrained loads
 * it, target-module matching as PEFT does it, and PEFT's tensor names. */
#ifndef TT_PEFT_H
#define TT_PEFT_H

#include <stddef.h>

#include "core/core.h"

#define TT_PEFT_MAX_TARGETS 32

typedef struct {
    int r;                 /* > 0 */
    double alpha;          /* lora_alpha (finite) */
    double dropout;        /* lora_dropout, in [0, 1) */
    int use_rslora;
    int fan_in_fan_out;
    int all_linear;        /* target_modules was the string "all-linear" (n_targets is then 0) */
    int n_targets;         /* otherwise the list, in file order, duplicates dropped; a single string other
                              than "all-linear" is a regex to PEFT and refused. A list of more than
                              TT_PEFT_MAX_TARGETS names (PEFT saves "all-linear" as every module's full name)
                              is kept as the set of their last names */
    char targets[TT_PEFT_MAX_TARGETS][64];
    char base_model[1024]; /* base_model_name_or_path ("" when null/absent) */
} tt_peft_config;

/* <dir>/adapter_config.json. Errors name the file, the field and its value:
 * "DIR/adapter_config.json: field 'use_dora' is true: DoRA ... is not supported". */
tt_err tt_peft_config_read(const char *dir, tt_peft_config *out);
/* The same from bytes (need not be NUL-terminated); `what` names the source in errors. */
tt_err tt_peft_config_parse(const char *json, size_t len, const char *what, tt_peft_config *out);

/* adapter_config.json text (malloc'd, free() it) with the keys PEFT writes, sorted as it sorts them:
 * peft_type LORA, task_type CAUSAL_LM, c's fields and every other field PEFT 0.17 writes at its default,
 * so that every PEFT since 0.17 loads it without a warning. NULL + error when c is not a config
 * tt_peft_config_parse could return. */
char *tt_peft_config_to_json(const tt_peft_config *c);
/* That text written to <dir>/adapter_config.json atomically (temp file, fsync, rename); dir is created. */
tt_err tt_peft_config_write(const char *dir, const tt_peft_config *c);

/* PEFT's match of a module's full name ("model.layers.0.self_attn.q_proj") against target_modules: the
 * name equals a target or ends with "." + target. The index of the first matching target, -1 none.
 * With all_linear there is no list and this returns -1: which linears "all-linear" covers (every one
 * but the output layer) is the model's to say. */
int tt_peft_match(const tt_peft_config *c, const char *module);

/* PEFT's saved name of a module's adapter half: "base_model.model." module ".lora_A.weight" (b = 0) or
 * ".lora_B.weight" (b = 1). -1 + error when module is empty or has an empty component, b is not 0/1,
 * or the name does not fit in cap. */
tt_err tt_peft_tensor_name(const char *module, int b, char *out, size_t cap);
/* The reverse: the module name and which half (b: 0 for A, 1 for B). -1 + an error naming the tensor
 * when it is not a LoRA A/B weight in that form (lora_embedding_A/B, DoRA's lora_magnitude_vector,
 * lora_B.bias, a name with the adapter name left in, ...) or the module does not fit in cap. */
tt_err tt_peft_tensor_parse(const char *name, char *module, size_t cap, int *b);

#endif

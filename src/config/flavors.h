/* flavors.h — named model shapes (TorchTitan's "flavors"): the published sizes
 * of Llama 2/3, Qwen2/3 and GPT-2, plus small ones for tests and CPU runs. */
#ifndef TT_FLAVORS_H
#define TT_FLAVORS_H

#include <stddef.h>

#include "titan/config.h"

typedef struct {
    const char *name;      /* unique across all models */
    tt_model_config shape; /* .name is the model; .flavor and .tokenizer unused */
} tt_flavor;

/* The flavor with this name (of any model), or NULL. */
const tt_flavor *tt_flavor_find(const char *name);
/* All flavors, grouped by model; a model's first flavor is its default. */
size_t tt_flavor_count(void);
const tt_flavor *tt_flavor_at(size_t i);
/* The default flavor of a model (its first in the table). */
const tt_flavor *tt_flavor_default(tt_model_name model);
/* "llama", "gpt2" */
const char *tt_model_name_str(tt_model_name model);

#endif

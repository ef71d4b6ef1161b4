/* frozen.h — the frozen base of a LoRA run: the base model's weights in one
 * backend buffer, laid out in their storage dtypes (tt_frozen_layout), never
 * trained, and reached by the host through copies as a parameter store. */
#ifndef TT_FROZEN_H
#define TT_FROZEN_H
#include "backend/backend.h"
#include "models/lora.h"

typedef struct {
    const tt_backend *be;
    tt_queue *q;
    const tt_model *base;
    tt_frozen_layout layout;
    tt_buf *buf;
} tt_frozen_base;

/* The buffer for base's weights, its linear weights in linear_dtype (zeroed). */
tt_err tt_frozen_init(tt_frozen_base *f, const tt_model *base, tt_dtype linear_dtype, const tt_backend *be, tt_queue *q);
void tt_frozen_free(tt_frozen_base *f);
/* Where base unit k's weights start */
tt_mem tt_frozen_unit_mem(const tt_frozen_base *f, int unit);
/* The weights one parameter at a time in fp32: a write rounds a bf16-stored one to nearest even, a read widens it.
 * Points at f: keep it where it is. */
tt_param_store tt_frozen_store(tt_frozen_base *f);
/* A hash of every stored byte (FNV-1a over the downloaded buffer's 8-byte words, unit by unit): what a LoRA checkpoint records
 * of its base, so that a resume on another base is refused. */
tt_err tt_frozen_hash(tt_frozen_base *f, uint64_t *hash);
#endif

/* ckpt_layout.h — a sharded checkpoint's layout, as meta.json's "layout"
 * records it: the shard count, the expert parallel degree, and each bucket's
 * offset, size and padded size, or its pieces with their stride across the
 * expert group. */
#ifndef TT_CKPT_LAYOUT_H
#define TT_CKPT_LAYOUT_H

#include <cjson/cJSON.h>

#include "models/model.h"
#include "train/sharding.h"

/* jo (meta.json's "layout") into out, checked against model m before anything is sized from it: the bucket count
 * bounded by the model's units, the memory it implies checked before allocating, every bucket padded to a multiple
 * of the ranks that slice it, and the pieces of all of them (an expert bucket's at every place of the expert group)
 * covering every parameter exactly once. Errors name where/meta.json and the field. tt_sharding_free releases out. */
tt_err tt_ckpt_layout_read(const cJSON *jo, const tt_model *m, tt_sharding *out, const char *where);
#endif

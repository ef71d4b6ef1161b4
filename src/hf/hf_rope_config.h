/* hf_rope_config.h — RoPE's keys of config.json: rope_theta with rope_scaling (transformers 4) or rope_parameters
 * (5), read into tt_rope_params / tt_rope_ext and written back. */
#ifndef TT_HF_ROPE_CONFIG_H
#define TT_HF_ROPE_CONFIG_H

#include <cjson/cJSON.h>

#include "core/core.h"
#include "models/rope.h"

/* theta: the class default; phi3: Phi-3's partial_rotary_factor (*rot: the features of a head that rotate, of hd)
 * and LongRoPE, which other classes refuse. */
tt_err hf_read_rope(const char *path, const cJSON *j, int max_pos, double theta, int phi3, int hd, int *rot,
                    tt_rope_params *r, tt_rope_ext *x);
/* the rope_scaling dict of r and x (rot features rotated), or null */
cJSON *hf_rope_to_json(const tt_rope_params *r, const tt_rope_ext *x, int rot);

#endif

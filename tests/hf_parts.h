/* hf_parts.h — what test_hf.c and its parts (tests/hf_*.c) share. */
#ifndef TT_TEST_HF_PARTS_H
#define TT_TEST_HF_PARTS_H

#include "models/model.h"

/* Whether two configs are the same model (the keys an export writes and a reload reads) */
int same_cfg(const tt_model_cfg *a, const tt_model_ext *ax, const tt_model_cfg *b, const tt_model_ext *bx);
/* hf_read_config.c: config.json reading and writing */
void test_mlp_only_layers(void);
void test_config(void);

#endif

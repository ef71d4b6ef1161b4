/* mxfp4.h — the MXFP4 expert weights of GPT-OSS checkpoints (config.json's quantization_config, quant_method
 * "mxfp4"), dequantized as transformers does (integrations/mxfp4.py, convert_moe_packed_tensors).
 *
 * A weight W is stored as two tensors: W_blocks (..., R, G, 16) U8, for each row r and group g 32 FP4 (E2M1)
 * values, two a byte, the low nibble first; and W_scales (..., R, G) U8, each group's E8M0 scale 2^(s - 127)
 * (OCP Microscaling). Dequantized, W is (..., G*32, R): each FP4 value times its group's power of two, with the
 * last two axes swapped (GPT-OSS's gate_up_proj (E, D, 2F) from blocks (E, 2F, D/32, 16)). Every such value is exact
 * in fp32 and bf16 while finite. */
#ifndef TT_MXFP4_H
#define TT_MXFP4_H

#include <stdint.h>

#include "core/core.h"
#include "formats/safetensors.h"

/* The dequantized shape of a blocks/scales pair: lead (the product of the leading dims), R rows, G groups, out
 * (ndim and shape of the (..., G*32, R) tensor). An error names file and tensors when the two do not pair: U8
 * both, blocks one dim more than scales ending in 16, the other dims equal. */
tt_err tt_mxfp4_shape(const char *file, const tt_st_tensor *blocks, const tt_st_tensor *scales, int64_t *lead,
                      int64_t *R, int64_t *G, int *ndim, int64_t out_shape[TT_ST_MAX_DIMS]);
/* The pair dequantized into out ((..., G*32, R) elements of dt: TT_F32 or TT_BF16). A scale of 255 (E8M0's NaN)
 * or a value past the dtype's range is an error naming the tensor, its expert row and group. */
tt_err tt_mxfp4_dequant(const char *file, const tt_st_tensor *blocks, const tt_st_tensor *scales, void *out,
                        tt_dtype dt);

#endif

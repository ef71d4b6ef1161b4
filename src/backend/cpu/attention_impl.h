/* attention_impl.h — the attention code paths behind cpu_attention_fwd/bwd
 * (kernels.h): the portable one (attention.c, fp32 tiles through BLAS) and
 * the AVX-512 flash kernels. Private to the attention files. */
#ifndef TT_ATTENTION_IMPL_H
#define TT_ATTENTION_IMPL_H

#include "backend/cpu/kernels.h"

tt_err tt_attention_fwd_portable(const tt_attn *a);
tt_err tt_attention_bwd_portable(const tt_attn *a);
/* 1 when this CPU or call is not theirs (no AVX-512, AVX512_BF16 for bf16,
 * or a head size that is not a multiple of 16): the portable path runs. */
tt_err tt_attention_fwd_avx512(const tt_attn *a);
tt_err tt_attention_bwd_avx512(const tt_attn *a);

#endif

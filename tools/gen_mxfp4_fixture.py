"""gen_mxfp4_fixture.py — the MXFP4 fixture of tests/test_mxfp4.c: a GPT-OSS-style packed expert weight
(<name>_blocks (E, R, G, 16) uint8, <name>_scales (E, R, G) uint8, as the published GPT-OSS checkpoints hold
gate_up_proj and down_proj) and what transformers dequantizes it to, in bf16 (what GPT-OSS loads into) and fp32.

    /path/to/venv/bin/python tools/gen_mxfp4_fixture.py tests/fixtures/mxfp4/experts.safetensors

The reference is transformers' own dequantizer, transformers.integrations.mxfp4.convert_moe_packed_tensors (the
one from_pretrained runs on an MXFP4 folder with Mxfp4Config(dequantize=True)). Its packing side needs GPU kernels
from the Hugging Face hub, so the blocks here are random bytes: every one of the 16 FP4 codes appears in both
nibbles. The scales cover E8M0's whole range where no value overflows: 0 and 1 (2^-127 and 2^-126: subnormal
results), 252 (the largest at which 6 x 2^(s - 127) stays finite in bf16 and fp32), and 100 to 140 elsewhere.
Written with transformers 5.24 and torch 2.15 (CPU).
"""
import sys

import torch
from safetensors.torch import save_file
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

E, R, G = 3, 5, 2  # 3 experts, 5 rows, 2 groups of 32 values: dequantized (3, 64, 5)
gen = torch.Generator().manual_seed(20261203)
blocks = torch.randint(0, 256, (E, R, G, 16), generator=gen, dtype=torch.int32).to(torch.uint8)
blocks[0, 0, 0] = torch.tensor([16 * i + (15 - i) for i in range(16)], dtype=torch.uint8)  # every code, both nibbles
scales = torch.randint(100, 141, (E, R, G), generator=gen, dtype=torch.int32).to(torch.uint8)
scales[0, 1, 0], scales[0, 1, 1], scales[1, 2, 0], scales[2, 4, 1] = 0, 1, 252, 127

want_bf16 = convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=torch.bfloat16)
want_f32 = convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=torch.float32)
assert want_bf16.shape == (E, G * 32, R) and torch.isfinite(want_f32).all()
assert torch.equal(want_bf16.float(), want_f32), "the values are exact in bf16"
save_file({"experts.gate_up_proj_blocks": blocks, "experts.gate_up_proj_scales": scales,
           "want_bf16": want_bf16.contiguous(), "want_f32": want_f32.contiguous()}, sys.argv[1])
print(f"{sys.argv[1]}: blocks {tuple(blocks.shape)}, scales {tuple(scales.shape)}, dequantized {tuple(want_f32.shape)}")

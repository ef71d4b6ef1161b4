#!/usr/bin/env python3
"""lora_check.py — the PEFT side of titan's LoRA tests: does a PEFT adapter
folder (one titan wrote, or a fixture) give the expected loss in PEFT, and
does a merged HF folder give the adapter's logits.

Loads BASE_DIR with transformers (float32, eager attention), applies
PeftModel.from_pretrained(ADAPTER_DIR), runs REF's "input_ids" (int32 (B, T),
each row one document: positions 0..T-1, no padding) and prints the mean
cross-entropy over REF's "labels" (int32 (B, T)), as
tools/gen_lora_fixtures.py computes it.

  --expect-loss X [--rtol R]  exit 1 unless |loss - X| <= R * |X|
  --merged DIR [--atol A]     exit 1 unless AutoModelForCausalLM.from_pretrained(DIR)
                              (float32, any saved dtype) gives the adapter model's
                              logits on input_ids within A, elementwise

    python3 tests/lora_check.py ADAPTER_DIR BASE_DIR REF.safetensors \\
        [--expect-loss X] [--rtol 1e-5] [--merged DIR] [--atol 1e-4]
"""
import argparse
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peft import PeftModel  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notes, from inside PEFT


def load(folder):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def logits_of(model, ids):
    """fp32 logits (B, T, V), positions 0..T-1 in each row, no mask."""
    B, T = ids.shape
    pos = torch.arange(T).unsqueeze(0).expand(B, T)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos).logits.float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("adapter")
    ap.add_argument("base")
    ap.add_argument("ref")
    ap.add_argument("--expect-loss", type=float)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--merged", metavar="DIR")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()

    ref = load_file(a.ref)
    for key in ("input_ids", "labels"):
        if key not in ref or ref[key].ndim != 2:
            sys.exit(f"{a.ref}: no 2-d tensor {key!r}")
    ids, labels = ref["input_ids"].long(), ref["labels"].long()
    if ids.shape != labels.shape:
        sys.exit(f"{a.ref}: input_ids {tuple(ids.shape)} and labels {tuple(labels.shape)} differ in shape")

    model = PeftModel.from_pretrained(load(a.base), a.adapter)
    model.eval()
    logits = logits_of(model, ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).item()
    print(f"loss {loss:.9g}")
    ok = True
    if a.expect_loss is not None:
        err = abs(loss - a.expect_loss)
        good = err <= a.rtol * abs(a.expect_loss)
        print(f"expected loss {a.expect_loss:.9g}: relative error {err / max(abs(a.expect_loss), 1e-30):.3g} "
              f"({'ok' if good else 'MISMATCH'}, rtol {a.rtol:g})")
        ok &= good
    if a.merged:
        diff = (logits_of(load(a.merged), ids) - logits).abs().max().item()
        good = diff <= a.atol
        print(f"merged {a.merged}: max |logit difference| {diff:.3g} ({'ok' if good else 'MISMATCH'}, atol {a.atol:g})")
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""hf_roundtrip.py — the cross-check of titan's Hugging Face export: every
folder test_hf wrote (EXPORT_ROOT/export-<name>) must load in
transformers.AutoModelForCausalLM with no missing, unexpected or mismatched
weights, and give the reference logits of tests/fixtures/hf/<name>.logits.safetensors
(fp32, eager attention) to 1e-4.

    python3 tests/hf_roundtrip.py EXPORT_ROOT FIXTURES_DIR
"""
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

REFS = {"tiny-gpt2": "tiny-random-gpt2"}  # export name -> reference name, where they differ


def check(folder, ref_path):
    model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    model.eval()
    problems = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                                     "mismatched_keys", "error_msgs")]
    ref = load_file(ref_path)
    worst = 0.0
    with torch.no_grad():
        k = 0
        while f"ids.{k}" in ref:
            ids = ref[f"ids.{k}"].long()[None]
            got = model(input_ids=ids).logits[0].float()
            worst = max(worst, (got - ref[f"logits.{k}"]).abs().max().item())
            k += 1
    return worst, problems


def main():
    root, fixtures = sys.argv[1], sys.argv[2]
    passed = failed = 0
    for entry in sorted(os.listdir(root)):
        if not entry.startswith("export-"):
            continue
        name = entry[len("export-"):]
        ref = os.path.join(fixtures, REFS.get(name, name) + ".logits.safetensors")
        if not os.path.exists(ref):
            continue
        try:
            worst, problems = check(os.path.join(root, entry), ref)
        except Exception as e:  # a folder transformers cannot load is a failure, with its reason
            worst, problems = float("inf"), [repr(e)]
        ok = worst <= 1e-4 and not problems
        print(f"{name:18s} transformers on titan's export: max |diff| {worst:.2e} {'ok' if ok else 'FAIL'} "
              + "; ".join(problems))
        passed += ok
        failed += not ok
    print(f"hf_roundtrip: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

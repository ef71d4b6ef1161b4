#!/usr/bin/env python3
"""hf_roundtrip.py — the cross-check of titan's Hugging Face export: every
folder test_hf wrote (EXPORT_ROOT/export-<name>) must load in
transformers.AutoModelForCausalLM with no missing, unexpected or mismatched
weights, and give the reference logits of tests/fixtures/hf/<name>.logits.safetensors
(fp32, eager attention) to 1e-4. A bf16 export (export-<name>-bf16, written
by test_hf_dtype) must say bfloat16 in config.json, load as bfloat16 with
dtype="auto", and hold, loaded in fp32, torch's bf16 rounding of the source
folder's weights bit for bit (test_hf_dtype checks titan's rounding by its own
reference; this is torch's).

    python3 tests/hf_roundtrip.py EXPORT_ROOT FIXTURES_DIR
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

# export name -> reference name, where they differ (gemma3_vlm: the gemma3 fixture's language model with a vision
# tower, exported as Gemma3ForCausalLM)
REFS = {"tiny-gpt2": "tiny-random-gpt2", "gemma3_vlm": "gemma3"}


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


def check_bf16(folder, source):
    """Problems of a bf16 export against its source folder (empty: none)."""
    cfg = json.load(open(os.path.join(folder, "config.json")))
    problems = [] if cfg.get("torch_dtype", cfg.get("dtype")) == "bfloat16" else [f"config.json dtype {cfg}"]
    auto = AutoModelForCausalLM.from_pretrained(folder, dtype="auto")
    if auto.dtype != torch.bfloat16:
        problems.append(f"dtype auto loads {auto.dtype}")
    got, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    problems += [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                                      "mismatched_keys", "error_msgs")]
    want = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).state_dict()
    have = got.state_dict()
    if set(want) != set(have):
        problems.append(f"tensors differ: {sorted(set(want) ^ set(have))[:4]}")
    for name in sorted(set(want) & set(have)):
        if not want[name].is_floating_point():  # a buffer the class makes (GPT-2's mask), not a weight
            continue
        rounded = want[name].to(torch.bfloat16).float()
        if rounded.shape != have[name].shape:
            problems.append(f"{name}: shape {tuple(have[name].shape)}, the source's {tuple(rounded.shape)}")
        elif not torch.equal(rounded, have[name]):
            problems.append(f"{name}: {(rounded != have[name]).sum().item()} values are not torch's bf16 rounding")
    return problems


def main():
    root, fixtures = sys.argv[1], sys.argv[2]
    passed = failed = 0
    for entry in sorted(os.listdir(root)):
        if not entry.startswith("export-"):
            continue
        name = entry[len("export-"):]
        if name.endswith("-bf16"):
            try:
                problems = check_bf16(os.path.join(root, entry), os.path.join(fixtures, name[:-len("-bf16")]))
            except Exception as e:  # a folder transformers cannot load is a failure, with its reason
                problems = [repr(e)]
            print(f"{name:18s} transformers on titan's bf16 export: {'ok' if not problems else 'FAIL'} "
                  + "; ".join(problems))
            passed += not problems
            failed += bool(problems)
            continue
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

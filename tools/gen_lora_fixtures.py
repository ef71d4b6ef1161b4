#!/usr/bin/env python3
"""gen_lora_fixtures.py — PEFT LoRA adapters on the tiny HF fixtures and what
PEFT computes with them, for titan's LoRA (loss, adapter gradients, merged
export) to be checked against.

For each base NAME in LORA (tests/fixtures/hf/NAME, made by
tools/gen_hf_fixtures.py, loaded by transformers in float32 with eager
attention) it writes:

  tests/fixtures/lora/NAME/   PEFT's save_pretrained of a LoRA adapter:
      adapter_model.safetensors (float32 lora_A (r, in) and lora_B (out, r),
      named base_model.model.<module>.lora_{A,B}.weight) and
      adapter_config.json (base_model_name_or_path "tests/fixtures/hf/NAME").
      r 4, lora_alpha 8, dropout 0, bias "none"; target_modules "all-linear"
      (every nn.Linear but the head) for the dense models, the attention
      projections for qwen3_moe and gpt_oss; qwen2 uses use_rslora (scale 8 / sqrt(4) = 4,
      the others 8 / 4 = 2). A is PEFT's init (Kaiming-uniform) after
      torch.manual_seed(SEED + index); B is then drawn normal(0, 0.02), so the
      adapter changes the logits.
  tests/fixtures/lora/NAME.ref.safetensors:
      input_ids  int32 (2, 8)   two random 9-token sequences s, s[:, :-1]
      labels     int32 (2, 8)   s[:, 1:]; each row is one document: positions
                                0..7, no padding (attention mask all ones)
      loss       f32 (1,)       mean cross-entropy over the 16 labels of the
                                adapted model's fp32 logits
      logits     f32 (2, 8, V)  the adapted model's logits on input_ids
      grad.<adapter tensor name>  f32, shaped as the tensor: d loss / d tensor
                                for every tensor of adapter_model.safetensors
      grad_norm  f32 (1,)       global L2 norm of all those gradients
      merged.<HF name>  f32     every weight merge_and_unload() changed (the
                                targeted linears' weights, named as in the
                                base's model.safetensors), base and adapter in
                                float32
      merged_bf16.<HF name>  bf16  the same merge with the base cast to
                                bfloat16 before the adapter is loaded. PEFT
                                keeps the adapter in float32 then
                                (autocast_adapter_dtype) and adds its delta in
                                place: bf16(float(W_bf16) + s * (B @ A)), which
                                this script asserts.
  The file's one metadata key "made_by" names the versions and the scale.

For qwen3_moe and gpt_oss, top-k routing is discontinuous: every MoE layer's sorted router
softmax scores on input_ids under the adapter must be ROUTER_MARGIN apart
(tools/gen_hf_fixtures.py's test), else the adapter is drawn again with the
next seed; the seed used is printed.

Made with torch 2.15.0, transformers 5.24.0, peft 0.21.2, safetensors 0.8.0:

    pip install torch transformers==5.24.0 peft==0.21.2 safetensors
    python3 tools/gen_lora_fixtures.py [--hf tests/fixtures/hf] [--out tests/fixtures/lora]
                                       [--only NAME[,NAME...]]
"""
import argparse
import json
import math
import os
import shutil
import sys
import warnings

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import peft  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_hf_fixtures import ROUTER_MARGIN, load, router_margins  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notes, from inside PEFT

R, ALPHA = 4, 8
SEED = 1900  # + the fixture's index in LORA
B_STD = 0.02
BATCH, SEQ = 2, 8
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
# name: (target_modules, use_rslora)
LORA = {
    "llama": ("all-linear", False),
    "qwen2": ("all-linear", True),
    "qwen3": ("all-linear", False),
    "mistral": ("all-linear", False),
    "qwen3_moe": (ATTENTION, False),
    "gpt2": ("all-linear", False),
    "phi3": ("all-linear", False),  # one adapter for qkv_proj's q, k and v, one for gate_up_proj's gate and up
    "gemma3": ("all-linear", False),  # (1 + w) norms in the frozen base, GeGLU, a RoPE base per layer type
    "gemma2": ("all-linear", False),  # soft-capped scores and logits
    "gpt_oss": (ATTENTION, False),  # sinks, biased projections; its experts (packed tensors) take no adapters
}
# Conv1D modules (GPT-2's), whose weights are stored (in, out): PEFT's fan_in_fan_out, and one adapter for c_attn's
# q, k and v together
FAN_IN_FAN_OUT = {"gpt2"}


def forward(model, ids):
    """Logits (B, T, V) in fp32, each row one document: positions 0..T-1, no mask."""
    B, T = ids.shape
    pos = torch.arange(T).unsqueeze(0).expand(B, T)
    return model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos).logits.float()


def cross_entropy(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def build_adapter(name, base, index, folder, ids):
    """get_peft_model with LORA[name] on a fresh load of base, B redrawn;
    for MoE bases, the seed is bumped until the adapted model's routing on
    ids has no near-tie. Returns the PeftModel (float32)."""
    targets, rslora = LORA[name]
    seed = SEED + index
    while True:
        torch.manual_seed(seed)
        cfg = LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0, bias="none", target_modules=targets,
                         use_rslora=rslora, fan_in_fan_out=name in FAN_IN_FAN_OUT, task_type="CAUSAL_LM")
        model = get_peft_model(load(folder), cfg)
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if ".lora_B." in pname:
                    p.normal_(0.0, B_STD)
        margins = router_margins(model, [ids])
        if not margins or min(margins.values()) > ROUTER_MARGIN:
            break
        print(f"{name}: adapter seed {seed} has a router near-tie ({min(margins.values()):.4g}), trying the next")
        seed += 1
    print(f"{name}: adapter seed {seed}" + (f", smallest router margin {min(margins.values()):.4g}" if margins else ""))
    model.peft_config["default"].base_model_name_or_path = base
    # PEFT writes "all-linear" expanded to the module paths, from a set: sorted, the file is reproducible
    model.peft_config["default"].target_modules = sorted(model.peft_config["default"].target_modules)
    return model


def merged_weights(folder, adapter, dtype):
    """{HF name: tensor} of every weight that PEFT's merge_and_unload of adapter
    changes, base loaded in float32 then cast to dtype; also the base's."""
    base = load(folder).to(dtype)
    before = {k: v.clone() for k, v in base.state_dict().items()}
    merged = PeftModel.from_pretrained(base, adapter).merge_and_unload().state_dict()
    assert set(merged) == set(before), set(merged) ^ set(before)
    return {k: v for k, v in merged.items() if not torch.equal(v, before[k])}, before


def main():
    ap = argparse.ArgumentParser()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    ap.add_argument("--hf", default=os.path.join(root, "tests", "fixtures", "hf"))
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "lora"))
    ap.add_argument("--only", metavar="NAME[,NAME...]", help="write just these fixtures")
    a = ap.parse_args()
    only = set(LORA) if a.only is None else set(a.only.split(","))
    if only - set(LORA):
        ap.error(f"unknown fixture(s) {', '.join(sorted(only - set(LORA)))}; known: {', '.join(LORA)}")
    os.makedirs(a.out, exist_ok=True)
    for index, name in enumerate(LORA):  # seeds follow the order, selected or not
        if name not in only:
            continue
        folder = os.path.join(a.hf, name)
        adapter = os.path.join(a.out, name)
        vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
        g = torch.Generator().manual_seed(SEED + 100 + index)
        s = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=g)
        ids, labels = s[:, :-1].contiguous(), s[:, 1:].contiguous()

        model = build_adapter(name, f"tests/fixtures/hf/{name}", index, folder, ids)
        shutil.rmtree(adapter, ignore_errors=True)
        model.save_pretrained(adapter)
        os.remove(os.path.join(adapter, "README.md"))  # PEFT's model card: not needed, and dated
        saved = load_file(os.path.join(adapter, "adapter_model.safetensors"))

        model.zero_grad()
        logits = forward(model, ids)
        loss = cross_entropy(logits, labels)
        loss.backward()
        grads = {k: p.grad for k, p in model.named_parameters() if p.requires_grad}
        assert all(".lora_" in k for k in grads) and all(g is not None for g in grads.values()), list(grads)
        grads = get_peft_model_state_dict(model, state_dict=grads)  # the names as saved
        assert set(grads) == set(saved), set(grads) ^ set(saved)
        grad_norm = math.sqrt(sum(g.double().pow(2).sum().item() for g in grads.values()))

        # the saved folder gives the same model; the adapter changes the base's logits
        with torch.no_grad():
            base_logits = forward(load(folder), ids)
            reloaded = forward(PeftModel.from_pretrained(load(folder), adapter), ids)
        assert torch.equal(reloaded, logits.detach()), (reloaded - logits).abs().max()
        assert (base_logits - logits).abs().max() > 1e-3

        # merges: the changed weights are exactly the targeted linears' (saved name minus the
        # prefix and .lora_A), and the merged model's logits are the adapter's
        targeted = {k[len("base_model.model."):-len(".lora_A.weight")] + ".weight" for k in saved if ".lora_A." in k}
        merged, base32 = merged_weights(folder, adapter, torch.float32)
        assert set(merged) == targeted, set(merged) ^ targeted
        merged16, base16 = merged_weights(folder, adapter, torch.bfloat16)
        assert set(merged16) == targeted, set(merged16) ^ targeted
        scale = ALPHA / (math.sqrt(R) if LORA[name][1] else R)
        for k, w in merged16.items():
            mod = "base_model.model." + k[:-len(".weight")]
            delta = saved[mod + ".lora_B.weight"] @ saved[mod + ".lora_A.weight"] * scale
            if name in FAN_IN_FAN_OUT:
                delta = delta.T  # the weight is (in, out)
            assert torch.equal(w, (base16[k].float() + delta).to(torch.bfloat16)), k
            assert (merged[k] - (base32[k] + delta)).abs().max() < 1e-6, k
        m = load(folder)
        m.load_state_dict({**base32, **merged})
        with torch.no_grad():
            diff = (forward(m, ids) - logits).abs().max().item()
        assert diff < 1e-4, diff

        out = {"input_ids": ids.to(torch.int32), "labels": labels.to(torch.int32),
               "loss": loss.detach().reshape(1), "logits": logits.detach().contiguous(),
               "grad_norm": torch.tensor([grad_norm], dtype=torch.float32)}
        out.update({"grad." + k: g.float().contiguous() for k, g in grads.items()})
        out.update({"merged." + k: w.contiguous() for k, w in merged.items()})
        out.update({"merged_bf16." + k: w.contiguous() for k, w in merged16.items()})
        path = os.path.join(a.out, name + ".ref.safetensors")
        # one metadata key: safetensors writes several in a random order, and the files should be reproducible
        save_file(out, path, metadata={"made_by": f"peft {peft.__version__}, transformers {transformers.__version__}, "
                                                  f"torch {torch.__version__}; r {R}, lora_alpha {ALPHA}, scale {scale:g}"})
        print(f"{path}: loss {loss.item():.6f}, grad_norm {grad_norm:.6g}, {len(grads)} adapter tensors, "
              f"{len(merged)} merged weights, merged vs adapter logits {diff:.2g}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""gen_hf_fixtures.py — tiny random Hugging Face models and their reference
logits for tests/test_hf.c (titan's loader must match transformers to 1e-4).

Writes tests/fixtures/hf/<name>/ (save_pretrained, safetensors; llama, qwen2
and gpt2 also get the matching fixture tokenizer.json, and the MoE fixtures
the llama one, for the fine-tuning test tests/cli_hf_finetune.sh, generate
and eval) and
tests/fixtures/hf/<name>.logits.safetensors (int32 "ids.K" and float32
"logits.K" of shape (T, V) for a few token sequences; for the GREEDY ones also
the last sequence's loss and its greedy continuation by generate()), computed by
transformers in float32 with eager attention from the saved folder itself.
With --shared DIR it also writes the reference logits (only) of the published
tiny GPT-2 in DIR/fixtures/hf/tiny-random-gpt2.

Mixture-of-Experts fixtures (qwen3_moe, mixtral, qwen2_moe, olmoe) are saved
the way save_pretrained writes them by default (transformers 5 reverts its
in-memory packed experts to the checkpoints' per-expert tensors,
...mlp.experts.E.{gate,up,down}_proj.weight, Mixtral's
...block_sparse_moe.experts.E.w{1,2,3}.weight); qwen3_moe_packed is the same
model saved with save_original_format=False, i.e. packed
...mlp.experts.gate_up_proj (E, 2I, H; rows [:I] gate, [I:] up) and
...mlp.experts.down_proj (E, H, I), with the same reference logits.
Top-k routing is discontinuous, so a router near-tie would make the expected
logits hinge on float rounding: after randomizing, every reference sequence is
run through the saved model and, for every token at every MoE layer, the
softmax router scores sorted in decreasing order must satisfy
p[j] - p[j+1] > ROUTER_MARGIN for j = 1..k (k = experts per token), which
covers the k-th chosen expert against the first one left out. Otherwise the
weights are drawn again with seed + 1, seed + 2, ...; the seed used and the
smallest margin are printed.

deepseek_v3 (DeepSeek-V3: Multi-head Latent Attention with q/kv LoRA ranks,
v_head_dim != qk head dim, interleaved YaRN RoPE with mscale, layer 0 dense,
layer 1 MoE with sigmoid group-limited routing, a score-correction bias and a
shared expert) routes differently, and its near-tie check follows its
selection: scores = sigmoid(logits), choice = scores + e_score_correction_bias,
group score = sum of the top 2 choices in each of n_group groups, the best
topk_group groups kept, top-k of the choices among their experts. For every
token at every MoE layer the k-th chosen choice must beat the best kept one
left out, and the topk_group-th group score the next group's, by more than
ROUTER_MARGIN. Its model.safetensors also carries a fake Multi-Token-Prediction
module as layer num_hidden_layers (model.layers.2.*, a few tensors of the
shapes DeepSeek-V3's layer 61 has; config num_nextn_predict_layers = 1), which
loaders must skip: transformers reports them as unexpected keys and ignores them.

gpt_oss (GPT-OSS: attention sinks, biased router and experts, the clamped SwiGLU; its experts packed (E, in,
out) with gate and up columns interleaved, as save_pretrained writes them) is an MoE fixture like the others;
gpt_oss_mxfp4 is another GPT-OSS model whose experts are MXFP4 (see gpt_oss_mxfp4 below).

    pip install torch transformers safetensors
    python3 tools/gen_hf_fixtures.py [--out tests/fixtures/hf] [--shared ../shared]
                                     [--only NAME[,NAME...]]

--only regenerates just the named fixtures (names of FIXTURES or PACKED,
rope_cases, tiny-random-gpt2) and leaves every other file alone.
"""
import argparse
import json
import os
import re
import shutil
import tempfile

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, DeepseekV3Config, DeepseekV3ForCausalLM, Gemma2Config,
                          Gemma2ForCausalLM, Gemma3ForCausalLM, GptOssConfig, GptOssForCausalLM,
                          Gemma3TextConfig, GPT2Config, GPT2LMHeadModel, GraniteConfig, GraniteForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, MixtralConfig, MixtralForCausalLM, Olmo2Config, Olmo2ForCausalLM,
                          OlmoeConfig, OlmoeForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM,
                          SmolLM3Config, SmolLM3ForCausalLM)

SEQ_LENS = (1, 7, 13)  # 13 > every sliding window below, so the windows matter
ROUTER_MARGIN = 1e-3  # least gap between sorted router softmax scores, ranks 1..k+1 (see above)
# router weights: ROUTER_STD / sqrt(hidden), logits of std ~2. Much larger makes the softmax so peaked that
# the scores left after the first are all tiny and close together, and near-ties get more frequent again
ROUTER_STD = 2.0


def randomize(model, seed):
    """HF initialises norms to 1 and biases to 0, which would hide a wrong
    mapping of those tensors: give every parameter distinct values of a size
    that keeps activations O(1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("norm" in name or "ln_" in name):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith(".self_attn.sinks"):  # GPT-OSS: logits of the scores' size, so that they matter
                p.copy_(torch.randn(p.shape, generator=g))
            elif p.ndim == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                # GPT-2's Conv1D is (in, out); embeddings (V, D) feed a norm and, when tied, the logits;
                # packed experts are (E, out, in)
                # GPT-OSS's experts are (E, in, out)
                fan_in = p.shape[0] if "transformer.h." in name else p.shape[-1]
                if re.search(r"\.mlp\.experts\.(gate_up|down)_proj$", name) and isinstance(model, GptOssForCausalLM):
                    fan_in = p.shape[-2]
                std = fan_in ** -0.5
                if name.endswith((".mlp.gate.weight", ".mlp.router.weight")):  # MoE router (E, H)
                    std *= ROUTER_STD
                p.copy_(std * torch.randn(p.shape, generator=g))
        # DeepSeek-V3's router selection bias is a buffer, zero by default: make it matter
        for name, b in model.named_buffers():
            if name.endswith(".e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))


def reference_ids(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (1, T), generator=g) for T in SEQ_LENS]


def load(folder):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def deepseek_margins(module, logits):
    """DeepSeek-V3's selection (DeepseekV3TopkRouter) redone from its router
    logits (T, E): the least gap between the k-th chosen choice value and the
    best one left out among the kept groups' experts, and between the
    topk_group-th group score and the next one."""
    scores = logits.float().sigmoid()
    choice = scores + module.e_score_correction_bias.float()
    T, E, G = choice.shape[0], choice.shape[1], module.num_group
    group = choice.view(T, G, E // G).topk(2, dim=-1).values.sum(dim=-1)
    gs = group.sort(dim=-1, descending=True).values
    group_margin = (gs[:, module.topk_group - 1] - gs[:, module.topk_group]).min().item()
    kept = torch.zeros_like(group, dtype=torch.bool)
    kept.scatter_(1, group.topk(module.topk_group, dim=-1).indices, True)
    kept = kept.unsqueeze(-1).expand(T, G, E // G).reshape(T, E)
    cs = choice.masked_fill(~kept, float("-inf")).sort(dim=-1, descending=True).values
    k = module.top_k
    return (cs[:, k - 1] - cs[:, k]).min().item(), group_margin


def router_margins(model, ids_list):
    """Over every token of ids_list at every MoE layer: {"router": smallest gap
    p[j] - p[j+1], j = 1..k, between the sorted router softmax scores}, or for
    DeepSeek-V3 routers {"expert": ..., "group": ...} (deepseek_margins);
    {} without a router."""
    margins = {}

    def keep(key, value):
        margins[key] = min(margins.get(key, value), value)

    def hook(module, args, out):
        if hasattr(module, "e_score_correction_bias"):
            expert, group = deepseek_margins(module, out[0])
            keep("expert", expert)
            keep("group", group)
            return
        probs = torch.softmax(out[0].float(), dim=-1).sort(dim=-1, descending=True).values
        k = module.top_k
        keep("router", (probs[:, :k] - probs[:, 1:k + 1]).min().item())

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if type(m).__name__.endswith(("TopKRouter", "DeepseekV3TopkRouter"))]
    with torch.no_grad():
        for ids in ids_list:
            model(input_ids=ids)
    for h in handles:
        h.remove()
    return margins


def reference(folder, vocab, seed, out_path, greedy=False):
    model = load(folder)
    tensors = {}
    with torch.no_grad():
        for k, ids in enumerate(reference_ids(vocab, seed)):
            logits = model(input_ids=ids).logits[0].float().contiguous()
            tensors[f"ids.{k}"] = ids[0].to(torch.int32).contiguous()
            tensors[f"logits.{k}"] = logits
        if greedy:  # the last sequence's loss, and its greedy continuation through the KV cache, up to an end id
            tensors["loss"] = model(input_ids=ids, labels=ids).loss.float().reshape(1).contiguous()
            prompt = ids
            # titan samples only ids its tokenizer has (the vocabulary may be padded past them): so does this
            tok = os.path.join(folder, "tokenizer.json")
            real = tokenizer_vocab(tok) if os.path.exists(tok) else vocab
            out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8,
                                 do_sample=False, suppress_tokens=list(range(real, vocab)) or None)
            tensors["greedy.prompt"] = prompt[0].to(torch.int32).contiguous()
            tensors["greedy.ids"] = out[0, prompt.shape[1]:].to(torch.int32).contiguous()
    # one metadata key: safetensors writes several in a random order, and the files should be reproducible
    save_file(tensors, out_path, metadata={"made_by": f"transformers {transformers.__version__}, torch {torch.__version__}"})
    print(f"{out_path}: {len(SEQ_LENS)} sequences, max |logit| {max(t.abs().max().item() for n, t in tensors.items() if n.startswith('logits')):.3f}")


# the MoE fixtures' vocabulary, special tokens and tied embeddings: those of the llama fixture's tokenizer
MOE_TOKENS = dict(vocab_size=640, bos_token_id=603, eos_token_id=[604, 609], tie_word_embeddings=True)

FIXTURES = {
    # Llama 3.1 style: GQA, llama3 RoPE scaling with wavelengths on both sides of the band
    # vocabulary padded past its tokenizer's 610 ids; bos / eos are <|begin_of_text|>, <|end_of_text|> + <|eot_id|>
    "llama": (LlamaForCausalLM, LlamaConfig(
        vocab_size=640, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64},
        tie_word_embeddings=False, bos_token_id=603, eos_token_id=[604, 609])),
    # attention_bias + mlp_bias, linear RoPE, tied embeddings; saved in bf16
    "llama_bias_bf16": (LlamaForCausalLM, LlamaConfig(
        vocab_size=160, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
        num_key_value_heads=3, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=10000.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0}, attention_bias=True, mlp_bias=True,
        tie_word_embeddings=True)),
    "mistral": (MistralForCausalLM, MistralConfig(
        vocab_size=200, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, max_position_embeddings=256, sliding_window=4, rope_theta=10000.0)),
    # q/k/v bias; YaRN RoPE; sliding window on layer 1 only (max_window_layers = 1);
    # 640 rows for the tokenizer's 603 ids; bos = eos = <|endoftext|> as in the Qwen2 base models
    "qwen2": (Qwen2ForCausalLM, Qwen2Config(
        vocab_size=640, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rope_theta=10000.0,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
        use_sliding_window=True, sliding_window=5, max_window_layers=1, tie_word_embeddings=False,
        bos_token_id=600, eos_token_id=600)),
    # q/k norm, head_dim 24 != 64 / 4; tied; YaRN with explicit betas; sharded files
    "qwen3": (Qwen3ForCausalLM, Qwen3Config(
        vocab_size=192, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=24, max_position_embeddings=64, rope_theta=1000000.0,
        rope_scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32,
                      "beta_fast": 16.0, "beta_slow": 2.0, "attention_factor": 1.1},
        tie_word_embeddings=True)),
    # 640 rows for the tokenizer's 600 ids; <|endoftext|> (id 0) is bos and eos
    "gpt2": (GPT2LMHeadModel, GPT2Config(
        vocab_size=640, n_embd=48, n_layer=2, n_head=4, n_inner=None, n_positions=64,
        bos_token_id=0, eos_token_id=0)),
    # Mixture of Experts, every layer sparse, 4 experts, top 2. Each has the llama fixture's tokenizer
    # (MOE_TOKENS: 640 rows for its 610 ids, its bos / eos) and ties its embeddings, which keeps each file
    # under 250 KB. Qwen3-MoE: q/k norm, head_dim 12 != 32 / 4, top-k scores renormalised
    "qwen3_moe": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        **MOE_TOKENS, hidden_size=32, intermediate_size=64, moe_intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=12, num_experts=4, num_experts_per_tok=2,
        norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=128,
        rms_norm_eps=1e-6, rope_theta=10000.0)),
    # Mixtral: block_sparse_moe.experts.E.w1/w2/w3 in the checkpoint, top-k always renormalised
    "mixtral": (MixtralForCausalLM, MixtralConfig(
        **MOE_TOKENS, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
        rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None)),
    # Qwen2-MoE: q/k/v bias, raw top-k softmax scores, sigmoid-gated shared expert
    "qwen2_moe": (Qwen2MoeForCausalLM, Qwen2MoeConfig(
        **MOE_TOKENS, hidden_size=32, intermediate_size=64, moe_intermediate_size=24,
        shared_expert_intermediate_size=40, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[],
        qkv_bias=True, use_sliding_window=False, max_position_embeddings=128, rms_norm_eps=1e-6,
        rope_theta=10000.0)),
    # OLMoE: q/k norm over the whole projection (width heads * head_dim), raw top-k softmax scores
    "olmoe": (OlmoeForCausalLM, OlmoeConfig(
        **MOE_TOKENS, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, clip_qkv=None,
        max_position_embeddings=128, rms_norm_eps=1e-5, rope_theta=10000.0, pad_token_id=None)),
    # DeepSeek-V3: MLA (q via q_a_proj -> q_a_layernorm -> q_b_proj; kv_a_proj_with_mqa -> 16 latent + 4 shared
    # rope dims; kv_b_proj -> per head 8 k_nope + 6 v, v_head_dim 6 != qk head dim 12), interleaved YaRN RoPE
    # whose mscale_all_dim also scales the softmax; layer 0 dense (first_k_dense_replace 1), layer 1 MoE:
    # sigmoid router + e_score_correction_bias, 8 experts in 4 groups, best 2 groups, top 2, renormalised,
    # times routed_scaling_factor, plus a shared expert. Tied embeddings (the class honours them)
    "deepseek_v3": (DeepseekV3ForCausalLM, DeepseekV3Config(
        **MOE_TOKENS, hidden_size=32, intermediate_size=40, moe_intermediate_size=16, num_hidden_layers=2,
        first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=16,
        qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6, n_routed_experts=8, num_experts_per_tok=2,
        n_group=4, topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True, n_shared_experts=1,
        max_position_embeddings=128, rms_norm_eps=1e-6, rope_interleave=True, num_nextn_predict_layers=1,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1,
                         "mscale": 1.0, "mscale_all_dim": 1.0})),
    # The dense families people fine-tune on small machines, each with the llama fixture's tokenizer.
    # OLMo 2: no norm before a branch, an RMSNorm on each branch's output before the residual add, q/k norms over
    # the whole projection; untied head
    "olmo2": (Olmo2ForCausalLM, Olmo2Config(
        **{**MOE_TOKENS, "tie_word_embeddings": False}, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6,
        rope_theta=500000.0, pad_token_id=None)),
    # SmolLM3: RoPE only on the layers no_rope_layers marks 1 (here layers 0 and 2); a sliding window on the
    # layer without RoPE (use_sliding_window, so layer_types says sliding_attention there); tied
    "smollm3": (SmolLM3ForCausalLM, SmolLM3Config(
        **MOE_TOKENS, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=2000000.0,
        no_rope_layers=[1, 0, 1], use_sliding_window=True, sliding_window=5, pad_token_id=None)),
    # Granite 3: the embeddings times embedding_multiplier, each branch times residual_multiplier before its add,
    # attention scores times attention_multiplier (not 1/sqrt(head_dim)), logits divided by logits_scaling; tied
    "granite": (GraniteForCausalLM, GraniteConfig(
        **MOE_TOKENS, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=10000.0,
        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.05, logits_scaling=4.0,
        pad_token_id=None)),
    # Phi-3 / Phi-4-mini: q, k, v in one qkv_proj and gate, up in one gate_up_proj; partial rotary (0.75 of each
    # 16-feature head: 12 rotate); LongRoPE whose original context, 8, lies inside the reference sequences (1 and
    # 7 tokens take the short factors, 13 the long ones); untied
    "phi3": (Phi3ForCausalLM, Phi3Config(
        **{**MOE_TOKENS, "tie_word_embeddings": False}, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        original_max_position_embeddings=8, rms_norm_eps=1e-5, pad_token_id=None, sliding_window=None,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                         "original_max_position_embeddings": 8,
                         "short_factor": [1.0, 1.05, 1.2, 1.5, 2.0, 3.0],
                         "long_factor": [1.0, 1.5, 2.5, 4.0, 8.0, 16.0]})),
    # Gemma 3 (text): RMSNorms of (1 + w) before and after each branch and on q and k per head, GeGLU, the
    # embeddings times sqrt(64), scores times query_pre_attn_scalar^-1/2 (24, not head_dim 16); windows of 5 on the
    # sliding layers, which turn by RoPE base 10000, the full layer by 1e6 with linear scaling 4; tied
    "gemma3": (Gemma3ForCausalLM, Gemma3TextConfig(
        **MOE_TOKENS, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, max_position_embeddings=128,
        rms_norm_eps=1e-6, sliding_window=5,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        pad_token_id=None)),
    # Gemma 2: Gemma 3's block without q/k norms and with one RoPE; the scores soft-capped at 2 and the logits at
    # 5 (the real 50 and 30 would barely bend a tiny model's values; these do); windows of 5 on every other layer
    # from the first, as the class makes them when layer_types is absent; tied
    "gemma2": (Gemma2ForCausalLM, Gemma2Config(
        **MOE_TOKENS, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24, max_position_embeddings=128,
        rms_norm_eps=1e-6, sliding_window=5, attn_logit_softcapping=2.0, final_logit_softcapping=5.0,
        pad_token_id=None)),
    # GPT-OSS: attention sinks; q/k/v/o biases; sliding windows of 4 on the even layers (the class's default
    # layer_types); YaRN (the class's: factor 32, beta 32 / 1, not truncated); 4 experts, top 2, with biases, a
    # biased router and the clamped SwiGLU, its limit 1.0 (the real 7 would hardly clamp a tiny model's values;
    # this does), alpha the real 1.702
    "gpt_oss": (GptOssForCausalLM, GptOssConfig(
        **MOE_TOKENS, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=4,
        max_position_embeddings=128, rms_norm_eps=1e-5, swiglu_limit=1.0, pad_token_id=None)),
}

# fixtures whose reference file also holds the last sequence's loss ("loss", the mean cross-entropy of each
# position against the next id) and its greedy continuation ("greedy.prompt", "greedy.ids": the new ids, an end id
# last when one stopped it; ids past the tokenizer's, padding, suppressed as titan never samples them), for titan's
# training loss and KV-cache generation to match
GREEDY = {"olmo2", "smollm3", "granite", "phi3", "gemma3", "gemma2", "gpt_oss"}

# the same model as FIXTURES[base] saved with its experts packed (save_original_format=False)
PACKED = {"qwen3_moe_packed": "qwen3_moe"}


# The fixture tokenizers (tests/fixtures/tokenizers/<name>/tokenizer.json, made
# by tools/gen_tokenizer_fixtures.py) copied into the model folders, so that
# `titan prepare --hf`, training and `titan generate --hf` work on them
# (tests/cli_hf_finetune.sh). The model's vocabulary must cover the tokenizer's.
TOKENIZERS = {"llama": "llama3", "qwen2": "qwen2", "gpt2": "gpt2",
              "qwen3_moe": "llama3", "mixtral": "llama3", "qwen2_moe": "llama3", "olmoe": "llama3",
              "deepseek_v3": "llama3", "olmo2": "llama3", "smollm3": "llama3", "granite": "llama3",
              "phi3": "llama3", "gemma3": "llama3", "gemma2": "llama3", "gpt_oss": "llama3"}


def mtp_shapes(cfg):
    """A few tensors of DeepSeek-V3's Multi-Token-Prediction module (layer index
    num_hidden_layers in its checkpoints), shaped as the real ones."""
    H, L = cfg.hidden_size, f"model.layers.{cfg.num_hidden_layers}."
    return {L + "enorm.weight": (H,), L + "hnorm.weight": (H,), L + "eh_proj.weight": (H, 2 * H),
            L + "input_layernorm.weight": (H,),
            L + "self_attn.q_a_proj.weight": (cfg.q_lora_rank, H),
            L + "self_attn.kv_a_proj_with_mqa.weight": (cfg.kv_lora_rank + cfg.qk_rope_head_dim, H),
            L + "self_attn.kv_a_layernorm.weight": (cfg.kv_lora_rank,),
            L + "mlp.gate.weight": (cfg.n_routed_experts, H),
            L + "mlp.gate.e_score_correction_bias": (cfg.n_routed_experts,),
            L + "shared_head.norm.weight": (H,)}


def add_mtp(folder, cfg, seed):
    """Rewrite folder/model.safetensors with the fake MTP layer (mtp_shapes) added,
    and check transformers loads the folder, ignoring exactly those tensors."""
    from safetensors.torch import load_file
    path = os.path.join(folder, "model.safetensors")
    tensors = load_file(path)
    g = torch.Generator().manual_seed(seed)
    extra = {name: (1 + 0.2 * torch.randn(shape, generator=g)) if len(shape) == 1
             else shape[-1] ** -0.5 * torch.randn(shape, generator=g) for name, shape in mtp_shapes(cfg).items()}
    assert not set(extra) & set(tensors)
    tensors.update(extra)
    save_file(tensors, path, metadata={"format": "pt"})
    _, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                   output_loading_info=True)
    assert set(info["unexpected_keys"]) == set(extra) and not info["missing_keys"], info


def tokenizer_vocab(path):
    """Ids the tokenizer can produce: the model vocabulary plus the added tokens."""
    j = json.load(open(path))
    ids = list(j["model"]["vocab"].values()) + [a["id"] for a in j.get("added_tokens", [])]
    return max(ids) + 1


# RoPE cases for tests/test_rope_scaling.c: config.json text (Llama keys) and
# what transformers' LlamaRotaryEmbedding makes of it.
ROPE_CASES = {
    "default": dict(head_dim=64, rope_theta=10000.0),
    "linear_v4": dict(head_dim=32, rope_theta=10000.0, rope_scaling={"type": "linear", "factor": 4.0}),
    "llama3_31": dict(head_dim=128, rope_theta=500000.0, max_position_embeddings=131072,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "yarn_qwen25": dict(head_dim=128, rope_theta=1000000.0, max_position_embeddings=131072,
                        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    "yarn_betas_notrunc": dict(head_dim=64, rope_theta=10000.0, max_position_embeddings=8192,
                               rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
                                             "beta_fast": 24, "beta_slow": 2, "truncate": False}),
    "yarn_mscale": dict(head_dim=64, rope_theta=10000.0, max_position_embeddings=16384,
                        rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
                                      "mscale": 1.0, "mscale_all_dim": 0.5}),
    "yarn_attn_factor": dict(head_dim=48, rope_theta=50000.0, max_position_embeddings=4096,
                             rope_scaling={"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 2048,
                                           "attention_factor": 0.9}),
    "yarn_implicit_factor": dict(head_dim=64, rope_theta=10000.0, max_position_embeddings=8192,
                                 rope_parameters={"rope_type": "yarn", "rope_theta": 20000.0,
                                                  "original_max_position_embeddings": 2048}),
}


def rope_cases(out_path):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    tensors, meta = {}, {}
    for name, kw in ROPE_CASES.items():
        cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4 * kw["head_dim"],
               "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 1, "intermediate_size": 8,
               "vocab_size": 8, **kw}
        if name == "yarn_implicit_factor":  # transformers 5 spelling; factor: max_position / original
            cfg["rope_parameters"]["factor"] = None
        rot = LlamaRotaryEmbedding(LlamaConfig(**json.loads(json.dumps(cfg))))
        tensors["inv_freq." + name] = rot.inv_freq.float().contiguous()
        tensors["scale." + name] = torch.tensor([float(rot.attention_scaling)], dtype=torch.float64)
        meta[name] = cfg
    save_file(tensors, out_path, metadata={"configs": json.dumps(meta)})  # one key: reproducible files
    print(f"{out_path}: {len(ROPE_CASES)} RoPE cases")


def check_packed(folder, pfolder, ids_list):
    """The packed checkpoint holds exactly the per-expert tensors (gate_up_proj[e][:I]
    = experts.e.gate_proj, [I:] = up_proj, down_proj[e] = experts.e.down_proj), and
    transformers loads both folders to the same logits (to rounding: the two loads
    align the tensors differently, which changes the CPU kernels' summation order)."""
    from safetensors.torch import load_file
    sd, pd = load_file(os.path.join(folder, "model.safetensors")), load_file(os.path.join(pfolder, "model.safetensors"))
    per_expert = re.compile(r"(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight")
    assert {k for k in sd if not per_expert.fullmatch(k)} == {k for k in pd if not k.endswith(("gate_up_proj", "down_proj"))}
    for k, t in sd.items():
        m = per_expert.fullmatch(k)
        if not m:
            assert torch.equal(t, pd[k]), k
            continue
        prefix, e, proj = m.group(1), int(m.group(2)), m.group(3)
        inter = t.shape[1] if proj == "down_proj" else t.shape[0]
        if proj == "down_proj":
            packed = pd[prefix + ".down_proj"][e]
        else:
            packed = pd[prefix + ".gate_up_proj"][e][:inter] if proj == "gate_proj" else pd[prefix + ".gate_up_proj"][e][inter:]
        assert torch.equal(t, packed), k
    m1, m2 = load(folder), load(pfolder)
    with torch.no_grad():
        for ids in ids_list:
            diff = (m1(input_ids=ids).logits - m2(input_ids=ids).logits).abs().max().item()
            assert diff < 1e-5, diff
    print(f"{pfolder}: packed experts equal {folder}'s per-expert tensors, same logits")


def pack_mxfp4(w):
    """w (..., R, C) float, C a multiple of 32, as MXFP4: blocks (..., R, C/32, 16) uint8, two FP4 (E2M1) codes a
    byte, the low nibble first, and scales (..., R, C/32) uint8, each group's E8M0 power of two (bias 127): the
    smallest that brings the group's largest |value| within FP4's 6, each value then rounded to the nearest FP4
    value (ties away from zero). What transformers' convert_moe_packed_tensors undoes."""
    from transformers.integrations.mxfp4 import FP4_VALUES
    lut = torch.tensor(FP4_VALUES[:8], dtype=torch.float64)  # the magnitudes of codes 0-7
    g = w.double().reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = g.abs().amax(dim=-1, keepdim=True).clamp_min(2.0 ** -126)
    e = torch.ceil(torch.log2(amax / 6.0)).clamp(-127, 127)
    mag = (g.abs() / torch.pow(2.0, e)).unsqueeze(-1)
    code = (mag - lut).abs().argmin(dim=-1) + 8 * (g < 0).long()
    code = code.to(torch.uint8)
    blocks = code[..., 0::2] | (code[..., 1::2] << 4)
    return blocks.contiguous(), (e.squeeze(-1) + 127).to(torch.uint8).contiguous()


def gpt_oss_mxfp4(out, seed):
    """gpt_oss_mxfp4: a GPT-OSS model whose experts are MXFP4 (quantization_config quant_method mxfp4, the
    published checkpoints' layout: each expert tensor as <name>_blocks and <name>_scales, the rest bf16), packed by
    pack_mxfp4, its intermediate size 32 (MXFP4 groups 32 values). The reference is what transformers makes of the
    folder (from_pretrained dequantizes MXFP4 on a CPU): its logits, loss and greedy continuation, and its
    dequantized expert tensors ("dequant.<name>"), which titan's loader must equal bit for bit."""
    folder = os.path.join(out, "gpt_oss_mxfp4")
    cfg = GptOssConfig(**MOE_TOKENS, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2,
                       sliding_window=4, max_position_embeddings=128, rms_norm_eps=1e-5, swiglu_limit=1.0,
                       pad_token_id=None)
    ids = reference_ids(cfg.vocab_size, 400)
    wseed = seed
    while True:
        model = GptOssForCausalLM(cfg)
        randomize(model, wseed)
        shutil.rmtree(folder, ignore_errors=True)
        model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
        st = os.path.join(folder, "model.safetensors")
        tensors = {}
        with safe_open(st, "pt") as f:
            for k in f.keys():
                t = f.get_tensor(k)
                if re.search(r"\.mlp\.experts\.(gate_up|down)_proj$", k):  # (E, in, out): groups run along in
                    tensors[k + "_blocks"], tensors[k + "_scales"] = pack_mxfp4(t.float().transpose(1, 2))
                else:
                    tensors[k] = t
        save_file(tensors, st, metadata={"format": "pt"})
        conf = json.load(open(os.path.join(folder, "config.json")))
        conf["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
        json.dump(conf, open(os.path.join(folder, "config.json"), "w"), indent=2)
        margins = router_margins(load(folder), ids)
        if min(margins.values()) > ROUTER_MARGIN:
            print(f"gpt_oss_mxfp4: weight seed {wseed}, smallest router margin {min(margins.values()):.4g}")
            break
        wseed += 1
    shutil.copyfile(os.path.join(out, "gpt_oss", "tokenizer.json"), os.path.join(folder, "tokenizer.json"))
    ref = os.path.join(out, "gpt_oss_mxfp4.logits.safetensors")
    reference(folder, cfg.vocab_size, 400, ref, greedy=True)
    model = load(folder)
    extra = {f"dequant.{k}": v.detach().float().contiguous() for k, v in model.state_dict().items()
             if re.search(r"\.mlp\.experts\.(gate_up|down)_proj$", k)}
    with safe_open(ref, "pt") as f:
        extra.update({k: f.get_tensor(k) for k in f.keys()})
        meta = f.metadata()
    save_file(extra, ref, metadata=meta)


def gemma3_vlm(out, gemma3_folder):
    """gemma3_vlm: a Gemma3ForConditionalGeneration (Gemma 3 4B and up) whose language model is the gemma3
    fixture's and whose vision tower (a one-layer SigLIP) and projector are random; saved as save_pretrained writes
    it (language_model.model.*, vision_tower.*, multi_modal_projector.*). Its text-only logits must be the gemma3
    fixture's reference logits, which test_hf checks titan's load of it against: checked here in transformers."""
    from safetensors.torch import load_file
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, SiglipVisionConfig
    text = Gemma3ForCausalLM.from_pretrained(gemma3_folder, dtype=torch.float32)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    cfg = Gemma3Config(text_config=text.config.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                       image_token_index=5, boi_token_index=6, eoi_token_index=7, eos_token_id=[604, 609])
    torch.manual_seed(7)
    model = Gemma3ForConditionalGeneration(cfg)
    missing = model.model.language_model.load_state_dict(text.model.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys, missing
    folder = os.path.join(out, "gemma3_vlm")
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copyfile(os.path.join(gemma3_folder, "tokenizer.json"), os.path.join(folder, "tokenizer.json"))
    ref = load_file(os.path.join(out, "gemma3.logits.safetensors"))
    back = Gemma3ForConditionalGeneration.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    back.eval()
    with torch.no_grad():
        for k in range(len(SEQ_LENS)):
            ids = ref[f"ids.{k}"].long().unsqueeze(0)
            d = (back(input_ids=ids).logits[0] - ref[f"logits.{k}"]).abs().max().item()
            assert d < 1e-5, f"gemma3_vlm: sequence {k} differs from the gemma3 reference by {d}"
    print(f"{folder}: the gemma3 fixture's language model with a vision tower; text logits match its reference")


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "hf"))
    ap.add_argument("--tokenizers", default=os.path.join(here, "..", "tests", "fixtures", "tokenizers"))
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--only", metavar="NAME[,NAME...]", help="write just these fixtures")
    a = ap.parse_args()
    names = list(FIXTURES) + list(PACKED) + ["gemma3_vlm", "gpt_oss_mxfp4", "rope_cases", "tiny-random-gpt2"]
    only = set(names) if a.only is None else set(a.only.split(","))
    if only - set(names):
        ap.error(f"unknown fixture(s) {', '.join(sorted(only - set(names)))}; known: {', '.join(names)}")
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    for seed, (name, (cls, cfg)) in enumerate(FIXTURES.items()):  # seeds follow the order, selected or not
        packed = [p for p, base in PACKED.items() if base == name and p in only]
        if name not in only and not packed:
            continue
        # a base built only for its packed twin goes to a scratch folder, leaving its fixture alone
        folder = os.path.join(a.out, name) if name in only else tempfile.mkdtemp()
        ids = reference_ids(cfg.vocab_size, 200 + seed)
        wseed = 100 + seed
        while True:
            shutil.rmtree(folder, ignore_errors=True)
            model = cls(cfg)
            randomize(model, wseed)
            kw = {"safe_serialization": True}
            if name == "qwen3":
                kw["max_shard_size"] = "60KB"  # exercises model.safetensors.index.json
            if name.endswith("_bf16"):
                model = model.to(torch.bfloat16)
            model.save_pretrained(folder, **kw)
            if name == "deepseek_v3":
                add_mtp(folder, cfg, wseed)
            margins = router_margins(load(folder), ids)
            if not margins:
                break
            margin = min(margins.values())
            what = ", ".join(f"{k} {v:.4g}" for k, v in margins.items()) if len(margins) > 1 else f"{margin:.4g}"
            if margin > ROUTER_MARGIN:
                print(f"{name}: weight seed {wseed}, smallest router margin {what}")
                break
            print(f"{name}: weight seed {wseed} has a router near-tie ({what}), trying the next seed")
            wseed += 1
        if name in TOKENIZERS:
            tok = os.path.join(a.tokenizers, TOKENIZERS[name], "tokenizer.json")
            assert tokenizer_vocab(tok) <= cfg.vocab_size, f"{name}: {tok} has more ids than vocab_size"
            shutil.copyfile(tok, os.path.join(folder, "tokenizer.json"))
        for p in packed:
            pfolder = os.path.join(a.out, p)
            shutil.rmtree(pfolder, ignore_errors=True)
            model.save_pretrained(pfolder, safe_serialization=True, save_original_format=False)
            check_packed(folder, pfolder, ids)
            if name in TOKENIZERS:
                shutil.copyfile(os.path.join(folder, "tokenizer.json"), os.path.join(pfolder, "tokenizer.json"))
            reference(pfolder, cfg.vocab_size, 200 + seed, os.path.join(a.out, p + ".logits.safetensors"))
        if name in only:
            reference(folder, cfg.vocab_size, 200 + seed, os.path.join(a.out, name + ".logits.safetensors"),
                      greedy=name in GREEDY)
        else:
            shutil.rmtree(folder)
    if "gemma3_vlm" in only:
        gemma3_vlm(a.out, os.path.join(a.out, "gemma3"))
    if "gpt_oss_mxfp4" in only:  # after gpt_oss, whose tokenizer it takes
        gpt_oss_mxfp4(a.out, 500)
    if "rope_cases" in only:
        rope_cases(os.path.join(a.out, "rope_cases.safetensors"))
    gpt2 = os.path.join(a.shared, "fixtures", "hf", "tiny-random-gpt2")
    if "tiny-random-gpt2" not in only:
        pass
    elif os.path.isdir(gpt2):
        vocab = json.load(open(os.path.join(gpt2, "config.json")))["vocab_size"]
        reference(gpt2, vocab, 300, os.path.join(a.out, "tiny-random-gpt2.logits.safetensors"))
    else:
        print(f"{gpt2} not found: no reference logits for the published tiny GPT-2")

if __name__ == "__main__":
    main()

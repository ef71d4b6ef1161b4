#!/usr/bin/env bash
# cli_families.sh TITAN SRC — the dense families' blocks from the model.* keys,
# as a recipe pretrains them (the Hugging Face folders of test_hf and
# cli_hf_finetune give them through config.json):
#   - a tiny model with each family's keys trains, and its closing export is
#     that family's class with those options in config.json (OLMo 2's norms,
#     SmolLM3's layers without RoPE, Phi-3's partial rotation, Granite's
#     multipliers);
#   - each key changes the step-1 loss: it is not read and dropped;
#   - the flavors smollm3_3b and olmo2_1b count what the published config.json
#     files give (the same model read through config.json: the same
#     parameters and FLOPs), and the Gemma, Phi-4-mini, Granite 3.3 and GPT-OSS shapes of configs/hf/shapes/ what
#     transformers counts for them;
#   - keys that have no meaning for the model are refused by name.
set -u
TITAN=$1
SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2
TINY=(--model.dim 64 --model.n_layers 4 --model.n_heads 4 --model.n_kv_heads 2 --model.ffn_dim 96
  --training.seq_len 256 --training.local_batch_size 2 --training.steps 2 --synthetic.train_tokens 20000
  --synthetic.val_tokens 4096 --validation.enable false --metrics.log_freq 1 --metrics.peak_tflops 1
  --training.mixed_precision_param float32 --generate.max_new_tokens 0 --checkpoint.last_save_in_hf true)
# loss1 DIR: the step-1 loss of a run
loss1() { sed -n 's/^{"step":1,"loss":\([-0-9.eE+]*\)[,}].*/\1/p' "$1/metrics.jsonl"; }

"$TITAN" train "${TINY[@]}" --job.dump_folder "$W/llama" >"$W/llama.log" 2>&1
check "a plain llama block trains (the reference)" $?
base=$(loss1 "$W/llama")

# run NAME CLASS JSON-GREP... -- KEYS...: trains with the keys; the export is CLASS, config.json holds each JSON-GREP
run() {
  local name=$1 class=$2; shift 2
  local greps=()
  while [ "$1" != -- ]; do greps+=("$1"); shift; done
  shift
  "$TITAN" train "${TINY[@]}" --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1
  local rc=$? cfg="$W/$name/hf/config.json" ok=0
  [ $rc -eq 0 ] && grep -q "\"$class\"" "$cfg" || ok=1
  for g in "${greps[@]}"; do tr -d ' \n\t' <"$cfg" | grep -q "$g" || ok=1; done
  check "$name: trains, and exports as $class with its options" $ok
  [ $ok -eq 0 ] || { tail -n 5 "$W/$name.log"; tr -d ' \n\t' <"$cfg" 2>/dev/null; echo; }
  local l=$(loss1 "$W/$name")
  [ -n "$l" ] && [ "$l" != "$base" ]
  check "  its step-1 loss ($l) is not the plain block's ($base)" $?
}
run olmo2 Olmo2ForCausalLM -- --model.qk_norm true --model.qk_norm_full true --model.post_norms true
run smollm3 SmolLM3ForCausalLM '"no_rope_layers":\[1,0,1,0\]' -- --model.no_rope_interval 2
run phi3 Phi3ForCausalLM '"partial_rotary_factor":0.75' -- --model.partial_rotary_factor 0.75
run granite GraniteForCausalLM '"embedding_multiplier":12' '"residual_multiplier":0.22' \
  '"attention_multiplier":0.05' '"logits_scaling":4' -- --model.embedding_multiplier 12 \
  --model.residual_multiplier 0.22 --model.attention_multiplier 0.05 --model.logits_scaling 4

# the flavors against the published config.json files (allenai/OLMo-2-0425-1B, HuggingFaceTB/SmolLM3-3B; their
# architecture keys in configs/hf/shapes/): the same model read through config.json counts the same
for f in olmo2_1b:olmo-2-1b:1484916736 smollm3_3b:smollm3-3b:3075098624; do
  name=${f%%:*} rest=${f#*:} want=${f##*:}
  shape=${rest%%:*}
  "$TITAN" plan --model.flavor "$name" --training.seq_len 4096 >"$W/$name.flavor" 2>&1 &&
    "$TITAN" plan --model.hf_assets_path "$SRC/configs/hf/shapes/$shape" --training.seq_len 4096 >"$W/$name.hf" 2>&1 &&
    grep -q "^parameters   $want " "$W/$name.flavor" &&
    [ "$(grep -E '^(parameters|FLOPs/token)' "$W/$name.flavor")" = "$(grep -E '^(parameters|FLOPs/token)' "$W/$name.hf")" ]
  check "plan $name: $want parameters, and its config.json's parameters and FLOPs" $?
done

# the Gemma, Phi-4-mini, Granite 3.3 and GPT-OSS shapes' config.json files (configs/hf/shapes/, the published configs' architecture keys): the parameters
# transformers 5.24 counts for the same files (AutoModelForCausalLM.from_config on the meta device; Gemma 3 4B's
# text_config through Gemma3ForCausalLM, the language model titan reads), and Phi-4-mini's
for f in gemma-3-1b:999885952 gemma-2-2b:2614341888 gemma-3-4b:3880263168 phi-4-mini:3836021760 \
  granite-3.3-2b:2533539840 gpt-oss-20b:20914757184 gpt-oss-120b:116829156672; do
  name=${f%%:*} want=${f#*:}
  "$TITAN" plan --model.hf_assets_path "$SRC/configs/hf/shapes/$name" --training.seq_len 1024 >"$W/$name.plan" 2>&1 &&
    grep -q "^parameters   $want " "$W/$name.plan"
  check "plan configs/hf/shapes/$name: $want parameters, as transformers counts them" $?
done

expect "gpt2 has no post norms" error "model.post_norms: gpt2 has no such option" \
  "$TITAN" plan --model.name gpt2 --model.flavor gpt2_debug --model.post_norms true
expect "whole-projection q/k norms need q/k norms" error "model.qk_norm_full needs model.qk_norm = true" \
  "$TITAN" plan --model.qk_norm_full true
expect "an odd partial rotation is refused" error "model.partial_rotary_factor = 0.72 turns 23 of a head's 32 features" \
  "$TITAN" plan --model.partial_rotary_factor 0.72
expect "Multi-head Latent Attention has no layers without RoPE" \
  error "model.no_rope_interval: Multi-head Latent Attention" \
  "$TITAN" plan --config "$SRC/configs/deepseek_v3_debug.toml" --model.no_rope_interval 4
cli_done cli_families

#!/usr/bin/env bash
# cli_lora.sh TITAN SRC — LoRA fine-tuning of a Hugging Face folder end to end
# (the tiny Llama of tests/fixtures/hf, the synthetic corpus): the loss falls;
# a run stopped at step 8 and resumed gives steps 9..16 bitwise equal to a
# straight run, dropout included; the checkpoint holds only the adapters;
# checkpoint.last_save_in_hf writes the adapter; `titan export --peft` writes
# the same files, `--merge` a Hugging Face folder, and a plain export is
# refused naming both; the exported adapter, given back as lora.adapter_path,
# evaluates to the checkpoint's loss and resumes training; the merged folder
# generates the adapted model's greedy text; a bf16 base trains. Bad input is
# refused by name: a negative rank, a target that matches nothing, a routed
# expert, the [lora] keys against an adapter's own, another base under a
# checkpoint, a DoRA adapter, a tensor of another shape. GPT-2 (Conv1D layers,
# its fused c_attn one adapter for q, k and v): trains, exports a PEFT adapter
# with fan_in_fan_out and c_attn's B (3 D, r), which evaluates to the
# checkpoint's loss, merges into a folder that generates the adapted model's
# text, and PEFT's own GPT-2 adapter loads. (LoRA on several ranks:
# tests/mpi_lora.sh.)
set -u
TITAN=$1
SRC=$2
FIX=$SRC/tests/fixtures/hf
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2
BASE=(--model.hf_assets_path "$FIX/llama" --training.mixed_precision_param float32 --training.seq_len 256
      --training.local_batch_size 2 --optimizer.lr 1e-2 --optimizer.weight_decay 0 --lr_scheduler.warmup_steps 2
      --lr_scheduler.decay_ratio 0
      --metrics.log_freq 1 --metrics.save_jsonl true --generate.max_new_tokens 0 --synthetic.train_tokens 200000
      --synthetic.val_tokens 8192 --validation.enable true --validation.freq 16 --validation.steps 4)
LORA=(--lora.rank 4 --lora.alpha 8 --lora.dropout 0.1 --checkpoint.enable true --checkpoint.interval 8
      --checkpoint.keep_latest_k 0)
losses() { sed -n 's/.*"step": *\([0-9]*\).*"loss": *\([-0-9.e]*\).*/\1 \2/p' "$1"; }

# ---- a straight run of 16 steps, and one stopped at 8 and resumed
expect "train 16 steps" 0 "" "$TITAN" train "${BASE[@]}" "${LORA[@]}" --training.steps 16 --job.dump_folder "$W/a" \
  --checkpoint.last_save_in_hf true
grep -q "LoRA: rank 4, scale 2, 14 linear layers adapted" "$W/err" "$W/out"; check "the run log names the adapters" $?
first=$(losses "$W/a/metrics.jsonl" | awk 'NR == 1 { print $2 }')
last=$(losses "$W/a/metrics.jsonl" | awk 'END { print $2 }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; check "the loss falls ($first -> $last)" $?
# (decay_ratio 0: the learning rate does not depend on training.steps, so a run of 8 is the first 8 of 16)
expect -q "train 8 steps" 0 "" "$TITAN" train "${BASE[@]}" "${LORA[@]}" --training.steps 8 --job.dump_folder "$W/b"
expect -q "resume to 16" 0 "" "$TITAN" train "${BASE[@]}" "${LORA[@]}" --training.steps 16 --job.dump_folder "$W/b"
grep -q "resumed from .*step-8" "$W/out"; check "the second run resumed from step 8" $?
cmp <(losses "$W/a/metrics.jsonl" | awk '$1 > 8') <(losses "$W/b/metrics.jsonl" | awk '$1 > 8'); check "steps 9..16 resumed equal the straight run's" $?
# the checkpoint: the adapters, their moments and no base weight
ck=$W/a/checkpoint/step-16
size=$(du -sb "$ck" | cut -f1)
[ "$size" -lt 300000 ]; check "the checkpoint holds the adapters only ($size bytes)" $?
grep -q '"lora"' "$ck/meta.json" && grep -q '"base_hash"' "$ck/meta.json"; check "meta.json records the base and its hash" $?

# ---- exports
[ -f "$W/a/hf/adapter_config.json" ] && [ -f "$W/a/hf/adapter_model.safetensors" ]; check "last_save_in_hf writes the adapter" $?
expect "export --peft" 0 "" "$TITAN" export "${BASE[@]}" "${LORA[@]}" --job.dump_folder "$W/a" --peft --out "$W/peft"
cmp "$W/a/hf/adapter_model.safetensors" "$W/peft/adapter_model.safetensors" &&
  cmp "$W/a/hf/adapter_config.json" "$W/peft/adapter_config.json"; check "export --peft writes the same adapter" $?
grep -q '"peft_type":[[:space:]]*"LORA"' "$W/peft/adapter_config.json" &&
  grep -q '"lora_alpha":[[:space:]]*8' "$W/peft/adapter_config.json"; check "adapter_config.json: LORA, alpha 8" $?
expect "a plain export of a LoRA run" error "export them with --peft .* with --merge" \
  "$TITAN" export "${BASE[@]}" "${LORA[@]}" --job.dump_folder "$W/a" --out "$W/plain"
expect "export --merge" 0 "" "$TITAN" export "${BASE[@]}" "${LORA[@]}" --job.dump_folder "$W/a" --merge --out "$W/merged"
[ -f "$W/merged/config.json" ] && [ -f "$W/merged/model.safetensors" ] && [ -f "$W/merged/tokenizer.json" ]
check "the merged folder is a Hugging Face model" $?

# ---- the adapter given back: the checkpoint's loss, and training goes on from it
expect -q "eval the checkpoint" 0 "" "$TITAN" eval "${BASE[@]}" "${LORA[@]}" --job.dump_folder "$W/a"
l_ck=$(sed -n 's/.*eval step 16: loss \([0-9.]*\).*/\1/p' "$W/err" "$W/out" | head -1)
expect -q "eval the exported adapter" 0 "" "$TITAN" eval "${BASE[@]}" --lora.adapter_path "$W/peft" \
  --job.dump_folder "$W/c"
l_ad=$(sed -n 's/.*eval step 0: loss \([0-9.]*\).*/\1/p' "$W/err" "$W/out" | head -1)
[ -n "$l_ck" ] && [ "$l_ck" = "$l_ad" ]; check "the adapter evaluates to the checkpoint's loss ($l_ck, $l_ad)" $?
expect -q "train from the adapter" 0 "" "$TITAN" train "${BASE[@]}" --lora.adapter_path "$W/peft" \
  --training.steps 2 --job.dump_folder "$W/d"
grep -q "adapter parameters from $W/peft" "$W/out"; check "training starts from the adapter" $?
# greedy text: the adapted model (base + adapter) and the merged folder
expect -q "generate from the adapter" 0 "" "$TITAN" generate "${BASE[@]}" --lora.adapter_path "$W/peft" \
  --job.dump_folder "$W/c" --generate.temperature 0 --generate.max_new_tokens 24 "The old"
cp "$W/out" "$W/gen_adapter"
expect -q "generate from the merged folder" 0 "" "$TITAN" generate --hf "$W/merged" --training.mixed_precision_param float32 \
  --generate.temperature 0 --generate.max_new_tokens 24 "The old"
[ -s "$W/out" ] && cmp "$W/gen_adapter" "$W/out"; check "the merged model writes the adapted model's greedy text" $?

# ---- a bf16 base
expect -q "a bf16 base trains" 0 "" "$TITAN" train "${BASE[@]}" --training.mixed_precision_param bfloat16 \
  --lora.rank 4 --lora.base_dtype bfloat16 --training.steps 3 --job.dump_folder "$W/e"
grep -q "in bf16" "$W/out" && grep -q "step: *3 " "$W/out"; check "a bf16 base trains" $?
expect "bf16 base with fp32 compute" error "lora.base_dtype = bfloat16 needs bf16 compute" \
  "$TITAN" train "${BASE[@]}" --lora.rank 4 --lora.base_dtype bfloat16 --training.steps 1 --job.dump_folder "$W/f"

# ---- bad input
expect "negative rank" error "lora.rank = -1 is out of range" "$TITAN" train "${BASE[@]}" --lora.rank -1 --training.steps 1 \
  --job.dump_folder "$W/g"
expect "a target that matches nothing" error "'qq_proj' matches no linear layer .*q_proj" \
  "$TITAN" train "${BASE[@]}" --lora.rank 4 --lora.target_modules q_proj,qq_proj --training.steps 1 --job.dump_folder "$W/g"
expect "a routed expert" error "routed expert" "$TITAN" train --model.hf_assets_path "$FIX/qwen3_moe" \
  --training.mixed_precision_param float32 --training.seq_len 64 --lora.rank 4 --lora.target_modules gate_proj \
  --training.steps 1 --job.dump_folder "$W/g"
expect "the [lora] keys against the adapter's" error "lora.rank is set, and lora.adapter_path" \
  "$TITAN" train "${BASE[@]}" --lora.adapter_path "$W/peft" --lora.rank 8 --training.steps 1 --job.dump_folder "$W/g"
expect "another base under a LoRA checkpoint" error "trained on another base" \
  "$TITAN" train "${BASE[@]/$FIX\/llama/$FIX/qwen2}" "${LORA[@]}" --training.steps 17 --job.dump_folder "$W/a"
mkdir -p "$W/dora"
cp "$W/peft/adapter_model.safetensors" "$W/dora/"
sed 's/"use_dora":[[:space:]]*false/"use_dora": true/' "$W/peft/adapter_config.json" >"$W/dora/adapter_config.json"
expect "a DoRA adapter" error "adapter_config.json: field 'use_dora'" \
  "$TITAN" train "${BASE[@]}" --lora.adapter_path "$W/dora" --training.steps 1 --job.dump_folder "$W/g"
expect "an adapter of another model" error "tensor '.*' has shape" \
  "$TITAN" train --model.hf_assets_path "$FIX/qwen3" --training.mixed_precision_param float32 --training.seq_len 64 \
  --lora.adapter_path "$W/peft" --training.steps 1 --job.dump_folder "$W/g"
# ---- GPT-2: Conv1D layers, c_attn's q, k and v under one adapter
for i in $(seq 1 400); do echo "{\"text\": \"The cat $((i % 7)) sat on the mat $((i % 5)) and the dog ran to the door.\"}"; done >"$W/g2.jsonl"
expect -q "prepare GPT-2 data" 0 "" "$TITAN" prepare --hf "$FIX/gpt2" --out "$W/g2data" --val-fraction 0.1 --no-progress "$W/g2.jsonl"
G2_BASE=(--model.hf_assets_path "$FIX/gpt2" --training.dataset_path "$W/g2data/train.bin" --validation.dataset_path
         "$W/g2data/val.bin" --validation.enable true --validation.freq 12 --validation.steps 2 --training.seq_len 64
         --training.local_batch_size 4 --training.mixed_precision_param float32 --optimizer.lr 1e-2
         --optimizer.weight_decay 0 --lr_scheduler.warmup_steps 2 --metrics.log_freq 1 --generate.max_new_tokens 0)
G2=("${G2_BASE[@]}" --lora.rank 4 --lora.alpha 8 --lora.dropout 0.1 --checkpoint.enable true --checkpoint.interval 12)
expect "GPT-2: train c_attn and mlp.c_fc" 0 "" "$TITAN" train "${G2[@]}" --lora.target_modules c_attn,c_fc \
  --training.steps 12 --job.dump_folder "$W/g2a"
grep -q "LoRA: rank 4, scale 2, 4 linear layers adapted" "$W/out"; check "GPT-2: c_attn is one adapter a layer (4 in all)" $?
expect -q "GPT-2: export --peft" 0 "" "$TITAN" export "${G2[@]}" --lora.target_modules c_attn,c_fc --job.dump_folder "$W/g2a" \
  --peft --out "$W/g2peft"
head -c 4096 "$W/g2peft/adapter_model.safetensors" | grep -aq \
  '"base_model.model.transformer.h.1.attn.c_attn.lora_B.weight":{"dtype":"F32","shape":\[144,4\]' &&
  head -c 4096 "$W/g2peft/adapter_model.safetensors" | grep -aq \
  '"base_model.model.transformer.h.1.attn.c_attn.lora_A.weight":{"dtype":"F32","shape":\[4,48\]' &&
  grep -q '"fan_in_fan_out":[[:space:]]*true' "$W/g2peft/adapter_config.json"
check "GPT-2: the adapter is PEFT's c_attn: A (4, 48), B (144, 4), fan_in_fan_out" $?
expect -q "GPT-2: eval the checkpoint" 0 "" "$TITAN" eval "${G2[@]}" --lora.target_modules c_attn,c_fc --job.dump_folder "$W/g2a"
l_ck=$(sed -n 's/.*eval step 12: loss \([0-9.]*\).*/\1/p' "$W/err" "$W/out" | head -1)
expect -q "GPT-2: eval the exported adapter" 0 "" "$TITAN" eval "${G2_BASE[@]}" --lora.adapter_path "$W/g2peft" \
  --job.dump_folder "$W/g2b"
l_ad=$(sed -n 's/.*eval step 0: loss \([0-9.]*\).*/\1/p' "$W/err" "$W/out" | head -1)
[ -n "$l_ck" ] && [ "$l_ck" = "$l_ad" ]; check "GPT-2: the adapter evaluates to the checkpoint's loss ($l_ck, $l_ad)" $?
expect -q "GPT-2: export --merge" 0 "" "$TITAN" export "${G2[@]}" --lora.target_modules c_attn,c_fc --job.dump_folder "$W/g2a" \
  --merge --out "$W/g2merged"
expect -q "GPT-2: generate from the adapter" 0 "" "$TITAN" generate "${G2_BASE[@]}" --lora.adapter_path "$W/g2peft" \
  --job.dump_folder "$W/g2b" --generate.temperature 0 --generate.max_new_tokens 16 "The cat"
cp "$W/out" "$W/g2gen"
expect -q "GPT-2: generate from the merged folder" 0 "" "$TITAN" generate --hf "$W/g2merged" \
  --training.mixed_precision_param float32 --generate.temperature 0 --generate.max_new_tokens 16 "The cat"
[ -s "$W/out" ] && cmp "$W/g2gen" "$W/out"; check "GPT-2: the merged model writes the adapted model's greedy text" $?
expect "GPT-2: PEFT's own adapter (all-linear, c_attn included) loads" 0 "" "$TITAN" eval "${G2_BASE[@]}" \
  --lora.adapter_path "$SRC/tests/fixtures/lora/gpt2" --job.dump_folder "$W/g2c"
cli_done cli_lora

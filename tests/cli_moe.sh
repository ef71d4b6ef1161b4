#!/usr/bin/env bash
# Mixture-of-Experts (and DeepSeek-V3's Multi-head Latent Attention) end to end on tiny models: a run of 20 steps and a
# run of 10 resumed to 20 print bitwise-identical losses, the balancing bias
# included (it moved); gradient accumulation equals one large batch; eval,
# generate and plan work; export needs the bias off, and the exported folder
# (Mixtral's form) generates the checkpoint's greedy text and has its
# validation loss; the Hugging Face MoE fixtures generate with the KV cache;
# bad MoE configs are refused with the key named. Usage: cli_moe.sh TITAN SRC
set -u
TITAN=$1 SRC=$2
. "$(dirname "$0")/lib_cli.sh"
export OMP_NUM_THREADS=2
COMMON=(--model.flavor debugmodel_moe --model.dim 64 --model.n_layers 2 --model.n_heads 4 --model.n_kv_heads 2
        --model.ffn_dim 128 --model.num_experts 4 --model.top_k 2 --model.moe_ffn_dim 64 --model.load_balance_coeff 1e-2
        --training.seq_len 256 --training.local_batch_size 2 --synthetic.train_tokens 200000
        --synthetic.val_tokens 8192 --optimizer.lr 3e-3 --lr_scheduler.warmup_steps 5 --lr_scheduler.decay_ratio 0
        --metrics.log_freq 1 --checkpoint.interval 10 --validation.freq 20 --metrics.peak_tflops 1
        --training.mixed_precision_param float32)

"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/full" --training.steps 20 >"$W/full.log" 2>&1
check "20-step MoE run" $?
grep -q "MoE layers 0-1 (2 of 2): 4 experts of 64, top-2" "$W/full.log"
check "the run log says which layers are MoE" $?
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/res" --training.steps 10 >"$W/r1.log" 2>&1 &&
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/res" --training.steps 20 >"$W/r2.log" 2>&1 &&
  grep -q "resumed from" "$W/r2.log"
check "10 steps resumed to 20" $?
losses() { python3 -c '
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "loss" in r and "val_loss" not in r: print(r["step"], repr(r["loss"]), repr(r["grad_norm"]), r["moe_bias_spread"], r["moe_load_max"])
' "$1" | sort -n | uniq; }
losses "$W/full/metrics.jsonl" >"$W/a" && losses "$W/res/metrics.jsonl" >"$W/b" && [ "$(wc -l <"$W/a")" -eq 20 ] &&
  cmp -s "$W/a" "$W/b"
check "resumed losses, gradient norms and expert load bitwise equal to the uninterrupted run" $?
python3 - "$W/a" <<'PY'
import sys
rows = [l.split(None, 4) for l in open(sys.argv[1])]
spread = [float(r[3].strip("[],").split(",")[0]) for r in rows]
print("bias spread of layer 0 by step:", spread[0], "...", spread[-1])
sys.exit(0 if spread[-1] > spread[0] > 0 else 1)
PY
check "the balancing bias moves (its spread grows from the first step)" $?

# auxiliary losses: logged beside the language-model loss, not in it (step 1's loss, before any update, is the
# same without them), and they change the gradient
AUX=(--training.steps 3 --checkpoint.enable false --model.router_aux_loss_coef 0.01 --model.router_z_loss_coef 0.001)
"$TITAN" train "${COMMON[@]}" "${AUX[@]}" --job.dump_folder "$W/aux" >"$W/aux.log" 2>&1 &&
"$TITAN" train "${COMMON[@]}" "${AUX[@]}" --model.router_aux_loss_seq true --job.dump_folder "$W/auxs" >"$W/auxs.log" 2>&1 &&
python3 - "$W/aux/metrics.jsonl" "$W/auxs/metrics.jsonl" "$W/full/metrics.jsonl" <<'PY'
import json, sys
a, s, f = ([json.loads(l) for l in open(p) if '"loss"' in l and "val_loss" not in l] for p in sys.argv[1:4])
print("aux:", [(r["loss"], r["aux_loss"]) for r in a], " sequence-wise:", [r["aux_loss"] for r in s])
ok = a[0]["loss"] == f[0]["loss"] and a[0]["grad_norm"] != f[0]["grad_norm"] and all(r["aux_loss"] > 0 for r in a + s)
ok = ok and s[0]["aux_loss"] != a[0]["aux_loss"] and "aux_loss" not in f[0]
sys.exit(0 if ok else 1)
PY
check "auxiliary losses (balance, sequence-wise, z): logged apart, out of the loss, in the gradient" $?

# gradient accumulation: 2 micro-batches of 2 give one batch of 4 (the expert counts summed over both)
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/b4" --training.steps 3 --training.local_batch_size 4 \
  --checkpoint.enable false >"$W/b4.log" 2>&1 &&
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/b22" --training.steps 3 --training.local_batch_size 2 \
  --training.global_batch_size 4 --checkpoint.enable false >"$W/b22.log" 2>&1 &&
python3 - "$W/b4/metrics.jsonl" "$W/b22/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l and "val_loss" not in l] for f in sys.argv[1:3])
print("batch 4:", [r["loss"] for r in a], " 2 x 2:", [r["loss"] for r in b])
ok = len(a) == len(b) == 3 and all(abs(x["loss"] - y["loss"]) < 1e-5 * x["loss"] and
                                    abs(x["grad_norm"] - y["grad_norm"]) < 1e-4 * x["grad_norm"] for x, y in zip(a, b))
sys.exit(0 if ok else 1)
PY
check "gradient accumulation matches one large batch" $?

"$TITAN" eval "${COMMON[@]}" --job.dump_folder "$W/full" >"$W/eval.log" 2>&1 && grep -q perplexity "$W/eval.log"
check "eval" $?
"$TITAN" plan "${COMMON[@]}" >"$W/plan.log" 2>&1 && grep -q "parameters active" "$W/plan.log"
check "plan shows total and active parameters" $?

# export: refused while the bias balances the load, then (a run without it) Mixtral's form
expect "export with a balancing bias is refused, naming the key" error "load_balance_coeff" \
  "$TITAN" export "${COMMON[@]}" --job.dump_folder "$W/full" --out "$W/hf_bias"
# export_greedy ARCH RUN_DIR OUT_DIR [train args]: the run's checkpoint exports as ARCH, and the export
# generates the checkpoint's greedy text (the KV cache through experts and attention)
export_greedy() {
  local arch=$1 run=$2 out=$3
  shift 3
  "$TITAN" export "$@" --job.dump_folder "$run" --out "$out" >"$out.log" 2>&1 && grep -q "\"$arch\"" "$out/config.json"
  check "export writes a $arch folder" $?
  local a b
  a=$("$TITAN" generate "$@" --job.dump_folder "$run" --generate.temperature 0 --generate.max_new_tokens 30 "The " 2>/dev/null)
  b=$("$TITAN" generate --hf "$out" --generate.temperature 0 --generate.max_new_tokens 30 "The " 2>/dev/null)
  [ -n "$a" ] && [ "$a" = "$b" ]
  check "$arch: generate --hf on the export gives the checkpoint's greedy text" $?
}
NB=("${COMMON[@]}" --model.load_balance_coeff 0)
"$TITAN" train "${NB[@]}" --job.dump_folder "$W/nb" --training.steps 20 >"$W/nb.log" 2>&1
check "an MoE run without the balancing bias" $?
export_greedy MixtralForCausalLM "$W/nb" "$W/hf" "${NB[@]}"

# DeepSeek-V3 style (Multi-head Latent Attention, sigmoid routing in groups, the bias): train, resume bitwise,
# export as DeepseekV3ForCausalLM, the export generating the checkpoint's greedy text
DS=(--config "$SRC/configs/deepseek_v3_debug.toml" --model.dim 64 --model.n_heads 2 --model.n_kv_heads 2
    --training.local_batch_size 2 --synthetic.train_tokens 200000 --synthetic.val_tokens 8192 --metrics.log_freq 1
    --checkpoint.enable true --checkpoint.interval 4 --validation.enable false --generate.max_new_tokens 0
    --training.mixed_precision_param float32 --lr_scheduler.warmup_steps 2 --lr_scheduler.decay_ratio 0)
"$TITAN" train "${DS[@]}" --job.dump_folder "$W/ds" --training.steps 8 >"$W/ds.log" 2>&1 &&
  "$TITAN" train "${DS[@]}" --job.dump_folder "$W/dsr" --training.steps 4 >"$W/dsr1.log" 2>&1 &&
  "$TITAN" train "${DS[@]}" --job.dump_folder "$W/dsr" --training.steps 8 >"$W/dsr2.log" 2>&1 &&
  losses "$W/ds/metrics.jsonl" >"$W/dsa" && losses "$W/dsr/metrics.jsonl" >"$W/dsb" && [ "$(wc -l <"$W/dsa")" -eq 8 ] &&
  cmp -s "$W/dsa" "$W/dsb"
check "DeepSeek-V3 style (MLA + grouped sigmoid routing): resumed losses bitwise equal" $?
export_greedy DeepseekV3ForCausalLM "$W/ds" "$W/dshf" "${DS[@]}"
"$TITAN" plan --config "$SRC/configs/deepseek_v3_16b.toml" >"$W/ds16.log" 2>&1 &&
  grep -qE "parameters +157[0-9]{8} " "$W/ds16.log" && grep -q "of 15706.49M parameters active" "$W/ds16.log"
check "plan deepseek_v3_16b: 15.7B parameters" $?

# the Hugging Face MoE fixtures generate (KV cache) with their tokenizer
for f in mixtral qwen3_moe qwen2_moe olmoe qwen3_moe_packed deepseek_v3; do
  "$TITAN" generate --hf "$SRC/tests/fixtures/hf/$f" --generate.temperature 0 --generate.max_new_tokens 8 \
    "The " >"$W/g_$f.log" 2>&1
  check "generate on the $f fixture" $?
done

# Qwen3-30B-A3B as published: 30.5B parameters, 3.3B active
"$TITAN" plan --config "$SRC/configs/qwen3_30b_a3b.toml" >"$W/q30.log" 2>&1 &&
  grep -qE "parameters +305[0-9]{8} " "$W/q30.log" && grep -q "3353.04M of 30532.13M parameters active" "$W/q30.log"
check "plan qwen3_30b_a3b: 30.5B parameters, 3.35B active" $?

expect "top_k above num_experts refused" error "model.top_k = 9" \
  "$TITAN" plan "${COMMON[@]}" --model.top_k 9
expect "gpt2 has no MoE form" error "model.num_experts: gpt2" \
  "$TITAN" plan --model.name gpt2 --model.flavor gpt2_debug --model.num_experts 4 --model.top_k 2
expect "no MoE layer left refused" error "model.n_dense_layers = 2" \
  "$TITAN" plan "${COMMON[@]}" --model.n_dense_layers 2
cli_done cli_moe

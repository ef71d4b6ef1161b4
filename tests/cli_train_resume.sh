#!/usr/bin/env bash
# End to end on a tiny model: training lowers the validation loss; a run of
# 40 steps and a run of 20 steps resumed to 40 print bitwise-identical losses
# (in fp32 and in bf16); gradient accumulation equals one large batch (both);
# a truncated checkpoint is refused, and used as fallback only when asked;
# eval, generate and plan work on the result. Usage: cli_train_resume.sh TITAN SRC
set -u
TITAN=$1
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2
# a small model and corpus so the whole file runs in well under a minute
COMMON=(--model.dim 64 --model.n_layers 2 --model.n_heads 4 --model.n_kv_heads 2 --model.ffn_dim 192
        --training.seq_len 256 --training.local_batch_size 2 --synthetic.train_tokens 200000
        --synthetic.val_tokens 8192 --optimizer.lr 3e-3 --lr_scheduler.warmup_steps 5
        --lr_scheduler.decay_ratio 0 --metrics.log_freq 1 --checkpoint.interval 10 --checkpoint.keep_latest_k 3
        --validation.freq 20 --metrics.peak_tflops 1 --training.mixed_precision_param float32)

"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/full" --training.steps 40 >"$W/full.log" 2>&1
check "40-step run" $?
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/resumed" --training.steps 20 >"$W/r1.log" 2>&1
check "20-step run" $?
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/resumed" --training.steps 40 >"$W/r2.log" 2>&1
check "resumed to 40" $?
grep -q "resumed from" "$W/r2.log"
check "second run resumed from a checkpoint" $?

if command -v python3 >/dev/null; then
  losses "$W/full/metrics.jsonl" >"$W/a"
  losses "$W/resumed/metrics.jsonl" >"$W/b"
  [ "$(wc -l <"$W/a")" -eq 40 ] && cmp -s "$W/a" "$W/b"
  check "resumed losses bitwise equal to the uninterrupted run" $?
else
  grep -E '^step:' "$W/full.log" | sed 's/tps:.*//' >"$W/a"
  cat "$W/r1.log" "$W/r2.log" | grep -E '^step:' | sed 's/tps:.*//' >"$W/b"
  cmp -s "$W/a" "$W/b"
  check "resumed losses equal to the uninterrupted run (console)" $?
fi

# validation loss fell well below its initial value (log(258) = 5.55)
python3 - "$W/full/metrics.jsonl" <<'PY'
import json, sys
v = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if "val_loss" in l]
print("validation losses:", v)
sys.exit(0 if v and v[-1] < 3.2 else 1)
PY
check "validation loss fell well below the initial 5.5" $?
test -f "$W/full/summary.json"
check "summary.json written" $?
ls "$W/full/checkpoint" | grep -q '^step-40$' && [ "$(ls "$W/full/checkpoint" | grep -c '^step-')" -eq 3 ]
check "latest 3 checkpoints kept" $?

"$TITAN" eval "${COMMON[@]}" --job.dump_folder "$W/full" >"$W/eval.log" 2>&1 && grep -q perplexity "$W/eval.log"
check "eval" $?
"$TITAN" generate "${COMMON[@]}" --job.dump_folder "$W/full" --generate.max_new_tokens 40 "The " >"$W/gen.log" 2>&1
check "generate" $?

# export as a Hugging Face folder, and generate from it: greedy text equals the checkpoint's
"$TITAN" export "${COMMON[@]}" --job.dump_folder "$W/full" --checkpoint step-40 --out "$W/hf" \
  >"$W/export.log" 2>&1 &&
  [ -f "$W/hf/config.json" ] && [ -f "$W/hf/model.safetensors" ] && [ -f "$W/hf/generation_config.json" ]
check "export writes a Hugging Face folder" $?
A=$("$TITAN" generate "${COMMON[@]}" --job.dump_folder "$W/full" --generate.temperature 0 --generate.max_new_tokens 40 "The " 2>/dev/null)
B=$("$TITAN" generate --hf "$W/hf" --generate.temperature 0 --generate.max_new_tokens 40 "The " 2>/dev/null)
[ -n "$A" ] && [ "$A" = "$B" ]
check "generate --hf on the export gives the checkpoint's greedy text" $?

# truncate the newest checkpoint's state: refused, then used as fallback only when asked
st="$W/full/checkpoint/step-40/state.safetensors"
truncate -s $(( $(stat -c %s "$st") / 2 )) "$st"
expect "truncated checkpoint refused with a message naming it" error "step-40" \
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/full" --training.steps 41
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/full" --training.steps 41 \
  --checkpoint.fallback_to_previous true >"$W/f.log" 2>&1 && grep -q "resumed from .*step-30" "$W/f.log"
check "fallback_to_previous resumes from the previous checkpoint" $?

"$TITAN" plan --config "$2/configs/llama3_8b.toml" >"$W/plan.log" 2>&1 && grep -qE "parameters +80[0-9]{8} " "$W/plan.log"
check "plan llama3_8b reports ~8.03B parameters" $?
cat "$W/plan.log"

# gradient accumulation: 2 micro-batches of 2 give the loss and gradient of one batch of 4
# accum_check NAME DIR LOSS_TOL NORM_RTOL [extra train args]: the two runs' losses and gradient norms agree
accum_check() {
  local name=$1 d=$2 lt=$3 nt=$4
  shift 4
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/$d.b4" --training.steps 2 --training.local_batch_size 4 \
    --checkpoint.enable false "$@" >"$W/$d.b4.log" 2>&1 &&
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/$d.b22" --training.steps 2 --training.local_batch_size 2 \
    --training.global_batch_size 4 --checkpoint.enable false "$@" >"$W/$d.b22.log" 2>&1 &&
  python3 - "$W/$d.b4/metrics.jsonl" "$W/$d.b22/metrics.jsonl" "$lt" "$nt" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
lt, nt = float(sys.argv[3]), float(sys.argv[4])
print("batch 4:", [(r["loss"], r["grad_norm"]) for r in a], " 2 x 2:", [(r["loss"], r["grad_norm"]) for r in b])
ok = len(a) == len(b) == 2 and all(abs(x["loss"] - y["loss"]) < lt and abs(x["grad_norm"] - y["grad_norm"]) < nt * x["grad_norm"] for x, y in zip(a, b))
sys.exit(0 if ok else 1)
PY
  check "$name" $?
}
accum_check "gradient accumulation matches one large batch" fp32 1e-4 1e-3

# bf16 mixed precision (bf16 matmul inputs, fp32 sums, fp32 master weights) tracks the fp32 loss curve
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/bf16" --training.steps 40 --checkpoint.enable false \
  --training.mixed_precision_param bfloat16 >"$W/bf16.log" 2>&1 &&
python3 - "$W/a" "$W/bf16/metrics.jsonl" <<'PY'
import json, sys
a = {int(l.split()[0]): float(l.split()[1]) for l in open(sys.argv[1])}  # the fp32 run's 40 losses, saved above
b = {r["step"]: r["loss"] for r in (json.loads(l) for l in open(sys.argv[2])) if "val_loss" not in r}
worst = max(abs(a[s] - b[s]) / a[s] for s in a)
print(f"bf16 vs fp32: worst relative loss difference over {len(a)} steps {worst:.4f}; step 40: {a[40]:.4f} vs {b[40]:.4f}")
sys.exit(0 if len(a) == len(b) == 40 and worst < 0.03 and a[40] != b[40] else 1)
PY
check "bf16 mixed precision tracks the fp32 loss curve (within 3%, and really differs)" $?

# bf16 resume: 20 bf16 steps resumed to 40 print the losses of 40 uninterrupted bf16 steps, bit for bit
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/bfull" --training.steps 40 --training.mixed_precision_param bfloat16 \
  >"$W/bfull.log" 2>&1 &&
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/bres" --training.steps 20 --training.mixed_precision_param bfloat16 \
  >"$W/br1.log" 2>&1 &&
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/bres" --training.steps 40 --training.mixed_precision_param bfloat16 \
  >"$W/br2.log" 2>&1 &&
losses "$W/bfull/metrics.jsonl" >"$W/ba" && losses "$W/bres/metrics.jsonl" >"$W/bb" &&
  [ "$(wc -l <"$W/ba")" -eq 40 ] && cmp -s "$W/ba" "$W/bb"
check "bf16: resumed losses bitwise equal to the uninterrupted run" $?

# bf16 gradient accumulation: the same, up to the summation order of the bf16 products
accum_check "bf16: gradient accumulation matches one large batch" bf16 2e-3 1e-2 --training.mixed_precision_param bfloat16

# SIGTERM finishes the step, saves, and exits 0 (Slurm preemption)
stops_on_signal "SIGTERM saves a checkpoint and exits 0" TERM "$W/sig.log" '^step:  *3 ' "$W/sig" "$W/sig.log" \
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/sig" --training.steps 100000 --checkpoint.interval 100000

# a diverging run stops with a message naming the step, before applying the bad update
expect "NaN/Inf loss stops the run naming the step" error "step [0-9]+: (loss|gradient norm) is (NaN|Inf)" \
  "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/nan" --training.steps 50 --optimizer.lr 1e30 \
  --lr_scheduler.warmup_steps 1 --training.max_norm 0 --checkpoint.enable false

cli_done cli_train_resume

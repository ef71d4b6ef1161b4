#!/usr/bin/env bash
# mpi_lora.sh — LoRA fine-tuning on several processes, end to end on the tiny
# Hugging Face Llama of tests/fixtures/hf (rank 8, the synthetic corpus), in
# fp32, against one process:
#   - FSDP on 2 ranks, HSDP 2 x 2 on 4, plain data parallel on 2, FSDP
#     accumulating and FSDP with buckets merged and kept gathered give the
#     per-step losses of one process with the whole global batch, within 1e-5
#     relative, for 20 steps;
#   - with dropout (0.1), FSDP on 2 and HSDP 2 x 2 on 4 give the losses of one
#     process accumulating micro-batches of the same local batch (a dropout
#     mask follows its micro-batch, which is that process's micro-batch);
#   - a DeepSeek-V3-style MoE base on 2 ranks gives one process's losses,
#     expert load and balancing bias (the base's: read, never moved);
#   - a bf16 base (bf16 compute) on 2 ranks gives one process's losses within
#     1e-3, each rank holding half the base's bytes (the log says so);
#   - checkpoints hold the adapters, their moments and the data position, not
#     the base, and record its hash, the same on 1 and on 2 ranks: saved on 2
#     ranks they resume on 2 (the uninterrupted run's losses and gradient
#     norms bitwise, dropout on) and on 1 (one process's losses continue);
#     saved by one process they resume on 2;
#   - the adapter written at the end of a 2-rank run (gathered on rank 0) is
#     `titan export --peft` of its checkpoint, bitwise, and one closing sample
#     comes from rank 0 (the merged weights, the base read from both ranks),
#     the greedy text one process generates from the checkpoint;
#   - `titan plan` and `bench step` under a mesh: each rank's share of the
#     frozen base, in its dtype;
#   - expert parallelism with LoRA is refused by name.
# tests/test_lora_ranks.c checks the base's bytes on every rank after training.
# CMake runs it as `bash mpi_lora.sh TITAN SRC MPIEXEC` with the MPI test
# environment (OMP_NUM_THREADS=1, run as root allowed, no cross-memory attach).
set -u
. "$(dirname "$0")/lib_mpi.sh" "$@" # TITAN SRC MPIEXEC, mpi, step_losses, close; W, check, expect, ...
FIX=$SRC/tests/fixtures/hf
COMMON=(--model.hf_assets_path "$FIX/llama" --lora.rank 8 --lora.alpha 16 --training.seq_len 256
        --synthetic.train_tokens 200000 --synthetic.val_tokens 8192 --optimizer.lr 1e-2 --lr_scheduler.warmup_steps 2
        --training.steps 20 --metrics.log_freq 1 --metrics.peak_tflops 1 --training.mixed_precision_param float32
        --validation.enable false --checkpoint.enable false --generate.max_new_tokens 0 --comm.timeout_seconds 20)
DROP=(--lora.dropout 0.1)

# like_one REF "NAME NP ARGS..." ...: each run on NP ranks gives REF's losses (a one-process run of the same name)
like_one() {
  local ref=$1 run name np
  shift
  for run in "$@"; do
    set -- $run
    name=$1 np=$2
    shift 2
    mpi "$np" train "${COMMON[@]}" --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1
    check "$name: trains" $?
    close "$W/$ref/metrics.jsonl" "$W/$name/metrics.jsonl"
    check "$name: the losses of one process with the whole batch (1e-5)" $?
  done
}

# ---- the losses of one process ---------------------------------------------------------------
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/one" --training.local_batch_size 4 >"$W/one.log" 2>&1
check "one process, batch 4" $?
like_one one "fsdp2 2 --training.local_batch_size 2 --checkpoint.last_save_in_hf true --generate.max_new_tokens 8" \
             "hsdp2x2 4 --training.local_batch_size 1 --parallelism.data_parallel_replicate_degree 2" \
             "dp2 2 --training.local_batch_size 2 --parallelism.data_parallel_replicate_degree 2" \
             "fsdp2_accum2 2 --training.local_batch_size 1 --training.global_batch_size 4" \
             "fsdp2_merged_kept 2 --training.local_batch_size 2 --parallelism.fsdp_bucket_bytes 1000000 --parallelism.fsdp_reshard_after_forward never"
grep -q "sliced over 2 shards" "$W/fsdp2.log" && ! grep -q "sliced over" "$W/dp2.log"
check "the log says the base is sliced over the shards (not under data parallelism)" $?

# ---- Mixture-of-Experts: a DeepSeek-V3-style base (MLA, a shared expert, the balancing bias), its blocks sliced
# whole; every linear layer adapted but the routed experts'. The bias is the frozen base's: read (collectively) for
# the log, never moved
MOE=("${COMMON[@]/$FIX\/llama/$FIX/deepseek_v3}" --lora.target_modules all-linear)
moe_stats() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "loss" in r and "val_loss" not in r: print(r["step"], r["moe_bias_spread"], r["moe_load_max"], r["moe_load_min"])
' "$1"; }
"$TITAN" train "${MOE[@]}" --job.dump_folder "$W/moe1" --training.local_batch_size 4 >"$W/moe1.log" 2>&1 &&
  mpi 2 train "${MOE[@]}" --job.dump_folder "$W/moe2" --training.local_batch_size 2 >"$W/moe2.log" 2>&1 &&
  close "$W/moe1/metrics.jsonl" "$W/moe2/metrics.jsonl" && moe_stats "$W/moe1/metrics.jsonl" >"$W/sa" &&
  moe_stats "$W/moe2/metrics.jsonl" >"$W/sb" && [ -s "$W/sa" ] && cmp -s "$W/sa" "$W/sb" &&
  [ "$(awk '{ print $2 }' "$W/sa" | sort -u | wc -l)" -eq 1 ] && ! grep -q '\[0\]' "$W/sa"
check "MoE (DeepSeek-V3 style) on 2 ranks: one process's losses, expert load and (unmoved) balancing bias" $?

# ---- dropout: the masks of one process with the same local batch -----------------------------
"$TITAN" train "${COMMON[@]}" "${DROP[@]}" --job.dump_folder "$W/drop1" --training.local_batch_size 2 \
  --training.global_batch_size 4 >"$W/drop1.log" 2>&1
check "dropout: one process, micro-batches of 2, accumulating 2" $?
"$TITAN" train "${COMMON[@]}" "${DROP[@]}" --job.dump_folder "$W/drop1b" --training.local_batch_size 1 \
  --training.global_batch_size 4 >"$W/drop1b.log" 2>&1
check "dropout: one process, micro-batches of 1, accumulating 4" $?
! close "$W/one/metrics.jsonl" "$W/drop1/metrics.jsonl" >/dev/null
check "dropout changes the losses" $?
like_one drop1 "drop_fsdp2 2 --training.local_batch_size 2 ${DROP[*]}"
like_one drop1b "drop_hsdp2x2 4 --training.local_batch_size 1 --parallelism.data_parallel_replicate_degree 2 ${DROP[*]}"

# ---- a bf16 base, half its bytes a rank --------------------------------------------------------
BF=(--training.mixed_precision_param bfloat16 --lora.base_dtype bfloat16)
"$TITAN" train "${COMMON[@]}" "${BF[@]}" --job.dump_folder "$W/bf1" --training.local_batch_size 4 >"$W/bf1.log" 2>&1 &&
  mpi 2 train "${COMMON[@]}" "${BF[@]}" --job.dump_folder "$W/bf2" --training.local_batch_size 2 >"$W/bf2.log" 2>&1 &&
  close "$W/bf1/metrics.jsonl" "$W/bf2/metrics.jsonl" 1 1e-3
check "a bf16 base on 2 ranks: one process's losses (1e-3, bf16 activations)" $?
mib() { sed -n "s/.*in $2.*sliced over 2 shards (\([0-9.]*\) MiB a rank).*/\1/p" "$1"; }
b32=$(mib "$W/fsdp2.log" fp32) b16=$(mib "$W/bf2.log" "bf16 (linear weights)")
echo "the base a rank holds: fp32 $b32 MiB, bf16 $b16 MiB"
awk -v a="$b32" -v b="$b16" 'BEGIN { exit !(a > 0 && b > 0.45 * a && b < 0.55 * a) }'
check "  a rank holds the bf16 base's slices: half the fp32 ones" $?

# ---- checkpoints: saved on 2, resumed on 2 and 1; saved by 1, resumed on 2 -------------------------
# The fault key ends a run at step 11, after its checkpoint of step 10. Dropout on: the resumed runs draw the
# masks the uninterrupted ones drew.
CK=(--checkpoint.enable true --checkpoint.interval 10 --comm.fault_rank 0 --comm.fault_step 11 --comm.fault_kind exit)
mpi 2 train "${COMMON[@]}" "${DROP[@]}" "${CK[@]}" --job.dump_folder "$W/c2" --training.local_batch_size 2 \
  >"$W/c2.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/c2/checkpoint/step-10/shard-00001-of-00002.safetensors" ]
check "2 ranks: a checkpoint of one file a shard, then the run dies" $?
ck=$W/c2/checkpoint/step-10
size=$(du -sb "$ck" | cut -f1)
[ "$size" -lt 300000 ] && grep -q '"base_hash"' "$ck/meta.json" && grep -q '"data"' "$ck/meta.json"
check "  it holds the adapters, their moments and the data position, not the base ($size bytes), and the base's hash" $?
cp -r "$W/c2" "$W/c2b"
mpi 2 train "${COMMON[@]}" "${DROP[@]}" --checkpoint.enable true --job.dump_folder "$W/c2" \
  --training.local_batch_size 2 >"$W/c22.log" 2>&1 && grep -q "resumed from .*step-10" "$W/c22.log"
check "saved on 2 ranks, resumed on 2" $?
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$W/drop_fsdp2/metrics.jsonl" | tail -n 10 >"$W/la" &&
  grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$W/c2/metrics.jsonl" | tail -n 10 >"$W/lb" &&
  [ "$(wc -l <"$W/la")" -eq 10 ] && cmp -s "$W/la" "$W/lb"
check "  its losses and gradient norms bitwise the uninterrupted run's" $?
"$TITAN" train "${COMMON[@]}" "${DROP[@]}" --checkpoint.enable true --job.dump_folder "$W/c2b" \
  --training.local_batch_size 2 --training.global_batch_size 4 >"$W/c21.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/c21.log"
check "saved on 2 ranks, resumed on 1" $?
close "$W/drop1/metrics.jsonl" "$W/c2b/metrics.jsonl" 11
check "  its losses continue one process's" $?
"$TITAN" train "${COMMON[@]}" "${DROP[@]}" "${CK[@]}" --job.dump_folder "$W/c1" --training.local_batch_size 2 \
  --training.global_batch_size 4 >"$W/c1.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/c1/checkpoint/step-10/state.safetensors" ]
check "1 process: a checkpoint in one file" $?
h1=$(grep -o '"base_hash":"[0-9a-f]*"' "$W/c1/checkpoint/step-10/meta.json")
h2=$(grep -o '"base_hash":"[0-9a-f]*"' "$ck/meta.json")
[ -n "$h1" ] && [ "$h1" = "$h2" ]
check "  it records the base hash the 2-rank checkpoint records ($h1)" $?
mpi 2 train "${COMMON[@]}" "${DROP[@]}" --checkpoint.enable true --job.dump_folder "$W/c1" \
  --training.local_batch_size 2 >"$W/c12.log" 2>&1 && grep -q "resumed from .*step-10" "$W/c12.log"
check "saved by 1 process, resumed on 2 ranks" $?
close "$W/drop1/metrics.jsonl" "$W/c1/metrics.jsonl" 11
check "  its losses continue one process's" $?
expect "a 2-rank LoRA checkpoint resumed on another base is refused" error "trained on another base" \
  mpi 2 train "${COMMON[@]/$FIX\/llama/$FIX/qwen2}" --checkpoint.enable true --job.dump_folder "$W/c2" \
    --training.local_batch_size 2 --training.steps 21

# ---- the end of a run on 2 ranks: its adapter, its sample ------------------------------------
[ -f "$W/fsdp2/hf/adapter_model.safetensors" ] && [ -f "$W/fsdp2/hf/adapter_config.json" ]
check "fsdp2: the adapter written at the end" $?
GEN=(--generate.max_new_tokens 16 --generate.temperature 0)
mpi 2 train "${COMMON[@]}" --job.dump_folder "$W/end2" --training.local_batch_size 2 --training.steps 4 \
  --checkpoint.enable true --checkpoint.interval 4 --checkpoint.last_save_in_hf true "${GEN[@]}" \
  >"$W/end2.log" 2>&1 &&
  "$TITAN" export "${COMMON[@]}" --job.dump_folder "$W/end2" --peft --out "$W/end2_peft" >"$W/end2_peft.log" 2>&1 &&
  cmp -s "$W/end2/hf/adapter_model.safetensors" "$W/end2_peft/adapter_model.safetensors" &&
  cmp -s "$W/end2/hf/adapter_config.json" "$W/end2_peft/adapter_config.json"
check "the adapter written at the end of a 2-rank run (gathered on rank 0) is its checkpoint's, bitwise" $?
[ "$(grep -c "^sample" "$W/end2.log")" -eq 1 ] && [ "$(grep -c "^sample" "$W/fsdp2.log")" -eq 1 ]
check "one closing sample, from rank 0" $?
sed -n '/^sample/{n;p;}' "$W/end2.log" >"$W/sample2.txt" &&
  "$TITAN" generate "${COMMON[@]}" --job.dump_folder "$W/end2" "${GEN[@]}" >"$W/sample1.txt" 2>/dev/null &&
  [ -s "$W/sample1.txt" ] && cmp -s "$W/sample1.txt" "$W/sample2.txt"
check "  its greedy text (the base read from both ranks, merged on rank 0) is one process's from the checkpoint" $?

# ---- plan and bench step under a mesh ----------------------------------------------------------
PLAN=(--model.flavor llama3_8b --lora.rank 16 --lora.base_dtype bfloat16 --training.mixed_precision_param bfloat16
      --training.local_batch_size 1 --training.seq_len 2048 --activation_checkpoint.mode full)
"$TITAN" plan "${PLAN[@]}" --json >"$W/p1.json" 2>"$W/p1.err" &&
  "$TITAN" plan "${PLAN[@]}" --parallelism.data_parallel_shard_degree 8 --json >"$W/p8.json" 2>"$W/p8.err" &&
  "$TITAN" plan "${PLAN[@]}" --parallelism.data_parallel_shard_degree 8 >"$W/p8.txt" 2>&1 &&
  python3 - "$W/p1.json" "$W/p8.json" <<'PY'
import json, sys
p1, p8 = (json.load(open(p)) for p in sys.argv[1:3])
frozen = p1["lora"]["frozen_bytes"]
par = p8["parallelism"]
rank_frozen, state = par["rank_frozen_bytes"], par["rank_state_bytes"]
adapters = 16 * p1["lora"]["adapter_params"]  # fp32 weights, gradients, two moments
ok = frozen / 8 <= rank_frozen <= frozen / 8 * 1.01 and state - rank_frozen >= adapters / 8 \
     and state - rank_frozen <= adapters / 8 * 1.05 and par["rank_total_bytes"] > state
print("plan: base %.3f GiB, a rank of 8 holds %.3f GiB of it, %.3f GiB of state" % (frozen / 2**30, rank_frozen / 2**30,
                                                                                  state / 2**30))
sys.exit(0 if ok else 1)
PY
check "plan: a rank of 8 holds 1/8 of the bf16 base and of the adapters' weights, gradients and moments" $?
grep -q "the frozen base's slices" "$W/p8.txt"
check "  the printed plan says what a rank's state holds" $?
mpi 2 bench step "${COMMON[@]}" --training.local_batch_size 1 --steps 2 --warmup 1 --profile >"$W/bench.log" 2>&1 &&
  grep -q "^LoRA      rank 8" "$W/bench.log" && grep -q "^ranks     2: 1 replicas x 2 shards" "$W/bench.log" &&
  grep -qE "^comm .* blocked in their waits" "$W/bench.log"
check "bench step on 2 ranks times the LoRA step under FSDP" $?

# ---- refused -----------------------------------------------------------------------------------
expect "LoRA with expert parallelism is refused by name" error "LoRA .*expert_parallel_degree = 2: LoRA does not split the experts" \
  mpi 2 train --model.hf_assets_path "$FIX/qwen3_moe" --training.mixed_precision_param float32 \
    --training.seq_len 64 --lora.rank 4 --lora.target_modules q_proj --parallelism.expert_parallel_degree 2 \
    --training.steps 1 --job.dump_folder "$W/ep" --comm.timeout_seconds 20
cli_done mpi_lora

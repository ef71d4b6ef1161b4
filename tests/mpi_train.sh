#!/usr/bin/env bash
# mpi_train.sh — training on several processes, end to end on a tiny model
# in fp32, against one process:
#   - FSDP on 2 and 4 ranks, HSDP 2 x 2, plain data parallel on 4, and
#     gradient accumulation over ranks give the per-step losses of one
#     process with the whole global batch, within 1e-5 relative, for 20 steps;
#   - in bf16, data parallel replicas (which keep the weights' bf16 copy) and
#     FSDP shards (which gather bf16 weights) give one bf16 process's losses
#     within 1e-3 and 5e-3;
#   - the train state a rank holds (measured) shrinks as 1/N;
#   - bench step times the FSDP step on ranks and writes a trace a rank;
#   - a checkpoint saved on 4 ranks resumes on 4 (bitwise), on 2 and on 1, and
#     one saved by one process resumes on 4, continuing the uninterrupted
#     run's losses; data parallel ranks write a part of the state each, and
#     HSDP's replicas a part of each shard each, and these resume on 1 and 4; the export at the end of a run on 2 ranks is one process's;
#     ranks that see different checkpoints (node-local dump folders) are
#     refused before any loads, naming the ranks and what each sees;
#   - a rank that exits, hangs, is killed or sees a NaN (in its loss, or in a
#     gradient) ends the whole job non-zero within 60 s, and the last
#     checkpoint still loads;
#   - a stop request saves one checkpoint, taken by every rank at one step;
#   - Mixture-of-Experts under FSDP, HSDP and accumulation gives one process's
#     losses, balancing bias and expert load; a DeepSeek-V3-style model saved
#     on 2 ranks resumes on one; GPT-OSS's fixture under FSDP 2, EP 2 and
#     EP 2 x FSDP 2 gives one process's losses;
#   - expert parallelism (EP 2, EP 2 x FSDP 2, EP 4, under HSDP, accumulating,
#     with a receive bound) gives one process's losses, bias and load; saved
#     with EP 2 on 4 ranks it resumes with EP 1 on 2 and on 1, and with EP 4
#     on 4 with EP 2 on 2; a router skewed
#     to one rank's experts loses no token, and a bound it exceeds stops the
#     run naming the key; validation, debug mode and the closing export
#     under EP 2 give one process's;
#   - ranks with different configs, and a mesh that does not fit the world,
#     are refused.
# CMake runs it as `bash mpi_train.sh TITAN SRC MPIEXEC` with the MPI test
# environment (OMP_NUM_THREADS=1, run as root allowed, no cross-memory attach).
set -u
. "$(dirname "$0")/lib_mpi.sh" "$@" # TITAN SRC MPIEXEC, mpi, step_losses, close; W, check, expect, ...
COMMON=(--model.dim 64 --model.n_layers 2 --model.n_heads 4 --model.n_kv_heads 2 --model.ffn_dim 192
        --training.seq_len 256 --synthetic.train_tokens 200000 --synthetic.val_tokens 8192
        --optimizer.lr 3e-3 --lr_scheduler.warmup_steps 5 --training.steps 20 --metrics.log_freq 1
        --metrics.peak_tflops 1 --training.mixed_precision_param float32 --validation.enable false
        --checkpoint.enable false --generate.max_new_tokens 0 --comm.timeout_seconds 10)

# ---- the same losses as one process ----------------------------------------
"$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/one" --training.local_batch_size 4 \
  --checkpoint.last_save_in_hf true >"$W/one.log" 2>&1
check "one process, batch 4" $?
for run in "fsdp2 2 --training.local_batch_size 2 --checkpoint.last_save_in_hf true --generate.max_new_tokens 8" \
           "fsdp4 4 --training.local_batch_size 1" \
           "hsdp2x2 4 --training.local_batch_size 1 --parallelism.data_parallel_replicate_degree 2" \
           "dp4 4 --training.local_batch_size 1 --parallelism.data_parallel_replicate_degree 4 --parallelism.data_parallel_shard_degree 1" \
           "fsdp2_accum2 2 --training.local_batch_size 1 --training.global_batch_size 4" \
           "dp2_accum2 2 --training.local_batch_size 1 --training.global_batch_size 4 --parallelism.data_parallel_replicate_degree 2" \
           "fsdp2_bucketed 2 --training.local_batch_size 2 --parallelism.fsdp_bucket_bytes 400000 --parallelism.fsdp_reshard_after_forward never"; do
  set -- $run
  name=$1 np=$2
  shift 2
  mpi "$np" train "${COMMON[@]}" --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1
  check "$name: trains" $?
  close "$W/one/metrics.jsonl" "$W/$name/metrics.jsonl"
  check "$name: the losses of one process with the whole batch (1e-5)" $?
done
# bf16: one process and data-parallel replicas both keep the weights' bf16 copy (test_weights16), and FSDP
# shards gather bf16 weights instead; both meshes train as one process does, within bf16's rounding (the
# gradients summed in another order round some weights the other way: on the Zen 4 host the replicas' 20
# losses were within 5.2e-5 of one process's, FSDP's within 1.2e-3)
"$TITAN" train "${COMMON[@]}" --training.mixed_precision_param bfloat16 --job.dump_folder "$W/one16" \
  --training.local_batch_size 4 >"$W/one16.log" 2>&1
check "bf16, one process" $?
grep -q "train state.*their bf16 copy" "$W/one16.log"
check "bf16, one process: the train state holds the weights' bf16 copy" $?
for run in "dp2_16 2 1e-3 --parallelism.data_parallel_replicate_degree 2 --parallelism.data_parallel_shard_degree 1" \
           "fsdp2_16 2 5e-3"; do
  set -- $run
  name=$1 np=$2 tol=$3
  shift 3
  mpi "$np" train "${COMMON[@]}" --training.mixed_precision_param bfloat16 --training.local_batch_size 2 \
    --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1
  check "$name: trains" $?
  close "$W/one16/metrics.jsonl" "$W/$name/metrics.jsonl" 1 "$tol"
  check "$name: the losses of one process in bf16 ($tol)" $?
done
grep -q "train state.*their bf16 copy" "$W/dp2_16.log" && ! grep -q "train state.*their bf16 copy" "$W/fsdp2_16.log"
check "bf16: replicas keep the weights' bf16 copy, FSDP shards none" $?
# the export at the end gathers the shards on rank 0: greedy text from it is one process's
"$TITAN" generate --hf "$W/one/hf" --generate.temperature 0 --generate.max_new_tokens 24 "The" >"$W/g1.txt" 2>/dev/null &&
  "$TITAN" generate --hf "$W/fsdp2/hf" --generate.temperature 0 --generate.max_new_tokens 24 "The" >"$W/g2.txt" 2>/dev/null &&
  [ -s "$W/g1.txt" ] && cmp -s "$W/g1.txt" "$W/g2.txt"
check "fsdp2: its Hugging Face export (gathered on rank 0) generates one process's greedy text" $?
[ "$(grep -c "^sample" "$W/fsdp2.log")" -eq 1 ]
check "fsdp2: one closing sample, from rank 0" $?
grep -q "comm wait" "$W/fsdp2.log"
check "the step log says the time spent waiting on other ranks" $?
[ ! -e "$W/fsdp2/rank1" ] && [ "$(ls "$W/fsdp2" | grep -c metrics)" -eq 1 ]
check "rank 0 alone writes the metrics" $?

# ---- bench step on ranks: the FSDP step timed, collectives measured, a trace a rank
mpi 2 bench step "${COMMON[@]}" --training.local_batch_size 1 --steps 2 --warmup 1 --profile \
  --trace "$W/trace.json" >"$W/bench.log" 2>&1 &&
  grep -q "^ranks     2: 1 replicas x 2 shards" "$W/bench.log" &&
  grep -qE "^comm .* blocked in their waits" "$W/bench.log" &&
  grep -q '"all_gather"' "$W/trace.rank0.json" && grep -q '"reduce_scatter"' "$W/trace.rank1.json"
check "bench step on 2 ranks: the collectives' time, and one timeline a rank" $?

# ---- the train state a rank holds: 1/N ------------------------------------------
state() { grep -o '"train_state_bytes_per_rank":[^,]*' "$1/summary.json" | sed 's/.*:[[:space:]]*//'; }
s1=$(state "$W/one") s2=$(state "$W/fsdp2") s4=$(state "$W/fsdp4")
echo "train state a rank: $s1 (1 rank), $s2 (2), $s4 (4) bytes"
awk -v a="$s1" -v b="$s2" -v c="$s4" 'BEGIN { exit !(a > 0 && b * 2 >= a && b * 2 <= a * 1.02 && c * 4 >= a && c * 4 <= a * 1.04) }'
check "the train state a rank holds shrinks as 1/N (measured)" $?

# ---- checkpoints: saved on 4, resumed on 2 and 1; saved by 1, resumed on 4 -------
# The fault key ends a run at step 11, after its checkpoint of step 10.
CK=(--checkpoint.enable true --checkpoint.interval 10 --comm.fault_rank 0 --comm.fault_step 11 --comm.fault_kind exit)
mpi 4 train "${COMMON[@]}" "${CK[@]}" --job.dump_folder "$W/c4" --training.local_batch_size 1 >"$W/c4.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/c4/checkpoint/step-10/shard-00003-of-00004.safetensors" ]
check "4 ranks: a checkpoint of one file a shard, then the run dies" $?
cp -r "$W/c4" "$W/c4b"
cp -r "$W/c4" "$W/c4c"
mpi 4 train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/c4c" --training.local_batch_size 1 >"$W/c44.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/c44.log"
check "saved on 4 ranks, resumed on 4" $?
grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$W/fsdp4/metrics.jsonl" | tail -n 10 >"$W/la" &&
  grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$W/c4c/metrics.jsonl" | tail -n 10 >"$W/lb" &&
  [ "$(wc -l <"$W/la")" -eq 10 ] && cmp -s "$W/la" "$W/lb"
check "  its losses and gradient norms bitwise the uninterrupted run's" $?
mpi 2 train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/c4" --training.local_batch_size 2 >"$W/c42.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/c42.log"
check "saved on 4 ranks, resumed on 2" $?
close "$W/one/metrics.jsonl" "$W/c4/metrics.jsonl" 11
check "  its losses continue the uninterrupted run's" $?
"$TITAN" train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/c4b" --training.local_batch_size 4 >"$W/c41.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/c41.log"
check "saved on 4 ranks, resumed on 1" $?
close "$W/one/metrics.jsonl" "$W/c4b/metrics.jsonl" 11
check "  its losses continue the uninterrupted run's" $?
"$TITAN" train "${COMMON[@]}" "${CK[@]}" --job.dump_folder "$W/c1" --training.local_batch_size 4 >"$W/c1.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/c1/checkpoint/step-10/state.safetensors" ]
check "1 process: a checkpoint in one file" $?
mpi 4 train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/c1" --training.local_batch_size 1 >"$W/c14.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/c14.log"
check "saved by 1 process, resumed on 4 ranks" $?
close "$W/one/metrics.jsonl" "$W/c1/metrics.jsonl" 11
check "  its losses continue the uninterrupted run's" $?
# the ranks that hold the same bytes share the writing: data parallel ranks a part of the state each, the replicas
# of HSDP a part of each shard each
files_there() { local d=$1; shift; for f; do [ -s "$d/$f" ] || return 1; done; } # files_there DIR FILE...
DP4=(--parallelism.data_parallel_replicate_degree 4 --parallelism.data_parallel_shard_degree 1)
mpi 4 train "${COMMON[@]}" "${CK[@]}" "${DP4[@]}" --job.dump_folder "$W/cdp" --training.local_batch_size 1 >"$W/cdp.log" 2>&1
[ $? -ne 0 ] && [ ! -e "$W/cdp/checkpoint/step-10/state.safetensors" ] &&
  files_there "$W/cdp/checkpoint/step-10" state.part-0000{0,1,2,3}-of-00004.safetensors
check "data parallel on 4 ranks: a checkpoint of four parts, one written by each rank" $?
"$TITAN" train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/cdp" --training.local_batch_size 4 \
  >"$W/cdp1.log" 2>&1 && grep -q "resumed from .*step-10" "$W/cdp1.log"
check "  resumed on 1" $?
close "$W/one/metrics.jsonl" "$W/cdp/metrics.jsonl" 11
check "  its losses continue the uninterrupted run's" $?
mpi 4 train "${COMMON[@]}" "${CK[@]}" --parallelism.data_parallel_replicate_degree 2 --job.dump_folder "$W/chs" \
  --training.local_batch_size 1 >"$W/chs.log" 2>&1
[ $? -ne 0 ] && files_there "$W/chs/checkpoint/step-10" shard-0000{0,1}-of-00002.part-0000{0,1}-of-00002.safetensors
check "HSDP 2 x 2: each replica writes a part of each shard" $?
mpi 4 train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/chs" --training.local_batch_size 1 \
  >"$W/chs4.log" 2>&1 && grep -q "resumed from .*step-10" "$W/chs4.log"
check "  resumed by FSDP on 4" $?
close "$W/one/metrics.jsonl" "$W/chs/metrics.jsonl" 11
check "  its losses continue the uninterrupted run's" $?
# a damaged layout, or a missing shard, is refused by name
mkdir -p "$W/bad/checkpoint" && cp -r "$W/c4b/checkpoint/step-10" "$W/bad/checkpoint/"
sed -i 's/"shards":4/"shards":5/' "$W/bad/checkpoint/step-10/meta.json"
expect "a checkpoint layout that does not split into its shards is refused" error "meta.json: layout bucket 0 .* multiple of 5 shards" \
  "$TITAN" train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/bad" --training.local_batch_size 4
sed -i 's/"shards":5/"shards":8/' "$W/bad/checkpoint/step-10/meta.json"
expect "a checkpoint missing a shard's file is refused" error "shard-00000-of-00008.safetensors is not in the checkpoint" \
  "$TITAN" train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/bad" --training.local_batch_size 4
# more buckets than the model's units make is refused by name before the layout's pieces are allocated
python3 - "$W/bad/checkpoint/step-10/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["layout"]["shards"] = 4
m["layout"]["buckets"] += [[0, 0, 0]] * 100000
json.dump(m, open(sys.argv[1], "w"))
PY
expect "a checkpoint layout of more buckets than the model's units is refused" error \
  "bad/checkpoint/step-10/meta.json: layout 'buckets' lists 100004 buckets; the model's 4 units make at most 4" \
  "$TITAN" train "${COMMON[@]}" --checkpoint.enable true --job.dump_folder "$W/bad" --training.local_batch_size 4
# node-local dump folders: each rank runs in a folder of its own (mpirun --wdir) with the same relative
# job.dump_folder. Rank 1's holds no checkpoint, then only the older of rank 0's two: the job is refused before any
# rank loads, naming the ranks and what each sees (rank 1 would have started fresh, then loaded another step)
NL=(--checkpoint.enable true --checkpoint.interval 2 --training.local_batch_size 1 --job.dump_folder run)
mkdir -p "$W/node0" "$W/node1" &&
  (cd "$W/node0" && mpi 2 train "${COMMON[@]}" "${NL[@]}" --training.steps 4 >"$W/node0.log" 2>&1) &&
  [ -f "$W/node0/run/checkpoint/step-2/meta.json" ] && [ -f "$W/node0/run/checkpoint/step-4/meta.json" ]
check "node-local folders: rank 0's holds step-2 and step-4" $?
nodes() { # the job on 2 ranks, rank r in $W/node<r>
  "$MPIEXEC" --oversubscribe --wdir "$W/node0" -np 1 "$TITAN" train "${COMMON[@]}" "${NL[@]}" "$@" \
    : --wdir "$W/node1" -np 1 "$TITAN" train "${COMMON[@]}" "${NL[@]}" "$@"
}
expect "ranks that see different checkpoints are refused: rank 1 sees none" error \
  "^rank [01]: .*run/checkpoint: the ranks do not see the same checkpoints .*rank 0 sees 2, step-2 to step-4; rank 1 sees none" \
  nodes
mkdir -p "$W/node1/run/checkpoint" && cp -r "$W/node0/run/checkpoint/step-2" "$W/node1/run/checkpoint/"
expect "  and rank 1 sees only the older one" error "rank 0 sees 2, step-2 to step-4; rank 1 sees step-2\. Every rank" \
  nodes
grep -q '"step":4,' "$W/node0/run/metrics.jsonl" && ! grep -q '"step":5,' "$W/node0/run/metrics.jsonl" &&
  [ "$(ls "$W/node0/run/checkpoint")" = "$(printf 'step-2\nstep-4')" ] &&
  [ "$(ls -A "$W/node1/run/checkpoint")" = step-2 ]
check "  no rank trained on (rank 0 logged no step after 4) or saved" $?
mpi 2 export "${COMMON[@]}" --job.dump_folder "$W/c1" --out "$W/hf" >"$W/exp.log" 2>&1
[ $? -ne 0 ] && grep -q "one process" "$W/exp.log"
check "export refuses several processes (it loads a checkpoint whole)" $?
"$TITAN" export "${COMMON[@]}" --job.dump_folder "$W/c4" --out "$W/hf" >"$W/exp.log" 2>&1 && [ -f "$W/hf/model.safetensors" ]
check "one process exports a checkpoint saved on 2 ranks" $?

# ---- failures end the whole job, in bounded time --------------------------------
# ended NAME START: the job ended non-zero, 60 s at most after START
ended() {
  local rc=$1 t0=$2 t1
  t1=$(date +%s)
  echo "  (exit $rc after $((t1 - t0)) s)"
  [ "$rc" -ne 0 ] && [ $((t1 - t0)) -le 60 ]
}
# 2000 steps: every run of FT is stopped at step 3 or so; at ~5 ms a step, 200 left the kill and the stop
# requests below under a second to land before the job ended by itself
FT=(--checkpoint.enable true --checkpoint.interval 2 --training.local_batch_size 1 --training.steps 2000)
for kind in exit hang; do
  t0=$(date +%s)
  timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${COMMON[@]}" "${FT[@]}" --job.dump_folder "$W/f_$kind" \
    --comm.fault_rank 1 --comm.fault_step 3 --comm.fault_kind "$kind" >"$W/f_$kind.log" 2>&1
  ended $? "$t0"
  check "rank 1 made to $kind at step 3: the job ends non-zero within 60 s" $?
  mpi 2 train "${COMMON[@]}" "${FT[@]}" --training.steps 4 --job.dump_folder "$W/f_$kind" >"$W/f_${kind}2.log" 2>&1 &&
    grep -q "resumed from .*step-2" "$W/f_${kind}2.log"
  check "  the last checkpoint loads" $?
done
grep -qE "^rank 0: .+ did not complete in 10 s: aborting the job" "$W/f_hang.log"
check "  the watchdog names the rank and what it waited for" $?

# SIGKILL one rank once the job is training
t0=$(date +%s)
timeout 120 "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${COMMON[@]}" "${FT[@]}" --job.dump_folder "$W/f_kill" \
  >"$W/f_kill.log" 2>&1 &
job=$!
wait_for "$W/f_kill/metrics.jsonl" '"step":3,'
# a rank: a process running the titan binary (mpirun's and timeout's command lines name the job too)
victim=
for p in $(pgrep -f "$W/f_kill"); do
  [ "$(readlink -f "/proc/$p/exe")" = "$(readlink -f "$TITAN")" ] && victim=$p
done
[ -n "$victim" ] && kill -KILL "$victim"
wait $job
ended $? "$t0"
check "a rank killed with SIGKILL mid-run: the job ends non-zero within 60 s" $?
mpi 2 train "${COMMON[@]}" "${FT[@]}" --training.steps 5 --job.dump_folder "$W/f_kill" >"$W/f_kill2.log" 2>&1 &&
  grep -q "resumed from .*step-" "$W/f_kill2.log"
check "  the last checkpoint loads" $?

# a stop request (SIGUSR1 to mpirun, which forwards it to every rank): all save the same step and exit 0
stops_on_signal "a stop request reaching mpirun: every rank saves the same step and the job exits 0" USR1 \
  "$W/stop/metrics.jsonl" '"step":3,' "$W/stop" "$W/stop.log" \
  "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${COMMON[@]}" "${FT[@]}" --checkpoint.interval 1000 \
  --job.dump_folder "$W/stop"

# a NaN on one rank stops them all, naming the step
expect "a NaN loss on rank 1 stops every rank at step 3" error "step 3: loss is NaN" \
  "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/f_nan" \
  --training.local_batch_size 1 --comm.fault_rank 1 --comm.fault_step 3 --comm.fault_kind nan
! grep -q '"step":3,' "$W/f_nan/metrics.jsonl"
check "  no rank logged the step" $?
# a NaN in one element of rank 1's gradients (the loss stays finite): the gradient norm, summed over the ranks, is
# NaN, which stops the job at that step, naming it, before the step is logged or saved
expect "a NaN gradient on rank 1 stops the job at step 3" error "step 3: gradient norm is NaN" \
  "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/f_nang" \
  --training.local_batch_size 1 --checkpoint.enable true --checkpoint.interval 1 \
  --comm.fault_rank 1 --comm.fault_step 3 --comm.fault_kind nan_grad
grep -q '"step":2,' "$W/f_nang/metrics.jsonl" && ! grep -q '"step":3,' "$W/f_nang/metrics.jsonl" &&
  [ -d "$W/f_nang/checkpoint/step-2" ] && [ ! -e "$W/f_nang/checkpoint/step-3" ]
check "  no rank logged or saved the step" $?

# ---- Mixture-of-Experts under FSDP/HSDP (expert weights sharded like any unit) ------------------
# the tokens per expert summed over the ranks, so the balancing bias moves as one process's: the same losses and
# the same bias and load every step; and a DeepSeek-V3-style model (MLA) saved on 2 ranks resumed on one
MOE=(--model.num_experts 4 --model.top_k 2 --model.moe_ffn_dim 64 --model.load_balance_coeff 1e-2)
# moe_stats FILE: each step's loss, bias spread and load per layer
moe_stats() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "loss" in r and "val_loss" not in r: print(r["step"], r["moe_bias_spread"], r["moe_load_max"], r["moe_load_min"])
' "$1"; }
"$TITAN" train "${COMMON[@]}" "${MOE[@]}" --job.dump_folder "$W/moe1" --training.local_batch_size 4 >"$W/moe1.log" 2>&1
check "MoE: one process, batch 4" $?
# moe_like_one "NAME NP ARGS..." ...: each MoE run on NP ranks gives the one-process run's losses, bias and load
moe_like_one() {
  local run name np
  for run in "$@"; do
    set -- $run
    name=$1 np=$2
    shift 2
    mpi "$np" train "${COMMON[@]}" "${MOE[@]}" --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1
    check "$name: trains" $?
    close "$W/moe1/metrics.jsonl" "$W/$name/metrics.jsonl"
    check "$name: the losses of one process with the whole batch (1e-5)" $?
    moe_stats "$W/moe1/metrics.jsonl" >"$W/sa" && moe_stats "$W/$name/metrics.jsonl" >"$W/sb" && [ -s "$W/sa" ] &&
      cmp -s "$W/sa" "$W/sb"
    check "$name: the balancing bias and the expert load of one process, every step" $?
  done
}
moe_like_one "moe_fsdp2 2 --training.local_batch_size 2" \
             "moe_hsdp2x2 4 --training.local_batch_size 1 --parallelism.data_parallel_replicate_degree 2" \
             "moe_fsdp2_accum2 2 --training.local_batch_size 1 --training.global_batch_size 4"
# auxiliary losses are per micro-batch: 2 ranks of 1 sequence each equal one process's 2 micro-batches of 1,
# the loss and the logged aux (each rank's weighed 1 / ranks, as each micro-batch's 1 / micro-batches)
AUX=(--model.router_aux_loss_coef 0.01 --model.router_z_loss_coef 1e-3 --training.local_batch_size 1)
"$TITAN" train "${COMMON[@]}" "${MOE[@]}" "${AUX[@]}" --job.dump_folder "$W/aux1" --training.global_batch_size 2 \
  >"$W/aux1.log" 2>&1 &&
  mpi 2 train "${COMMON[@]}" "${MOE[@]}" "${AUX[@]}" --job.dump_folder "$W/aux2" >"$W/aux2.log" 2>&1 &&
  close "$W/aux1/metrics.jsonl" "$W/aux2/metrics.jsonl" &&
  python3 - "$W/aux1/metrics.jsonl" "$W/aux2/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["aux_loss"] for l in open(p) if '"aux_loss"' in l] for p in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) == 20 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)) else 1)
PY
check "MoE auxiliary losses on 2 ranks: one process's per-micro-batch losses, logged aux included" $?
DS=(--config "$SRC/configs/deepseek_v3_debug.toml" --model.dim 64 --model.n_heads 2 --model.n_kv_heads 2
    --training.seq_len 256 --synthetic.train_tokens 200000 --synthetic.val_tokens 8192 --lr_scheduler.warmup_steps 2
    --lr_scheduler.decay_ratio 0 --training.steps 10 --metrics.log_freq 1 --metrics.peak_tflops 1
    --training.mixed_precision_param float32 --validation.enable false --generate.max_new_tokens 0
    --checkpoint.enable true --checkpoint.interval 5)
"$TITAN" train "${DS[@]}" --job.dump_folder "$W/ds1" --training.local_batch_size 4 >"$W/ds1.log" 2>&1 &&
  mpi 2 train "${DS[@]}" --job.dump_folder "$W/ds2" --training.local_batch_size 2 --training.steps 5 >"$W/ds2.log" 2>&1 &&
  "$TITAN" train "${DS[@]}" --job.dump_folder "$W/ds2" --training.local_batch_size 4 >"$W/ds2b.log" 2>&1 &&
  grep -q "resumed from .*step-5" "$W/ds2b.log" &&
  step_losses "$W/ds1/metrics.jsonl" | awk '$1 > 5' >"$W/la" && step_losses "$W/ds2/metrics.jsonl" | awk '$1 > 5' >"$W/lb" &&
  [ "$(wc -l <"$W/la")" -eq 5 ] &&
  paste "$W/la" "$W/lb" | awk '{ d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1 } END { exit bad }'
check "DeepSeek-V3 style (MLA + MoE) saved on 2 ranks resumes on one with one process's losses" $?
# GPT-OSS (the gpt_oss fixture: attention sinks, a biased router, experts with biases and the clamped SwiGLU, their
# packed tensors) under FSDP 2, EP 2 and EP 2 x FSDP 2: one process's losses
OSS=(--model.hf_assets_path "$SRC/tests/fixtures/hf/gpt_oss" --checkpoint.initial_load_in_hf true --training.seq_len 256
     --synthetic.train_tokens 100000 --synthetic.val_tokens 8192 --lr_scheduler.warmup_steps 2 --training.steps 20
     --metrics.log_freq 1 --metrics.peak_tflops 1 --training.mixed_precision_param float32 --validation.enable false
     --generate.max_new_tokens 0 --checkpoint.enable true --checkpoint.interval 100 --comm.timeout_seconds 10
     --model.load_balance_coeff 0)
"$TITAN" train "${OSS[@]}" --job.dump_folder "$W/oss1" --training.local_batch_size 4 >"$W/oss1.log" 2>&1
check "GPT-OSS: one process, batch 4" $?
for run in "oss_fsdp2 2 --training.local_batch_size 2" \
           "oss_ep2 2 --training.local_batch_size 2 --parallelism.expert_parallel_degree 2" \
           "oss_ep2_fsdp2 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 2"; do
  set -- $run
  name=$1 np=$2
  shift 2
  mpi "$np" train "${OSS[@]}" --job.dump_folder "$W/$name" "$@" >"$W/$name.log" 2>&1 &&
    close "$W/oss1/metrics.jsonl" "$W/$name/metrics.jsonl"
  check "GPT-OSS (sinks, biased experts, the clamped SwiGLU), $name: one process's losses" $?
done

# ---- expert parallelism ---------------------------------------------------------------
# each MoE layer's experts split over the ranks of an expert group, tokens exchanged by all-to-all: one process's
# losses (1e-5), balancing bias and expert load every step; EP 2 alone, EP 2 x FSDP 2 (the experts sharded over
# the 2 ranks that share a place), EP 4, EP 2 under HSDP, with accumulation, with merged buckets kept gathered,
# with full activation checkpointing, and EP 4 with its receive buffer at half the worst case (top-2 of 4
# experts: an expert gets at most every token, twice the mean, so a rank holding one receives at most twice its
# own rows)
moe_like_one "ep2 2 --training.local_batch_size 2 --parallelism.expert_parallel_degree 2" \
             "ep2_fsdp2 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 2" \
             "ep4 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 4" \
             "ep2_hsdp2x2 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 2 --parallelism.data_parallel_replicate_degree 2" \
             "ep2_accum2 2 --training.local_batch_size 1 --training.global_batch_size 4 --parallelism.expert_parallel_degree 2" \
             "ep4_bound 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 4 --parallelism.expert_receive_factor 2" \
             "ep2_fsdp2_merged_kept 4 --training.local_batch_size 1 --parallelism.expert_parallel_degree 2 --parallelism.fsdp_bucket_bytes 1000000 --parallelism.fsdp_reshard_after_forward never" \
             "ep2_full_ac 2 --training.local_batch_size 2 --parallelism.expert_parallel_degree 2 --activation_checkpoint.mode full"
# validation under EP 2 (its forward exchanges too): one process's validation loss
VAL=(--training.steps 10 --validation.enable true --validation.freq 10 --validation.steps 2)
"$TITAN" train "${COMMON[@]}" "${MOE[@]}" "${VAL[@]}" --job.dump_folder "$W/epv1" --training.local_batch_size 4 \
  --validation.local_batch_size 4 >"$W/epv1.log" 2>&1 &&
  mpi 2 train "${COMMON[@]}" "${MOE[@]}" "${VAL[@]}" --job.dump_folder "$W/epv2" --training.local_batch_size 2 \
    --validation.local_batch_size 2 --parallelism.expert_parallel_degree 2 >"$W/epv2.log" 2>&1 &&
  grep "^validation loss" "$W/epv1.log" >"$W/va" && grep "^validation loss" "$W/epv2.log" >"$W/vb" && [ -s "$W/va" ] &&
  cmp -s "$W/va" "$W/vb"
check "validation under EP 2: one process's validation loss" $?
# debug mode under EP 2 (the ref backend, every output checked for NaN/Inf, the receive buffers' unused tails
# included): one process's debug-mode losses, exactly
DBG=(--training.steps 3 --training.exec_mode debug)
"$TITAN" train "${COMMON[@]}" "${MOE[@]}" "${DBG[@]}" --job.dump_folder "$W/epd1" --training.local_batch_size 4 \
  >"$W/epd1.log" 2>&1 &&
  mpi 2 train "${COMMON[@]}" "${MOE[@]}" "${DBG[@]}" --job.dump_folder "$W/epd2" --training.local_batch_size 2 \
    --parallelism.expert_parallel_degree 2 >"$W/epd2.log" 2>&1 &&
  step_losses "$W/epd1/metrics.jsonl" >"$W/la" && step_losses "$W/epd2/metrics.jsonl" >"$W/lb" &&
  [ "$(wc -l <"$W/la")" -eq 3 ] && cmp -s "$W/la" "$W/lb"
check "debug mode (ref backend, NaN checks) under EP 2: one process's losses" $?
grep -q "experts over 2 (2 a rank)" "$W/ep2_fsdp2.log" && grep -q "received" "$W/ep2.log"
check "the log says how the experts are split and what each rank received" $?
# saved with EP 2 on 4 ranks (each rank's experts sliced over 2), resumed without expert parallelism on 2 and on 1
mpi 4 train "${COMMON[@]}" "${MOE[@]}" "${CK[@]}" --job.dump_folder "$W/ec4" --training.local_batch_size 1 \
  --parallelism.expert_parallel_degree 2 >"$W/ec4.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/ec4/checkpoint/step-10/shard-00003-of-00004.safetensors" ]
check "EP 2 on 4 ranks: a checkpoint of one file a shard, then the run dies" $?
cp -r "$W/ec4" "$W/ec4b"
mpi 2 train "${COMMON[@]}" "${MOE[@]}" --checkpoint.enable true --job.dump_folder "$W/ec4" \
  --training.local_batch_size 2 >"$W/ec42.log" 2>&1 && grep -q "resumed from .*step-10" "$W/ec42.log" &&
  close "$W/moe1/metrics.jsonl" "$W/ec4/metrics.jsonl" 11
check "saved with EP 2 on 4 ranks, resumed with EP 1 on 2: one process's losses continue" $?
"$TITAN" train "${COMMON[@]}" "${MOE[@]}" --checkpoint.enable true --job.dump_folder "$W/ec4b" \
  --training.local_batch_size 4 >"$W/ec41.log" 2>&1 && grep -q "resumed from .*step-10" "$W/ec41.log" &&
  close "$W/moe1/metrics.jsonl" "$W/ec4b/metrics.jsonl" 11
check "saved with EP 2 on 4 ranks, resumed on 1: one process's losses continue" $?
# and across expert degrees: saved with EP 4 on 4 ranks, resumed with EP 2 on 2
mpi 4 train "${COMMON[@]}" "${MOE[@]}" "${CK[@]}" --job.dump_folder "$W/ec44" --training.local_batch_size 1 \
  --parallelism.expert_parallel_degree 4 >"$W/ec44.log" 2>&1
[ $? -ne 0 ] && [ -f "$W/ec44/checkpoint/step-10/meta.json" ] &&
  mpi 2 train "${COMMON[@]}" "${MOE[@]}" --checkpoint.enable true --job.dump_folder "$W/ec44" \
    --training.local_batch_size 2 --parallelism.expert_parallel_degree 2 >"$W/ec442.log" 2>&1 &&
  grep -q "resumed from .*step-10" "$W/ec442.log" && close "$W/moe1/metrics.jsonl" "$W/ec44/metrics.jsonl" 11
check "saved with EP 4 on 4 ranks, resumed with EP 2 on 2: one process's losses continue" $?
# a layout whose expert pieces do not cover the model exactly once is refused by name
mkdir -p "$W/badep/checkpoint" && cp -r "$W/ec44/checkpoint/step-10" "$W/badep/checkpoint/" &&
  python3 - "$W/badep/checkpoint/step-10/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
b = next(b for b in m["layout"]["buckets"] if isinstance(b, dict) and b["experts"])
b["pieces"][0][2] = 0  # every place's gate/up experts on top of place 0's
json.dump(m, open(sys.argv[1], "w"))
PY
expect "a checkpoint whose expert pieces overlap is refused" error "meta.json: the layout's buckets repeat element" \
  "$TITAN" train "${COMMON[@]}" "${MOE[@]}" --checkpoint.enable true --job.dump_folder "$W/badep" \
    --training.local_batch_size 4
# an expert degree (up to 2^20 in the file) that does not divide the model's experts is refused by name before the
# layout's pieces (buckets x 2 x the degree) are allocated
python3 - "$W/badep/checkpoint/step-10/meta.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["layout"]["shards"] = m["layout"]["expert_parallel"] = 1 << 20
json.dump(m, open(sys.argv[1], "w"))
PY
expect "a checkpoint layout whose expert degree does not divide the model's experts is refused" error \
  "badep/checkpoint/step-10/meta.json: layout 'expert_parallel' = 1048576 does not divide the 4 experts of layers.0" \
  "$TITAN" train "${COMMON[@]}" "${MOE[@]}" --checkpoint.enable true --job.dump_folder "$W/badep" \
    --training.local_batch_size 4
# a skewed router: a DeepSeek-V3-style export whose selection bias sends every token to experts 0-3 (rank 0's
# under EP 2 of 8 experts): nothing is lost (one process's losses and load), and a receive bound below what
# rank 0 needs stops the run with an error naming the key
"$TITAN" export "${DS[@]}" --job.dump_folder "$W/ds1" --out "$W/ds_hf" >"$W/ds_export.log" 2>&1 &&
  python3 - "$W/ds_hf/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
found = 0
for k, v in json.loads(b[8:8 + n]).items():
    if k.endswith("e_score_correction_bias"):
        a, z = v["data_offsets"]
        b[8 + n + a:8 + n + z] = struct.pack("<8f", *([10.0] * 4 + [0.0] * 4))
        found += 1
open(sys.argv[1], "wb").write(b)
sys.exit(0 if found == 3 else 1)
PY
check "a DeepSeek-V3-style export with its selection bias skewed to experts 0-3" $?
SKEW=(--model.hf_assets_path "$W/ds_hf" --checkpoint.initial_load_in_hf true --model.load_balance_coeff 1e-3
      --training.seq_len 256 --synthetic.train_tokens 200000 --synthetic.val_tokens 8192 --lr_scheduler.warmup_steps 2
      --training.steps 20 --metrics.log_freq 1 --metrics.peak_tflops 1 --training.mixed_precision_param float32
      --validation.enable false --generate.max_new_tokens 0 --checkpoint.enable true --checkpoint.interval 20
      --comm.timeout_seconds 10)
"$TITAN" train "${SKEW[@]}" --job.dump_folder "$W/skew1" --training.local_batch_size 4 >"$W/skew1.log" 2>&1 &&
  mpi 2 train "${SKEW[@]}" --job.dump_folder "$W/skew2" --training.local_batch_size 2 \
    --parallelism.expert_parallel_degree 2 --checkpoint.last_save_in_hf true --generate.max_new_tokens 8 \
    >"$W/skew2.log" 2>&1 &&
  close "$W/skew1/metrics.jsonl" "$W/skew2/metrics.jsonl" &&
  moe_stats "$W/skew1/metrics.jsonl" >"$W/sa" && moe_stats "$W/skew2/metrics.jsonl" >"$W/sb" && cmp -s "$W/sa" "$W/sb" &&
  [ "$(grep -c '"ep_recv_max_over_mean":2,' "$W/skew2/metrics.jsonl")" -eq 20 ]
check "a skewed router under EP 2 (rank 0 receives every row, twice the mean): one process's losses and load" $?
# the balancing bias itself, after 20 updates: the EP run's (each rank wrote its pieces) is one process's, bitwise
"$TITAN" export "${SKEW[@]}" --job.dump_folder "$W/skew1" --out "$W/skew1_hf" >"$W/skew1_export.log" 2>&1 &&
  "$TITAN" export "${SKEW[@]}" --job.dump_folder "$W/skew2" --out "$W/skew2_hf" >"$W/skew2_export.log" 2>&1 &&
  python3 - "$W/skew1_hf/model.safetensors" "$W/skew2_hf/model.safetensors" <<'PY'
import json, struct, sys
def biases(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in json.loads(b[8:8 + n]).items() if k.endswith("e_score_correction_bias")}
a, b = biases(sys.argv[1]), biases(sys.argv[2])
moved = any(struct.unpack("<8f", v) != tuple([10.0] * 4 + [0.0] * 4) for v in a.values())
sys.exit(0 if len(a) == 3 and a == b and moved else 1)
PY
check "  the balancing bias after 20 steps under EP 2 is one process's, bitwise (and it moved)" $?
# the export at the end of the EP run (every rank's experts gathered on rank 0) is the one a process makes from
# its checkpoint, bitwise; and the run's closing sample came from rank 0
cmp -s "$W/skew2/hf/model.safetensors" "$W/skew2_hf/model.safetensors" && [ "$(grep -c "^sample" "$W/skew2.log")" -eq 1 ]
check "  its export at the end (experts gathered from both ranks) is the checkpoint's, bitwise, and it sampled" $?
expect "a receive bound the skew exceeds stops the run, naming the key" error "parallelism.expert_receive_factor" \
  mpi 2 train "${SKEW[@]}" --job.dump_folder "$W/skew3" --training.local_batch_size 2 \
    --parallelism.expert_parallel_degree 2 --parallelism.expert_receive_factor 1.5
expect "expert parallelism on a dense model is refused" error "expert_parallel_degree = 2 needs a Mixture-of-Experts" \
  mpi 2 train "${COMMON[@]}" --job.dump_folder "$W/epd" --parallelism.expert_parallel_degree 2
expect "an expert degree that does not divide the shard degree is refused" error "must divide data_parallel_shard_degree" \
  mpi 2 train "${COMMON[@]}" "${MOE[@]}" --job.dump_folder "$W/ep3" --parallelism.expert_parallel_degree 4

# ---- refused before training --------------------------------------------------------
expect "ranks with different configs are refused" error "differ" \
  "$MPIEXEC" --oversubscribe -np 1 "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/mm" --optimizer.lr 1e-3 \
  : -np 1 "$TITAN" train "${COMMON[@]}" --job.dump_folder "$W/mm" --optimizer.lr 2e-3
expect "a mesh that does not fit the world is refused" error "data_parallel_replicate_degree.*2 processes|2 processes.*replicate" \
  mpi 2 train "${COMMON[@]}" --job.dump_folder "$W/mesh" --parallelism.data_parallel_replicate_degree 4
expect "a global batch the ranks do not divide is refused" error "global_batch_size = 6.*local_batch_size x ranks" \
  mpi 4 train "${COMMON[@]}" --job.dump_folder "$W/gb" --training.local_batch_size 1 --training.global_batch_size 6
cli_done mpi_train

#!/usr/bin/env bash
# mpi_resume_read.sh TITAN SRC [MPIEXEC] — on resume each rank reads its own
# slices of the checkpoint, and the chunks of them it checks (meta.json
# records an XXH64 a chunk), not the whole checkpoint: a 2-rank FSDP run's
# checkpoint, resumed on 2 ranks and resharded onto 4, and each rank's data
# bytes read (the resume log's line, which the checkpoint reader counts) at
# most its share (the files' bytes over the ranks) x 1.1; a flipped byte in
# one rank's slice stops the resume on every rank, naming the file and chunk.
set -u
. "$(dirname "$0")/lib_mpi.sh" "$@" # TITAN SRC MPIEXEC; W, check, cli_done, ...
RUN=(--config "$SRC/configs/default.toml" --training.local_batch_size 2 --generate.max_new_tokens 0
     --validation.enable false --metrics.log_freq 1 --checkpoint.enable true --checkpoint.interval 4
     --checkpoint.keep_latest_k 0 --job.dump_folder "$W/run" --comm.timeout_seconds 60)
fsdp() { # fsdp NP SHARDS STEPS LOG: titan train on NP ranks, SHARDS-way FSDP
  "$MPIEXEC" --oversubscribe -np "$1" "$TITAN" train "${RUN[@]}" --parallelism.data_parallel_shard_degree "$2" \
    --training.steps "$3" >"$4" 2>&1
}
# read_ok LOG NP: every rank's data bytes at most its share x 1.1 (prints them)
read_ok() {
  local line total
  line=$(grep -m 1 "checkpoint bytes read" "$1") || return 1
  total=$(cat "$W"/run/checkpoint/step-4/*.safetensors | wc -c)
  echo "     $line (the files: $total bytes)"
  echo "$line" | grep -o "rank [0-9]* [0-9]* + [0-9]*" | awk -v t="$total" -v n="$2" '
    { got[$2] = $3 } END { if (length(got) != n) exit 1; for (k in got) if (got[k] > 1.1 * t / n) exit 1 }'
}
fsdp 2 2 4 "$W/save.log"
check "a 2-rank FSDP run saves step 4" $?
fsdp 2 2 6 "$W/two.log" && grep -q "resumed from .*step-4" "$W/two.log"
check "resumed on 2 ranks" $?
read_ok "$W/two.log" 2
check "on 2 ranks each reads at most its half x 1.1" $?
rm -rf "$W/run/checkpoint/step-6"
fsdp 4 4 6 "$W/four.log" && grep -q "resumed from .*step-4" "$W/four.log"
check "resharded onto 4 ranks" $?
read_ok "$W/four.log" 4
check "on 4 ranks each reads at most its quarter x 1.1" $?
rm -rf "$W/run/checkpoint/step-6"
# a flipped byte past the header, in rank 1's file: found by the rank that reads it, and every rank stops
f=$(ls "$W"/run/checkpoint/step-4/*.safetensors | tail -1)
size=$(wc -c <"$f")
printf '\x55' | dd of="$f" bs=1 seek=$((size - 4000)) conv=notrunc status=none
fsdp 2 2 6 "$W/bad.log"
rc=$?
[ $rc -ne 0 ] && grep -q "$(basename "$f"): bytes .* (chunk [0-9]*) have XXH64 .* (corrupt checkpoint)" "$W/bad.log" &&
  ! grep -q "resumed from" "$W/bad.log"
check "a corrupt chunk stops the resume on every rank, naming the file and chunk (exit $rc)" $?
cli_done mpi_resume_read

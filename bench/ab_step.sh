#!/usr/bin/env bash
# Two titan binaries' training step side by side: `titan bench step` on a
# config in one dtype, the binaries alternated (A, B, A, B, ...) ROUNDS times
# each, and the median tokens/s of each with the median of the per-round
# ratios B/A (each round's pair ran back to back, so its ratio sees the same
# machine). For checking that a
# change costs no speed: run it on a quiet machine, nothing else running.
# Usage: bench/ab_step.sh TITAN_A TITAN_B CONFIG DTYPE [ROUNDS] [STEPS] [WARMUP]
#   DTYPE: float32 or bfloat16; ROUNDS 5, STEPS 3, WARMUP 1 by default.
#   LAUNCH (environment): a launcher to run each binary under, e.g.
#   LAUNCH="mpirun --oversubscribe -np 2"; EXTRA (environment): more
#   arguments for bench step, e.g. EXTRA="--parallelism.expert_parallel_degree 2".
set -eu
A=$1 B=$2 CONFIG=$3 DTYPE=$4 ROUNDS=${5:-5} STEPS=${6:-3} WARMUP=${7:-1}
. "$(dirname "$0")/median.sh"
tps() { # tokens/s of one run of binary $1
  ${LAUNCH:-} "$1" bench step --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" \
    --training.mixed_precision_param "$DTYPE" ${EXTRA:-} | sed -n 's/^tokens\/s *\([0-9.]*\).*/\1/p'
}
ra=() rb=()
for ((r = 1; r <= ROUNDS; r++)); do
  ra+=("$(tps "$A")")
  rb+=("$(tps "$B")")
  echo "round $r: A ${ra[-1]} tok/s, B ${rb[-1]} tok/s" >&2
done
ma=$(printf '%s\n' "${ra[@]}" | median)
mb=$(printf '%s\n' "${rb[@]}" | median)
ratios=()
for ((r = 0; r < ROUNDS; r++)); do ratios+=("$(awk -v a="${ra[r]}" -v b="${rb[r]}" 'BEGIN { printf "%.4f", b / a }')"); done
mr=$(printf '%s\n' "${ratios[@]}" | median)
echo "$(basename "$CONFIG" .toml) $DTYPE: A median $ma tok/s [${ra[*]}], B median $mb tok/s [${rb[*]}], B/A median of rounds $(printf '%.3f' "$mr") [${ratios[*]}]"

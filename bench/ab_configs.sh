#!/usr/bin/env bash
# Two configs' training step side by side on one titan binary: `titan bench
# step` on each, alternated (A, B, A, B, ...) ROUNDS times, and the median step
# time, tokens/s and MFU of each with the ratio of step times B/A. For the MoE
# workload against its dense peer (docs/performance.md): run it on a quiet
# machine, nothing else running.
# Usage: bench/ab_configs.sh TITAN CONFIG_A CONFIG_B [ROUNDS] [STEPS] [WARMUP]
#   ROUNDS 5, STEPS 5, WARMUP 2 by default.
set -eu
T=$1 A=$2 B=$3 ROUNDS=${4:-5} STEPS=${5:-5} WARMUP=${6:-2}
. "$(dirname "$0")/median.sh"
run() { # "step_ms tok/s mfu" of one run on config $1
  "$T" bench step --config "$1" --steps "$STEPS" --warmup "$WARMUP" | awk '
    /^step / { ms = $2 } /^tokens\/s/ { tps = $2 } /^TFLOP\/s/ { mfu = $4; sub("%", "", mfu) }
    END { print ms, tps, mfu }'
}
sa=() sb=() ta=() tb=() fa=() fb=()
for ((r = 1; r <= ROUNDS; r++)); do
  read -r s t f < <(run "$A"); sa+=("$s") ta+=("$t") fa+=("$f")
  read -r s t f < <(run "$B"); sb+=("$s") tb+=("$t") fb+=("$f")
  echo "round $r: A ${sa[-1]} ms (${ta[-1]} tok/s, MFU ${fa[-1]}%), B ${sb[-1]} ms (${tb[-1]} tok/s, MFU ${fb[-1]}%)" >&2
done
m() { printf '%s\n' "$@" | median; }
msa=$(m "${sa[@]}") msb=$(m "${sb[@]}")
echo "A $(basename "$A" .toml): median step $msa ms, $(m "${ta[@]}") tok/s, MFU $(m "${fa[@]}")% [${sa[*]}]"
echo "B $(basename "$B" .toml): median step $msb ms, $(m "${tb[@]}") tok/s, MFU $(m "${fb[@]}")% [${sb[*]}]"
echo "step time B/A $(awk -v a="$msa" -v b="$msb" 'BEGIN { printf "%.3f", b / a }')"

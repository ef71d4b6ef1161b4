#!/usr/bin/env bash
# Two titan binaries' attention kernels side by side: `titan bench attention`
# (the best of REPS runs each of the forward and the backward) on a config,
# the binaries alternated (A, B, A, B, ...) ROUNDS times each, then each
# round's speed-up A time / B time and the median of those, forward and
# backward apart (each round's pair ran back to back, so its ratio sees the
# same machine). Run it on a quiet machine, nothing else running.
# Usage: bench/ab_attention.sh TITAN_A TITAN_B CONFIG DTYPE [ROUNDS] [REPS] [--section.key value ...]
#   DTYPE: float32 or bfloat16; ROUNDS 5 and REPS 20 by default; the
#   arguments after them go to bench attention (--training.seq_len 2048, ...).
#   ENV_A, ENV_B (environment): settings for A's and B's runs, e.g.
#   ENV_A=TITAN_ATTENTION=portable to set one binary's two paths side by side.
set -eu
A=$1 B=$2 CONFIG=$3 DTYPE=$4 ROUNDS=${5:-5} REPS=${6:-20}
shift $(($# < 6 ? $# : 6))
. "$(dirname "$0")/median.sh"
run() { # "forward_ms backward_ms forward_GFLOP/s backward_GFLOP/s" of one run of binary $2 with the settings $1
  local set=$1 bin=$2 out
  shift 2
  out=$(env $set "$bin" bench attention --config "$CONFIG" --reps "$REPS" --training.mixed_precision_param "$DTYPE" "$@")
  awk '/^forward/ { f = $2; fg = $4 } /^backward/ { b = $2; bg = $4 }
       END { if (f == "" || b == "") exit 1; print f, b, fg, bg }' <<<"$out" ||
    { echo "ab_attention.sh: $bin bench attention printed no forward and backward times" >&2; exit 1; }
}
fr=() br=()
for ((r = 1; r <= ROUNDS; r++)); do
  ra=$(run "${ENV_A:-}" "$A" "$@")
  rb=$(run "${ENV_B:-}" "$B" "$@")
  read -r fa ba fga bga <<<"$ra"
  read -r fb bb fgb bgb <<<"$rb"
  fr+=("$(awk -v a="$fa" -v b="$fb" 'BEGIN { printf "%.3f", a / b }')")
  br+=("$(awk -v a="$ba" -v b="$bb" 'BEGIN { printf "%.3f", a / b }')")
  echo "round $r: forward A $fa ms ($fga GFLOP/s), B $fb ms ($fgb GFLOP/s): ${fr[-1]}x;" \
    "backward A $ba ms ($bga GFLOP/s), B $bb ms ($bgb GFLOP/s): ${br[-1]}x"
done
echo "$CONFIG $DTYPE $*: A time / B time, median of the rounds: forward $(printf '%s\n' "${fr[@]}" | median) [${fr[*]}], backward $(printf '%s\n' "${br[@]}" | median) [${br[*]}]"

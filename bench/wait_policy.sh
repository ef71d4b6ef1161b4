#!/usr/bin/env bash
# The OpenMP runtime's wait settings side by side: `titan bench step` on a
# config (bf16) with each setting in turn, rounds alternating them, on the
# quiet machine or beside one busy process (a shell loop on one core, as a
# laptop's other program would be). The order rotates each round. Prints
# each round's tokens/s and, per setting, the median of the per-round ratios
# to the first setting.
# Usage: bench/wait_policy.sh TITAN CONFIG quiet|busy [ROUNDS] [SETTING ...]
#   SETTING: a GOMP_SPINCOUNT figure (300000 is libgomp's own default, 3000
#   titan's) or "passive" (OMP_WAIT_POLICY=passive); by default 300000 3000 passive.
set -eu
TITAN=$1 CONFIG=$2 LOAD=$3 ROUNDS=${4:-3}
shift $(($# < 4 ? $# : 4))
SETTINGS=("$@")
[ $# -eq 0 ] && SETTINGS=(300000 3000 passive)
. "$(dirname "$0")/median.sh"
tps() { # tokens/s of one run with setting $1
  local e=(GOMP_SPINCOUNT="$1")
  [ "$1" = passive ] && e=(OMP_WAIT_POLICY=passive)
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "${e[@]}" "$TITAN" bench step --config "$CONFIG" --steps 4 --warmup 2 \
    --training.mixed_precision_param bfloat16 | sed -n 's/^tokens\/s *\([0-9.]*\).*/\1/p'
}
busy=
if [ "$LOAD" = busy ]; then
  sh -c 'while :; do :; done' &
  busy=$!
  trap 'kill $busy' EXIT
fi
declare -A ratios
for ((r = 1; r <= ROUNDS; r++)); do
  declare -A got=()
  n=${#SETTINGS[@]}
  for ((i = 0; i < n; i++)); do # this round's order starts at setting (r - 1) mod n
    s=${SETTINGS[(r - 1 + i) % n]}
    got[$s]=$(tps "$s")
  done
  line="round $r:"
  for s in "${SETTINGS[@]}"; do
    line="$line $s ${got[$s]}"
    ratios[$s]="${ratios[$s]:-} $(awk -v a="${got[${SETTINGS[0]}]}" -v b="${got[$s]}" 'BEGIN { printf "%.3f", b / a }')"
  done
  echo "$line tok/s (first ran: ${SETTINGS[(r - 1) % n]})"
done
for s in "${SETTINGS[@]:1}"; do
  echo "$(basename "$CONFIG" .toml) $LOAD: $s / ${SETTINGS[0]}, median of rounds $(printf '%s\n' ${ratios[$s]} | median) [${ratios[$s]# }]"
done

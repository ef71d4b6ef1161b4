#!/usr/bin/env bash
# The close-to-the-limit issue's whole campaign on whichever host the machine
# is on, one job at a time, with one titan binary: the host and its peak, the
# bf16 GEMM against oneDNN, attention, the step side by side with PyTorch,
# and MFU in alternated rounds with the peak measured right before each step
# run. Prints every tool's own output as it goes (kept in OUT_DIR), then one
# table: each target and what was measured. Run it on a quiet machine.
#
# Usage: bench/targets.sh TITAN TORCH_PYTHON [OUT_DIR] [ROUNDS]
#   TORCH_PYTHON: a python with pip's torch (the peers of bench/side_by_side.py);
#   OUT_DIR: where the tools' outputs go (default targets-<UTC time>); ROUNDS: 3.
#   TABLE_ONLY=1 (environment): measure nothing, print the table from OUT_DIR's outputs again.
set -eu
TITAN=$1 PY=$2 OUT=${3:-targets-$(date -u +%Y%m%dT%H%M%S)} ROUNDS=${4:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/median.sh"
mkdir -p "$OUT"
say() { echo "== $* ($(date -u +%H:%M:%S) UTC)" >&2; }
peak_bf16() { sed -n 's/^bf16 *\([0-9.]*\) GFLOP\/s.*/\1/p' "$1"; }
peak_f32() { sed -n 's/^fp32 *\([0-9.]*\) GFLOP\/s.*/\1/p' "$1"; }

if [ "${TABLE_ONLY:-0}" != 1 ]; then
# ---- the host ------------------------------------------------------------------------------------------
say "host"
{
  echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), family $(grep -m1 '^cpu family' /proc/cpuinfo |
    cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
  echo "titan: $TITAN, commit $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  date -u
} | tee "$OUT/host.txt" >&2
"$TITAN" bench peak --seconds 0.5 | tee "$OUT/peak0.txt" >&2

# ---- GEMM ----------------------------------------------------------------------------------------------
say "bench gemm"
"$TITAN" bench gemm --config configs/llama_768.toml --dtype bf16 | tee "$OUT/gemm.txt" >&2
python3 "$HERE/gemm_weighted.py" --layers 12 "$OUT/gemm.txt" | tee "$OUT/gemm_weighted.txt" >&2

# ---- attention -----------------------------------------------------------------------------------------
say "bench attention"
"$TITAN" bench attention --config configs/llama_768.toml --training.mixed_precision_param bfloat16 |
  tee "$OUT/attn256.txt" >&2
"$TITAN" bench attention --config configs/llama_768.toml --training.mixed_precision_param bfloat16 \
  --training.seq_len 2048 --training.local_batch_size 1 | tee "$OUT/attn2048.txt" >&2
"$TITAN" bench peak --seconds 0.5 | tee "$OUT/peak1.txt" >&2

# ---- side by side --------------------------------------------------------------------------------------
say "side by side"
python3 "$HERE/side_by_side.py" --titan "$TITAN" --python "$PY" --compile --config configs/llama_768.toml \
  --dtype bf16 --steps 4 --warmup 2 --rounds "$ROUNDS" | tee "$OUT/sbs_llama_768.txt" >&2
python3 "$HERE/side_by_side.py" --titan "$TITAN" --python "$PY" --compile --config configs/llama_288.toml \
  --dtype bf16 --steps 8 --warmup 3 --rounds "$ROUNDS" | tee "$OUT/sbs_llama_288.txt" >&2
python3 "$HERE/side_by_side.py" --titan "$TITAN" --python "$PY" --config configs/moe_288.toml \
  --dtype bf16 --steps 4 --warmup 2 --rounds "$ROUNDS" | tee "$OUT/sbs_moe_288.txt" >&2

# ---- MFU: rounds over the configs, the peak right before each step run ---------------------------------
say "MFU"
CONFIGS=("llama_768 bfloat16" "llama_768 float32" "llama_288 bfloat16" "llama_288 float32" "moe_288 bfloat16")
for ((r = 1; r <= ROUNDS; r++)); do
  for c in "${CONFIGS[@]}"; do
    set -- $c
    "$TITAN" bench peak --seconds 0.5 >"$OUT/mfu_peak_$1_$2_$r.txt"
    "$TITAN" bench step --config "configs/$1.toml" --training.mixed_precision_param "$2" --steps 4 --warmup 2 \
      >"$OUT/mfu_$1_$2_$r.txt"
    echo "round $r $1 $2: $(grep -E '^(tokens/s|TFLOP/s)' "$OUT/mfu_$1_$2_$r.txt" | tr -s ' ' | tr '\n' ' ')" >&2
  done
done

fi

# ---- the table -----------------------------------------------------------------------------------------
pk=$(peak_bf16 "$OUT/peak0.txt") pk1=$(peak_bf16 "$OUT/peak1.txt")
# a row of bench gemm: titan's % of peak for the product named $1 (its label column)
gemm_pct() { awk -v name="$1" -F'|' 'index($1, name) { split($2, a, " "); sub("%", "", a[2]); print a[2]; exit }' "$OUT/gemm.txt"; }
squares=$(for s in "1024x1024x1024" "2048x2048x2048" "4096x4096x4096"; do gemm_pct "$s"; done | tr '\n' ' ')
weighted=$(sed -n 's/.*GFLOP\/s, \([0-9.]*\)% of the.*/\1/p' "$OUT/gemm_weighted.txt" | head -1)
lowest=$(awk -F'|' '/ (nn|nt|tn|tt) / && !/square|1024x1024x1024|2048x2048x2048|4096x4096x4096/ {
  split($2, a, " "); sub("%", "", a[2]); if (min == "" || a[2] + 0 < min + 0) { min = a[2]; n = $1 } }
  END { gsub(/  +/, " ", n); print min "% (" n ")" }' "$OUT/gemm.txt")
fastest=$(grep -m1 '^bf16 fastest' "$OUT/gemm.txt" | sed 's/^bf16 fastest: //')
# attention: GFLOP/s of the forward and the backward as % of the peak measured around them
attn() { awk -v p="$(echo "$pk $pk1" | awk '{ print ($1 + $2) / 2 }')" '/^(forward|backward)/ {
  printf "%s%.1f%%", (n++ ? " / " : ""), 100 * $4 / p }' "$1"; }
# the median of the per-round ratios of a side-by-side run
ratios() { sed -n 's/^round [0-9]*: titan.*ratio \([0-9.]*\)$/\1/p' "$1"; }
moe_ratios() { # per round: titan over the faster PyTorch mode's tokens/s (the mode faster by the medians)
  local best
  best=$(sed -n 's/^faster PyTorch mode: \([a-z]*\).*/\1/p; s/^PyTorch mode: \([a-z]*\).*/\1/p' "$1")
  sed -n "s/^round [0-9]*: .*torch $best [0-9,]* tok\/s (ratio \([0-9.]*\)).*/\1/p" "$1"
}
mfu() { # MFU of config $1 dtype $2 in each round, and their median
  local v
  v=$(for ((r = 1; r <= ROUNDS; r++)); do sed -n 's/.*MFU \([0-9.]*\)% of.*/\1/p' "$OUT/mfu_$1_$2_$r.txt"; done)
  echo "$(echo "$v" | median)% (rounds $(echo $v))"
}
med() { "$@" | median; }
{
  echo
  echo "host: $(head -1 "$OUT/host.txt"); bench peak bf16 $pk GFLOP/s (then $pk1), fp32 $(peak_f32 "$OUT/peak0.txt")"
  echo "(GEMM: % of the peak line bench gemm prints; attention: of the mean of the two bench peak runs around it)"
  echo "| target | measured |"
  echo "|---|---|"
  echo "| bf16 GEMM >= 90% of peak on the 1024-4096 squares | $(echo $squares) |"
  echo "| llama_768 step products >= 85% time-weighted, none below 70% | $weighted%; lowest $lowest |"
  echo "| >= oneDNN on 15 of 18 products | $fastest |"
  echo "| attention T 256 >= 40% fwd / 50% bwd | $(attn "$OUT/attn256.txt") |"
  echo "| attention T 2048 >= 65% | $(attn "$OUT/attn2048.txt") |"
  echo "| llama_768 bf16 >= 2x torch.compile (median of rounds) | $(med ratios "$OUT/sbs_llama_768.txt")x ($(echo $(ratios "$OUT/sbs_llama_768.txt"))) |"
  echo "| llama_288 bf16 >= 2.2x torch.compile | $(med ratios "$OUT/sbs_llama_288.txt")x ($(echo $(ratios "$OUT/sbs_llama_288.txt"))) |"
  echo "| moe_288 >= 5x the faster eager MoE | $(med moe_ratios "$OUT/sbs_moe_288.txt")x ($(echo $(moe_ratios "$OUT/sbs_moe_288.txt"))) |"
  echo "| llama_768 bf16 MFU >= 75% (Zen 5) / 80% (Zen 4) | $(mfu llama_768 bfloat16) |"
  echo "| llama_288 bf16 MFU | $(mfu llama_288 bfloat16) |"
  echo "| moe_288 MFU >= 65% (active parameters) | $(mfu moe_288 bfloat16) |"
  echo "| fp32 MFU >= 80% | llama_768 $(mfu llama_768 float32); llama_288 $(mfu llama_288 float32) |"
} | tee "$OUT/table.md"

#!/usr/bin/env bash
# cli_bench_step.sh TITAN SRC — `titan bench step` on a tiny model: its token
# ids come from the whole vocabulary (as bench/side_by_side.py's PyTorch side
# draws them), it states MFU by the formula and with attention as executed,
# --trace writes a Chrome trace through the module training's profiling uses,
# a peak below what the step does is said to look wrong, not printed as
# an MFU above 100%, and --profile's roofline columns (and bench peak's
# memory bandwidth) are the figures over the peak and the bandwidth, and
# --host-check measures the peak loop, the bandwidth and two threads' round trip beside the steps
# without caching them, with each step's time, and the header names the OpenMP wait settings the
# runtime was started with: titan's GOMP_SPINCOUNT (set by executing titan again) unless the user
# set one or OMP_WAIT_POLICY.
set -u
TITAN=$1
SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, cli_done
export OMP_NUM_THREADS=2
TINY=(--steps 1 --warmup 0 --model.dim 32 --model.n_layers 1 --model.n_heads 2 --model.n_kv_heads 2
  --model.ffn_dim 64 --model.vocab_size 1000 --training.local_batch_size 2 --training.seq_len 256
  --training.mixed_precision_param float32)

"$TITAN" bench step "${TINY[@]}" --metrics.peak_tflops 1 --profile --trace "$W/step.json" >"$W/out.txt" 2>&1
check "bench step runs" $?
line=$(grep "^tokens  " "$W/out.txt")
grep -q "uniform over all 1000 ids of the vocabulary" <<<"$line"
check "it says it draws from all 1000 ids ($line)" $?
hi=$(sed -n 's/.*(drawn: [0-9]*\.\.\([0-9]*\)).*/\1/p' <<<"$line")
[ -n "$hi" ] && [ "$hi" -ge 900 ] && [ "$hi" -lt 1000 ]
check "512 draws reach past the byte tokenizer's 258 ids (max $hi)" $?
grep -q "MFU [0-9.]*% of 1000 GFLOP/s f32 peak (config); [0-9.]*% with attention as executed (causal)" "$W/out.txt"
check "MFU by the formula and with attention as executed" $?
# the roofline: each op's GFLOP/s and GB/s as fractions of the peak and of the memory bandwidth measured now
gbps=$(sed -n 's/^roofline: 1000 GFLOP\/s f32 peak (config), \([0-9.]*\) GB\/s memory.*/\1/p' "$W/out.txt")
[ -n "$gbps" ] && awk -v g="$gbps" 'BEGIN { exit !(g > 0.1 && g < 100000) }'
check "--profile measures the memory bandwidth ($gbps GB/s)" $?
awk -v g="$gbps" '/^op +ms\/step/ { on = 1; next } on && NF == 0 { exit } on {
    f = $(NF - 3); pf = $(NF - 2); m = $(NF - 1); pm = $NF; sub(/%/, "", pf); sub(/%/, "", pm); rows++
    # each figure is printed to 0.1: allow for that rounding (the bandwidth rounding grows with the fraction)
    d = pm - 100 * m / g; if (d < 0) d = -d; e = pf - f / 10; if (e < 0) e = -e
    if (e > 0.06 || d > 0.06 + 5.1 / g + pm * 0.051 / g) bad++ }
  END { exit !(rows >= 4 && !bad) }' "$W/out.txt"
check "each op's %peak is its GFLOP/s over the 1000 GFLOP/s peak, and %bw its GB/s over the bandwidth" $?
XDG_CACHE_HOME="$W/cache" "$TITAN" bench peak --seconds 0.2 >"$W/peak.txt" 2>&1 &&
  grep -Eq "^memory   [0-9]+\.[0-9] GB/s \(triad over 192 MiB, bytes read and written\)" "$W/peak.txt"
check "bench peak also measures the memory bandwidth" $?
grep -Eq "^cores    [1-9][0-9]* ns a cache line's round trip between two threads$" "$W/peak.txt"
check "and, on two threads, how far apart they run" $?
head -c 40 "$W/step.json" | grep -q '^{"traceEvents":\[{"name":"embedding"'
check "--trace writes a Chrome trace, first event the embedding" $?
grep -q '"graph":"train_step"' "$W/step.json" && grep -q '"graph":"optimizer"' "$W/step.json" &&
  grep -q '"displayTimeUnit":"ms"}$' "$W/step.json"
check "the trace holds the train step and the optimizer" $?
[ ! -e "$W/step.json.tmp" ]
check "written atomically (no temporary left)" $?

"$TITAN" bench step "${TINY[@]}" --metrics.peak_tflops 1e-9 >"$W/low.txt" 2>&1
check "bench step with a peak far below what it does still runs" $?
grep -q "MFU n/a of" "$W/low.txt" && grep -q "MFU not stated: the peak .* looks wrong (metrics.peak_tflops)" "$W/low.txt"
check "it says the peak looks wrong instead of an MFU above 100%" $?
! grep -Eq "MFU [0-9]{3,}\.[0-9]+%" "$W/low.txt"
check "no MFU above 100% printed" $?

# --host-check: the peak loop and the memory bandwidth measured before and after the steps, each step's time,
# and nothing cached (a check of these minutes must not become the figure later runs state MFU against)
mkdir -p "$W/hc"
XDG_CACHE_HOME="$W/hc" "$TITAN" bench step "${TINY[@]}" --steps 2 --metrics.peak_tflops 1 --host-check >"$W/hc.txt" 2>&1
check "bench step --host-check runs" $?
line=$(grep "^host  " "$W/hc.txt")
re='^host      peak loop ([0-9.]+) GFLOP/s f32 and memory ([0-9.]+) GB/s before the steps, ([0-9.]+) and ([0-9.]+) after [(]MFU is against 1000[)]$'
[[ $line =~ $re ]] && awk -v a="${BASH_REMATCH[1]}" -v b="${BASH_REMATCH[2]}" -v c="${BASH_REMATCH[3]}" \
  -v d="${BASH_REMATCH[4]}" 'BEGIN { exit !(a > 0.1 && b > 0.01 && c > 0.1 && d > 0.01) }'
check "it prints the peak loop and the bandwidth before and after the steps ($line)" $?
grep -Eq "^          a cache line's round trip between two threads [1-9][0-9]* ns before, [1-9][0-9]* after$" "$W/hc.txt"
check "and the two threads' round trip before and after" $?
grep -Eq "^each step [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} ms$" "$W/hc.txt"
check "and each of the 2 timed steps' time ($(grep '^each step' "$W/hc.txt"))" $?
[ -z "$(find "$W/hc" -type f)" ]
check "and caches no peak" $?
! grep -Eq "^(host  |each step)" "$W/out.txt"
check "without --host-check there are no such lines" $?

# the OpenMP runtime's waits: titan's spin count when the user set none (read back from the
# environment the process was executed with, so a setenv without the exec would not pass), else
# the user's settings, untouched
waits() { # the header's "OpenMP waits: ..." of a run with environment "$@"
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" "$TITAN" bench step "${TINY[@]}" --metrics.peak_tflops 1 2>&1 |
    sed -n 's/^bench step: .*, OpenMP waits: \(.*\)$/\1/p'
}
got=$(waits)
[ "$got" = "GOMP_SPINCOUNT=3000" ]
check "with neither variable set the runtime starts with titan's GOMP_SPINCOUNT=3000 ($got)" $?
got=$(waits GOMP_SPINCOUNT=777)
[ "$got" = "GOMP_SPINCOUNT=777" ]
check "the user's GOMP_SPINCOUNT is kept ($got)" $?
got=$(waits OMP_WAIT_POLICY=passive)
[ "$got" = "OMP_WAIT_POLICY=passive" ]
check "OMP_WAIT_POLICY alone is kept, with no spin count added ($got)" $?

cli_done cli_bench_step

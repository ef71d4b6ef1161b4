# lib_cli.sh — the preamble the CLI tests (tests/cli_*.sh) share; a test
# sources it with `. "$(dirname "$0")/lib_cli.sh"` (CMake runs them as
# `bash /path/to/tests/cli_x.sh TITAN SRC`, so that works from any folder).
# Not named cli_*.sh: CMake runs every one of those as a test.
#
# It gives the test:
#   W       a temporary folder, removed on exit (mktemp -d, or
#           mktemp -d "$CLI_TMP_TEMPLATE" when the test sets that first)
#   pass, fail  the counters
#   check NAME STATUS  counts and prints "ok   NAME" or "FAIL NAME"
#   cli_done NAME  prints "NAME: P passed, F failed" and returns non-zero on
#           a failure: the test ends with it, so that is its exit status
#   expect [-q] NAME STATUS PATTERN CMD...  runs CMD (stdin /dev/null,
#           stdout in $W/out, stderr in $W/err) and checks its exit status:
#           STATUS is a number or `error` (any non-zero status below 128,
#           so not killed by a signal); and that stderr matches the extended
#           regex PATTERN, unless PATTERN is empty. It counts and prints
#           "ok   NAME" (with ": " and the first line of stderr that matched
#           when there is a PATTERN) or "FAIL NAME: why" and the output.
#           With -q a success is neither printed nor counted: the checks on
#           $W/out and $W/err that follow are the ones that count. Returns
#           non-zero on a failure, so those checks can follow with &&.
#   losses METRICS_JSONL  prints "step loss grad_norm" of each train record
#           (full precision, in step order): two runs' outputs compare with cmp
#   wait_for FILE REGEX  waits (up to 30 s) until a line of FILE matches the
#           extended REGEX: a running job got that far; non-zero if it never does
#   skip_test NAME WHY  the whole test cannot run here: exits 77 (CTest's
#           "skipped"), or, under CI=true, where nothing may be skipped, 1
#   skip_part WHY  a part of the test cannot run here: says so, and under
#           CI=true counts a failure
#   stops_on_signal NAME SIG FILE REGEX DUMP LOG CMD...  runs the training
#           command CMD in the background (output in LOG), sends it SIG once
#           a line of FILE matches REGEX, and checks that it exits 0, says
#           the stop was requested and leaves one checkpoint in DUMP
W=$(mktemp -d ${CLI_TMP_TEMPLATE:+"$CLI_TMP_TEMPLATE"})
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
skip_test() {
  if [ "${CI:-}" = true ]; then echo "FAIL $1: $2 (CI=true: nothing may be skipped)"; exit 1; fi
  echo "$1: SKIPPED: $2"; exit 77
}
skip_part() {
  if [ "${CI:-}" = true ]; then echo "FAIL $1 (CI=true: nothing may be skipped)"; fail=$((fail + 1))
  else echo "skipped: $1"; fi
}
check() { # check NAME CONDITION-EXIT-STATUS
  if [ "$2" -eq 0 ]; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi
}
cli_done() { # cli_done NAME: the summary line; the status is the test's
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
expect() { # expect [-q] NAME STATUS PATTERN CMD...: see above
  local quiet=0
  if [ "$1" = -q ]; then quiet=1; shift; fi
  local name=$1 want=$2 pat=$3
  shift 3
  "$@" </dev/null >"$W/out" 2>"$W/err"
  local rc=$? why=
  if [ "$want" = error ]; then
    { [ $rc -eq 0 ] || [ $rc -ge 128 ]; } && why="exit $rc, want an error (1-127)"
  elif [ $rc -ne "$want" ]; then
    why="exit $rc, want $want"
  fi
  if [ -n "$why" ]; then
    echo "FAIL $name: $why"; cat "$W/out" "$W/err"; fail=$((fail + 1)); return 1
  elif [ -n "$pat" ] && ! grep -qE -e "$pat" "$W/err"; then
    echo "FAIL $name: message does not match /$pat/:"; cat "$W/err"; fail=$((fail + 1)); return 1
  fi
  [ $quiet -eq 1 ] && return 0
  if [ -n "$pat" ]; then echo "ok   $name: $(grep -m 1 -E -e "$pat" "$W/err" | head -c 300)"; else echo "ok   $name"; fi
  pass=$((pass + 1))
}
wait_for() { # wait_for FILE REGEX: see above
  local i
  for i in $(seq 1 300); do
    grep -qE -e "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
stops_on_signal() { # stops_on_signal NAME SIG FILE REGEX DUMP LOG CMD...: see above
  local name=$1 sig=$2 file=$3 re=$4 dump=$5 log=$6 pid rc
  shift 6
  "$@" >"$log" 2>&1 &
  pid=$!
  wait_for "$file" "$re"
  kill "-$sig" $pid
  wait $pid
  rc=$?
  [ $rc -eq 0 ] && grep -q "stop requested" "$log" && [ "$(ls "$dump/checkpoint" | grep -c '^step-')" -eq 1 ]
  check "$name" $?
}
losses() { # losses METRICS_JSONL: see above
  python3 -c '
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if "loss" in r and "val_loss" not in r: print(r["step"], repr(r["loss"]), repr(r["grad_norm"]))
' "$1" | sort -n | uniq
}

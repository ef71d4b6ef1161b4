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
W=$(mktemp -d ${CLI_TMP_TEMPLATE:+"$CLI_TMP_TEMPLATE"})
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
check() { # check NAME CONDITION-EXIT-STATUS
  if [ "$2" -eq 0 ]; then echo "ok   $1"; pass=$((pass + 1)); else echo "FAIL $1"; fail=$((fail + 1)); fi
}
cli_done() { # cli_done NAME: the summary line; the status is the test's
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

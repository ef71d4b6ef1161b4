# lib_mpi.sh — the preamble the MPI tests (tests/mpi_*.sh) share, on top of
# lib_cli.sh's; CMake runs them as `bash tests/mpi_x.sh TITAN SRC MPIEXEC`
# with the MPI test environment (run as root allowed, no cross-memory
# attach). A test sources it with `. "$(dirname "$0")/lib_mpi.sh" "$@"`.
#
# It gives the test what lib_cli.sh gives, and:
#   TITAN SRC MPIEXEC  its arguments (MPIEXEC: mpirun when not given)
#   one OpenMP thread a rank; without a working MPI launcher the test is
#           skipped (a failure under CI=true)
#   mpi NP ARGS...  titan ARGS on NP ranks
#   rank_pid MPIRUN_PID RANK  sets pid to that rank's process
#   step_losses METRICS_JSONL  "step loss" of each train record
#   close A B [FIRST] [TOL]  the losses of steps FIRST.. (default 1) of run B's
#           metrics.jsonl equal run A's within TOL (default 1e-5) relative,
#           20 steps in all (the runs these tests make)
TITAN=$1 SRC=$2
MPIEXEC=${3:-mpirun}
. "$(dirname "${BASH_SOURCE[0]}")/lib_cli.sh"
export OMP_NUM_THREADS=1
if ! "$MPIEXEC" --version >/dev/null 2>&1; then
  skip_test "$(basename "$0" .sh)" "no MPI launcher ($MPIEXEC)"
fi
mpi() {
  local np=$1; shift
  "$MPIEXEC" --oversubscribe -np "$np" "$TITAN" "$@"
}
rank_pid() { # rank_pid MPIRUN_PID RANK: sets pid to that rank's process, a running child of mpirun (by the
  # OMPI_COMM_WORLD_RANK in its environment, which an exited one no longer shows); 1 when there is none
  local p
  pid=
  for p in $(pgrep -P "$1"); do
    grep -qxz "OMPI_COMM_WORLD_RANK=$2" "/proc/$p/environ" 2>/dev/null && { pid=$p; return 0; }
  done
  return 1
}
step_losses() { grep -o '"step":[0-9]*,"loss":[^,]*' "$1" | sed 's/"step":\([0-9]*\),"loss":/\1 /'; }
close() {
  local first=${3:-1} tol=${4:-1e-5}
  step_losses "$1" | awk -v f="$first" '$1 >= f' >"$W/la" && step_losses "$2" | awk -v f="$first" '$1 >= f' >"$W/lb" &&
    [ "$(wc -l <"$W/la")" -eq $((21 - first)) ] &&
    paste "$W/la" "$W/lb" | awk -v tol="$tol" '{ d = $2 - $4; if (d < 0) d = -d; a = $2 < 0 ? -$2 : $2;
                                   if ($1 != $3 || d > tol * a) { print "step " $1 ": " $2 " vs " $4; bad = 1 } }
                                 END { exit bad }'
}

#!/usr/bin/env bash
# mpirun_start_kills.sh TRIES MAX_MS COMMAND...: starts `mpirun --oversubscribe -np 2 COMMAND` TRIES times,
# kills rank 1 (kill -9) at a random moment in the first MAX_MS ms after the launch, and counts the jobs whose
# mpirun is still running STUCK_S (default 10) seconds after both ranks ended: Open MPI's launcher deadlock
# when a rank dies while it connects to mpirun's PMIx server (docs/multi-process.md, "When a rank fails"); and
# the jobs still running with a rank after BOUND_S (default 60) seconds.
# Each run starts in a temporary folder of its own, so `titan train` may be the COMMAND as is. MPIEXEC names
# the launcher (default mpirun); the MPI tests' environment (one thread a rank, run as root allowed) is set here.
set -u
[ $# -ge 3 ] || { echo "usage: $0 TRIES MAX_MS COMMAND..." >&2; exit 2; }
TRIES=$1 MAX_MS=$2
shift 2
MPIEXEC=${MPIEXEC:-mpirun} STUCK_S=${STUCK_S:-10} BOUND_S=${BOUND_S:-60}
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none LC_ALL=C
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
stuck=0 hung=0 ended=0 missed=0
rank1_of() { # rank1_of MPIRUN_PID: the pid of its child with OMPI_COMM_WORLD_RANK=1, when there is one
  local p
  for p in $(pgrep -P "$1"); do grep -qxz "OMPI_COMM_WORLD_RANK=1" "/proc/$p/environ" 2>/dev/null && echo "$p"; done
}
live_children() { # live_children PID: how many children of PID are running (zombies, exited, are not)
  local p s n=0
  for p in $(pgrep -P "$1"); do { read -r _ _ s _ <"/proc/$p/stat"; } 2>/dev/null && [ "$s" != Z ] && n=$((n + 1)); done
  echo $n
}
for i in $(seq 1 "$TRIES"); do
  mkdir "$W/$i"
  (cd "$W/$i" && exec "$MPIEXEC" --oversubscribe -np 2 "$@" >"$W/$i.log" 2>&1) &
  job=$!
  sleep "$(printf '0.%03d' $((RANDOM % (MAX_MS + 1))))"
  pid=
  for _ in $(seq 1 400); do pid=$(rank1_of "$job") && [ -n "$pid" ] && break; sleep 0.005; done
  if [ -z "$pid" ]; then
    missed=$((missed + 1)) # the job ended (or never started rank 1) before the kill
    kill -9 $(pgrep -P "$job") "$job" 2>/dev/null
    wait "$job" 2>/dev/null
    continue
  fi
  kill -9 "$pid"
  gone= t=0
  while kill -0 "$job" 2>/dev/null; do
    if [ "$(live_children "$job")" -eq 0 ]; then
      [ -n "$gone" ] || gone=$t
      [ $((t - gone)) -ge $((STUCK_S * 10)) ] && break
    else
      gone=
      [ $t -ge $((BOUND_S * 10)) ] && break
    fi
    sleep 0.1
    t=$((t + 1))
  done
  if kill -0 "$job" 2>/dev/null; then
    if [ -n "$gone" ]; then
      stuck=$((stuck + 1))
      echo "try $i: mpirun still running ${STUCK_S} s after its ranks ended; the end of its log:"
    else
      hung=$((hung + 1))
      echo "try $i: the job still running with a rank ${BOUND_S} s after the kill; the end of its log:"
    fi
    tail -n 3 "$W/$i.log" | cut -c1-200 | sed 's/^/  | /'
    kill -9 $(pgrep -P "$job") "$job" 2>/dev/null
  else
    ended=$((ended + 1))
  fi
  wait "$job" 2>/dev/null
done
echo "mpirun_start_kills: $TRIES tries, rank 1 killed in the first $MAX_MS ms: $ended jobs ended," \
  "$stuck left mpirun stuck after its ranks ended, $hung still ran with a rank, $missed ended before the kill"

#!/usr/bin/env bash
# mpi_fault_campaign.sh TITAN SRC [MPIEXEC] [short|full] — a fault campaign:
# a 2-rank FSDP run of the default job's model (configs/default.toml) is
# killed (kill -9 of one rank, chosen at random) at random moments, KILLS
# times over, and restarted each time with the same command; then it runs to
# its end. It checks, after every kill:
#   - the job (mpirun) exits non-zero within BOUND s of the kill (the ranks'
#     watchdog, comm.timeout_seconds, is the backstop; mpirun should notice a
#     dead rank at once), and no rank outlives it;
#   - the restart resumes from the newest complete step-N folder present
#     before it (a complete one appears only by rename, so a kill during a
#     save leaves at most a .step-N.tmp, which must not be loaded), and no
#     checkpoint the killed job reported saved is lost;
# and at the end that each step's loss and gradient norm (the last record of
# each step in metrics.jsonl, for steps repeated after a resume) are the
# uninterrupted run's, bitwise (the exact logged text).
#
# Two kills in five land anywhere in a step (a random step after the resume
# and a random fraction of a step's time after its log line), two in a
# checkpoint save (as soon as its .step-N.tmp folder appears: a save of this
# model takes milliseconds, so some land just after it), one while the job
# starts (launching, reading the corpus, loading the checkpoint). The
# schedule (which rank, which kind, which step) comes from bash's RANDOM
# seeded with FAULT_SEED, printed at the start (a random one when unset): the
# same seed gives the same schedule, though on a loaded machine a kill's
# moment within its step is not reproducible.
#
#   short (CTest, ~15 s here): 100 steps, a checkpoint every 10, 3 kills, local batch 2
#   full  (~8 min here):    300 steps, a checkpoint every 25, 10 kills, local batch 8
#
# No kill aims at a step (or a save) within TAIL_US of the run's end: a step of
# the short run takes ~20 ms, and the log line a kill waits for reaches the log
# (through mpirun) some steps after the step itself, so a kill aimed three
# steps from the end landed after the last checkpoint, with nothing left to
# resume. Each kill's line gives the last step its run logged.
#
# It ends with the figures: kills survived, checkpoints lost, steps repeated,
# the longest time from a kill to the job's exit. CMake runs the short one as
# `bash mpi_fault_campaign.sh TITAN SRC MPIEXEC short` with the MPI test
# environment (OMP_NUM_THREADS=1, run as root allowed, no cross-memory
# attach); FAULT_KEEP=DIR keeps the runs' folders and logs in DIR.
set -u
export LC_ALL=C # EPOCHREALTIME with a '.', whatever the locale
# TITAN SRC MPIEXEC, W (removed on exit), pass/fail, check, cli_done; one thread a rank; no launcher: skipped
. "$(dirname "$0")/lib_mpi.sh" "$@"
MODE=${4:-short}
case $MODE in
  short) STEPS=100 INTERVAL=10 KILLS=3 BATCH=2 ;;
  full) STEPS=300 INTERVAL=25 KILLS=10 BATCH=8 ;; # 2 x 8: the default job's batch of 16 sequences
  *) echo "usage: $0 TITAN SRC [MPIEXEC] [short|full]" >&2; exit 2 ;;
esac
if [ -n "${FAULT_KEEP:-}" ]; then mkdir -p "$FAULT_KEEP" && W=$(cd "$FAULT_KEEP" && pwd) || exit 2; trap - EXIT; fi
SEED=${FAULT_SEED:-$((($(od -An -N4 -tu4 /dev/urandom) % 32767) + 1))}
RANDOM=$SEED # only the main shell draws: a subshell's RANDOM is reseeded
TIMEOUT=20                # comm.timeout_seconds: a rank left waiting on a dead one aborts after this
BOUND=$((TIMEOUT + 10))   # kill to the job's exit, at most
# mpirun (Open MPI 4.1.4 with PMIx 4.2.2, Debian 12's) ends a job about 1 s after a rank dies. Killed while it
# connects to mpirun's PMIx server (in MPI_Init), a rank can instead leave mpirun deadlocked in its own
# PMIx_server_finalize once every rank has ended (docs/multi-process.md, "When a rank fails"). That is the
# launcher's defect, after titan's part is over: mpirun still running STUCK_S after its last rank ended is
# killed and counted, and the kill is judged by its ranks' end.
STUCK_S=5
TITAN_EXE=$(readlink -f "$TITAN")
RUN=(--config "$SRC/configs/default.toml" --parallelism.data_parallel_shard_degree 2
     --training.local_batch_size "$BATCH" --training.steps "$STEPS"
     --checkpoint.enable true --checkpoint.interval "$INTERVAL" --metrics.log_freq 1
     --comm.timeout_seconds "$TIMEOUT" --validation.enable false --generate.max_new_tokens 0)
# (validation and the closing sample are off: they are rank 0's work outside the step, and a minute of the
# default job's validation would cost the campaign kills without checking more of the resume)
echo "fault campaign ($MODE): seed $SEED (FAULT_SEED=$SEED reproduces the schedule)"
echo "  $MPIEXEC --oversubscribe -np 2 $TITAN train ${RUN[*]} --job.dump_folder DUMP"

# ---- helpers ------------------------------------------------------------------------------
now_us() { now=${EPOCHREALTIME/./}; }                 # sets now: microseconds, no fork
secs() { printf '%d.%03d' $(($1 / 1000000)) $(($1 % 1000000 / 1000)); } # microseconds as s.mmm
alive() { # alive PID: running (a zombie, exited but not yet reaped by its parent, is not)
  local _a _b state
  read -r _a _b state _ 2>/dev/null <"/proc/$1/stat" && [ "$state" != Z ]
}
start() { # start DUMP LOG: the job in the background; sets job (mpirun's pid)
  "$MPIEXEC" --oversubscribe -np 2 "$TITAN" train "${RUN[@]}" --job.dump_folder "$1" >"$2" 2>&1 &
  job=$!
}
finish() { # finish SECONDS: waits up to SECONDS for the job to exit; sets rc (its status) and took (us). Returns 1,
  # with the job and its ranks killed, when it does not exit in time; 2, with mpirun killed, when its ranks have
  # all ended and mpirun is still running STUCK_S later (took: to the ranks' end)
  local t0 ended=
  now_us; t0=$now
  while alive "$job"; do
    now_us
    if [ -n "$(ranks_of "$job")" ]; then
      ended=
    elif [ -z "$ended" ]; then
      ended=$now
    elif [ $((now - ended)) -gt $((STUCK_S * 1000000)) ]; then
      kill -9 "$job" 2>/dev/null
      wait "$job"; rc=$? took=$((ended - t0))
      return 2
    fi
    if [ $((now - t0)) -gt $(($1 * 1000000)) ]; then
      kill -9 $(ranks_of "$job") "$job" 2>/dev/null
      wait "$job"; rc=$? took=$((now - t0))
      return 1
    fi
    sleep 0.02
  done
  now_us; took=$((now - t0))
  wait "$job"; rc=$?
}
ranks_of() { # ranks_of MPIRUN_PID: the pids of the titan processes it launched: its children whose executable
  # is the titan binary itself (by /proc/PID/exe, so neither mpirun nor a shell whose command line names titan)
  local p
  for p in $(pgrep -P "$1"); do [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$TITAN_EXE" ] && echo "$p"; done
}
wait_line() { # wait_line LOG REGEX SECONDS: until a line of the job's LOG matches (0), the job exits (1), or time is up (2)
  local t0
  now_us; t0=$now
  until grep -qsE -e "$2" "$1"; do
    alive "$job" || { grep -qsE -e "$2" "$1"; return $?; }
    now_us
    [ $((now - t0)) -gt $(($3 * 1000000)) ] && return 2
    sleep 0.05
  done
}
newest() { # newest CKPT_DIR: the newest complete checkpoint's step (step-N, no leading dot), 0 when none
  local n
  n=$(ls "$1" 2>/dev/null | grep -E '^step-[0-9]+$' | sed 's/^step-//' | sort -n | tail -n 1)
  echo "${n:-0}"
}
last_step() { # last_step LOG: the last step a run's log shows (0: none)
  grep -oE "^step: +[0-9]+ " "$1" | tail -n 1 | grep -oE "[0-9]+" || echo 0
}
# last_losses METRICS: "step loss grad_norm" as logged (the exact text), the last record of each step, in step order
last_losses() {
  grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$1" |
    sed 's/"step":\([0-9]*\),"loss":\([^,]*\),"grad_norm":/\1 \2 /' | awk '{ v[$1] = $0 } END { for (s in v) print v[s] }' |
    sort -n
}
tail_log() { echo "  --- the end of $1:"; tail -n 15 "$1" | cut -c1-300 | sed 's/^/  | /'; }

# resume_ok LOG STEP: the run's log says it resumed from CK's step-STEP (for STEP 0: says nothing of a resume)
resume_ok() {
  got=$(grep -m 1 -o "resumed from .* (step [0-9]*)" "$1")
  if [ "$2" -gt 0 ]; then [ "$got" = "resumed from $CK/step-$2 (step $2)" ]; else [ -z "$got" ]; fi
}
deadline() { echo $((($1 + 2) * STEP_US * 4 / 1000000 + 60)); } # deadline STEPS: s to wait for that many steps

# ---- the uninterrupted run: the losses to match, and a step's time to place the kills -------------
now_us; t_campaign=$now
start "$W/straight" "$W/straight.log"
wait_line "$W/straight.log" "^step: +1 " 120
now_us; START_US=$((now - t_campaign)) # launch to the first step's log line (the corpus made, a step): at first
finish $((STEPS * 10 + 120))
[ $rc -eq 0 ] && grep -qE "^step: +$STEPS " "$W/straight.log"
ok=$?
check "the uninterrupted run: $STEPS steps, exit $rc in $(secs $((START_US + took))) s" $ok
[ $ok -eq 0 ] || { tail_log "$W/straight.log"; cli_done mpi_fault_campaign; exit; }
STEP_US=$((took / (STEPS - 1)))
# the last step a kill may aim at: TAIL_US (and at least 3 steps) of the run left after it
TAIL_US=500000
TAIL=$(((TAIL_US + STEP_US - 1) / STEP_US))
[ "$TAIL" -lt 3 ] && TAIL=3
LAST_TARGET=$((STEPS - TAIL))
[ "$LAST_TARGET" -gt "$INTERVAL" ]
ok=$?
check "the run is long enough for its kills: $STEPS steps of $(secs "$STEP_US") s, the last $TAIL (at least $(secs $TAIL_US) s) kept free of them" $ok
[ $ok -eq 0 ] || { cli_done mpi_fault_campaign; exit; }

# ---- the schedule: KILLS kills drawn up front from the seed -------------------------------------
# kind 'step' (2 in 5): AFTER steps after the resume (1 to 2 intervals), FRAC/1000 of a step after that step's
# log line; 'save' (2 in 5): during the save of the AFTER-th checkpoint after the resume (1 or 2; a 'step' kill
# where that checkpoint is past LAST_TARGET); 'start' (1 in 5): FRAC/1000 of the time the uninterrupted
# run (then the restart before) took from its launch to its first step (the launch, reading the corpus,
# loading the checkpoint)
declare -a K_RANK K_KIND K_AFTER K_FRAC
for i in $(seq 1 "$KILLS"); do
  K_RANK[i]=$((RANDOM % 2))
  case $((RANDOM % 5)) in 0 | 1) K_KIND[i]=step ;; 2 | 3) K_KIND[i]=save ;; *) K_KIND[i]=start ;; esac
  K_AFTER[i]=$((1 + RANDOM % (2 * INTERVAL)))
  K_FRAC[i]=$((RANDOM % 1000))
  [ "${K_KIND[i]}" = save ] && K_AFTER[i]=$((1 + RANDOM % 2))
done

# ---- the campaign ------------------------------------------------------------------------------
D=$W/run CK=$W/run/checkpoint
survived=0 lost=0 stuck=0 repeated=0 mid_save=0 max_exit=0 resumed=0 from_ckpt=0 early=0 last_logged=0
for i in $(seq 1 $((KILLS + 1))); do
  log=$W/run-$i.log
  expect_step=$(newest "$CK")
  if [ $i -gt 1 ]; then # the steps the killed run logged past the checkpoint this one resumes from
    repeated=$((repeated + last_logged - expect_step))
    echo "     restart $((i - 1)): run $((i - 1)) logged step $last_logged, run $i resumes from step $expect_step"
  fi
  kind=${K_KIND[i]:-end} rank=${K_RANK[i]:-} tmp=
  # resumed past the last step a kill may aim at (the full campaign's later kills can get there): killed as it starts
  [ "$kind" = step ] || [ "$kind" = save ] && [ "$expect_step" -ge "$LAST_TARGET" ] && kind=start
  now_us; t_launch=$now
  start "$D" "$log"
  if [ "$kind" = start ]; then
    # killed while it starts: its log may or may not say yet what it resumed from
    sleep "$(secs $((START_US * K_FRAC[i] / 1000)))"
    where="the start + $(secs $((START_US * K_FRAC[i] / 1000))) s"
    w=0
  else
    # the run must resume from the newest complete checkpoint: its log says so before its first step
    wait_line "$log" "^step: +[0-9]+ " 120
    w=$?
    if [ $w -ne 0 ]; then
      [ $w -eq 1 ] && why="the job exited before its first step" || why="no step within 120 s"
      check "run $i: starts ($why)" 1
      tail_log "$log"
      kill -9 $(ranks_of "$job") "$job" 2>/dev/null
      break
    fi
    now_us; START_US=$((now - t_launch)) # a restart's start (the corpus is cached by then): for the next 'start' kill
    resume_ok "$log" "$expect_step"
    ok=$?
    if [ $i -gt 1 ]; then
      check "run $i: resumes from the newest complete checkpoint (step $expect_step; the log: ${got:-a fresh start})" $ok
      [ $ok -eq 0 ] && resumed=$((resumed + 1)) && [ "$expect_step" -gt 0 ] && from_ckpt=$((from_ckpt + 1))
    fi
    [ $ok -eq 0 ] || { tail_log "$log"; kill -9 $(ranks_of "$job") "$job" 2>/dev/null; break; }
  fi

  # ---- the last run: to the end
  if [ "$kind" = end ]; then
    finish "$(deadline $((STEPS - expect_step)))"
    [ $rc -eq 0 ] && grep -qE "^step: +$STEPS " "$log"
    check "run $i: runs to step $STEPS (exit $rc)" $?
    break
  fi

  # ---- where this kill lands (the rank's process found first, so that the kill follows its moment at once)
  pid=
  [ "$kind" = start ] || rank_pid "$job" "$rank"
  if [ "$kind" = save ]; then
    target=$(((expect_step / INTERVAL + K_AFTER[i]) * INTERVAL))
    [ "$target" -gt "$LAST_TARGET" ] && kind=step
  fi
  if [ "$kind" = step ]; then
    target=$((expect_step + K_AFTER[i]))
    [ "$target" -gt "$LAST_TARGET" ] && target=$LAST_TARGET
    [ "$target" -le "$expect_step" ] && target=$((expect_step + 1))
    wait_line "$log" "^step: +$target " "$(deadline $((target - expect_step)))"
    w=$?
    [ $w -eq 0 ] && sleep "$(secs $((STEP_US * K_FRAC[i] / 1000)))"
    where="step $target + $((K_FRAC[i] / 10))% of a step"
  elif [ "$kind" = save ]; then
    # look for the save's .step-N.tmp every 2 ms from the run's first step on: the log line of the step before
    # reaches the log (through mpirun) a few steps late, after a save of milliseconds is over
    limit_us=$(($(deadline $((target - expect_step))) * 1000000))
    now_us; t0=$now w=0
    until [ -d "$CK/.step-$target.tmp" ] || [ -d "$CK/step-$target" ]; do
      alive "$job" || { w=1; break; }
      now_us; [ $((now - t0)) -gt "$limit_us" ] && { w=2; break; }
      sleep 0.002
    done
    [ -d "$CK/.step-$target.tmp" ] && tmp=yes
    where="the save of step $target"
  fi
  # the rank's process (mpirun may not have started it yet when the kill comes early in the start)
  [ -n "$pid" ] || for _ in $(seq 1 100); do rank_pid "$job" "$rank" && break; alive "$job" || break; sleep 0.05; done
  if [ $w -ne 0 ] || [ -z "$pid" ]; then
    check "run $i: reaches $where with rank $rank running (wait: $w)" 1
    tail_log "$log"
    kill -9 $(ranks_of "$job") "$job" 2>/dev/null
    break
  fi
  others=$(ranks_of "$job")
  kill -9 "$pid"
  finish "$BOUND"
  f=$?
  [ -n "$tmp" ] && [ ! -d "$CK/step-$target" ] && mid_save=$((mid_save + 1)) && where="$where (mid-save: .step-$target.tmp)"
  [ "$took" -gt "$max_exit" ] && max_exit=$took
  # killed while starting: what it said of its resume, if it got that far, must be right too
  if [ "$kind" = start ]; then
    if grep -qE "resumed from|^step: " "$log"; then
      resume_ok "$log" "$expect_step"
      ok=$?
      check "run $i: resumes from the newest complete checkpoint (step $expect_step; the log: ${got:-a fresh start}) before its kill" $ok
      [ $ok -eq 0 ] && resumed=$((resumed + 1)) && [ "$expect_step" -gt 0 ] && from_ckpt=$((from_ckpt + 1))
      [ $ok -eq 0 ] || { tail_log "$log"; break; }
    else
      early=$((early + 1)) where="$where (before it resumed)"
    fi
  fi
  # the killed job's checkpoints: the newest it reported saved is still there (and complete: see the restart)
  saved=$(grep -o "checkpoint saved: .*/step-[0-9]*" "$log" | tail -n 1 | sed 's/.*step-//')
  have=$(newest "$CK")
  [ "${saved:-0}" -le "$have" ] || lost=$((lost + 1))
  # the ranks are gone with mpirun (the killed one, and the one it left waiting)
  sleep 0.5
  left=
  for p in $others; do alive "$p" && left="$left $p"; done
  [ -n "$left" ] && kill -9 $left 2>/dev/null
  last_logged=$(last_step "$log") logged=$last_logged
  [ "$last_logged" -lt "$expect_step" ] && last_logged=$expect_step # none logged: nothing repeated
  if [ $f -eq 2 ]; then
    stuck=$((stuck + 1)) outcome="its ranks ended $(secs "$took") s after the kill, mpirun stuck after them (killed)"
  else
    outcome="exit $rc $(secs "$took") s after the kill"
  fi
  { [ $f -eq 2 ] || { [ $f -eq 0 ] && [ $rc -ne 0 ]; }; } && [ -z "$left" ] && [ "${saved:-0}" -le "$have" ]
  ok=$?
  check "kill $i: rank $rank (pid $pid) at $where (its log's last step: $logged): $outcome (bound $BOUND s)${left:+, ranks left:$left}, newest checkpoint step $have (reported saved: ${saved:-none})" $ok
  [ $ok -eq 0 ] && survived=$((survived + 1))
  [ $ok -eq 0 ] || { tail_log "$log"; break; }
done

# ---- the losses: the last record of each step, against the uninterrupted run's, bitwise ---------
last_losses "$W/straight/metrics.jsonl" >"$W/la"
last_losses "$D/metrics.jsonl" >"$W/lb"
[ "$(wc -l <"$W/la")" -eq "$STEPS" ] && cmp -s "$W/la" "$W/lb"
ok=$?
check "the losses and gradient norms of all $STEPS steps (the last record of each) are the uninterrupted run's, bitwise" $ok
[ $ok -eq 0 ] || diff "$W/la" "$W/lb" | head -n 10
[ "$lost" -eq 0 ]
check "no checkpoint lost" $?

now_us
echo "figures: seed $SEED, $MODE ($STEPS steps, a checkpoint every $INTERVAL, 2 ranks, local batch $BATCH):" \
  "kills survived $survived of $KILLS ($mid_save during a save) | checkpoints lost $lost |" \
  "steps repeated $repeated | mpirun stuck after its ranks ended $stuck | restarts checked $resumed ($from_ckpt from a checkpoint, the others fresh; $early more killed before they resumed) | kill to exit at most $(secs "$max_exit") s (bound $BOUND s) |" \
  "a step $(secs "$STEP_US") s | the campaign $(( (now - t_campaign) / 1000000 )) s"
[ "$survived" -eq "$KILLS" ]
check "all $KILLS kills survived" $?
cli_done mpi_fault_campaign

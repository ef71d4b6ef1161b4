#!/usr/bin/env bash
# run.sh BUILD_DIR SECONDS [JOBS] — runs every libFuzzer target built in
# BUILD_DIR (fuzz_*) for SECONDS each, JOBS of them at once (default: the
# cores; each libFuzzer process is one thread, so a target's SECONDS are a
# core's): its corpus BUILD_DIR/corpus/<target> starts from seed inputs (the
# fixtures of its format, tests/fuzz/seeds/, and, where present, ../shared's
# published chat templates), with the target's dictionary
# tests/fuzz/<format>.dict. Stops at the first target that fails, ending the
# others and showing the end of its log. (make fuzz, which CI runs.)
set -euo pipefail
B=$1 S=$2 P=${3:-$(nproc)}
[[ "$P" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: JOBS must be a positive integer, not '$P'"; exit 1; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)

# seed TARGET DIR: the target's seed inputs, copied into DIR
seed() {
  local t=$1 d=$2 f
  mkdir -p "$d"
  case $t in
    toml) cp "$SRC"/configs/*.toml "$d"/ ;;
    hf_config) for f in "$SRC"/tests/fixtures/hf/*/config.json; do cp "$f" "$d/$(basename "$(dirname "$f")").json"; done ;;
    peft_config) for f in "$SRC"/tests/fixtures/lora/*/adapter_config.json; do cp "$f" "$d/$(basename "$(dirname "$f")").json"; done ;;
    tokenizer_json) for f in "$SRC"/tests/fixtures/tokenizers/*/tokenizer.json; do cp "$f" "$d/$(basename "$(dirname "$f")").json"; done ;;
    safetensors) for f in "$SRC"/tests/fixtures/lora/*/adapter_model.safetensors; do cp "$f" "$d/$(basename "$(dirname "$f")").st"; done
      cp "$SRC/tests/fixtures/mxfp4/experts.safetensors" "$d/mxfp4.st" ;;
    chat_template)
      python3 - "$SRC/tests/fixtures/chat/cases.json" "$d" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    open(f"{sys.argv[2]}/{c['name']}.jinja", "w").write(c["template"])
PY
      [ -d "$SRC/../shared/fixtures/chat_templates" ] && cp "$SRC"/../shared/fixtures/chat_templates/*.jinja "$d"/ ;;
    ckpt_layout) cp "$SRC"/tests/fuzz/seeds/ckpt_meta/* "$d"/ ;;
    *) cp "$SRC"/tests/fuzz/seeds/"$t"/* "$d"/ ;;
  esac
  [ -n "$(ls -A "$d")" ] || { echo "run.sh: no seed inputs for fuzz_$t"; exit 1; }
}

declare -A name_of=() # a running target's name, by its pid
# whatever way the script ends (a failure included), no target outlives it
trap 'for pid in "${!name_of[@]}"; do kill "$pid" 2>/dev/null || true; done; wait' EXIT
# reap: waits for one running target; a failure ends the script (and so the others)
reap() {
  local pid rc=0 t
  wait -n -p pid || rc=$?
  t=${name_of[$pid]}
  unset "name_of[$pid]"
  if [ $rc -ne 0 ]; then
    echo "== fuzz_$t failed (exit $rc):"
    tail -n 40 "$B/fuzz_$t.log"
    exit 1
  fi
  echo "== fuzz_$t: $(tail -n 1 "$B/fuzz_$t.log")"
}

n=0
for f in "$B"/fuzz_*; do
  [ -f "$f" ] && [ -x "$f" ] || continue
  t=${f##*/fuzz_}
  dict=$SRC/tests/fuzz/${t/ckpt_layout/ckpt_meta}.dict
  [ -f "$dict" ] || { echo "run.sh: fuzz_$t has no dictionary ($dict)"; exit 1; }
  case $t in tokenizer_json | safetensors) len=32768 ;; ckpt_meta | ckpt_layout) len=8192 ;; *) len=4096 ;; esac
  rm -rf "$B/seeds/$t"
  seed "$t" "$B/seeds/$t"
  mkdir -p "$B/corpus/$t"
  [ ${#name_of[@]} -lt "$P" ] || reap
  echo "== fuzz_$t ($S s, $(ls "$B/seeds/$t" | wc -l) seeds, $(basename "$dict"))"
  # -timeout=60: an input that takes a minute fails its target, as a hang would (libFuzzer's default waits
  # 20 minutes); the one such input CI has met was a bug (a config's 2e9 layers walked one by one, 156cfe8)
  "$f" -max_total_time="$S" -timeout=60 -max_len=$len -dict="$dict" "$B/corpus/$t" "$B/seeds/$t" >"$B/fuzz_$t.log" 2>&1 &
  name_of[$!]=$t
  n=$((n + 1))
done
while [ ${#name_of[@]} -gt 0 ]; do reap; done
[ "$n" -gt 0 ] || { echo "run.sh: no fuzz target in $B"; exit 1; }

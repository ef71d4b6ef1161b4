#!/usr/bin/env bash
# Bad input to the CLI: each case must exit non-zero (not by a signal) with an
# error that names the file / key / line. Usage: cli_bad_input.sh TITAN SRC
set -u
TITAN=$1
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, cli_done

# expect_error NAME PATTERN CMD...: non-zero exit < 128, stderr matches PATTERN
expect_error() {
  local name=$1 pat=$2
  shift 2
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAIL $name: exit $rc"; cat "$W/err"; fail=$((fail + 1))
  elif ! grep -qE "$pat" "$W/err"; then
    echo "FAIL $name: message does not match /$pat/:"; cat "$W/err"; fail=$((fail + 1))
  else
    echo "ok   $name: $(head -c 300 "$W/err" | head -n 1)"; pass=$((pass + 1))
  fi
}

printf '[training]\nsteps = 10\nseq_len = = 4\n' >"$W/malformed.toml"
expect_error "malformed TOML" "malformed.toml:3" "$TITAN" train --config "$W/malformed.toml"

printf '[training]\nstpes = 10\n' >"$W/unknown.toml"
expect_error "unknown key in file" "unknown.toml:2.*training.stpes" "$TITAN" train --config "$W/unknown.toml"

expect_error "unknown key on command line" "optimizer.lrr" "$TITAN" train --optimizer.lrr 1e-3
expect_error "wrong type" "training.steps" "$TITAN" train --training.steps ten
expect_error "out of range" "optimizer.lr" "$TITAN" train --optimizer.lr -1
expect_error "bad enum" "decay_type.*(linear|cosine)" "$TITAN" train --lr_scheduler.decay_type cubic
expect_error "missing config file" "nope.toml" "$TITAN" train --config "$W/nope.toml"
expect_error "bench gemm: bad shape" "12x34xq.*MxNxK" "$TITAN" bench gemm 12x34xq
expect_error "bench gemm: bad op" "12x34x5:nx.*op" "$TITAN" bench gemm 12x34x5:nx
expect_error "bench gemm: bad dtype" "dtype is f32, bf16 or both" "$TITAN" bench gemm --dtype f16
expect_error "missing data file" "missing.bin" "$TITAN" train --job.dump_folder "$W/o1" \
  --training.dataset_path "$W/missing.bin" --training.steps 1

# a truncated shard: valid header claiming more tokens than the file holds
python3 - "$W/trunc.bin" <<'PY' 2>/dev/null || printf 'TTSHARD\0\1\0\0\0\2\0\0\0\0\1\0\0\2\1\0\0\350\3\0\0\0\0\0\0abcd' >"$W/trunc.bin"
import struct, sys
open(sys.argv[1], "wb").write(b"TTSHARD\0" + struct.pack("<IIIIQ", 1, 2, 256, 258, 1000) + b"\x01\x00" * 10)
PY
expect_error "truncated shard" "trunc.bin.*(truncated|size)" "$TITAN" train --job.dump_folder "$W/o2" \
  --training.dataset_path "$W/trunc.bin" --training.steps 1

printf 'not a shard at all, just text\n' >"$W/text.bin"
expect_error "not a shard" "text.bin" "$TITAN" train --job.dump_folder "$W/o3" --training.dataset_path "$W/text.bin"

expect_error "eval without checkpoint" "no checkpoint" "$TITAN" eval --job.dump_folder "$W/empty" \
  --synthetic.train_tokens 20000 --synthetic.val_tokens 4000
expect_error "unknown command" "unknown command" "$TITAN" trian
expect_error "unknown flag" "bogus" "$TITAN" plan --bogus

# titan prepare: a malformed .jsonl line stops with its file and line, or is skipped when asked
printf '{"text": "one"}\n{"text": "two"\n{"text": "three"}\n' >"$W/bad.jsonl"
expect_error "prepare: malformed jsonl line" "bad.jsonl:2: malformed JSON" "$TITAN" prepare --out "$W/p1" "$W/bad.jsonl"
"$TITAN" prepare --out "$W/p2" --on-error skip --val-fraction 0 "$W/bad.jsonl" >"$W/out" 2>"$W/err"
if [ $? -eq 0 ] && grep -q "bad.jsonl:2: malformed JSON: skipped" "$W/err" && grep -q "train: 2 documents" "$W/out"; then
  echo "ok   prepare --on-error skip: reports and skips the line"; pass=$((pass + 1))
else
  echo "FAIL prepare --on-error skip"; cat "$W/out" "$W/err"; fail=$((fail + 1))
fi
printf 'not a jsonl name\n' >"$W/notes.md"
expect_error "prepare: unknown input kind" "notes.md: not a .txt, .jsonl or .jsonl.gz" "$TITAN" prepare --out "$W/p3" "$W/notes.md"
expect_error "prepare: bad tokenizer.json" "bad.jsonl" "$TITAN" prepare --out "$W/p4" --tokenizer "$W/bad.jsonl" "$W/bad.jsonl"

cli_done cli_bad_input

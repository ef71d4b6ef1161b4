#!/usr/bin/env bash
# Bad input to the CLI: each case must exit non-zero (not by a signal) with an
# error that names the file / key / line. Usage: cli_bad_input.sh TITAN SRC
set -u
TITAN=$1
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done

printf '[training]\nsteps = 10\nseq_len = = 4\n' >"$W/malformed.toml"
expect "malformed TOML" error "malformed.toml:3" "$TITAN" train --config "$W/malformed.toml"

printf '[training]\nstpes = 10\n' >"$W/unknown.toml"
expect "unknown key in file" error "unknown.toml:2.*training.stpes" "$TITAN" train --config "$W/unknown.toml"

expect "unknown key on command line" error "optimizer.lrr" "$TITAN" train --optimizer.lrr 1e-3
expect "wrong type" error "training.steps" "$TITAN" train --training.steps ten
expect "out of range" error "optimizer.lr" "$TITAN" train --optimizer.lr -1
expect "bad enum" error "decay_type.*(linear|cosine)" "$TITAN" train --lr_scheduler.decay_type cubic
expect "missing config file" error "nope.toml" "$TITAN" train --config "$W/nope.toml"
expect "export: bad --dtype" error "checkpoint.export_dtype.*float8.*bfloat16" "$TITAN" export --out "$W/x" --dtype float8
expect "export: bad checkpoint.export_dtype" error "checkpoint.export_dtype.*fp8" "$TITAN" export --out "$W/x" \
  --checkpoint.export_dtype fp8
expect "bench gemm: bad shape" error "12x34xq.*MxNxK" "$TITAN" bench gemm 12x34xq
expect "bench gemm: bad op" error "12x34x5:nx.*op" "$TITAN" bench gemm 12x34x5:nx
expect "bench gemm: bad dtype" error "dtype is f32, bf16 or both" "$TITAN" bench gemm --dtype f16
expect "bench attention: bad reps" error "reps must be a whole number in \\[1, 10000\\], got '0'" "$TITAN" bench attention --reps 0
expect "missing data file" error "missing.bin" "$TITAN" train --job.dump_folder "$W/o1" \
  --training.dataset_path "$W/missing.bin" --training.steps 1

# a truncated shard: valid header claiming more tokens than the file holds
python3 - "$W/trunc.bin" <<'PY' 2>/dev/null || printf 'TTSHARD\0\1\0\0\0\2\0\0\0\0\1\0\0\2\1\0\0\350\3\0\0\0\0\0\0abcd' >"$W/trunc.bin"
import struct, sys
open(sys.argv[1], "wb").write(b"TTSHARD\0" + struct.pack("<IIIIQ", 1, 2, 256, 258, 1000) + b"\x01\x00" * 10)
PY
expect "truncated shard" error "trunc.bin.*(truncated|size)" "$TITAN" train --job.dump_folder "$W/o2" \
  --training.dataset_path "$W/trunc.bin" --training.steps 1

printf 'not a shard at all, just text\n' >"$W/text.bin"
expect "not a shard" error "text.bin" "$TITAN" train --job.dump_folder "$W/o3" --training.dataset_path "$W/text.bin"

expect "eval without checkpoint" error "no checkpoint" "$TITAN" eval --job.dump_folder "$W/empty" \
  --synthetic.train_tokens 20000 --synthetic.val_tokens 4000
expect "unknown command" error "unknown command" "$TITAN" trian
expect "unknown flag" error "bogus" "$TITAN" plan --bogus

# titan prepare: a malformed .jsonl line stops with its file and line, or is skipped when asked
printf '{"text": "one"}\n{"text": "two"\n{"text": "three"}\n' >"$W/bad.jsonl"
expect "prepare: malformed jsonl line" error "bad.jsonl:2: malformed JSON" "$TITAN" prepare --out "$W/p1" "$W/bad.jsonl"
if expect -q "prepare --on-error skip" 0 "bad.jsonl:2: malformed JSON: skipped" \
  "$TITAN" prepare --out "$W/p2" --on-error skip --val-fraction 0 "$W/bad.jsonl"; then
  grep -q "train: 2 documents" "$W/out"
  check "prepare --on-error skip: reports and skips the line" $?
fi
printf 'not a jsonl name\n' >"$W/notes.md"
expect "prepare: unknown input kind" error "notes.md: not a .txt, .jsonl or .jsonl.gz" "$TITAN" prepare --out "$W/p3" "$W/notes.md"
expect "prepare: bad tokenizer.json" error "bad.jsonl" "$TITAN" prepare --out "$W/p4" --tokenizer "$W/bad.jsonl" "$W/bad.jsonl"

cli_done cli_bad_input

#!/usr/bin/env bash
# cli_closing_sample.sh TITAN SRC — the sample a training run prints at its end
# never fails a run that trained: it fits itself to the model and says how.
# A gpt2_debug run with 64 positions on a prepared book (one long document)
# caps the new tokens at the positions left; a fine-tune of the GPT-2 fixture
# (whose tokenizer adds no BOS) with the empty default prompt starts from the
# end-of-text token. `titan generate` asked for the same refuses, as it should.
set -u
TITAN=$1
SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2

# a "book": one .txt file, so one long document of about 6 KB
awk 'BEGIN { s = 7
  split("the lamp|a boat|the letter|a garden|the bridge|an old map|the kettle|a window", n, "|")
  split("was painted|was carried|was found|was opened|was sold|was forgotten", v, "|")
  for (i = 0; i < 160; i++) { s = (s * 16807) % 2147483647; a = n[s % 8 + 1]; b = v[int(s / 8) % 6 + 1]
    printf "%s %s on day %d.%s", a, b, i, (i % 6 == 5 ? "\n" : " ") } }' >"$W/book.txt"
"$TITAN" prepare --out "$W/book" --val-fraction 0 --no-progress "$W/book.txt" >"$W/prep.log" 2>&1 &&
  [ -s "$W/book/train.bin" ]
check "titan prepare writes the book (byte tokenizer)" $?

# gpt2_debug with 64 learned positions, trained at seq_len 64: the default
# job's 200 new tokens (configs/default.toml) do not fit
G=(--model.name gpt2 --model.flavor gpt2_debug --model.max_seq_len 64 --training.seq_len 64)
"$TITAN" train "${G[@]}" --training.local_batch_size 4 \
  --training.steps 2 --training.dataset_path "$W/book/train.bin" --validation.enable false \
  --checkpoint.interval 2 --job.dump_folder "$W/g" --metrics.peak_tflops 1 >"$W/g.log" 2>&1
rc=$?
[ $rc -eq 0 ]
check "gpt2_debug at seq_len 64 trains and exits 0 with the closing sample" $?
[ $rc -eq 0 ] || tail -n 5 "$W/g.log"
[ -f "$W/g/checkpoint/step-2/meta.json" ]
check "  its checkpoint is saved" $?
grep -q "sample: 63 new tokens instead of generate.max_new_tokens 200: the model has 64 positions and the prompt takes 1" "$W/g.log"
check "  the log says the sample was capped at the positions left" $?
grep -q '^sample (generate.prompt ""' "$W/g.log" && ! grep -q "no closing sample" "$W/g.log"
check "  and the sample ran" $?

# asked for explicitly, the same is refused with the reason
expect "titan generate asked for 200 new tokens at 64 positions refuses" 1 \
  "prompt \(1 tokens\) \+ generate.max_new_tokens \(200\) exceed the model's 64 positions" \
  "$TITAN" generate "${G[@]}" --job.dump_folder "$W/g" --generate.max_new_tokens 200 ""
"$TITAN" generate "${G[@]}" --job.dump_folder "$W/g" --generate.max_new_tokens 63 "" \
  >"$W/gen63.out" 2>&1
check "titan generate with 63 new tokens runs" $?

# the GPT-2 fixture: its tokenizer adds no BOS, and the default prompt is empty
F=$SRC/tests/fixtures/hf/gpt2
if [ -f "$F/tokenizer.json" ]; then
  "$TITAN" prepare --hf "$F" --out "$W/hfdata" --val-fraction 0 --no-progress "$W/book.txt" >"$W/hfprep.log" 2>&1
  check "titan prepare --hf (GPT-2 fixture)" $?
  "$TITAN" train --model.hf_assets_path "$F" --checkpoint.initial_load_in_hf true --training.steps 2 \
    --training.seq_len 32 --training.local_batch_size 2 --training.dataset_path "$W/hfdata/train.bin" \
    --validation.enable false --checkpoint.enable false --job.dump_folder "$W/h" --metrics.peak_tflops 1 \
    --training.mixed_precision_param float32 >"$W/h.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && grep -q "starting from the end-of-text token <|endoftext|> (id 0)" "$W/h.log" &&
    grep -q "sample: 63 new tokens instead of generate.max_new_tokens" "$W/h.log"
  check "GPT-2 fine-tune with an empty prompt: the sample starts from <|endoftext|>, capped at 64 positions" $?
  [ $rc -eq 0 ] || tail -n 5 "$W/h.log"
  expect "titan generate --hf with an empty prompt still refuses" 1 \
    "the prompt is empty and the tokenizer adds no BOS token" "$TITAN" generate --hf "$F" --generate.max_new_tokens 4 ""
else
  skip_part "$F/tokenizer.json is missing (the GPT-2 fixture part)"
fi

cli_done cli_closing_sample

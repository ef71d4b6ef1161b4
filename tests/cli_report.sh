#!/usr/bin/env bash
# cli_report.sh TITAN SRC — `titan report` end to end: a short run on the
# built-in corpus and a short fine-tune of the GPT-2 fixture write config.toml
# and plan.json into their dump folders at the start; `titan report` on both
# writes one page with their curves overlaid, both plans (the fine-tune's
# names its Hugging Face folder) and the floor of the run that has one; bad
# usage exits 2, a folder that is not a run's exits 1 with a message.
set -u
TITAN=$1
SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2
FIX=$SRC/tests/fixtures/hf/gpt2
SMALL=(--training.steps 6 --metrics.log_freq 1 --metrics.save_jsonl true --metrics.peak_tflops 1
  --training.local_batch_size 2 --checkpoint.enable false --generate.max_new_tokens 0
  --validation.enable true --validation.freq 3)

# (with no OpenMP wait setting of the caller's, so that plan.json names titan's own)
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$TITAN" train "${SMALL[@]}" --job.dump_folder "$W/corpus-run" --model.dim 32 --model.n_layers 1 \
  --model.n_heads 2 --model.n_kv_heads 2 --model.ffn_dim 64 --synthetic.train_tokens 30000 \
  --synthetic.val_tokens 3000 >"$W/train.log" 2>&1
check "a run on the built-in corpus trains" $?
for f in config.toml plan.json metrics.jsonl summary.json; do
  [ -s "$W/corpus-run/$f" ]
  check "the run wrote $f" $?
done
# config.toml is the resolved config: --config reads it back
"$TITAN" plan --config "$W/corpus-run/config.toml" >"$W/plan.txt" 2>&1 &&
  grep -q "dim 32, 1 layers" "$W/plan.txt"
check "titan plan --config <dump>/config.toml plans the run's model" $?
params=$(sed -n 's/^parameters *\([0-9]*\).*/\1/p' "$W/plan.txt")
grep -q "\"params\":[[:space:]]*$params," "$W/corpus-run/plan.json"
check "plan.json's params are titan plan's ($params)" $?
grep -q '"openmp_waits":[[:space:]]*"GOMP_SPINCOUNT=3000"' "$W/corpus-run/plan.json" &&
  grep -q '"threads":[[:space:]]*[1-9]' "$W/corpus-run/plan.json"
check "plan.json names the threads and the OpenMP wait settings the run started with" $?

# a fine-tune of the GPT-2 fixture on text tokenized with its tokenizer
for i in $(seq 1 200); do
  echo "{\"text\": \"Line $i: the quick brown fox jumps over the lazy dog $((i * 7)) times.\"}"
done >"$W/text.jsonl"
"$TITAN" prepare --hf "$FIX" --out "$W/data" --val-fraction 0.1 --no-progress "$W/text.jsonl" >"$W/prep.log" 2>&1
check "titan prepare --hf gpt2" $?
"$TITAN" train "${SMALL[@]}" --job.dump_folder "$W/finetune" --model.hf_assets_path "$FIX" \
  --checkpoint.initial_load_in_hf true --training.dataset_path "$W/data/train.bin" \
  --validation.dataset_path "$W/data/val.bin" --training.seq_len 64 >"$W/ft.log" 2>&1
check "a fine-tune of the GPT-2 fixture trains" $?
grep -q "\"hf_assets_path\":[[:space:]]*\"$FIX\"" "$W/finetune/plan.json"
check "the fine-tune's plan.json names its Hugging Face folder" $?

"$TITAN" report "$W/corpus-run" "$W/finetune" --out "$W/both.html" >"$W/report.log" 2>&1
check "titan report on both runs" $?
for p in loss lr grad_norm tokens_per_sec mfu memory; do
  grep -q "<svg class=\"plot\" data-plot=\"$p\"" "$W/both.html"
  check "the page has the $p plot" $?
done
loss_svg=$(sed -n '/data-plot="loss"/,/<\/svg>/p' "$W/both.html")
for r in 0 1; do
  n=$(grep -o "<polyline class=\"series\" data-run=\"$r\" data-series=\"loss\" [^>]*points=\"[^\"]*\"" <<<"$loss_svg" |
    sed 's/.*points="//; s/"$//' | wc -w)
  [ "$n" -eq 6 ]
  check "run $r: 6 loss points for 6 logged steps (got $n)" $?
done
grep -q '<line class="hline" data-run="0"' <<<"$loss_svg" && ! grep -q '<line class="hline" data-run="1"' <<<"$loss_svg"
check "the floor line: the corpus run has one, the fine-tune none" $?
grep -q "gpt2 $FIX" "$W/both.html"
check "the fine-tune's plan is on the page" $?
grep -q "<tr><td>OpenMP waits</td><td>GOMP_SPINCOUNT=3000</td>" "$W/both.html"
check "the plan table has the OpenMP waits the corpus run started with" $?
! grep -qi "<script" "$W/both.html"
check "the page runs no script" $?

"$TITAN" report "$W/corpus-run" >/dev/null 2>&1 && [ -s "$W/corpus-run/report.html" ]
check "the default output is RUN_DIR/report.html" $?

# bad usage and bad folders
expect "no run folder: exit 2" 2 "" "$TITAN" report
expect "an unknown option: exit 2" 2 "" "$TITAN" report "$W/corpus-run" --bogus
mkdir -p "$W/empty"
expect "a folder that is not a run's: exit 1, said so" 1 "not a run's dump folder" "$TITAN" report "$W/empty"
"$TITAN" help report | grep -q "titan report RUN_DIR"
check "titan help report" $?

cli_done cli_report

#!/usr/bin/env bash
# cli_hf_finetune.sh TITAN SRC — the Hugging Face fine-tuning flow end to end
# on the tiny Llama, Qwen2, GPT-2, Mixture-of-Experts (Qwen3-MoE, Mixtral,
# Qwen2-MoE, OLMoE, DeepSeek-V3) and OLMo 2, SmolLM3, Granite 3, Phi-3, Gemma 3
# and Gemma 2 fixtures, and Gemma 3 inside a Gemma3ForConditionalGeneration folder
# (tests/fixtures/hf/<name>, with their tokenizer.json; the MoE ones and the
# last seven have the Llama fixture's):
# `titan prepare --hf` tokenizes a small English corpus,
# `titan train` starts from the HF weights and fine-tunes for 20 steps (the
# loss falls), writes <dump>/hf at the end, and `titan generate --hf` runs on
# it. Llama's run is also exported in bf16 (titan export --dtype, the
# checkpoint.export_dtype key at the end of training, auto on a source folder
# that says bfloat16), and titan generates from that folder. titan's token ids
# equal tokenizers' (tests/hf_finetune_check.py --ids; pip tokenizers). In
# make crosscheck (TITAN_HF_FINETUNE_TRANSFORMERS=1, torch and transformers)
# the check also loads the export in transformers: trained weights, titan's
# validation loss and greedy text reproduced; its twin against committed
# fixtures is test_hf's logits parity on the same folders.
# Qwen3-MoE: the run keeps titan's default model.load_balance_coeff, but a
# model loaded from a folder without a selection bias gets none (the expert
# load is only measured, which the log says once), so the export is the plain
# Qwen3MoeForCausalLM folder; transformers' side reports how close its router
# came to a tie.
set -u
TITAN=$1
SRC=$2
FIX=$SRC/tests/fixtures/hf
CLI_TMP_TEMPLATE=/tmp/titan_hf_finetune.XXXXXX
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, cli_done
export OMP_NUM_THREADS=2
MODELS=(llama qwen2 gpt2 qwen3_moe mixtral qwen2_moe olmoe deepseek_v3 olmo2 smollm3 granite phi3 gemma3 gemma2 gemma3_vlm gpt_oss
        gpt_oss_mxfp4)
PROMPT="On Monday, Anna and"
for m in "${MODELS[@]}"; do
  if [ ! -f "$FIX/$m/tokenizer.json" ]; then
    skip_test cli_hf_finetune "$FIX/$m/tokenizer.json is missing (regenerate with tools/gen_hf_fixtures.py)"
  fi
done

# ---- a small corpus: 300 lines of varied English as JSON lines, a story as .txt
# Park-Miller LCG (exact in awk's doubles, so mawk and gawk write the same file)
awk 'function r(n) { s = (s * 16807) % 2147483647; return int(s / 2147483647 * n) }
function pick(list,   a, k) { k = split(list, a, "|"); return a[r(k) + 1] }
BEGIN {
  s = 20240607
  names = "Anna|Ben|Clara|David|Emma|Farid|Grace|Hugo|Ines|Jonas|Kai|Lena|Mateo|Nora|Omar|Priya"
  adjs = "old|quiet|bright|heavy|small|green|broken|famous|strange|warm|naïve|careful"
  nouns = "lamp|boat|letter|garden|bridge|violin|market|kettle|map|window|bicycle|café|résumé|notebook"
  places = "harbour|library|station|kitchen|museum|forest|bakery|school|river bank|old mill"
  cities = "Zürich|Kraków|São Paulo|Montréal|Oslo|Lisbon|Nairobi|Kyoto|Dublin|Austin"
  verbs = "painted|carried|repaired|sold|found|borrowed|cleaned|described|opened|forgot"
  advs = "slowly|quickly|happily|quietly|finally|suddenly|carefully|almost"
  days = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
  for (i = 0; i < 300; i++) {
    line = ""
    n = 1 + r(3)
    for (j = 0; j < n; j++) {
      t = r(8)
      if (t == 0) x = pick(names) " " pick(advs) " " pick(verbs) " the " pick(adjs) " " pick(nouns) " near the " pick(places) "."
      else if (t == 1) x = "On " pick(days) ", " pick(names) " and " pick(names) " " pick(verbs) " " (2 + r(40)) " " pick(nouns) "s at the " pick(places) "."
      else if (t == 2) x = "Why did " pick(names) " leave the " pick(nouns) " in the " pick(places) "? Nobody knows."
      else if (t == 3) x = "The " pick(adjs) " " pick(nouns) " costs " (1 + r(900)) "." r(10) r(10) " dollars, said " pick(names) "."
      else if (t == 4) x = pick(names) "'\''s " pick(nouns) " isn'\''t " pick(adjs) "; it'\''s " pick(adjs) "."
      else if (t == 5) x = "In " (1900 + r(125)) ", the " pick(places) " of " pick(cities) " opened with " (10 + r(990)) " guests."
      else if (t == 6) x = pick(names) " wrote: I " pick(verbs) " a " pick(nouns) " in " pick(cities) " (it was " pick(adjs) ")."
      else x = "Every " pick(days) " the " pick(adjs) " " pick(nouns) " was " pick(advs) " " pick(verbs) " by " pick(names) "."
      line = line (j ? " " : "") x
    }
    printf "{\"text\": \"%s\"}\n", line
  }
}' >"$W/corpus.jsonl"
cat >"$W/story.txt" <<'EOF'
The lighthouse keeper of the northern harbour kept a notebook of every ship that passed.
On quiet nights he wrote about the weather, the colour of the sea and the birds on the rocks.
In winter the storms came from the west, and the lamp had to be cleaned twice a day.
His daughter Clara walked to the village school along the river bank, carrying a green bag.
She liked numbers: 12 boats on Monday, 7 on Tuesday, 31 in the whole week.
One morning a small boat arrived with a letter from Lisbon, sealed with red wax.
Nobody in the village could read it, so they carried it to the library.
The librarian, an old man called Hugo, said it was a map of the coast drawn in 1887.
Clara and her father repaired the broken window of the lighthouse that spring.
They painted the door blue, planted a garden and bought a kettle at the market.
When the summer came, visitors from Zürich and Kraków climbed the stairs to see the lamp.
"It's the brightest light on this coast," the keeper told them, and he was right.
EOF
# documents whose token ids both sides must agree on, and the prompt
printf '%s\n' "{\"text\": \"$PROMPT\"}" '{"text": "Hello"}' '{"text": "  two leading spaces, trailing  "}' \
  '{"text": "tabs\tand\nnew lines\r\nin 2024: 3.14159, 1,000,000"}' '{"text": "café naïve Zürich 🙂 日本語"}' \
  '{"text": "I'"'"'m sure it'"'"'s fine, we'"'"'re done."}' >"$W/probe.jsonl"
[ "$(wc -l <"$W/corpus.jsonl")" -eq 300 ]
check "corpus written (300 lines)" $?

# recipe_of FIXTURE: the fine-tuning recipe of the fixture's family (configs/finetune/), if it has one
recipe_of() {
  case $1 in
    gemma3) echo gemma3_1b_lora ;; gemma3_vlm) echo gemma3_4b_lora ;; gemma2) echo gemma2_2b_lora ;;
    phi3) echo phi4_mini_lora ;; smollm3) echo smollm3_3b_lora ;; olmo2) echo olmo2_1b_lora ;;
    granite) echo granite3_2b_lora ;; gpt_oss | gpt_oss_mxfp4) echo gpt_oss_20b_lora ;;
  esac
}
# st_dtypes FILE: the dtypes of a safetensors file's tensors, sorted, one of each (from its JSON header)
st_dtypes() { head -c 65536 "$1" | grep -a -o '"dtype":"[A-Z0-9]*"' | sed 's/.*:"\(.*\)"/\1/' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
# metric FILE STEP KEY: the value of KEY in the metrics.jsonl line of that step
metric() { sed -n "s/^{\"step\":$2,\"$3\":\([-0-9.eE+]*\)[,}].*/\1/p" "$1" | head -n 1; }

for m in "${MODELS[@]}"; do
  F=$FIX/$m D=$W/$m
  mkdir -p "$D"
  # a bf16 source exports bf16 by default (below): the run's closing export is fp32 here, so that transformers'
  # validation loss on it is titan's exactly (tests/hf_finetune_check.py)
  EXPORT_F32=()
  [ "$m" = gpt_oss_mxfp4 ] && EXPORT_F32=(--checkpoint.export_dtype float32)
  "$TITAN" prepare --hf "$F" --out "$D/data" --val-fraction 0.1 --no-progress \
    "$W/corpus.jsonl" "$W/story.txt" >"$D/prepare.log" 2>&1 &&
    [ -s "$D/data/train.bin" ] && [ -s "$D/data/val.bin" ]
  check "$m: titan prepare --hf writes train.bin and val.bin" $?
  cat "$D/prepare.log"

  "$TITAN" train --model.hf_assets_path "$F" --checkpoint.initial_load_in_hf true \
    --training.dataset_path "$D/data/train.bin" --validation.dataset_path "$D/data/val.bin" \
    --validation.enable true --validation.freq 20 --training.steps 20 --training.seq_len 64 \
    --training.local_batch_size 8 --optimizer.lr 1e-2 --lr_scheduler.warmup_steps 2 --checkpoint.enable true \
    --checkpoint.last_save_in_hf true --job.dump_folder "$D/run" --metrics.log_freq 1 \
    --metrics.peak_tflops 1 --training.mixed_precision_param float32 "${EXPORT_F32[@]}" >"$D/train.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && grep -q "initial weights loaded from Hugging Face folder" "$D/train.log"
  check "$m: titan train starts from the HF weights and finishes 20 steps" $?
  [ $rc -eq 0 ] || tail -n 20 "$D/train.log"
  if [ "$m" = qwen3_moe ]; then
    grep -q "MoE layers 0-1 (2 of 2): 4 experts of 24, top-2" "$D/train.log" &&
      grep -q '"moe_bias_spread":\[0,0\]' "$D/run/metrics.jsonl" &&
      ! grep -q '"moe_bias_spread":\[[^]]*[1-9]' "$D/run/metrics.jsonl"
    check "$m: the run has the fixture's MoE layers and no selection bias (it moved nowhere)" $?
    [ "$(grep -c "model.load_balance_coeff = 0.001 does nothing: the routers of $F have no selection bias" \
      "$D/train.log")" -eq 1 ]
    check "$m: the log says once that the default model.load_balance_coeff does nothing here" $?
  fi
  # the closing sample (default job's generate.*: empty prompt, 200 new tokens)
  # fits the model: GPT-2's tokenizer adds no BOS, and it has 64 positions
  grep -q "^sample (generate.prompt" "$D/train.log" && ! grep -q "no closing sample" "$D/train.log" &&
    { [ "$m" != gpt2 ] || grep -q "starting from the end-of-text token" "$D/train.log"; }
  check "$m: the run ends with its sample" $?

  l1=$(metric "$D/run/metrics.jsonl" 1 loss) l20=$(metric "$D/run/metrics.jsonl" 20 loss)
  v20=$(metric "$D/run/metrics.jsonl" 20 val_loss)
  echo "     $m: loss step 1 ${l1:-?}, step 20 ${l20:-?}; validation loss at step 20 ${v20:-?}"
  # random tiny models start near ln(640) = 6.5; 20 steps on this corpus bring the loss well down
  [ -n "$l1" ] && [ -n "$l20" ] && awk -v a="$l1" -v b="$l20" 'BEGIN { exit !(b < 0.8 * a) }'
  check "$m: training loss at step 20 below 0.8 x step 1" $?
  [ -n "$v20" ] && awk -v a="$l1" -v v="$v20" 'BEGIN { exit !(v < 0.8 * a) }'
  check "$m: validation loss at step 20 below 0.8 x the first training loss" $?

  # the same fine-tune in bf16 mixed precision: the loss falls as far (Llama's ends with a bf16 export)
  BF16_EXPORT=()
  [ "$m" = llama ] && BF16_EXPORT=(--checkpoint.last_save_in_hf true --checkpoint.export_dtype bfloat16)
  "$TITAN" train --model.hf_assets_path "$F" --checkpoint.initial_load_in_hf true \
    --training.dataset_path "$D/data/train.bin" --training.steps 20 --training.seq_len 64 \
    --training.local_batch_size 8 --optimizer.lr 1e-2 --lr_scheduler.warmup_steps 2 --checkpoint.enable false \
    --training.mixed_precision_param bfloat16 --job.dump_folder "$D/run_bf16" --metrics.log_freq 1 \
    --metrics.peak_tflops 1 "${BF16_EXPORT[@]}" >"$D/train_bf16.log" 2>&1
  if [ "$m" = llama ]; then
    [ "$(st_dtypes "$D/run_bf16/hf/model.safetensors")" = BF16 ] && grep -q '"bfloat16"' "$D/run_bf16/hf/config.json"
    check "$m: checkpoint.last_save_in_hf with checkpoint.export_dtype bfloat16 writes BF16 weights" $?
  fi
  b1=$(metric "$D/run_bf16/metrics.jsonl" 1 loss) b20=$(metric "$D/run_bf16/metrics.jsonl" 20 loss)
  echo "     $m: bf16 loss step 1 ${b1:-?}, step 20 ${b20:-?}"
  [ -n "$b1" ] && [ -n "$b20" ] && [ -n "$l1" ] && [ -n "$l20" ] &&
    awk -v a="$b1" -v b="$b20" -v f="$l1" -v g="$l20" 'BEGIN { d = a - f; if (d < 0) d = -d; exit !(b < 0.8 * a && d < 0.01 * f && b < 1.1 * g) }'
  check "$m: bf16 fine-tune: step 1 loss within 1% of fp32's, step 20 below 0.8 x step 1 and within 10% of fp32's" $?

  H=$D/run/hf
  [ -f "$H/config.json" ] && [ -f "$H/generation_config.json" ] && [ -f "$H/model.safetensors" ] &&
    cmp -s "$H/tokenizer.json" "$F/tokenizer.json"
  check "$m: <dump>/hf has config, generation config, weights and the model's tokenizer.json" $?
  if [ "$m" = qwen3_moe ]; then
    grep -q '"Qwen3MoeForCausalLM"' "$H/config.json" && grep -q 'mlp\.experts\.3\.down_proj\.weight' "$H/model.safetensors"
    check "$m: <dump>/hf is a Qwen3MoeForCausalLM folder with the fixture's per-expert tensors" $?
  fi

  # titan export of the final checkpoint writes the same folder
  "$TITAN" export --model.hf_assets_path "$F" --job.dump_folder "$D/run" --out "$D/export" "${EXPORT_F32[@]}" \
    >"$D/export.log" 2>&1 &&
    cmp -s "$D/export/model.safetensors" "$H/model.safetensors" && cmp -s "$D/export/config.json" "$H/config.json"
  check "$m: titan export of the last checkpoint equals <dump>/hf" $?
  grep error "$D/export.log"
  [ "$(st_dtypes "$H/model.safetensors")" = F32 ] && grep -q '"torch_dtype":.*"float32"' "$H/config.json"
  check "$m: an fp32 source exports F32 weights (checkpoint.export_dtype auto; float32 asked for a bf16 one)" $?
  if [ "$m" = gpt_oss_mxfp4 ]; then
    # GPT-OSS's MXFP4 experts: dequantized on load, and said so; its export in bf16 by default (the folder's dtype),
    # the experts unquantized, without quantization_config
    "$TITAN" export --model.hf_assets_path "$F" --job.dump_folder "$D/run" --out "$D/export_auto" \
      >"$D/export_auto.log" 2>&1 && [ "$(st_dtypes "$D/export_auto/model.safetensors")" = BF16 ] &&
      grep -q "MXFP4 experts of the source are written unquantized (bf16), without its quantization_config" \
        "$D/export_auto.log" &&
      grep -q "MXFP4 expert tensors dequantized to bf16" "$D/train.log" &&
      ! grep -q quantization_config "$D/export_auto/config.json" && ! grep -aq "_blocks" "$D/export_auto/model.safetensors"
    check "$m: MXFP4 experts dequantized (said so), and exported in bf16 without quantization_config" $?
  fi
  if [ "$m" = llama ]; then
    # --dtype bfloat16: BF16 weights in half the bytes, config.json says so, and titan loads the folder back
    "$TITAN" export --model.hf_assets_path "$F" --job.dump_folder "$D/run" --dtype bfloat16 --out "$D/export_bf16" \
      >"$D/export_bf16.log" 2>&1 && [ "$(st_dtypes "$D/export_bf16/model.safetensors")" = BF16 ] &&
      grep -q '"torch_dtype":.*"bfloat16"' "$D/export_bf16/config.json" &&
      [ "$(stat -c %s "$D/export_bf16/model.safetensors")" -lt "$(($(stat -c %s "$H/model.safetensors") * 6 / 10))" ] &&
      grep -q "(bf16 weights)" "$D/export_bf16.log"
    check "$m: titan export --dtype bfloat16 writes BF16 weights and says bfloat16" $?
    out=$("$TITAN" generate --hf "$D/export_bf16" --generate.max_new_tokens 10 "Hello" 2>"$D/gen_bf16.err")
    [ $? -eq 0 ] && [ "${out#Hello}" != "$out" ]
    check "$m: titan generate --hf on the bf16 export" $?
    # auto follows a source folder that says bfloat16; checkpoint.export_dtype float32 overrides it
    mkdir -p "$D/src_bf16" && cp "$F"/*.json "$F/model.safetensors" "$D/src_bf16/" &&
      sed -i 's/"dtype": "float32"/"dtype": "bfloat16"/' "$D/src_bf16/config.json" &&
      "$TITAN" export --model.hf_assets_path "$D/src_bf16" --job.dump_folder "$D/run" --out "$D/export_auto" \
        >"$D/export_auto.log" 2>&1 && cmp -s "$D/export_auto/model.safetensors" "$D/export_bf16/model.safetensors"
    check "$m: export of a run from a bfloat16 folder is bf16 by default" $?
    "$TITAN" export --model.hf_assets_path "$D/src_bf16" --job.dump_folder "$D/run" --out "$D/export_f32" \
      --checkpoint.export_dtype float32 >"$D/export_f32.log" 2>&1 &&
      cmp -s "$D/export_f32/model.safetensors" "$H/model.safetensors"
    check "$m: checkpoint.export_dtype float32 overrides the bfloat16 source" $?
    expect "$m: titan export --dtype float8 is refused, naming the key" error "checkpoint.export_dtype.*float8" \
      "$TITAN" export --model.hf_assets_path "$F" --job.dump_folder "$D/run" --dtype float8 --out "$D/export_f8"
  fi

  out=$("$TITAN" generate --hf "$H" --generate.max_new_tokens 10 "Hello" 2>"$D/gen.err")
  rc=$?
  [ $rc -eq 0 ] && [ "${out#Hello}" != "$out" ]
  check "$m: titan generate --hf <dump>/hf" $?
  [ $rc -eq 0 ] || cat "$D/gen.err"

  # greedy text: the export gives the final checkpoint's, and not the untrained fixture's
  "$TITAN" generate --hf "$H" --generate.temperature 0 --generate.max_new_tokens 24 "$PROMPT" \
    >"$D/greedy.txt" 2>/dev/null
  "$TITAN" generate --model.hf_assets_path "$F" --job.dump_folder "$D/run" --checkpoint.enable true \
    --generate.temperature 0 --generate.max_new_tokens 24 "$PROMPT" >"$D/greedy_ckpt.txt" 2>/dev/null
  "$TITAN" generate --hf "$F" --generate.temperature 0 --generate.max_new_tokens 24 "$PROMPT" \
    >"$D/greedy_fixture.txt" 2>"$D/greedy_fixture.err"
  # a folder's tensors titan does not train (DeepSeek-V3's multi-token-prediction layer, Gemma 3's vision tower)
  # are skipped and said so on stderr: the generated text alone is on stdout
  case $m in deepseek_v3 | gemma3_vlm)
    grep -q "warning: .*skipped" "$D/greedy_fixture.err" && ! grep -q "skipped" "$D/greedy_fixture.txt"
    check "$m: the skipped tensors are said on stderr, the text alone on stdout" $? ;;
  esac
  echo "     $m greedy, fine-tuned: $(head -c 200 "$D/greedy.txt")"
  echo "     $m greedy, fixture:    $(head -c 200 "$D/greedy_fixture.txt")"
  [ -s "$D/greedy.txt" ] && cmp -s "$D/greedy.txt" "$D/greedy_ckpt.txt"
  check "$m: greedy text of the export equals the checkpoint's" $?
  [ -s "$D/greedy_fixture.txt" ] && ! cmp -s "$D/greedy.txt" "$D/greedy_fixture.txt"
  check "$m: greedy text of the export differs from the untrained fixture's" $?

  # every document tokenized in order, none held out, for the id comparison below
  "$TITAN" prepare --hf "$F" --out "$D/probe" --val-fraction 0 --no-progress \
    "$W/corpus.jsonl" "$W/probe.jsonl" >"$D/probe.log" 2>&1
  check "$m: titan prepare --val-fraction 0" $?

  # the family's recipe (configs/finetune/) on its fixture: 2 LoRA steps, the adapter written at the end
  recipe=$(recipe_of "$m")
  if [ -n "$recipe" ]; then
    R=(--config "$SRC/configs/finetune/$recipe.toml" --model.hf_assets_path "$F" --training.dataset_path "$D/data/train.bin"
       --validation.dataset_path "$D/data/val.bin" --training.steps 2 --training.seq_len 64 --validation.freq 2
       --validation.steps 1 --checkpoint.interval 2 --metrics.peak_tflops 1 --metrics.log_freq 1 --metrics.save_jsonl true)
    "$TITAN" train "${R[@]}" --job.dump_folder "$D/recipe" >"$D/recipe.log" 2>&1 &&
      grep -q "^LoRA: rank 16" "$D/recipe.log" && [ -s "$D/recipe/hf/adapter_config.json" ] &&
      [ -s "$D/recipe/hf/adapter_model.safetensors" ]
    check "$m: configs/finetune/$recipe.toml trains on it (LoRA) and writes the adapter" $?
    # its adapters start at zero: the first step's loss is the model's own, the same run without LoRA's
    "$TITAN" train "${R[@]}" --lora.rank 0 --checkpoint.initial_load_in_hf true --training.steps 1 \
      --checkpoint.enable false --job.dump_folder "$D/recipe0" \
      >"$D/recipe0.log" 2>&1
    a=$(metric "$D/recipe/metrics.jsonl" 1 loss) b=$(metric "$D/recipe0/metrics.jsonl" 1 loss)
    [ -n "$a" ] && [ "$a" = "$b" ]
    check "$m: the recipe's first loss is the model's own (${a:-?}; without LoRA ${b:-?})" $?
  fi
done

# titan's token ids against tokenizers' (pip tokenizers: CI's project virtualenv has it); with
# TITAN_HF_FINETUNE_TRANSFORMERS=1 (make crosscheck) transformers' side too, which needs torch
if [ "${TITAN_HF_FINETUNE_TRANSFORMERS:-0}" = 1 ]; then
  python3 "$SRC/tests/hf_finetune_check.py" "$W" "$FIX" "$PROMPT" "${MODELS[@]}"
  check "transformers and tokenizers agree with titan (tests/hf_finetune_check.py)" $?
elif python3 -c "import tokenizers" >/dev/null 2>&1; then
  python3 "$SRC/tests/hf_finetune_check.py" --ids "$W" "$FIX" "$PROMPT" "${MODELS[@]}"
  check "titan's token ids are tokenizers' (tests/hf_finetune_check.py --ids)" $?
else
  skip_part "titan's token ids against tokenizers' (python3 cannot import tokenizers: make venv)"
fi

cli_done cli_hf_finetune

#!/usr/bin/env bash
# cli_chat_sft.sh TITAN SRC — supervised fine-tuning on conversations, end to end on the byte
# tokenizer and a ChatML template: `titan prepare --chat` writes conversation shards and says what it
# left out; a tiny model trained on conversations whose user turns are random words and whose
# assistant always gives the same reply reaches a validation loss near zero, because validation
# scores the assistant's tokens only (with --train-on all it cannot: the user's words are random);
# the run logs trained tokens/s and the loader's cuts, and resumes bit for bit; a tiny Hugging Face
# model fine-tuned on them, fully or with LoRA, answers as it was taught in `titan chat`; and bad
# input stops with the file and line.
set -u
TITAN=$1 SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
if ! command -v python3 >/dev/null 2>&1; then
  skip_test cli_chat_sft "python3 writes the conversations"
fi

printf '%s' '{% for m in messages %}<|im_start|>{{ m['"'"'role'"'"'] }}
{{ m['"'"'content'"'"'] }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}' >"$W/chatml.jinja"

# 1,200 conversations: an optional system message, one to three exchanges of 2-5 random words and
# the same reply; every 10th line in ShareGPT's form, every 7th as TRL's prompt/completion
python3 - "$W" <<'PY'
import json, random, sys
r = random.Random(7)
words = "apple river stone cloud green paper lamp music orange tiger window seven north quiet silver bread".split()
with open(sys.argv[1] + "/chat.jsonl", "w") as f:
    for i in range(1200):
        m = [{"role": "system", "content": "Be brief."}] if r.random() < 0.5 else []
        for _ in range(r.randint(1, 3)):
            m.append({"role": "user", "content": " ".join(r.choice(words) for _ in range(r.randint(2, 5)))})
            m.append({"role": "assistant", "content": "Noted."})
        if i % 10 == 0:
            line = {"conversations": [{"from": {"system": "system", "user": "human", "assistant": "gpt"}[x["role"]],
                                       "value": x["content"]} for x in m]}
        elif i % 7 == 0:
            line = {"prompt": m[:-1], "completion": m[-1:]}
        else:
            line = {"messages": m}
        f.write(json.dumps(line) + "\n")
    # one with nothing to train: no assistant turn
    f.write(json.dumps({"messages": [{"role": "user", "content": "hello"}]}) + "\n")
PY

P=(prepare --chat --chat-template "$W/chatml.jinja" --tokenizer byte --no-progress --val-fraction 0.05)
expect -q "prepare --chat" 0 "" "$TITAN" "${P[@]}" --out "$W/data" "$W/chat.jsonl" &&
  grep -q '^train .* conversations, .* trained' "$W/out" && grep -q 'left out 1 conversations with nothing to train' "$W/out"
check "prepare --chat writes conversation shards and counts what it left out" $?
python3 -c "import struct,sys; d=open(sys.argv[1],'rb').read(16); sys.exit(not (d[:8]==b'TTSHARD\0' and struct.unpack('<I',d[8:12])[0]==2))" "$W/data/train.bin"
check "the shard is version 2 (mask and conversation offsets)" $?

TRAIN=(train --training.dataset_path "$W/data/train.bin" --validation.dataset_path "$W/data/val.bin"
  --training.steps 80 --checkpoint.enable false --validation.freq 80 --training.seq_len 128
  --training.local_batch_size 8 --lr_scheduler.warmup_steps 10 --generate.max_new_tokens 0 --training.mixed_precision_param float32)
expect -q "train on the assistant's tokens" 0 "" "$TITAN" "${TRAIN[@]}" --job.dump_folder "$W/run" &&
  grep -qE 'tps: [0-9,]+ \(trained [0-9,]+\)' "$W/out" &&
  grep -qE 'train.bin: [0-9]+ conversations, [0-9]+ trained tokens an epoch; windows of 128 tokens: [1-9][0-9]* conversations cut at turns' "$W/out"
check "the log gives trained tokens/s beside tokens/s, and the conversations cut at turns" $?
val=$(python3 -c "import json,sys; print([json.loads(l)['val_loss'] for l in open(sys.argv[1]) if 'val_loss' in l][-1])" "$W/run/metrics.jsonl")
python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 0.02)" "$val"
check "validation loss on the assistant's tokens is near zero ($val < 0.02)" $?

# a run of 12 steps resumed to 24 gives the losses of 24 uninterrupted steps, bit for bit
R=("${TRAIN[@]}" --validation.enable false --metrics.log_freq 1 --checkpoint.enable true --checkpoint.interval 12
   --lr_scheduler.decay_ratio 0)
"$TITAN" "${R[@]}" --training.steps 24 --job.dump_folder "$W/straight" >/dev/null 2>&1 &&
  "$TITAN" "${R[@]}" --training.steps 12 --job.dump_folder "$W/resumed" >/dev/null 2>&1 &&
  "$TITAN" "${R[@]}" --training.steps 24 --job.dump_folder "$W/resumed" >"$W/resume.log" 2>&1 &&
  grep -q "resumed from" "$W/resume.log" && losses "$W/straight/metrics.jsonl" >"$W/la" &&
  losses "$W/resumed/metrics.jsonl" >"$W/lb" && [ "$(wc -l <"$W/la")" -eq 24 ] && cmp -s "$W/la" "$W/lb"
check "resumed on conversations: the losses of the uninterrupted run, bit for bit" $?

expect -q "prepare --chat --train-on all" 0 "" "$TITAN" "${P[@]}" --train-on all --out "$W/all" "$W/chat.jsonl"
expect -q "train on every token" 0 "" "$TITAN" "${TRAIN[@]}" --training.dataset_path "$W/all/train.bin" \
  --validation.dataset_path "$W/all/val.bin" --job.dump_folder "$W/run_all" --training.steps 40 --validation.freq 40
val_all=$(python3 -c "import json,sys; print([json.loads(l)['val_loss'] for l in open(sys.argv[1]) if 'val_loss' in l][-1])" "$W/run_all/metrics.jsonl")
python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (a > 0.1 and a > 10 * b))" "$val_all" "$val"
check "with --train-on all the random user words keep the loss up ($val_all > 0.1 and > 10 x $val)" $?

# ---- a Hugging Face folder fine-tuned on the conversations, fully and with LoRA, then chatted with ------
# the tiny Qwen2 fixture (its tokenizer has <|im_start|> and <|im_end|>) with a ChatML template
FIX=$SRC/tests/fixtures/hf/qwen2
M=$W/m
mkdir -p "$M" && cp "$FIX/config.json" "$FIX/model.safetensors" "$FIX/tokenizer.json" "$FIX/generation_config.json" "$M/"
cat >"$M/tokenizer_config.json" <<'EOF'
{
  "eos_token": "<|im_end|>",
  "chat_template": "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
}
EOF
HF=(--training.dataset_path "$W/hfdata/train.bin" --validation.dataset_path "$W/hfdata/val.bin" --validation.enable true
  --training.seq_len 128 --training.local_batch_size 8 --lr_scheduler.warmup_steps 5 --checkpoint.enable true
  --checkpoint.last_save_in_hf true --generate.max_new_tokens 0)
CHAT=(--generate.temperature 0 --generate.max_new_tokens 8)
printf 'apple river stone\nquiet north\n' >"$W/questions.txt"
expect -q "prepare --chat --hf" 0 "" "$TITAN" prepare --chat --hf "$M" --out "$W/hfdata" --no-progress --val-fraction 0.05 "$W/chat.jsonl"
expect -q "fine-tune the HF folder on the conversations" 0 "" "$TITAN" train --model.hf_assets_path "$M" \
  --checkpoint.initial_load_in_hf true "${HF[@]}" --training.steps 30 --validation.freq 30 --optimizer.lr 3e-3 \
  --job.dump_folder "$W/ft"
"$TITAN" chat --hf "$W/ft/hf" "${CHAT[@]}" <"$W/questions.txt" >"$W/ft.chat" 2>"$W/ft.err" &&
  [ "$(tr '\n' '|' <"$W/ft.chat")" = "Noted.|Noted.|" ]
check "titan chat with the fine-tuned export answers as it was taught" $?
"$TITAN" chat --hf "$M" "${CHAT[@]}" <"$W/questions.txt" >"$W/base.chat" 2>/dev/null; ! grep -q '^Noted\.$' "$W/base.chat"
check "  (the base model does not)" $?
expect -q "LoRA on the conversations" 0 "" "$TITAN" train --model.hf_assets_path "$M" --lora.rank 8 --lora.alpha 16 \
  "${HF[@]}" --training.steps 40 --validation.freq 40 --optimizer.lr 1e-2 --optimizer.weight_decay 0 --job.dump_folder "$W/lora"
"$TITAN" chat --model.hf_assets_path "$M" --lora.adapter_path "$W/lora/hf" "${CHAT[@]}" <"$W/questions.txt" >"$W/lora.chat" 2>"$W/lora.err" &&
  [ "$(tr '\n' '|' <"$W/lora.chat")" = "Noted.|Noted.|" ] && [ -f "$W/lora/hf/chat_template.jinja" ]
check "titan chat over the base with the trained adapter answers as it was taught" $?

# ---- bad input: each names the file and line ------------------------------------------------------------
printf '%s\n' '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}' >"$W/good.jsonl"
{ cat "$W/good.jsonl"; echo '{"messages": [oops'; } >"$W/bad_json.jsonl"
expect "a malformed JSON line" 1 'bad_json.jsonl:2: malformed JSON' "$TITAN" "${P[@]}" --out "$W/x" "$W/bad_json.jsonl"
{ cat "$W/good.jsonl"; cat "$W/good.jsonl" | tr -d '\n'; cat "$W/good.jsonl"; } >"$W/two_on_a_line.jsonl"
expect "two conversations on one line" 1 'two_on_a_line.jsonl:2: malformed JSON: text after' "$TITAN" "${P[@]}" --out "$W/x" "$W/two_on_a_line.jsonl"
{ cat "$W/good.jsonl"; echo '{"messages": [{"role": "robot", "content": "hi"}]}'; } >"$W/bad_role.jsonl"
expect "an unknown role" 1 'bad_role.jsonl:2: .*unknown role "robot"' "$TITAN" "${P[@]}" --out "$W/x" "$W/bad_role.jsonl"
{ printf '%s' "{% if messages[0]['role'] != 'user' %}{{ raise_exception('the first message must be the user\\'s') }}{% endif %}"
  cat "$W/chatml.jinja"; } >"$W/raises.jinja"
{ cat "$W/good.jsonl"; echo '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}'; } >"$W/sys.jsonl"
expect "a template that raises" 1 "sys.jsonl:2: the chat template raised: the first message must be the user's" \
  "$TITAN" prepare --chat --chat-template "$W/raises.jinja" --tokenizer byte --no-progress --val-fraction 0 --out "$W/x" "$W/sys.jsonl"
expect "--on-error skip skips it and says so" 0 "sys.jsonl:2: .*skipped" \
  "$TITAN" prepare --chat --chat-template "$W/raises.jinja" --tokenizer byte --no-progress --val-fraction 0 --on-error skip --out "$W/skip" "$W/sys.jsonl"
printf '%s' '{% for m in messages %}{% include "x" %}{% endfor %}' >"$W/include.jinja"
expect "an unsupported construct" 1 "include.jinja:1:[0-9]+: unsupported construct: the 'include' statement" \
  "$TITAN" prepare --chat --chat-template "$W/include.jinja" --tokenizer byte --no-progress --out "$W/x" "$W/good.jsonl"
printf '%s' '{% for m in messages %}{{ m.content.strip() }}{% endfor %}' >"$W/strip.jinja"
{ cat "$W/good.jsonl"; echo '{"messages": [{"role": "user", "content": [1, 2]}, {"role": "assistant", "content": "yo"}]}'; } >"$W/list.jsonl"
expect "non-string content where the template needs a string" 1 'list.jsonl:2: .*strip' \
  "$TITAN" prepare --chat --chat-template "$W/strip.jinja" --tokenizer byte --no-progress --val-fraction 0 --out "$W/x" "$W/list.jsonl"
expect "--text-field with --chat" 2 'do not go with --chat' "$TITAN" "${P[@]}" --text-field t --out "$W/x" "$W/good.jsonl"
expect "--split-unit with --chat" 2 'do not go with --chat' "$TITAN" "${P[@]}" --split-unit line --out "$W/x" "$W/good.jsonl"
echo hi >"$W/a.txt"
expect "a .txt file with --chat" 1 'a.txt: --chat reads conversations from .jsonl' "$TITAN" "${P[@]}" --out "$W/x" "$W/a.txt"
[ ! -e "$W/x/train.bin" ]
check "no shard is left behind by a failed prepare" $?

cli_done cli_chat_sft

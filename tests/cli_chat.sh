#!/usr/bin/env bash
# cli_chat.sh TITAN SRC — chatting with a model and exporting a chat model, on the tiny Qwen2 fixture
# (tests/fixtures/hf/qwen2, whose tokenizer has <|im_start|> and <|im_end|>) given a ChatML template:
# `titan generate --chat` encodes exactly what `titan tokenize --chat --render` renders (its --verbose
# prompt line, and ids that decode to the ChatML text, with no BOS added: the Llama fixture's tokenizer,
# which adds one, gets the template's alone), prints only the reply, and stops at an id of
# generation_config.json's eos_token_id list; `titan chat` driven through a pipe keeps the history (the
# second prompt is the conversation with the first reply), /reset clears it, the oldest exchanges are
# dropped when the model's positions run out, and a message too long is refused while the chat goes on;
# the error cases (no template, --system without --chat, bad eos_token_id, an eos_token the tokenizer
# lacks); and an export of a fine-tuned run (the run's own, titan export, --merge and --peft of a LoRA
# run) carries tokenizer_config.json, chat_template.jinja, special_tokens_map.json and
# generation_config.json with the end-of-turn list, and chats as the checkpoint does.
set -u
TITAN=$1 SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
export OMP_NUM_THREADS=2
FIX=$SRC/tests/fixtures/hf
[ -f "$FIX/qwen2/tokenizer.json" ] || skip_test cli_chat "$FIX/qwen2/tokenizer.json is missing"
GREEDY=(--generate.temperature 0 --generate.max_new_tokens 12)

# ---- a ChatML model folder: the fixture with a template, its eos_token and a generation_config.json list
M=$W/m
mkdir -p "$M" && cp "$FIX/qwen2/config.json" "$FIX/qwen2/model.safetensors" "$FIX/qwen2/tokenizer.json" "$M/"
# the template as a file and as the JSON string of tokenizer_config.json (the same text)
printf '%s' "{%- for message in messages %}{{- '<|im_start|>' + message.role + '
' + message.content + '<|im_end|>' + '
' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant
' }}{%- endif %}" >"$W/chatml.jinja"
cat >"$M/tokenizer_config.json" <<'EOF'
{
  "tokenizer_class": "Qwen2Tokenizer",
  "bos_token": null,
  "eos_token": "<|im_end|>",
  "pad_token": "<|endoftext|>",
  "model_max_length": 131072,
  "chat_template": "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
}
EOF
gen_config() { printf '{\n  "bos_token_id": 600,\n  "eos_token_id": %s,\n  "temperature": 0.7\n}\n' "$2" >"$1/generation_config.json"; }
gen_config "$M" "[600, 602]"
SYS="Be brief."

# verbose LABEL FILE: the value of the --verbose line "LABEL: ..." (the first, or the N-th with a third argument)
verbose() { sed -n "s/^$1: //p" "$2" | sed -n "${3:-1}p"; }
# render MESSAGES_JSON: what titan tokenize --chat --render prints for them with the generation prompt
render() { printf '{"messages": %s}\n' "$1" | "$TITAN" tokenize --chat --render --hf "$M" --add-generation-prompt; }
ids_of() { sed 's/ *(.*//'; } # a "reply ids" value without what ended it

# ---- generate --chat: the prompt is the rendered template, encoded without added special tokens
expect "generate --chat --system answers" 0 "" "$TITAN" generate --chat --hf "$M" --system "$SYS" --verbose \
  "${GREEDY[@]}" "Hello there"
cp "$W/out" "$W/gen.out" && cp "$W/err" "$W/gen.err"
want=$(render '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]')
[ -n "$want" ] && [ "$(verbose prompt "$W/gen.err")" = "$want" ]
check "  its prompt is what titan tokenize --chat --render renders" $?
printf '<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n\n' "$SYS" >"$W/want.txt"
verbose "prompt ids" "$W/gen.err" | "$TITAN" tokenize --hf "$M" --decode >"$W/decoded.txt" && cmp -s "$W/decoded.txt" "$W/want.txt"
check "  its ids are the ChatML text's" $?
[ "$(verbose "prompt ids" "$W/gen.err" | cut -d' ' -f1)" = 601 ] && [ "$(verbose "prompt ids" "$W/gen.err" | wc -w)" -lt 40 ]
check "  <|im_start|> and <|im_end|> are one id each (601 first)" $?
printf '%s\n' "$(verbose reply "$W/gen.err")" | grep -q '^"' && [ -s "$W/gen.out" ] && ! grep -q 'im_start\|assistant' "$W/gen.out"
check "  stdout is the reply alone" $?

# the Llama fixture's tokenizer adds <|begin_of_text|> (603) to what it encodes: a template that writes its
# bos_token gets one, not two
L=$W/llama
mkdir -p "$L" && cp "$FIX/llama/"* "$L/"
printf '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": "{{ bos_token }}{%% for m in messages %%}<|start_header_id|>{{ m.role }}<|end_header_id|>\\n\\n{{ m.content }}<|eot_id|>{%% endfor %%}<|start_header_id|>assistant<|end_header_id|>\\n\\n"}\n' \
  >"$L/tokenizer_config.json"
expect -q "generate --chat on the Llama fixture" 0 "" "$TITAN" generate --chat --hf "$L" --verbose "${GREEDY[@]}" "Hi"
ids=$(verbose "prompt ids" "$W/err")
[ "${ids%% *}" = 603 ] && ! printf '%s' "$ids" | grep -q '^603 603'
check "generate --chat encodes without the tokenizer's BOS: the template's alone (${ids:0:24}...)" $?

# ---- it stops at an id of generation_config.json's eos_token_id list
gen_config "$M" "[600]"
expect -q "greedy reply without a stop" 0 "" "$TITAN" generate --chat --hf "$M" --verbose "${GREEDY[@]}" "Hello there"
all=$(verbose "reply ids" "$W/err" | ids_of)
# the first id that does not come earlier in the reply, past the first: the reply must end just before it
set -- $all
k=2 stop=
while [ $k -le $# ]; do
  x=${!k} prefix=$(echo "$all" | cut -d' ' -f1-$((k - 1)))
  if ! printf ' %s ' "$prefix" | grep -q " $x "; then stop=$x; break; fi
  k=$((k + 1))
done
[ -n "$stop" ] && [ "$(echo "$all" | wc -w)" -eq 12 ]; check "  12 new tokens, of which a later one ($stop) can be a stop" $?
gen_config "$M" "[600, ${stop:-0}]"
expect -q "greedy reply with it in the list" 0 "" "$TITAN" generate --chat --hf "$M" --verbose "${GREEDY[@]}" "Hello there"
[ "$(verbose "reply ids" "$W/err" | ids_of)" = "$prefix" ] && grep -q "^reply ids:.*(ended by end-of-turn id $stop)" "$W/err"
check "generate --chat stops at generation_config.json's eos_token_id [600, $stop]: the reply is the ids before it" $?
gen_config "$M" "[600, 602]"
expect -q "the untrained model's reply" 0 "" "$TITAN" generate --chat --hf "$M" "${GREEDY[@]}" "Hello there"
cp "$W/out" "$W/untrained.reply"

# ---- titan chat through a pipe: the history is kept
printf 'Hello there\n\nHow are you?\n' >"$W/two.txt"
"$TITAN" chat --hf "$M" --system "$SYS" --verbose "${GREEDY[@]}" <"$W/two.txt" >"$W/chat.out" 2>"$W/chat.err"
check "titan chat answers two lines (a blank line between is skipped)" $?
[ "$(grep -c '^prompt: ' "$W/chat.err")" -eq 2 ]; check "  two prompts" $?
r1=$(verbose reply "$W/chat.err" 1)
want=$(render '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}, {"role": "assistant", "content": '"$r1"'}, {"role": "user", "content": "How are you?"}]')
[ -n "$r1" ] && [ "$(verbose prompt "$W/chat.err" 2)" = "$want" ]
check "  the second prompt is the conversation with the first reply ($r1)" $?
head -c "$(wc -c <"$W/gen.out")" "$W/chat.out" | cmp -s - "$W/gen.out"
check "  the first reply is generate --chat's" $?
printf 'Hello there\n/reset\nHello there\n' | "$TITAN" chat --hf "$M" --verbose "${GREEDY[@]}" >"$W/out" 2>"$W/err"
[ $? -eq 0 ] && [ "$(verbose prompt "$W/err" 2)" = "$(verbose prompt "$W/err" 1)" ] && grep -q "history is cleared" "$W/err"
check "titan chat: /reset clears the history" $?

# ---- the model's positions: the oldest exchanges go, the system message stays; a message too long is refused
S=$W/short
mkdir -p "$S" && cp "$M"/* "$S/" && sed -i 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 60/' "$S/config.json"
printf 'Hi\nHow are you?\nAgain\n' | "$TITAN" chat --hf "$S" --system "$SYS" --verbose --generate.temperature 0 \
  --generate.max_new_tokens 20 >"$W/out" 2>"$W/err"
[ $? -eq 0 ] && grep -q "no longer fit the model's 60 positions: dropped the oldest 1 exchange (the system message is kept)" "$W/err" &&
  [ "$(grep -c '^reply: ' "$W/err")" -eq 3 ] &&
  [[ "$(verbose prompt "$W/err" 3)" == '"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nAgain<|im_end|>'* ]]
check "titan chat drops the oldest exchange past 60 positions, keeping the system message" $?
long=$(head -c 2000 /dev/zero | tr '\0' a)
printf '%s\nHi\n' "$long" | "$TITAN" chat --hf "$S" --generate.max_new_tokens 5 >"$W/out" 2>"$W/err"
[ $? -eq 1 ] && grep -q "model has 60 positions: none is left for a reply: not answered" "$W/err" &&
  grep -q "1 of 2 messages got no reply" "$W/err" && [ "$(wc -l <"$W/out")" -eq 1 ]
check "titan chat: a message too long is refused, the next one answered, the exit status 1" $?
printf 'a b c d e f g h i j k l m n o p q r s t u v w x y z\n' | "$TITAN" chat --hf "$S" --generate.max_new_tokens 50 \
  >"$W/out" 2>"$W/err"
[ $? -eq 0 ] && grep -q "the reply is cut to [0-9]* tokens" "$W/err"; check "titan chat cuts a reply to the positions left" $?

# ---- where the template comes from
printf 'T{{ messages[0].content }}' >"$W/t.jinja"
expect -q "--chat-template FILE" 0 "" "$TITAN" generate --chat --hf "$M" --chat-template "$W/t.jinja" --verbose \
  "${GREEDY[@]}" "x"
[ "$(verbose prompt "$W/err")" = '"Tx"' ]; check "--chat-template FILE wins over the folder's template" $?
J=$W/jinja
mkdir -p "$J" && cp "$M"/* "$J/" && printf 'J{{ messages[0].content }}' >"$J/chat_template.jinja"
expect -q "chat_template.jinja beside tokenizer_config.json's" 0 "" "$TITAN" generate --chat --hf "$J" --verbose "${GREEDY[@]}" "x"
[ "$(verbose prompt "$W/err")" = '"Jx"' ]; check "a folder's chat_template.jinja takes priority, as in transformers" $?

# ---- errors
expect "generate --chat on a folder without a chat template" 1 "qwen2 has no chat template.*--chat-template FILE" \
  "$TITAN" generate --chat --hf "$FIX/qwen2" "Hi"
expect "titan chat on a folder without a chat template" 1 "qwen2 has no chat template" "$TITAN" chat --hf "$FIX/qwen2"
expect "--system without --chat" 2 "go with --chat" "$TITAN" generate --hf "$M" --system "$SYS" "Hi"
expect "titan chat takes no message argument" 2 "messages come on stdin" "$TITAN" chat --hf "$M" "Hi"
expect "generate --chat without a message" 1 "no message to answer" "$TITAN" generate --chat --hf "$M"
B=$W/bad
mkdir -p "$B" && cp "$M"/* "$B/"
gen_config "$B" '[602, "x"]'
expect "a string in generation_config.json's eos_token_id" 1 "bad/generation_config.json: key 'eos_token_id' must be a non-negative integer" \
  "$TITAN" generate --chat --hf "$B" "Hi"
gen_config "$B" 640
expect "an eos_token_id outside the vocabulary" 1 "bad/generation_config.json: key 'eos_token_id': id 640 is outside the model's vocabulary of 640" \
  "$TITAN" chat --hf "$B"
gen_config "$B" "[1, 2, 3, 4, 5, 6, 7, 8, 9]"
expect "an eos_token_id list of 9" 1 "bad/generation_config.json: key 'eos_token_id' lists 9 ids, more than 8" \
  "$TITAN" generate --hf "$B" "Hi"
printf '{"eos_token_id": 602' >"$B/generation_config.json"
expect "generation_config.json that is not JSON" 1 "bad/generation_config.json: not valid JSON" "$TITAN" generate --chat --hf "$B" "Hi"
gen_config "$B" 602
sed -i 's/"eos_token": "<|im_end|>"/"eos_token": "<|eot|>"/' "$B/tokenizer_config.json"
expect "an eos_token the tokenizer lacks" 1 "bad/tokenizer_config.json: key 'eos_token': \"<\|eot\|>\" is not a token" \
  "$TITAN" generate --chat --hf "$B" "Hi"

# ---- export: the tokenizer files with the chat template, generation_config.json with the end-of-turn list
for i in $(seq 1 40); do echo "{\"text\": \"Message $i: the cat sat on the mat and the dog ran to the park.\"}"; done >"$W/c.jsonl"
"$TITAN" prepare --hf "$M" --out "$W/data" --val-fraction 0 --no-progress "$W/c.jsonl" >/dev/null 2>&1
TRAIN=(--model.hf_assets_path "$M" --training.dataset_path "$W/data/train.bin" --training.seq_len 32
       --training.local_batch_size 2 --training.steps 2 --generate.max_new_tokens 0 --checkpoint.enable true
       --training.mixed_precision_param float32)
expect -q "fine-tune the folder 2 steps" 0 "" "$TITAN" train "${TRAIN[@]}" --checkpoint.initial_load_in_hf true \
  --checkpoint.last_save_in_hf true --job.dump_folder "$W/run"
H=$W/run/hf
# exported_files DIR: the four files, each as the source has it or should
exported_files() {
  cmp -s "$1/tokenizer_config.json" "$M/tokenizer_config.json" && cmp -s "$1/chat_template.jinja" "$W/chatml.jinja" &&
    grep -q '"eos_token":[[:space:]]*"<|im_end|>"' "$1/special_tokens_map.json" &&
    grep -q '"pad_token":[[:space:]]*"<|endoftext|>"' "$1/special_tokens_map.json" &&
    grep -q '"eos_token_id":[[:space:]]*\[600, 602\]' "$1/generation_config.json" &&
    grep -q '"temperature":[[:space:]]*0.7' "$1/generation_config.json" && cmp -s "$1/tokenizer.json" "$M/tokenizer.json"
}
exported_files "$H"
check "the run's export: tokenizer_config.json as the source's, chat_template.jinja its template, special_tokens_map.json, generation_config.json with eos_token_id [600, 602]" $?
expect -q "titan export" 0 "" "$TITAN" export "${TRAIN[@]}" --job.dump_folder "$W/run" --out "$W/export"
exported_files "$W/export" && cmp -s "$W/export/generation_config.json" "$H/generation_config.json"
check "titan export writes the same files" $?
expect -q "generate --chat from the export" 0 "" "$TITAN" generate --chat --hf "$W/export" "${GREEDY[@]}" "Hello there"
cp "$W/out" "$W/export.reply"
expect -q "generate --chat from the checkpoint" 0 "" "$TITAN" generate --chat "${TRAIN[@]}" --job.dump_folder "$W/run" \
  "${GREEDY[@]}" "Hello there"
[ -s "$W/out" ] && cmp -s "$W/out" "$W/export.reply" && ! cmp -s "$W/out" "$W/untrained.reply"
check "the export chats as the checkpoint does (and not as the untrained fixture)" $?

# a source with chat_template.jinja and no tokenizer_config.json, special_tokens_map.json or generation_config.json
N=$W/plain
mkdir -p "$N" && cp "$M/config.json" "$M/model.safetensors" "$M/tokenizer.json" "$N/" && cp "$W/chatml.jinja" "$N/chat_template.jinja"
expect -q "titan export of a run from a folder with chat_template.jinja alone" 0 "" "$TITAN" export "${TRAIN[@]}" \
  --model.hf_assets_path "$N" --job.dump_folder "$W/run" --out "$W/export2"
mkdir -p "$W/tc_only" && cp "$W/export2/tokenizer_config.json" "$W/tc_only/"
printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n' >"$W/conv.jsonl"
cmp -s "$W/export2/chat_template.jinja" "$W/chatml.jinja" &&
  grep -q '"tokenizer_class":[[:space:]]*"PreTrainedTokenizerFast"' "$W/export2/tokenizer_config.json" &&
  "$TITAN" tokenize --chat --render --hf "$W/tc_only" "$W/conv.jsonl" >"$W/r1" &&
  "$TITAN" tokenize --chat --render --hf "$M" "$W/conv.jsonl" >"$W/r2" && cmp -s "$W/r1" "$W/r2" &&
  [ -f "$W/export2/special_tokens_map.json" ] && grep -q '"eos_token_id":[[:space:]]*600' "$W/export2/generation_config.json"
check "  it writes tokenizer_config.json with the template, special_tokens_map.json and generation_config.json" $?

# LoRA: --merge carries the files, --peft the tokenizer files beside the adapter
LORA=(--lora.rank 4 --lora.alpha 8)
expect -q "LoRA fine-tune 2 steps" 0 "" "$TITAN" train "${TRAIN[@]}" "${LORA[@]}" --job.dump_folder "$W/lora"
expect -q "export --merge" 0 "" "$TITAN" export "${TRAIN[@]}" "${LORA[@]}" --job.dump_folder "$W/lora" --merge --out "$W/merged"
exported_files "$W/merged"; check "export --merge carries the four files" $?
expect -q "export --peft" 0 "" "$TITAN" export "${TRAIN[@]}" "${LORA[@]}" --job.dump_folder "$W/lora" --peft --out "$W/peft"
cmp -s "$W/peft/tokenizer_config.json" "$M/tokenizer_config.json" && cmp -s "$W/peft/chat_template.jinja" "$W/chatml.jinja" &&
  cmp -s "$W/peft/tokenizer.json" "$M/tokenizer.json" && [ -f "$W/peft/special_tokens_map.json" ] &&
  [ -f "$W/peft/adapter_model.safetensors" ]
check "export --peft puts the tokenizer files beside the adapter" $?
expect -q "generate --chat from the merged folder" 0 "" "$TITAN" generate --chat --hf "$W/merged" "${GREEDY[@]}" "Hello there"
[ -s "$W/out" ]; check "  it chats" $?
cli_done cli_chat

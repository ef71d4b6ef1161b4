#!/usr/bin/env bash
# cli_chat_render.sh TITAN SRC — `titan tokenize --chat --render`: every published template of
# ../shared over the conversations of tests/fixtures/chat/real.json prints, one JSON string a line,
# what transformers rendered (the fixture, from tools/gen_chat_fixtures.py); the template is found
# in a model folder (tokenizer_config.json's chat_template, a string or a named list, or
# chat_template.jinja) with its special tokens; a conversation the template rejects prints
# {"error": ...} and the run goes on (exit 0); a line that is not JSON stops with file:line (exit 1).
set -u
TITAN=$1 SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done
SHARED=${TITAN_SHARED_DIR:-$SRC/../shared}
if ! command -v python3 >/dev/null 2>&1; then
  skip_test cli_chat_render "python3 reads the fixtures"
fi
FIX=$SRC/tests/fixtures/chat/real.json

# ---- the published templates, as transformers renders them ------------------------------------------
if [ -d "$SHARED/fixtures/chat_templates" ]; then
  # per template and add_generation_prompt: the input lines and the expected output lines
  python3 - "$FIX" "$W" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1], encoding="utf-8"))
convs = {c["name"]: c for c in doc["conversations"]}
out = {}
for r in doc["results"]:
    key = "%s.%d" % (r["template"], r["add_generation_prompt"])
    c = convs[r["conversation"]]
    line = {"messages": c["messages"]}
    if c["tools"] is not None:
        line["tools"] = c["tools"]
    o = out.setdefault(key, ([], []))
    o[0].append(json.dumps(line, ensure_ascii=False))
    # an error from raise_exception is its message; any other error: just an "error" line
    o[1].append(json.dumps(r["output"], ensure_ascii=False) if "output" in r else
                ('{"error": %s}' % json.dumps(r["error"], ensure_ascii=False) if r["raised"] else '{"error"'))
for key, (inp, exp) in out.items():
    open(sys.argv[2] + "/" + key + ".in", "w", encoding="utf-8").write("\n".join(inp) + "\n")
    open(sys.argv[2] + "/" + key + ".want", "w", encoding="utf-8").write("\n".join(exp) + "\n")
PY
  n=0 bad=0
  for f in "$W"/*.in; do
    key=$(basename "$f" .in) tpl=${key%.*} agp=${key##*.}
    flag=; [ "$agp" = 1 ] && flag=--add-generation-prompt
    # the folder: the template and the special tokens in tokenizer_config.json
    mkdir -p "$W/m_$tpl"
    python3 -c 'import json,sys; json.dump({"chat_template": open(sys.argv[1], encoding="utf-8").read(),
      "bos_token": {"content": "<s>"}, "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
      open(sys.argv[2], "w", encoding="utf-8"))' "$SHARED/fixtures/chat_templates/$tpl" "$W/m_$tpl/tokenizer_config.json"
    "$TITAN" tokenize --chat --render --hf "$W/m_$tpl" $flag "$f" >"$W/got" 2>"$W/err"
    rc=$?
    # compare line by line; an expected '{"error"' line only needs the key
    if [ $rc -ne 0 ] || ! python3 - "$W/got" "$W/$key.want" <<'PY'
import sys
got = open(sys.argv[1], encoding="utf-8").read().split("\n")
want = open(sys.argv[2], encoding="utf-8").read().split("\n")
ok = len(got) == len(want) and all(g == w or (w == '{"error"' and g.startswith('{"error": ')) for g, w in zip(got, want))
sys.exit(0 if ok else 1)
PY
    then
      bad=$((bad + 1)); echo "  differs: $key (exit $rc)"; head -c 600 "$W/err"; diff "$W/got" "$W/$key.want" | head -n 6
    fi
    n=$((n + 1))
  done
  check "$n template runs (23 templates, with and without --add-generation-prompt) print what transformers renders" $bad
else
  skip_part "the published templates (../shared is absent)"
fi

# ---- where the template comes from ------------------------------------------------------------------
printf '{"messages": [{"role": "user", "content": "Hi"}]}\n' >"$W/one.jsonl"
mkdir -p "$W/named" "$W/file" "$W/none"
printf '{"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D{{ messages[0].content }}"}], "bos_token": "<B>"}' \
  >"$W/named/tokenizer_config.json"
"$TITAN" tokenize --chat --render --hf "$W/named" "$W/one.jsonl" >"$W/out" 2>"$W/err"
check "a named list: the \"default\" template, with the folder's bos_token" $([ "$(cat "$W/out")" = '"<B>DHi"' ]; echo $?)
printf '{{ messages | length }}{{ add_generation_prompt }}\n' >"$W/file/chat_template.jinja"
"$TITAN" tokenize --chat --render --hf "$W/file" --add-generation-prompt "$W/one.jsonl" >"$W/out" 2>"$W/err"
check "chat_template.jinja when tokenizer_config.json has none" $([ "$(cat "$W/out")" = '"1True"' ]; echo $?)
printf 'F{{ messages[0].role }}' >"$W/t.jinja"
"$TITAN" tokenize --chat --render --hf "$W/named" --chat-template "$W/t.jinja" "$W/one.jsonl" >"$W/out" 2>"$W/err"
check "--chat-template FILE wins over the folder's" $([ "$(cat "$W/out")" = '"Fuser"' ]; echo $?)
gzip -c "$W/one.jsonl" >"$W/one.jsonl.gz"
"$TITAN" tokenize --chat --render --chat-template "$W/t.jinja" "$W/one.jsonl.gz" >"$W/out" 2>"$W/err"
check ".jsonl.gz input" $([ "$(cat "$W/out")" = '"Fuser"' ]; echo $?)
printf '{"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}\n{"prompt": [{"role": "user", "content": "p"}], "completion": [{"role": "assistant", "content": "c"}]}\n' >"$W/formats.jsonl"
printf '{%% for m in messages %%}{{ m.role[0] }}{{ m.content }}{%% endfor %%}' >"$W/roles.jinja"
"$TITAN" tokenize --chat --render --chat-template "$W/roles.jinja" "$W/formats.jsonl" >"$W/out" 2>"$W/err"
check "ShareGPT conversations and TRL prompt/completion become messages" \
  $([ "$(tr '\n' ' ' <"$W/out")" = '"ssuqaa" "upac" ' ]; echo $?)

# ---- errors -----------------------------------------------------------------------------------------
printf '{%% if messages[0].role == "system" %%}{{ raise_exception("no system, line " ~ messages | length) }}{%% endif %%}ok' >"$W/raise.jinja"
printf '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "system", "content": "s"}]}\n{"messages": [{"role": "user", "content": "b"}]}\n' >"$W/mixed.jsonl"
expect "a rejected conversation prints its error on its line and the run goes on" 0 "" \
  "$TITAN" tokenize --chat --render --chat-template "$W/raise.jinja" "$W/mixed.jsonl"
check "  the raise_exception message is the error" \
  $([ "$(tr '\n' '|' <"$W/out")" = '"ok"|{"error": "no system, line 1"}|"ok"|' ]; echo $?)
printf '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [\n' >"$W/broken.jsonl"
expect "a line that is not JSON stops with the file and line" 1 "broken.jsonl:2: malformed JSON" \
  "$TITAN" tokenize --chat --render --chat-template "$W/t.jinja" "$W/broken.jsonl"
check "  the lines before it were printed" $([ "$(cat "$W/out")" = '"Fuser"' ]; echo $?)
printf '{"conversations": [{"from": "robot", "value": "x"}]}\n' >"$W/role.jsonl"
expect "an unknown ShareGPT speaker stops with the file and line" 1 "role.jsonl:1: .*unknown \"from\": \"robot\"" \
  "$TITAN" tokenize --chat --render --chat-template "$W/t.jinja" "$W/role.jsonl"
printf '{{ messages[0].content.upper() ~ x | urlencode }}' >"$W/unsup.jinja"
expect "a construct outside the subset is refused with its line:column" 1 "unsup.jinja:1:38: unsupported construct: the filter 'urlencode'" \
  "$TITAN" tokenize --chat --render --chat-template "$W/unsup.jinja" "$W/one.jsonl"
printf '{{ "<|user|>" + messages[0].content }}' >"$W/concat.jinja"
printf '{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}\n' >"$W/parts.jsonl"
expect "non-string content where the template needs a string: an error line" 0 "" \
  "$TITAN" tokenize --chat --render --chat-template "$W/concat.jinja" "$W/parts.jsonl"
check "  naming the operands" $(grep -q '{"error": ".*unsupported operand type(s) for +: .str. and .list.' "$W/out"; echo $?)
# without --render: the ids (here the byte tokenizer's, so the rendered bytes); --mask: ids, then flags
expect -q "--chat prints the ids" 0 "" "$TITAN" tokenize --chat --chat-template "$W/t.jinja" "$W/one.jsonl"
check "--chat prints the ids of the rendered text" $([ "$(cat "$W/out")" = "70 117 115 101 114" ]; echo $?)
printf '{%% for m in messages %%}<{{ m.role }}>{{ m.content }}</s>{%% endfor %%}' >"$W/turns.jinja"
printf '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n{"messages": [{"role": "system", "content": "s"}]}\n' >"$W/two.jsonl"
expect -q "--chat --mask" 0 "" "$TITAN" tokenize --chat --mask --chat-template "$W/turns.jinja" "$W/two.jsonl"
# "<user>a</s><assistant>b</s>": what the reply adds to the prompt is trained (this template writes no
# generation prompt, so its role header too)
check "--mask prints the ids and the flags of the reply's tokens, and zeros for nothing to train" $(python3 -c "
import sys
L = open(sys.argv[1]).read().split(chr(10))
want = '<user>a</s>[<assistant>b</s>]'
text, flags, on = '', [], 0
for c in want:
    if c in '[]': on = c == '['
    else: text += c; flags.append(on)
ok = L[0] == ' '.join(str(ord(c)) for c in text) and L[1] == ' '.join(str(int(f)) for f in flags)
ok = ok and L[2] == ' '.join(str(ord(c)) for c in '<system>s</s>') and set(L[3].split()) == {'0'} and L[4] == ''
sys.exit(not ok)" "$W/out"; echo $?)
expect -q "--mask: a template that raises" 0 "" "$TITAN" tokenize --chat --mask --chat-template "$W/raise.jinja" "$W/mixed.jsonl"
check "  prints one error line a conversation in --mask mode too" $([ "$(grep -c '^{"error": "no system, line' "$W/out")" = 1 ] && [ "$(wc -l <"$W/out")" = 5 ]; echo $?)
expect "--render and --mask together" 2 "give one" "$TITAN" tokenize --chat --render --mask --chat-template "$W/t.jinja" "$W/one.jsonl"
expect "--mask with --add-generation-prompt" error "drop --add-generation-prompt" \
  "$TITAN" tokenize --chat --mask --add-generation-prompt --chat-template "$W/t.jinja" "$W/one.jsonl"
expect "--decode does not go with --chat" error "do not go with --chat" \
  "$TITAN" tokenize --chat --render --decode --chat-template "$W/t.jinja" "$W/one.jsonl"
expect "a folder without a template" error "has no chat template" "$TITAN" tokenize --chat --render --hf "$W/none" "$W/one.jsonl"
expect "--render without --chat" 2 "go with --chat" "$TITAN" tokenize --render "$W/one.jsonl"
cli_done cli_chat_render

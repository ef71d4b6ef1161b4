#!/usr/bin/env bash
# cli_tokenize.sh TITAN SRC — `titan tokenize`: encode and decode round trips
# with the byte tokenizer and the model folders' tokenizers; the ids and texts
# of every fixture tokenizer equal those Hugging Face `tokenizers` produced
# (tests/fixtures/tokenizers/*/expected.json, the ones test_tokenizer checks
# through the library; read with python3's json, that part skipped without
# python3); bad input exits 1 naming the line, the id or the file.
set -u
TITAN=$1 SRC=$2
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done

# same NAME FILE_A FILE_B: byte-identical, else show the first difference
same() {
  if cmp -s "$2" "$3"; then check "$1" 0; else check "$1" 1; diff "$2" "$3" | head -n 6; fi
}

# ---- the byte tokenizer ------------------------------------------------------------
printf 'Hello\n' | "$TITAN" tokenize >"$W/o" 2>"$W/e"
check "byte: BOS then the bytes" $([ "$(cat "$W/o")" = "256 72 101 108 108 111" ]; echo $?)
printf 'Hello\n' | "$TITAN" tokenize --no-special >"$W/o" 2>"$W/e"
check "byte: --no-special leaves BOS out" $([ "$(cat "$W/o")" = "72 101 108 108 111" ]; echo $?)
printf 'Hello, world!\n\nline three: caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\n  spaces  \tand tabs\nlast line, no newline' \
  >"$W/text.txt"
printf '\n' >>"$W/text.txt" # tokenize writes every output line with its '\n'
"$TITAN" tokenize "$W/text.txt" >"$W/ids" 2>"$W/e"
check "byte: one line of ids per line of text" $([ "$(wc -l <"$W/ids")" -eq 5 ] && [ "$(sed -n 2p "$W/ids")" = 256 ]; echo $?)
"$TITAN" tokenize --decode <"$W/ids" >"$W/back" 2>"$W/e"
same "byte: encode then decode gives the text back" "$W/text.txt" "$W/back"
# files in order, and "-" for stdin
printf 'A\n' >"$W/a.txt"
printf 'B\n' | "$TITAN" tokenize --no-special "$W/a.txt" - "$W/a.txt" >"$W/o" 2>"$W/e"
check "byte: files in order, - is stdin" $([ "$(tr '\n' ' ' <"$W/o")" = "65 66 65 " ]; echo $?)
printf '72, 105\n' | "$TITAN" tokenize --decode >"$W/o" 2>"$W/e"
check "byte: decode takes commas between ids" $([ "$(cat "$W/o")" = "Hi" ]; echo $?)

# ---- the model folders' tokenizers: round trips ---------------------------------------
printf 'Hello world\nThe quick brown fox jumps over the lazy dog.\n  two leading spaces\nnumbers 12345 and punctuation!?\n' \
  >"$W/rt.txt"
printf 'caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n\n' >>"$W/rt.txt"
for d in "$SRC"/tests/fixtures/hf/*/; do
  [ -f "$d/tokenizer.json" ] || continue
  name=$(basename "$d")
  "$TITAN" tokenize --hf "$d" --no-special "$W/rt.txt" >"$W/$name.ids" 2>"$W/e" \
    && "$TITAN" tokenize --hf "$d" --decode <"$W/$name.ids" >"$W/$name.back" 2>>"$W/e"
  same "$name: encode (--no-special) then decode gives the text back" "$W/rt.txt" "$W/$name.back"
  # with the special tokens the tokenizer adds, decoding with --no-special drops them again
  "$TITAN" tokenize --hf "$d" "$W/rt.txt" | "$TITAN" tokenize --hf "$d" --decode --no-special >"$W/$name.back2" 2>"$W/e"
  same "$name: encode with special tokens, decode --no-special" "$W/rt.txt" "$W/$name.back2"
done
# the Llama fixture's template adds BOS: --no-special must leave it out
bos=$(printf 'Hello\n' | "$TITAN" tokenize --hf "$SRC/tests/fixtures/hf/llama" | cut -d' ' -f1)
nos=$(printf 'Hello\n' | "$TITAN" tokenize --hf "$SRC/tests/fixtures/hf/llama" --no-special | cut -d' ' -f1)
check "llama: BOS with special tokens, not with --no-special" $([ -n "$bos" ] && [ "$bos" != "$nos" ]; echo $?)

# ---- parity with Hugging Face tokenizers (the fixtures' expected ids) -------------------
if command -v python3 >/dev/null 2>&1; then
  for d in "$SRC"/tests/fixtures/tokenizers/*/; do
    name=$(basename "$d")
    [ -f "$d/expected.json" ] && [ -f "$d/tokenizer.json" ] || continue
    # the texts and expected lines, keeping only cases that fit on one line
    python3 - "$SRC/tests/fixtures/tokenizers/texts.json" "$d/expected.json" "$W/p" <<'PY'
import json, sys
texts = json.load(open(sys.argv[1], encoding="utf-8"))["texts"]
exp = json.load(open(sys.argv[2], encoding="utf-8"))
pre, suf = exp.get("special_prefix", []), exp.get("special_suffix", [])
def text(c, key):  # the decoded text as bytes; "key_hex" when it holds a NUL
    if key + "_hex" in c: return bytes.fromhex(c[key + "_hex"])
    if key in c: return c[key].encode("utf-8")
    return text(c, "decoded") if key == "decoded_skip" else None
out = {k: open(sys.argv[3] + "." + k, "wb") for k in ("txt", "ids", "sids", "dec", "decskip", "rids", "rdec", "rdecskip")}
one_line = lambda b: b is not None and b"\n" not in b and b"\r" not in b
for t, c in zip(texts, exp["cases"]):
    b, full = t.encode("utf-8"), pre + c["ids"] + suf
    dec, decskip = text(c, "decoded"), text(c, "decoded_skip")
    if not (one_line(b) and one_line(dec) and one_line(decskip)): continue
    out["txt"].write(b + b"\n")
    out["ids"].write(" ".join(map(str, c["ids"])).encode() + b"\n")
    out["sids"].write(" ".join(map(str, full)).encode() + b"\n")
    out["dec"].write(dec + b"\n")
    out["decskip"].write(decskip + b"\n")
for c in exp.get("decodes", []):  # random ids, decoded (HF drops ids past the vocabulary, titan refuses them)
    dec, decskip = text(c, "decoded"), text(c, "decoded_skip")
    if not (one_line(dec) and one_line(decskip)) or max(c["ids"], default=0) >= exp["vocab_size"]: continue
    out["rids"].write(" ".join(map(str, c["ids"])).encode() + b"\n")
    out["rdec"].write(dec + b"\n")
    out["rdecskip"].write(decskip + b"\n")
PY
    tj="$d/tokenizer.json"
    "$TITAN" tokenize --tokenizer "$tj" --no-special "$W/p.txt" >"$W/o" 2>"$W/e"
    same "$name: ids as HF (no special tokens, $(wc -l <"$W/p.txt") texts)" "$W/p.ids" "$W/o"
    "$TITAN" tokenize --tokenizer "$tj" "$W/p.txt" >"$W/o" 2>"$W/e"
    same "$name: ids as HF (with special tokens)" "$W/p.sids" "$W/o"
    "$TITAN" tokenize --tokenizer "$tj" --decode "$W/p.sids" "$W/p.rids" >"$W/o" 2>"$W/e"
    cat "$W/p.dec" "$W/p.rdec" >"$W/want"
    same "$name: decoded text as HF" "$W/want" "$W/o"
    "$TITAN" tokenize --tokenizer "$tj" --decode --no-special "$W/p.sids" "$W/p.rids" >"$W/o" 2>"$W/e"
    cat "$W/p.decskip" "$W/p.rdecskip" >"$W/want"
    same "$name: decoded text as HF (special tokens skipped)" "$W/want" "$W/o"
  done
else
  skip_part "parity with the fixtures' expected ids (no python3 to read them)"
fi

# ---- help and bad input ---------------------------------------------------------
"$TITAN" help tokenize >"$W/o" 2>&1 && grep -q -- "--decode" "$W/o"
check "titan help tokenize" $?
"$TITAN" tokenize --help >"$W/o" 2>&1 && grep -q -- "--no-special" "$W/o"
check "titan tokenize --help" $?

printf '72 105\n1 2 3 258\n' >"$W/bad_ids.txt"
expect "id outside the vocabulary names the line and the id" 1 "bad_ids.txt:2: id 258 is outside the vocabulary \[0, 258\)" \
  "$TITAN" tokenize --decode "$W/bad_ids.txt"
printf '5\n-1\n' >"$W/neg.txt"
expect "negative id" 1 "neg.txt:2: id -1 is outside" "$TITAN" tokenize --decode "$W/neg.txt"
printf '40 69 455\n40 69 50257\n' >"$W/gpt2_ids.txt"
expect "id past a tokenizer.json's vocabulary" 1 "gpt2_ids.txt:2: id 50257 is outside the vocabulary \[0, [0-9]+\) of .*tokenizer.json" \
  "$TITAN" tokenize --decode --hf "$SRC/tests/fixtures/hf/gpt2" "$W/gpt2_ids.txt"
printf '1 2 three\n' >"$W/word.txt"
expect "a word among the ids" 1 "word.txt:1: 'three' is not a token id" "$TITAN" tokenize --decode "$W/word.txt"
expect "missing input file" 1 "nope.txt: cannot open" "$TITAN" tokenize "$W/nope.txt"
expect "missing input after a good one" 1 "nope2.txt: cannot open" "$TITAN" tokenize "$W/a.txt" "$W/nope2.txt"
expect "missing tokenizer.json in --hf" 1 "empty_model/tokenizer.json" "$TITAN" tokenize --hf "$W/empty_model"
printf 'ok\nbad \xff byte\n' >"$W/latin1.txt"
expect "text that is not UTF-8 names the line" 1 "latin1.txt:2: .*UTF-8 at byte 4" \
  "$TITAN" tokenize --hf "$SRC/tests/fixtures/hf/gpt2" "$W/latin1.txt"
expect "unknown option" 2 "unknown option --bogus" "$TITAN" tokenize --bogus
expect "two tokenizers" 2 "one tokenizer" "$TITAN" tokenize --hf "$SRC/tests/fixtures/hf/gpt2" --tokenizer x.json
expect "--hf without a value" 2 "needs a value" "$TITAN" tokenize --hf

cli_done cli_tokenize

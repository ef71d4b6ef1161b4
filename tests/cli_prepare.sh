#!/usr/bin/env bash
# cli_prepare.sh TITAN SRC — `titan prepare`'s validation split: a fraction
# that would leave val.bin (or train.bin) empty is an error that names the
# fraction and the document count, before any shard is written;
# --split-unit line makes each line of a .txt file a document;
# --val-fraction 1 is refused with the reason; a document the tokenizer
# refuses is named by its file and line.
set -u
TITAN=$1
. "$(dirname "$0")/lib_cli.sh" # W (removed on exit), pass/fail, check, expect, cli_done

# has NAME PATTERN FILE: FILE matches the extended regex PATTERN
has() {
  if grep -qE -e "$2" "$3"; then echo "ok   $1"; pass=$((pass + 1)); else
    echo "FAIL $1: no /$2/ in:"; cat "$3"; fail=$((fail + 1)); fi
}

# one long text: one .txt file is one document
{ for i in $(seq 1 40); do echo "line $i of the book, with some words on it"; echo; done; } >"$W/book.txt"

if expect -q "val-fraction on one document" 1 "" "$TITAN" prepare --out "$W/o1" --val-fraction 0.1 "$W/book.txt"; then
  has "val-fraction on one document: names the fraction, the count and the fix" \
    "--val-fraction 0.1 of 1 document .*holds out none.*val.bin would be empty.*--split-unit line" "$W/err"
fi
check "val-fraction on one document: no shard written" $([ ! -e "$W/o1/val.bin" ] && [ ! -e "$W/o1/train.bin" ]; echo $?)

if expect -q "val-fraction holding out every document" 1 "" \
  "$TITAN" prepare --out "$W/o2" --val-fraction 0.99999 "$W/book.txt"; then
  has "val-fraction holding out every document: says train.bin would be empty" \
    "--val-fraction 0.99999 of 1 document .*holds out every one.*train.bin would be empty" "$W/err"
fi

# --split-unit line: 40 documents (the empty lines are none), about 10% held out
if expect -q "--split-unit line" 0 "" \
  "$TITAN" prepare --out "$W/o3" --val-fraction 0.1 --split-unit line "$W/book.txt"; then
  docs=$(awk '/^(train|val):/ {n += $2} END {print n}' "$W/out")
  val=$(awk '/^val:/ {print $2}' "$W/out")
  tokens=$(awk '/^(train|val):/ {n += $4} END {print n}' "$W/out")
  want_tokens=$(grep -v '^$' "$W/book.txt" | awk '{n += length($0) + 2} END {print n}') # BOS ... EOS per line
  check "--split-unit line: one document per non-empty line ($docs), some held out ($val)" \
    $([ "$docs" -eq 40 ] && [ "$val" -ge 1 ] && [ "$val" -lt 40 ]; echo $?)
  check "--split-unit line: every byte of every line in the shards ($tokens tokens)" \
    $([ "$tokens" -eq "$want_tokens" ]; echo $?)
  check "--split-unit line: both shards written" $([ -s "$W/o3/val.bin" ] && [ -s "$W/o3/train.bin" ]; echo $?)
fi

# a .jsonl whose split is known only after reading it: two documents, 1% held out
printf '{"text": "first document"}\n{"text": "second document"}\n' >"$W/two.jsonl"
if expect -q "val-fraction holding out none of a .jsonl" 1 "" \
  "$TITAN" prepare --out "$W/o4" --val-fraction 0.01 "$W/two.jsonl"; then
  has "val-fraction holding out none of a .jsonl: names the count" "--val-fraction 0.01 of 2 documents holds out none" \
    "$W/err"
fi
check "val-fraction holding out none of a .jsonl: no shard left" $([ ! -e "$W/o4/val.bin" ]; echo $?)

# --val-fraction 0 asks for no validation set: one document is fine
expect -q "--val-fraction 0 on one document" 0 "" "$TITAN" prepare --out "$W/o5" --val-fraction 0 "$W/book.txt" &&
  has "--val-fraction 0 on one document" "train: 1 documents" "$W/out"

# refused options say why
if expect -q "--val-fraction 1" 2 "" "$TITAN" prepare --out "$W/o6" --val-fraction 1 "$W/book.txt"; then
  has "--val-fraction 1: says why" "--val-fraction .*\[0, 1\).*1 would leave nothing to train on" "$W/err"
fi
if expect -q "--val-fraction abc" 2 "" "$TITAN" prepare --out "$W/o6" --val-fraction abc "$W/book.txt"; then
  has "--val-fraction abc: names the range" "--val-fraction .*\[0, 1\), not abc" "$W/err"
fi
expect -q "--split-unit word" 2 "" "$TITAN" prepare --out "$W/o6" --split-unit word "$W/book.txt" &&
  has "--split-unit word: refused" "bad option --split-unit word" "$W/err"
: >"$W/empty.txt"
if expect -q "only empty files" 1 "" "$TITAN" prepare --out "$W/o7" --val-fraction 0 --split-unit line "$W/empty.txt"; then
  has "only empty files: says so" "no text" "$W/err"
fi

# a document the tokenizer refuses is named by its line, also past the first batch of 256
{ for i in $(seq 1 299); do echo "{\"text\": \"document $i\"}"; done; printf '{"text": "bad \xff byte"}\n'; } \
  >"$W/big.jsonl"
{ for i in $(seq 1 299); do echo "line $i"; done; printf 'bad \xff byte\n'; } >"$W/big.txt"
gpt2="$(dirname "$0")/fixtures/hf/gpt2"
if expect -q "tokenizer error in a .jsonl" 1 "" "$TITAN" prepare --hf "$gpt2" --out "$W/o8" "$W/big.jsonl"; then
  has "tokenizer error in a .jsonl: names the line" "big.jsonl:300: .*UTF-8" "$W/err"
fi
if expect -q "tokenizer error with --split-unit line" 1 "" \
  "$TITAN" prepare --hf "$gpt2" --split-unit line --out "$W/o8" "$W/big.txt"; then
  has "tokenizer error with --split-unit line: names the line" "big.txt:300: .*UTF-8 at byte 4" "$W/err"
fi

cli_done cli_prepare

#!/bin/bash
# crosscheck_chat_mask.sh BUILD_DIR SOURCE_DIR — the live cross-check of chat training flags (make
# crosscheck; not a CTest test: it needs transformers and tokenizers, though not torch):
# bench/chat_prep.py --check-only renders 1,000 conversations with the published Qwen2.5 and Llama 3
# templates of ../shared and the fixture tokenizers of Qwen2 and Llama 3 (tests/fixtures/tokenizers,
# byte-level BPE with the templates' special tokens), and checks that `titan tokenize --chat --mask`
# gives the ids and 0/1 flags that transformers' apply_chat_template and tokenizers' offsets give.
# $PYTHON (default python3) must import transformers.
set -u
build=$1 src=$2 py=${PYTHON:-python3}
if ! "$py" -c "import transformers, tokenizers" >/dev/null 2>&1; then
    echo "crosscheck_chat_mask: $py cannot import transformers and tokenizers (pip install transformers, or set PYTHON)"
    exit 1
fi
templates=${TITAN_SHARED_DIR:-$src/../shared}/fixtures/chat_templates
[ -d "$templates" ] || { echo "crosscheck_chat_mask: $templates is missing"; exit 1; }
tok=$src/tests/fixtures/tokenizers
"$py" "$src/bench/chat_prep.py" --check-only --titan "$build/titan" --n 1000 --template "$templates/qwen2.5-instruct.jinja" \
    --tokenizer "$tok/qwen2/tokenizer.json" --eos '<|im_end|>' &&
  "$py" "$src/bench/chat_prep.py" --check-only --titan "$build/titan" --n 1000 --template "$templates/llama-3-chat.jinja" \
    --tokenizer "$tok/llama3/tokenizer.json" --bos '<|begin_of_text|>' --eos '<|eot_id|>' ||
  { echo "crosscheck_chat_mask: FAILED"; exit 1; }
echo "crosscheck_chat_mask: passed"

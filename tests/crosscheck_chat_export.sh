#!/bin/bash
# crosscheck_chat_export.sh BUILD_DIR SOURCE_DIR — the live cross-check of a chat model's export in
# transformers (make crosscheck; not a CTest test: it needs transformers, though not torch). Two model
# folders are made from the fixtures, each with a chat template and an end-of-turn token: the Qwen2 one
# with ChatML (<|im_start|>, <|im_end|>; no BOS), the Llama one with Llama 3's template (a BOS that
# the template writes and the tokenizer would add again). Each is fine-tuned for 2 steps and exported
# (titan export), and tests/chat_export_check.py loads the exported folder with AutoTokenizer and
# GenerationConfig and checks that apply_chat_template renders each conversation as `titan tokenize
# --chat --render` does (with and without the generation prompt), that its ids for a [system,] user
# prompt are the ones `titan generate --chat` encodes, and that generation_config.json lists the ids
# titan stops at.
# $PYTHON (default python3) must import transformers.
set -u
build=$1 src=$2 py=${PYTHON:-python3}
if ! "$py" -c "import transformers" >/dev/null 2>&1; then
    echo "crosscheck_chat_export: $py cannot import transformers (pip install transformers, or set PYTHON)"
    exit 1
fi
titan=$build/titan fix=$src/tests/fixtures/hf
out=$(mktemp -d /tmp/titan_chat_export.XXXXXX)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=2

# the source folders: a fixture's files with a tokenizer_config.json (template, special tokens) and
# generation_config.json naming the end-of-turn token
mkdir -p "$out/qwen2" "$out/llama"
cp "$fix/qwen2/config.json" "$fix/qwen2/model.safetensors" "$fix/qwen2/tokenizer.json" "$out/qwen2/"
cp "$fix/llama/config.json" "$fix/llama/model.safetensors" "$fix/llama/tokenizer.json" "$out/llama/"
"$py" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
chatml = ("{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}")
llama3 = ("{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
          " + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
           "chat_template": chatml}, open(out + "/qwen2/tokenizer_config.json", "w"), indent=2)
json.dump({"bos_token_id": 600, "eos_token_id": 602}, open(out + "/qwen2/generation_config.json", "w"), indent=2)
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
           "chat_template": llama3}, open(out + "/llama/tokenizer_config.json", "w"), indent=2)
json.dump({"bos_token_id": 603, "eos_token_id": [604, 609]}, open(out + "/llama/generation_config.json", "w"), indent=2)
PY
for i in $(seq 1 40); do echo "Line $i: the cat sat on the mat, and the dog ran to the park."; done >"$out/corpus.txt"
for m in qwen2 llama; do
    "$titan" prepare --hf "$out/$m" --out "$out/$m.data" --val-fraction 0 --no-progress --split-unit line "$out/corpus.txt" \
        >"$out/$m.log" 2>&1 &&
        "$titan" train --model.hf_assets_path "$out/$m" --checkpoint.initial_load_in_hf true \
            --training.dataset_path "$out/$m.data/train.bin" --training.seq_len 32 --training.local_batch_size 2 \
            --training.steps 2 --generate.max_new_tokens 0 --checkpoint.enable true \
            --job.dump_folder "$out/$m.run" >>"$out/$m.log" 2>&1 &&
        "$titan" export --model.hf_assets_path "$out/$m" --job.dump_folder "$out/$m.run" --out "$out/$m.export" \
            >>"$out/$m.log" 2>&1
    if [ $? -ne 0 ]; then
        cat "$out/$m.log"
        echo "crosscheck_chat_export: $m: preparing, training or exporting failed"
        exit 1
    fi
done
"$py" "$src/tests/chat_export_check.py" "$titan" "$out/qwen2.export" "$out/llama.export"

#!/bin/bash
# crosscheck_lora.sh BUILD_DIR SOURCE_DIR — the live cross-check of titan's
# LoRA in PEFT (make crosscheck; not a CTest test: it needs torch and peft).
# test_lora trains each PEFT fixture's adapter (tests/fixtures/lora) for a few
# AdamW steps and writes it in PEFT's format, the merged model as a Hugging
# Face folder, and titan's loss after training; tests/lora_check.py then loads
# the adapter with PeftModel.from_pretrained on the base, checks that PEFT's
# loss on the same batch is titan's (1e-5 relative), and that the merged
# folder gives the adapted model's logits in transformers (1e-4).
# $PYTHON (default python3) must import torch, transformers, peft and safetensors.
set -u
build=$1 src=$2 py=${PYTHON:-python3}
if ! "$py" -c "import torch, transformers, peft, safetensors" >/dev/null 2>&1; then
    echo "crosscheck_lora: $py cannot import torch, transformers, peft and safetensors (pip install them, or set PYTHON)"
    exit 1
fi
out=$(mktemp -d /tmp/titan_lora_crosscheck.XXXXXX)
trap 'rm -rf "$out"' EXIT
if ! TITAN_LORA_EXPORT_DIR=$out OMP_NUM_THREADS=2 "$build/test_lora" >"$out/test_lora.log" 2>&1; then
    cat "$out/test_lora.log"
    echo "crosscheck_lora: test_lora failed while writing the adapters"
    exit 1
fi
pass=0 fail=0
for m in "$out"/*/; do
    m=$(basename "$m")
    if "$py" "$src/tests/lora_check.py" "$out/$m/adapter" "$src/tests/fixtures/hf/$m" \
        "$src/tests/fixtures/lora/$m.ref.safetensors" --expect-loss "$(cat "$out/$m/loss")" --rtol 1e-5 \
        --merged "$out/$m/merged" --atol 1e-4; then
        echo "ok   $m: PEFT loads titan's trained adapter at titan's loss; the merged folder gives its logits"
        pass=$((pass + 1))
    else
        echo "FAIL $m"
        fail=$((fail + 1))
    fi
done
echo "crosscheck_lora: $pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]

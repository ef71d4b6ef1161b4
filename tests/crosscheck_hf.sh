#!/bin/bash
# crosscheck_hf.sh BUILD_DIR SOURCE_DIR — the live cross-check of titan's
# Hugging Face exports in transformers (make crosscheck; not a CTest test: it
# needs torch): transformers loads the folders that test_hf and test_hf_dtype
# (bf16) write and gets the reference logits (tests/hf_roundtrip.py).
# $PYTHON (default python3) must import transformers, torch and safetensors.
set -u
build=$1 src=$2 py=${PYTHON:-python3}
if ! "$py" -c "import transformers, torch, safetensors" >/dev/null 2>&1; then
    echo "crosscheck_hf: $py cannot import transformers, torch and safetensors (pip install them, or set PYTHON)"
    exit 1
fi
out=$(mktemp -d /tmp/titan_hf_roundtrip.XXXXXX)
trap 'rm -rf "$out"' EXIT
for t in test_hf test_hf_dtype; do
    if ! TITAN_HF_EXPORT_DIR=$out OMP_NUM_THREADS=2 "$build/$t" >"$out/$t.log" 2>&1; then
        cat "$out/$t.log"
        echo "crosscheck_hf: $t failed while writing the exports"
        exit 1
    fi
done
"$py" "$src/tests/hf_roundtrip.py" "$out" "$src/tests/fixtures/hf"

#!/bin/bash
# cli_hf_roundtrip.sh TITAN_CLI SOURCE_DIR — transformers loads titan's Hugging
# Face exports and gets the reference logits (tests/hf_roundtrip.py). The
# exports are written by the test_hf and test_hf_dtype (bf16) programs beside
# the CLI in the build folder. Skipped (77) where python3 has no transformers
# and torch.
set -u
cli=$1 src=$2
if ! python3 -c "import transformers, torch, safetensors" >/dev/null 2>&1; then
    echo "skipped: python3 cannot import transformers, torch and safetensors"
    exit 77
fi
out=$(mktemp -d /tmp/titan_hf_roundtrip.XXXXXX)
trap 'rm -rf "$out"' EXIT
for t in test_hf test_hf_dtype; do
    prog=$(dirname "$cli")/$t
    if [ ! -x "$prog" ]; then
        echo "skipped: $prog not built"
        exit 77
    fi
    if ! TITAN_HF_EXPORT_DIR=$out OMP_NUM_THREADS=2 "$prog" >"$out/$t.log" 2>&1; then
        cat "$out/$t.log"
        echo "$t failed while writing the exports"
        exit 1
    fi
done
python3 "$src/tests/hf_roundtrip.py" "$out" "$src/tests/fixtures/hf"

#!/usr/bin/env bash
# families_step.sh [TITAN] [ROUNDS] — the training step of each family's LoRA recipe (configs/finetune/) over its
# model's published shape (configs/hf/shapes/: config.json alone, the weights random; the speed does not depend on
# them), one sequence of SEQ tokens a step, the families alternated over ROUNDS rounds, with the machine's peak
# measured before and after. Run it on a quiet machine, nothing else running.
#   SEQ (environment): tokens a step, 256 by default; RUNS: the recipe:shape pairs to run (all by default).
set -eu
TITAN=${1:-build/titan} ROUNDS=${2:-2} SEQ=${SEQ:-256}
SRC=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-gemma3_1b_lora:gemma-3-1b gemma2_2b_lora:gemma-2-2b smollm3_3b_lora:smollm3-3b olmo2_1b_lora:olmo-2-1b
gemma3_4b_lora:gemma-3-4b phi4_mini_lora:phi-4-mini granite3_2b_lora:granite-3.3-2b}
peak() { "$TITAN" bench peak | grep -E '^(fp32|bf16) ' | tr -s ' ' | tr '\n' ' '; echo; }
echo "peak before: $(peak)"
for ((r = 1; r <= ROUNDS; r++)); do
  for f in $RUNS; do
    recipe=${f%%:*} shape=${f#*:}
    out=$("$TITAN" bench step --config "$SRC/configs/finetune/$recipe.toml" \
      --model.hf_assets_path "$SRC/configs/hf/shapes/$shape" --training.seq_len "$SEQ" \
      --training.local_batch_size 1 --steps 2 --warmup 1)
    echo "round $r $recipe on $shape: $(echo "$out" | grep -E '^(step|tokens/s|TFLOP/s|memory) ' | tr -s ' ' |
      cut -c1-120 | tr '\n' ';')"
  done
done
echo "peak after: $(peak)"

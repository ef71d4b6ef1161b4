#!/usr/bin/env bash
# gen_fuzz_seeds.sh [TITAN] — the seed inputs of the fuzz targets whose
# formats no committed fixture holds, written by titan itself into
# tests/fuzz/seeds/<target>/ (small files, committed; tests/fuzz/run.sh adds
# the fixtures that seed the other targets, and these):
#   shard/        a text shard (version 1) and a conversation shard (version 2)
#   tfevents/     the TensorBoard event file of a 4-step run, after the
#                 target's mode byte (0: the bytes are a file)
#   ckpt_meta/    that run's checkpoint meta.json, a 2-rank FSDP run's and a
#                 2-rank expert-parallel MoE run's (their layouts; the
#                 fuzz_ckpt_layout target reads these too)
#
#   bash tools/gen_fuzz_seeds.sh build/titan
set -euo pipefail
TITAN=$(realpath "${1:-build/titan}")
cd "$(dirname "$0")/.."
OUT=tests/fuzz/seeds
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
rm -rf "$OUT"/{shard,tfevents,ckpt_meta}
mkdir -p "$OUT"/{shard,tfevents,ckpt_meta}

# token shards
printf '%s\n' "The cat sat on the mat." "A dog ran to the door, and back again." "Hello" >"$W/a.txt"
"$TITAN" prepare --out "$W/text" --val-fraction 0 --no-progress "$W/a.txt" >/dev/null
cp "$W/text/train.bin" "$OUT/shard/text_v1.bin"
printf '%s\n' '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye."}]}' \
  '{"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}' >"$W/c.jsonl"
printf '%s' "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}" \
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}" >"$W/chatml.jinja"
"$TITAN" prepare --chat --chat-template "$W/chatml.jinja" --tokenizer byte --out "$W/chat" --val-fraction 0 \
  --no-progress "$W/c.jsonl" >/dev/null
cp "$W/chat/train.bin" "$OUT/shard/chat_v2.bin"

# a 4-step run of a tiny model: its event file and checkpoint metadata
RUN=(--model.dim 16 --model.n_layers 1 --model.n_heads 2 --model.n_kv_heads 1 --model.ffn_dim 32
     --training.seq_len 256 --training.local_batch_size 1 --training.steps 4 --generate.max_new_tokens 0
     --validation.enable false --metrics.log_freq 1 --metrics.enable_tensorboard true --checkpoint.enable true
     --checkpoint.interval 4 --synthetic.train_tokens 20000)
OMP_NUM_THREADS=1 "$TITAN" train "${RUN[@]}" --job.dump_folder "$W/run" >/dev/null 2>&1
{ printf '\0'; cat "$W"/run/tb/events.out.tfevents.*; } >"$OUT/tfevents/run.bin"
cp "$W/run/checkpoint/step-4/meta.json" "$OUT/ckpt_meta/one_rank.json"
# two ranks, FSDP: the sharded layout
mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$TITAN" train "${RUN[@]}" \
  --metrics.enable_tensorboard false --parallelism.data_parallel_shard_degree 2 --job.dump_folder "$W/fsdp" >/dev/null 2>&1
cp "$W/fsdp/checkpoint/step-4/meta.json" "$OUT/ckpt_meta/fsdp2.json"
mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$TITAN" train "${RUN[@]}" \
  --metrics.enable_tensorboard false --model.n_layers 2 --model.num_experts 4 --model.top_k 2 --model.moe_ffn_dim 16 \
  --parallelism.data_parallel_shard_degree 2 --parallelism.expert_parallel_degree 2 --job.dump_folder "$W/ep" >/dev/null 2>&1
cp "$W/ep/checkpoint/step-4/meta.json" "$OUT/ckpt_meta/ep2.json"

du -sh "$OUT"/*

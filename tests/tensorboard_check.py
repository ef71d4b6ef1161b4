"""tensorboard_check.py — load a run's TensorBoard folder with pip's tensorboard
(its EventAccumulator, which checks every record's CRCs and purges what a
resumed run's SessionLog START replaces) and check that every figure of every
record of the run's metrics.jsonl is there at its step, once, as the float32
of the record's value (the last record of a step wins, as after a resume). With WRITE_FOLDER, also write an event
file there with tensorboard's own writer for our reader to read: steps 1-3,
tags "loss" (1 / step) and "lr" (0.001), and a SessionLog START at step 2.

usage: python3 tests/tensorboard_check.py TB_FOLDER METRICS_JSONL [WRITE_FOLDER]
Run by tests/test_tensorboard.c only where `import tensorboard` works."""
import json
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

TRAIN = {"loss": ("loss_metrics/global_avg_loss", 1), "grad_norm": ("grad_norm", 1), "lr": ("lr", 1),
         "tokens_per_sec": ("throughput(tps)", 1), "tflops": ("tflops", 1), "mfu": ("mfu(%)", 1),
         "mfu_attention_executed": ("mfu_attention_executed(%)", 1),
         "peak_rss_bytes": ("memory/peak_rss(GiB)", 2**30), "arena_bytes": ("memory/arena(GiB)", 2**30)}
VAL = {"val_loss": ("validation_metrics/loss", 1), "val_ppl": ("validation_metrics/perplexity", 1)}
FLOORS = {"loss_metrics/corpus_floor": "loss_metrics/global_avg_loss",
          "validation_metrics/corpus_floor": "validation_metrics/loss"}


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def write(folder):
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(folder)
    for step in (1, 2, 3):
        values = [summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / step),
                  summary_pb2.Summary.Value(tag="lr", simple_value=0.001)]
        w.add_event(event_pb2.Event(step=step, wall_time=1.5, summary=summary_pb2.Summary(value=values)))
    w.add_event(event_pb2.Event(step=2, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)))
    w.close()


def main(tb, jsonl):
    want = {}  # tag -> {step: value}
    with open(jsonl) as f:
        for line in f:
            r = json.loads(line)
            for field, (tag, scale) in (VAL if "val_loss" in r else TRAIN).items():
                want.setdefault(tag, {})[int(r["step"])] = f32(r[field] / scale)
    acc = EventAccumulator(tb, size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    got = {tag: acc.Scalars(tag) for tag in acc.Tags()["scalars"]}
    bad = []
    for tag, steps in want.items():
        points = got.get(tag, [])
        have = {p.step: p.value for p in points}
        if len(have) != len(points):
            bad.append(f"{tag}: a step appears twice in {[p.step for p in points]}")
        if have != steps:
            bad.append(f"{tag}: tensorboard has {have}, metrics.jsonl {steps}")
    for tag in got:
        if tag in FLOORS:
            floor_steps = sorted(p.step for p in got[tag])
            if floor_steps != sorted(want.get(FLOORS[tag], {})):
                bad.append(f"{tag} at steps {floor_steps}, its loss at {sorted(want.get(FLOORS[tag], {}))}")
            if len({p.value for p in got[tag]}) != 1:
                bad.append(f"{tag} is not one constant")
        elif tag not in want:
            bad.append(f"unexpected tag {tag}")
    for b in bad:
        print("tensorboard_check:", b)
    n = sum(len(s) for s in want.values())
    print(f"tensorboard_check: {'FAILED' if bad else 'ok'}: {n} figures of {len(want)} tags in {tb} "
          f"read by tensorboard's EventAccumulator")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    if len(sys.argv) == 4:
        write(sys.argv[3])
    sys.exit(main(sys.argv[1], sys.argv[2]))

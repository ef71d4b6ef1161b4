#!/usr/bin/env python3
"""The step's products taken together, from the output of
`titan bench gemm --config CONFIG`: each product's time (its FLOPs over the
GFLOP/s printed for it) times how often a step runs it (a layer's products
once a layer, the head's once), summed; and the GFLOP/s and fraction of the
peak that total time gives (the time-weighted efficiency the CPU-performance
issue asks for). The square sizes are left out: the step does not run them.

Usage: titan bench gemm --config configs/llama_768.toml --dtype bf16 > out.txt
       python3 bench/gemm_weighted.py --layers 12 out.txt [more.txt ...]
Each file is one run; with several, each is summed on its own (alternate the
binaries that made them: A, B, A, B)."""
import argparse
import re
import sys

ROW = re.compile(r"^\s+(\d+)x(\d+)x(\d+)\s+(nn|nt|tn|tt)\s+(.+?)\s+\S+->\S+\s+\|\s+([\d.]+)\s+([\d.]+)%")


def summarize(path, layers, dtype):
    total_ms = flops = 0.0
    peak = None
    section = None
    with open(path) as f:
        for line in f:
            if line.startswith("peak"):
                m = re.search(r"f32 ([\d.]+) GFLOP/s, bf16 ([\d.]+) GFLOP/s", line)
                if m:
                    peak = float(m.group(2) if dtype == "bf16" else m.group(1))
            if line.startswith("bf16 ") and "MxNxK" in line:
                section = "bf16"
            elif line.startswith("f32 ") and "MxNxK" in line:
                section = "f32"
            m = ROW.match(line)
            if not m or section != dtype:
                continue
            M, N, K = (int(m.group(i)) for i in (1, 2, 3))
            name, gflops = m.group(5).strip(), float(m.group(6))
            if name == "square" or gflops <= 0:
                continue
            calls = 1 if name.startswith("head") else layers
            f_ = 2.0 * M * N * K * calls
            total_ms += f_ / (gflops * 1e9) * 1e3
            flops += f_
    if not flops:
        sys.exit(f"{path}: no {dtype} step products found (the output of titan bench gemm --config ...?)")
    rate = flops / (total_ms * 1e-3) / 1e9
    pk = f", {100 * rate / peak:.1f}% of the {peak:.0f} GFLOP/s peak" if peak else ""
    print(f"{path}: {dtype} step products {total_ms:.1f} ms a step, {rate:.1f} GFLOP/s{pk}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, required=True, help="the config's n_layers")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.layers < 1:
        sys.exit(f"--layers {a.layers}: a model has at least one layer")
    for p in a.files:
        try:
            summarize(p, a.layers, a.dtype)
        except OSError as e:
            sys.exit(f"{p}: {e.strerror}")


if __name__ == "__main__":
    main()

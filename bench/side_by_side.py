#!/usr/bin/env python3
"""Train the same Llama-style model with the same shapes, optimizer and dtype in
PyTorch and in titan, alternately, and print both tokens/s, peak memory and the
ratio. PyTorch is a benchmark-only dependency (pip's torch or Debian's
python3-torch); titan is timed with `titan bench step`.

  python3 bench/side_by_side.py --config configs/llama_288.toml --rounds 3
  python3 bench/side_by_side.py --config configs/llama_768.toml --compile
"""
import argparse, math, os, re, resource, subprocess, sys, time


def titan_shape(titan, config, overrides):
    out = subprocess.run([titan, "plan", "--config", config] + overrides, check=True, capture_output=True, text=True).stdout
    m = re.search(r"dim (\d+), (\d+) layers, (\d+) heads \((\d+) kv, head_dim (\d+)\), ffn (\d+), vocab (\d+), (\w+) embeddings", out)
    if not m:
        sys.exit("cannot read the model shape from titan plan:\n" + out)
    dim, layers, heads, kv, hd, ffn, vocab = map(int, m.groups()[:7])
    return dict(dim=dim, layers=layers, heads=heads, kv=kv, hd=hd, ffn=ffn, vocab=vocab, tied=m.group(8) == "tied")


def run_torch(python, shape, B, T, steps, warmup, dtype, compile_, threads, lr):
    """Runs in a child process so that its peak RSS is its own."""
    code = f"""
import math, resource, time, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0); torch.set_num_threads({threads})
D, L, H, KV, HD, FF, V, B, T = {shape['dim']}, {shape['layers']}, {shape['heads']}, {shape['kv']}, {shape['hd']}, {shape['ffn']}, {shape['vocab']}, {B}, {T}
class RMSNorm(nn.Module):
    def __init__(s, d): super().__init__(); s.w = nn.Parameter(torch.ones(d))
    def forward(s, x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * s.w
inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD)); ang = torch.outer(torch.arange(T).float(), inv)
cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
def rope(x):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin
causal = torch.full((T, T), float("-inf")).triu(1)
def attend(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"): return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch < 2.0 has no fused attention: the textbook form
    return torch.softmax((q @ k.transpose(-2, -1)) * HD ** -0.5 + causal, -1) @ v
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.n1, s.n2 = RMSNorm(D), RMSNorm(D)
        s.q, s.k, s.v, s.o = nn.Linear(D, H*HD, bias=False), nn.Linear(D, KV*HD, bias=False), nn.Linear(D, KV*HD, bias=False), nn.Linear(H*HD, D, bias=False)
        s.w1, s.w3, s.w2 = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False), nn.Linear(FF, D, bias=False)
    def forward(s, x):
        h = s.n1(x)
        q = rope(s.q(h).view(B, T, H, HD).transpose(1, 2)); k = rope(s.k(h).view(B, T, KV, HD).transpose(1, 2))
        v = s.v(h).view(B, T, KV, HD).transpose(1, 2)
        if KV != H: k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        a = attend(q, k, v).transpose(1, 2).reshape(B, T, H*HD)
        x = x + s.o(a); h = s.n2(x)
        return x + s.w2(F.silu(s.w1(h)) * s.w3(h))
class Model(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList([Block() for _ in range(L)]); s.norm = RMSNorm(D)
        s.out = nn.Linear(D, V, bias=False)
        if {shape['tied']}: s.out.weight = s.emb.weight
    def forward(s, idx, tgt):
        x = s.emb(idx)
        for b in s.blocks: x = b(x)
        return F.cross_entropy(s.out(s.norm(x)).view(-1, V).float(), tgt.view(-1))
m = Model()
opt = torch.optim.AdamW(m.parameters(), lr={lr}, betas=(0.9, 0.95), weight_decay=0.1)
step_fn = m
if {compile_}: step_fn = torch.compile(m)
idx = torch.randint(0, min(V, 258), (B, T)); tgt = torch.randint(0, min(V, 258), (B, T))
dt = torch.bfloat16 if "{dtype}" == "bf16" else None
def step():
    if dt is not None:
        with torch.autocast("cpu", dtype=dt): loss = step_fn(idx, tgt)
    else: loss = step_fn(idx, tgt)
    loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range({warmup}): step()
t0 = time.perf_counter()
for _ in range({steps}): step()
el = time.perf_counter() - t0
print("TPS", B * T * {steps} / el, "RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "VER", torch.__version__)
"""
    env = dict(os.environ)
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    m = re.search(r"TPS ([\d.e+]+) RSS (\d+) VER (\S+)", out)
    return float(m.group(1)), int(m.group(2)), m.group(3)


def run_titan(titan, config, overrides, steps, warmup):
    cmd = ["/usr/bin/time", "-f", "MAXRSS %M", titan, "bench", "step", "--config", config, "--steps", str(steps),
           "--warmup", str(warmup)] + overrides
    p = subprocess.run(cmd, check=True, capture_output=True, text=True)
    tps = float(re.search(r"tokens/s\s+(\d+)", p.stdout).group(1))
    rss = int(re.search(r"MAXRSS (\d+)", p.stderr).group(1)) * 1024
    return tps, rss


def median(x):
    x = sorted(x)
    return x[len(x) // 2] if len(x) % 2 else 0.5 * (x[len(x) // 2 - 1] + x[len(x) // 2])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--titan", default="build/titan")
    ap.add_argument("--config", default="configs/llama_288.toml")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile", action="store_true", help="torch.compile the PyTorch model")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--python", default=sys.executable, help="the Python whose torch to run (e.g. /usr/bin/python3 for Debian's python3-torch)")
    ap.add_argument("titan_overrides", nargs="*", help="extra --section.key value pairs for titan (after --)")
    a = ap.parse_args()
    over = list(a.titan_overrides)
    if a.dtype == "bf16":
        over += ["--training.mixed_precision_param", "bfloat16"]
    shape = titan_shape(a.titan, a.config, over)
    bt = subprocess.run([a.titan, "bench", "step", "--config", a.config, "--steps", "1", "--warmup", "0"] + over,
                        check=True, capture_output=True, text=True).stdout
    B, T = map(int, re.search(r"(\d+) x (\d+) tokens", bt).groups())
    lr = 1e-3
    print(f"model: dim {shape['dim']}, {shape['layers']} layers, {shape['heads']} heads ({shape['kv']} kv), ffn {shape['ffn']}, "
          f"vocab {shape['vocab']}, tied {shape['tied']}; batch {B} x {T}; {a.dtype}; AdamW; {a.threads} threads")
    tt, tr, pt, pr = [], [], [], []
    ver = "?"
    for r in range(a.rounds):
        x, y = run_titan(a.titan, a.config, over, a.steps, a.warmup)
        tt.append(x); tr.append(y)
        x, y, ver = run_torch(a.python, shape, B, T, a.steps, a.warmup, a.dtype, a.compile, a.threads, lr)
        pt.append(x); pr.append(y)
        print(f"round {r + 1}: titan {tt[-1]:,.0f} tok/s  torch {pt[-1]:,.0f} tok/s  ratio {tt[-1] / pt[-1]:.2f}")
    name = f"torch {ver}" + (" compile" if a.compile else " eager")
    print(f"median tokens/s: titan {median(tt):,.0f}   {name} {median(pt):,.0f}   ratio {median(tt) / median(pt):.2f}x")
    print(f"median peak RSS: titan {median(tr) / 2**20:,.0f} MiB   {name} {median(pr) / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train the same Llama-style model with the same shapes, optimizer and dtype in
PyTorch and in titan, alternately, and print both tokens/s, peak memory and the
ratio. PyTorch is a benchmark-only dependency (pip's torch, or Debian's
python3-torch through --python /usr/bin/python3); titan is timed with
`titan bench step`.

  python3 bench/side_by_side.py --config configs/llama_288.toml --dtype bf16 --rounds 3
  python3 bench/side_by_side.py --config configs/llama_768.toml --compile
  python3 bench/side_by_side.py --python /usr/bin/python3 --torch-env OMP_WAIT_POLICY=PASSIVE --dtype fp32

PyTorch gets its best settings: torch.set_num_threads(cores), the fused
scaled_dot_product_attention and F.rms_norm where the version has them, the
fused (or else foreach) AdamW, bf16 through torch.autocast; --compile wraps the
model in torch.compile; --torch-env sets variables for the PyTorch process
only (OMP_WAIT_POLICY=PASSIVE makes Debian's fp32 build markedly faster).
Both sides train on random tokens drawn uniformly from the whole vocabulary
(inputs and targets), one causal document per row: the cost of a step does
not depend on the text, and the embedding rows and cross-entropy columns the
two touch are alike. The script checks that titan's `bench step` says it draws
them that way.

Mixture-of-Experts: when the model has num_experts > 0 (as `titan plan --json`
resolves the recipe, its flavor and the command line), PyTorch builds the same
MoE layers: a
bias-free router whose logits are cast to fp32, softmax or sigmoid scores
(score_func), top_k, renormalised over the k (route_norm, sum + 1e-20), times
route_scale; SwiGLU experts of width moe_ffn_dim (0: ffn_dim), each token's
output the sum of its k gated expert outputs (gated inputs with
score_before_experts); num_shared_experts as one dense SwiGLU of
num_shared_experts * moe_ffn_dim; the first n_dense_layers layers, and with decoder_sparse_step the layers l where (l + 1) % step != 0,
keep the dense MLP. --moe-impl picks the PyTorch experts: `loop` (tokens sorted
by expert, then per expert a gather, its SwiGLU and a weighted index_add_, as
Hugging Face's eager Mixtral / Qwen3-MoE), `grouped` (torch._grouped_mm over
the stacked (E, D, 2F) and (E, F, D) weights with offsets; reported as not
running when this torch lacks it or it fails on the CPU for the dtype), or
`both` (default: alternated in each round, each with its titan/torch ratio,
the faster named; the last line is titan over the faster one). Both start
from the same weights, and the step-0 losses of the two are printed.

  python3 bench/side_by_side.py --config configs/moe_288.toml --dtype bf16 --rounds 3
  python3 bench/side_by_side.py --config configs/moe_debug.toml --moe-impl grouped

LoRA: --lora R trains rank-R adapters (alpha 2R, no dropout) on every linear
layer of the blocks (q, k, v, o and the MLP's three; not the head) over a
frozen base on both sides: PyTorch through PEFT's get_peft_model (pip peft;
the base in fp32 under bf16 autocast, as PEFT users train), titan with
--lora.rank R --lora.alpha 2R (its base in the compute dtype: bf16 with
--dtype bf16). Only the adapters are in either optimizer.

  python3 bench/side_by_side.py --config configs/llama_768.toml --dtype bf16 --lora 16
"""
import argparse, json, os, re, subprocess, sys

TORCH_STEP = r"""
import math, os, resource, sys, time, torch, torch.nn as nn, torch.nn.functional as F
D, L, H, KV, HD, FF, V, B, T, STEPS, WARMUP, THREADS, TIED, BF16, COMPILE, BETA2, WD = sys.argv[1:18]
D, L, H, KV, HD, FF, V, B, T, STEPS, WARMUP, THREADS = map(int, (D, L, H, KV, HD, FF, V, B, T, STEPS, WARMUP, THREADS))
TIED, BF16, COMPILE, BETA2, WD = TIED == "1", BF16 == "1", COMPILE == "1", float(BETA2), float(WD)
MOE = len(sys.argv) > 18  # Mixture-of-Experts: eleven more arguments
if MOE:
    E, K, MF, SCORE, RNORM, RSCALE, NSH, KDENSE, SSTEP, SBEFORE, IMPL = sys.argv[18:29]
    E, K, MF, NSH, KDENSE, SSTEP = int(E), int(K), int(MF), int(NSH), int(KDENSE), max(int(SSTEP), 1)
    RNORM, RSCALE, SBEFORE = RNORM == "1", float(RSCALE), SBEFORE == "1"
torch.manual_seed(0); torch.set_num_threads(THREADS)
features = []
def norm(x, w):
    if hasattr(F, "rms_norm"): return F.rms_norm(x, (x.shape[-1],), w, 1e-5)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
features.append("F.rms_norm" if hasattr(F, "rms_norm") else "RMSNorm in ops")
inv = 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD)); ang = torch.outer(torch.arange(T).float(), inv)
cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
def rope(x):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin
causal = torch.full((T, T), float("-inf")).triu(1)
SDPA = hasattr(F, "scaled_dot_product_attention")
features.append("SDPA" if SDPA else "attention in ops (no SDPA before torch 2.0)")
def attend(q, k, v):
    if SDPA: return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return torch.softmax((q @ k.transpose(-2, -1)) * HD ** -0.5 + causal, -1) @ v
class MoE(nn.Module):
    # Router (fp32 scores, top-k, optional renormalisation, scale), routed SwiGLU experts of width MF, and
    # NSH shared experts as one dense SwiGLU of width NSH*MF. Both IMPLs start from the same weights. The gate
    # multiplies each expert's output, or its input with SBEFORE (titan's score_before_experts).
    def __init__(s):
        super().__init__(); s.router = nn.Linear(D, E, bias=False)
        w1, w3 = torch.empty(E, MF, D).uniform_(-D ** -0.5, D ** -0.5), torch.empty(E, MF, D).uniform_(-D ** -0.5, D ** -0.5)
        w2 = torch.empty(E, D, MF).uniform_(-MF ** -0.5, MF ** -0.5)  # nn.Linear's default bounds
        if IMPL == "loop":  # one (F, D), (F, D), (D, F) weight set per expert, as HF Mixtral / Qwen3-MoE eager
            s.w1 = nn.ParameterList([nn.Parameter(w1[e].clone()) for e in range(E)])
            s.w3 = nn.ParameterList([nn.Parameter(w3[e].clone()) for e in range(E)])
            s.w2 = nn.ParameterList([nn.Parameter(w2[e].clone()) for e in range(E)])
        else:  # stacked: (E, 2F, D) for w1|w3 and (E, D, F) for w2; _grouped_mm gets their (E, D, 2F), (E, F, D) transposes
            s.w13, s.w2 = nn.Parameter(torch.cat([w1, w3], 1)), nn.Parameter(w2)
        if NSH:
            s.s1, s.s3, s.s2 = nn.Linear(D, NSH*MF, bias=False), nn.Linear(D, NSH*MF, bias=False), nn.Linear(NSH*MF, D, bias=False)
    def forward(s, h):
        x = h.reshape(-1, D); N = x.shape[0]
        logits = s.router(x).float()
        sc = torch.softmax(logits, -1) if SCORE == "softmax" else torch.sigmoid(logits)
        g, ei = sc.topk(K, -1)
        if RNORM: g = g / (g.sum(-1, keepdim=True) + 1e-20)
        g = g * RSCALE
        fe = ei.reshape(-1); order = torch.sort(fe, stable=True).indices  # the (token, slot) pairs by expert
        tok, gs = order // K, g.reshape(-1)[order]
        counts = torch.bincount(fe, minlength=E)
        dt = torch.bfloat16 if BF16 else x.dtype  # what autocast computes the experts in
        xd = x.to(dt)
        if IMPL == "loop":
            y = torch.zeros(N, D, dtype=dt); start = 0
            for e, c in enumerate(counts.tolist()):
                if c == 0: continue
                t, ge = tok[start : start + c], gs[start : start + c]; start += c
                xe = xd[t] * ge[:, None].to(dt) if SBEFORE else xd[t]
                ye = F.linear(F.silu(F.linear(xe, s.w1[e])) * F.linear(xe, s.w3[e]), s.w2[e])
                y.index_add_(0, t, ye if SBEFORE else ye * ge[:, None].to(ye.dtype))
        else:
            offs = counts.cumsum(0).to(torch.int32)
            xs = xd[tok] * gs[:, None].to(dt) if SBEFORE else xd[tok]
            hh = torch._grouped_mm(xs, s.w13.to(dt).transpose(-2, -1), offs=offs)  # (N*k, 2F)
            ye = torch._grouped_mm(F.silu(hh[:, :MF]) * hh[:, MF:], s.w2.to(dt).transpose(-2, -1), offs=offs)  # (N*k, D)
            y = torch.zeros(N, D, dtype=dt).index_add_(0, tok, ye if SBEFORE else ye * gs[:, None].to(ye.dtype))
        if NSH: y = y + s.s2(F.silu(s.s1(x)) * s.s3(x))
        return y.view(B, T, D)
if MOE:
    features.append("MoE " + ("per-expert loop (sort, gather, SwiGLU, index_add_)" if IMPL == "loop"
                              else "torch._grouped_mm over all experts (offsets)"))
class Block(nn.Module):
    def __init__(s, i=0):
        super().__init__(); s.n1, s.n2 = nn.Parameter(torch.ones(D)), nn.Parameter(torch.ones(D))
        s.q, s.k, s.v, s.o = nn.Linear(D, H*HD, bias=False), nn.Linear(D, KV*HD, bias=False), nn.Linear(D, KV*HD, bias=False), nn.Linear(H*HD, D, bias=False)
        s.moe = MoE() if MOE and i >= KDENSE and (i + 1) % SSTEP == 0 else None  # titan's rule for an MoE layer
        if s.moe is None:
            s.w1, s.w3, s.w2 = nn.Linear(D, FF, bias=False), nn.Linear(D, FF, bias=False), nn.Linear(FF, D, bias=False)
    def forward(s, x):
        h = norm(x, s.n1)
        q = rope(s.q(h).view(B, T, H, HD).transpose(1, 2)); k = rope(s.k(h).view(B, T, KV, HD).transpose(1, 2))
        v = s.v(h).view(B, T, KV, HD).transpose(1, 2)
        if KV != H: k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        a = attend(q, k, v).transpose(1, 2).reshape(B, T, H*HD)
        x = x + s.o(a); h = norm(x, s.n2)
        if s.moe is not None: return x + s.moe(h)
        return x + s.w2(F.silu(s.w1(h)) * s.w3(h))
class Model(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(V, D); s.blocks = nn.ModuleList([Block(i) for i in range(L)])
        s.norm = nn.Parameter(torch.ones(D)); s.out = nn.Linear(D, V, bias=False)
        if TIED: s.out.weight = s.emb.weight
    def forward(s, idx, tgt):
        x = s.emb(idx)
        for b in s.blocks: x = b(x)
        return F.cross_entropy(s.out(norm(x, s.norm)).view(-1, V).float(), tgt.view(-1))
m = Model()
LORA = int(os.environ.get("SIDE_BY_SIDE_LORA", "0"))
if LORA:  # PEFT's adapters on every linear layer of the blocks, the base frozen
    import peft
    m = peft.get_peft_model(m, peft.LoraConfig(r=LORA, lora_alpha=2 * LORA, lora_dropout=0.0,
                                               target_modules=["q", "k", "v", "o", "w1", "w3", "w2"]))
    features.append(f"PEFT {peft.__version__} LoRA r={LORA} on q, k, v, o, w1, w3, w2")
decay = [p for n, p in m.named_parameters() if p.requires_grad and p.ndim >= 2]  # 3-D: stacked MoE experts
rest = [p for n, p in m.named_parameters() if p.requires_grad and p.ndim < 2]
groups = [{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}]
try:
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, BETA2), fused=True); opt_kind = "fused AdamW"
    p0 = next(m.parameters()); p0.grad = torch.zeros_like(p0); opt.step(); opt.zero_grad(set_to_none=True)
except Exception:
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, BETA2)); opt_kind = "foreach AdamW"
features.append(opt_kind)
step_fn = torch.compile(m) if COMPILE else m
idx = torch.randint(0, V, (B, T)); tgt = torch.randint(0, V, (B, T))  # the whole vocabulary, as titan bench step
def step():
    if BF16:
        with torch.autocast("cpu", dtype=torch.bfloat16): loss = step_fn(idx, tgt)
    else: loss = step_fn(idx, tgt)
    loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step(); opt.zero_grad(set_to_none=True)
    return loss
if MOE:  # the first step, untimed, tells whether this IMPL runs here and gives its step-0 loss
    try:
        if IMPL == "grouped" and not hasattr(torch, "_grouped_mm"): raise RuntimeError("this torch has no torch._grouped_mm")
        loss0 = step().item()
    except Exception as e:
        if IMPL != "grouped": raise
        print("NOGROUPED", f"{type(e).__name__}: {e}".replace("\n", " ")[:600]); sys.exit(3)
    print("LOSS0", repr(loss0)); WARMUP = max(WARMUP - 1, 0)
for _ in range(WARMUP): step()
t0 = time.perf_counter()
for _ in range(STEPS): step()
el = time.perf_counter() - t0
print("TPS", B * T * STEPS / el, "RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "VER", torch.__version__,
      "FEAT", ", ".join(features))
"""


def titan_shape(titan, config, overrides):
    out = subprocess.run([titan, "plan", "--config", config] + overrides, check=True, capture_output=True, text=True).stdout
    m = re.search(r"dim (\d+), (\d+) layers, (\d+) heads \((\d+) kv, head_dim (\d+)\), ffn (\d+), vocab (\d+), (\w+) embeddings", out)
    if not m:
        sys.exit("cannot read the model shape from titan plan:\n" + out)
    dim, layers, heads, kv, hd, ffn, vocab = map(int, m.groups()[:7])
    return dict(dim=dim, layers=layers, heads=heads, kv=kv, hd=hd, ffn=ffn, vocab=vocab, tied=m.group(8) == "tied")


def config_value(config, section, key, default):
    """A float from the recipe (the optimizer's beta2, weight decay), as the recipe writes it."""
    sec = None
    for line in open(config):
        line = line.split("#")[0].strip()
        if line.startswith("["):
            sec = line.strip("[]").strip()
        elif sec == section and "=" in line and line.split("=")[0].strip() == key:
            return float(line.split("=", 1)[1])
    return default


def moe_config(titan, config, overrides):
    """The MoE layers as titan resolves them (`titan plan --json`: recipe, flavor and command line together), or
    None for a dense model."""
    out = subprocess.run([titan, "plan", "--json", "--config", config] + overrides, check=True, capture_output=True,
                         text=True).stdout
    e = json.loads(out)["model"].get("moe")
    if not e:
        return None
    F = e["moe_ffn_dim"]
    return dict(E=e["num_experts"], k=e["top_k"], F=F, score=e["score_func"], norm=e["route_norm"],
                scale=e["route_scale"], shared=e["shared_ffn_dim"] // F, first_dense=e["n_dense_layers"],
                sparse_step=e["decoder_sparse_step"], score_before=e["score_before_experts"],
                groups=e["num_expert_groups"], balance=e["balancing_bias"])


def run_torch(a, shape, B, T, beta2, wd, moe=None, impl=None):
    """Runs in a child process so that its peak RSS is its own. With moe, returns also the step-0 loss, or None
    when impl is grouped and torch._grouped_mm does not run here (then the reason instead of the figures)."""
    args = [shape["dim"], shape["layers"], shape["heads"], shape["kv"], shape["hd"], shape["ffn"], shape["vocab"], B, T,
            a.steps, a.warmup, a.threads, int(shape["tied"]), int(a.dtype == "bf16"), int(a.compile), beta2, wd]
    if moe:
        args += [moe["E"], moe["k"], moe["F"], moe["score"], int(moe["norm"]), moe["scale"], moe["shared"],
                 moe["first_dense"], moe["sparse_step"], int(moe["score_before"]), impl]
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in a.torch_env)
    if a.lora:
        env["SIDE_BY_SIDE_LORA"] = str(a.lora)
    p = subprocess.run([a.python, "-c", TORCH_STEP] + [str(x) for x in args], capture_output=True, text=True, env=env)
    if moe and impl == "grouped" and p.returncode == 3:
        m = re.search(r"NOGROUPED (.*)", p.stdout)
        if m:
            return None, m.group(1)
    m = re.search(r"TPS ([\d.e+]+) RSS (\d+) VER (\S+) FEAT (.*)", p.stdout)
    if p.returncode or not m:
        sys.exit(f"the PyTorch run{' (' + impl + ')' if moe else ''} failed:\n{p.stdout}\n{p.stderr}")
    out = float(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    if moe:
        return out, float(re.search(r"LOSS0 (\S+)", p.stdout).group(1))
    return out


def run_titan(a, overrides):
    cmd = ["/usr/bin/time", "-f", "MAXRSS %M", a.titan, "bench", "step", "--config", a.config, "--steps", str(a.steps),
           "--warmup", str(a.warmup)] + overrides
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"tokens/s\s+(\d+)", p.stdout)
    if p.returncode or not m:
        sys.exit(f"the titan run failed:\n{p.stdout}\n{p.stderr}")
    rss = int(re.search(r"MAXRSS (\d+)", p.stderr).group(1)) * 1024
    return float(m.group(1)), rss


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
    ap.add_argument("--python", default=sys.executable,
                    help="the Python whose torch to run (/usr/bin/python3 for Debian's python3-torch)")
    ap.add_argument("--torch-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for the PyTorch process only (repeatable)")
    ap.add_argument("--moe-impl", default="both", choices=["loop", "grouped", "both"],
                    help="MoE configs only: the PyTorch experts as a per-expert loop, as torch._grouped_mm, or both "
                         "(alternated within each round)")
    ap.add_argument("--lora", type=int, default=0, metavar="R",
                    help="train rank-R LoRA adapters on a frozen base on both sides (PyTorch: PEFT)")
    ap.add_argument("titan_overrides", nargs="*", help="extra --section.key value pairs for titan (after --)")
    a = ap.parse_args()
    over = list(a.titan_overrides) + ["--training.mixed_precision_param", "bfloat16" if a.dtype == "bf16" else "float32"]
    if a.lora:
        over += ["--lora.rank", str(a.lora), "--lora.alpha", str(2 * a.lora)]
    shape = titan_shape(a.titan, a.config, over)
    bt = subprocess.run([a.titan, "bench", "step", "--config", a.config, "--steps", "1", "--warmup", "0"] + over,
                        check=True, capture_output=True, text=True).stdout
    B, T = map(int, re.search(r"(\d+) x (\d+) tokens", bt).groups())
    drawn = re.search(r"uniform over all (\d+) ids of the vocabulary", bt)
    if not drawn or int(drawn.group(1)) != shape["vocab"]:  # the PyTorch side draws from torch.randint(0, V)
        sys.exit(f"titan bench step does not say it draws its tokens from all {shape['vocab']} ids:\n{bt}")
    beta2, wd = config_value(a.config, "optimizer", "beta2", 0.95), config_value(a.config, "optimizer", "weight_decay", 0.1)
    for kv in a.torch_env:
        if "=" not in kv:
            sys.exit(f"--torch-env wants KEY=VALUE, not '{kv}'")
    env = " ".join(f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS") if k in os.environ)
    env += (" " if env else "") + " ".join(f"torch: {kv}" for kv in a.torch_env)
    print(f"model: dim {shape['dim']}, {shape['layers']} layers, {shape['heads']} heads ({shape['kv']} kv), ffn {shape['ffn']}, "
          f"vocab {shape['vocab']}, tied {shape['tied']}; batch {B} x {T}; {a.dtype}; AdamW (beta2 {beta2}, wd {wd}); "
          f"{a.threads} threads; {a.warmup} warmup + {a.steps} timed steps per round{'; ' + env if env else ''}"
          f"{f'; LoRA rank {a.lora}, alpha {2 * a.lora}, the base frozen' if a.lora else ''}")
    moe = moe_config(a.titan, a.config, over)
    if moe:
        return main_moe(a, over, shape, B, T, beta2, wd, moe)
    tt, tr, pt, pr = [], [], [], []
    ver = feat = "?"
    for r in range(a.rounds):
        x, y = run_titan(a, over)
        tt.append(x); tr.append(y)
        x, y, ver, feat = run_torch(a, shape, B, T, beta2, wd)
        pt.append(x); pr.append(y)
        print(f"round {r + 1}: titan {tt[-1]:,.0f} tok/s  torch {pt[-1]:,.0f} tok/s  ratio {tt[-1] / pt[-1]:.2f}", flush=True)
    name = f"torch {ver} {'compile' if a.compile else 'eager'}"
    print(f"torch: {feat}")
    print(f"median tokens/s: titan {median(tt):,.0f}   {name} {median(pt):,.0f}   ratio {median(tt) / median(pt):.2f}x")
    print(f"median peak RSS: titan {median(tr) / 2**20:,.0f} MiB   {name} {median(pr) / 2**20:,.0f} MiB")


def main_moe(a, over, shape, B, T, beta2, wd, moe):
    """titan and each PyTorch MoE implementation in turn, every round; the order of the PyTorch ones alternates."""
    L, step = shape["layers"], max(moe["sparse_step"], 1)
    n_moe = sum(1 for l in range(L) if l >= moe["first_dense"] and (l + 1) % step == 0)  # titan's rule
    print(f"MoE: {moe['E']} experts, top-{moe['k']}, expert width {moe['F']}, {moe['score']} scores"
          f"{', renormalised' if moe['norm'] else ''}, scale {moe['scale']}, gate on the expert "
          f"{'inputs' if moe['score_before'] else 'outputs'}, {moe['shared']} shared (width {moe['shared'] * moe['F']}); "
          f"{n_moe} of {L} layers MoE, the others dense (ffn {shape['ffn']})")
    if moe["groups"] or moe["balance"]:
        print(f"  PyTorch leaves out titan's {'group-limited routing and ' if moe['groups'] else ''}"
              f"{'load-balancing bias (model.load_balance_coeff)' if moe['balance'] else ''}: "
              f"both change only which experts are picked, not the cost of a step")
    modes = ["loop", "grouped"] if a.moe_impl == "both" else [a.moe_impl]
    tt, tr = [], []
    pt, pr, loss0 = {m: [] for m in modes}, {m: [] for m in modes}, {}
    ver = feat = "?"
    feats = {}
    for r in range(a.rounds):
        x, y = run_titan(a, over)
        tt.append(x); tr.append(y)
        for mode in (modes if r % 2 == 0 else modes[::-1]):
            res, extra = run_torch(a, shape, B, T, beta2, wd, moe, mode)
            if res is None:
                print(f"torch._grouped_mm does not run here ({a.dtype}, CPU): {extra}\n"
                      f"grouped mode dropped: only the loop mode is reported", flush=True)
                modes.remove(mode)
                continue
            pt[mode].append(res[0]); pr[mode].append(res[1]); ver = res[2]; feats[mode] = res[3]; loss0[mode] = extra
        if not modes:
            sys.exit("no PyTorch MoE implementation runs here")
        print(f"round {r + 1}: titan {tt[-1]:,.0f} tok/s  " + "  ".join(
            f"torch {m} {pt[m][-1]:,.0f} tok/s (ratio {tt[-1] / pt[m][-1]:.2f})" for m in modes), flush=True)
    name = f"torch {ver} {'compile' if a.compile else 'eager'}"
    for m in modes:
        print(f"torch {m}: {feats[m]}")
    if len(modes) == 2:
        d = abs(loss0["loop"] - loss0["grouped"])
        print(f"step-0 loss: loop {loss0['loop']:.6f}, grouped {loss0['grouped']:.6f} (|diff| {d:.2e}"
              f"{'' if d <= 1e-3 * abs(loss0['loop']) else ' -- the two implementations DISAGREE'})")
    med = {m: median(pt[m]) for m in modes}
    print(f"median tokens/s: titan {median(tt):,.0f}   " + "   ".join(
        f"{name} {m} {med[m]:,.0f} (titan/torch {median(tt) / med[m]:.2f}x)" for m in modes))
    print(f"median peak RSS: titan {median(tr) / 2**20:,.0f} MiB   " + "   ".join(
        f"{name} {m} {median(pr[m]) / 2**20:,.0f} MiB" for m in modes))
    best = max(modes, key=lambda m: med[m])
    if len(modes) == 2:
        other = modes[0] if best == modes[1] else modes[1]
        print(f"faster PyTorch mode: {best} ({med[best]:,.0f} vs {med[other]:,.0f} tok/s, {med[best] / med[other]:.2f}x)")
    else:
        print(f"PyTorch mode: {best} (the only one {'asked for' if a.moe_impl != 'both' else 'that runs here'})")
    print(f"titan / faster PyTorch ({best}): {median(tt) / med[best]:.2f}x")


if __name__ == "__main__":
    main()

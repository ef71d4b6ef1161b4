#!/usr/bin/env python3
"""proto_corpus.py — checks that the built-in synthetic corpus is learnable:
trains a small PyTorch Llama-style byte model on the shards titan writes and
compares its validation loss with the corpus's exact entropy floor.

    python3 tools/proto_corpus.py --dir DIR [--tokens 1500000] [--threads 2]

DIR holds train.bin, val.bin and corpus.json (titan's corpus prepare writes
them). Windows are packed exactly as src/data/loader.c packs them: whole
documents, greedily, padding at the end, a document longer than --seq cut
into pieces of --seq inputs whose last target is the next piece's first
token; attention is causal within a document (piece) and positions restart
at each one. Needs torch and numpy.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE = -100


def read_shard(path):
    with open(path, "rb") as f:
        head = f.read(32)
    if head[:8] != b"TTSHARD\0":
        raise SystemExit(f"{path}: bad magic")
    version, width, bos, vocab = np.frombuffer(head[8:24], dtype="<u4")
    count = int(np.frombuffer(head[24:32], dtype="<u8")[0])
    if version != 1 or width not in (2, 4):
        raise SystemExit(f"{path}: unsupported header")
    dt = "<u2" if width == 2 else "<u4"
    toks = np.fromfile(path, dtype=dt, offset=32)
    if toks.size != count:
        raise SystemExit(f"{path}: truncated")
    return toks.astype(np.int64), int(bos), int(vocab)


def pack_windows(toks, bos, T):
    """(inputs, targets, positions, doc_ids), each (W, T): the loader's packing."""
    starts = np.flatnonzero(toks == bos).tolist()
    if not starts or starts[0] != 0:
        starts = [0] + starts
    ends = starts[1:] + [len(toks)]
    pieces = []  # (first token, end of inputs, end of the document)
    for s, e in zip(starts, ends):
        p = s
        while p == s or p + 1 < e:  # a piece starts while targets are left
            pieces.append((p, min(e, p + T), e))
            p += T
    windows, cur, used = [], [], 0
    for s, e, de in pieces:
        if used + (e - s) > T:
            windows.append(cur)
            cur, used = [], 0
        cur.append((s, e, de))
        used += e - s
    if cur:
        windows.append(cur)
    W = len(windows)
    inp = np.full((W, T), bos, np.int64)
    tgt = np.full((W, T), IGNORE, np.int64)
    pos = np.zeros((W, T), np.int64)
    doc = np.zeros((W, T), np.int64)
    for w, win in enumerate(windows):
        o = 0
        for d, (s, e, de) in enumerate(win):
            n = e - s
            inp[w, o:o + n] = toks[s:e]
            # T + 1 tokens: a cut piece's last target is the next piece's first
            tgt[w, o:o + n - (e == de)] = toks[s + 1:min(e + 1, de)]
            pos[w, o:o + n] = np.arange(n)
            doc[w, o:o + n] = d
            o += n
        doc[w, o:] = len(win)
    return [torch.from_numpy(a) for a in (inp, tgt, pos, doc)]


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rope(x, pos, base=10000.0):
    # x (B, H, T, hd), pos (B, T): rotate pairs (i, i + hd/2) as Llama does
    hd = x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, hd // 2, dtype=torch.float32) / (hd // 2))
    ang = pos[:, None, :, None].float() * inv  # (B, 1, T, hd/2)
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class Block(nn.Module):
    def __init__(self, d, h, f):
        super().__init__()
        self.h = h
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.w1 = nn.Linear(d, f, bias=False)
        self.w3 = nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)

    def forward(self, x, pos, mask):
        B, T, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        q, k = rope(q, pos), rope(k, pos)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        h = self.n2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Model(nn.Module):
    def __init__(self, vocab, d=128, layers=4, heads=4, ffn=384):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        for b in self.blocks:  # scaled residual projections, as GPT-2 does
            nn.init.normal_(b.o.weight, std=0.02 / math.sqrt(2 * layers))
            nn.init.normal_(b.w2.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, inp, pos, doc):
        T = inp.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        mask = (doc[:, :, None] == doc[:, None, :]) & causal  # (B, T, T)
        x = self.emb(inp)
        for b in self.blocks:
            x = b(x, pos, mask[:, None])
        return self.head(self.norm(x))


def evaluate(model, val, bs=32, limit=None):
    inp, tgt, pos, doc = val
    n = inp.shape[0] if limit is None else min(limit, inp.shape[0])
    tot, cnt = 0.0, 0
    per_class = {}
    with torch.no_grad():
        for i in range(0, n, bs):
            sl = slice(i, min(n, i + bs))
            logits = model(inp[sl], pos[sl], doc[sl])
            t = tgt[sl]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1),
                                   ignore_index=IGNORE, reduction="none")
            m = t.reshape(-1) != IGNORE
            tot += loss[m].sum().item()
            cnt += int(m.sum())
            tv = t.reshape(-1)[m]
            lv = loss[m]
            for name, sel in (("upper", (tv >= 65) & (tv <= 90)), ("lower", (tv >= 97) & (tv <= 122)),
                              ("space", tv == 32), ("period", tv == 46), ("eos", tv == 257)):
                a = per_class.setdefault(name, [0.0, 0])
                a[0] += lv[sel].sum().item()
                a[1] += int(sel.sum())
    return tot / cnt, {k: (v[0] / max(v[1], 1), v[1]) for k, v in per_class.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tokens", type=float, default=1.5e6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    stats = json.load(open(os.path.join(args.dir, "corpus.json")))["stats"]
    tr, bos, vocab = read_shard(os.path.join(args.dir, "train.bin"))
    va, _, _ = read_shard(os.path.join(args.dir, "val.bin"))
    train = pack_windows(tr, bos, args.seq)
    val = pack_windows(va, bos, args.seq)
    fill = (train[1] != IGNORE).float().mean().item()
    print(f"floor {stats['floor_nats']:.4f} unigram {stats['unigram_nats']:.4f} gap {stats['gap_nats']:.4f}; "
          f"train windows {train[0].shape[0]}, val windows {val[0].shape[0]}, scored fraction {fill:.3f}")
    assert int((val[1] != IGNORE).sum()) == stats["val_scored_tokens"], "val scored tokens differ from corpus.json"

    model = Model(vocab)
    nparam = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    steps = int(args.tokens // (args.batch * args.seq))
    print(f"params {nparam}, steps {steps}")
    g = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(train[0].shape[0], generator=g)
    cur, t0 = 0, time.time()
    for step in range(steps):
        if cur + args.batch > len(order):
            order, cur = torch.randperm(train[0].shape[0], generator=g), 0
        idx = order[cur:cur + args.batch]
        cur += args.batch
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        if step >= args.warmup:  # cosine to 10%
            frac = (step - args.warmup) / max(1, steps - args.warmup)
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        logits = model(train[0][idx], train[2][idx], train[3][idx])
        loss = F.cross_entropy(logits.reshape(-1, vocab), train[1][idx].reshape(-1), ignore_index=IGNORE)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            el = time.time() - t0
            print(f"step {step:4d} loss {loss.item():.4f} lr {lr:.2e} {(step + 1) * args.batch * args.seq / el:.0f} tok/s",
                  flush=True)
    model.eval()
    vl, parts = evaluate(model, val)
    f, u = stats["floor_nats"], stats["unigram_nats"]
    gap = u - f
    print(f"val_loss {vl:.4f} floor {f:.4f} gap {gap:.4f}: floor+0.1*gap {f + 0.1 * gap:.4f} "
          f"({'ok' if vl <= f + 0.1 * gap else 'MISSED'}), 1.6*floor {1.6 * f:.4f} "
          f"({'ok' if vl <= 1.6 * f else 'MISSED'}); {time.time() - t0:.0f}s")
    for k, (l, n) in parts.items():
        print(f"  {k:6s} {l:.3f} nats x {n}")


if __name__ == "__main__":
    main()

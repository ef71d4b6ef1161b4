#!/usr/bin/env python3
"""chat_prep.py — rendering, tokenizing and masking conversations: titan against transformers'
apply_chat_template plus the Rust `tokenizers`, side by side, on the same chat template, the same
tokenizer.json and the same conversations, and a check that both sides give the same ids and masks.

    python3 bench/chat_prep.py --titan build/titan --template T.jinja --tokenizer tokenizer.json \
        [--bos TOKEN] [--eos TOKEN] [--n 10000] [--rounds 3] [--procs N]

Both sides compute the same thing for every conversation: the rendering, its token ids
(add_special_tokens=False) and a 0/1 target flag per token, 1 where the token's first character
lies in an assistant turn (what render(messages[:i+1]) adds to render(messages[:i],
add_generation_prompt=True)).

- One thread each: `titan tokenize --chat --mask` (one process, one thread; its whole run, start-up
  included) against a Python loop over the conversations (imports and file reading not counted).
- All cores each (--procs, default the CPU count): `titan prepare --chat` on OMP_NUM_THREADS=procs
  (its whole run, which also writes the shards) against a multiprocessing.Pool of procs workers.

The peers alternate (titan, Python, titan, Python, ...) for --rounds rounds; the script prints each
round's times and the median of the per-round ratios. Run it on a quiet machine. With
--check-only it only checks the ids and flags (make crosscheck runs it so).
"""
import argparse
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("the of and to in is that it for was on are as with his they at be this from have or by one had not "
         "but what all were when we there can an your which their said if do will each about how up out them "
         "then she many some so these would other into has more her two like him see time could no make than "
         "first been its who now people my made over did down only way find use may water long little very "
         "after words called just where most know get through back much before go good new write our used me "
         "man too any day same right look think also around another came come work three word must because "
         "does part even place well such here take why things help put years different away again off went "
         "old number great tell men say small every found still between name should home big give air line "
         "café naïve Zürich 東京 добрый день 😀 ünïcödé").split()


def conversations(n, seed=2026):
    """n conversations: a system message half the time, one to four exchanges of 10-60 and 20-120
    words, now and then a newline or unicode."""
    r = random.Random(seed)

    def text(lo, hi):
        w = [r.choice(WORDS) for _ in range(r.randint(lo, hi))]
        for k in range(0, len(w), 17):
            if r.random() < 0.3:
                w[k] += "\n"
        return " ".join(w).strip()

    out = []
    for _ in range(n):
        m = [{"role": "system", "content": text(5, 20)}] if r.random() < 0.5 else []
        for _ in range(r.randint(1, 4)):
            m.append({"role": "user", "content": text(10, 60)})
            m.append({"role": "assistant", "content": text(20, 120)})
        out.append({"messages": m})
    return out


# ---- the Python side -------------------------------------------------------------------------------
_tok = None


def _init(tokenizer, template, bos, eos):
    global _tok
    from transformers import PreTrainedTokenizerFast
    _tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer, bos_token=bos, eos_token=eos)
    _tok.chat_template = template


def _mask_one(messages):
    """ids and flags of one conversation, as titan computes them"""
    t = _tok
    full = t.apply_chat_template(messages, tokenize=False)
    ranges = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        p = t.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True) if i else ""
        q = t.apply_chat_template(messages[:i + 1], tokenize=False)
        if not full.startswith(q):
            raise SystemExit("a template that rewrites earlier turns: not what this benchmark measures")
        a = 0
        while a < len(p) and a < len(q) and p[a] == q[a]:
            a += 1
        if a < len(q):
            ranges.append((a, len(q)))
    enc = t(full, add_special_tokens=False, return_offsets_mapping=True)
    flags, r = [], 0
    for k, (s, _) in enumerate(enc["offset_mapping"]):
        while r < len(ranges) and ranges[r][1] <= s:
            r += 1
        flags.append(int(k > 0 and r < len(ranges) and ranges[r][0] <= s))
    return enc["input_ids"], flags


def _mask_line(line):
    return _mask_one(json.loads(line)["messages"])


def python_side(lines, procs, args, template):
    if procs == 1:
        _init(args.tokenizer, template, args.bos, args.eos)
        t0 = time.perf_counter()
        res = [_mask_line(x) for x in lines]
        return time.perf_counter() - t0, res
    with multiprocessing.Pool(procs, _init, (args.tokenizer, template, args.bos, args.eos)) as pool:
        pool.map(_mask_line, lines[:procs])  # the workers' imports and set-up are not counted
        t0 = time.perf_counter()
        res = pool.map(_mask_line, lines, chunksize=64)
        return time.perf_counter() - t0, res


# ---- titan's side ---------------------------------------------------------------------------------
def titan_side(cmd, env):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    el = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit("%s failed: %s" % (" ".join(cmd), p.stderr.decode()[-2000:]))
    return el, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--titan", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--bos")
    ap.add_argument("--eos")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--check-only", action="store_true", help="the parity check alone, no timing")
    args = ap.parse_args()
    template = open(args.template, encoding="utf-8").read()
    work = tempfile.mkdtemp(prefix="chat_prep.")
    try:
        model = os.path.join(work, "model")
        os.mkdir(model)
        shutil.copy(args.tokenizer, os.path.join(model, "tokenizer.json"))
        cfg = {"chat_template": template}
        if args.bos:
            cfg["bos_token"] = args.bos
        if args.eos:
            cfg["eos_token"] = args.eos
        json.dump(cfg, open(os.path.join(model, "tokenizer_config.json"), "w"))
        data = os.path.join(work, "convs.jsonl")
        lines = [json.dumps(c, ensure_ascii=False) for c in conversations(args.n)]
        open(data, "w", encoding="utf-8").write("\n".join(lines) + "\n")

        # the same ids and flags on both sides, or the timing means nothing
        _, out = titan_side([args.titan, "tokenize", "--chat", "--mask", "--hf", model, data],
                            dict(os.environ, OMP_NUM_THREADS="1"))
        got = out.decode().split("\n")
        _, ref = python_side(lines, 1, args, template)
        for k, (ids, flags) in enumerate(ref):
            if got[2 * k] != " ".join(map(str, ids)) or got[2 * k + 1] != " ".join(map(str, flags)):
                raise SystemExit("conversation %d: titan's ids or flags differ from transformers'" % k)
        print("ids and flags equal on all %d conversations (%d tokens, %d trained)" %
              (len(ref), sum(len(i) for i, _ in ref), sum(sum(f) for _, f in ref)))
        if args.check_only:
            return

        for procs in sorted({1, args.procs}):
            env = dict(os.environ, OMP_NUM_THREADS=str(procs))
            cmd = ([args.titan, "tokenize", "--chat", "--mask", "--hf", model, data] if procs == 1 else
                   [args.titan, "prepare", "--chat", "--hf", model, "--out", os.path.join(work, "shards"),
                    "--no-progress", "--val-fraction", "0", data])
            ratios = []
            for r in range(args.rounds):
                a, _ = titan_side(cmd, env)
                b, _ = python_side(lines, procs, args, template)
                ratios.append(b / a)
                print("%d %s, round %d: titan %.3f s, transformers + tokenizers %.3f s, ratio %.2f" %
                      (procs, "thread" if procs == 1 else "cores", r + 1, a, b, b / a), flush=True)
            print("%d %s: transformers + tokenizers / titan, median of rounds %.2f [%s]" %
                  (procs, "thread" if procs == 1 else "cores", statistics.median(ratios),
                   " ".join("%.2f" % x for x in ratios)), flush=True)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()

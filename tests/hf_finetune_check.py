#!/usr/bin/env python3
"""hf_finetune_check.py — the transformers side of tests/cli_hf_finetune.sh.
For each model that script fine-tuned (WORK/<name>/run/hf, from the fixture
FIXTURES/<name>):

  weights   the export loads in transformers.AutoModelForCausalLM with no
            missing or unexpected weights, and every tensor differs from the
            fixture's (it holds the trained weights);
  val loss  transformers' loss on WORK/<name>/data/val.bin, cut and scored
            the way titan's loader does it, equals the validation loss titan
            logged at step 20 (a check of the logits over every validation
            token; cli_hf_finetune.sh checks that loss fell);
  greedy    transformers' greedy generate() on tokenizers' ids for PROMPT
            gives, byte for byte, the text `titan generate --hf ...
            --generate.temperature 0` printed (tokens past the tokenizer's
            vocabulary suppressed, as titan samples only real tokens);
            where they part at a near tie, of the top-2 logits or (MoE) of
            an expert choice before that token, either is accepted;
  ids       titan prepare's shard WORK/<name>/probe/train.bin holds, for
            every document, BOS + tokenizers' ids (+ EOS where it differs
            from BOS), and tokenizers' ids for PROMPT are titan's.

Mixture-of-Experts models (a *TopKRouter module) also report the smallest
router gap over the tokens scored: top-k routing is discontinuous, so the two
sides can pick different experts for a token only where the k-th and the
(k+1)-th router softmax scores are that close (fp32 rounding, ~1e-6).

    python3 tests/hf_finetune_check.py [--ids | --transformers] WORK FIXTURES PROMPT NAME...

--ids runs the ids part alone, with tokenizers alone (CTest's
cli_hf_finetune, in CI); --transformers the other three, which need torch and
transformers (make crosscheck). With neither, all four.
"""
import json
import os
import re
import struct
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
from tokenizers import Tokenizer  # noqa: E402

# torch, transformers and safetensors are imported by main() for the transformers part only: the ids part
# (--ids, in CTest and CI) needs tokenizers alone
torch = transformers = load_file = AutoModelForCausalLM = None

SEQ_LEN = 64  # training.seq_len in cli_hf_finetune.sh
MAX_NEW = 24  # generate.max_new_tokens there
TIE_GAP = 1e-4  # a top-2 logit gap this small may flip between fp32 implementations
ROUTER_TIE = 1e-5  # a gap this small between the k-th and (k+1)-th router scores may flip an expert choice


class RouterGaps:
    """While active, records for each token of each forward the smallest gap,
    over the MoE layers, between the k-th and (k+1)-th sorted router softmax
    scores: the gap that decides the chosen experts. take() returns the last
    forward's, per token of the flattened batch (None: no router)."""

    def __init__(self, model):
        self.routers = [m for m in model.modules() if type(m).__name__.endswith("TopKRouter")]
        self.rows, self.handles = [], []

    def hook(self, module, args, out):
        k = module.top_k
        p = torch.softmax(out[0].float(), dim=-1).sort(dim=-1, descending=True).values
        self.rows.append(p[:, k - 1] - p[:, k])

    def __enter__(self):
        self.handles = [m.register_forward_hook(self.hook) for m in self.routers]
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()

    def take(self):
        if not self.routers:
            return None
        rows, self.rows = self.rows[-len(self.routers):], []
        return torch.stack(rows).min(dim=0).values


def read_shard(path):
    """TTSHARD: magic[8], version, token width, BOS id, vocab size (u32), token count (u64), tokens."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, width, bos, vocab, count = struct.unpack_from("<8sIIIIQ", data)
    assert magic == b"TTSHARD\0" and version == 1 and width in (2, 4), f"{path}: not a token shard"
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return bos, vocab, list(struct.unpack_from(fmt, data, 32))


def split_docs(tokens, bos):
    """Documents start at BOS (as titan's loader splits them)."""
    docs, start = [], 0
    for i in range(1, len(tokens) + 1):
        if i == len(tokens) or tokens[i] == bos:
            docs.append(tokens[start:i])
            start = i
    return docs


def byte_decoder():
    """GPT-2's byte <-> printable-character table, reversed (ByteLevel decoding)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def token_bytes(tok, ids, added, dec):
    """The raw bytes of ids, as titan streams them (special tokens as their text)."""
    out = b""
    for i in ids:
        piece = tok.id_to_token(i)
        out += piece.encode() if i in added else bytes(dec[c] for c in piece)
    return out


def val_loss(model, docs):
    """Mean next-token loss over docs, scored as titan's loader
    (src/data/loader.c, build_windows and tt_loader_window) scores them: a
    document is cut into pieces of at most SEQ_LEN inputs, starting every
    SEQ_LEN tokens while the document has targets left, each piece its own
    sequence from position 0; a piece reads SEQ_LEN + 1 tokens, its last
    target being the next piece's first token, so every token of a document
    after its first is a target exactly once (a document of n tokens has
    n - 1 targets, titan's val_tokens). One right-padded batch (padding never
    changes earlier tokens)."""
    pieces = []  # (inputs, targets)
    for d in docs:
        p = 0
        while p == 0 or p + 1 < len(d):
            pieces.append((d[p:p + SEQ_LEN], d[p + 1:p + SEQ_LEN + 1]))
            p += SEQ_LEN
    pieces = [(q, t) for q, t in pieces if t]
    ids = torch.zeros(len(pieces), SEQ_LEN, dtype=torch.long)
    mask = torch.zeros(len(pieces), SEQ_LEN, dtype=torch.long)
    targets = torch.full((len(pieces), SEQ_LEN), -100, dtype=torch.long)
    for i, (q, t) in enumerate(pieces):
        ids[i, :len(q)] = torch.tensor(q)
        mask[i, :len(q)] = 1
        targets[i, :len(t)] = torch.tensor(t)
    with torch.no_grad(), RouterGaps(model) as rg:
        logits = model(input_ids=ids, attention_mask=mask).logits.double()
        gaps = rg.take()
    total = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum").item()
    gap = None if gaps is None else gaps[mask.flatten().bool()].min().item()  # over the real tokens
    return total / (targets != -100).sum().item(), gap


PER_EXPERT = re.compile(r"(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight")


MIXTRAL = re.compile(r"(.*)\.block_sparse_moe\.(.*)")
MIXTRAL_PROJ = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}


def loaded_tensor(sd, name, shape):
    """The checkpoint tensor `name` as the loaded model holds it: transformers 5
    packs a checkpoint's per-expert ...mlp.experts.E.{gate,up,down}_proj.weight
    into ...mlp.experts.gate_up_proj (E, 2I, H; gate rows first) and down_proj
    (E, H, I), Mixtral's ...block_sparse_moe.experts.E.{w1,w3,w2} too (renamed to
    mlp, gate, up, down). None where the model has no such tensor of that shape."""
    t = sd.get(name)
    mx = MIXTRAL.fullmatch(name)
    if t is None and mx:  # Mixtral's names as transformers 5 holds them
        rest = re.sub(r"experts\.(\d+)\.(w[123])\.weight", lambda m: f"experts.{m.group(1)}.{MIXTRAL_PROJ[m.group(2)]}.weight",
                      mx.group(2))
        name = f"{mx.group(1)}.mlp.{rest}"
        t = sd.get(name)
    m = PER_EXPERT.fullmatch(name)
    if t is None and m:
        prefix, e, proj = m.group(1), int(m.group(2)), m.group(3)
        packed = sd.get(prefix + (".down_proj" if proj == "down_proj" else ".gate_up_proj"))
        if packed is not None and e < packed.shape[0]:
            t = packed[e] if proj == "down_proj" else packed[e][:shape[0]] if proj == "gate_proj" else packed[e][shape[0]:]
    return t if t is not None and t.shape == shape else None


def load(folder):
    model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager",
                                                       output_loading_info=True)
    model.eval()
    problems = [f"{k}: {v}" for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys",
                                                                     "mismatched_keys", "error_msgs")]
    return model, problems


class Side:
    """What both parts read of a fine-tuned model's export: its config's ids and tokenizers' tokenizer."""

    def __init__(self, work, fixtures, prompt, name):
        self.fix, self.hf, self.d = os.path.join(fixtures, name), os.path.join(work, name, "run", "hf"), os.path.join(work, name)
        self.cfg = json.load(open(os.path.join(self.hf, "config.json")))
        eos = self.cfg["eos_token_id"]
        self.eos_ids = eos if isinstance(eos, list) else [eos]
        self.bos, self.eos = self.cfg["bos_token_id"], self.eos_ids[0]
        self.tok = Tokenizer.from_file(os.path.join(self.hf, "tokenizer.json"))
        self.added_ids = {i for i, t in self.tok.get_added_tokens_decoder().items()}
        self.n_tok = self.tok.get_vocab_size(with_added_tokens=True)
        self.ids = self.tok.encode(prompt).ids  # with the template's special tokens, as titan's prompt encoding


def check_model(work, fixtures, prompt, name):
    results = []  # (what, ok, detail)
    s = Side(work, fixtures, prompt, name)
    fix, hf, d, cfg, eos_ids = s.fix, s.hf, s.d, s.cfg, s.eos_ids
    tok, added_ids, n_tok, eos = s.tok, s.added_ids, s.n_tok, s.eos

    # weights: the fixture's tensors (under the same Hugging Face names) against the export's
    trained, problems = load(hf)
    ps = trained.state_dict()
    p0 = {}
    for f in sorted(os.listdir(fix)):
        if f.endswith(".safetensors"):
            p0.update(load_file(os.path.join(fix, f)))
    # a Gemma3ForConditionalGeneration fixture: its language model's tensors (language_model.*) under the names the
    # Gemma3ForCausalLM export has; its vision tower and projector are not titan's
    if any(k.startswith("language_model.") for k in p0):
        p0 = {k[len("language_model."):]: t for k, t in p0.items() if k.startswith("language_model.")}
    # GPT-OSS's MXFP4 experts (<name>_blocks and <name>_scales): the fixture's weights are what transformers
    # dequantizes them to
    for k in [k for k in p0 if k.endswith("_blocks")]:
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
        base = k[:-len("_blocks")]
        p0[base] = convert_moe_packed_tensors(p0.pop(k), p0.pop(base + "_scales"), dtype=torch.float32)
    # a checkpoint's multi-token-prediction layers (DeepSeek-V3: layers past num_hidden_layers) are not trained
    n_layers = cfg.get("num_hidden_layers", cfg.get("n_layer", 0))
    p0 = {k: t for k, t in p0.items() if not (re.match(r"model\.layers\.(\d+)\.", k) and
                                              int(re.match(r"model\.layers\.(\d+)\.", k).group(1)) >= n_layers)}
    pt = {k: loaded_tensor(ps, k, t.shape) for k, t in p0.items()}
    same = [k for k in p0 if pt[k] is None or torch.equal(pt[k], p0[k].float())]
    rel = max((pt[k] - p0[k]).norm().item() / p0[k].norm().item() for k in p0 if pt[k] is not None)
    results.append(("export loads in transformers with every weight", not problems, "; ".join(problems)))
    results.append(("every weight changed by fine-tuning", not same,
                    f"{len(p0)} tensors, largest relative change {rel:.3f}" + (f"; unchanged: {same}" if same else "")))

    # validation loss, against titan's at step 20
    vb, _, vtok = read_shard(os.path.join(d, "data", "val.bin"))
    docs = split_docs(vtok, vb)
    titan_v = [json.loads(l)["val_loss"] for l in open(os.path.join(d, "run", "metrics.jsonl")) if "val_loss" in l][-1]
    hf_v, vgap = val_loss(trained, docs)
    results.append(("validation loss in transformers equals titan's", abs(hf_v - titan_v) <= 2e-5 * max(1, titan_v),
                    f"transformers {hf_v:.7f}, titan {titan_v:.7f}, |diff| {abs(hf_v - titan_v):.1e}"
                    + ("" if vgap is None else f"; smallest router gap {vgap:.2e}")))

    # greedy continuation, against titan generate's text
    ids = s.ids
    with torch.no_grad():
        g = trained.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=MAX_NEW, do_sample=False, eos_token_id=eos_ids, pad_token_id=eos,
                             suppress_tokens=list(range(n_tok, cfg["vocab_size"])) or None, output_scores=True,
                             return_dict_in_generate=True)
    new = g.sequences[0, len(ids):].tolist()
    with torch.no_grad(), RouterGaps(trained) as rg:  # the routing of every token the answer was computed from
        trained(input_ids=g.sequences)
        rgaps = rg.take()
    stopped = bool(new) and new[-1] in eos_ids
    text_ids = new[:-1] if stopped else new
    dec = byte_decoder()
    want = prompt.encode() + token_bytes(tok, text_ids, added_ids, dec) + b"\n"
    got = open(os.path.join(d, "greedy.txt"), "rb").read()
    ok, detail = want == got, f"{len(new)} tokens{' (stopped at EOS)' if stopped else ''}: {want[:80]!r}"
    if rgaps is not None:
        detail += f"; smallest router gap {rgaps.min().item():.2e}"
    if not ok:
        # where the texts part, was transformers' choice a near tie? Then fp32 rounding may pick either.
        common = 0
        while common < min(len(want), len(got)) and want[common] == got[common]:
            common += 1
        at, pos = 0, len(prompt.encode())
        while at < len(text_ids) and pos + len(token_bytes(tok, [text_ids[at]], added_ids, dec)) <= common:
            pos += len(token_bytes(tok, [text_ids[at]], added_ids, dec))
            at += 1
        s = g.scores[min(at, len(g.scores) - 1)][0].float()
        top = torch.topk(s[torch.isfinite(s)], 2).values
        gap = (top[0] - top[1]).item()
        # MoE: new token `at` came from the routing of every token before it
        rgap = None if rgaps is None else rgaps[:len(ids) + at].min().item()
        ok = gap < TIE_GAP or (rgap is not None and rgap < ROUTER_TIE)
        detail = (f"texts part at new token {at}, where transformers' top-2 logit gap is {gap:.2e}"
                  + ("" if rgap is None else f" and the smallest router gap up to it {rgap:.2e}")
                  + f"{' (a near tie: accepted)' if ok else ''}; transformers {want!r}, titan {got!r}")
    results.append(("greedy generate() in transformers gives titan's text", ok, detail))

    return results


def check_ids(work, fixtures, prompt, name):
    """titan prepare's shard and titan's prompt ids against tokenizers'"""
    s = Side(work, fixtures, prompt, name)
    tok, bos, eos, ids, added_ids = s.tok, s.bos, s.eos, s.ids, s.added_ids
    results = []
    pb, pv, ptok = read_shard(os.path.join(s.d, "probe", "train.bin"))
    texts = [json.loads(l)["text"] for f in ("corpus.jsonl", "probe.jsonl") for l in open(os.path.join(work, f))]
    expect = []
    for t in texts:
        e = tok.encode(t, add_special_tokens=False).ids
        if e:
            expect.append([bos] + e + ([eos] if eos != bos else []))
    pdocs = split_docs(ptok, pb)
    bad = [i for i, (a, b) in enumerate(zip(pdocs, expect)) if a != b]
    results.append(("titan prepare's ids equal tokenizers' for every document",
                    pb == bos and pv == s.n_tok and len(pdocs) == len(expect) and not bad,
                    f"{len(pdocs)} documents, {len(ptok)} tokens, shard BOS {pb}, vocab {pv}"
                    + (f"; first differing document {bad[0]}: {texts[bad[0]]!r}" if bad else "")))
    kept = [t for t in texts if tok.encode(t, add_special_tokens=False).ids]  # prepare skips empty documents
    titan_prompt = pdocs[kept.index(prompt)][1:] if prompt in kept and len(pdocs) == len(kept) else []
    if titan_prompt and eos != bos:
        titan_prompt = titan_prompt[:-1]
    template = ids[:len(ids) - len(titan_prompt)]  # what titan's generate adds: the post-processor's BOS
    results.append(("tokenizers' ids for the prompt are titan's", bool(titan_prompt) and ids[len(template):] == titan_prompt
                    and all(i in added_ids for i in template), f"{ids}"))
    return results


def main():
    global torch, transformers, load_file, AutoModelForCausalLM
    args = sys.argv[1:]
    mode = args.pop(0) if args and args[0] in ("--ids", "--transformers") else "all"
    work, fixtures, prompt, names = args[0], args[1], args[2], args[3:]
    parts = []
    if mode != "--transformers":
        parts.append(("tokenizers side", check_ids))
    if mode != "--ids":
        import torch
        import transformers
        from safetensors.torch import load_file
        from transformers import AutoModelForCausalLM
        torch.manual_seed(0)
        transformers.utils.logging.disable_progress_bar()
        torch.set_num_threads(2)
        parts.append(("transformers side", check_model))
    passed = failed = 0
    for name in names:
        for side, check in parts:
            try:
                results = check(work, fixtures, prompt, name)
            except Exception as e:  # a folder that cannot be loaded, a missing file: a failure, with its reason
                results = [(side, False, repr(e))]
            for what, ok, detail in results:
                print(f"{'ok  ' if ok else 'FAIL'} {name}: {what} ({detail})")
                passed += ok
                failed += not ok
    print(f"hf_finetune_check: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

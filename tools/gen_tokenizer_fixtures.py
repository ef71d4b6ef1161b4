#!/usr/bin/env python3
"""gen_tokenizer_fixtures.py — build small tokenizer.json files of every flavour
titan supports with Hugging Face `tokenizers` itself, and record what HF says
(ids with and without special tokens, where each token starts, decoded text)
for a fixed varied text set, so tests/test_tokenizer.c can hold titan's
tokenizer to id and offset parity.

    pip install tokenizers==0.23.3   (the version texts.json records)
    python3 tools/gen_tokenizer_fixtures.py [--shared ../shared]

Each case's "starts" are HF's offsets[i][0] for add_special_tokens=False,
turned from Python character indices into UTF-8 byte offsets of the text (what
tt_tokenizer_encode_offsets returns).

Writes tests/fixtures/tokenizers/: texts.json, <flavour>/tokenizer.json and
<flavour>/expected.json, and real/<name>.expected.json for the published
tokenizers under <shared>/fixtures/tokenizers/<name>/tokenizer.json (those
tokenizer files themselves are not copied). Deterministic: rerunning gives the
same files for the same `tokenizers` version."""
import argparse
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizers")

# The text set: English, code, digits, whitespace runs, contractions, CJK,
# Arabic, emoji (ZWJ), accented Latin both composed and decomposed, special
# tokens in text, and the corners where regex engines and normalizers differ.
TEXTS = [
    "",
    "Hello world",
    "Hello, world! How are you doing today?",
    " leading space",
    "   three leading spaces and trailing spaces   ",
    "   ",
    "tabs\tand\ttabs\nline two\r\nwindows line\n\n\nthree newlines\n",
    "def foo(x):\n    return x * 2  # double\n\nfor i in range(10):\n\tprint(f\"{i:03d}\")\n",
    "int main(void) {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "1234567890 3.14159 1,000,000 2024-01-15 0x1F 1e-9 12345678901234567890",
    "I'm sure it's fine, we're done, they've gone, I'll go, he'd say, don't. 's 't 're",
    "I'M SURE IT'S FINE, WE'RE DONE, THEY'VE GONE, I'LL GO, HE'D SAY. IT'\u017f rock'n'roll o'clock",
    "中文测试：你好，世界！日本語のテキスト、カタカナ。한국어 텍스트입니다.",
    "مرحبا بالعالم، هذا نص عربي. שלום עולם",
    "Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷 done",
    "café naïve résumé Ångström Øresund façade Zürich",
    "cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030angstro\u0308m",
    "\u1100\u1161\u11a8 jamo vs \uac01 syllable",
    "\u212b \ufb01 \u2460 \uff21\uff22 x\u00b2 \u2163",
    "nbsp\u00a0here, nel\u0085there, ideographic\u3000space, thin\u2009space, zwsp\u200bjoin, vt\x0bff\x0c",
    "<|endoftext|>Hello<|endoftext|> world <s>start</s> <|begin_of_text|>x<|end_of_text|> <|im_start|>user\nhi<|im_end|>",
    "<|endoftext| <s <|im_start> </s",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!!! ...?!",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa !!!!!!!! ---------- ________",
    "https://example.com/path?q=1&b=2#frag user@example.org",
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    "Ⅻ ½ ² ٣٤٥ १२३ ௧௨",
    "# Title\n\n* item one\n* item two\n\n```python\nx = 1\n```\n",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "a",
    " ",
    "\n",
    "é",
    "中",
    "😀",
    "metaspace \u2581 char \u2581\u2581 and <0x41> literal",
    "bell\x07 esc\x1b del\x7f",
    "1\u20e3 e\u0301\u0302",
    "hello😀world👍🏽ok",
    " " * 50 + "x" + "\t" * 10 + "\n" * 5 + "y  \n  z",
    "Tiếng Việt có dấu: Nguyễn, Trường, Đà Nẵng",
    "Ελληνικά κείμενο. Русский текст с ёжиком.",
    "ภาษาไทยไม่มีช่องว่าง",
    "∀x∈ℝ: x² ≥ 0 → √x ∈ ℝ⁺ ∑∫∂",
    "नमस्ते दुनिया",
    "helloWorldFooBar camelCaseName HTTPServer",
    "<mask> masked <mask>token NEWWORD here <pad>  after",
]

# Texts added after the vocabularies were trained: they are not in the training
# corpus (adding them there would change every id). Chat markup written in raw
# text (ChatML, Llama 3, Llama 2), which must become the added tokens' single
# ids, and combining marks that canonical ordering moves, for the offsets.
EXTRA_TEXTS = [
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat's 2+2?<|im_end|>\n<|im_start|>assistant\n"
    "4<|im_end|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant"
    "<|end_header_id|>\n\nHello!<|eot_id|>",
    "<s>[INST] hi there [/INST] Hello, how can I help?</s><s>[INST] bye [/INST]",
    "a\u0301\u0316 e\u0316\u0301 \u00e9\u0316 \u1e17\u0323 \u0f73\u0f71 x\u0345\u0301",
]
ALL_TEXTS = TEXTS + EXTRA_TEXTS

ENGLISH = """The tokenizer splits text into pieces and maps each piece to an id. A byte pair
encoding starts from single bytes and merges the most frequent pairs, so common words
become one token while rare words fall apart into smaller pieces. The model reads the
ids, predicts the next one, and the decoder turns ids back into text. We're testing it
with English, code, numbers like 1234 and 2024, and text in other languages too. It's
important that they've got the same ids as the reference, and that you'll see the same
text after decoding. Don't forget whitespace: tabs, newlines, and runs of spaces."""

CODE = """def train(model, data, steps=1000, lr=3e-4):
    for step in range(steps):
        loss = model(data.next_batch())
        loss.backward()
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    return model

int add(int a, int b) {
    return a + b; // sum
}
"""


def corpus():
    return [ENGLISH] * 8 + [CODE] * 8 + TEXTS * 2


LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def reload(tok):
    """Round-trip through JSON, as titan will read it."""
    return Tokenizer.from_str(tok.to_str())


def train_byte_level(vocab_size, pre, specials=()):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=list(specials))
    tok.train_from_iterator(corpus(), tr)
    tok.decoder = decoders.ByteLevel()
    return tok


def gpt2():
    tok = train_byte_level(600, pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return reload(tok)


def gpt2_prefix():
    """RoBERTa-like: add_prefix_space, and added tokens with lstrip / rstrip,
    special or not."""
    tok = train_byte_level(400, pre_tokenizers.ByteLevel(add_prefix_space=True), ["<s>", "</s>"])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True),
                            AddedToken("<pad>", rstrip=True, special=True)])
    tok.add_tokens([AddedToken("NEWWORD", normalized=True, special=False)])
    return reload(tok)


def with_json(tok, edit):
    j = json.loads(tok.to_str())
    edit(j)
    return Tokenizer.from_str(json.dumps(j))


def llama3():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = train_byte_level(600, pre)

    def edit(j):
        # ignore_merges, and whole words in the vocabulary that no merge
        # path builds, so that ignore_merges changes the ids
        j["model"]["ignore_merges"] = True
        v = j["model"]["vocab"]
        for w in ["ĠPneumonoultramicroscopicsilicovolcanoconiosis", "Ġantidisestablishmentarianism", "Ġquick"]:
            if w not in v:
                v[w] = len(v)
    tok = with_json(tok, edit)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens(specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return reload(tok)


def qwen2():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = train_byte_level(600, pre)
    tok.normalizer = normalizers.NFC()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return reload(tok)


def sentencepiece_like(vocab_size=700, max_char=0x180, byte_fallback=True, unk_fuse=True, specials_normalized=True):
    """Train on Metaspace words, then lay the vocabulary out as Llama 2 does:
    <unk> <s> </s>, the 256 <0xNN> byte tokens, then the learned pieces. The
    training text keeps only characters below max_char, so the others (CJK,
    emoji, ...) take the byte-fallback or unk path. (limit_alphabet would do
    the same, but it breaks ties at random.)"""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(["".join(c for c in t if ord(c) < max_char) for t in corpus()], tr)
    j = json.loads(tok.to_str())
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    order = ["<unk>", "<s>", "</s>"] + (["<0x%02X>" % b for b in range(256)] if byte_fallback else [])
    order += [t for t, _ in old if t not in order]
    j["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    j["model"]["byte_fallback"] = byte_fallback
    j["model"]["fuse_unk"] = unk_fuse
    j["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": specials_normalized, "special": True}
                         for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return j


def llama2():
    j = sentencepiece_like()
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = Tokenizer.from_str(json.dumps(j))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return reload(tok)


def metaspace_first():
    """Mistral-like: Metaspace pre-tokenizer (prepend "first", no split),
    specials not normalized, template <s> $A </s>, and a ByteFallback +
    Metaspace decoder."""
    j = sentencepiece_like(specials_normalized=False)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}]}
    tok = Tokenizer.from_str(json.dumps(j))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B",
                                                       special_tokens=[("<s>", 1), ("</s>", 2)])
    return reload(tok)


def metaspace_split():
    """T5-like: a normalizer chain (NFKC, regex Replace, Strip), Metaspace
    (always, split), unk without byte fallback and without fusing."""
    j = sentencepiece_like(vocab_size=500, max_char=0x80, byte_fallback=False, unk_fuse=False)
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFKC"},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        {"type": "Strip", "strip_left": True, "strip_right": True}]}
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    j["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    j["post_processor"] = None
    return Tokenizer.from_str(json.dumps(j))


def unk_fused():
    """No byte fallback and ASCII-only training: the other characters become
    one <unk> per run (fuse_unk), behind a Metaspace pre-tokenizer."""
    j = sentencepiece_like(vocab_size=400, max_char=0x80, byte_fallback=False, unk_fuse=True)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    j["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    j["post_processor"] = None
    return Tokenizer.from_str(json.dumps(j))


def unk_none():
    """Llama 2's normalizers (the whole text is one word) with no unk token and
    no byte fallback: HF drops the characters the vocabulary lacks, and with
    them their length, so the offsets after them in the word shift back."""
    j = sentencepiece_like(vocab_size=400, max_char=0x80, byte_fallback=False)
    j["model"]["unk_token"] = None
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    j["post_processor"] = None
    return Tokenizer.from_str(json.dumps(j))


def split_variant(split):
    """A small byte-level model behind one Split pre-tokenizer."""
    def make():
        tok = train_byte_level(300, pre_tokenizers.ByteLevel(add_prefix_space=False))
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                     use_regex=False)])
        return reload(tok)
    return make


FLAVOURS = {
    "gpt2": gpt2,
    "gpt2_prefix": gpt2_prefix,
    "llama3": llama3,
    "qwen2": qwen2,
    "llama2": llama2,
    "metaspace_first": metaspace_first,
    "metaspace_split": metaspace_split,
    "unk_fused": unk_fused,
    "unk_none": unk_none,
    "split_removed": split_variant(pre_tokenizers.Split(Regex(r"\s+"), behavior="removed")),
    "split_prev": split_variant(pre_tokenizers.Split(Regex(r"[,.!?;:]"), behavior="merged_with_previous")),
    "split_next": split_variant(pre_tokenizers.Split(" ", behavior="merged_with_next")),
    "split_contiguous": split_variant(pre_tokenizers.Split(Regex(r"\d|\s"), behavior="contiguous")),
    "split_invert": split_variant(pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="isolated", invert=True)),
    "split_empty": split_variant(pre_tokenizers.Split(Regex(r"(?=\p{Lu})|\b"), behavior="isolated")),
}


def decoded(tok, ids):
    """HF's decode both ways (decoded_skip only when it differs); text holding
    NUL (which C strings from cJSON cannot) goes as hex UTF-8 under *_hex."""
    out = {}
    plain = tok.decode(ids, skip_special_tokens=False)
    for key, skip in (("decoded", False), ("decoded_skip", True)):
        text = tok.decode(ids, skip_special_tokens=skip)
        if skip and text == plain:
            continue
        if "\0" in text:
            out[key + "_hex"] = text.encode("utf-8").hex()
        else:
            out[key] = text
    return out


def byte_starts(text, offsets):
    """HF's token starts (character indices) as UTF-8 byte offsets of text."""
    at = [0]
    for ch in text:
        at.append(at[-1] + len(ch.encode("utf-8")))
    return [at[a] for a, _ in offsets]


def expected(tok, rng):
    """What HF says for every text, and for random id sequences."""
    cases = []
    # the template only wraps: find its ids on a text with ids, check them on all
    probe = tok.encode("Hello world", add_special_tokens=False).ids
    sp = tok.encode("Hello world", add_special_tokens=True).ids
    k = next(i for i in range(len(sp) + 1) if sp[i:i + len(probe)] == probe)
    prefix, suffix = sp[:k], sp[k + len(probe):]
    for text in ALL_TEXTS:
        enc = tok.encode(text, add_special_tokens=False)
        ids = enc.ids
        sp = tok.encode(text, add_special_tokens=True).ids
        assert sp == prefix + ids + suffix, f"template differs for {text!r}"
        cases.append({"ids": ids, "starts": byte_starts(text, enc.offsets), **decoded(tok, sp)})
    n = tok.get_vocab_size(with_added_tokens=True)
    decodes = []
    for _ in range(40):
        ids = [rng.randrange(n + 3) for _ in range(rng.randrange(1, 12))]  # some past the vocabulary
        decodes.append({"ids": ids, **decoded(tok, ids)})
    return {"special_prefix": prefix, "special_suffix": suffix, "vocab_size": n, "cases": cases, "decodes": decodes}


def dump(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    import tokenizers
    dump(os.path.join(OUT, "texts.json"), {"tokenizers_version": tokenizers.__version__, "texts": ALL_TEXTS})
    for name, make in FLAVOURS.items():
        tok = make()
        rng = random.Random(name)
        os.makedirs(os.path.join(OUT, name), exist_ok=True)
        tok.save(os.path.join(OUT, name, "tokenizer.json"), pretty=False)
        # what titan reads must be what HF reads back
        tok = Tokenizer.from_file(os.path.join(OUT, name, "tokenizer.json"))
        dump(os.path.join(OUT, name, "expected.json"), expected(tok, rng))
        print(f"{name}: vocab {tok.get_vocab_size()}")
    for name in ("gpt2", "llama2"):
        path = os.path.join(args.shared, "fixtures", "tokenizers", name, "tokenizer.json")
        if not os.path.exists(path):
            print(f"real/{name}: {path} not found, skipped", file=sys.stderr)
            continue
        tok = Tokenizer.from_file(path)
        dump(os.path.join(OUT, "real", name + ".expected.json"), expected(tok, random.Random(name)))
        print(f"real/{name}: vocab {tok.get_vocab_size()}")


if __name__ == "__main__":
    main()

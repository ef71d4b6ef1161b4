"""chat_export_check.py TITAN EXPORT_DIR... — transformers against titan on exported chat models
(tests/crosscheck_chat_export.sh makes the folders). For each folder: AutoTokenizer's
apply_chat_template renders every conversation as `titan tokenize --chat --render --hf DIR` does, with
and without the generation prompt; its ids for a [system,] user prompt are those `titan generate --chat
--verbose` encodes; GenerationConfig's eos_token_id lists the ids titan stops at (generation_config.json,
config.json's and tokenizer_config.json's eos token) and the tokenizer's eos_token is the source's."""
import json
import subprocess
import sys

from transformers import AutoTokenizer, GenerationConfig

CONVERSATIONS = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "You answer in French."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Bonjour !"}, {"role": "user", "content": "How are you?"}],
    [{"role": "user", "content": "  café naïve Zürich 🙂 日本語\ttabs\nand lines  "},
     {"role": "assistant", "content": "\"quoted\" \\ backslash"}],
]


def titan_render(titan, folder, convs, gen_prompt):
    lines = "".join(json.dumps({"messages": c}, ensure_ascii=False) + "\n" for c in convs)
    cmd = [titan, "tokenize", "--chat", "--render", "--hf", folder] + (["--add-generation-prompt"] if gen_prompt else [])
    out = subprocess.run(cmd, input=lines.encode(), capture_output=True, check=True).stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def titan_prompt_ids(titan, folder, conv):
    """The ids titan generate --chat encodes for [system,] user (--verbose's "prompt ids" line)."""
    system = [m["content"] for m in conv if m["role"] == "system"]
    user = [m["content"] for m in conv if m["role"] == "user"][-1]
    cmd = [titan, "generate", "--chat", "--hf", folder, "--verbose", "--generate.max_new_tokens", "0"]
    cmd += (["--system", system[0]] if system else []) + [user]
    err = subprocess.run(cmd, capture_output=True, check=True).stderr.decode()
    line = next(l for l in err.splitlines() if l.startswith("prompt ids:"))
    return [int(x) for x in line.split(":", 1)[1].split()]


def check(titan, folder):
    tok = AutoTokenizer.from_pretrained(folder)
    bad = 0
    for gen_prompt in (False, True):
        want = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=gen_prompt) for c in CONVERSATIONS]
        got = titan_render(titan, folder, CONVERSATIONS, gen_prompt)
        for i, (w, g) in enumerate(zip(want, got)):
            if w != g:
                bad += 1
                print(f"FAIL {folder}: conversation {i} (add_generation_prompt={gen_prompt}):\n  transformers {w!r}\n  titan        {g!r}")
    for i, conv in enumerate(CONVERSATIONS[:2]):
        want = tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=True)
        want = want["input_ids"] if hasattr(want, "keys") else want  # a BatchEncoding in transformers 5
        got = titan_prompt_ids(titan, folder, conv)
        if list(want) != got:
            bad += 1
            print(f"FAIL {folder}: prompt ids of conversation {i}:\n  transformers {list(want)}\n  titan        {got}")
    eos = GenerationConfig.from_pretrained(folder).eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    config_eos = json.load(open(folder + "/config.json")).get("eos_token_id")
    want = set(config_eos if isinstance(config_eos, list) else [config_eos]) | {tok.eos_token_id}
    if not want <= set(eos):
        bad += 1
        print(f"FAIL {folder}: generation_config.json's eos_token_id {eos} lacks one of config.json's eos_token_id "
              f"and the tokenizer's eos_token ({sorted(want)})")
    print(f"{'ok  ' if not bad else 'FAIL'} {folder}: {len(CONVERSATIONS)} conversations rendered twice, 2 prompts' ids, "
          f"eos_token_id {eos} (eos_token {tok.eos_token!r})")
    return bad


def main():
    titan, folders = sys.argv[1], sys.argv[2:]
    bad = sum(check(titan, f) for f in folders)
    print(f"chat_export_check: {bad} differences" if bad else f"chat_export_check: {len(folders)} folders agree")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

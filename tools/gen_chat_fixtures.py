#!/usr/bin/env python3
"""gen_chat_fixtures.py — what transformers' own renderer makes of chat templates, for
tests/test_chat_template.c to hold titan's C renderer (src/chat/) to byte parity.

    python3 -m venv venv && venv/bin/pip install jinja2 transformers
    venv/bin/python tools/gen_chat_fixtures.py [--shared ../shared]

Writes tests/fixtures/chat/:
  real.json   every template of <shared>/fixtures/chat_templates/*.jinja rendered over a set of
              conversations (a system message, multi-turn, unicode and newlines, empty content,
              user-only, tool calls), each with and without add_generation_prompt, through
              transformers.utils.chat_template_utils.render_jinja_template after transformers'
              _normalize_chat_messages, as apply_chat_template does; the output, or the error the
              template raises. The templates themselves are not copied.
  cases.json  one case per construct of the subset (statements, expressions, each filter, test and
              method, whitespace control, loop variables, macros and call, namespace, slicing,
              undefined, errors), rendered the same way; cases marked "refused" are constructs
              outside the subset, which titan must refuse by name and line:column.
Deterministic for given jinja2 and transformers versions (named in the files).
"""
import argparse
import datetime
import json
import os
import sys

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat")

SPECIALS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
# strftime_now reads this time in the cases (the C test passes the same one)
NOW = datetime.datetime(2024, 7, 23, 10, 5, 9)
NOW_EPOCH = int(NOW.replace(tzinfo=datetime.timezone.utc).timestamp())

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather in a city.",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "The city, e.g. \"Paris\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
            "required": ["location"]}}},
]

CONVERSATIONS = [
    ("system", [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "The capital of France is Paris."},
    ], None),
    ("multi_turn", [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road? To get to the other side."},
    ], None),
    ("unicode_newlines", [
        {"role": "system", "content": "  Réponds en français.\n"},
        {"role": "user", "content": "Héllo 世界 😀\nline two\n\n  indented\ttab \"quoted\" 'single' {{ not jinja }}"},
        {"role": "assistant", "content": "Ça va? ✓ Ελληνικά ΣΑΣ\n- item\n- item 2  \n"},
    ], None),
    ("empty_content", [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": " "},
    ], None),
    ("user_only", [
        {"role": "user", "content": "Write a haiku about the sea."},
    ], None),
    ("tool_calls", [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "id": "call_1",
             "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius", "days": 1.0}}}]},
        {"role": "tool", "name": "get_weather", "content": "{\"temperature\": 22.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 22.5 °C and clear in Paris."},
    ], TOOLS),
    ("content_parts", [
        {"role": "user", "content": [{"type": "text", "text": "Describe this."}, {"type": "text", "text": "Briefly."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]},
    ], None),
]


def render(template, messages, tools=None, add_generation_prompt=False, specials=SPECIALS, mask=False):
    """What apply_chat_template renders: (output, error, raised, generation ranges in bytes)."""
    chat = ctu._normalize_chat_messages(messages) if hasattr(ctu, "_normalize_chat_messages") else messages
    try:
        rendered, indices = ctu.render_jinja_template(
            conversations=[chat], tools=tools, chat_template=template, add_generation_prompt=add_generation_prompt,
            return_assistant_tokens_mask=mask, **specials)
    except Exception as e:  # noqa: BLE001 - every error is a fixture
        return None, "%s: %s" % (type(e).__name__, e), type(e) is jinja2.exceptions.TemplateError, None
    out = rendered[0]
    spans = None
    if mask:
        spans = [[len(out[:s].encode("utf-8")), len(out[:e].encode("utf-8"))] for s, e in indices[0]]
    return out, None, False, spans


def result(out, err, raised):
    if err is not None:
        # raise_exception's message is exactly what the template passed
        msg = err.split(": ", 1)[1] if raised else err
        return {"error": msg, "raised": raised}
    return {"output": out}


def gen_real(shared):
    tdir = os.path.join(shared, "fixtures", "chat_templates")
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja"))
    results = []
    for name in names:
        with open(os.path.join(tdir, name), encoding="utf-8") as f:
            template = f.read()
        for conv, messages, tools in CONVERSATIONS:
            for agp in (False, True):
                out, err, raised, _ = render(template, messages, tools, agp)
                r = {"template": name, "conversation": conv, "add_generation_prompt": agp}
                r.update(result(out, err, raised))
                results.append(r)
    doc = {
        "generator": "tools/gen_chat_fixtures.py",
        "jinja2": jinja2.__version__, "transformers": transformers.__version__,
        "specials": SPECIALS,
        "templates": names,
        "conversations": [{"name": n, "messages": m, "tools": t} for n, m, t in CONVERSATIONS],
        "results": results,
    }
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    real = gen_real(args.shared)
    with open(os.path.join(OUT, "real.json"), "w", encoding="utf-8") as f:
        json.dump(real, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in r for r in real["results"])
    print("real.json: %d renderings of %d templates (%d errors)" % (len(real["results"]), len(real["templates"]), n_err))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from chat_cases import CASES  # the per-construct cases
    cases = []
    real_now = datetime.datetime

    class FixedNow(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return NOW

    ctu.datetime = FixedNow  # strftime_now reads NOW
    try:
        for c in CASES:
            c = dict(c)
            msgs = c.pop("messages", CONVERSATIONS[0][1])
            tools = c.pop("tools", None)
            agp = c.pop("add_generation_prompt", False)
            mask = "{% generation" in c["template"] or "{%- generation" in c["template"]
            out, err, raised, spans = render(c["template"], msgs, tools, agp, mask=mask)
            rec = {"name": c["name"], "template": c["template"]}
            if msgs is not CONVERSATIONS[0][1]:
                rec["messages"] = msgs
            if tools is not None:
                rec["tools"] = tools
            if agp:
                rec["add_generation_prompt"] = True
            if c.get("refused"):
                rec["refused"] = c["refused"]
            rec.update(result(out, err, raised))
            if spans is not None and err is None:
                rec["generation"] = spans
            if c.get("refused") is None and err is not None and not c.get("error_ok"):
                print("case %s errors in jinja2: %s" % (c["name"], err), file=sys.stderr)
            cases.append(rec)
    finally:
        ctu.datetime = real_now
    doc = {"generator": "tools/gen_chat_fixtures.py (cases from tools/chat_cases.py)",
           "jinja2": jinja2.__version__, "transformers": transformers.__version__,
           "specials": SPECIALS, "now_epoch_utc": NOW_EPOCH,
           "default_messages": CONVERSATIONS[0][1], "cases": cases}
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("cases.json: %d cases" % len(cases))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""chat_crosscheck.py — titan's chat template renderer against transformers' (jinja2) live, for the
cross-check target rather than CTest: random templates (expressions over the subset's filters,
tests, methods and operators; whitespace control, comments and raw blocks), and any template files
given, rendered both ways over the fixture conversations. A difference, or titan rendering where
jinja2 fails (or failing where jinja2 renders, unless titan refuses the construct by name), is
printed; the exit status is the number of them (capped at 100).

    venv/bin/python tools/chat_crosscheck.py --titan build/titan [--seed 1] [--n 500] [TEMPLATE.jinja ...]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_chat_fixtures as g  # noqa: E402  (the conversations and transformers' rendering)

LITERALS = ["0", "1", "-1", "2", "7", "1.5", "-2.5", "0.1", "1e3", "'a'", "'Ab c'", "''", "' x '", "'é😀'", "'a,b,c'",
            "'\\n'", "none", "true", "false", "[]", "[1, 2, 3]", "['b', 'a', 'C']", "[1, 'a']", "{}", "{'a': 1, 'b': [2]}",
            "(1, 2)", "(1,)", "{'k': 'v', 'n': 3}", "'ß'", "'ΣΑΣ'", "'42'", "'3.5'", "[[1], [2, 3]]", "[none, 0, '', 'x']"]
VARIABLES = ["messages", "messages[0]", "messages[2]", "messages[-1].content", "messages[1].tool_calls",
             "messages[0].role", "undefined_x", "tools", "add_generation_prompt", "bos_token", "messages | length",
             "messages[2].tool_calls[0].function"]
FILTERS = ["abs", "capitalize", "count", "default('d')", "default('d', true)", "dictsort", "first", "float", "indent(2)",
           "indent(2, true, true)", "int", "items|list", "join", "join('-')", "last", "length", "list", "lower",
           "map('upper')|list", "map(attribute='role')|list", "max", "min", "reject|list", "rejectattr('role')|list",
           "replace('a', 'X')", "reverse|list", "round", "round(1, 'floor')", "safe", "select|list", "select('odd')|list",
           "selectattr('role', 'eq', 'user')|list", "sort", "sort(reverse=true)", "string", "sum", "title", "tojson",
           "tojson(indent=2)", "tojson(sort_keys=true)", "trim", "trim('a')", "unique|list", "upper", "wordcount", "d"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
         "boolean", "true", "false", "odd", "even", "divisibleby 2", "eq 1", "ne 'a'", "gt 1", "lt 2", "in [1, 'a']",
         "sameas none"]
METHODS = [".strip()", ".lstrip('a')", ".rstrip()", ".split()", ".split(',')", ".rsplit(',', 1)", ".startswith('a')",
           ".endswith('c')", ".upper()", ".lower()", ".title()", ".capitalize()", ".replace('a', 'b')", ".find('b')",
           ".count('a')", ".get('a')", ".get('role', 'x')", ".items()|list", ".keys()|list", ".values()|list"]
OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"]
TEXTS = ["\n", "  ", "\t", "a", " b ", "\n  \n", "x\n", "\n\n", " \t\n", "\u00a0", "c"]


def expression(rng, depth, max_depth):
    r = rng.random()
    if depth > max_depth or r < 0.3:
        return rng.choice(LITERALS + VARIABLES)
    sub = lambda: expression(rng, depth + 1, max_depth)  # noqa: E731
    if r < 0.45:
        return "(%s) | %s" % (sub(), rng.choice(FILTERS))
    if r < 0.55:
        return "(%s) is %s%s" % (sub(), rng.choice(["", "not "]), rng.choice(TESTS))
    if r < 0.65:
        return "(%s)%s" % (sub(), rng.choice(METHODS))
    if r < 0.72:
        a, b, c = [rng.choice(["", "-1", "1", "2", "-3", "None"]) for _ in range(3)]
        return "(%s)[%s:%s%s]" % (sub(), a, b, (":" + c) if rng.random() < 0.5 else "")
    if r < 0.78:
        return "(%s)[%s]" % (sub(), rng.choice(["0", "-1", "1", "'a'", "'role'", "5"]))
    if r < 0.83:
        return "not (%s)" % sub()
    if r < 0.88:
        return "(%s if %s else %s)" % (sub(), sub(), sub())
    return "(%s) %s (%s)" % (sub(), rng.choice(OPERATORS), sub())


def expression_template(rng):
    def stmt():
        e, r = expression(rng, 0, rng.choice([1, 2])), rng.random()
        if r < 0.5:
            return "{{ %s }}" % e
        if r < 0.65:
            return "{%% if %s %%}T{%% else %%}F{%% endif %%}" % e
        if r < 0.85:
            return "{%% for x in %s %%}{{ x }},{{ loop.index }};{%% else %%}E{%% endfor %%}" % e
        return "{%% set v = %s %%}[{{ v }}]" % e
    return stmt() + "|" + stmt()


def whitespace_template(rng):
    mod = lambda: rng.choice(["", "", "-", "+"])  # noqa: E731

    def tag(inner):
        return "{%" + mod() + " " + inner + " " + mod() + "%}"

    def seq(d):
        out = []
        for _ in range(rng.randint(1, 5)):
            r = rng.random()
            if r < 0.45:
                out.append(rng.choice(TEXTS))
            elif r < 0.6:
                out.append("{{" + rng.choice(["", "-"]) + " 'v' " + rng.choice(["", "-"]) + "}}")
            elif r < 0.7:
                out.append("{#" + rng.choice(["", "-", "+"]) + " c " + rng.choice(["", "-", "+"]) + "#}")
            elif r < 0.75:
                out.append(tag("raw") + rng.choice(TEXTS) + "{{ y }}" + rng.choice(TEXTS) + tag("endraw"))
            elif d < 2 and r < 0.88:
                els = tag("else") + seq(d + 1) if rng.random() < 0.3 else ""
                out.append(tag("if true") + seq(d + 1) + els + tag("endif"))
            elif d < 2:
                out.append(tag("for i in [1, 2]") + seq(d + 1) + tag("endfor"))
            else:
                out.append(rng.choice(TEXTS))
        return "".join(out)
    return seq(0) + rng.choice(["", "\n", "\n\n", "\r\n"])


def titan_render(titan, folder, template, messages, tools, agp):
    with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8", newline="") as f:
        f.write(template)
    line = {"messages": messages}
    if tools:
        line["tools"] = tools
    p = subprocess.run([titan, "tokenize", "--chat", "--render", "--hf", folder] + (["--add-generation-prompt"] if agp else []),
                       input=json.dumps(line) + "\n", capture_output=True, text=True)
    out = p.stdout.strip()
    if p.returncode != 0:
        return None, p.stderr.strip()
    if out.startswith('{"error"'):
        return None, json.loads(out)["error"]
    return json.loads(out), None


def compare(titan, folder, template, messages, tools, agp, label):
    want, err, raised, _ = g.render(template, messages, tools, agp)
    got, terr = titan_render(titan, folder, template, messages, tools, agp)
    if terr is not None and "unsupported construct" in terr:
        return "refused"
    if err is not None:
        if terr is None:
            print("titan renders where jinja2 fails (%s): %r\n  jinja2: %s\n  titan: %r" % (label, template, err, got))
            return "bad"
        if raised and terr != err.split(": ", 1)[1]:
            print("raise_exception message differs (%s): %r\n  jinja2: %s\n  titan: %s" % (label, template, err, terr))
            return "bad"
        return "both fail"
    if terr is not None:
        print("titan fails where jinja2 renders (%s): %r\n  jinja2: %r\n  titan: %s" % (label, template, want, terr))
        return "bad"
    if got != want:
        print("output differs (%s): %r\n  jinja2: %r\n  titan:  %r" % (label, template, want, got))
        return "bad"
    return "same"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--titan", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=500, help="random templates of each kind")
    ap.add_argument("templates", nargs="*")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump(g.SPECIALS, f)
    counts = {}
    tally = lambda k: counts.__setitem__(k, counts.get(k, 0) + 1)  # noqa: E731
    for path in args.templates:
        with open(path, encoding="utf-8") as f:
            template = f.read()
        for name, messages, tools in g.CONVERSATIONS:
            for agp in (False, True):
                tally(compare(args.titan, folder, template, messages, tools, agp, "%s over %s" % (path, name)))
    for i in range(args.n):
        tally(compare(args.titan, folder, expression_template(rng), g.CONVERSATIONS[5][1], None, False, "expressions"))
        tally(compare(args.titan, folder, whitespace_template(rng), g.CONVERSATIONS[4][1], None, False, "whitespace"))
    print(counts)
    sys.exit(min(counts.get("bad", 0), 100))


if __name__ == "__main__":
    main()

"""chat_cases.py — the per-construct cases of tools/gen_chat_fixtures.py: each a template (and, when
it needs them, messages, tools or add_generation_prompt), rendered by jinja2 through transformers;
"refused" marks a construct outside titan's subset, which titan must refuse with its name."""
CASES = [
    {"name": "data", "template": "hello"},
]

"""chat_cases.py — the per-construct cases of tools/gen_chat_fixtures.py: each a template (and, when
it needs them, messages, tools or add_generation_prompt), rendered by jinja2 through transformers;
"refused" names a construct outside titan's subset, which titan must refuse with that name and the
line:column. Cases whose jinja2 rendering fails expect an error (raise_exception's message exactly)."""

TOOL_MSGS = [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 2, "x": 1.0}}},
        {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "Sunny.", "reasoning_content": "Looked it up."},
]

C = []


def case(name, template, **kw):
    C.append(dict(name=name, template=template, **kw))


# ---- whitespace control, comments, raw ------------------------------------------------------------
case("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n{% for x in [1] %}\n{{ x }}\n{% endfor %}\nC")
case("ws_lstrip_blocks", "  {% if true %}x{% endif %}\n  {{ 'y' }}\n\t {% for i in [1] %}{{ i }}{% endfor %}\n")
case("ws_lstrip_not_after_text", "x {% if true %}y{% endif %}\n  z {%- if true %} w{% endif %}")
case("ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c\n\n  {{- ' d ' -}}  \n e")
case("ws_plus", "  {%+ if true +%}\nx\n  {%+ endif %}\ny")
case("ws_comment", "a {# c #}\n  {#- c2 -#}  b\n{# x #}\n  {# y #}\nz{#+ k +#}\nw")
case("ws_raw", "{% raw %}{{ x }}{% if %}\n{% endraw %}\n{%- raw -%}  {{ y }}  {%- endraw %}|{% raw %} a {% endraw +%}\nb")
case("ws_trailing_newline", "x\n\n")
case("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\rc\r\n")
case("ws_unicode_space", "a\u00a0\u3000{%- if true %}b{% endif %}\u2003{{- 'c' }}")
case("ws_lstrip_unicode_space", "a\n\u00a0\u3000{% if true %}b{% endif %}\n\x0c {# c #}x\n\u2003{{ 'y' }}\u00a0{% if true %}z{% endif %}")
case("ws_var_no_trim", "{{ 'a' }}\n{{ 'b' }}\n")

# ---- literals and expressions ---------------------------------------------------------------------
case("literals", "{{ 1 }} {{ 1.5 }} {{ 1e3 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 'a' 'b' }} "
     "{{ \"d\" }} {{ true }} {{ True }} {{ none }} {{ None }} {{ false }}")
case("containers", "{{ [1, 'a', none, 1.0, true] }} {{ (1,) }} {{ (1, 2) }} {{ () }} {{ {'a': [1, {'b': none}]} }} "
     "{{ {} }} {{ [] }} {{ {1: 'x', 2.5: 'y', none: 1, true: 0} }}")
case("string_escapes", r'''{{ 'a\nb\tc\\d\'e\x41\u00e9\U0001F600\101\q' }}|{{ " \"q\" " }}|{{ 'a\
b' }}''')
case("repr_quotes", r"""{{ ["it's", 'say "hi"', 'both \' "', 'back\\slash', 'nl\nx', '\x00\x7f\u00a0\u2028é😀'] }}""")
case("float_repr", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.0e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 3.0 }} "
     "{{ 2.5e-10 }} {{ 123456789.123456789 }} {{ 1/3 }} {{ 2**0.5 }} {{ 1e300 * 10 }} {{ 100.0 }}")
case("arith_int", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 3 }} "
     "{{ 2 ** 10 }} {{ 2 ** -1 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 - 4 }} {{ true + 1 }} {{ -(3) }} {{ +4 }}")
case("arith_float", "{{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ -7.5 % 2 }} {{ 7.5 % -2 }} {{ 1.5 + 1 }} {{ 2 * 0.5 }} "
     "{{ 2.0 ** 3 }} {{ 10 - 0.5 }}")
case("arith_seq", "{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 3 * 'x' }} {{ 'a' * 0 }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' + 'b' }}")
case("arith_error_str_int", "{{ 'a' + 1 }}")
case("arith_error_div0", "{{ 1 / 0 }}")
case("arith_error_list_tuple", "{{ [1] + (2,) }}")
case("concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ undefined_var ~ 1.0 ~ {'k': 'v'} }}")
case("compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 'é' > 'z' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} "
     "{{ 1 != 2 }} {{ none == none }} {{ (1, 2) == [1, 2] }} {{ 2 >= 2 }} {{ 1 <= 0 }} {{ true == 1 }} "
     "{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}")
case("compare_error", "{{ 1 < 'a' }}")
case("in_operator", "{{ 'a' in 'cat' }} {{ '' in 'x' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} "
     "{{ 'x' in undefined_var }} {{ 1.0 in [1] }} {{ (1, 2) in [(1, 2)] }}")
case("in_error", "{{ 1 in 'abc' }}")
case("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ none or [] }} {{ '' and 'z' }} {{ not not 'a' }} "
     "{{ false or false }} {{ 1 and 2 and 3 }}")
case("conditional", "{{ 'a' if true else 'b' }} [{{ 'a' if false }}] {{ 1 if 0 else 2 if 1 else 3 }} "
     "{{ ('x' if messages else 'y') | upper }}")
case("precedence_filter", "{{ 'x' + ' a ' | trim + 'y' }} {{ -3 | abs }} {{ -'x' | length if false else 2 }} "
     "{{ 1 + 2 | string }}" .replace("{{ 1 + 2 | string }}", "{{ [1, 2] | length + 1 }}"))
case("slicing", "{% set s = 'abcdefg' %}{% set l = [1, 2, 3, 4, 5] %}{{ s[1:3] }} {{ s[::-1] }} {{ s[::2] }} "
     "{{ s[-2:] }} {{ s[5:1:-2] }} {{ l[1:] }} {{ l[::-1] }} {{ l[-1:-4:-1] }} {{ l[:-1] }} {{ l[10:] }} "
     "{{ s[:100] }} {{ 'héllo😀x'[1:4] }} {{ 'héllo😀x'[::-1] }} {{ l[::-2] }} {{ l[-100:2] }} {{ (1, 2, 3)[1:] }} "
     "{{ messages[1:] | length }} {{ s[none:2] }}")
case("slice_step_zero", "{{ [1, 2][::0] }}")
case("indexing", "{{ messages[0].role }} {{ messages[-1]['content'] }} {{ messages.0.role }} {{ 'abc'[1] }} "
     "{{ 'héllo'[-4] }} [{{ [1, 2][5] }}] [{{ {'a': 1}['b'] }}] {{ [1, 2][true] }} [{{ 'abc'['x'] }}] "
     "{{ {1: 'one'}[1] }} {{ {1: 'one'}[1.0] }}")
case("dict_attr_vs_key", "{{ {'items': 1}['items'] }} {{ ({'a': 1}.items() | list) }} {{ {'get': 5}.get('get') }} "
     "[{{ {'content': 'c'}.content }}] {{ {'keys': 3}.keys is defined }}")
case("dict_key_order", "{{ {'b': 1, 'a': 2, 'b': 3} }}")

# ---- statements -----------------------------------------------------------------------------------
case("if_elif_else", "{% for v in [0, 1, 2, 3] %}{% if v == 0 %}zero{% elif v == 1 %}one{% elif v == 2 %}two"
     "{% else %}many{% endif %},{% endfor %}{% if messages %}yes{% endif %}{% if [] %}no{% else %}empty{% endif %}")
case("if_tuple_test", "{% if 0, %}t{% endif %}")
case("for_else", "{% for x in [] %}a{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}"
     "{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}filtered{% endfor %}")
case("for_filter_loop", "{% for x in [1, 2, 3, 4, 5, 6] if x is even %}{{ loop.index }}/{{ loop.length }}:{{ x }}"
     "{{ ',' if not loop.last }}{% endfor %}")
case("for_unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"
     "{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %}{% for a, b in ['xy'] %}{{ b }}{{ a }}{% endfor %}")
case("for_unpack_error", "{% for a, b in [(1, 2, 3)] %}{% endfor %}")
case("for_over_dict_string", "{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %} {% for c in 'héllo' %}{{ c }}-{% endfor %}")
case("for_over_none", "{% for x in none %}{% endfor %}")
case("loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.depth }}{{ loop.depth0 }}[{{ loop.previtem }}]"
     "[{{ loop.nextitem }}]{{ loop.previtem is defined }} {% endfor %}")
case("loop_cycle_changed", "{% for x in [1, 1, 2, 2, 1] %}{{ loop.cycle('a', 'b', 'c') }}{{ loop.changed(x) }} {% endfor %}")
case("loop_nested", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}"
     "{{ a }}{{ b }} {% endfor %}{% endfor %}")
case("break_continue", "{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}"
     "{% endif %}{{ x }}{% endfor %}|{% for x in [1] %}{% break %}{% else %}else{% endfor %}"
     "|{% for x in [1, 2] %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% else %}E{% endfor %}"
     "|{% for x in [1, 2] %}{% continue %}{% else %}E2{% endfor %}")
case("set_scope_loop", "{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }} {% endfor %}{{ x }}")
case("set_scope_if", "{% if true %}{% set y = 'in-if' %}{% endif %}{{ y }}{% for i in [1] %}{% if true %}"
     "{% set z = 1 %}{% endif %}{{ z }}{% endfor %}[{{ z }}]")
case("set_scope_for_else", "{% set w = 1 %}{% for x in [] %}{% else %}{% set w = 2 %}{{ w }}{% endfor %}{{ w }}")
case("set_shadow_messages", "{% set messages = messages[1:] %}{{ messages | length }}{% for m in messages %}"
     "{{ m.role }}{% endfor %}")
case("set_unpack", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, %}{{ c }}{% set (d, e) = 'xy' %}{{ e }}")
case("set_block", "{% set x %}Hello {{ 'W' }}\n{% endset %}[{{ x }}]{% set y | upper | trim %}  abc {% endset %}"
     "[{{ y }}]")
case("namespace", "{% set ns = namespace(n=0, s='', found=false) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
     "{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.found }} "
     "{% set ns2 = namespace({'a': 1}, b=2) %}{{ ns2.a }}{{ ns2.b }}[{{ ns2.c }}]{% set ns2.c = 3 %}{{ ns2.c }} {{ ns2['a'] }}")
case("namespace_underscore", "{% set ns = namespace() %}{% set ns._x = 1 %}")
case("set_attr_not_namespace", "{% set d = {} %}{% set d.x = 1 %}")
case("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} "
     "{{ greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]")
case("macro_varargs_kwargs", "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}")
case("macro_too_many_args", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}")
case("macro_unknown_kwarg", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(b=1) }}")
case("macro_scope", "{% set g = 'early' %}{% macro show() %}{{ g }}{% set g = 'inner' %}{{ g }}{% endmacro %}"
     "{% set g = 'late' %}{{ show() }}{{ g }}")
case("macro_default_uses_arg", "{% macro f(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ f('x') }}")
case("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}"
     "{% endmacro %}{{ fact(5) }}")
case("call_block", "{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('t') %}inner "
     "{{ 1 + 1 }}{% endcall %}{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}"
     "{% endmacro %}{% call(item, i) each(['a', 'b']) %}<{{ i }}{{ item }}>{% endcall %}")
case("print_stmt", "{% print 'a' ~ 1 %}{% print messages | length %}")
case("generation", "{% for m in messages %}{{ '<' + m.role + '>' }}{% if m.role == 'assistant' %}{% generation %}"
     "{{ m.content }}✓{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}")
case("generation_in_macro", "{% macro a(x) %}[{% generation %}{{ x }}{% endgeneration %}]{% endmacro %}é{{ a('yz') }}")
# transformers measures a range where the top-level text ends when the block runs: these run past the end
case("generation_in_macro_length",
     "{% macro a(x) %}[{% generation %}{{ x }}{% endgeneration %}]{% endmacro %}é{{ a('yz') | length }}")
case("generation_in_block_set", "{% set s %}{% generation %}abc{% endgeneration %}{% endset %}x")

# ---- undefined ------------------------------------------------------------------------------------
case("undefined_print", "[{{ undefined_var }}]{{ undefined_var is defined }}{{ undefined_var is undefined }}"
     "{{ messages[0].nope is defined }}[{{ messages[0].nope }}]{{ undefined_var | default('d') }}"
     "{% for x in undefined_var %}x{% endfor %}{{ undefined_var | length }}{{ undefined_var == undefined_var }}"
     "{{ not undefined_var }}{{ undefined_var is none }}[{{ undefined_var | string }}][{{ undefined_var | trim }}]"
     "{{ undefined_var | list }}[{{ undefined_var | join(',') }}]{{ undefined_var is iterable }}"
     "{{ undefined_var is sequence }}[{{ undefined_var | first }}]"
     "{{ undefined_var | items | list }}{{ 1 == undefined_var }}")
case("undefined_int_error", "{{ undefined_var | int }}")
case("undefined_float_error", "{{ undefined_var | float }}")
case("undefined_attr_error", "{{ undefined_var.attr }}")
case("undefined_add_error", "{{ undefined_var + 1 }}")
case("undefined_nested_error", "{{ messages[0].nope.x }}")
case("undefined_call_error", "{{ undefined_var() }}")
case("undefined_tojson_error", "{{ undefined_var | tojson }}")
case("undefined_in_loop_attrs", "{% for m in messages %}{{ m.name | default(m.role) }}{% endfor %}")
case("tools_none", "{{ tools }} {{ tools is none }} {{ tools is defined }} {{ documents }}")
case("tools_given", "{{ tools | length }} {{ tools[0].function.name }}", tools=[{"type": "function", "function": {"name": "f"}}])
case("specials", "{{ bos_token }}{{ eos_token }}{{ unk_token }}{{ pad_token }}[{{ sep_token }}]{{ mask_token is defined }}")
case("add_generation_prompt", "{{ add_generation_prompt }}", add_generation_prompt=True)

# ---- globals --------------------------------------------------------------------------------------
case("raise_exception", "a{{ raise_exception('bad ' ~ messages | length) }}b")
case("raise_exception_in_loop", "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% endfor %}")
case("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %B %Y') }} {{ strftime_now('%A %j %%') }}")
case("range_global", "{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(5, 0, -2) | list }} "
     "{% for i in range(2) %}{{ i }}{% endfor %} {{ range(0) | list }}")
case("dict_global", "{{ dict(a=1, b='x') }} {{ dict({'z': 1}, y=2) }}")

# ---- messages shapes ------------------------------------------------------------------------------
case("tool_calls_loop", "{% for m in messages %}{{ m.role }}{% if m.tool_calls %}{% for tc in m.tool_calls %}"
     "{% if tc.function is defined %}{% set tc = tc.function %}{% endif %}({{ tc.name }} {{ tc.arguments | tojson }}"
     " {{ tc.arguments is string }}){% endfor %}{% endif %}[{{ m.content }}]{{ m.reasoning_content }}|{{ m.thinking }}|"
     "{{ m.keys() | list }}\n{% endfor %}", messages=TOOL_MSGS)
case("content_parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}"
     "{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}|{% endfor %}",
     messages=[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}])
case("none_dropped", "{% for m in messages %}{{ m | tojson }}{% endfor %}",
     messages=[{"role": "user", "content": "x", "name": None, "extra": {"k": None}}])
case("nonstring_content_error", "{{ '<|user|>' + messages[0]['content'] }}",
     messages=[{"role": "user", "content": [{"type": "text", "text": "a"}]}])
case("numbers_from_json", "{{ messages[0].n }} {{ messages[0].f }} {{ messages[0].e }} {{ messages[0].f is float }} "
     "{{ messages[0].n is integer }} {{ messages[0] | tojson }}",
     messages=[{"role": "user", "content": "", "n": 3, "f": 2.0, "e": 1e20, "neg": -0.5, "big": 9007199254740993}])

# ---- filters --------------------------------------------------------------------------------------
case("f_abs", "{{ -3 | abs }} {{ -2.5 | abs }} {{ true | abs }}")
case("f_capitalize", "{{ 'hELLO wORLD' | capitalize }} {{ 'ß x' | capitalize }} {{ '' | capitalize }} {{ 5 | capitalize }}")
case("f_count_length", "{{ [1, 2] | count }} {{ 'héllo' | length }} {{ {'a': 1} | length }} {{ messages | length }}")
case("f_length_generator_error", "{{ [1, 2] | select | length }}")
case("f_default", "{{ undefined_var | default('x') }} {{ '' | default('y') }} {{ '' | default('y', true) }} "
     "{{ 0 | d('z', boolean=true) }} {{ none | default('n') }} [{{ undefined_var | d }}] {{ [] | default('e', true) }}")
case("f_dictsort", "{{ {'b': 1, 'a': 3, 'C': 2} | dictsort }} {{ {'b': 1, 'a': 3, 'C': 2} | dictsort(true) }} "
     "{{ {'b': 1, 'a': 3, 'c': 2} | dictsort(by='value') }} {{ {'b': 1, 'a': 3} | dictsort(reverse=true) }}")
case("f_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }} "
     "[{{ [] | first }}] {{ {'k': 1, 'j': 2} | last }} {{ [4, 5] | select | first }}")
case("f_last_generator_error", "{{ [4, 5] | select | last }}")
case("f_float", "{{ '3.5' | float }} {{ ' 2 ' | float }} {{ 'x' | float }} {{ 'x' | float(1.5) }} {{ 3 | float }} "
     "{{ true | float }} {{ '1e3' | float }} {{ 'inf' | float }} {{ '1_0.5' | float }} {{ none | float }}")
case("f_int", "{{ '42' | int }} {{ '42.9' | int }} {{ 3.99 | int }} {{ -3.99 | int }} {{ 'x' | int }} "
     "{{ 'x' | int(7) }} {{ '0x1A' | int(base=16) }} {{ '1A' | int(0, 16) }} {{ '0b101' | int(base=0) }} "
     "{{ true | int }} {{ ' 12 ' | int }} {{ '1_000' | int }} {{ none | int }} {{ '1e3' | int }}")
case("f_indent", "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb\n\nc' | indent(2, true) }}|{{ 'a\nb\n\nc\n' | indent(2, blank=true) }}"
     "|{{ 'x\ny' | indent('> ') }}|{{ '' | indent }}|{{ 'a\r\nb' | indent(1) }}|{{ 'one' | indent(first=true) }}")
case("f_items", "{{ {'a': 1, 'b': [2]} | items | list }} {% for k, v in {'x': 1} | items %}{{ k }}{{ v }}{% endfor %}")
case("f_items_error", "{{ [1] | items | list }}")
case("f_join", "{{ [1, 'a', none] | join }} {{ ['a', 'b'] | join(', ') }} {{ messages | join('|', attribute='role') }} "
     "{{ 'abc' | join('-') }} {{ [[1], (2,)] | join(d=';') }}")
case("f_list", "{{ 'ab' | list }} {{ (1, 2) | list }} {{ {'k': 1} | list }} {{ [3, 4] | select | list }}")
case("f_lower_upper", "{{ 'HeLLo ÀÉ ΣΑΣ' | lower }} {{ 'straße ǆ ﬁ' | upper }} {{ 1 | upper }}")
case("f_map", "{{ messages | map(attribute='role') | list }} {{ ['a', 'B'] | map('upper') | join }} "
     "{{ [' x ', ' y'] | map('trim') | list }} {{ messages | map(attribute='nope', default='-') | list }} "
     "{{ [[1, 2], [3]] | map('length') | list }} {{ [1.26, 2.5] | map('round', 1) | list }} {{ [] | map('upper') | list }}")
case("f_max_min", "{{ [3, 1, 2] | max }} {{ [3, 1, 2] | min }} {{ ['b', 'A', 'c'] | max }} {{ ['b', 'A', 'c'] | min }} "
     "{{ ['b', 'A', 'c'] | max(case_sensitive=true) }} {{ messages | max(attribute='role') | tojson }} [{{ [] | max }}]")
case("f_select_reject", "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} "
     "{{ [0, 1, '', 'a', none] | select | list }} {{ [0, 1, '', 'a'] | reject | list }} "
     "{{ [1, 2, 3] | select('gt', 1) | list }} {{ [1, 5, 10] | select('divisibleby', 5) | list }} "
     "{{ ['a', 'b'] | select('in', ['a', 'c']) | list }} {{ [1, 2] | select('equalto', 2) | list }}")
case("f_selectattr_rejectattr", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} "
     "{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }} "
     "{{ messages | selectattr('content') | list | length }} {{ messages | rejectattr('name', 'defined') | list | length }}")
case("f_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'abc' | replace('', '-') }} "
     "{{ 123 | replace(2, 'x') }} {{ 'a.b.c' | replace('.', '') }}")
case("f_reverse", "{{ 'héllo' | reverse }} {{ [1, 2, 3] | reverse | list }} {{ (1, 2) | reverse | join }} "
     "{{ {'a': 1, 'b': 2} | reverse | list }} {{ [1, 2] | select | reverse }}")
case("f_round", "{{ 2.675 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 42 | round }} {{ 1.2345 | round(2, 'floor') }} "
     "{{ 1.2345 | round(1, 'ceil') }} {{ -1.5 | round }} {{ 0.125 | round(2) }} {{ 7 | round(1, 'ceil') }} {{ 1e20 | round(2) }}")
case("f_safe", "{{ '<b>' | safe }} {{ ('<b>' | safe) + '<i>' }} {{ '<i>' + ('<b>' | safe) }} {{ ('<b>' | safe) ~ '<i>' }} "
     "{{ ('a&b' | safe) | upper }} {{ ('x' | safe) | replace('x', '<') }}")
case("f_sort", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} "
     "{{ [3, 1, 2] | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | list }} "
     "{{ [{'a': 2, 'b': 1}, {'a': 1, 'b': 2}, {'a': 1, 'b': 1}] | sort(attribute='a,b') }} "
     "{{ [(2, 'x'), (1, 'y'), (2, 'a')] | sort(attribute='0') }}")
case("f_sort_error", "{{ [1, 'a'] | sort }}")
case("f_string", "{{ 1 | string }} {{ none | string }} {{ [1, 'a'] | string }} {{ (1 | string) + 'x' }} {{ true | string }}")
case("f_sum", "{{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }} {{ [[1], [2]] | sum(start=[]) }} "
     "{{ [{'n': 1}, {'n': 2}] | sum(attribute='n') }} {{ [] | sum }} {{ [true, true] | sum }}")
case("f_title", "{{ 'hello wORLD' | title }} {{ \"they're bill's-friend (from uk)\" | title }} {{ 'a\tb\nc[d<e{f' | title }} "
     "{{ 'ǆx ßa' | title }}")
case("f_tojson", "{{ messages[0] | tojson }} {{ {'b': 1, 'a': [1, 2.5, none, true]} | tojson(indent=2) }} "
     "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ [1, {'x': 'é\"\\\\\n\t\x01'}] | tojson(separators=(',', ':')) }} "
     "{{ 'é😀' | tojson(ensure_ascii=true) }} {{ {} | tojson(indent=4) }} {{ [[]] | tojson(indent=1) }} "
     "{{ {1: 2, 2.5: 3, true: 4, none: 5} | tojson }} {{ (1, 2) | tojson }} {{ [1] | tojson(indent='--') }} "
     "{{ 1e16 | tojson }} {{ 'x' | tojson(indent=0) }} {{ {'a': [1]} | tojson(indent=0) }} {{ ('<b>' | safe) | tojson }}")
case("f_tojson_sort_mixed_error", "{{ {1: 2, 'a': 3} | tojson(sort_keys=true) }}")
case("f_trim", "[{{ '  a b \n' | trim }}] [{{ 'xxaxx' | trim('x') }}] [{{ '\u00a0a\u3000' | trim }}] [{{ 5 | trim }}] "
     "[{{ 'abcba' | trim('ab') }}]")
case("f_unique", "{{ [1, 2, 1, 3, 2] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} "
     "{{ ['a', 'A', 'b'] | unique(case_sensitive=true) | list }} {{ messages | unique(attribute='role') | map(attribute='role') | list }} "
     "{{ [1, 1.0, true] | unique | list }}")
case("f_wordcount", "{{ 'hello world, foo_bar 42 é-à' | wordcount }} {{ '' | wordcount }} {{ '  ' | wordcount }}")

# ---- tests ----------------------------------------------------------------------------------------
case("t_types", "{% for v in [none, true, false, 0, 1.5, 'a', [1], (1,), {'a': 1}] %}{{ v is none }}{{ v is boolean }}"
     "{{ v is false }}{{ v is true }}{{ v is integer }}{{ v is float }}{{ v is number }}{{ v is string }}"
     "{{ v is mapping }}{{ v is iterable }}{{ v is sequence }}{{ v is defined }}{{ v is undefined }} {% endfor %}"
     "{{ {'a': 1}.items() is sequence }}{{ [1] | select is iterable }}{{ [1] | select is sequence }}")
case("t_numbers", "{{ 3 is odd }}{{ 4 is even }}{{ 3.0 is odd }}{{ 10 is divisibleby 5 }}{{ 10 is divisibleby(3) }}"
     "{{ -3 is odd }}{{ 0 is even }}")
case("t_compare", "{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 1 is lt 2 }}"
     "{{ 3 is le 2 }}{{ 2 is greaterthan 1 }}{{ 1 is lessthan 2 }}{{ 'a' is in 'cat' }}{{ 5 is in [1, 2] }}"
     "{{ 1 is not eq 2 }}{{ 'a' is eq('a') }}")
case("t_sameas", "{{ none is sameas none }}{{ false is sameas false }}{{ 0 is sameas false }}{{ 1 is sameas 1 }}"
     "{{ messages is sameas messages }}{{ [] is sameas [] }}")
case("t_not_chain", "{{ 2 is not odd and 3 is odd }} {{ not 2 is odd }}")

# ---- methods --------------------------------------------------------------------------------------
case("m_strip", "[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xxaxx'.strip('x') }}]"
     "[{{ 'xxaxx'.lstrip('x') }}][{{ 'xxaxx'.rstrip('x') }}][{{ '\n\t a \u2028'.strip() }}][{{ 'a'.strip(none) }}]")
case("m_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ '  a b  '.split() }} "
     "{{ 'a b c'.rsplit(' ', 1) }} {{ 'a b c'.rsplit() }} {{ ''.split() }} {{ ''.split(',') }} {{ 'a\u00a0b'.split() }} "
     "{{ 'a b c'.split(maxsplit=1) }} {{ '  a b c  '.rsplit(none, 1) }} {{ 'aXbXc'.split(sep='X') }}")
case("m_split_empty_sep_error", "{{ 'a'.split('') }}")
case("m_startswith_endswith", "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith('lo') }}{{ 'hello'.startswith(('x', 'h')) }}"
     "{{ 'hello'.endswith('x') }}{{ ''.startswith('') }}")
case("m_case", "{{ 'hELLO wORLD'.upper() }} {{ 'HeLLo ΣΑΣ. ΟΔΟΣ'.lower() }} {{ \"they're bill's 2nd ǆ\".title() }} "
     "{{ 'hELLO wORLD'.capitalize() }} {{ 'ß'.upper() }} {{ 'İ'.lower() | length }} {{ 'ﬁx'.title() }}")
case("m_replace", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 1) }} {{ 'ab'.replace('', '.') }} "
     "{{ 'abc'.replace('x', 'y') }}")
case("m_find_count", "{{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.find('l', 3) }} "
     "{{ 'hello'.find('') }} {{ 'hello'.count('l') }} {{ 'aaaa'.count('aa') }} {{ 'abc'.count('') }} "
     "{{ 'hello'.find('l', -2) }} {{ 'hello'.count('l', 0, 3) }}")
case("m_join", "{{ ', '.join(['a', 'b']) }} {{ ''.join('xyz') }} {{ '-'.join(messages | map(attribute='role')) }}")
case("m_join_error", "{{ ','.join([1, 2]) }}")
case("m_dict", "{{ messages[0].get('role') }} {{ messages[0].get('nope') }} {{ messages[0].get('nope', 'd') }} "
     "{{ messages[0].keys() | list }} {{ messages[0].values() | list }} {{ messages[0].items() | list }} "
     "{{ messages[0].items() | length }} {{ 'role' in messages[0].keys() }} {% for k, v in messages[0].items() %}{{ k }}{% endfor %}")
case("m_unknown_attr_undefined", "[{{ 'abc'.nope }}][{{ messages.nope }}][{{ (1).nope }}]{{ 'abc'.nope is defined }}")
case("m_list_attr_call_error", "{{ messages[0].content.strip2() }}")

# ---- errors ---------------------------------------------------------------------------------------
case("syntax_error_unclosed", "{% if true %}x", error_ok=True)
case("syntax_error_unknown_tag", "{% frobnicate %}", error_ok=True)
case("syntax_error_unknown_filter", "{{ x | nofilter }}", error_ok=True)
case("syntax_error_expr", "{{ 1 + }}", error_ok=True)
case("syntax_error_break_outside", "{% break %}", error_ok=True)

# ---- refused: outside the subset --------------------------------------------------------------------
case("refuse_include", "{% include 'x.jinja' %}", refused="include")
case("refuse_extends", "{% extends 'base' %}", refused="extends")
case("refuse_block", "{% block b %}x{% endblock %}", refused="block")
case("refuse_import", "{% import 'm' as m %}", refused="import")
case("refuse_from", "{% from 'm' import f %}", refused="from")
case("refuse_with", "{% with a = 1 %}{{ a }}{% endwith %}", refused="with")
case("refuse_filter_block", "{% filter upper %}x{% endfilter %}", refused="filter")
case("refuse_autoescape", "{% autoescape true %}x{% endautoescape %}", refused="autoescape")
case("refuse_recursive", "{% for x in [1] recursive %}{{ x }}{% endfor %}", refused="recursive")
case("refuse_filter_urlencode", "{{ 'a b' | urlencode }}", refused="urlencode")
case("refuse_filter_center", "{{ 'a' | center(5) }}", refused="center")
case("refuse_test_callable", "{{ x is callable }}", refused="callable")
case("refuse_str_method", "{{ 'a'.zfill(3) }}", refused="zfill")
case("refuse_str_format", "{{ '{}'.format(1) }}", refused="format")
case("refuse_percent_format", "{{ '%s' % 1 }}", refused="formatting")
case("refuse_cycler", "{{ cycler(1, 2).next() }}", refused="cycler")
case("refuse_star_args", "{% macro f() %}{% endmacro %}{{ f(*[1]) }}", refused="*args")
case("refuse_print_iterator", "{{ [1, 2] | reverse }}", refused="printing")
case("refuse_dunder", "{{ messages.__class__ }}", refused="__class__")

CASES = C

# ---- idioms of published templates (Llama 3.1, Mistral Small 3.1, Qwen3, gpt-oss) ---------------------
case("idiom_accumulate_list", "{% set acc = [] %}{% for m in messages %}{% if m.role != 'system' and not m.get('tool_calls') %}"
     "{% set acc = acc + [m] %}{% endif %}{% endfor %}{{ acc | length }}|{% set f = [] %}{% for m in messages %}"
     "{% set f = f + [m.role] %}{% endfor %}{{ f }}")
case("idiom_for_items_if", "{% for k, v in {'name': 'f', 'return': 1, 'd': [1]}.items() if k != 'return' %}"
     "{{ k }}={{ v | tojson if v is not string else v }}{{ ', ' if not loop.last }}{% endfor %}")
case("idiom_json_trim", "{% set out = {'name': 'f', 'arguments': {'a': 1}} | tojson %}{{ out[:-1] }}, \"id\": \"{{ 'call_abcdefghij'[-9:] }}\"}")
case("idiom_schema_items_key", "{% set p = {'type': 'array', 'items': {'type': 'string'}} %}{{ 'items' in p }} "
     "{{ p['items']['type'] }} {{ p.items is defined }} {{ (p.required or []) | length }} {{ p.type[0] }} "
     "{{ p.nullable }}|{{ p.enum | join('\" | \"') if p.enum else 'none' }}")
case("idiom_rest_of_messages", "{% for m in messages %}{{ loop_messages_missing is defined }}"
     "{% for later in messages[loop.index:] %}{{ later.role[0] }}{% endfor %};{% endfor %}")
case("idiom_not_is_defined", "{% if not date_string is defined %}{% set date_string = '26 Jul 2024' %}{% endif %}{{ date_string }} "
     "{{ not none is none }} {{ not tools is defined }}")
case("idiom_macro_trim_whitespace", "{%- macro t(x, y=false) -%}\n  {%- if x is mapping -%}\n    {{- 'map' -}}\n  {%- else -%}\n"
     "    {{- x ~ (' y' if y) -}}\n  {%- endif -%}\n{%- endmacro -%}\n{{ t({}) }} {{ t(1, y=true) }}\n{{- t('z') }}")
case("idiom_reverse_scan", "{% set ns = namespace(last=-1) %}{% for m in messages[::-1] %}{% if ns.last == -1 and m.role == 'user' %}"
     "{% set ns.last = messages | length - 1 - loop.index0 %}{% endif %}{% endfor %}{{ ns.last }}")
case("idiom_think_split", "{% set c = '<think>\nhmm\n</think>\n\nanswer' %}{{ c.split('</think>')[-1].lstrip('\n') }}|"
     "{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}")
case("idiom_dict_literal_tojson", "{{ {'output': messages[1].content} | tojson }} {{ {'a': 1, 'b': none} | tojson(indent=4) }}")
case("f_indent_nonstring_error", "{{ messages | indent }}")
case("refuse_slice_non_sequence", "{{ add_generation_prompt[1:] }}", refused="slicing")
case("markup_iterates_plain", "{% for c in ('<a' | safe) %}{{ c + '>' }}{% endfor %}{{ ('<b>' | safe)[1:] + '<' }}")

case("markup_through_filters", "{% set m = '<a>' | safe %}{{ (m | reverse) + '&' }} {{ (m | trim) + '&' }} {{ (m | upper) + '&' }} "
     "{{ (m | title) + '&' }} {{ (m | capitalize) + '&' }} {{ (m | string) + '&' }} {{ (m | first) + '&' }} "
     "{{ (m | replace('a', 'b')) + '&' }} {{ m.split('a')[0] + '&' }} {{ m.join(['<', '>']) }} {{ '-'.join([m, '<']) }} "
     "{{ (m * 2) + '&' }} {{ m[0] + '&' }} {{ (m | indent(first=true)) + '&' }} {{ m.replace('a', '<') }}")
CASES = C

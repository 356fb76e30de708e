#!/usr/bin/env python3
"""Writes tests/unit/engine/jinja_cases.inc: small templates (whitespace
control, literals, operators, access, statements, tests, filters, methods,
globals) with what Jinja2 renders under transformers' chat template
environment (its _compile_jinja_template: trim_blocks, lstrip_blocks,
loopcontrols, tojson, strftime_now pinned to 2026-02-07 10:11:12).
tests/unit/engine/test_jinja.c renders them with engine/llm/jinja*.c.
Needs transformers and jinja2: pip install transformers jinja2.
"""
import os
import json
import sys
from transformers.utils.chat_template_utils import _compile_jinja_template
C = [
 # whitespace control
 ("text", "plain text", {}),
 ("trim_blocks", "{% if true %}\nx\n{% endif %}\ny", {}),
 ("lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", {}),
 ("lstrip keeps text before tag", "a  {% if true %}b{% endif %}", {}),
 ("minus trims both sides", "a   {{- 'b' -}}   c  {%- if true -%}  d  {%- endif %}", {}),
 ("plus keeps indentation", "x\n  {%+ if true %}y{% endif %}", {}),
 ("plus keeps the newline", "{% if true +%}\nz{% endif %}", {}),
 ("variable tags keep newlines", "{{ 'a' }}\n{{ 'b' }}\n", {}),
 ("comments", "a{# gone #}b\n  {# own line #}\nc{#- x -#}  d", {}),
 ("trailing newline dropped once", "x\n\n", {}),
 ("crlf becomes lf", "a\r\nb\rc", {}),
 # literals and printing
 ("none and bools", "{{ none }} {{ true }} {{ False }} {{ None }}", {}),
 ("numbers", "{{ 1 + 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 * 3 - 1 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 1.5 + 1 }} {{ 1_000 }}", {}),
 ("float repr", "{{ 0.1 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ 123456789.125 }} {{ 2.5e300 }} {{ x }}", {"x": 0.30000000000000004}),
 ("string escapes", "{{ 'a\\nb\\t\"c\"' }}|{{ \"it's\" }}|{{ '\\u00e9\\x41' }}|{{ 'keep\\q' }}", {}),
 ("adjacent strings join", "{{ 'a' 'b' \"c\" }}", {}),
 ("repr of containers", "{{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ (1, 2) }} {{ (1,) }} {{ [\"it's\"] }}", {}),
 ("unicode repr", "{{ ['é', 'a\\nb', 'tab\\t'] }}", {}),
 # operators
 ("comparisons", "{{ 1 < 2 }}{{ 2 <= 1 }}{{ 'a' == 'a' }}{{ 'a' != 'a' }}{{ 3 > 2 }}{{ 1 >= 1 }}{{ 1 == 1.0 }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}", {}),
 ("logic returns operands", "{{ true and false }}{{ 0 or 'x' }}{{ '' and 'y' }}{{ not true }}{{ not (1 == 2) }}", {}),
 ("in and not in", "{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in d }}{{ 'q' not in d }}{{ not 'k' in d }}", {"d": {"k": 1}}),
 ("concat", "{{ 'n=' ~ 3 ~ true ~ none ~ missing }}", {}),
 ("plus on strings and lists", "{{ 'a' + 'b' }}{{ [1] + [2, 3] }}{{ 'ab' * 2 }}", {}),
 ("conditional expression", "{{ 'yes' if flag else 'no' }}[{{ 'a' if false }}]{{ 1 if 0 else 2 if 0 else 3 }}", {"flag": True}),
 ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 2 * 3 }} {{ -2 ** 2 }} {{ not 1 == 2 }}", {}),
 ("filter binds tighter than plus", "{{ 'a' + ' b ' | trim + 'c' }}", {}),
 # access
 ("subscripts", "{{ xs[0] }}{{ xs[-1] }}{{ d['k'] }}{{ d.k }}{{ xs.1 }}[{{ xs[9] }}][{{ d.nope }}]", {"xs": [1, 2, 3], "d": {"k": "v"}}),
 ("slices", "{{ xs[1:] }}{{ xs[:2] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[-2:] }}{{ xs[5:] }}{{ 'hello'[1:3] }}{{ 'abc'[::-1] }}{{ xs[-1:0:-1] }}", {"xs": [1, 2, 3, 4, 5]}),
 ("string index by code point", "{{ s[1] }}{{ s[-1] }}{{ s | length }}", {"s": "añ€😀"}),
 ("attribute of a string is undefined", "[{{ 'x'.content }}][{{ 'x'.content is defined }}][{{ n.x is defined }}]", {"n": None}),
 ("dict method beats key", "{{ d.items() | list }}", {"d": {"items": 1, "b": 2}}),
 # statements
 ("if elif else", "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% endfor %}", {}),
 ("loop variables", "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem is defined }}{{ loop.nextitem }};{% endfor %}", {"items": ["a", "b"]}),
 ("for else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in none_is_undefined %}y{% else %}also{% endfor %}", {}),
 ("for with filter", "{% for x in [1, 2, 3, 4] if x % 2 == 0 %}{{ loop.index }}:{{ x }}/{{ loop.length }}{% endfor %}", {}),
 ("for over dict and items", "{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", {"d": {"x": 1, "y": "z"}}),
 ("for over a string", "{% for c in 'hé!' %}[{{ c }}]{% endfor %}", {}),
 ("break and continue", "{% for n in [1, 2, 3, 4] %}{% if n == 2 %}{% continue %}{% endif %}{% if n == 4 %}{% break %}{% endif %}{{ n }}{% endfor %}", {}),
 ("loop scope is per iteration", "{% set c = 0 %}{% for i in range(3) %}{% set c = c + 1 %}{{ c }}{% endfor %}{{ c }}", {}),
 ("set in if leaks", "{% if true %}{% set b = 3 %}{% endif %}{{ b }}", {}),
 ("namespace", "{% set ns = namespace(total=0, seen=false) %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }} {{ ns.seen }}", {}),
 ("set block", "{% set x %}a{{ 1 + 1 }}b{% endset %}[{{ x }}]", {}),
 ("set tuple", "{% set t = 1, 2 %}{{ t }}", {}),
 ("macro", "{% macro f(a, b=2) %}[{{ a }}{{ b }}]{% endmacro %}{{ f(1) }}{{ f(1, b=3) }}{{ f('x', 'y') }}{{ f(1) | length }}", {}),
 ("macro sees globals", "{% macro g() %}{{ who }}{% endmacro %}{{ g() }}", {"who": "top"}),
 ("generation block", "a{% generation %}b{% endgeneration %}c", {}),
 # tests
 ("tests", "{{ x is defined }}{{ y is defined }}{{ y is not defined }}{{ n is none }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ s is iterable }}{{ 1 is iterable }}{{ y is iterable }}", {"x": 1, "n": None, "s": "s", "d": {}, "l": []}),
 ("number tests", "{{ 1 is number }}{{ true is number }}{{ 1.5 is integer }}{{ 1.5 is float }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}", {}),
 ("equality tests", "{{ 1 is eq 1 }}{{ 'a' is equalto 'b' }}{{ 1 is ne 2 }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 2 is ge 2 }}{{ 'a' is in 'cat' }}{{ x is sameas false }}{{ x is false }}{{ 'ab' is lower }}{{ 'AB' is upper }}", {"x": False}),
 ("callable", "{{ raise_exception is defined }}{{ strftime_now is callable }}{{ range is defined }}{{ namespace is defined }}{{ nothing is defined }}", {}),
 # filters
 ("trim length upper lower", "[{{ '  x  ' | trim }}][{{ 'xxhixx' | trim('x') }}]{{ xs | length }}{{ 'Ab' | upper }}{{ 'Ab' | lower }}{{ d | length }}{{ missing | length }}", {"xs": [1, 2, 3], "d": {"a": 1}}),
 ("first last join", "{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}|{{ xs | join('-') }}|{{ xs | join }}|{{ ds | join(', ', attribute='n') }}", {"xs": [1, 2, 3], "ds": [{"n": "a"}, {"n": "b"}]}),
 ("default", "{{ missing | default('d') }}|{{ '' | default('e') }}|{{ '' | default('e', true) }}|{{ none | d('n') }}|{{ 0 | default(5, boolean=true) }}", {}),
 ("string and list", "{{ 5 | string }}{{ none | string }}{{ 'ab' | list }}{{ d | list }}{{ range(3) | list }}", {"d": {"a": 1, "b": 2}}),
 ("title capitalize", "{{ 'hello wORLD-x (y' | title }}|{{ 'hello world' | capitalize }}|{{ \"they're 3rd\".title() }}", {}),
 ("replace", "{{ 'a-b-c' | replace('-', '+') }}{{ 'a-b-c' | replace('-', '', 1) }}{{ 'aaa'.replace('a', 'b', 2) }}", {}),
 ("selectattr rejectattr map", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | list }}{{ ms | rejectattr('role', 'eq', 'user') | list | length }}{{ ms | selectattr('on') | map(attribute='c') | join }}{{ ms | map(attribute='x', default='-') | join }}", {"ms": [{"role": "user", "c": "a", "on": True}, {"role": "bot", "c": "b"}, {"role": "user", "c": "c", "on": False}]}),
 ("select reject", "{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 0, '', 'x'] | select | list }}{{ [1, 2, 3] | reject('gt', 1) | list }}", {}),
 ("map a filter", "{{ ['a', 'B'] | map('upper') | join }}{{ [' x ', 'y '] | map('trim') | list }}", {}),
 ("sort unique reverse", "{{ ['b', 'A', 'c'] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}{{ ds | sort(attribute='n') | map(attribute='n') | join }}{{ ['a', 'A', 'b'] | unique | list }}{{ [1, 2] | reverse | list }}{{ 'abc' | reverse }}", {"ds": [{"n": 2}, {"n": 1}]}),
 ("numeric filters", "{{ '42' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '2.5' | float }}{{ -3 | abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}{{ [1, 2, 3] | sum }}{{ ds | sum(attribute='n') }}", {"ds": [{"n": 2}, {"n": 1}]}),
 ("indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}", {}),
 ("dictsort", "{{ d | dictsort }}{{ d | dictsort(by='value') }}", {"d": {"b": 1, "a": 2}}),
 ("tojson", "{{ {'a': [1, 'x', none, true, 2.5], 'é': 'ü\"\\\\\\n'} | tojson }}", {}),
 ("tojson indent and options", "{{ {'b': [1, {'c': 'x'}], 'a': {}, 'e': []} | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1, 2] | tojson(separators=(',', ':')) }}", {}),
 ("tojson control characters", "{{ s | tojson }}", {"s": "\u0001\b\f\r\t\u001f\u2028"}),
 # methods
 ("strip methods", "[{{ ' x '.strip() }}][{{ ' x '.lstrip() }}][{{ ' x '.rstrip() }}][{{ '\\n\\nx\\n'.strip('\\n') }}][{{ 'xxay'.lstrip('x') }}][{{ 'ayyx'.rstrip('xy') }}][{{ ' a '.strip(none) }}][{{ s.strip() }}]", {"s": "\u00a0\u3000wide\u2003 "}),
 ("split methods", "{{ 'a<b>c<b>'.split('<b>') }}{{ ' a  b '.split() }}{{ 'x'.split(',') }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ 'r</think>a'.split('</think>')[-1] }}{{ 'l1\\nl2\\r\\nl3'.splitlines() }}{{ ' a b c '.split(none, 1) }}", {}),
 ("affix methods", "{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('x') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}{{ 'ééa'.find('a') }}{{ 'abab'.count('ab') }}{{ 'abab'.rfind('ab') }}", {}),
 ("case methods", "{{ 'ab'.upper() }}{{ 'AB'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ '12'.isdigit() }}{{ 'a1'.isalpha() }}{{ ' '.isspace() }}{{ 'ab'.islower() }}", {}),
 ("join method", "{{ ', '.join(['a', 'b']) }}{{ '-'.join('xyz') }}", {}),
 ("dict methods", "{{ d.get('k') }}{{ d.get('q', 'dflt') }}{{ d.get('q') }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.items() | list }}", {"d": {"k": "v"}}),
 ("list methods", "{{ xs.index(2) }}{{ xs.count(1) }}", {"xs": [1, 2, 1]}),
 # globals
 ("range", "{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 8, 3) | list }}{{ range(3, -1, -1) | list }}{{ range(0, 3, -1) | list }}", {}),
 ("dict global", "{{ dict(a=1, b='x') }}", {}),
 ("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S %d %b %Y %B %A') }}", {}),
]
import datetime
import transformers.utils.chat_template_utils as ctu
class F(datetime.datetime):
    @classmethod
    def now(cls, tz=None): return datetime.datetime(2026,2,7,10,11,12)
ctu.datetime = F
def cstr(s):
    out='"'
    for ch in s:
        o=ord(ch)
        if ch=='"': out+='\\"'
        elif ch=='\\': out+='\\\\'
        elif ch=='\n': out+='\\n'
        elif ch=='\r': out+='\\r'
        elif ch=='\t': out+='\\t'
        elif o<0x20 or o==0x7f: out+='\\%03o'%o
        elif o<0x80: out+=ch
        else:
            for b in ch.encode('utf-8'): out+='\\x%02x'%b
            out+='""'
    return out+'"'
rows = ["// Generated by tests/llm/chat/make_jinja_unit_cases.py from Jinja2 " + __import__("jinja2").__version__ +
        " under transformers " + __import__("transformers").__version__ + "; do not edit.\n"]
for name, tpl, vars in C:
    out = _compile_jinja_template(tpl).render(**vars)  # a case Jinja2 refuses is a mistake in the table
    rows.append("    {%s,\n     %s,\n     %s,\n     %s},\n" % (cstr(name), cstr(tpl), cstr(json.dumps(vars, ensure_ascii=False)), cstr(out)))
dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "unit", "engine", "jinja_cases.inc")
with open(dst, "w", encoding="utf-8") as f:
    f.write("".join(rows))
print(f"{len(C)} cases written to {os.path.normpath(dst)}")

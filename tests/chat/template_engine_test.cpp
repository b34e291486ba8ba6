// Unit tests of the chat-template interpreter: each Jinja feature the Qwen templates (and common others) use, with
// the output CPython's jinja2 gives (tools/template_diff.py checks the same features against jinja2 itself).
#include <catch2/catch_test_macros.hpp>

#include <nlohmann/json.hpp>

#include "chat/template/chat_template.h"

namespace {

using voltserve::chat::ChatTemplate;
using json = nlohmann::ordered_json;

std::string render(std::string_view source, const json& context = json::object()) {
  return ChatTemplate::parse(source).render(context);
}

}  // namespace

TEST_CASE("whitespace control follows trim_blocks and lstrip_blocks", "[unit]") {
  CHECK(render("a\n{% if true %}\nb\n{% endif %}\nc") == "a\nb\nc");
  CHECK(render("  {% if true %}x{% endif %}  \n  y") == "x  \n  y");
  CHECK(render("{%- if true -%}  x  {%- endif -%}  z") == "xz");
  CHECK(render("A {{- ' a ' -}} B") == "A a B");
  CHECK(render("line\n    {# comment #}\nnext") == "line\nnext");
  CHECK(render("a {%+ if true %}b{% endif %}") == "a b");
  CHECK(render("  {{ 'x' }}") == "  x");           // lstrip_blocks leaves variable tags alone
  CHECK(render("x\r\ny\rz\r\n") == "x\ny\nz");      // newlines normalised, one trailing newline dropped
  CHECK(render("{% raw %}{{ raw }}{% endraw %}") == "{{ raw }}");
  CHECK(render("{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\n") == "  0\n  1\n  2\n");
}

TEST_CASE("literals print like Python", "[unit]") {
  CHECK(render("{{ 1 }} {{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }}") ==
        "1 1.0 1e+16 1e-05 0.30000000000000004 2.5");
  CHECK(render("{{ none }} {{ None }} {{ true }} {{ False }}") == "None None True False");
  CHECK(render("{{ [1, 'a', none, true] }} {{ {'k': 'v'} }} {{ (1,) }}") == "[1, 'a', None, True] {'k': 'v'} (1,)");
  CHECK(render("{{ ['it\\'s', 'a\"b', 'x\\ny'] }}") == "[\"it's\", 'a\"b', 'x\\ny']");
  CHECK(render("{{ 'a\\tb\\x41\\u00e9' }}") == "a\tbA\xc3\xa9");
  CHECK(render("{{ x }}|{{ 'adj' 'acent' }}") == "|adjacent");
}

TEST_CASE("operators have Python semantics", "[unit]") {
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}") ==
        "3 -4 2 1024 64 4");
  CHECK(render("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none ~ x }}") == "ababab [1, 2] a1None");
  CHECK(render("{{ 1 == 1.0 }} {{ 1 < 2 < 3 }} {{ 'b' in ['a', 'b'] }} {{ 'x' not in 'abc' }}") ==
        "True True True True");
  CHECK(render("{{ 0 or 'y' }} {{ 1 and 2 }} {{ not none }}") == "y 2 True");
  CHECK(render("{{ 'yes' if 0 else 'no' }}[{{ 'a' if false }}]") == "no[]");
}

TEST_CASE("attribute, item and slice access", "[unit]") {
  const json ctx = {{"d", {{"a", 1}, {"items", "k"}}}, {"l", {3, 1, 2}}, {"s", "h\xc3\xa9llo"}};
  CHECK(render("{{ d.a }} {{ d['a'] }} [{{ d.zz }}] {{ d.zz is defined }}", ctx) == "1 1 [] False");
  CHECK(render("{{ d['items'] }} {{ d.items()|list }}", ctx) == "k [('a', 1), ('items', 'k')]");
  CHECK(render("{{ l[-1] }} {{ l[::-1] }} {{ l[1:] }} {{ s[1] }} {{ s[::-1] }} {{ s|length }}", ctx) ==
        "2 [2, 1, 3] [1, 2] \xc3\xa9 oll\xc3\xa9h 5");
  CHECK(render("{{ d.get('zz', 5) }} {{ d.keys()|list }}", ctx) == "5 ['a', 'items']");
}

TEST_CASE("string methods", "[unit]") {
  CHECK(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }}") == "True True");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.rsplit(' ', 1) }}") ==
        "['a', 'b', '', 'c'] ['a', 'b'] ['a b', 'c']");
  CHECK(render("[{{ '\\n x \\n'.strip() }}][{{ '--a--'.strip('-') }}][{{ '\\nx'.lstrip('\\n') }}][{{ 'x  '.rstrip() }}]") ==
        "[x][a][x][x]");
  CHECK(render("{{ 'aXbX'.replace('X', '-') }} {{ 'ab'.upper() }} {{ 'hello world'.title() }} {{ 'abc'.find('c') }}") ==
        "a-b- AB Hello World 2");
  CHECK(render("{{ '{} and {name}'.format(1, name='n') }} {{ 'x'.join(['a', 'b']) }}") == "1 and n axb");
}

TEST_CASE("for loops: loop variable, else, filters, unpacking, break and continue", "[unit]") {
  CHECK(render("{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
               "{{ loop.revindex }}{{ loop.previtem }}|{% endfor %}") ==
        "1TrueFalse33|2FalseFalse32a|3FalseTrue31b|");
  CHECK(render("{% for x in [] %}no{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}") == "1:2 2:4 ");
  CHECK(render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}") == "a=1;b=2;");
  CHECK(render("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}"
               "{{ i }}{% endfor %}") == "02");
  CHECK(render("{% for m in messages[::-1] %}{{ loop.index0 }}{{ m }}{% endfor %}", {{"messages", {"a", "b"}}}) == "0b1a");
}

TEST_CASE("scoping: set in loops does not leak, namespaces do", "[unit]") {
  CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}") == "231");
  CHECK(render("{% set ns = namespace(c=0) %}{% for i in range(4) %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}") ==
        "6");
  CHECK(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}") == "5");
  CHECK(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}") == "12");
  CHECK(render("{% set x %} hi {{ 1 }}{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}") == "[ hi 1]ABC");
}

TEST_CASE("macros: defaults, keywords, caller, recursion, globals at call time", "[unit]") {
  CHECK(render("{% macro m(a, b=2, c='z') %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, c='k') }}") ==
        "1-2-z 1-2-k");
  CHECK(render("{% macro w(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call w('b') %}in{% endcall %}") ==
        "<b>in</b>");
  CHECK(render("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}") == "321");
  CHECK(render("{% macro g() %}{{ later }}{% endmacro %}{% set later = 'seen' %}{{ g() }}") == "seen");
  CHECK(render("{% macro m() %}  x  {% endmacro %}[{{ m()|trim }}]") == "[x]");
}

TEST_CASE("filters", "[unit]") {
  const json ctx = {{"users", {{{"name", "bob"}, {"age", 30}}, {{"name", "Al"}, {"age", 25}}}}};
  CHECK(render("{{ {'a': [1, 2.0, none, true], 'u': '\xc3\xa9\"<'}|tojson }}") ==
        "{\"a\": [1, 2.0, null, true], \"u\": \"\xc3\xa9\\\"<\"}");
  CHECK(render("{{ {'a': 1}|tojson(indent=2) }}") == "{\n  \"a\": 1\n}");
  CHECK(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}") == "{\"a\":2,\"b\":1}");
  CHECK(render("{{ users|map(attribute='name')|join(', ') }} {{ users|sort(attribute='age')|first }}", ctx) ==
        "bob, Al {'name': 'Al', 'age': 25}");
  CHECK(render("{{ users|selectattr('age', 'equalto', 30)|list|length }} {{ [1,2,3]|select('odd')|list }}", ctx) ==
        "1 [1, 3]");
  CHECK(render("{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int(9) }} {{ '2.5'|float }} {{ -3|abs }}") == "43 4 9 2.5 3");
  CHECK(render("{{ x|default('d') }} {{ ''|default('e', true) }} {{ [3,1,2]|sort|reverse|list }}") == "d e [3, 2, 1]");
  CHECK(render("[{{ '  a '|trim }}] {{ 'a\\nb'|indent(2) }} {{ ['a', 'A', 'b']|unique|list }}") == "[a] a\n  b ['a', 'b']");
  CHECK(render("{{ 'hello world'|capitalize }} {{ 'aaa'|replace('a', 'b', 2) }} {{ {'b': 1, 'a': 2}|dictsort }}") ==
        "Hello world bba [('a', 2), ('b', 1)]");
  CHECK(render("{{ [1, 2, 3]|sum }} {{ [1, 5, 2]|max }} {{ 'a b  c'|wordcount }} {{ 2.5|round }} {{ 7|round }}") ==
        "6 5 3 2.0 7");
}

TEST_CASE("tests", "[unit]") {
  CHECK(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }}") ==
        "False True True True True");
  CHECK(render("{{ x is iterable }} {{ {} is sequence }} {{ true is number }} {{ true is integer }} {{ 1 is integer }}") ==
        "True True True False True");
  CHECK(render("{{ false is false }} {{ 1 is true }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 'a' is in 'abc' }}") ==
        "True False True True True");
  CHECK(render("{{ 2 is eq 2 }} {{ 2 is equalto 3 }} {{ x is not defined }} {{ 1 is not none }}") == "True False True True");
}

TEST_CASE("globals: range, dict, namespace", "[unit]") {
  CHECK(render("{{ range(3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1) }} {{ namespace(z=1).z }}") ==
        "[0, 1, 2] [5, 3, 1] {'a': 1} 1");
}

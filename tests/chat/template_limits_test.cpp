// Error reporting and resource limits of the template engine: every failure is a TemplateError naming the line,
// raise_exception is flagged as the template's own, and hostile templates hit bounds instead of crashing.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "chat/template/chat_template.h"

namespace {

using Catch::Matchers::ContainsSubstring;
using voltserve::chat::ChatTemplate;
using voltserve::chat::RenderLimits;
using voltserve::chat::TemplateError;
using json = nlohmann::ordered_json;

std::string render(std::string_view source, const json& context = json::object(), const RenderLimits& limits = {}) {
  return ChatTemplate::parse(source).render(context, limits);
}

// The TemplateError a parse or render raises (the test fails if none is raised).
TemplateError error_of(std::string_view source, const json& context = json::object(), const RenderLimits& limits = {}) {
  try {
    render(source, context, limits);
  } catch (const TemplateError& e) {
    return e;
  }
  FAIL("expected a TemplateError for: " << source);
  return TemplateError("unreachable");
}

}  // namespace

TEST_CASE("syntax errors name the line and column", "[unit]") {
  const auto unknown_tag = error_of("line one\nline two\n{% frobnicate %}");
  CHECK(unknown_tag.line() == 3);
  CHECK_THAT(std::string(unknown_tag.what()), ContainsSubstring("line 3") && ContainsSubstring("unknown tag 'frobnicate'"));

  const auto unclosed = error_of("{% if true %}\nnever closed");
  CHECK_THAT(unclosed.message(), ContainsSubstring("'endif'"));

  const auto bad_filter = error_of("a\n\n{{ x | nosuchfilter }}");
  CHECK(bad_filter.line() == 3);
  CHECK_THAT(bad_filter.message(), ContainsSubstring("no filter named 'nosuchfilter'"));

  const auto bad_char = error_of("ok\n{{ 1 $ 2 }}");
  CHECK(bad_char.line() == 2);
  CHECK(bad_char.column() == 6);
  CHECK_THAT(error_of("{{ 'unterminated }}").message(), ContainsSubstring("unterminated string"));
  CHECK_THAT(error_of("{# open comment").message(), ContainsSubstring("comment"));
  CHECK_THAT(error_of("{% break %}").message(), ContainsSubstring("outside of a loop"));
  CHECK_THAT(error_of("{% include 'x' %}").message(), ContainsSubstring("not supported"));
  CHECK_THAT(error_of("bad \xff byte").message(), ContainsSubstring("not valid UTF-8"));
}

TEST_CASE("render errors name the line of the failing expression", "[unit]") {
  const auto e = error_of("{% for m in messages %}\n{{ m.content.upper() }}\n{% endfor %}",
                          {{"messages", {{{"role", "user"}}}}});
  CHECK(e.line() == 2);
  CHECK_THAT(e.message(), ContainsSubstring("'dict object' has no attribute 'content'"));
  CHECK(!e.raised_by_template());

  CHECK_THAT(error_of("{{ 'a' + 1 }}").message(), ContainsSubstring("can only concatenate str"));
  CHECK_THAT(error_of("{{ 1 / 0 }}").message(), ContainsSubstring("division by zero"));
  CHECK_THAT(error_of("{{ 'a' < 1 }}").message(), ContainsSubstring("not supported between"));
  CHECK_THAT(error_of("{{ [1].append(2) }}").message(), ContainsSubstring("unsafe"));
  CHECK_THAT(error_of("{{ undefined_fn() }}").message(), ContainsSubstring("'undefined_fn' is undefined"));
  CHECK_THAT(error_of("{% set ns = namespace() %}{% set ns._x = 1 %}").message(), ContainsSubstring("underscore"));
}

TEST_CASE("raise_exception is reported as the template's own error with its line", "[unit]") {
  const auto e = error_of("{% if not messages %}\n  {{- raise_exception('No messages provided.') }}\n{% endif %}",
                          {{"messages", json::array()}});
  CHECK(e.raised_by_template());
  CHECK(e.message() == "No messages provided.");
  CHECK(e.line() == 2);
  CHECK(std::string(e.what()) == "chat template line 2: No messages provided.");
}

TEST_CASE("deep nesting is refused before it can overflow the stack", "[unit]") {
  CHECK_THAT(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").message(),
             ContainsSubstring("nest"));
  CHECK_THAT(error_of("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}").message(), ContainsSubstring("nest"));
  CHECK_THAT(error_of("{{ " + std::string(3000, '-') + "1 }}").message(), ContainsSubstring("nest"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  CHECK_THAT(error_of(chain + " }}").message(), ContainsSubstring("nested"));
  std::string attrs = "{{ x";
  for (int i = 0; i < 5000; ++i) attrs += ".a";
  CHECK_THAT(error_of(attrs + " }}").message(), ContainsSubstring("nested"));
  std::string blocks;
  for (int i = 0; i < 3000; ++i) blocks += "{% if true %}";
  CHECK_THAT(error_of(blocks).message(), ContainsSubstring("nest"));
  // Values nested at render time are bounded too.
  CHECK_THAT(error_of("{% set ns = namespace(v=[]) %}{% for i in range(2000) %}{% set ns.v = [ns.v] %}{% endfor %}").message(),
             ContainsSubstring("nested"));
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) deep = json::array({deep});
  CHECK_THAT(error_of("{{ x }}", {{"x", deep}}).message(), ContainsSubstring("nested"));
}

TEST_CASE("runaway loops, recursion and huge outputs hit limits", "[unit]") {
  RenderLimits limits;
  limits.max_steps = 100000;
  limits.max_output_bytes = 1 << 20;
  CHECK_THAT(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", json::object(), limits).message(),
             ContainsSubstring("steps"));
  CHECK_THAT(error_of("{{ range(1000000)|length }}").message(), ContainsSubstring("Range too big"));
  CHECK_THAT(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").message(), ContainsSubstring("nested more than"));
  CHECK_THAT(error_of("{{ 'x' * 100000000000 }}", json::object(), limits).message(), ContainsSubstring("exceed"));
  CHECK_THAT(error_of("{% for i in range(50000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}", json::object(), limits).message(),
             ContainsSubstring("exceed"));
  CHECK_THAT(error_of("{{ 9223372036854775807 + 1 }}").message(), ContainsSubstring("integer overflow"));
  // A limit is per render: the same template renders fine afterwards.
  const auto t = ChatTemplate::parse("{% for i in range(n) %}.{% endfor %}");
  CHECK_THROWS_AS(t.render({{"n", 100000}}, limits), TemplateError);
  CHECK(t.render({{"n", 3}}, limits) == "...");
}

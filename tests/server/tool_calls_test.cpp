// Tool-call parsing for the Qwen3.5 XML and Qwen3 JSON formats: typed arguments, streaming deltas whose
// concatenation equals the final arguments, parallel calls, and malformed output degrading to content.
#include <catch2/catch_test_macros.hpp>

#include <map>
#include <string>

#include "chat/tool_calls.h"

using namespace voltserve::chat;
using Json = nlohmann::ordered_json;

namespace {

std::vector<ToolSchema> tools() {
  return {{"get_weather", Json::parse(R"({"type":"object","properties":{
            "city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},
            "ratio":{"type":"number"},"opts":{"type":"object"},"tags":{"type":"array"},
            "note":{"anyOf":[{"type":"string"},{"type":"null"}]},"zip":{"type":"string"}}})")},
          {"noop", nullptr}};
}

struct Streamed {
  std::string content;
  std::map<int, std::string> args, names, ids;
  int header_count = 0;
};

Streamed stream(ToolCallParser& p, const std::string& text, size_t step) {
  Streamed s;
  auto take = [&](const ToolParseDelta& d) {
    s.content += d.content;
    std::map<int, int> seen;
    for (const auto& c : d.calls) {
      CHECK(++seen[c.index] == 1);  // at most one entry per index per delta
      if (!c.name.empty()) {
        ++s.header_count;
        s.names[c.index] += c.name;
        s.ids[c.index] += c.id;
      }
      s.args[c.index] += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) take(p.push(text.substr(i, step)));
  take(p.finish());
  return s;
}

const char* kXml =
    "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=ratio>\n0.5\n"
    "</parameter>\n<parameter=opts>\n{'a': True, 'b': None}\n</parameter>\n<parameter=tags>\n[1, 2]\n</parameter>\n"
    "<parameter=note>\nnull\n</parameter>\n<parameter=zip>\n00123\n</parameter>\n</function>\n</tool_call>\n"
    "<tool_call>\n<function=noop>\n</function>\n</tool_call>";

}  // namespace

TEST_CASE("XML calls: typed arguments, parallel calls, any chunking", "[unit]") {
  for (size_t step : {1, 2, 7, 1000}) {
    ToolCallParser p(tools());
    Streamed s = stream(p, kXml, step);
    REQUIRE(p.calls().size() == 2);
    CHECK(s.content == "Let me check.\n");
    CHECK(s.header_count == 2);
    CHECK(s.names[0] == "get_weather");
    CHECK(s.names[1] == "noop");
    CHECK(s.ids[0].rfind("call_", 0) == 0);
    CHECK(s.ids[0].size() == 29);
    CHECK(s.args[0] == p.calls()[0].arguments);
    CHECK(s.args[1] == "{}");
    Json args = Json::parse(p.calls()[0].arguments);
    CHECK(args["city"] == "Paris");
    CHECK(args["days"] == 3);
    CHECK(args["metric"] == true);
    CHECK(args["ratio"] == 0.5);
    CHECK(args["opts"]["a"] == true);
    CHECK(args["opts"]["b"].is_null());
    CHECK(args["tags"] == Json::array({1, 2}));
    CHECK(args["note"].is_null());
    CHECK(args["zip"] == "00123");  // string by schema, not a number
    CHECK(p.calls()[0].arguments.find("\"city\": \"Paris\"") != std::string::npos);
  }
}

TEST_CASE("JSON (Qwen3/Hermes) calls", "[unit]") {
  for (size_t step : {1, 3, 1000}) {
    ToolCallParser p(tools());
    Streamed s = stream(p,
                        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
                        "</tool_call>\n<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>",
                        step);
    REQUIRE(p.calls().size() == 2);
    CHECK(s.content.empty());
    CHECK(Json::parse(p.calls()[0].arguments)["days"] == 3);
    CHECK(s.args[0] == p.calls()[0].arguments);
    CHECK(p.calls()[1].name == "noop");
  }
}

TEST_CASE("a call value that was never closed is recovered at the end", "[unit]") {
  ToolCallParser p(tools());
  Streamed s = stream(p, "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome", 4);
  REQUIRE(p.calls().size() == 1);
  CHECK(Json::parse(p.calls()[0].arguments)["city"] == "Rome");
  CHECK(s.args[0] == p.calls()[0].arguments);
}

TEST_CASE("malformed output degrades to content", "[unit]") {
  for (const char* text : {"<tool_call>not a call</tool_call> tail", "<tool_call>\n{\"broken\": json</tool_call>",
                           "a <tool_ca", "<tool_call>\n<function=", "<tool_call>"}) {
    for (size_t step : {1, 100}) {
      ToolCallParser p(tools());
      Streamed s = stream(p, text, step);
      CHECK(p.calls().empty());
      CHECK(s.content == text);
    }
  }
}

TEST_CASE("text that only looks like a tag prefix is released", "[unit]") {
  ToolCallParser p(tools());
  auto d = p.push("x <tool");
  CHECK(d.content == "x ");
  d = p.push("box>");
  CHECK(d.content == "<toolbox>");
}

TEST_CASE("parameter conversion by schema", "[unit]") {
  Json integer = {{"type", "integer"}};
  CHECK(convert_parameter_value("42", &integer) == 42);
  CHECK(convert_parameter_value("4.0", &integer) == 4);
  CHECK(convert_parameter_value("abc", &integer) == "abc");
  Json number = {{"type", "number"}};
  CHECK(convert_parameter_value("2.5", &number) == 2.5);
  CHECK(convert_parameter_value("1e999", &number) == "1e999");
  Json boolean = {{"type", "boolean"}};
  CHECK(convert_parameter_value("False", &boolean) == false);
  CHECK(convert_parameter_value("maybe", &boolean) == "maybe");
  CHECK(convert_parameter_value("12", nullptr) == "12");
  Json nullable = {{"type", Json::array({"integer", "null"})}};
  CHECK(convert_parameter_value("None", &nullable).is_null());
}

// The chat text pipeline on real token ids (the tiny-chat fixture's tokenizer): reasoning, tool calls and stop
// strings survive any token split, and what is emitted equals what is accumulated.
#include <catch2/catch_test_macros.hpp>

#include <filesystem>

#include "http/chat_pipeline.h"

using namespace voltserve;
using namespace voltserve::http;
using Json = nlohmann::ordered_json;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::load(std::filesystem::path(VOLTSERVE_SOURCE_DIR) / "tests/fixtures/models/tiny-chat");
    REQUIRE(t.is_ok());
    return std::move(t).value();
  }();
  return tok;
}

struct Collected {
  std::string reasoning, content, args;
  int headers = 0;
  bool stopped = false;
};

Collected run(ChatPipelineConfig cfg, const std::string& text) {
  auto ids = tokenizer().encode(text);
  REQUIRE(ids.is_ok());
  ChatPipeline p(tokenizer(), std::move(cfg));
  Collected c;
  auto take = [&](const ChatDelta& d) {
    c.reasoning += d.reasoning;
    c.content += d.content;
    for (const auto& t : d.tool_calls) {
      if (!t.id.empty()) ++c.headers;
      c.args += t.arguments;
    }
  };
  for (int32_t id : *ids) {
    take(p.push({id}));
    if (p.stopped()) break;
  }
  c.stopped = p.stopped();
  take(p.finish());
  CHECK(c.reasoning == p.reasoning());
  CHECK(c.content == p.content());
  return c;
}

}  // namespace

TEST_CASE("reasoning then content on real tokens", "[unit]") {
  ChatPipelineConfig cfg;
  cfg.started_in_reasoning = true;
  Collected c = run(cfg, "Let me think about it.\n</think>\n\nThe answer is 42.");
  CHECK(c.reasoning == "Let me think about it.\n");
  CHECK(c.content == "The answer is 42.");
}

TEST_CASE("tool call on real tokens", "[unit]") {
  ChatPipelineConfig cfg;
  cfg.parse_tools = true;
  cfg.tools = {{"get_weather", Json::parse(R"({"type":"object","properties":{"days":{"type":"integer"}}})")}};
  Collected c = run(cfg, "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n"
                         "</function>\n</tool_call>");
  CHECK(c.content == "Checking.\n");
  CHECK(c.headers == 1);
  CHECK(c.args == "{\"days\": 3}");
}

TEST_CASE("primed tool call (named tool_choice)", "[unit]") {
  ChatPipelineConfig cfg;
  cfg.parse_tools = true;
  cfg.tools = {{"f", nullptr}};
  cfg.primed_text = "<tool_call>\n<function=f>\n";
  Collected c = run(cfg, "</function>\n</tool_call>");
  CHECK(c.headers == 1);
  CHECK(c.args == "{}");
  CHECK(c.content.empty());
}

TEST_CASE("stop string across tokens is cut and never emitted", "[unit]") {
  ChatPipelineConfig cfg;
  cfg.stop = {"quick brown"};
  Collected c = run(cfg, "The quick brown fox jumps");
  CHECK(c.stopped);
  CHECK(c.content == "The ");
}

// MessagesWriter: content blocks and content_block_start / _delta / _stop events with consecutive indices; the
// concatenated deltas equal each block's final text or input.
#include <catch2/catch_test_macros.hpp>

#include "openai/messages_output.h"

using namespace voltserve::openai;

TEST_CASE("messages writer: thinking, text and tool_use blocks", "[unit]") {
  MessagesWriter w;
  Json ev = Json::array();
  w.thinking("hm", ev);
  w.thinking("m", ev);
  w.text("ok", ev);
  w.tool_use(0, "call_1", "w", "", ev);
  w.tool_use(0, "", "", "{\"city\": ", ev);
  w.text(" \n", ev);
  w.tool_use(0, "", "", "\"P\"}", ev);
  w.tool_use(1, "call_2", "v", "{}", ev);
  w.finish(ev);
  std::vector<std::pair<std::string, int>> seen;
  for (const Json& e : ev) seen.emplace_back(e["event"].get<std::string>(), e["data"]["index"].get<int>());
  CHECK(seen == std::vector<std::pair<std::string, int>>{
      {"content_block_start", 0}, {"content_block_delta", 0}, {"content_block_delta", 0}, {"content_block_stop", 0},
      {"content_block_start", 1}, {"content_block_delta", 1}, {"content_block_stop", 1},
      {"content_block_start", 2}, {"content_block_delta", 2}, {"content_block_delta", 2}, {"content_block_stop", 2},
      {"content_block_start", 3}, {"content_block_delta", 3}, {"content_block_stop", 3}});
  for (const Json& e : ev) CHECK(e["data"]["type"] == e["event"]);
  CHECK(ev[1]["data"]["delta"] == Json({{"type", "thinking_delta"}, {"thinking", "hm"}}));
  CHECK(ev[8]["data"]["delta"]["type"] == "input_json_delta");
  const Json& c = w.content();
  REQUIRE(c.size() == 4);
  CHECK(c[0] == Json({{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}}));
  CHECK(c[1] == Json({{"type", "text"}, {"text", "ok"}}));
  CHECK(c[2]["id"] == "toolu_1");
  CHECK(c[2]["input"] == Json({{"city", "P"}}));
  CHECK(c[3]["input"] == Json::object());
  CHECK(w.has_tool_use());
}

TEST_CASE("messages writer: the message object", "[unit]") {
  Json m = anthropic_message("msg_1", "m", Json::array(), "end_turn", nullptr, anthropic_usage(3, 4));
  CHECK(m["type"] == "message");
  CHECK(m["role"] == "assistant");
  CHECK(m["usage"]["input_tokens"] == 3);
  CHECK(m["usage"]["output_tokens"] == 4);
  CHECK(m["stop_sequence"].is_null());
}

TEST_CASE("messages usage: input_tokens are the uncached rest, cache_read_input_tokens the cached part", "[unit]") {
  Json u = anthropic_usage(100, 7, 60);
  CHECK(u["input_tokens"] == 40);
  CHECK(u["cache_read_input_tokens"] == 60);
  CHECK(u["cache_creation_input_tokens"] == 0);
  CHECK(u["output_tokens"] == 7);
  CHECK(anthropic_usage(10, 1, 25)["input_tokens"] == 0);  // never more cached than the prompt
  CHECK(anthropic_usage(10, 1, 25)["cache_read_input_tokens"] == 10);
  CHECK(anthropic_usage(10, 1)["input_tokens"] == 10);
}

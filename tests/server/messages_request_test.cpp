// /v1/messages validation and translation: content blocks become the chat messages the template renders
// (tool_use -> assistant tool calls, tool_result -> tool messages, thinking -> reasoning_content), tools and
// tool_choice map to the chat forms, thinking maps to enable_thinking and a budget, and every bad field is a 4xx
// whose param / message names the Anthropic field.
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/messages_request.h"

using namespace voltserve::openai;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_names = {"tiny-chat"};
  l.vocab_size = 1000;
  l.context_length = 512;
  return l;
}

MessagesRequest parse(const std::string& json, bool count = false) {
  return parse_messages_request(Json::parse(json), limits(), count);
}

std::string body(const std::string& extra) {
  return R"({"model": "tiny-chat", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}])" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

const Json& messages(const MessagesRequest& r) { return r.chat.template_body["messages"]; }

}  // namespace

TEST_CASE("messages: system, text and defaults", "[unit]") {
  MessagesRequest r = parse(body(R"("system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}])"));
  REQUIRE(messages(r).size() == 2);
  CHECK(messages(r)[0]["role"] == "system");
  CHECK(messages(r)[0]["content"] == "a\nb");
  CHECK(r.chat.options.max_tokens == 8);
  CHECK(r.chat.enable_thinking == false);  // Anthropic: no thinking unless asked
  CHECK(r.chat.tool_choice == ToolChoice::kNone);
}

TEST_CASE("messages: tool_use, tool_result and thinking blocks", "[unit]") {
  MessagesRequest r = parse(R"({"model": "tiny-chat", "max_tokens": 8, "messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
      {"type": "text", "text": "let me check"}, {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {"city": "P"}},
      {"type": "redacted_thinking", "data": "xx"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sun"}]},
      {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no", "is_error": true},
      {"type": "text", "text": "thanks"}]}],
    "tools": [{"name": "w", "description": "d", "input_schema": {"type": "object"}}]})");
  const Json& m = messages(r);
  REQUIRE(m.size() == 5);
  CHECK(m[1]["content"] == "let me check");
  CHECK(m[1]["reasoning_content"] == "hm");
  CHECK(m[1]["tool_calls"][0]["function"]["arguments"] == Json({{"city", "P"}}));
  CHECK(m[2]["role"] == "tool");
  CHECK(m[2]["tool_call_id"] == "toolu_1");
  CHECK(m[2]["content"] == "sun");
  CHECK(m[3]["content"] == "Error: no");
  CHECK(m[4]["role"] == "user");
  CHECK(m[4]["content"] == "thanks");
  CHECK(r.chat.tools.size() == 1);
  CHECK(r.chat.tool_choice == ToolChoice::kAuto);
}

TEST_CASE("messages: tool_choice auto / any / tool / none", "[unit]") {
  const std::string tools = R"("tools": [{"name": "w", "input_schema": {"type": "object"}}])";
  CHECK(parse(body(tools + R"(, "tool_choice": {"type": "any"})")).chat.tool_choice == ToolChoice::kRequired);
  MessagesRequest named = parse(body(tools + R"(, "tool_choice": {"type": "tool", "name": "w", "disable_parallel_tool_use": true})"));
  CHECK(named.chat.tool_choice == ToolChoice::kNamed);
  CHECK(named.chat.tool_choice_name == "w");
  CHECK_FALSE(named.chat.parallel_tool_calls);
  CHECK(parse(body(tools + R"(, "tool_choice": {"type": "none"})")).chat.tool_choice == ToolChoice::kNone);
  CHECK(parse(body(R"("tool_choice": {"type": "none"})")).chat.tool_choice == ToolChoice::kNone);
}

TEST_CASE("messages: thinking maps to enable_thinking and the budget", "[unit]") {
  MessagesRequest on = parse(body(R"("thinking": {"type": "enabled", "budget_tokens": 1024})"));
  CHECK(on.chat.enable_thinking == true);
  CHECK(on.chat.reasoning_budget == 1024);
  MessagesRequest adaptive = parse(body(R"("thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"})"));
  CHECK(adaptive.chat.enable_thinking == true);
  CHECK(adaptive.chat.reasoning_budget == 4096);
  CHECK(adaptive.chat.template_body["reasoning_effort"] == "medium");
  CHECK_FALSE(parse(body(R"("thinking": {"type": "adaptive"})")).chat.reasoning_budget.has_value());
  CHECK(parse(body(R"("thinking": {"type": "disabled"})")).chat.enable_thinking == false);
  CHECK_FALSE(parse(body(R"("thinking": {"type": "enabled", "budget_tokens": 5, "display": "omitted"})")).chat.include_reasoning);
}

TEST_CASE("messages: sampling fields and stop sequences", "[unit]") {
  MessagesRequest r = parse(body(R"("temperature": 0.5, "top_p": 0.9, "top_k": 20, "stop_sequences": ["a", "b", "c", "d", "e"],
    "metadata": {"user_id": "u"}, "stream": true)"));
  CHECK(r.chat.options.sampling.temperature == 0.5f);
  CHECK(r.chat.options.sampling.top_k == 20);
  CHECK(r.chat.options.stop.size() == 5);  // more than OpenAI's 4
  CHECK(r.chat.options.stream);
  MessagesRequest count = parse(R"({"model": "tiny-chat", "messages": [{"role": "user", "content": "hi"}]})", true);
  CHECK_FALSE(count.chat.options.max_tokens.has_value());
}

TEST_CASE("messages: every bad field is a 4xx naming it", "[unit]") {
  auto bad = [](const std::string& json, int status, const char* param) { CHECK_API_ERROR(parse(json), status, param); };
  bad(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})", 400, "model");
  bad(R"({"model": "tiny-chat", "messages": [{"role": "user", "content": "hi"}]})", 400, "max_tokens");
  bad(R"({"model": "tiny-chat", "max_tokens": 8})", 400, "messages");
  bad(R"({"model": "tiny-chat", "max_tokens": 8, "messages": []})", 400, "messages");
  bad(R"({"model": "tiny-chat", "max_tokens": 8, "messages": [{"role": "system", "content": "x"}]})", 400, "messages[0].role");
  bad(R"({"model": "tiny-chat", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image"}]}]})", 400,
      "messages[0].content[0]");
  bad(R"({"model": "tiny-chat", "max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}]})",
      400, "messages[0].content[0].type");
  bad(R"({"model": "tiny-chat", "max_tokens": 8, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})",
      400, "messages[1]");
  bad(body(R"("tools": [{"name": "f"}])"), 400, "tools[0].input_schema");
  bad(body(R"("tools": [{"type": "web_search_20250305", "name": "web_search"}])"), 400, "tools[0].type");
  bad(body(R"("tools": [{"name": "a b", "input_schema": {}}])"), 400, "tools[0].name");
  bad(body(R"("tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "g"})"), 400,
      "tool_choice.name");
  bad(body(R"("thinking": {"type": "enabled"})"), 400, "thinking.budget_tokens");
  bad(body(R"("thinking": {"type": "enabled", "budget_tokens": 0})"), 400, "thinking.budget_tokens");
  bad(body(R"("temperature": 1.5)"), 400, "temperature");
  bad(body(R"("stop_sequences": [1])"), 400, "stop_sequences[0]");
  bad(body(R"("output_config": {"format": {"type": "json_schema"}})"), 400, "output_config.format");
  bad(R"({"model": "claude-9", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]})", 404, "model");
  bad(R"({"model": "tiny-chat", "max_tokens": 100000000, "messages": [{"role": "user", "content": "hi"}]})", 400, "max_tokens");
}

TEST_CASE("messages: max_tokens may exceed the context (the handler clamps it)", "[unit]") {
  MessagesRequest r = parse(R"({"model": "tiny-chat", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}]})");
  CHECK(r.chat.options.max_tokens == 32000);
}

TEST_CASE("messages: tool_use ids", "[unit]") {
  CHECK(tool_use_id("call_0123abcd") == "toolu_0123abcd");
  CHECK(tool_use_id("other") == "other");
}

TEST_CASE("messages: the prefix-cache extensions reach the chat request", "[unit]") {
  MessagesRequest r = parse(body(R"("prefix_cache": false, "cache_salt": "s1")"));
  CHECK_FALSE(r.chat.options.prefix_cache);
  CHECK(r.chat.options.cache_salt == "s1");
  CHECK(parse(body("")).chat.options.prefix_cache);
}

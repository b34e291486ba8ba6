// /v1/responses validation and translation: input items become the chat messages the template renders (tool calls
// and reasoning joined to their assistant turn), tools and tool_choice map to the chat forms, reasoning effort maps to
// the thinking controls and budget, and every bad field is a 400 naming the Responses field.
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/responses_request.h"

using namespace voltserve::openai;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_names = {"tiny-chat"};
  l.vocab_size = 1000;
  l.context_length = 512;
  return l;
}

ResponsesRequest parse(const char* json, const Json* previous = nullptr) {
  return parse_responses_request(Json::parse(json), limits(), previous);
}

const Json& messages(const ResponsesRequest& r) { return r.chat.template_body["messages"]; }

}  // namespace

TEST_CASE("responses: a string input is one user message, instructions a system message", "[unit]") {
  ResponsesRequest r = parse(R"({"input": "hi", "instructions": "be brief", "max_output_tokens": 7})");
  REQUIRE(messages(r).size() == 2);
  CHECK(messages(r)[0]["role"] == "system");
  CHECK(messages(r)[0]["content"] == "be brief");
  CHECK(messages(r)[1]["role"] == "user");
  CHECK(messages(r)[1]["content"] == "hi");
  CHECK(r.chat.options.max_tokens == 7);
  CHECK(r.chat.options.max_tokens_param == "max_output_tokens");
  CHECK(r.store);
  CHECK(r.input_messages.size() == 1);  // the instructions are not carried into the stored conversation
  CHECK(r.echo["instructions"] == "be brief");
  CHECK(r.echo["tool_choice"] == "none");
}

TEST_CASE("responses: items map to chat messages in order", "[unit]") {
  ResponsesRequest r = parse(R"({"input": [
    {"role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "calling", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"x\": 1}"},
    {"type": "custom_tool_call", "call_id": "call_2", "name": "patch", "input": "*** Begin"},
    {"type": "function_call_output", "call_id": "call_1", "output": "one"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "ok"}]}
  ]})");
  const Json& m = messages(r);
  REQUIRE(m.size() == 5);
  CHECK(m[0]["role"] == "system");
  CHECK(m[0]["content"] == "rules");
  CHECK(m[1]["content"] == "a\nb");
  CHECK(m[2]["role"] == "assistant");
  CHECK(m[2]["content"] == "calling");
  CHECK(m[2]["reasoning_content"] == "think");
  REQUIRE(m[2]["tool_calls"].size() == 2);
  CHECK(m[2]["tool_calls"][0]["id"] == "call_1");
  CHECK(m[2]["tool_calls"][0]["function"]["arguments"] == Json({{"x", 1}}));
  CHECK(m[2]["tool_calls"][1]["function"]["arguments"] == Json({{"input", "*** Begin"}}));
  CHECK(m[3]["role"] == "tool");
  CHECK(m[3]["tool_call_id"] == "call_1");
  CHECK(m[3]["content"] == "one");
  CHECK(m[4]["content"] == "ok");
}

TEST_CASE("responses: reasoning with no answer after it is its own assistant turn", "[unit]") {
  ResponsesRequest r = parse(R"({"input": [{"role": "user", "content": "a"},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}]}, {"role": "user", "content": "b"}]})");
  REQUIRE(messages(r).size() == 3);
  CHECK(messages(r)[1]["role"] == "assistant");
  CHECK(messages(r)[1]["content"] == "");
  CHECK(messages(r)[1]["reasoning_content"] == "s");
}

TEST_CASE("responses: previous conversation goes before the input, after the instructions", "[unit]") {
  Json previous = Json::parse(R"([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])");
  ResponsesRequest r = parse(R"({"input": "three", "instructions": "sys", "previous_response_id": "resp_1"})", &previous);
  REQUIRE(messages(r).size() == 4);
  CHECK(messages(r)[0]["role"] == "system");
  CHECK(messages(r)[2]["content"] == "two");
  CHECK(messages(r)[3]["content"] == "three");
  CHECK(r.previous_response_id == "resp_1");
  CHECK(r.input_messages.size() == 1);
}

TEST_CASE("responses: function and custom tools become chat function tools", "[unit]") {
  ResponsesRequest r = parse(R"({"input": "x", "tools": [
    {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true},
    {"type": "custom", "name": "patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}],
    "tool_choice": {"type": "custom", "name": "patch"}})");
  REQUIRE(r.chat.tools.size() == 2);
  CHECK(r.chat.tools[0].name == "f");
  CHECK(r.chat.tools[1].parameters["required"] == Json::array({"input"}));
  CHECK(r.chat.tools[1].parameters["properties"]["input"]["description"].get<std::string>().find("start: /.+/") !=
        std::string::npos);
  CHECK(r.custom_tools == std::set<std::string>{"patch"});
  CHECK(r.chat.tool_choice == ToolChoice::kNamed);
  CHECK(r.chat.tool_choice_name == "patch");
  CHECK(r.echo["tools"].size() == 2);
}

TEST_CASE("responses: allowed_tools narrows the tools the model sees", "[unit]") {
  ResponsesRequest r = parse(R"({"input": "x", "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"}],
    "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "b"}]}})");
  REQUIRE(r.chat.tools.size() == 1);
  CHECK(r.chat.tools[0].name == "b");
  CHECK(r.chat.tool_choice == ToolChoice::kRequired);
}

TEST_CASE("responses: reasoning effort maps to thinking controls and a budget", "[unit]") {
  ResponsesRequest none = parse(R"({"input": "x", "reasoning": {"effort": "none"}})");
  CHECK(none.chat.enable_thinking == false);
  CHECK_FALSE(none.chat.reasoning_budget.has_value());
  ResponsesRequest minimal = parse(R"({"input": "x", "reasoning": {"effort": "minimal", "summary": "auto"}})");
  CHECK(minimal.chat.reasoning_budget == 256);
  CHECK(minimal.chat.template_body["reasoning_effort"] == "low");
  CHECK(parse(R"({"input": "x", "reasoning": {"effort": "medium"}})").chat.reasoning_budget == 4096);
  CHECK(parse(R"({"input": "x", "reasoning": {"effort": "high"}})").chat.template_body["reasoning_effort"] == "xhigh");
  ResponsesRequest xhigh = parse(R"({"input": "x", "reasoning": {"effort": "xhigh"}})");
  CHECK_FALSE(xhigh.chat.reasoning_budget.has_value());
  CHECK(parse(R"({"input": "x"})").chat.enable_thinking == std::nullopt);  // the template's default
  CHECK(parse(R"({"input": "x", "reasoning": {"effort": "low"}, "thinking_token_budget": 9})").chat.reasoning_budget == 9);
}

TEST_CASE("responses: accepted and ignored fields", "[unit]") {
  ResponsesRequest r = parse(R"({"input": "x", "store": false, "include": ["reasoning.encrypted_content"],
    "truncation": "auto", "metadata": {"k": "v"}, "user": "u", "service_tier": "auto", "prompt_cache_key": "p",
    "text": {"format": {"type": "text"}, "verbosity": "low"}, "parallel_tool_calls": false, "top_logprobs": 0,
    "stream_options": {"include_obfuscation": false}})");
  CHECK_FALSE(r.store);
  CHECK_FALSE(r.chat.parallel_tool_calls);
  CHECK(r.echo["metadata"]["k"] == "v");
  CHECK(r.echo["text"]["verbosity"] == "low");
}

TEST_CASE("responses: every bad field is a 4xx naming it", "[unit]") {
  auto bad = [](const char* json, int status, const char* param) {
    CHECK_API_ERROR(parse(json), status, param);
  };
  bad(R"({"max_output_tokens": 4})", 400, "input");
  bad(R"({"input": 5})", 400, "input");
  bad(R"({"input": []})", 400, "input");
  bad(R"({"input": [{"type": "web_search_call"}]})", 400, "input[0].type");
  bad(R"({"input": [{"type": "nonsense"}]})", 400, "input[0].type");
  bad(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})", 400, "input[0].content[0]");
  bad(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{x"}]})", 400, "input[0].arguments");
  bad(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", 400, "input[0].output");
  bad(R"({"input": "x", "tools": [{"type": "web_search_preview"}]})", 400, "tools[0].type");
  bad(R"({"input": "x", "tools": [{"type": "function", "name": "a b"}]})", 400, "tools[0].name");
  bad(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})",
      400, "tool_choice.name");
  bad(R"({"input": "x", "max_output_tokens": 0})", 400, "max_output_tokens");
  bad(R"({"input": "x", "max_output_tokens": 100000})", 400, "max_output_tokens");
  bad(R"({"input": "x", "reasoning": {"effort": "extreme"}})", 400, "reasoning.effort");
  bad(R"({"input": "x", "text": {"format": {"type": "json_schema"}}})", 400, "text.format.schema");
  bad(R"({"input": "x", "metadata": {"k": 1}})", 400, "metadata.k");
  bad(R"({"input": "x", "background": true})", 400, "background");
  bad(R"({"input": "x", "previous_response_id": 3})", 400, "previous_response_id");
  bad(R"({"input": "x", "temperature": 9})", 400, "temperature");
  bad(R"({"input": "x", "model": "gpt-9"})", 404, "model");
}

TEST_CASE("responses: the prefix-cache extensions reach the chat request", "[unit]") {
  ResponsesRequest r = parse(R"({"input": "hi", "prefix_cache": false, "cache_salt": "s1"})");
  CHECK_FALSE(r.chat.options.prefix_cache);
  CHECK(r.chat.options.cache_salt == "s1");
  CHECK(parse(R"({"input": "hi"})").chat.options.prefix_cache);
}

// /v1/chat/completions validation: accepted shapes normalise for the template; every bad field is a 400 naming it.
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/chat_request.h"

using namespace voltserve::openai;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_names = {"tiny-chat"};
  l.vocab_size = 1000;
  l.context_length = 512;
  l.max_n = 4;
  return l;
}

Json base() { return Json::parse(R"({"model":"tiny-chat","messages":[{"role":"user","content":"hi"}]})"); }

ChatRequest parse_with(const char* key, Json value) {
  Json b = base();
  b[key] = std::move(value);
  return parse_chat_request(b, limits());
}

const Json kTools = Json::parse(R"([{"type":"function","function":{"name":"get_weather",
  "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");

}  // namespace

TEST_CASE("a minimal chat request parses with defaults", "[unit]") {
  ChatRequest r = parse_chat_request(base(), limits());
  CHECK(r.options.model == "tiny-chat");
  CHECK(r.options.n == 1);
  CHECK_FALSE(r.options.stream);
  CHECK_FALSE(r.options.max_tokens.has_value());
  CHECK(r.tool_choice == ToolChoice::kNone);
  CHECK(r.template_body["messages"][0]["content"] == "hi");
}

TEST_CASE("sampling fields reach SamplingParams", "[unit]") {
  Json b = base();
  b["temperature"] = 0;
  b["top_p"] = 0.9;
  b["top_k"] = 20;
  b["min_p"] = 0.05;
  b["presence_penalty"] = 1.5;
  b["frequency_penalty"] = -0.5;
  b["repetition_penalty"] = 1.1;
  b["seed"] = 42;
  b["logit_bias"] = {{"17", 5}, {"3", -100}};
  b["max_tokens"] = 10;
  b["max_completion_tokens"] = 20;
  b["stop"] = "END";
  b["logprobs"] = true;
  b["top_logprobs"] = 3;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}, {"include_obfuscation", false}};
  b["store"] = true;
  b["metadata"] = {{"k", "v"}};
  b["service_tier"] = "auto";
  b["user"] = "u";
  b["some_vendor_field"] = {1, 2};
  ChatRequest r = parse_chat_request(b, limits());
  CHECK(r.options.sampling.is_greedy());
  CHECK(r.options.sampling.top_p == 0.9f);
  CHECK(r.options.sampling.top_k == 20);
  CHECK(r.options.sampling.presence_penalty == 1.5f);
  CHECK(r.options.sampling.seed.value() == 42u);
  REQUIRE(r.options.sampling.logit_bias.size() == 2);
  CHECK(r.options.max_tokens.value() == 20);  // max_completion_tokens wins
  CHECK(r.options.max_tokens_param == "max_completion_tokens");
  CHECK(r.options.stop == std::vector<std::string>{"END"});
  CHECK(r.options.top_logprobs == 3);
  CHECK(r.options.include_usage);
}

TEST_CASE("messages normalise for the template", "[unit]") {
  Json b = Json::parse(R"({"messages":[
    {"role":"developer","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
    {"role":"assistant","content":null,"reasoning_content":"hmm",
     "tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"42"}]})");
  ChatRequest r = parse_chat_request(b, limits());
  const Json& m = r.template_body["messages"];
  CHECK(r.options.model == "tiny-chat");
  CHECK(m[0]["role"] == "system");
  CHECK(m[1]["content"] == "a\nb");
  CHECK(m[2]["tool_calls"][0]["function"]["arguments"]["x"] == 1);
  CHECK(m[2]["reasoning_content"] == "hmm");
  CHECK(m[3]["tool_call_id"] == "call_1");
}

TEST_CASE("tools and tool_choice", "[unit]") {
  Json b = base();
  b["tools"] = kTools;
  ChatRequest r = parse_chat_request(b, limits());
  CHECK(r.tool_choice == ToolChoice::kAuto);
  REQUIRE(r.tools.size() == 1);
  CHECK(r.tools[0].name == "get_weather");
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  r = parse_chat_request(b, limits());
  CHECK(r.tool_choice == ToolChoice::kNamed);
  CHECK(r.tool_choice_name == "get_weather");
  b["tool_choice"] = {{"type", "function"}, {"function", {{"name", "missing"}}}};
  CHECK_API_ERROR(parse_chat_request(b, limits()), 400, "tool_choice.function.name");
  b["tool_choice"] = "sometimes";
  CHECK_API_ERROR(parse_chat_request(b, limits()), 400, "tool_choice");
  CHECK_API_ERROR(parse_with("tool_choice", "required"), 400, "tool_choice");
  CHECK_API_ERROR(parse_with("tools", Json::array()), 400, "tools");
  Json dup = kTools;
  dup.push_back(kTools[0]);
  CHECK_API_ERROR(parse_with("tools", dup), 400, "tools[1].function.name");
  Json bad_params = kTools;
  bad_params[0]["function"]["parameters"] = "nope";
  CHECK_API_ERROR(parse_with("tools", bad_params), 400, "tools[0].function.parameters");
  // strict: kept per tool (it decides whether calls under tool_choice auto are constrained), false by default.
  CHECK_FALSE(parse_with("tools", kTools).tools[0].strict);
  Json strict = kTools;
  strict[0]["function"]["strict"] = true;
  CHECK(parse_with("tools", strict).tools[0].strict);
  strict[0]["function"]["strict"] = "yes";
  CHECK_API_ERROR(parse_with("tools", strict), 400, "tools[0].function.strict");
}

TEST_CASE("reasoning controls", "[unit]") {
  ChatRequest r = parse_with("chat_template_kwargs", {{"enable_thinking", false}});
  CHECK(r.enable_thinking.value() == false);
  CHECK_API_ERROR(parse_with("chat_template_kwargs", {{"enable_thinking", "no"}}), 400,
                  "chat_template_kwargs.enable_thinking");
  r = parse_with("reasoning_effort", "none");
  CHECK(r.enable_thinking.value() == false);
  CHECK(r.template_body["chat_template_kwargs"]["enable_thinking"] == false);
  CHECK_API_ERROR(parse_with("reasoning_effort", "extreme"), 400, "reasoning_effort");
}

TEST_CASE("bad requests are 400s naming the field", "[unit]") {
  CHECK_API_ERROR(parse_with("temperature", "hot"), 400, "temperature");
  CHECK_API_ERROR(parse_with("temperature", -1), 400, "temperature");
  CHECK_API_ERROR(parse_with("temperature", 3), 400, "temperature");
  CHECK_API_ERROR(parse_with("top_p", 0), 400, "top_p");
  CHECK_API_ERROR(parse_with("top_p", 1.5), 400, "top_p");
  CHECK_API_ERROR(parse_with("presence_penalty", 5), 400, "presence_penalty");
  CHECK_API_ERROR(parse_with("top_k", -5), 400, "top_k");
  CHECK_API_ERROR(parse_with("min_p", 2), 400, "min_p");
  CHECK_API_ERROR(parse_with("n", 2.7), 400, "n");
  CHECK_API_ERROR(parse_with("n", 1000), 400, "n");
  CHECK_API_ERROR(parse_with("n", 5), 400, "n");
  CHECK_API_ERROR(parse_with("max_tokens", 0), 400, "max_tokens");
  CHECK_API_ERROR(parse_with("max_tokens", "100"), 400, "max_tokens");
  CHECK_API_ERROR(parse_with("max_tokens", 3.5), 400, "max_tokens");
  CHECK_API_ERROR(parse_with("max_tokens", 100000000), 400, "max_tokens");
  CHECK_API_ERROR(parse_with("stream", "yes"), 400, "stream");
  CHECK_API_ERROR(parse_with("stream_options", {{"include_usage", true}}), 400, "stream_options");
  CHECK_API_ERROR(parse_with("top_logprobs", 2), 400, "top_logprobs");
  CHECK_API_ERROR(parse_with("seed", 1e30), 400, "seed");
  CHECK_API_ERROR(parse_with("stop", Json::array({"a", "b", "c", "d", "e"})), 400, "stop");
  CHECK_API_ERROR(parse_with("stop", Json::array({1})), 400, "stop[0]");
  CHECK_API_ERROR(parse_with("stop", ""), 400, "stop");
  CHECK_API_ERROR(parse_with("stop", std::string(1000, 'x')), 400, "stop");
  CHECK_API_ERROR(parse_with("logit_bias", {{"abc", 1}}), 400, "logit_bias");
  CHECK_API_ERROR(parse_with("logit_bias", {{"5000", 1}}), 400, "logit_bias");
  CHECK_API_ERROR(parse_with("logit_bias", {{"5", 500}}), 400, "logit_bias");
  CHECK_API_ERROR(parse_with("response_format", {{"type", "json_schema"}}), 400, "response_format.json_schema");
  CHECK_API_ERROR(parse_with("response_format", {{"type", "xml"}}), 400, "response_format.type");
  CHECK_API_ERROR(parse_with("model", "gpt-9"), 404, "model");
  CHECK_API_ERROR(parse_with("messages", "hello"), 400, "messages");
  CHECK_API_ERROR(parse_with("messages", Json::array()), 400, "messages");
  CHECK_API_ERROR(parse_with("messages", Json::array({{{"role", "wizard"}, {"content", "x"}}})), 400, "messages[0].role");
  CHECK_API_ERROR(parse_with("messages", Json::array({{{"role", "user"}, {"content", 5}}})), 400, "messages[0].content");
  CHECK_API_ERROR(parse_with("messages", Json::array({{{"role", "tool"}, {"content", "x"}}})), 400,
                  "messages[0].tool_call_id");
  CHECK_API_ERROR(parse_with("messages", Json::array({{{"role", "assistant"}}})), 400, "messages[0].content");
  CHECK_API_ERROR(parse_with("messages", Json::parse(R"([{"role":"user","content":[{"type":"image_url",
    "image_url":{"url":"http://x/y.png"}}]}])")), 400, "messages[0].content[0]");
  CHECK_API_ERROR(parse_with("messages", Json::parse(R"([{"role":"assistant","tool_calls":[{"type":"function",
    "function":{"name":"f","arguments":"{not json"}}]}])")), 400, "messages[0].tool_calls[0].function.arguments");
  CHECK_API_ERROR(parse_chat_request(Json::array(), limits()), 400, "");
}

TEST_CASE("context check fills max_tokens and names both numbers", "[unit]") {
  GenerationOptions o;
  check_context(o, 100, 512, "messages");
  CHECK(o.max_tokens.value() == 412);
  GenerationOptions too_long;
  CHECK_API_ERROR(check_context(too_long, 600, 512, "messages"), 400, "messages");
  GenerationOptions big;
  big.max_tokens = 500;
  CHECK_API_ERROR(check_context(big, 100, 512, "messages"), 400, "max_tokens");
}

TEST_CASE("speculative_k: an integer up to the server's limit or \"auto\"; unset keeps the server's", "[unit]") {
  RequestLimits l = limits();
  l.max_speculative_k = 8;
  auto parse = [&](Json v) {
    Json b = base();
    b["speculative_k"] = std::move(v);
    return parse_chat_request(b, l);
  };
  CHECK_FALSE(parse_chat_request(base(), l).options.speculative_k.has_value());
  CHECK(parse(0).options.speculative_k == 0);
  CHECK(parse(8).options.speculative_k == 8);
  CHECK(parse("auto").options.speculative_k == -1);
  CHECK_API_ERROR(parse(9), 400, "speculative_k");
  CHECK_API_ERROR(parse(-1), 400, "speculative_k");
  CHECK_API_ERROR(parse(2.5), 400, "speculative_k");
  CHECK_API_ERROR(parse("fast"), 400, "speculative_k");
  // A server that does not speculate takes 0 and "auto" as plain decoding and refuses a k, naming the field.
  l.max_speculative_k = 0;
  CHECK(parse(0).options.speculative_k == 0);
  CHECK(parse("auto").options.speculative_k == -1);
  CHECK_API_ERROR(parse(1), 400, "speculative_k");
}

TEST_CASE("prefix cache fields: prefix_cache opts out, cache_salt is a non-empty bounded string", "[unit]") {
  ChatRequest r = parse_chat_request(base(), limits());
  CHECK(r.options.prefix_cache);
  CHECK(r.options.cache_salt.empty());
  r = parse_with("prefix_cache", false);
  CHECK_FALSE(r.options.prefix_cache);
  r = parse_with("cache_salt", "tenant-a");
  CHECK(r.options.cache_salt == "tenant-a");
  CHECK_API_ERROR(parse_with("prefix_cache", "no"), 400, "prefix_cache");
  CHECK_API_ERROR(parse_with("cache_salt", ""), 400, "cache_salt");
  CHECK_API_ERROR(parse_with("cache_salt", 7), 400, "cache_salt");
  CHECK_API_ERROR(parse_with("cache_salt", std::string(1025, 'x')), 400, "cache_salt");
  CHECK(parse_with("cache_salt", std::string(1024, 'x')).options.cache_salt.size() == 1024);
}

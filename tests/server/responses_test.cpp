// Response and chunk shapes (OPENAI.md §1.3, §1.4, §2.1) and SSE framing.
#include <catch2/catch_test_macros.hpp>

#include "openai/responses.h"
#include "openai/sse.h"

using namespace voltserve::openai;

namespace {
ResponseMeta meta() { return {"chatcmpl-1", 1767225600, "tiny-chat", "fp_voltserve"}; }
}  // namespace

TEST_CASE("chat chunk shape", "[unit]") {
  Json c = chat_chunk(meta(), 0, {{"role", "assistant"}, {"content", ""}}, nullptr);
  CHECK(c["object"] == "chat.completion.chunk");
  CHECK(c["id"] == "chatcmpl-1");
  CHECK(c["created"] == 1767225600);
  CHECK(c["choices"][0]["index"] == 0);
  CHECK(c["choices"][0]["finish_reason"].is_null());
  CHECK(c["choices"][0]["delta"]["role"] == "assistant");
  CHECK_FALSE(c.contains("usage"));
  Json u = chat_usage_chunk(meta(), {10, 5, 2});
  CHECK(u["choices"].is_array());
  CHECK(u["choices"].empty());
  CHECK(u["usage"]["total_tokens"] == 15);
  CHECK(u["usage"]["completion_tokens_details"]["reasoning_tokens"] == 2);
}

TEST_CASE("non-streaming chat and completion shapes", "[unit]") {
  Json msg = {{"role", "assistant"}, {"content", "Paris."}, {"refusal", nullptr}};
  Json r = chat_completion(meta(), Json::array({chat_choice(0, msg, "stop", nullptr)}), {18, 14, -1});
  CHECK(r["object"] == "chat.completion");
  CHECK(r["choices"][0]["finish_reason"] == "stop");
  CHECK(r["choices"][0]["logprobs"].is_null());
  CHECK(r["usage"]["total_tokens"] == 32);
  CHECK_FALSE(r["usage"].contains("completion_tokens_details"));
  Json c = completion_response(meta(), Json::array({completion_choice(0, "text", "length", nullptr)}), {1, 2, -1});
  CHECK(c["object"] == "text_completion");
  CHECK(c["choices"][0]["text"] == "text");
  Json chunk = completion_chunk(meta(), 1, "t", nullptr);
  CHECK(chunk["object"] == "text_completion");
  CHECK(chunk["choices"][0]["index"] == 1);
}

TEST_CASE("SSE framing is one line per event", "[unit]") {
  Json j = {{"content", "a\nb"}};
  std::string e = sse_data(j);
  CHECK(e.rfind("data: ", 0) == 0);
  CHECK(e.substr(e.size() - 2) == "\n\n");
  CHECK(e.substr(0, e.size() - 2).find('\n') == std::string::npos);
  CHECK(sse_done() == "data: [DONE]\n\n");
  CHECK(sse_comment("ping") == ": ping\n\n");
}

TEST_CASE("logprob entries carry bytes", "[unit]") {
  Json e = chat_logprob_entry("hi", -0.5f, {{"hi", -0.5f}, {"ho", -1.0f}});
  CHECK(e["bytes"] == Json::array({104, 105}));
  CHECK(e["top_logprobs"].size() == 2);
}

TEST_CASE("usage carries the speculative extension object only when drafts were made", "[unit]") {
  Usage u{20, 9, -1};
  CHECK_FALSE(usage_json(u).contains("speculative"));
  u.drafted_tokens = 8;
  u.accepted_tokens = 6;
  u.drafted_per_position = {4, 4};
  u.accepted_per_position = {4, 2};
  Json s = usage_json(u)["speculative"];
  CHECK(s["drafted_tokens"] == 8);
  CHECK(s["accepted_tokens"] == 6);
  CHECK(s["acceptance_rate"].get<double>() == 0.75);
  CHECK(s["drafted_per_position"] == Json::array({4, 4}));
  CHECK(s["accepted_per_position"] == Json::array({4, 2}));
  CHECK(usage_json(u)["total_tokens"] == 29);  // the standard keys are unchanged by it
}

TEST_CASE("usage reports the prefix cache's share in prompt_tokens_details.cached_tokens", "[unit]") {
  Usage u{20, 9, -1};
  CHECK(usage_json(u)["prompt_tokens_details"]["cached_tokens"] == 0);
  u.cached_tokens = 15;
  CHECK(usage_json(u)["prompt_tokens_details"]["cached_tokens"] == 15);
  CHECK(usage_json(u)["prompt_tokens"] == 20);  // cached tokens are part of the prompt, as OpenAI counts them
}

// /v1/completions validation: prompt forms, legacy logprobs, echo/suffix/best_of rejected.
#include <catch2/catch_test_macros.hpp>

#include "api_error_matchers.h"
#include "openai/completion_request.h"

using namespace voltserve::openai;

namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_names = {"tiny-chat"};
  l.vocab_size = 100;
  l.context_length = 256;
  return l;
}

CompletionRequest parse(const char* text) { return parse_completion_request(Json::parse(text), limits()); }

}  // namespace

TEST_CASE("prompt forms", "[unit]") {
  CHECK(parse(R"({"prompt":"hello"})").prompts.at(0).text.value() == "hello");
  auto two = parse(R"({"prompt":["a","b"],"n":2})");
  CHECK(two.prompts.size() == 2);
  CHECK(two.options.n == 2);
  auto ids = parse(R"({"prompt":[1,2,3]})");
  CHECK(ids.prompts.at(0).ids == std::vector<int32_t>{1, 2, 3});
  auto nested = parse(R"({"prompt":[[1],[2,3]]})");
  CHECK(nested.prompts.size() == 2);
  auto lp = parse(R"({"prompt":"x","logprobs":3})");
  CHECK(lp.options.logprobs);
  CHECK(lp.options.top_logprobs == 3);
}

TEST_CASE("completion errors", "[unit]") {
  CHECK_API_ERROR(parse(R"({})"), 400, "prompt");
  CHECK_API_ERROR(parse(R"({"prompt":5})"), 400, "prompt");
  CHECK_API_ERROR(parse(R"({"prompt":""})"), 400, "prompt");
  CHECK_API_ERROR(parse(R"({"prompt":[1,500]})"), 400, "prompt[1]");
  CHECK_API_ERROR(parse(R"({"prompt":[1,-1]})"), 400, "prompt[1]");
  CHECK_API_ERROR(parse(R"({"prompt":"x","echo":true})"), 400, "echo");
  CHECK_API_ERROR(parse(R"({"prompt":"x","suffix":"y"})"), 400, "suffix");
  CHECK_API_ERROR(parse(R"({"prompt":"x","best_of":3})"), 400, "best_of");
  CHECK_API_ERROR(parse(R"({"prompt":"x","logprobs":9})"), 400, "logprobs");
  CHECK_API_ERROR(parse(R"({"prompt":["a","b","c"],"n":3})"), 400, "n");
  CHECK_API_ERROR(parse(R"({"prompt":"x","model":"other"})"), 404, "model");
}

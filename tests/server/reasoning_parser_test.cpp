// Reasoning split: prompt-opened <think>, model-opened <think>, tags split across pushes, no think at all.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "chat/reasoning_parser.h"

using voltserve::chat::prompt_opens_reasoning;
using voltserve::chat::ReasoningParser;

namespace {

struct Split {
  std::string reasoning, content;
};

// Feeds `text` in pieces of `step` bytes.
Split run(ReasoningParser& p, const std::string& text, size_t step) {
  Split s;
  for (size_t i = 0; i < text.size(); i += step) {
    auto d = p.push(text.substr(i, step));
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  auto d = p.finish();
  s.reasoning += d.reasoning;
  s.content += d.content;
  return s;
}

}  // namespace

TEST_CASE("prompt-opened think: output holds only </think>", "[unit]") {
  for (size_t step : {1, 2, 3, 5, 100}) {
    ReasoningParser p(true);
    Split s = run(p, "The user asks.\n</think>\n\nParis.", step);
    CHECK(s.reasoning == "The user asks.\n");
    CHECK(s.content == "Paris.");
  }
}

TEST_CASE("model-opened think (Qwen3 style)", "[unit]") {
  for (size_t step : {1, 4, 100}) {
    ReasoningParser p(false);
    Split s = run(p, "\n<think>\nhmm</think>\n\nanswer", step);
    CHECK(s.reasoning == "\nhmm");
    CHECK(s.content == "answer");
  }
}

TEST_CASE("no think tags: everything is content", "[unit]") {
  ReasoningParser p(false);
  Split s = run(p, "<thin air> plain", 1);
  CHECK(s.reasoning.empty());
  CHECK(s.content == "<thin air> plain");
}

TEST_CASE("truncated inside reasoning: all reasoning, held tag prefix released", "[unit]") {
  ReasoningParser p(true);
  Split s = run(p, "still thinking </thi", 3);
  CHECK(s.reasoning == "still thinking </thi");
  CHECK(s.content.empty());
}

TEST_CASE("a partial </think> is never emitted as reasoning early", "[unit]") {
  ReasoningParser p(true);
  auto d = p.push("abc</th");
  CHECK(d.reasoning == "abc");
  d = p.push("ink>x");
  CHECK(d.reasoning.empty());
  CHECK(d.content == "x");
}

TEST_CASE("<tool_call> implicitly ends reasoning when enabled", "[unit]") {
  ReasoningParser p(true, /*tool_call_ends_reasoning=*/true);
  Split s = run(p, "plan<tool_call>\n<function=f>", 2);
  CHECK(s.reasoning == "plan");
  CHECK(s.content == "<tool_call>\n<function=f>");
}

TEST_CASE("prompt_opens_reasoning", "[unit]") {
  CHECK(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  CHECK_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  CHECK_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

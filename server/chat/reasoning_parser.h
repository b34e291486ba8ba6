// Splits streamed model text into reasoning (between <think> and </think>) and content. Handles the Qwen3.5
// case where the prompt already opened <think> (output holds only </think>) and the Qwen3 case where the model
// writes <think> itself; a tag split across pushes is held back, never leaked. Tested by
// tests/server/reasoning_parser_test.cpp.
#pragma once

#include <string>
#include <string_view>

namespace voltserve::chat {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  // `started_in_reasoning`: the rendered prompt ends inside an open <think>.
  // `tool_call_ends_reasoning`: a <tool_call> tag inside the reasoning ends it implicitly (Qwen3.5 sometimes
  // calls a tool without closing </think>); the tag then goes to content, where the tool parser sees it.
  explicit ReasoningParser(bool started_in_reasoning, bool tool_call_ends_reasoning = false);

  ReasoningDelta push(std::string_view text);
  // End of generation: releases held-back text (an unfinished tag prefix is ordinary text).
  ReasoningDelta finish();

  bool in_reasoning() const { return state_ == State::kReasoning; }
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State { kStart, kReasoning, kContent };
  void run(ReasoningDelta& out, bool at_end);

  State state_;
  bool tool_call_ends_reasoning_;
  bool trim_newlines_ = false;  // drop the "\n\n" the model writes after </think>
  bool saw_reasoning_ = false;
  std::string pending_;
};

// Whether a rendered prompt leaves a <think> block open for the model (Qwen3.5+ with thinking enabled).
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace voltserve::chat

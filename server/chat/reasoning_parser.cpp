// See reasoning_parser.h.
#include "chat/reasoning_parser.h"

#include <algorithm>

namespace voltserve::chat {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kToolCall = "<tool_call>";

// Length of the longest proper prefix of `tag` that `text` ends with.
size_t partial_tag_overlap(std::string_view text, std::string_view tag) {
  size_t max_k = std::min(tag.size() - 1, text.size());
  for (size_t k = max_k; k > 0; --k) {
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

ReasoningParser::ReasoningParser(bool started_in_reasoning, bool tool_call_ends_reasoning)
    : state_(started_in_reasoning ? State::kReasoning : State::kStart),
      tool_call_ends_reasoning_(tool_call_ends_reasoning),
      saw_reasoning_(started_in_reasoning) {}

ReasoningDelta ReasoningParser::push(std::string_view text) {
  pending_.append(text);
  ReasoningDelta out;
  run(out, false);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  run(out, true);
  return out;
}

void ReasoningParser::run(ReasoningDelta& out, bool at_end) {
  while (!pending_.empty()) {
    if (state_ == State::kStart) {
      // The model may open <think> itself (Qwen3 2504 style), possibly after whitespace.
      size_t first = 0;
      while (first < pending_.size() && is_space(pending_[first])) ++first;
      std::string_view rest = std::string_view(pending_).substr(first);
      if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, first + kOpen.size());
        state_ = State::kReasoning;
        saw_reasoning_ = true;
        continue;
      }
      if (!at_end && kOpen.substr(0, rest.size()) == rest) return;  // could still become <think>
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kReasoning) {
      size_t close = pending_.find(kClose);
      size_t call = tool_call_ends_reasoning_ ? pending_.find(kToolCall) : std::string::npos;
      if (close != std::string::npos && (call == std::string::npos || close < call)) {
        out.reasoning.append(pending_, 0, close);
        pending_.erase(0, close + kClose.size());
        state_ = State::kContent;
        trim_newlines_ = true;
        continue;
      }
      if (call != std::string::npos) {
        out.reasoning.append(pending_, 0, call);
        pending_.erase(0, call);  // the tag stays for the tool-call parser
        state_ = State::kContent;
        continue;
      }
      size_t hold = at_end ? 0 : partial_tag_overlap(pending_, kClose);
      if (!at_end && tool_call_ends_reasoning_) hold = std::max(hold, partial_tag_overlap(pending_, kToolCall));
      out.reasoning.append(pending_, 0, pending_.size() - hold);
      pending_.erase(0, pending_.size() - hold);
      return;
    }
    // kContent
    if (trim_newlines_) {
      size_t n = 0;
      while (n < pending_.size() && (pending_[n] == '\n' || pending_[n] == '\r')) ++n;
      pending_.erase(0, n);
      if (pending_.empty()) return;
      trim_newlines_ = false;
    }
    out.content.append(pending_);
    pending_.clear();
  }
}

}  // namespace voltserve::chat

// One chat choice's text pipeline: token ids -> UTF-8-safe text (IncrementalDecoder) -> stop strings (held back,
// never emitted) -> reasoning split (<think>) -> tool-call parsing of the content. Produces the deltas the
// streaming and non-streaming responses are built from. Tested by tests/server/chat_pipeline_test.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat/reasoning_parser.h"
#include "chat/tool_calls.h"
#include "openai/stop_matcher.h"
#include "voltserve/tokenizer.h"

namespace voltserve::http {

struct ChatPipelineConfig {
  bool skip_special_tokens = true;
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool started_in_reasoning = false;     // the prompt left <think> open
  bool parse_tools = false;              // tools given and tool_choice != none
  std::vector<chat::ToolSchema> tools;
  std::string primed_text;               // text the server appended to the prompt (forced tool call start)
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<chat::ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class ChatPipeline {
 public:
  ChatPipeline(const Tokenizer& tokenizer, ChatPipelineConfig config);

  // Feeds generated ids; returns what can be emitted now. Ids after a stop-string match are ignored.
  ChatDelta push(const std::vector<int32_t>& ids);
  // End of generation: flushes everything held back. Call once.
  ChatDelta finish();

  // A stop string matched: the caller should cancel generation and finish with "stop".
  bool stopped() const { return stop_.matched(); }
  const std::string& matched_stop() const { return stop_.matched_stop(); }
  // Still inside the reasoning block (a reasoning budget closes it by pushing the ids of "\n</think>\n\n").
  bool in_reasoning() const { return reasoning_parser_.in_reasoning(); }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n_reasoning_tokens() const { return n_reasoning_tokens_; }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<chat::ToolCall>& tool_calls() const;

 private:
  void route(const std::string& text, ChatDelta& out, bool at_end);
  void append(ChatDelta& out, const ChatDelta& more);

  ChatPipelineConfig config_;
  IncrementalDecoder decoder_;
  openai::StopMatcher stop_;
  chat::ReasoningParser reasoning_parser_;
  std::optional<chat::ToolCallParser> tool_parser_;
  int64_t n_tokens_ = 0;
  int64_t n_reasoning_tokens_ = 0;
  std::string content_;
  std::string reasoning_;
  ChatDelta primed_;  // deltas produced by the primed text, released with the first push
};

}  // namespace voltserve::http

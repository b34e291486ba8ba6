// See messages_output.h. A tool_use block's input streams as the parser's JSON argument fragments (their
// concatenation is the final input object); the non-streaming block carries the parsed object. Thinking blocks carry
// an empty signature: this server signs nothing, and ignores the signatures it is sent back.
#include "openai/messages_output.h"

#include <algorithm>

#include "openai/messages_request.h"

namespace voltserve::openai {

Json anthropic_event(const char* name, Json payload) { return {{"event", name}, {"data", std::move(payload)}}; }

void MessagesWriter::delta(Json d, Json& events) {
  events.push_back(anthropic_event("content_block_delta", {{"type", "content_block_delta"},
                                                            {"index", static_cast<int>(content_.size())},
                                                            {"delta", std::move(d)}}));
}

void MessagesWriter::open(Open kind, Json block, Json& events) {
  close(events);
  open_ = kind;
  block_ = std::move(block);
  text_.clear();
  events.push_back(anthropic_event("content_block_start", {{"type", "content_block_start"},
                                                            {"index", static_cast<int>(content_.size())},
                                                            {"content_block", block_}}));
}

void MessagesWriter::close(Json& events) {
  if (open_ == Open::kNone) return;
  events.push_back(anthropic_event("content_block_stop", {{"type", "content_block_stop"},
                                                           {"index", static_cast<int>(content_.size())}}));
  if (open_ == Open::kThinking) {
    block_["thinking"] = text_;
  } else if (open_ == Open::kText) {
    block_["text"] = text_;
  } else {
    Json input = Json::object();
    try {
      input = parse_json_body(text_);
    } catch (const std::exception&) {
    }
    block_["input"] = input.is_object() ? input : Json::object();
  }
  content_.push_back(std::move(block_));
  block_ = nullptr;
  open_ = Open::kNone;
  text_.clear();
}

void MessagesWriter::thinking(const std::string& text, Json& events) {
  if (text.empty()) return;
  if (open_ != Open::kThinking) open(Open::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, events);
  text_ += text;
  delta({{"type", "thinking_delta"}, {"thinking", text}}, events);
}

void MessagesWriter::text(const std::string& text, Json& events) {
  if (text.empty()) return;
  if (open_ == Open::kToolUse && text.find_first_not_of(" \t\r\n") == std::string::npos) return;  // between calls
  if (open_ != Open::kText) open(Open::kText, {{"type", "text"}, {"text", ""}}, events);
  text_ += text;
  delta({{"type", "text_delta"}, {"text", text}}, events);
}

void MessagesWriter::tool_use(int index, const std::string& call_id, const std::string& name,
                              const std::string& partial_json, Json& events) {
  if (open_ != Open::kToolUse || index != call_index_) {
    call_index_ = index;
    ++n_tool_uses_;
    open(Open::kToolUse, {{"type", "tool_use"}, {"id", tool_use_id(call_id)}, {"name", name}, {"input", Json::object()}},
         events);
  }
  if (partial_json.empty()) return;
  text_ += partial_json;
  delta({{"type", "input_json_delta"}, {"partial_json", partial_json}}, events);
}

void MessagesWriter::finish(Json& events) { close(events); }

Json anthropic_usage(int64_t prompt_tokens, int64_t output_tokens, int64_t cached_tokens) {
  cached_tokens = std::clamp<int64_t>(cached_tokens, 0, prompt_tokens);
  return {{"input_tokens", prompt_tokens - cached_tokens}, {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens}, {"output_tokens", output_tokens}};
}

Json anthropic_message(const std::string& id, const std::string& model, const Json& content, const Json& stop_reason,
                       const Json& stop_sequence, const Json& usage) {
  return {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model}, {"content", content},
          {"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}, {"usage", usage}};
}

}  // namespace voltserve::openai

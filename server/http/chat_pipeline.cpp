// See chat_pipeline.h.
#include "http/chat_pipeline.h"

namespace voltserve::http {

namespace {
const std::vector<chat::ToolCall> kNoCalls;
}  // namespace

ChatPipeline::ChatPipeline(const Tokenizer& tokenizer, ChatPipelineConfig config)
    : config_(std::move(config)),
      decoder_(tokenizer, config_.skip_special_tokens),
      stop_(config_.stop, config_.include_stop_str_in_output),
      reasoning_parser_(config_.started_in_reasoning, config_.parse_tools) {
  if (config_.parse_tools) tool_parser_.emplace(config_.tools);
  if (!config_.primed_text.empty()) route(config_.primed_text, primed_, false);
}

const std::vector<chat::ToolCall>& ChatPipeline::tool_calls() const {
  return tool_parser_ ? tool_parser_->calls() : kNoCalls;
}

void ChatPipeline::append(ChatDelta& out, const ChatDelta& more) {
  out.reasoning += more.reasoning;
  out.content += more.content;
  for (const chat::ToolCallDelta& d : more.tool_calls) {
    if (!out.tool_calls.empty() && out.tool_calls.back().index == d.index) {
      out.tool_calls.back().arguments += d.arguments;
    } else {
      out.tool_calls.push_back(d);
    }
  }
}

void ChatPipeline::route(const std::string& text, ChatDelta& out, bool at_end) {
  chat::ReasoningDelta r = at_end ? [&] {
    chat::ReasoningDelta a = reasoning_parser_.push(text);
    chat::ReasoningDelta b = reasoning_parser_.finish();
    a.reasoning += b.reasoning;
    a.content += b.content;
    return a;
  }()
                                  : reasoning_parser_.push(text);
  ChatDelta d;
  d.reasoning = std::move(r.reasoning);
  if (tool_parser_) {
    chat::ToolParseDelta t = tool_parser_->push(r.content);
    if (at_end) {
      chat::ToolParseDelta t2 = tool_parser_->finish();
      t.content += t2.content;
      for (auto& c : t2.calls) {
        if (!t.calls.empty() && t.calls.back().index == c.index) {
          t.calls.back().arguments += c.arguments;
        } else {
          t.calls.push_back(std::move(c));
        }
      }
    }
    d.content = std::move(t.content);
    d.tool_calls = std::move(t.calls);
  } else {
    d.content = std::move(r.content);
  }
  reasoning_ += d.reasoning;
  content_ += d.content;
  append(out, d);
}

ChatDelta ChatPipeline::push(const std::vector<int32_t>& ids) {
  ChatDelta out;
  if (!primed_.empty()) {
    out = std::move(primed_);
    primed_ = ChatDelta{};
  }
  if (stop_.matched()) return out;
  std::string text;
  for (int32_t id : ids) {
    if (stop_.matched()) break;
    ++n_tokens_;
    if (reasoning_parser_.in_reasoning()) ++n_reasoning_tokens_;
    text += stop_.push(decoder_.push(id));
  }
  if (!text.empty()) route(text, out, false);
  return out;
}

ChatDelta ChatPipeline::finish() {
  ChatDelta out;
  if (!primed_.empty()) {
    out = std::move(primed_);
    primed_ = ChatDelta{};
  }
  std::string text;
  if (!stop_.matched()) text = stop_.push(decoder_.flush());
  text += stop_.flush();
  route(text, out, true);
  return out;
}

}  // namespace voltserve::http

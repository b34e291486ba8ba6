// See responses_output.h. Item ids: msg_/rs_/fc_/ctc_ + hex; call ids are the parser's call_ ids. A custom tool is
// served to the model as a function with one string parameter `input`: its arguments are held until the call
// closes and sent as one custom_tool_call_input delta of that string.
#include "openai/responses_output.h"

#include "openai/ids.h"

namespace voltserve::openai {

Json responses_usage_json(const ResponsesUsage& u) {
  Json j;
  j["input_tokens"] = u.input_tokens;
  j["input_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  j["output_tokens"] = u.output_tokens;
  j["output_tokens_details"] = {{"reasoning_tokens", u.reasoning_tokens}};
  j["total_tokens"] = u.input_tokens + u.output_tokens;
  return j;
}

Json ResponsesWriter::event(const char* type, Json fields) {
  Json e;
  e["type"] = type;
  for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = std::move(it.value());
  e["sequence_number"] = sequence_++;
  return e;
}

void ResponsesWriter::open(Open kind, Json& events) {
  if (open_ == kind && kind != Open::kCall) return;
  close(events);
  open_ = kind;
  text_.clear();
  const int output_index = static_cast<int>(output_.size());
  if (kind == Open::kReasoning) {
    item_ = {{"id", random_id("rs_", 32)}, {"type", "reasoning"}, {"summary", Json::array()},
             {"content", Json::array()}, {"status", "in_progress"}};
  } else if (kind == Open::kMessage) {
    item_ = {{"id", random_id("msg_", 32)}, {"type", "message"}, {"status", "in_progress"}, {"role", "assistant"},
             {"content", Json::array()}};
  }
  events.push_back(event("response.output_item.added", {{"output_index", output_index}, {"item", item_}}));
  if (kind == Open::kReasoning || kind == Open::kMessage) {
    Json part = kind == Open::kReasoning ? Json{{"type", "reasoning_text"}, {"text", ""}}
                                         : Json{{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}};
    events.push_back(event("response.content_part.added", {{"item_id", item_["id"]}, {"output_index", output_index},
                                                          {"content_index", 0}, {"part", std::move(part)}}));
  }
}

void ResponsesWriter::close(Json& events) {
  if (open_ == Open::kNone) return;
  const int output_index = static_cast<int>(output_.size());
  const Json id = item_["id"];
  const char* status = complete_ ? "completed" : "incomplete";
  if (open_ == Open::kReasoning || open_ == Open::kMessage) {
    bool reasoning = open_ == Open::kReasoning;
    events.push_back(event(reasoning ? "response.reasoning_text.done" : "response.output_text.done",
                           reasoning ? Json{{"item_id", id}, {"output_index", output_index}, {"content_index", 0},
                                            {"text", text_}}
                                     : Json{{"item_id", id}, {"output_index", output_index}, {"content_index", 0},
                                            {"text", text_}, {"logprobs", Json::array()}}));
    Json part = reasoning ? Json{{"type", "reasoning_text"}, {"text", text_}}
                          : Json{{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}};
    events.push_back(event("response.content_part.done", {{"item_id", id}, {"output_index", output_index},
                                                         {"content_index", 0}, {"part", part}}));
    item_["content"] = Json::array({std::move(part)});
  } else if (custom_) {
    // The model wrote {"input": "..."}: the free-form input is that string.
    std::string input = text_;
    try {
      Json args = parse_json_body(text_);
      if (args.is_object() && args.contains("input") && args["input"].is_string()) input = args["input"].get<std::string>();
    } catch (const std::exception&) {
    }
    if (!input.empty()) {
      events.push_back(event("response.custom_tool_call_input.delta",
                             {{"item_id", id}, {"output_index", output_index}, {"delta", input}}));
    }
    events.push_back(event("response.custom_tool_call_input.done",
                           {{"item_id", id}, {"output_index", output_index}, {"input", input}}));
    item_["input"] = input;
  } else {
    events.push_back(event("response.function_call_arguments.done",
                           {{"item_id", id}, {"output_index", output_index}, {"name", item_["name"]},
                            {"arguments", text_}}));
    item_["arguments"] = text_;
  }
  if (item_.contains("status")) item_["status"] = status;
  events.push_back(event("response.output_item.done", {{"output_index", output_index}, {"item", item_}}));
  output_.push_back(std::move(item_));
  item_ = nullptr;
  open_ = Open::kNone;
  text_.clear();
}

void ResponsesWriter::reasoning(const std::string& text, Json& events) {
  if (text.empty()) return;
  open(Open::kReasoning, events);
  text_ += text;
  events.push_back(event("response.reasoning_text.delta", {{"item_id", item_["id"]},
                                                            {"output_index", static_cast<int>(output_.size())},
                                                            {"content_index", 0}, {"delta", text}}));
}

void ResponsesWriter::text(const std::string& text, Json& events) {
  if (text.empty()) return;
  if (open_ == Open::kCall && text.find_first_not_of(" \t\r\n") == std::string::npos) return;  // between calls
  open(Open::kMessage, events);
  text_ += text;
  events.push_back(event("response.output_text.delta", {{"item_id", item_["id"]},
                                                         {"output_index", static_cast<int>(output_.size())},
                                                         {"content_index", 0}, {"delta", text},
                                                         {"logprobs", Json::array()}}));
}

void ResponsesWriter::tool_call(int index, const std::string& call_id, const std::string& name,
                                const std::string& arguments, Json& events) {
  if (open_ != Open::kCall || index != call_index_) {
    close(events);
    custom_ = custom_tools_.count(name) > 0;
    call_index_ = index;
    ++n_calls_;
    if (custom_) {
      item_ = {{"id", random_id("ctc_", 32)}, {"type", "custom_tool_call"}, {"status", "in_progress"},
               {"call_id", call_id}, {"name", name}, {"input", ""}};
    } else {
      item_ = {{"id", random_id("fc_", 32)}, {"type", "function_call"}, {"status", "in_progress"},
               {"call_id", call_id}, {"name", name}, {"arguments", ""}};
    }
    open(Open::kCall, events);
  }
  if (arguments.empty()) return;
  text_ += arguments;
  if (!custom_) {
    events.push_back(event("response.function_call_arguments.delta", {{"item_id", item_["id"]},
                                                                       {"output_index", static_cast<int>(output_.size())},
                                                                       {"delta", arguments}}));
  }
}

void ResponsesWriter::finish(bool complete, Json& events) {
  complete_ = complete;
  close(events);
}

Json response_object(const std::string& id, int64_t created_at, const std::string& model, const Json& echo,
                     const std::string& status, const Json& output, const Json& usage, const Json& error) {
  Json r;
  r["id"] = id;
  r["object"] = "response";
  r["created_at"] = created_at;
  r["status"] = status;
  r["background"] = false;
  r["error"] = error;
  r["incomplete_details"] = status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
  for (const char* key : {"instructions", "max_output_tokens"}) r[key] = echo.value(key, Json(nullptr));
  r["max_tool_calls"] = nullptr;
  r["metadata"] = echo.value("metadata", Json::object());
  r["model"] = model;
  r["output"] = output;
  for (const char* key : {"parallel_tool_calls", "previous_response_id", "reasoning"}) {
    r[key] = echo.value(key, Json(nullptr));
  }
  r["service_tier"] = "default";
  for (const char* key : {"store", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p",
                          "truncation", "usage", "user"}) {
    r[key] = std::string(key) == "usage" ? usage : echo.value(key, Json(nullptr));
  }
  return r;
}

}  // namespace voltserve::openai

// See responses_handler.h. Stream: response.created, response.in_progress, then per output item (reasoning,
// message, function_call / custom_tool_call) its added / part / delta / done events from ResponsesWriter, then
// response.completed (or response.incomplete when max_output_tokens ran out, response.failed on an error). No
// [DONE]: the openai SDK ends the stream with the body.
#include "http/responses_handler.h"

#include <fmt/format.h>

#include "http/chat_generation.h"
#include "openai/api_error.h"
#include "openai/fields.h"
#include "openai/responses_output.h"
#include "openai/responses_request.h"
#include "openai/sse.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;
using openai::Json;

// The chat message this response adds to the conversation (what previous_response_id continues from).
Json assistant_message(const ChatPipeline& p) {
  Json m = {{"role", "assistant"}, {"content", p.content()}};
  if (!p.reasoning().empty()) m["reasoning_content"] = p.reasoning();
  if (!p.tool_calls().empty()) {
    Json calls = Json::array();
    for (const chat::ToolCall& c : p.tool_calls()) {
      Json args = Json::object();
      try {
        args = openai::parse_json_body(c.arguments);
      } catch (const ApiError&) {
      }
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
    }
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

class ResponsesSession final : public ChatGenerationSession {
 public:
  ResponsesSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, std::unique_ptr<Generation> generation,
                   openai::ResponsesRequest request, PreparedChat prepared, Json history)
      : ChatGenerationSession(ctx, std::move(record), std::move(generation), "resp_", std::move(request.chat),
                              std::move(prepared)),
        echo_(std::move(request.echo)),
        store_(request.store),
        conversation_(std::move(history)),
        writer_(std::move(request.custom_tools)) {
    for (Json& m : request.input_messages) conversation_.push_back(std::move(m));
  }

  Json run_to_completion() override {
    run_until_finished();
    Json final_response = final_object(status());
    keep(final_response);
    finalize_record(200);
    return final_response;
  }

 private:
  std::string status() const {
    const char* r = choices_[0].finish_reason;
    return r && std::string(r) == "length" ? "incomplete" : "completed";
  }

  Json usage_json() const {
    openai::Usage u = usage();
    return openai::responses_usage_json(
        {u.prompt_tokens, u.completion_tokens, std::max<int64_t>(0, u.reasoning_tokens), u.cached_tokens});
  }

  Json object(const std::string& status, const Json& output, const Json& usage, const Json& error) const {
    return openai::response_object(meta_.id, meta_.created, meta_.model, echo_, status, output, usage, error);
  }

  Json final_object(const std::string& status, const Json& error = nullptr) const {
    return object(status, writer_.output(), usage_json(), error);
  }

  void keep(const Json& response) {
    if (!store_) return;
    Json conversation = conversation_;
    conversation.push_back(assistant_message(*choices_[0].pipeline));
    ctx_.responses.put(meta_.id, StoredResponse{response, std::move(conversation)});
  }

  void send(const Json& events, std::string* sse) {
    if (!sse) return;
    for (const Json& e : events) *sse += openai::sse_event(e["type"].get<std::string>(), e);
  }

  std::string opening() override {
    Json events = Json::array();
    Json initial = object("in_progress", Json::array(), nullptr, nullptr);
    events.push_back(writer_.event("response.created", {{"response", initial}}));
    events.push_back(writer_.event("response.in_progress", {{"response", initial}}));
    std::string out;
    send(events, &out);
    return out;
  }

  void on_delta(int, const ChatDelta& d, Json, std::string* sse) override {
    Json events = Json::array();
    if (request_.include_reasoning) writer_.reasoning(d.reasoning, events);
    writer_.text(d.content, events);
    for (const chat::ToolCallDelta& t : d.tool_calls) writer_.tool_call(t.index, t.id, t.name, t.arguments, events);
    send(events, sse);
  }

  void on_finish(int, const char* reason, std::string* sse) override {
    Json events = Json::array();
    writer_.finish(std::string(reason) != "length", events);
    send(events, sse);
  }

  std::string usage_chunk() const override { return ""; }

  std::string stream_end() override {
    std::string s = status();
    Json final_response = final_object(s);
    keep(final_response);
    return openai::sse_event(s == "completed" ? "response.completed" : "response.incomplete",
                             writer_.event(s == "completed" ? "response.completed" : "response.incomplete",
                                           {{"response", final_response}}));
  }

  std::string stream_error(const ApiError& error) override {
    Json events = Json::array();
    writer_.finish(false, events);
    std::string out;
    send(events, &out);
    Json failed = final_object("failed", {{"code", "server_error"}, {"message", error.what()}});
    keep(failed);
    out += openai::sse_event("response.failed", writer_.event("response.failed", {{"response", failed}}));
    return out;
  }

  Json echo_;
  bool store_;
  Json conversation_;  // history + this request's input (chat messages)
  openai::ResponsesWriter writer_;
};

// Reads previous_response_id and finds its conversation in the store (400 naming the field when it is not there).
Json history_of(ServerContext& ctx, const Json& body) {
  std::string previous = openai::responses_previous_id(body);
  if (previous.empty()) return Json::array();
  std::optional<StoredResponse> stored = ctx.responses.get(previous);
  if (!stored) {
    throw ApiError(ErrorCode::kInvalidRequest,
                   fmt::format("Previous response with id '{}' not found (never stored, deleted, or evicted from the "
                               "bounded store)",
                               previous),
                   "previous_response_id");
  }
  return std::move(stored->conversation);
}

// prepare_chat names the conversation "messages"; here it is the input.
PreparedChat prepare(ServerContext& ctx, openai::ChatRequest& request, bool check_context = true) {
  try {
    return prepare_chat(ctx, request, check_context);
  } catch (const ApiError& e) {
    if (e.param() != "messages") throw;
    throw ApiError(e.code(), e.what(), "input");
  }
}

}  // namespace

void handle_responses_create(ServerContext& ctx, const std::string& body_text,
                             const std::shared_ptr<AccessRecord>& record, httplib::Response& res) {
  Json body = openai::parse_json_object_body(body_text);
  Json history = history_of(ctx, body);
  openai::ResponsesRequest request = openai::parse_responses_request(body, ctx.limits, &history);
  PreparedChat prepared = prepare(ctx, request.chat);
  std::unique_ptr<Generation> generation = submit_chat(ctx, record->id(), prepared, request.chat);
  const bool stream = request.chat.options.stream;
  respond(res, *record,
          std::make_shared<ResponsesSession>(ctx, record, std::move(generation), std::move(request),
                                             std::move(prepared), std::move(history)),
          stream);
}

void handle_responses_input_tokens(ServerContext& ctx, const std::string& body_text, httplib::Response& res) {
  Json body = openai::parse_json_object_body(body_text);
  Json history = history_of(ctx, body);
  openai::ResponsesRequest request = openai::parse_responses_request(body, ctx.limits, &history);
  PreparedChat prepared = prepare(ctx, request.chat, /*check_context=*/false);
  Json out = {{"object", "response.input_tokens"}, {"input_tokens", prepared.prompt_ids.size()}};
  res.set_content(openai::dump_json(out), "application/json");
}

void handle_responses_get(ServerContext& ctx, const std::string& id, const httplib::Request& req,
                          httplib::Response& res) {
  if (req.has_param("stream") && req.get_param_value("stream") != "false") {
    throw ApiError(ErrorCode::kUnsupported, "replaying a stored response as a stream is not supported", "stream");
  }
  std::optional<StoredResponse> stored = ctx.responses.get(id);
  if (!stored) throw ApiError(ErrorCode::kNotFound, fmt::format("Response with id '{}' not found", id), "response_id");
  res.set_content(openai::dump_json(stored->response), "application/json");
}

void handle_responses_delete(ServerContext& ctx, const std::string& id, httplib::Response& res) {
  if (!ctx.responses.erase(id)) {
    throw ApiError(ErrorCode::kNotFound, fmt::format("Response with id '{}' not found", id), "response_id");
  }
  Json out = {{"id", id}, {"object", "response.deleted"}, {"deleted", true}};
  res.set_content(openai::dump_json(out), "application/json");
}

}  // namespace voltserve::http

// See messages_handler.h. Stream: message_start (usage with the input tokens), ping, per block its
// content_block_start / _delta / _stop from MessagesWriter, message_delta (stop_reason, stop_sequence, usage with
// the output tokens), message_stop; a failure after the start is an `error` event.
#include "http/messages_handler.h"

#include "http/chat_generation.h"
#include "openai/api_error.h"
#include "openai/messages_output.h"
#include "openai/messages_request.h"
#include "openai/sse.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::Json;

class MessagesSession final : public ChatGenerationSession {
 public:
  MessagesSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, std::unique_ptr<Generation> generation,
                  openai::MessagesRequest request, PreparedChat prepared, bool clamped)
      : ChatGenerationSession(ctx, std::move(record), std::move(generation), "msg_", std::move(request.chat),
                              std::move(prepared)),
        clamped_(clamped) {}

  Json run_to_completion() override {
    run_until_finished();
    finalize_record(200);
    return openai::anthropic_message(meta_.id, meta_.model, writer_.content(), stop_reason(), stop_sequence(),
                                     openai::anthropic_usage(n_prompt_, usage().completion_tokens,
                                                             usage().cached_tokens));
  }

 private:
  Json stop_reason() const {
    const Choice& c = choices_[0];
    if (!c.finish_reason) return nullptr;
    std::string r = c.finish_reason;
    if (r == "length") return clamped_ ? "model_context_window_exceeded" : "max_tokens";
    if (r == "tool_calls" || writer_.has_tool_use()) return "tool_use";
    if (c.pipeline->stopped()) return "stop_sequence";
    return "end_turn";
  }

  Json stop_sequence() const {
    const Choice& c = choices_[0];
    return c.pipeline->stopped() ? Json(c.pipeline->matched_stop()) : Json(nullptr);
  }

  void send(const Json& events, std::string* sse) {
    if (!sse) return;
    for (const Json& e : events) *sse += openai::sse_event(e["event"].get<std::string>(), e["data"]);
  }

  std::string opening() override {
    Json start = openai::anthropic_message(meta_.id, meta_.model, Json::array(), nullptr, nullptr,
                                           openai::anthropic_usage(n_prompt_, 0));
    return openai::sse_event("message_start", {{"type", "message_start"}, {"message", start}}) +
           openai::sse_event("ping", {{"type", "ping"}});
  }

  void on_delta(int, const ChatDelta& d, Json, std::string* sse) override {
    Json events = Json::array();
    if (request_.include_reasoning) writer_.thinking(d.reasoning, events);
    writer_.text(d.content, events);
    for (const chat::ToolCallDelta& t : d.tool_calls) writer_.tool_use(t.index, t.id, t.name, t.arguments, events);
    send(events, sse);
  }

  void on_finish(int, const char*, std::string* sse) override {
    Json events = Json::array();
    writer_.finish(events);
    send(events, sse);
  }

  std::string usage_chunk() const override { return ""; }

  std::string stream_end() override {
    // message_start went out before the engine looked the prompt up (all of it as input_tokens); the final
    // figures, with the cache's share, come here (Anthropic's message_delta usage carries the input counts too).
    const openai::Usage final_usage = usage();
    Json u = openai::anthropic_usage(n_prompt_, final_usage.completion_tokens, final_usage.cached_tokens);
    return openai::sse_event("message_delta",
                             {{"type", "message_delta"},
                              {"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()}}},
                              {"usage", u}}) +
           openai::sse_event("message_stop", {{"type", "message_stop"}});
  }

  std::string stream_error(const ApiError& error) override {
    return openai::sse_event("error", openai::anthropic_error_body(error));
  }

  openai::MessagesWriter writer_;
  bool clamped_;  // max_tokens was cut to the room the context leaves
};

}  // namespace

bool anthropic_route(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

void handle_messages(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                     httplib::Response& res) {
  openai::MessagesRequest request = openai::parse_messages_request(openai::parse_json_object_body(body), ctx.limits);
  PreparedChat prepared = prepare_chat(ctx, request.chat, /*check_context=*/false);
  // Anthropic semantics: max_tokens beyond the room the prompt leaves runs until the context is full.
  openai::GenerationOptions& options = request.chat.options;
  const int64_t n_prompt = static_cast<int64_t>(prepared.prompt_ids.size());
  const int64_t room = ctx.model_info.context_length - n_prompt;
  bool clamped = false;
  if (ctx.model_info.context_length > 0 && room > 0 && options.max_tokens && *options.max_tokens > room) {
    options.max_tokens = static_cast<int32_t>(room);
    clamped = true;
  }
  openai::check_context(options, n_prompt, ctx.model_info.context_length, "messages");  // a prompt too long: 400
  std::unique_ptr<Generation> generation = submit_chat(ctx, record->id(), prepared, request.chat);
  const bool stream = options.stream;
  respond(res, *record,
          std::make_shared<MessagesSession>(ctx, record, std::move(generation), std::move(request), std::move(prepared),
                                            clamped),
          stream);
}

void handle_messages_count_tokens(ServerContext& ctx, const std::string& body, httplib::Response& res) {
  openai::MessagesRequest request =
      openai::parse_messages_request(openai::parse_json_object_body(body), ctx.limits, /*count_tokens=*/true);
  PreparedChat prepared = prepare_chat(ctx, request.chat, /*check_context=*/false);
  Json out = {{"input_tokens", prepared.prompt_ids.size()}};
  res.set_content(openai::dump_json(out), "application/json");
}

}  // namespace voltserve::http

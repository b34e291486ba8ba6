// See chat_handler.h. Streaming order per choice (OPENAI.md §1.4): a role chunk, reasoning deltas, content
// deltas and/or tool-call deltas, one finish chunk; then an optional usage chunk and `data: [DONE]`. Everything
// before the chunk format (template, submission, pipelines, reasoning budget) is the shared chat_generation.
#include "http/chat_handler.h"

#include "http/chat_generation.h"
#include "openai/api_error.h"
#include "openai/chat_request.h"
#include "openai/responses.h"
#include "openai/sse.h"

namespace voltserve::http {

namespace {

using openai::Json;

Json tool_call_delta_json(const chat::ToolCallDelta& d) {
  Json j;
  j["index"] = d.index;
  if (!d.id.empty()) {
    j["id"] = d.id;
    j["type"] = "function";
    j["function"] = {{"name", d.name}, {"arguments", d.arguments}};
  } else {
    j["function"] = {{"arguments", d.arguments}};
  }
  return j;
}

class ChatSession final : public ChatGenerationSession {
 public:
  ChatSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, openai::ChatRequest request,
              PreparedChat prepared, std::unique_ptr<Generation> generation)
      : ChatGenerationSession(ctx, std::move(record), std::move(generation), "chatcmpl-", std::move(request),
                              std::move(prepared)),
        logprobs_(choices_.size(), Json::array()) {}

  Json run_to_completion() override {
    run_until_finished();
    Json choices = Json::array();
    for (int i = 0; i < request_.options.n; ++i) {
      Choice& c = choices_[i];
      const ChatPipeline& p = *c.pipeline;
      Json message;
      message["role"] = "assistant";
      bool has_calls = !p.tool_calls().empty();
      bool has_reasoning = request_.include_reasoning && !p.reasoning().empty();
      message["content"] = p.content().empty() && (has_calls || has_reasoning) ? Json(nullptr) : Json(p.content());
      message["refusal"] = nullptr;
      if (has_reasoning) {
        message["reasoning_content"] = p.reasoning();
        if (ctx_.options.mirror_reasoning) message["reasoning"] = p.reasoning();
      }
      if (has_calls) {
        Json calls = Json::array();
        for (const chat::ToolCall& call : p.tool_calls()) {
          calls.push_back({{"id", call.id}, {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
      Json logprobs = request_.options.logprobs ? Json{{"content", logprobs_[i]}} : Json(nullptr);
      choices.push_back(openai::chat_choice(i, std::move(message), c.finish_reason, std::move(logprobs)));
    }
    finalize_record(200);
    return openai::chat_completion(meta_, std::move(choices), usage());
  }

 private:
  // The first delta of every choice carries the role (OPENAI.md §1.4).
  std::string opening() override {
    std::string out;
    for (int i = 0; i < request_.options.n; ++i) {
      out += openai::sse_data(openai::chat_chunk(meta_, i, {{"role", "assistant"}, {"content", ""}}, nullptr));
    }
    return out;
  }

  std::string usage_chunk() const override { return openai::sse_data(openai::chat_usage_chunk(meta_, usage())); }

  void on_delta(int index, const ChatDelta& d, Json logprobs, std::string* sse) override {
    if (!sse) {
      if (logprobs.is_array()) {
        for (Json& entry : logprobs) logprobs_[index].push_back(std::move(entry));
      }
      return;
    }
    bool attached = logprobs.is_null();
    auto send = [&](Json delta) {
      Json lp = nullptr;
      if (!attached) {
        lp = {{"content", std::move(logprobs)}};
        attached = true;
      }
      *sse += openai::sse_data(openai::chat_chunk(meta_, index, std::move(delta), nullptr, std::move(lp)));
    };
    if (!d.reasoning.empty() && request_.include_reasoning) {
      Json delta = {{"reasoning_content", d.reasoning}};
      if (ctx_.options.mirror_reasoning) delta["reasoning"] = d.reasoning;
      send(std::move(delta));
    }
    if (!d.content.empty()) send({{"content", d.content}});
    if (!d.tool_calls.empty()) {
      Json calls = Json::array();
      for (const chat::ToolCallDelta& t : d.tool_calls) calls.push_back(tool_call_delta_json(t));
      send({{"tool_calls", std::move(calls)}});
    }
    if (!attached && !logprobs.empty()) send({{"content", ""}});
  }

  void on_finish(int index, const char* reason, std::string* sse) override {
    if (sse) *sse += openai::sse_data(openai::chat_chunk(meta_, index, Json::object(), reason));
  }

  std::vector<Json> logprobs_;
};

}  // namespace

void handle_chat_completions(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                             httplib::Response& res) {
  openai::ChatRequest request = openai::parse_chat_request(openai::parse_json_object_body(body), ctx.limits);
  PreparedChat prepared = prepare_chat(ctx, request);
  std::unique_ptr<Generation> generation = submit_chat(ctx, record->id(), prepared, request);
  const bool stream = request.options.stream;
  respond(res, *record,
          std::make_shared<ChatSession>(ctx, record, std::move(request), std::move(prepared), std::move(generation)),
          stream);
}

}  // namespace voltserve::http

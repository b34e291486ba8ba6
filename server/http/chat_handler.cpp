// See chat_handler.h. Streaming order per choice (OPENAI.md §1.4): a role chunk, reasoning deltas, content
// deltas and/or tool-call deltas, one finish chunk; then an optional usage chunk and `data: [DONE]`.
#include "http/chat_handler.h"

#include "chat/chat_prompt.h"
#include "http/chat_pipeline.h"
#include "http/generation.h"
#include "http/generation_session.h"
#include "http/stream_support.h"
#include "openai/api_error.h"
#include "openai/chat_request.h"
#include "openai/ids.h"
#include "openai/responses.h"
#include "openai/sse.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;
using openai::Json;

struct PreparedChat {
  std::vector<int32_t> prompt_ids;
  ChatPipelineConfig pipeline;
};

// Renders the template, forces the start of a tool call for tool_choice required/named (the model stays on its
// trained format; the parser is primed with the forced text), tokenizes, and checks the context.
PreparedChat prepare(ServerContext& ctx, openai::ChatRequest& request) {
  if (!ctx.chat_template) {
    throw ApiError(ErrorCode::kUnsupported, "this model has no chat template; use /v1/completions", "messages");
  }
  std::string prompt;
  try {
    prompt = chat::render_chat_prompt(*ctx.chat_template, request.template_body, ctx.bos_token,
                                      ctx.eos_token, /*add_generation_prompt=*/true);
  } catch (const chat::ChatRequestError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, e.what(), "messages");
  } catch (const chat::TemplateError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, std::string("the chat template rejected the request: ") + e.what(),
                   "messages");
  }
  PreparedChat out;
  ChatPipelineConfig& cfg = out.pipeline;
  cfg.skip_special_tokens = request.options.skip_special_tokens;
  cfg.stop = request.options.stop;
  cfg.include_stop_str_in_output = request.options.include_stop_str_in_output;
  cfg.started_in_reasoning = chat::prompt_opens_reasoning(prompt);
  cfg.parse_tools = request.tool_choice != openai::ToolChoice::kNone;
  for (const openai::ToolDefinition& t : request.tools) cfg.tools.push_back({t.name, t.parameters});
  if (request.tool_choice == openai::ToolChoice::kRequired || request.tool_choice == openai::ToolChoice::kNamed) {
    if (cfg.started_in_reasoning) {
      prompt += "\n</think>\n\n";  // a forced call skips the reasoning, as enable_thinking=false renders it
      cfg.started_in_reasoning = false;
    }
    bool named = request.tool_choice == openai::ToolChoice::kNamed;
    if (ctx.template_uses_xml_tools) {
      cfg.primed_text = named ? "<tool_call>\n<function=" + request.tool_choice_name + ">\n" : "<tool_call>\n<function=";
    } else {
      cfg.primed_text = named ? "<tool_call>\n{\"name\": \"" + request.tool_choice_name + "\", \"arguments\": "
                              : "<tool_call>\n{\"name\": \"";
    }
    prompt += cfg.primed_text;
  }
  Result<std::vector<int32_t>> ids = ctx.tokenizer->encode(prompt, /*parse_special=*/true);
  if (!ids.is_ok()) throw ApiError(ErrorCode::kInvalidRequest, ids.status().message(), "messages");
  out.prompt_ids = std::move(ids).value();
  openai::check_context(request.options, static_cast<int64_t>(out.prompt_ids.size()), ctx.model_info.context_length,
                        "messages");
  return out;
}

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

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return nullptr;
  }
}

class ChatSession final : public GenerationSession {
 public:
  ChatSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, openai::ChatRequest request,
              PreparedChat prepared, std::unique_ptr<Generation> generation)
      : GenerationSession(ctx, std::move(record), std::move(generation), "chatcmpl-", request.options.model,
                          request.options.include_usage),
        request_(std::move(request)),
        n_prompt_(static_cast<int64_t>(prepared.prompt_ids.size())) {
    for (int i = 0; i < request_.options.n; ++i) {
      choices_.push_back(Choice{std::make_unique<ChatPipeline>(*ctx.tokenizer, prepared.pipeline)});
    }
  }

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
      Json logprobs = request_.options.logprobs ? Json{{"content", c.logprobs}} : Json(nullptr);
      choices.push_back(openai::chat_choice(i, std::move(message), c.finish_reason, std::move(logprobs)));
    }
    finalize_record(200);
    return openai::chat_completion(meta_, std::move(choices), usage());
  }

 private:
  struct Choice {
    std::unique_ptr<ChatPipeline> pipeline;
    bool finished = false;
    const char* finish_reason = nullptr;
    Json logprobs = Json::array();
  };

  // The first delta of every choice carries the role (OPENAI.md §1.4).
  std::string opening() override {
    std::string out;
    for (int i = 0; i < request_.options.n; ++i) {
      out += openai::sse_data(openai::chat_chunk(meta_, i, {{"role", "assistant"}, {"content", ""}}, nullptr));
    }
    return out;
  }

  bool all_finished() const override {
    for (const Choice& c : choices_) {
      if (!c.finished) return false;
    }
    return true;
  }

  openai::Usage usage() const override {
    openai::Usage u;
    u.prompt_tokens = n_prompt_;
    u.completion_tokens = 0;
    u.reasoning_tokens = 0;
    for (const Choice& c : choices_) {
      u.completion_tokens += c.pipeline->n_tokens();
      u.reasoning_tokens += c.pipeline->n_reasoning_tokens();
    }
    return with_speculation(u);
  }

  std::string usage_chunk() const override { return openai::sse_data(openai::chat_usage_chunk(meta_, usage())); }

  std::string finish_reasons() const override {
    std::string reasons;
    for (const Choice& c : choices_) {
      if (!reasons.empty()) reasons += ",";
      reasons += c.finish_reason ? c.finish_reason : (error_ ? "error" : "-");
    }
    return reasons;
  }

  Json logprob_entries(const Event& e) const {
    Json entries = Json::array();
    for (size_t k = 0; k < e.token_ids.size() && k < e.logprobs.size(); ++k) {
      std::vector<std::pair<std::string, float>> top;
      if (k < e.top_logprobs.size()) {
        for (const TokenLogprob& t : e.top_logprobs[k]) top.emplace_back(token_text(ctx_, t.token_id), t.logprob);
      }
      entries.push_back(openai::chat_logprob_entry(token_text(ctx_, e.token_ids[k]), e.logprobs[k].logprob, top));
    }
    return entries;
  }

  void emit(int index, const ChatDelta& d, Json logprobs, std::string* sse) {
    if (!sse) return;
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
    if (!attached) send({{"content", ""}});
  }

  void finish_choice(int index, const char* reason, std::string* sse) {
    Choice& c = choices_[index];
    ChatDelta d = c.pipeline->finish();
    emit(index, d, nullptr, sse);
    if (!c.pipeline->tool_calls().empty() && std::string(reason) == "stop") reason = "tool_calls";
    c.finished = true;
    c.finish_reason = reason;
    if (sse) *sse += openai::sse_data(openai::chat_chunk(meta_, index, Json::object(), reason));
  }

  void handle(ChoiceEvent& ev, std::string* sse) override {
    if (ev.choice < 0 || ev.choice >= static_cast<int>(choices_.size())) return;
    Choice& c = choices_[ev.choice];
    if (c.finished) return;  // e.g. the cancelled tail after a stop string
    const Event& e = ev.event;
    if (!e.token_ids.empty()) {
      observe_tokens(e.token_ids.size());
      ChatDelta d = c.pipeline->push(e.token_ids);
      Json lp = nullptr;
      if (request_.options.logprobs) {
        lp = logprob_entries(e);
        if (!sse) {
          for (Json& entry : lp) c.logprobs.push_back(std::move(entry));
          lp = nullptr;
        }
      }
      emit(ev.choice, d, std::move(lp), sse);
    }
    if (c.pipeline->stopped()) {
      generation_->cancel(ev.choice);
      finish_choice(ev.choice, "stop", sse);
      return;
    }
    if (!e.finished) return;
    generation_->mark_finished(ev.choice);
    if (failed_in_engine(e)) return;
    finish_choice(ev.choice, finish_name(e.finish_reason), sse);
  }

  openai::ChatRequest request_;
  int64_t n_prompt_;
  std::vector<Choice> choices_;
};

}  // namespace

void handle_chat_completions(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                             httplib::Response& res) {
  openai::ChatRequest request = openai::parse_chat_request(openai::parse_json_object_body(body), ctx.limits);
  PreparedChat prepared = prepare(ctx, request);
  auto generation = std::make_unique<Generation>(*ctx.engine);
  for (int i = 0; i < request.options.n; ++i) {
    Status s = generation->submit(i, make_engine_request(ctx, record->id(), i, prepared.prompt_ids, request.options));
    if (!s.is_ok()) throw openai::api_error_from_status(s, s.code() == StatusCode::kOutOfRange ? "messages" : "");
  }
  const bool stream = request.options.stream;
  respond(res, *record,
          std::make_shared<ChatSession>(ctx, record, std::move(request), std::move(prepared), std::move(generation)),
          stream);
}

}  // namespace voltserve::http

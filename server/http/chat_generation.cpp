// See chat_generation.h. A reasoning budget is enforced without engine support: when a choice has generated
// `reasoning_budget` tokens inside <think>, the server pushes the ids of "\n</think>\n\n" through the choice's
// pipeline (as if the model wrote them), cancels the engine request and submits a continuation whose prompt is the
// original prompt plus every id so far, with the rest of max_tokens. The continuation re-prefills that prompt (there
// is no prefix cache yet); events of the replaced request are dropped by Generation.
#include "http/chat_generation.h"

#include <fmt/format.h>

#include "chat/chat_prompt.h"
#include "http/constraint_compile.h"
#include "http/tool_call_constraint.h"
#include "http/stream_support.h"
#include "openai/api_error.h"
#include "openai/responses.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;
using openai::Json;

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return nullptr;
  }
}

}  // namespace

PreparedChat prepare_chat(ServerContext& ctx, openai::ChatRequest& request, bool check_context) {
  if (!ctx.chat_template) {
    throw ApiError(ErrorCode::kUnsupported, "this model has no chat template; use /v1/completions", "messages");
  }
  PreparedChat out;
  std::string& prompt = out.prompt;
  try {
    prompt = chat::render_chat_prompt(*ctx.chat_template, request.template_body, ctx.bos_token, ctx.eos_token,
                                      /*add_generation_prompt=*/true);
  } catch (const chat::ChatRequestError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, e.what(), "messages");
  } catch (const chat::TemplateError& e) {
    throw ApiError(ErrorCode::kInvalidRequest, std::string("the chat template rejected the request: ") + e.what(),
                   "messages");
  }
  ChatPipelineConfig& cfg = out.pipeline;
  cfg.skip_special_tokens = request.options.skip_special_tokens;
  cfg.stop = request.options.stop;
  cfg.include_stop_str_in_output = request.options.include_stop_str_in_output;
  cfg.started_in_reasoning = chat::prompt_opens_reasoning(prompt);
  cfg.parse_tools = request.tool_choice != openai::ToolChoice::kNone;
  for (const openai::ToolDefinition& t : request.tools) cfg.tools.push_back({t.name, t.parameters});
  // required / named tool_choice: start the call for the model, so it stays on its trained format; the parser is
  // primed with the same text.
  bool auto_calls = false;
  if (request.tool_choice == openai::ToolChoice::kRequired || request.tool_choice == openai::ToolChoice::kNamed) {
    if (cfg.started_in_reasoning) {
      prompt += kReasoningClose;  // a forced call skips the reasoning, as enable_thinking=false renders it
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
    // The rest of the call is constrained: arguments valid against the tool's schema, then the call closes. It
    // replaces a response_format (the answer is the call, not content).
    openai::StructuredOutput call;
    call.spec = tool_call_constraint(request.tools, named ? request.tool_choice_name : "", ctx.template_uses_xml_tools);
    call.param = "tool_choice";
    request.options.structured = std::move(call);
  } else if (request.tool_choice == openai::ToolChoice::kAuto && has_strict_tool(request.tools) &&
             !request.options.structured) {
    // auto with a strict tool: text or calls, each call valid once opened (a response_format, when also given,
    // constrains the whole answer instead).
    openai::StructuredOutput calls;
    calls.spec = auto_tool_call_constraint(request.tools, ctx.template_uses_xml_tools, request.parallel_tool_calls);
    calls.param = "tools";
    request.options.structured = std::move(calls);
    auto_calls = true;
  }
  Result<std::vector<int32_t>> ids = ctx.tokenizer->encode(prompt, /*parse_special=*/true);
  if (!ids.is_ok()) throw ApiError(ErrorCode::kInvalidRequest, ids.status().message(), "messages");
  out.prompt_ids = std::move(ids).value();
  if (check_context) {
    openai::check_context(request.options, static_cast<int64_t>(out.prompt_ids.size()),
                          ctx.model_info.context_length, "messages");
  }
  compile_constraint(ctx, request.options);
  // A prompt that leaves the model inside <think>: the constraint applies once the reasoning ends. Strict tools
  // under auto are constrained from the start instead: their constraint leaves all text free, and a <tool_call>
  // inside the reasoning (Qwen3.5 sometimes skips </think>; the reasoning parser then ends the reasoning there) is
  // a call that must be valid too.
  if (request.options.constraint && cfg.started_in_reasoning && !auto_calls) {
    out.constraint_after_token = reasoning_end_token(ctx);
  }
  return out;
}

int32_t generation_prompt_start(const ServerContext& ctx, const std::vector<int32_t>& prompt_ids) {
  // The Qwen templates open every turn with <|im_start|>; the last one in the prompt is the generation prompt's.
  if (!ctx.tokenizer) return 0;
  const std::optional<int32_t> im_start = ctx.tokenizer->token_id("<|im_start|>");
  if (!im_start) return 0;
  for (size_t i = prompt_ids.size(); i-- > 0;) {
    if (prompt_ids[i] == *im_start) return static_cast<int32_t>(i);
  }
  return 0;
}

std::unique_ptr<Generation> submit_chat(ServerContext& ctx, const std::string& request_id, const PreparedChat& prepared,
                                        const openai::ChatRequest& request) {
  auto generation = std::make_unique<Generation>(*ctx.engine);
  const int32_t resume = generation_prompt_start(ctx, prepared.prompt_ids);
  for (int i = 0; i < request.options.n; ++i) {
    Request r = make_engine_request(ctx, request_id, i, prepared.prompt_ids, request.options);
    r.constraint_after_token = prepared.constraint_after_token;
    r.n_prompt_resume = resume;
    Status s = generation->submit(i, std::move(r));
    if (!s.is_ok()) throw openai::api_error_from_status(s, s.code() == StatusCode::kOutOfRange ? "messages" : "");
  }
  return generation;
}

ChatGenerationSession::ChatGenerationSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record,
                                             std::unique_ptr<Generation> generation, const std::string& id_prefix,
                                             openai::ChatRequest request, PreparedChat prepared)
    : GenerationSession(ctx, std::move(record), std::move(generation), id_prefix, request.options.model,
                        request.options.include_usage),
      request_(std::move(request)),
      n_prompt_(static_cast<int64_t>(prepared.prompt_ids.size())),
      prompt_ids_(std::move(prepared.prompt_ids)) {
  for (int i = 0; i < request_.options.n; ++i) {
    Choice c;
    c.pipeline = std::make_unique<ChatPipeline>(*ctx.tokenizer, prepared.pipeline);
    choices_.push_back(std::move(c));
  }
  if (request_.reasoning_budget) {
    Result<std::vector<int32_t>> ids = ctx.tokenizer->encode(kReasoningClose, /*parse_special=*/true);
    if (ids.is_ok()) close_ids_ = std::move(ids).value();
  }
}

bool ChatGenerationSession::all_finished() const {
  for (const Choice& c : choices_) {
    if (!c.finished) return false;
  }
  return true;
}

openai::Usage ChatGenerationSession::usage() const {
  openai::Usage u;
  u.prompt_tokens = n_prompt_;
  u.cached_tokens = cached_tokens(0, static_cast<int>(choices_.size()), n_prompt_);
  u.completion_tokens = 0;
  u.reasoning_tokens = 0;
  for (const Choice& c : choices_) {
    u.completion_tokens += c.pipeline->n_tokens();
    u.reasoning_tokens += c.pipeline->n_reasoning_tokens();
  }
  return with_speculation(u);
}

std::string ChatGenerationSession::finish_reasons() const {
  std::string reasons;
  for (const Choice& c : choices_) {
    if (!reasons.empty()) reasons += ",";
    reasons += c.finish_reason ? c.finish_reason : (error_ ? "error" : "-");
  }
  return reasons;
}

Json ChatGenerationSession::logprob_entries(const Event& e, size_t first, size_t count) const {
  Json entries = Json::array();
  for (size_t k = first; k < first + count && k < e.token_ids.size() && k < e.logprobs.size(); ++k) {
    std::vector<std::pair<std::string, float>> top;
    if (k < e.top_logprobs.size()) {
      for (const TokenLogprob& t : e.top_logprobs[k]) top.emplace_back(token_text(ctx_, t.token_id), t.logprob);
    }
    entries.push_back(openai::chat_logprob_entry(token_text(ctx_, e.token_ids[k]), e.logprobs[k].logprob, top));
  }
  return entries;
}

void ChatGenerationSession::feed(int index, const Event& e, size_t first, size_t count, std::string* sse) {
  Choice& c = choices_[index];
  std::vector<int32_t> ids(e.token_ids.begin() + static_cast<std::ptrdiff_t>(first),
                           e.token_ids.begin() + static_cast<std::ptrdiff_t>(first + count));
  c.generated.insert(c.generated.end(), ids.begin(), ids.end());
  ChatDelta d = c.pipeline->push(ids);
  Json lp = request_.options.logprobs ? logprob_entries(e, first, count) : Json(nullptr);
  on_delta(index, d, std::move(lp), sse);
}

void ChatGenerationSession::handle(ChoiceEvent& ev, std::string* sse) {
  if (ev.choice < 0 || ev.choice >= static_cast<int>(choices_.size())) return;
  Choice& c = choices_[ev.choice];
  if (c.finished) return;  // e.g. the cancelled tail after a stop string
  const Event& e = ev.event;
  if (!e.token_ids.empty()) {
    observe_tokens(e.token_ids.size());
    const std::optional<int32_t>& budget = request_.reasoning_budget;
    if (budget && !close_ids_.empty() && !c.reasoning_closed_by_budget) {
      // One token at a time: the budget may run out in the middle of an event.
      for (size_t k = 0; k < e.token_ids.size() && !c.pipeline->stopped(); ++k) {
        feed(ev.choice, e, k, 1, sse);
        if (c.pipeline->in_reasoning() && c.pipeline->n_reasoning_tokens() >= *budget) {
          close_reasoning(ev.choice, sse);
          return;  // the rest of this event belongs to the replaced request
        }
      }
    } else {
      feed(ev.choice, e, 0, e.token_ids.size(), sse);
    }
    if (c.pipeline->stopped()) {
      generation_->cancel(ev.choice);
      finish_choice(ev.choice, "stop", sse);
      return;
    }
  }
  if (!e.finished) return;
  generation_->mark_finished(ev.choice);
  if (failed_in_engine(e)) return;
  finish_choice(ev.choice, finish_name(e.finish_reason), sse);
}

void ChatGenerationSession::close_reasoning(int index, std::string* sse) {
  Choice& c = choices_[index];
  c.reasoning_closed_by_budget = true;
  c.generated.insert(c.generated.end(), close_ids_.begin(), close_ids_.end());
  ChatDelta d = c.pipeline->push(close_ids_);
  on_delta(index, d, request_.options.logprobs ? Json::array() : Json(nullptr), sse);
  const int64_t max_tokens = request_.options.max_tokens.value_or(16);
  const int64_t left = max_tokens - static_cast<int64_t>(c.generated.size());
  if (left <= 0) {
    generation_->cancel(index);
    finish_choice(index, "length", sse);
    return;
  }
  std::vector<int32_t> prompt = prompt_ids_;
  prompt.insert(prompt.end(), c.generated.begin(), c.generated.end());
  Request r = make_engine_request(ctx_, record_->id() + "/answer", index, std::move(prompt), request_.options);
  r.max_new_tokens = static_cast<int32_t>(left);
  // Same seed, other draws: the continuation's i-th token must not reuse the i-th reasoning token's draw.
  if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + 0x9E3779B97F4A7C15ull;
  Status s = generation_->resubmit(index, std::move(r));
  if (!s.is_ok()) {
    error_ = openai::api_error_from_status(s);
    generation_->cancel_all();
  }
}

void ChatGenerationSession::finish_choice(int index, const char* reason, std::string* sse) {
  Choice& c = choices_[index];
  ChatDelta d = c.pipeline->finish();
  on_delta(index, d, nullptr, sse);
  if (!c.pipeline->tool_calls().empty() && std::string(reason) == "stop") reason = "tool_calls";
  c.finished = true;
  c.finish_reason = reason;
  on_finish(index, reason, sse);
}

}  // namespace voltserve::http

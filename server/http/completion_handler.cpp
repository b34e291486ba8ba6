// See completion_handler.h. Text hygiene as in chat: UTF-8-safe incremental decoding, stop strings held back.
#include "http/completion_handler.h"

#include <algorithm>

#include "http/constraint_compile.h"
#include "http/generation.h"
#include "http/generation_session.h"
#include "http/stream_support.h"
#include "openai/api_error.h"
#include "openai/completion_request.h"
#include "openai/ids.h"
#include "openai/responses.h"
#include "openai/sse.h"
#include "openai/stop_matcher.h"

namespace voltserve::http {

namespace {

using openai::ApiError;
using openai::ErrorCode;
using openai::Json;

class CompletionSession final : public GenerationSession {
 public:
  CompletionSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, openai::CompletionRequest request,
                    std::vector<int64_t> n_prompt, std::unique_ptr<Generation> generation)
      : GenerationSession(ctx, std::move(record), std::move(generation), "cmpl-", request.options.model,
                          request.options.include_usage),
        request_(std::move(request)),
        n_prompt_(std::move(n_prompt)) {
    for (size_t i = 0; i < n_prompt_.size() * static_cast<size_t>(request_.options.n); ++i) {
      choices_.push_back(std::make_unique<Choice>(*ctx.tokenizer, request_.options));
    }
  }

  Json run_to_completion() override {
    run_until_finished();
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = *choices_[i];
      Json lp = request_.options.logprobs ? c.logprobs : Json(nullptr);
      choices.push_back(openai::completion_choice(static_cast<int>(i), c.text, c.finish_reason, std::move(lp)));
    }
    finalize_record(200);
    return openai::completion_response(meta_, std::move(choices), usage());
  }

 private:
  struct Choice {
    Choice(const Tokenizer& tok, const openai::GenerationOptions& o)
        : decoder(tok, o.skip_special_tokens), stop(o.stop, o.include_stop_str_in_output) {
      logprobs = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                  {"text_offset", Json::array()}};
    }
    IncrementalDecoder decoder;
    openai::StopMatcher stop;
    std::string text;
    int64_t n_tokens = 0;
    bool finished = false;
    const char* finish_reason = nullptr;
    Json logprobs;
  };

  bool all_finished() const override {
    for (const auto& c : choices_) {
      if (!c->finished) return false;
    }
    return true;
  }

  openai::Usage usage() const override {
    openai::Usage u;
    for (int64_t n : n_prompt_) u.prompt_tokens += n;
    // Per prompt, its choices' prompt-level figure (choices are prompt * n + j).
    const int n = request_.options.n;
    for (size_t p = 0; p < n_prompt_.size(); ++p) {
      u.cached_tokens += cached_tokens(static_cast<int>(p) * n, n, n_prompt_[p]);
    }
    for (const auto& c : choices_) u.completion_tokens += c->n_tokens;
    return with_speculation(u);
  }

  std::string usage_chunk() const override {
    return openai::sse_data(openai::completion_usage_chunk(meta_, usage()));
  }

  std::string finish_reasons() const override {
    return choices_.empty() || !choices_[0]->finish_reason ? "-" : choices_[0]->finish_reason;
  }

  void emit(int index, const std::string& text, Json logprobs, const char* finish, std::string* sse) {
    if (!sse || (text.empty() && logprobs.is_null() && !finish)) return;
    *sse += openai::sse_data(openai::completion_chunk(meta_, index, text, finish, std::move(logprobs)));
  }

  void finish_choice(int index, const char* reason, std::string* sse) {
    Choice& c = *choices_[index];
    std::string tail;
    if (!c.stop.matched()) tail = c.stop.push(c.decoder.flush());
    tail += c.stop.flush();
    c.text += tail;
    c.finished = true;
    c.finish_reason = reason;
    emit(index, tail, nullptr, reason, sse);
  }

  void handle(ChoiceEvent& ev, std::string* sse) override {
    if (ev.choice < 0 || ev.choice >= static_cast<int>(choices_.size())) return;
    Choice& c = *choices_[ev.choice];
    if (c.finished) return;
    const Event& e = ev.event;
    if (!e.token_ids.empty()) {
      observe_tokens(e.token_ids.size());
      std::string text;
      Json lp = nullptr;
      if (request_.options.logprobs) {
        lp = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
      }
      for (size_t k = 0; k < e.token_ids.size() && !c.stop.matched(); ++k) {
        ++c.n_tokens;
        if (request_.options.logprobs && k < e.logprobs.size()) {
          Json top = Json::object();
          if (k < e.top_logprobs.size()) {
            for (const TokenLogprob& t : e.top_logprobs[k]) top[token_text(ctx_, t.token_id)] = t.logprob;
          }
          for (Json* target : {&lp, &c.logprobs}) {
            (*target)["tokens"].push_back(token_text(ctx_, e.token_ids[k]));
            (*target)["token_logprobs"].push_back(e.logprobs[k].logprob);
            (*target)["top_logprobs"].push_back(top);
            (*target)["text_offset"].push_back(c.text.size() + text.size());
          }
        }
        text += c.stop.push(c.decoder.push(e.token_ids[k]));
      }
      c.text += text;
      emit(ev.choice, text, sse && request_.options.logprobs ? std::move(lp) : Json(nullptr), nullptr, sse);
    }
    if (c.stop.matched()) {
      generation_->cancel(ev.choice);
      finish_choice(ev.choice, "stop", sse);
      return;
    }
    if (!e.finished) return;
    generation_->mark_finished(ev.choice);
    if (failed_in_engine(e)) return;
    finish_choice(ev.choice, e.finish_reason == FinishReason::kStop ? "stop" : "length", sse);
  }

  openai::CompletionRequest request_;
  std::vector<int64_t> n_prompt_;
  std::vector<std::unique_ptr<Choice>> choices_;
};

}  // namespace

void handle_completions(ServerContext& ctx, const std::string& body, const std::shared_ptr<AccessRecord>& record,
                        httplib::Response& res) {
  openai::CompletionRequest request = openai::parse_completion_request(openai::parse_json_object_body(body), ctx.limits);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> n_prompt;
  const bool max_tokens_given = request.options.max_tokens.has_value();
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    const openai::CompletionPrompt& p = request.prompts[i];
    std::string param = request.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(i) + "]";
    std::vector<int32_t> ids = p.ids;
    if (p.text) {
      Result<std::vector<int32_t>> enc = ctx.tokenizer->encode(*p.text, /*parse_special=*/true);
      if (!enc.is_ok()) throw ApiError(ErrorCode::kInvalidRequest, enc.status().message(), param);
      ids = std::move(enc).value();
    }
    openai::GenerationOptions checked = request.options;
    openai::check_context(checked, static_cast<int64_t>(ids.size()), ctx.model_info.context_length, param);
    if (!max_tokens_given) {
      // The legacy default is 16 tokens, clamped to what the context leaves for the longest prompt.
      request.options.max_tokens = std::min(request.options.max_tokens.value_or(16), std::min(16, *checked.max_tokens));
    }
    n_prompt.push_back(static_cast<int64_t>(ids.size()));
    prompts.push_back(std::move(ids));
  }
  compile_constraint(ctx, request.options);
  auto generation = std::make_unique<Generation>(*ctx.engine);
  int n = request.options.n;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int j = 0; j < n; ++j) {
      int choice = static_cast<int>(i) * n + j;
      Status s = generation->submit(choice, make_engine_request(ctx, record->id(), choice, prompts[i], request.options));
      if (!s.is_ok()) throw openai::api_error_from_status(s, s.code() == StatusCode::kOutOfRange ? "prompt" : "");
    }
  }
  const bool stream = request.options.stream;
  respond(res, *record,
          std::make_shared<CompletionSession>(ctx, record, std::move(request), std::move(n_prompt),
                                              std::move(generation)),
          stream);
}

}  // namespace voltserve::http

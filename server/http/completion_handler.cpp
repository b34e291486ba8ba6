// See completion_handler.h. Text hygiene as in chat: UTF-8-safe incremental decoding, stop strings held back.
#include "http/completion_handler.h"

#include <algorithm>

#include <fmt/format.h>

#include "http/generation.h"
#include "http/server_log.h"
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
using Clock = std::chrono::steady_clock;

class CompletionSession final : public StreamSession {
 public:
  CompletionSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record, openai::CompletionRequest request,
                    std::vector<int64_t> n_prompt, std::unique_ptr<Generation> generation)
      : ctx_(ctx),
        active_(ctx),
        record_(std::move(record)),
        request_(std::move(request)),
        n_prompt_(std::move(n_prompt)),
        generation_(std::move(generation)),
        deadline_(request_deadline(ctx, record_->start())) {
    meta_ = {openai::random_id("cmpl-", 32), std::chrono::duration_cast<std::chrono::seconds>(
                                                 std::chrono::system_clock::now().time_since_epoch()).count(),
             request_.options.model, ctx.system_fingerprint};
    for (size_t i = 0; i < n_prompt_.size() * static_cast<size_t>(request_.options.n); ++i) {
      choices_.push_back(std::make_unique<Choice>(*ctx.tokenizer, request_.options));
    }
  }
  ~CompletionSession() override { generation_->cancel_all(); }

  std::string step(bool& done) override {
    std::string out;
    if (!all_finished() && !error_) {
      std::optional<ChoiceEvent> ev = generation_->next(next_wait(ctx_, deadline_));
      if (ev) {
        handle(*ev, &out);
      } else if (Clock::now() >= deadline_) {
        timeout();
      } else {
        return openai::sse_comment("keep-alive");
      }
    }
    if (error_) {
      out += openai::sse_data(openai::error_body(*error_)) + openai::sse_done();
      done = true;
      finalize_record(error_->http_status());
    } else if (all_finished()) {
      if (request_.options.include_usage) out += openai::sse_data(openai::completion_usage_chunk(meta_, usage()));
      out += openai::sse_done();
      done = true;
      finalize_record(200);
    }
    return out;
  }

  void disconnected() override {
    if (record_written_) return;
    generation_->cancel_all();
    ctx_.metrics.count_disconnect();
    finalize_record(499);
  }

  Json run_to_completion() {
    while (!all_finished() && !error_) {
      std::optional<ChoiceEvent> ev = generation_->next(next_wait(ctx_, deadline_));
      if (ev) {
        handle(*ev, nullptr);
      } else if (Clock::now() >= deadline_) {
        timeout();
      }
    }
    if (error_) throw *error_;
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

  bool all_finished() const {
    for (const auto& c : choices_) {
      if (!c->finished) return false;
    }
    return true;
  }

  openai::Usage usage() const {
    openai::Usage u;
    for (int64_t n : n_prompt_) u.prompt_tokens += n;
    for (const auto& c : choices_) u.completion_tokens += c->n_tokens;
    return u;
  }

  void finalize_record(int status) {
    if (record_written_) return;
    record_written_ = true;
    record_->set_status(status);
    openai::Usage u = usage();
    record_->set_tokens(u.prompt_tokens, u.completion_tokens);
    record_->set_finish_reason(choices_.empty() || !choices_[0]->finish_reason ? "-" : choices_[0]->finish_reason);
    record_->write();
  }

  void timeout() {
    generation_->cancel_all();
    error_ = ApiError(ErrorCode::kTimeout,
                      fmt::format("the request did not finish within {} s (--request-timeout)", ctx_.options.request_timeout_s));
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

  void handle(ChoiceEvent& ev, std::string* sse) {
    if (ev.choice < 0 || ev.choice >= static_cast<int>(choices_.size())) return;
    Choice& c = *choices_[ev.choice];
    if (c.finished) return;
    const Event& e = ev.event;
    if (!e.token_ids.empty()) {
      Clock::time_point now = Clock::now();
      record_->set_first_token(now);
      if (last_token_ != Clock::time_point{}) {
        double per_token = std::chrono::duration<double>(now - last_token_).count() / e.token_ids.size();
        for (size_t k = 0; k < e.token_ids.size(); ++k) ctx_.metrics.observe_inter_token(per_token);
      }
      last_token_ = now;
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
    if (e.finish_reason != FinishReason::kStop && e.finish_reason != FinishReason::kLength) {
      Status s = e.error.is_ok() ? internal_error("the engine ended the request early") : e.error;
      error_ = openai::api_error_from_status(s);
      server_log().error("req={} engine error: {}", record_->id(), s.to_string());
      generation_->cancel_all();
      return;
    }
    finish_choice(ev.choice, e.finish_reason == FinishReason::kStop ? "stop" : "length", sse);
  }

  ServerContext& ctx_;
  ActiveRequest active_;
  std::shared_ptr<AccessRecord> record_;
  openai::CompletionRequest request_;
  std::vector<int64_t> n_prompt_;
  std::unique_ptr<Generation> generation_;
  Clock::time_point deadline_;
  openai::ResponseMeta meta_;
  std::vector<std::unique_ptr<Choice>> choices_;
  bool record_written_ = false;
  std::optional<ApiError> error_;
  Clock::time_point last_token_{};
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
  auto generation = std::make_unique<Generation>(*ctx.engine);
  int n = request.options.n;
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int j = 0; j < n; ++j) {
      int choice = static_cast<int>(i) * n + j;
      Status s = generation->submit(choice, make_engine_request(ctx, record->id(), choice, prompts[i], request.options));
      if (!s.is_ok()) throw openai::api_error_from_status(s, s.code() == StatusCode::kOutOfRange ? "prompt" : "");
    }
  }
  bool stream = request.options.stream;
  auto session = std::make_shared<CompletionSession>(ctx, record, std::move(request), std::move(n_prompt),
                                                     std::move(generation));
  if (stream) {
    record->defer();
    start_sse(res, session);
    return;
  }
  res.set_content(openai::dump_json(session->run_to_completion()), "application/json");
}

}  // namespace voltserve::http

// See generation_session.h.
#include "http/generation_session.h"

#include <algorithm>

#include <fmt/format.h>

#include "http/server_log.h"
#include "openai/ids.h"
#include "openai/sse.h"

namespace voltserve::http {

GenerationSession::GenerationSession(ServerContext& ctx, std::shared_ptr<AccessRecord> record,
                                     std::unique_ptr<Generation> generation, const std::string& id_prefix,
                                     const std::string& model, bool include_usage)
    : ctx_(ctx),
      record_(std::move(record)),
      generation_(std::move(generation)),
      active_(ctx),
      deadline_(request_deadline(ctx, record_->start())),
      include_usage_(include_usage) {
  meta_ = {openai::random_id(id_prefix, 32),
           std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
               .count(),
           model, ctx.system_fingerprint};
  if (ClientConnection* conn = current_connection()) {
    connection_ = conn->shared_from_this();
    watch_ = connection_->watch(generation_->interrupter());
  }
}

GenerationSession::~GenerationSession() {
  if (connection_) connection_->unwatch(watch_);
  generation_->cancel_all();
}

void GenerationSession::wait_for_event(std::string* sse, bool& idle) {
  idle = false;
  std::optional<ChoiceEvent> ev = generation_->next(next_wait(ctx_, deadline_));
  if (generation_->interrupted()) {
    client_gone_ = true;
    return;
  }
  if (ev) {
    if (ev->event.finished && ev->choice >= 0) {
      const auto c = static_cast<size_t>(ev->choice);
      if (cached_.size() <= c) cached_.resize(c + 1, -1);
      if (cached_[c] < 0) cached_[c] = ev->event.n_tokens_cached;
    }
    if (ev->event.finished && ev->event.n_tokens_drafted > 0) {
      const Event& e = ev->event;
      speculation_.drafted_tokens += e.n_tokens_drafted;
      speculation_.accepted_tokens += e.n_tokens_accepted;
      auto add = [](std::vector<int64_t>& total, const std::vector<int32_t>& part) {
        if (total.size() < part.size()) total.resize(part.size(), 0);
        for (size_t j = 0; j < part.size(); ++j) total[j] += part[j];
      };
      add(speculation_.drafted_per_position, e.drafted_per_position);
      add(speculation_.accepted_per_position, e.accepted_per_position);
    }
    handle(*ev, sse);
  } else if (Clock::now() >= deadline_) {
    generation_->cancel_all();
    error_ = openai::ApiError(openai::ErrorCode::kTimeout,
                              fmt::format("the request did not finish within {} s (--request-timeout)",
                                          ctx_.options.request_timeout_s));
  } else {
    idle = true;
  }
}

std::string GenerationSession::step(bool& done) {
  if (!opened_) {
    opened_ = true;
    std::string first = opening();
    if (!first.empty()) return first;
  }
  std::string out;
  if (!all_finished() && !error_) {
    bool idle = false;
    wait_for_event(&out, idle);
    if (client_gone_) {
      disconnected();
      done = true;
      return "";
    }
    if (idle) return openai::sse_comment("keep-alive");
  }
  if (error_) {
    out += stream_error(*error_);
    done = true;
    finalize_record(error_->http_status());
  } else if (all_finished()) {
    out += stream_end();
    done = true;
    finalize_record(200);
  }
  return out;
}

std::string GenerationSession::stream_error(const openai::ApiError& error) {
  return openai::sse_data(openai::error_body(error)) + openai::sse_done();
}

std::string GenerationSession::stream_end() {
  return (include_usage_ ? usage_chunk() : std::string()) + openai::sse_done();
}

void GenerationSession::disconnected() {
  client_gone_ = true;
  if (record_written_) return;
  release_after_disconnect();
  ctx_.metrics.count_disconnect();
  finalize_record(499);  // nginx's "client closed request"
}

void GenerationSession::release_after_disconnect() {
  const std::vector<int> cancelled = generation_->cancel_all();
  if (cancelled.empty() || !ctx_.engine) return;
  // Read after the cancels: each final event then carries at most this count + 1 (the step that was in flight).
  const uint64_t steps = ctx_.engine->stats().n_steps;
  std::vector<bool> waiting(static_cast<size_t>(*std::max_element(cancelled.begin(), cancelled.end())) + 1, false);
  for (int choice : cancelled) waiting[static_cast<size_t>(choice)] = true;
  size_t left = cancelled.size();
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(2);
  while (left > 0 && Clock::now() < give_up) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
    std::optional<ChoiceEvent> ev = generation_->next(wait, /*past_interrupt=*/true);
    if (!ev || !ev->event.finished) continue;
    const size_t choice = static_cast<size_t>(ev->choice);
    if (choice >= waiting.size() || !waiting[choice]) continue;
    waiting[choice] = false;
    --left;
    ctx_.metrics.observe_disconnect_release_steps(ev->event.n_steps > steps ? ev->event.n_steps - steps : 0);
  }
  if (left > 0) server_log().warn("req={} {} cancelled choices not released by the engine within 2 s", record_->id(), left);
}

void GenerationSession::run_until_finished() {
  while (!all_finished() && !error_ && !client_gone_) {
    bool idle = false;
    wait_for_event(nullptr, idle);
  }
  if (client_gone_) {
    disconnected();
    throw ClientGone();
  }
  if (error_) throw *error_;
}

void GenerationSession::finalize_record(int status) {
  if (record_written_) return;
  record_written_ = true;
  record_->set_status(status);
  openai::Usage u = usage();
  record_->set_tokens(u.prompt_tokens, u.completion_tokens);
  record_->set_speculation(u.drafted_tokens, u.accepted_tokens, u.drafted_per_position, u.accepted_per_position);
  record_->set_finish_reason(finish_reasons());
  record_->write();
}

void GenerationSession::observe_tokens(size_t n) {
  Clock::time_point now = Clock::now();
  record_->set_first_token(now);
  if (last_token_ != Clock::time_point{}) {
    double per_token = std::chrono::duration<double>(now - last_token_).count() / static_cast<double>(n);
    for (size_t k = 0; k < n; ++k) ctx_.metrics.observe_inter_token(per_token);
  }
  last_token_ = now;
}

openai::Usage GenerationSession::with_speculation(openai::Usage u) const {
  u.drafted_tokens = speculation_.drafted_tokens;
  u.accepted_tokens = speculation_.accepted_tokens;
  u.drafted_per_position = speculation_.drafted_per_position;
  u.accepted_per_position = speculation_.accepted_per_position;
  return u;
}

int64_t GenerationSession::cached_tokens(int first, int count, int64_t n_prompt) const {
  int64_t least = -1;
  for (int c = first; c < first + count; ++c) {
    const auto i = static_cast<size_t>(c);
    const int64_t v = i < cached_.size() ? cached_[i] : -1;
    if (v < 0) continue;  // not finished (an unfinished choice has no usage to report yet)
    least = least < 0 ? v : std::min(least, v);
  }
  return std::clamp<int64_t>(least, 0, n_prompt);
}

bool GenerationSession::failed_in_engine(const Event& e) {
  if (e.finish_reason == FinishReason::kStop || e.finish_reason == FinishReason::kLength) return false;
  Status s = e.error.is_ok() ? internal_error("the engine ended the request early") : e.error;
  error_ = openai::api_error_from_status(s);
  server_log().error("req={} engine error: {}", record_->id(), s.to_string());
  generation_->cancel_all();
  return true;
}

void respond(httplib::Response& res, AccessRecord& record, std::shared_ptr<GenerationSession> session, bool stream) {
  if (stream) {
    record.defer();
    start_sse(res, std::move(session));
    return;
  }
  res.set_content(openai::dump_json(session->run_to_completion()), "application/json");
}

}  // namespace voltserve::http

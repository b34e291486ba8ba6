// See stream_support.h.
#include "http/stream_support.h"

#include <algorithm>

namespace voltserve::http {

Request make_engine_request(const ServerContext& ctx, const std::string& request_id, int choice,
                            std::vector<int32_t> prompt_ids, const openai::GenerationOptions& options) {
  Request r;
  r.id = choice == 0 ? request_id : request_id + "/" + std::to_string(choice);
  r.prompt_ids = std::move(prompt_ids);
  r.sampling = options.sampling;
  if (r.sampling.seed) r.sampling.seed = *r.sampling.seed + static_cast<uint64_t>(choice);
  r.max_new_tokens = options.max_tokens.value_or(16);
  r.ignore_eos = options.ignore_eos;
  r.stop_token_ids = ctx.model_info.eos_token_ids;
  if (ctx.tokenizer && !ctx.tokenizer->eos_token().empty()) {
    if (auto eos = ctx.tokenizer->token_id(ctx.tokenizer->eos_token())) {
      if (std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), *eos) == r.stop_token_ids.end()) {
        r.stop_token_ids.push_back(*eos);
      }
    }
  }
  for (int32_t id : options.stop_token_ids) r.stop_token_ids.push_back(id);
  r.n_top_logprobs = options.logprobs ? options.top_logprobs : -1;
  r.constraint = options.constraint;
  r.speculative_k = options.speculative_k;
  r.prefix_cache = options.prefix_cache;
  r.cache_salt = options.cache_salt;
  return r;
}

std::string token_text(const ServerContext& ctx, int32_t id) { return std::string(ctx.tokenizer->token_bytes(id)); }

void start_sse(httplib::Response& res, std::shared_ptr<StreamSession> session) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [session](size_t, httplib::DataSink& sink) {
        bool done = false;
        std::string out = session->step(done);
        if (session->client_gone()) return false;
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          session->disconnected();
          return false;
        }
        if (done) sink.done();
        return true;
      },
      [session](bool success) {
        if (!success) session->disconnected();
      });
}

std::chrono::steady_clock::time_point request_deadline(const ServerContext& ctx,
                                                       std::chrono::steady_clock::time_point start) {
  if (ctx.options.request_timeout_s <= 0) return std::chrono::steady_clock::time_point::max();
  return start + std::chrono::milliseconds(static_cast<int64_t>(ctx.options.request_timeout_s * 1000));
}

std::chrono::milliseconds next_wait(const ServerContext& ctx, std::chrono::steady_clock::time_point deadline) {
  auto keepalive = std::chrono::milliseconds(static_cast<int64_t>(std::max(0.05, ctx.options.keepalive_interval_s) * 1000));
  auto now = std::chrono::steady_clock::now();
  if (deadline == std::chrono::steady_clock::time_point::max()) return keepalive;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
  return std::max(std::chrono::milliseconds(0), std::min(keepalive, left));
}

}  // namespace voltserve::http

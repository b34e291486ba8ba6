// See access_log.h.
#include "http/access_log.h"

#include <fmt/format.h>

#include "http/server_log.h"

namespace voltserve::http {

AccessRecord::AccessRecord(ServerContext& ctx, std::string id, std::string endpoint)
    : ctx_(ctx), id_(std::move(id)), endpoint_(std::move(endpoint)) {}

void AccessRecord::write() {
  std::call_once(written_, [&] {
    double duration = seconds_since_start(std::chrono::steady_clock::now());
    ctx_.metrics.count_request(endpoint_, status_);
    if (n_prompt_ > 0 || n_completion_ > 0) {
      ctx_.metrics.count_tokens(n_prompt_, n_completion_);
      ctx_.metrics.observe_e2e(duration);
    }
    if (ttft_s_ >= 0) ctx_.metrics.observe_ttft(ttft_s_);
    double decode_s = ttft_s_ >= 0 ? duration - ttft_s_ : 0.0;
    double tps = n_completion_ > 1 && decode_s > 0 ? static_cast<double>(n_completion_ - 1) / decode_s : 0.0;
    // Speculative requests add drafted=, accepted= and the acceptance per draft position (accepted / drafted).
    std::string spec;
    if (n_drafted_ > 0) {
      spec = fmt::format(" drafted={} accepted={} acceptance_per_position=", n_drafted_, n_accepted_);
      for (size_t j = 0; j < drafted_pos_.size(); ++j) {
        const double rate = drafted_pos_[j] > 0 && j < accepted_pos_.size()
                                ? static_cast<double>(accepted_pos_[j]) / static_cast<double>(drafted_pos_[j])
                                : 0.0;
        spec += fmt::format("{}{:.2f}", j ? "," : "", rate);
      }
    }
    server_log().info("req={} {} status={} prompt_tokens={} completion_tokens={} ttft_ms={:.1f} tokens_per_s={:.1f} "
                      "finish={} duration_ms={:.1f}{}",
                      id_, endpoint_, status_, n_prompt_, n_completion_, ttft_s_ >= 0 ? ttft_s_ * 1000 : -1.0, tps,
                      finish_reason_, duration * 1000, spec);
  });
}

}  // namespace voltserve::http

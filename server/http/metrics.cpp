// See metrics.h. Metric names follow vLLM's where one exists (num_requests_running, prompt_tokens_total, ...),
// with a voltserve_ prefix.
#include "http/metrics.h"

#include <fmt/format.h>

namespace voltserve::http {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, sum_, name,
                     count_);
}

ServerMetrics::ServerMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::count_tokens(int64_t n_prompt, int64_t n_generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n_prompt);
  generation_tokens_ += static_cast<uint64_t>(n_generated);
}

void ServerMetrics::count_disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}

std::string ServerMetrics::render(const EngineStats* stats, const std::string& model_name) const {
  std::string out;
  std::string label = fmt::format("model_name=\"{}\"", model_name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP voltserve_requests_total HTTP requests by endpoint and status.\n"
           "# TYPE voltserve_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += fmt::format("voltserve_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
    }
    out += fmt::format("# HELP voltserve_prompt_tokens_total Prompt tokens of finished requests.\n"
                       "# TYPE voltserve_prompt_tokens_total counter\nvoltserve_prompt_tokens_total{{{}}} {}\n",
                       label, prompt_tokens_);
    out += fmt::format("# HELP voltserve_generation_tokens_total Generated tokens of finished requests.\n"
                       "# TYPE voltserve_generation_tokens_total counter\nvoltserve_generation_tokens_total{{{}}} {}\n",
                       label, generation_tokens_);
    out += fmt::format("# HELP voltserve_client_disconnects_total Streams the client closed before the end.\n"
                       "# TYPE voltserve_client_disconnects_total counter\nvoltserve_client_disconnects_total {}\n",
                       disconnects_);
  }
  if (stats) {
    auto gauge = [&](const char* name, const char* help, double value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, label, value);
    };
    gauge("voltserve_num_requests_running", "Sequences being decoded.", stats->n_running);
    gauge("voltserve_num_requests_waiting", "Requests in the waiting queue.", stats->n_waiting);
    gauge("voltserve_kv_pages_total", "KV cache pages.", stats->kv_pages_total);
    gauge("voltserve_kv_pages_free", "Free KV cache pages.", stats->kv_pages_free);
    gauge("voltserve_kv_cache_usage_perc", "Fraction of KV pages in use.",
          stats->kv_pages_total > 0 ? 1.0 - static_cast<double>(stats->kv_pages_free) / stats->kv_pages_total : 0.0);
    gauge("voltserve_state_slots_total", "Recurrent-state slots.", stats->state_slots_total);
    gauge("voltserve_state_slots_free", "Free recurrent-state slots.", stats->state_slots_free);
    gauge("voltserve_engine_steps_total", "Engine steps run.", static_cast<double>(stats->n_steps));
    gauge("voltserve_engine_healthy", "1 when the engine can serve.", stats->healthy ? 1 : 0);
    gauge("voltserve_structured_output_masks_total", "Structured-output token masks computed.",
          static_cast<double>(stats->n_token_masks));
    gauge("voltserve_structured_output_mask_seconds_total", "Time the mask worker spent computing them.",
          static_cast<double>(stats->mask_us_total) * 1e-6);
    gauge("voltserve_structured_output_mask_wait_seconds_total",
          "Time the step waited for masks after its forward (the part the forward did not hide).",
          static_cast<double>(stats->mask_wait_us_total) * 1e-6);
  }
  ttft_.render("voltserve_time_to_first_token_seconds", "Submit to first generated token.", out);
  itl_.render("voltserve_inter_token_latency_seconds", "Time between generated tokens of a stream.", out);
  e2e_.render("voltserve_e2e_request_latency_seconds", "Request latency from arrival to the last token.", out);
  return out;
}

}  // namespace voltserve::http

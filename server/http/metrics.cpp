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
    : release_steps_({0, 1, 2, 4, 8, 16, 64}),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
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

void ServerMetrics::count_shed(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++shed_[reason];
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
    out += fmt::format("# HELP voltserve_client_disconnects_total Requests whose client closed the connection before "
                       "the answer was complete (streaming or not); each was cancelled.\n"
                       "# TYPE voltserve_client_disconnects_total counter\nvoltserve_client_disconnects_total {}\n",
                       disconnects_);
    const FrontEndCounters& f = connections_;
    std::map<std::string, uint64_t> shed = shed_;
    shed["connection_limit"] += f.shed_connection_limit.load();
    shed["address_limit"] += f.shed_address_limit.load();
    shed["buffer_limit"] += f.shed_buffer_limit.load();
    shed["workers_busy"] += f.shed_workers_busy.load();
    shed["queue_full"] += 0;
    out += "# HELP voltserve_requests_shed_total Requests refused for capacity with 429/503 and Retry-After, by reason.\n"
           "# TYPE voltserve_requests_shed_total counter\n";
    for (const auto& [reason, n] : shed) out += fmt::format("voltserve_requests_shed_total{{reason=\"{}\"}} {}\n", reason, n);
    auto counter = [&](const char* name, const char* help, uint64_t value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
    };
    out += fmt::format("# HELP voltserve_http_connections_open Client connections open now.\n"
                       "# TYPE voltserve_http_connections_open gauge\nvoltserve_http_connections_open {}\n",
                       f.open.load());
    counter("voltserve_http_connections_total", "Client connections accepted.", f.accepted.load());
    counter("voltserve_http_header_timeouts_total",
            "Connections closed because no complete request header came within --header-timeout.",
            f.header_timeouts.load());
    counter("voltserve_http_body_timeouts_total", "Requests whose body did not come within --body-timeout.",
            f.body_timeouts.load());
    counter("voltserve_http_idle_closed_total", "Keep-alive connections closed after --keep-alive-timeout.",
            f.idle_closed.load());
    counter("voltserve_http_connections_evicted_total",
            "Idle or slow connections closed at --max-connections to admit a new one.", f.evicted.load());
    counter("voltserve_http_malformed_requests_total",
            "Requests refused before routing (malformed, header or body too large).", f.malformed.load());
  }
  release_steps_.render("voltserve_disconnect_release_steps",
                        "Engine steps from cancelling a disconnected client's request to its release.", out);
  if (stats) {
    auto gauge = [&](const char* name, const char* help, double value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, label, value);
    };
    gauge("voltserve_num_requests_running", "Sequences being decoded.", stats->n_running);
    gauge("voltserve_num_requests_waiting", "Requests in the waiting queue.", stats->n_waiting);
    gauge("voltserve_kv_pages_total", "KV cache pages.", stats->kv_pages_total);
    gauge("voltserve_kv_pages_free",
          "Free KV cache pages, counting those only the prefix cache holds (it gives them back the moment a "
          "request needs them; voltserve_prefix_cache_pages_only).",
          stats->kv_pages_free);
    gauge("voltserve_kv_cache_usage_perc", "Fraction of KV pages in use.",
          stats->kv_pages_total > 0 ? 1.0 - static_cast<double>(stats->kv_pages_free) / stats->kv_pages_total : 0.0);
    gauge("voltserve_state_slots_total", "Recurrent-state slots.", stats->state_slots_total);
    gauge("voltserve_state_slots_free", "Free recurrent-state slots.", stats->state_slots_free);
    gauge("voltserve_engine_steps_total", "Engine steps run.", static_cast<double>(stats->n_steps));
    out += fmt::format("# HELP voltserve_num_preemptions_total Sequences that gave back their KV pages and state slot "
                       "when the pool ran out, and recomputed later.\n"
                       "# TYPE voltserve_num_preemptions_total counter\nvoltserve_num_preemptions_total{{{}}} {}\n",
                       label, stats->n_preemptions);
    gauge("voltserve_engine_healthy", "1 when the engine can serve.", stats->healthy ? 1 : 0);
    gauge("voltserve_cuda_graph_replays_total",
          "Engine steps and MTP passes the GPU replayed from captured CUDA graphs (0 on the CPU backend).",
          static_cast<double>(stats->n_graph_replays_total));
    gauge("voltserve_structured_output_masks_total", "Structured-output token masks computed.",
          static_cast<double>(stats->n_token_masks));
    gauge("voltserve_structured_output_mask_seconds_total",
          "Time the mask threads took to compute each step's masks (wall, summed over steps).",
          static_cast<double>(stats->mask_us_total) * 1e-6);
    gauge("voltserve_structured_output_mask_wait_seconds_total",
          "Time the engine waited for masks once it needed them (CPU backend: after the layers; CUDA backend: "
          "after launching the step, while the device still runs the forward).",
          static_cast<double>(stats->mask_wait_us_total) * 1e-6);
    // Prefix caching (vLLM's prefix_cache_queries / prefix_cache_hits count tokens; these count both): always
    // present, 0 while the cache is off, so dashboards need not special-case it.
    {
      auto counter = [&](const char* name, const char* help, uint64_t value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, label, value);
      };
      counter("voltserve_prefix_cache_queries_total", "Admissions that looked up the prefix cache.",
              stats->n_prefix_cache_queries_total);
      counter("voltserve_prefix_cache_hits_total", "Admissions that found a cached prefix.",
              stats->n_prefix_cache_hits_total);
      counter("voltserve_prefix_cache_hit_tokens_total", "Prompt tokens not prefilled because they were cached.",
              stats->n_tokens_prefix_cached_total);
      counter("voltserve_prefix_cache_evictions_total", "Cached prefixes evicted (LRU).",
              stats->n_prefix_cache_evictions_total);
      gauge("voltserve_prefix_cache_entries", "Cached prefixes.", stats->prefix_cache_entries);
      gauge("voltserve_prefix_cache_snapshots_used", "GDN state snapshot rows in use.", stats->prefix_snapshots_used);
      gauge("voltserve_prefix_cache_snapshots_total", "GDN state snapshot rows.", stats->prefix_snapshots_total);
      gauge("voltserve_prefix_cache_pages", "KV pages the prefix cache holds (free for requests when needed).",
            stats->prefix_cache_pages);
      gauge("voltserve_prefix_cache_pages_only",
            "KV pages only the prefix cache holds (counted as free in voltserve_kv_pages_free; evicted on demand).",
            stats->prefix_cache_pages_only);
    }
    // Speculative decoding (vLLM's spec_decode names): drafts proposed and accepted, in all and per draft position
    // (position 1 is the first draft of a round).
    if (stats->max_speculative_k > 0) {
      auto counter = [&](const char* name, const char* help, uint64_t value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, label, value);
      };
      counter("voltserve_spec_decode_num_draft_tokens_total", "Draft tokens proposed by the MTP head.",
              stats->n_tokens_drafted_total);
      counter("voltserve_spec_decode_num_accepted_tokens_total", "Draft tokens the target accepted.",
              stats->n_tokens_accepted_total);
      auto per_position = [&](const char* name, const char* help, const std::vector<uint64_t>& values) {
        out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
        for (size_t j = 0; j < values.size(); ++j) {
          out += fmt::format("{}{{{},position=\"{}\"}} {}\n", name, label, j + 1, values[j]);
        }
      };
      per_position("voltserve_spec_decode_num_draft_tokens_per_pos", "Draft tokens proposed at each draft position.",
                   stats->drafted_per_position_total);
      per_position("voltserve_spec_decode_num_accepted_tokens_per_pos", "Draft tokens accepted at each draft position.",
                   stats->accepted_per_position_total);
    }
  }
  ttft_.render("voltserve_time_to_first_token_seconds", "Submit to first generated token.", out);
  itl_.render("voltserve_inter_token_latency_seconds", "Time between generated tokens of a stream.", out);
  e2e_.render("voltserve_e2e_request_latency_seconds", "Request latency from arrival to the last token.", out);
  return out;
}

}  // namespace voltserve::http

// The server's Prometheus metrics: request counts by endpoint and status, requests shed for capacity, token
// counters, TTFT / inter-token / end-to-end latency histograms, the steps a disconnected request took to be released,
// the connection front end's counters, plus engine gauges (running, waiting, KV pages, state slots) and the
// preemption counter, read at scrape time. Rendered in the Prometheus text format. Tested by
// tests/server/metrics_test.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "http/front_end.h"
#include "voltserve/engine.h"

namespace voltserve::http {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends `# TYPE` and the _bucket/_sum/_count lines.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative), last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(const std::string& endpoint, int status);
  void count_tokens(int64_t n_prompt, int64_t n_generated);
  void count_disconnect();
  // A request refused for capacity (429/503 with Retry-After), by reason ("queue_full", ...).
  void count_shed(const std::string& reason);
  // Engine steps between cancelling a disconnected client's request and its release (0 or 1: the step in flight).
  void observe_disconnect_release_steps(uint64_t steps) { release_steps_.observe(static_cast<double>(steps)); }
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_inter_token(double seconds) { itl_.observe(seconds); }
  void observe_e2e(double seconds) { e2e_.observe(seconds); }

  // Prometheus text; `stats` supplies the engine gauges (nullptr while loading).
  std::string render(const EngineStats* stats, const std::string& model_name) const;

  FrontEndCounters& connections() { return connections_; }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generation_tokens_ = 0;
  uint64_t disconnects_ = 0;
  std::map<std::string, uint64_t> shed_;
  FrontEndCounters connections_;
  Histogram release_steps_;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
};

}  // namespace voltserve::http

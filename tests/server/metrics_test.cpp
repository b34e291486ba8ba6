// Prometheus rendering: counters by status, engine gauges, cumulative histogram buckets.
#include <catch2/catch_test_macros.hpp>

#include "http/metrics.h"

using namespace voltserve;
using namespace voltserve::http;

TEST_CASE("metrics render in the Prometheus text format", "[unit]") {
  ServerMetrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.count_tokens(10, 5);
  m.observe_ttft(0.02);
  m.observe_ttft(100);
  EngineStats s;
  s.n_running = 2;
  s.kv_pages_total = 64;
  s.kv_pages_free = 60;
  s.state_slots_total = 4;
  s.state_slots_free = 2;
  s.n_preemptions = 3;
  s.n_graph_replays_total = 1234;
  std::string text = m.render(&s, "tiny");
  CHECK(text.find("voltserve_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2") != std::string::npos);
  CHECK(text.find("status=\"400\"} 1") != std::string::npos);
  CHECK(text.find("voltserve_num_requests_running{model_name=\"tiny\"} 2") != std::string::npos);
  CHECK(text.find("voltserve_kv_pages_free{model_name=\"tiny\"} 60") != std::string::npos);
  CHECK(text.find("voltserve_state_slots_free{model_name=\"tiny\"} 2") != std::string::npos);
  CHECK(text.find("# TYPE voltserve_num_preemptions_total counter\nvoltserve_num_preemptions_total{model_name=\"tiny\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("voltserve_prompt_tokens_total{model_name=\"tiny\"} 10") != std::string::npos);
  CHECK(text.find("voltserve_cuda_graph_replays_total{model_name=\"tiny\"} 1234") != std::string::npos);
  CHECK(text.find("voltserve_time_to_first_token_seconds_bucket{le=\"0.025\"} 1") != std::string::npos);
  CHECK(text.find("voltserve_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2") != std::string::npos);
  CHECK(text.find("voltserve_time_to_first_token_seconds_count 2") != std::string::npos);
  CHECK(text.find("# TYPE voltserve_time_to_first_token_seconds histogram") != std::string::npos);
}

TEST_CASE("prefix cache counters render: queries, hits and hit tokens", "[unit]") {
  ServerMetrics m;
  EngineStats s;
  s.prefix_cache_enabled = true;
  s.n_prefix_cache_queries_total = 7;
  s.n_prefix_cache_hits_total = 3;
  s.n_tokens_prefix_cached_total = 1234;
  s.prefix_snapshots_used = 2;
  s.prefix_cache_pages = 9;
  s.prefix_cache_pages_only = 5;
  const std::string text = m.render(&s, "tiny");
  CHECK(text.find("# TYPE voltserve_prefix_cache_hits_total counter\nvoltserve_prefix_cache_hits_total{model_name=\"tiny\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("voltserve_prefix_cache_queries_total{model_name=\"tiny\"} 7\n") != std::string::npos);
  CHECK(text.find("voltserve_prefix_cache_hit_tokens_total{model_name=\"tiny\"} 1234\n") != std::string::npos);
  CHECK(text.find("voltserve_prefix_cache_snapshots_used{model_name=\"tiny\"} 2\n") != std::string::npos);
  CHECK(text.find("voltserve_prefix_cache_pages{model_name=\"tiny\"} 9\n") != std::string::npos);
  CHECK(text.find("voltserve_prefix_cache_pages_only{model_name=\"tiny\"} 5\n") != std::string::npos);
  CHECK(text.find("# HELP voltserve_kv_pages_free Free KV cache pages, counting those only the prefix cache holds") !=
        std::string::npos);
}

TEST_CASE("speculative decoding counters render per draft position", "[unit]") {
  ServerMetrics m;
  EngineStats s;
  CHECK(m.render(&s, "tiny").find("spec_decode") == std::string::npos);  // not a speculating engine
  s.max_speculative_k = 2;
  s.n_tokens_drafted_total = 10;
  s.n_tokens_accepted_total = 7;
  s.drafted_per_position_total = {5, 5};
  s.accepted_per_position_total = {4, 3};
  std::string text = m.render(&s, "tiny");
  CHECK(text.find("voltserve_spec_decode_num_draft_tokens_total{model_name=\"tiny\"} 10") != std::string::npos);
  CHECK(text.find("voltserve_spec_decode_num_accepted_tokens_total{model_name=\"tiny\"} 7") != std::string::npos);
  CHECK(text.find("voltserve_spec_decode_num_accepted_tokens_per_pos{model_name=\"tiny\",position=\"2\"} 3") !=
        std::string::npos);
  CHECK(text.find("# TYPE voltserve_spec_decode_num_draft_tokens_total counter") != std::string::npos);
}

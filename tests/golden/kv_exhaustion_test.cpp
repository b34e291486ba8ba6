// KV exhaustion on a real model (a fixture, CPU backend): many long requests into a KV pool that holds a few of them
// at once. Pages run out mid-generation, so the scheduler preempts the newest sequences (pages and state slot back,
// recomputed later from their prompt and generated tokens). Every request must complete with exactly the greedy
// tokens it generates alone, the reference prompts must still give transformers' greedy continuation, the
// preemptions must be counted, and the pools must be whole at the end.
#include <catch2/catch_test_macros.hpp>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_rng.h"
#include "voltserve/engine.h"

using namespace voltserve;

namespace {

const std::string kModel = std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/tiny-untied-sharded";

std::unique_ptr<Engine> make_engine(int32_t n_pages, int32_t max_running) {
  ModelOptions m;
  m.model_dir = kModel;
  m.backend = "cpu";
  m.max_context = 256;
  m.page_size = 16;
  m.n_pages = n_pages;
  m.n_slots = max_running;
  EngineConfig c;
  c.max_running = max_running;
  c.max_waiting = 64;
  c.max_tokens_per_step = 256;
  c.prefill_chunk = 64;
  Result<std::unique_ptr<Engine>> e = Engine::load(m, c);
  INFO(e.status().to_string());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, Event> final_events;
  EventSink sink(int key) {
    return [this, key](Event ev) {
      std::lock_guard lk(mu);
      auto& t = tokens[key];
      t.insert(t.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finished) {
        final_events[key] = std::move(ev);
        cv.notify_all();
      }
    };
  }
};

Request greedy(std::vector<int32_t> prompt, int32_t n) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = n;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

}  // namespace

TEST_CASE("a full KV pool preempts by recompute: every request completes, greedy output unchanged, counted", "[golden]") {
  std::ifstream in(kModel + "/reference.json");
  REQUIRE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);

  // The reference prompts (their transformers greedy continuation is known) and ten longer random requests.
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> expected_reference;
  for (const auto& p : ref["prompts"]) {
    requests.push_back(greedy(p["ids"].get<std::vector<int32_t>>(), static_cast<int32_t>(p["greedy"].size())));
    expected_reference.push_back(p["greedy"].get<std::vector<int32_t>>());
  }
  testing::TestRng rng(20);
  for (int i = 0; i < 10; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(40 + 9 * i));
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng.next_u64() % 384);
    requests.push_back(greedy(std::move(prompt), 80));
  }

  // Alone: one sequence at a time in a pool of one context, so nothing is ever preempted.
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = make_engine(16, 1);
    for (size_t i = 0; i < requests.size(); ++i) {
      Collected c;
      REQUIRE(engine->submit(requests[i], c.sink(0)).is_ok());
      engine->wait_idle();
      alone.push_back(c.tokens[0]);
      REQUIRE(alone.back().size() == static_cast<size_t>(requests[i].max_new_tokens));
    }
    CHECK(engine->stats().n_preemptions == 0);
  }
  for (size_t i = 0; i < expected_reference.size(); ++i) CHECK(alone[i] == expected_reference[i]);

  // Together: six running sequences of up to 200 tokens in a pool of 384 tokens (24 pages).
  auto engine = make_engine(24, 6);
  Collected c;
  for (size_t i = 0; i < requests.size(); ++i) REQUIRE(engine->submit(requests[i], c.sink(static_cast<int>(i))).is_ok());
  engine->wait_idle();
  const EngineStats stats = engine->stats();
  std::printf("KV exhaustion: %zu requests, 6 running in a pool of 384 tokens: %llu preemptions, %llu steps\n",
              requests.size(), static_cast<unsigned long long>(stats.n_preemptions),
              static_cast<unsigned long long>(stats.n_steps));
  CHECK(stats.n_preemptions >= 3);
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    REQUIRE(c.final_events.count(static_cast<int>(i)) == 1);
    const Event& done = c.final_events[static_cast<int>(i)];
    CHECK(done.finish_reason == FinishReason::kLength);
    CHECK(done.n_tokens_generated == requests[i].max_new_tokens);
    CHECK(c.tokens[static_cast<int>(i)] == alone[i]);
  }
  CHECK(stats.kv_pages_free == stats.kv_pages_total);
  CHECK(stats.state_slots_free == stats.state_slots_total);
  CHECK(stats.n_running == 0);
  CHECK(stats.n_waiting == 0);
}

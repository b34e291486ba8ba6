// Test helpers for the engine tests: an Engine over a FakeRunner, prompts, and the plain greedy loop over a
// fresh fake runner that the engine's greedy output must equal token for token.
#pragma once

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "support/fake_runner.h"
#include "support/test_rng.h"
#include "voltserve/engine.h"

namespace voltserve::testing {

struct Harness {
  FakeRunner* fake = nullptr;  // owned by the engine
  std::unique_ptr<Engine> engine;
};

inline Harness make_engine(const FakeRunnerOptions& options, const EngineConfig& config) {
  auto runner = std::make_unique<FakeRunner>(options);
  FakeRunner* fake = runner.get();
  Result<std::unique_ptr<Engine>> engine = Engine::create(std::move(runner), config);
  REQUIRE(engine.is_ok());
  return {fake, std::move(engine).value()};
}

inline std::vector<int32_t> make_prompt(int32_t n, uint64_t seed, int32_t n_vocab_real = 60) {
  TestRng rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(n_vocab_real));
  return p;
}

inline Request greedy_request(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  Request r;
  r.id = "test";
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.max_new_tokens = max_new_tokens;
  return r;
}

// Prefill the whole prompt in one forward, then decode one token per forward, argmax each time.
inline std::vector<int32_t> plain_greedy(const FakeRunnerOptions& options, const std::vector<int32_t>& prompt,
                                         int32_t max_new_tokens, const std::vector<int32_t>& stop_ids = {}) {
  FakeRunner runner(options);
  REQUIRE(runner.reset_slot(0).is_ok());
  std::vector<int32_t> pages(static_cast<size_t>(options.n_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::vector<int32_t> tokens = prompt;
  std::vector<int32_t> out;
  StepResult result;
  int32_t n_past = 0;
  while (static_cast<int32_t>(out.size()) < max_new_tokens) {
    SeqStep step;
    step.slot = 0;
    step.page_table = pages;
    step.n_past = n_past;
    step.tokens = std::span<const int32_t>(tokens).subspan(static_cast<size_t>(n_past));
    step.n_prompt = static_cast<int32_t>(prompt.size());
    RowRequest row;
    row.token_index = static_cast<int32_t>(step.tokens.size()) - 1;
    row.flags = kOutSample;
    row.sampling.temperature = 0.0f;
    REQUIRE(runner.step({std::span<const SeqStep>(&step, 1), std::span<const RowRequest>(&row, 1), {}}, result).is_ok());
    n_past = static_cast<int32_t>(tokens.size());
    REQUIRE(result.rows.size() == 1);
    const int32_t t = result.rows[0].token;
    out.push_back(t);
    tokens.push_back(t);
    if (std::find(stop_ids.begin(), stop_ids.end(), t) != stop_ids.end()) break;
  }
  return out;
}

inline void check_pools_full(const Engine& engine) {
  const EngineStats s = engine.stats();
  CHECK(s.kv_pages_free == s.kv_pages_total);
  CHECK(s.state_slots_free == s.state_slots_total);
  CHECK(s.n_running == 0);
  CHECK(s.n_waiting == 0);
}

}  // namespace voltserve::testing

// The opt-in quantized lm_head (ModelOptions::lm_head fp8 / nvfp4) on the fixture models, CPU backend: the
// quantized head's logits against the checkpoint's head over every position of the reference prompts (teacher
// forced: top-1 agreement, largest logit difference) and the greedy continuations (how many leading tokens stay the
// same). Prints the measurement (bench/RESULTS.md records it) and fails below the agreement it must keep.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "voltserve/engine.h"

using namespace voltserve;

namespace {

std::string model_dir(const std::string& name) {
  return std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

std::unique_ptr<Engine> load(const std::string& name, const std::string& lm_head) {
  ModelOptions m;
  m.model_dir = model_dir(name);
  m.backend = "cpu";
  m.lm_head = lm_head;
  m.max_context = 256;
  EngineConfig c;
  c.max_running = 1;
  c.max_tokens_per_step = 256;
  c.prefill_chunk = 256;
  Result<std::unique_ptr<Engine>> e = Engine::load(m, c);
  INFO(e.status().to_string());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

// Runs one request to its end; returns the final event with every generated token in token_ids.
Event run(Engine& engine, Request r) {
  std::mutex mu;
  std::condition_variable cv;
  Event done;
  std::vector<int32_t> tokens;
  bool finished = false;
  Result<RequestId> id = engine.submit(std::move(r), [&](Event ev) {
    std::lock_guard lk(mu);
    tokens.insert(tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
    if (ev.finished) {
      done = std::move(ev);
      finished = true;
      cv.notify_all();
    }
  });
  REQUIRE(id.is_ok());
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return finished; });
  done.token_ids = tokens;
  return done;
}

struct Measure {
  int agree = 0, positions = 0, greedy_same = 0, greedy_len = 0;
  double max_diff = 0.0, max_logit = 0.0;
};

Measure measure(const std::string& name, const std::string& format) {
  std::ifstream in(model_dir(name) + "/reference.json");
  REQUIRE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto base = load(name, "keep");
  auto quant = load(name, format);
  const int32_t vocab = base->vocab_size();
  Measure m;
  for (const auto& p : ref["prompts"]) {
    const std::vector<int32_t> ids = p["ids"].get<std::vector<int32_t>>();
    Request score;
    score.prompt_ids = ids;
    score.max_new_tokens = 0;
    score.n_prompt_logits = static_cast<int32_t>(ids.size());
    const Event a = run(*base, score), b = run(*quant, score);
    REQUIRE(a.prompt_logits.size() == ids.size() * static_cast<size_t>(vocab));
    REQUIRE(b.prompt_logits.size() == a.prompt_logits.size());
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      const float* la = a.prompt_logits.data() + pos * static_cast<size_t>(vocab);
      const float* lb = b.prompt_logits.data() + pos * static_cast<size_t>(vocab);
      m.agree += std::max_element(la, la + vocab) - la == std::max_element(lb, lb + vocab) - lb;
      ++m.positions;
      for (int32_t v = 0; v < vocab; ++v) {
        m.max_diff = std::max(m.max_diff, static_cast<double>(std::fabs(la[v] - lb[v])));
        m.max_logit = std::max(m.max_logit, static_cast<double>(std::fabs(la[v])));
      }
    }
    Request gen;
    gen.prompt_ids = ids;
    gen.max_new_tokens = static_cast<int32_t>(p["greedy"].size());
    gen.sampling.temperature = 0.0f;
    gen.ignore_eos = true;
    const Event ga = run(*base, gen), gb = run(*quant, gen);
    REQUIRE(ga.token_ids.size() == static_cast<size_t>(gen.max_new_tokens));
    int same = 0;
    while (same < gen.max_new_tokens && ga.token_ids[same] == gb.token_ids[same]) ++same;
    m.greedy_same += same;
    m.greedy_len += gen.max_new_tokens;
  }
  std::printf("lm_head %-5s %-20s top-1 agreement %d/%d (%.1f%%), greedy %d/%d leading tokens identical, "
              "max |dlogit| %.4f (max |logit| %.3f)\n", format.c_str(), name.c_str(), m.agree, m.positions,
              100.0 * m.agree / m.positions, m.greedy_same, m.greedy_len, m.max_diff, m.max_logit);
  return m;
}

}  // namespace

TEST_CASE("a quantized lm_head keeps the greedy choice on most positions and the greedy continuations", "[golden]") {
  for (const std::string name : {"tiny-untied-sharded", "tiny-tied", "tiny-chat"}) {
    const Measure fp8 = measure(name, "fp8");
    const Measure nv = measure(name, "nvfp4");
    INFO(name);
    CHECK(fp8.max_diff > 0.0);  // the head really changed
    CHECK(nv.max_diff > fp8.max_diff);
    // Random-weight fixtures have near ties at some positions (tiny-chat's 20 positions: 18 and 17 agree). FP8
    // keeps every greedy continuation (their reference margins are >= 0.02); NVFP4 flips one token of the long
    // tiny-untied-sharded continuation, after which it runs its own way (measured, bench/RESULTS.md).
    CHECK(fp8.agree >= fp8.positions * 85 / 100);
    CHECK(nv.agree >= nv.positions * 80 / 100);
    CHECK(fp8.greedy_same == fp8.greedy_len);
  }
}

TEST_CASE("an lm_head the checkpoint already quantized is left as it is", "[golden]") {
  // tiny-modelopt-nvfp4-mixed stores lm_head as NVFP4: --lm-head fp8 must not requantize it.
  auto base = load("tiny-modelopt-nvfp4-mixed", "keep");
  auto same = load("tiny-modelopt-nvfp4-mixed", "fp8");
  Request score;
  score.prompt_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  score.max_new_tokens = 0;
  score.n_prompt_logits = 8;
  CHECK(run(*base, score).prompt_logits == run(*same, score).prompt_logits);
}

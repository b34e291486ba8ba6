// Golden tests of the Qwen3.5 forward pass on the CPU backend against transformers (fixtures and reference.json
// from tools/make_fixtures.py): logits at every recorded position, greedy continuations, chunked prefill +
// incremental decode vs one full forward, batched sequences vs each alone, chunked vs sequential delta rule.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/qwen35_runner.h"
#include "support/runner_steps.h"
#include "support/tolerances.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

struct RefPrompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> positions;
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

fs::path fixture_dir(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

std::vector<RefPrompt> load_reference(const std::string& name) {
  std::ifstream in(fixture_dir(name) / "reference.json");
  REQUIRE(in.good());
  const auto j = nlohmann::json::parse(in);
  std::vector<RefPrompt> out;
  for (const auto& p : j.at("prompts")) {
    RefPrompt r;
    r.ids = p.at("ids").get<std::vector<int32_t>>();
    r.positions = p.at("positions").get<std::vector<int32_t>>();
    r.logits = p.at("logits").get<std::vector<std::vector<float>>>();
    r.greedy = p.at("greedy").get<std::vector<int32_t>>();
    out.push_back(std::move(r));
  }
  REQUIRE(!out.empty());
  return out;
}

std::unique_ptr<Qwen35Runner> load_runner(const std::string& name, GdnMode mode, int32_t n_slots = 4,
                                          int32_t max_verify_tokens = 0) {
  RunnerOptions opt;
  opt.model.model_dir = fixture_dir(name).string();
  opt.model.max_context = 256;
  opt.model.n_slots = n_slots;
  opt.model.page_size = 16;
  opt.model.n_threads = 2;
  opt.gdn_mode = mode;
  opt.max_step_tokens = 512;
  opt.max_verify_tokens = max_verify_tokens;
  auto r = Qwen35Runner::load(opt);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

// Pages first, first + stride, ... — a non-trivial page table (sequences interleave in the pool).
std::vector<int32_t> strided_pages(int32_t first, int32_t stride, int32_t count) {
  std::vector<int32_t> p(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) p[static_cast<size_t>(i)] = first + i * stride;
  return p;
}

// Logits of every token of `ids` from one forward in `slot` (fresh state).
std::vector<float> full_forward(Qwen35Runner& r, int32_t slot, const std::vector<int32_t>& ids,
                                const std::vector<int32_t>& pages, std::span<const int32_t> rows) {
  REQUIRE(r.reset_slot(slot).is_ok());
  SeqStep step;
  step.slot = slot;
  step.page_table = pages;
  step.n_past = 0;
  step.tokens = ids;
  std::vector<float> logits;
  const Status s = testing::forward_rows(r, std::span<const SeqStep>(&step, 1), rows, logits);
  INFO(s.to_string());
  REQUIRE(s.is_ok());
  return logits;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

const char* mode_name(GdnMode m) {
  return m == GdnMode::kSequential ? "sequential" : m == GdnMode::kChunked ? "chunked" : "auto";
}

}  // namespace

TEST_CASE("CPU logits match the transformers reference at every recorded position", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded", "tiny-mm", "tiny-chat");
  const GdnMode mode = GENERATE(GdnMode::kSequential, GdnMode::kChunked, GdnMode::kAuto);
  INFO("fixture " << name << ", delta rule " << mode_name(mode));
  const auto ref = load_reference(name);
  auto runner = load_runner(name, mode);
  const int32_t vocab = runner->info().vocab_size;
  for (const RefPrompt& p : ref) {
    const auto pages = strided_pages(0, 1, 16);
    const auto logits = full_forward(*runner, 0, p.ids, pages, p.positions);
    REQUIRE(logits.size() == p.positions.size() * static_cast<size_t>(vocab));
    for (size_t i = 0; i < p.positions.size(); ++i) {
      REQUIRE(p.logits[i].size() == static_cast<size_t>(vocab));
      const float err = max_abs_diff(std::span<const float>(logits).subspan(i * vocab, vocab), p.logits[i]);
      INFO("prompt of " << p.ids.size() << " tokens, position " << p.positions[i] << ": max |diff| " << err);
      CHECK(err <= tol::kCpuVsTransformersLogitsAbs);
    }
  }
}

TEST_CASE("Greedy continuation with incremental decode matches transformers", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded", "tiny-mm", "tiny-chat");
  INFO("fixture " << name);
  const auto ref = load_reference(name);
  auto runner = load_runner(name, GdnMode::kAuto);
  for (const RefPrompt& p : ref) {
    const int32_t slot = 1;
    REQUIRE(runner->reset_slot(slot).is_ok());
    const auto pages = strided_pages(3, 2, 14);  // pages 3, 5, 7, ...
    std::vector<int32_t> generated;
    std::vector<float> logits;
    SeqStep step;
    step.slot = slot;
    step.page_table = pages;
    step.n_past = 0;
    step.tokens = p.ids;
    std::vector<int32_t> one(1);
    for (size_t t = 0; t < p.greedy.size(); ++t) {
      const Status s = testing::forward_last(*runner, std::span<const SeqStep>(&step, 1), logits);
      INFO(s.to_string());
      REQUIRE(s.is_ok());
      REQUIRE(logits.size() == static_cast<size_t>(runner->info().vocab_size));
      generated.push_back(argmax(logits));
      step.n_past += static_cast<int32_t>(step.tokens.size());
      one[0] = generated.back();
      step.tokens = one;
    }
    CHECK(generated == p.greedy);
  }
}

TEST_CASE("Chunked prefill then one-token decode equals one full forward", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded", "tiny-mm");
  const int32_t chunk = GENERATE(7, 64);
  const GdnMode mode = GENERATE(GdnMode::kSequential, GdnMode::kChunked);
  INFO("fixture " << name << ", chunk " << chunk << ", delta rule " << mode_name(mode));
  const auto ref = load_reference(name);
  auto runner = load_runner(name, mode);
  const RefPrompt& p = ref.front();
  std::vector<int32_t> all = p.ids;
  all.insert(all.end(), p.greedy.begin(), p.greedy.end());
  std::vector<int32_t> rows(all.size());
  std::iota(rows.begin(), rows.end(), 0);
  const auto full = full_forward(*runner, 0, all, strided_pages(0, 1, 16), rows);
  const int32_t vocab = runner->info().vocab_size;

  const int32_t slot = 2;
  REQUIRE(runner->reset_slot(slot).is_ok());
  const auto pages = strided_pages(60, -3, 16);  // pages 60, 57, 54, ...: descending and sparse
  int32_t n_past = 0;
  float worst = 0.0f;
  while (n_past < static_cast<int32_t>(all.size())) {
    const int32_t n = n_past < static_cast<int32_t>(p.ids.size())
                          ? std::min<int32_t>(chunk, static_cast<int32_t>(p.ids.size()) - n_past)
                          : 1;
    SeqStep step;
    step.slot = slot;
    step.page_table = pages;
    step.n_past = n_past;
    step.tokens = std::span<const int32_t>(all).subspan(static_cast<size_t>(n_past), static_cast<size_t>(n));
    std::vector<int32_t> step_rows(static_cast<size_t>(n));
    std::iota(step_rows.begin(), step_rows.end(), 0);
    std::vector<float> logits;
    REQUIRE(testing::forward_rows(*runner, std::span<const SeqStep>(&step, 1), step_rows, logits).is_ok());
    const auto want = std::span<const float>(full).subspan(static_cast<size_t>(n_past) * vocab,
                                                           static_cast<size_t>(n) * vocab);
    worst = std::max(worst, max_abs_diff(logits, want));
    n_past += n;
  }
  INFO("max |chunked - full| over " << all.size() << " positions: " << worst);
  CHECK(worst <= tol::kSameBackendLogitsAbs);
  // Every op computes a token's values in the same order whatever else is in the step, so the sequential delta
  // rule makes chunked prefill + decode bit-identical to the full forward.
  if (mode == GdnMode::kSequential) CHECK(worst == 0.0f);
}

TEST_CASE("Several sequences in one forward equal each run alone", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded");
  const GdnMode mode = GENERATE(GdnMode::kSequential, GdnMode::kAuto);
  INFO("fixture " << name << ", delta rule " << mode_name(mode));
  const auto ref = load_reference(name);
  const auto& long_ids = ref.front().ids;
  const auto& short_ids = ref.back().ids;
  // Three different sequences; each advances by a different plan per step (prefill chunks and decodes mixed).
  const std::vector<std::vector<int32_t>> seqs = {
      std::vector<int32_t>(long_ids.begin(), long_ids.begin() + 100),
      short_ids,
      std::vector<int32_t>(long_ids.begin() + 30, long_ids.end()),
  };
  const std::vector<std::vector<int32_t>> plan = {{40, 3, 64}, {50, 2, 30}, {10, 1, 6}, {1, 1, 1}};
  const std::vector<int32_t> slots = {2, 0, 3};
  const std::vector<std::vector<int32_t>> pages = {strided_pages(1, 3, 10), strided_pages(2, 3, 10),
                                                   strided_pages(30, 1, 10)};

  auto runner = load_runner(name, mode);
  for (int32_t s : slots) REQUIRE(runner->reset_slot(s).is_ok());
  std::vector<int32_t> n_past(3, 0);
  std::vector<std::vector<float>> batched(3);  // per sequence: the logits of each step's last token
  std::vector<std::vector<int32_t>> checked_pos(3);
  const int32_t vocab = runner->info().vocab_size;
  for (const auto& counts : plan) {
    std::vector<SeqStep> steps;
    std::vector<size_t> who;
    for (size_t i = 0; i < 3; ++i) {
      const int32_t n = std::min<int32_t>(counts[i], static_cast<int32_t>(seqs[i].size()) - n_past[i]);
      if (n <= 0) continue;
      SeqStep st;
      st.slot = slots[i];
      st.page_table = pages[i];
      st.n_past = n_past[i];
      st.tokens = std::span<const int32_t>(seqs[i]).subspan(static_cast<size_t>(n_past[i]), static_cast<size_t>(n));
      steps.push_back(st);
      who.push_back(i);
      n_past[i] += n;
      checked_pos[i].push_back(n_past[i] - 1);
    }
    std::vector<float> logits;
    const Status s = testing::forward_last(*runner, steps, logits);
    INFO(s.to_string());
    REQUIRE(s.is_ok());
    REQUIRE(logits.size() == steps.size() * static_cast<size_t>(vocab));
    for (size_t k = 0; k < who.size(); ++k) {
      batched[who[k]].insert(batched[who[k]].end(), logits.begin() + static_cast<std::ptrdiff_t>(k * vocab),
                             logits.begin() + static_cast<std::ptrdiff_t>((k + 1) * vocab));
    }
  }
  auto alone_runner = load_runner(name, mode, 1);
  for (size_t i = 0; i < 3; ++i) {
    const auto alone = full_forward(*alone_runner, 0, seqs[i], strided_pages(0, 1, 10), checked_pos[i]);
    const float err = max_abs_diff(batched[i], alone);
    INFO("sequence " << i << ": max |batched - alone| " << err);
    CHECK(err <= tol::kSameBackendLogitsAbs);
    if (mode == GdnMode::kSequential) CHECK(err == 0.0f);
  }
}

TEST_CASE("Chunked delta rule equals the sequential one", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded");
  const auto ref = load_reference(name);
  const auto& ids = ref.front().ids;
  REQUIRE(ids.size() > 64);  // spans more than one chunk
  std::vector<int32_t> rows(ids.size());
  std::iota(rows.begin(), rows.end(), 0);
  auto seq = load_runner(name, GdnMode::kSequential, 1);
  auto chk = load_runner(name, GdnMode::kChunked, 1);
  const auto a = full_forward(*seq, 0, ids, strided_pages(0, 1, 16), rows);
  const auto b = full_forward(*chk, 0, ids, strided_pages(0, 1, 16), rows);
  const float err = max_abs_diff(a, b);
  INFO("max |chunked - sequential| " << err);
  CHECK(err <= tol::kGdnChunkedVsSequentialAbs);
}

TEST_CASE("The runner rejects bad steps with a clear error", "[unit]") {
  auto runner = load_runner("tiny-tied", GdnMode::kAuto, 2);
  const std::vector<int32_t> pages = strided_pages(0, 1, 4);
  const std::vector<int32_t> ok_ids = {1, 2, 3};
  std::vector<float> logits;
  auto run = [&](SeqStep st) { return testing::forward_last(*runner, std::span<const SeqStep>(&st, 1), logits); };
  SeqStep base;
  base.slot = 0;
  base.page_table = pages;
  base.tokens = ok_ids;
  REQUIRE(run(base).is_ok());

  SeqStep s = base;
  s.slot = 5;
  CHECK(run(s).message().find("slot 5") != std::string::npos);
  const std::vector<int32_t> bad_ids = {1, 384};
  s = base;
  s.tokens = bad_ids;
  CHECK(run(s).message().find("token id 384") != std::string::npos);
  s = base;
  s.page_table = {};
  CHECK(run(s).message().find("page_table") != std::string::npos);
  const std::vector<int32_t> bad_pages = {100000};
  s = base;
  s.page_table = bad_pages;
  CHECK(run(s).message().find("page 100000") != std::string::npos);
  s = base;
  s.n_past = 1000;
  CHECK(run(s).message().find("context length") != std::string::npos);
  s = base;
  s.tokens = {};
  CHECK(run(s).message().find("no tokens") != std::string::npos);
  SeqStep two[2] = {base, base};
  CHECK(testing::forward_last(*runner, two, logits).message().find("two steps") != std::string::npos);
  CHECK(runner->reset_slot(-1).code() == StatusCode::kOutOfRange);
}

TEST_CASE("Loading a missing or broken model folder is a clear error", "[unit]") {
  RunnerOptions opt;
  opt.model.n_slots = 1;
  opt.model.model_dir = fixture_dir("no-such-model").string();
  auto missing = Qwen35Runner::load(opt);
  REQUIRE(!missing.is_ok());
  CHECK(missing.status().message().find("no-such-model") != std::string::npos);
  opt.model.backend = "tpu";
  opt.model.model_dir = fixture_dir("tiny-tied").string();
  auto bad_backend = Qwen35Runner::load(opt);
  REQUIRE(!bad_backend.is_ok());
  CHECK(bad_backend.status().message().find("tpu") != std::string::npos);
}

TEST_CASE("Padding logit rows past the tokenizer are reported as not real", "[unit]") {
  RunnerOptions opt;
  opt.model.n_slots = 1;
  opt.model.model_dir = fixture_dir("tiny-tied").string();
  auto all_rows = Qwen35Runner::load(opt);
  REQUIRE(all_rows.is_ok());
  const int32_t vocab = (*all_rows)->info().vocab_size;
  CHECK((*all_rows)->info().n_vocab_real == vocab);
  opt.model.n_vocab_real = vocab - 7;
  auto padded = Qwen35Runner::load(opt);
  REQUIRE(padded.is_ok());
  CHECK((*padded)->info().vocab_size == vocab);
  CHECK((*padded)->info().n_vocab_real == vocab - 7);
  opt.model.n_vocab_real = vocab + 100;  // a tokenizer larger than the matrix cannot add rows
  auto larger = Qwen35Runner::load(opt);
  REQUIRE(larger.is_ok());
  CHECK((*larger)->info().n_vocab_real == vocab);
}

}  // namespace voltserve

// The runner contract on the fixture models, CPU backend: a step's tensors are the same memory from one step of a
// size to the next (capture-ready) and nothing is allocated per step; per-row outputs (logits, hidden states,
// samples) for arbitrary rows of several sequences; a verify item plus a partial commit leaves the sequence exactly
// as decoding the kept tokens one by one; the backend's sampling op agrees with the reference sampler on the
// logits it returns, and a seeded request's tokens do not depend on what else is in the step.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/linear_weight.h"
#include "model/model_config.h"
#include "model/qwen35_model.h"
#include "model/qwen35_runner.h"
#include "model/tensor_names.h"
#include "sampling/sampling.h"
#include "support/recording_backend.h"
#include "support/runner_steps.h"
#include "support/tolerances.h"
#include "voltserve/engine.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

std::unique_ptr<Qwen35Runner> load_runner(const std::string& name, GdnMode mode, int32_t n_slots,
                                          int32_t max_verify_tokens = 0) {
  RunnerOptions opt;
  opt.model.model_dir = fixture_dir(name).string();
  opt.model.max_context = 256;
  opt.model.n_slots = n_slots;
  opt.model.n_threads = 2;
  opt.gdn_mode = mode;
  opt.max_step_tokens = 256;
  opt.max_verify_tokens = max_verify_tokens;
  auto r = Qwen35Runner::load(opt);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return std::move(r).value();
}

std::vector<int32_t> iota_pages(int32_t first, int32_t count) {
  std::vector<int32_t> p(static_cast<size_t>(count));
  std::iota(p.begin(), p.end(), first);
  return p;
}

std::vector<int32_t> test_ids(int32_t n, int32_t vocab, uint32_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37u + salt * 101u + 7u) % static_cast<uint32_t>(vocab));
  return ids;
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

// Logits of positions `rows` of ids from one fresh forward in slot 0 of `r`.
std::vector<float> one_pass_logits(Qwen35Runner& r, const std::vector<int32_t>& ids, std::span<const int32_t> rows) {
  REQUIRE(r.reset_slot(0).is_ok());
  const auto pages = iota_pages(0, 16);
  SeqStep st;
  st.slot = 0;
  st.page_table = pages;
  st.tokens = ids;
  st.n_prompt = static_cast<int32_t>(ids.size());
  std::vector<float> logits;
  REQUIRE(testing::forward_rows(r, std::span<const SeqStep>(&st, 1), rows, logits).is_ok());
  return logits;
}

}  // namespace

TEST_CASE("A step's tensors are the same memory from one step of a size to the next", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded");
  INFO("fixture " << name);
  testing::RecordingBackend backend(make_cpu_backend({2, GdnMode::kAuto}));
  auto model = Qwen35Model::load(fixture_dir(name), backend);
  REQUIRE(model.is_ok());
  ModelStepLimits limits;
  limits.max_tokens = 64;
  limits.max_seqs = 4;
  limits.max_page_refs = 64;
  limits.max_bias = 16;
  limits.n_slots = 4;
  REQUIRE((*model)->configure(limits).is_ok());
  auto cache = (*model)->alloc_cache(16, 32, 4, 0);
  REQUIRE(cache.is_ok());
  const int64_t allocations = backend.n_allocations();
  const int32_t vocab = static_cast<int32_t>((*model)->config().vocab_size);

  // Two steps of 2 sequences x (5 + 1) tokens with 2 output rows each, at different positions and tokens.
  auto make_batch = [&](int32_t n_past, uint32_t salt) {
    StepBatch b;
    const std::vector<int32_t> lens = {5, 1};
    for (int32_t s = 0; s < 2; ++s) {
      kernels::SeqDesc d;
      d.row0 = b.n_tokens();
      d.n_tokens = lens[static_cast<size_t>(s)];
      d.n_past = n_past;
      d.slot = s;
      d.page_offset = static_cast<int32_t>(b.page_table.size());
      d.n_prompt = 100;
      for (int32_t p = 0; p < 2; ++p) b.page_table.push_back(s * 8 + p);
      const auto ids = test_ids(d.n_tokens, vocab, salt + static_cast<uint32_t>(s));
      b.tokens.insert(b.tokens.end(), ids.begin(), ids.end());
      b.seqs.push_back(d);
      OutputRow o;
      o.row = d.row0 + d.n_tokens - 1;
      o.flags = kOutSample | kOutHidden;
      o.sampling.temperature = 0.0f;
      b.outputs.push_back(o);
    }
    return b;
  };
  StepResult result;
  const StepBatch a = make_batch(0, 1);
  REQUIRE((*model)->forward(a, *cache, result).is_ok());
  const std::vector<testing::RecordedOp> first = backend.ops();
  backend.clear_ops();
  const StepBatch b = make_batch(5, 9);
  REQUIRE((*model)->forward(b, *cache, result).is_ok());
  REQUIRE(!first.empty());
  CHECK(backend.ops().size() == first.size());
  CHECK(backend.ops() == first);
  CHECK(backend.n_allocations() == allocations);
  // Not vacuous: every op of the step was recorded with its tensors.
  size_t n_linear = 0;
  for (const auto& op : first) n_linear += op.name == "linear" ? 1 : 0;
  CHECK(n_linear == 4 * static_cast<size_t>((*model)->config().n_layers));  // mixer in, mixer out, gate|up, down
}

TEST_CASE("Per-row outputs for any rows of several sequences: logits, hidden states, samples", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded");
  INFO("fixture " << name);
  auto runner = load_runner(name, GdnMode::kSequential, 3);
  const int32_t vocab = runner->info().vocab_size;
  const int32_t hidden = runner->info().hidden_size;
  const auto ids_a = test_ids(23, vocab, 3);
  const auto ids_b = test_ids(9, vocab, 5);
  const auto pages_a = iota_pages(0, 4);
  const auto pages_b = iota_pages(10, 4);
  REQUIRE(runner->reset_slot(1).is_ok());
  REQUIRE(runner->reset_slot(2).is_ok());
  SeqStep steps[2];
  steps[0].slot = 1;
  steps[0].page_table = pages_a;
  steps[0].tokens = ids_a;
  steps[0].n_prompt = 23;
  steps[1].slot = 2;
  steps[1].page_table = pages_b;
  steps[1].tokens = ids_b;
  steps[1].n_prompt = 9;
  // Rows in an arbitrary order, mixing what they ask for.
  std::vector<RowRequest> out(5);
  out[0] = {1, 4, kOutLogits | kOutHidden, {}, {}, {}};
  out[1] = {0, 0, kOutLogits, {}, {}, {}};
  out[2] = {0, 17, kOutHidden | kOutLogits | kOutSample, {}, {}, {}};
  out[2].sampling.temperature = 0.0f;
  out[3] = {1, 8, kOutSample | kOutLogprobs, {}, {}, {}};
  out[3].sampling.temperature = 0.0f;
  out[3].sampling.n_top_logprobs = 3;
  out[4] = {0, 22, kOutLogits, {}, {}, {}};
  StepResult result;
  REQUIRE(runner->step({steps, out, {}}, result).is_ok());
  REQUIRE(result.rows.size() == 5);
  REQUIRE(result.logits.size() == 4 * static_cast<size_t>(vocab));
  REQUIRE(result.hidden.size() == 2 * static_cast<size_t>(hidden));

  // Each logits row equals the same position of a one-pass forward of its sequence alone.
  auto alone = load_runner(name, GdnMode::kSequential, 1);
  const std::vector<int32_t> rows_b = {4, 8};
  const std::vector<int32_t> rows_a = {0, 17, 22};
  const auto ref_b = one_pass_logits(*alone, ids_b, rows_b);
  const auto ref_a = one_pass_logits(*alone, ids_a, rows_a);
  const auto v = static_cast<size_t>(vocab);
  auto got = [&](size_t i) { return std::span<const float>(result.logits).subspan(i * v, v); };
  CHECK(max_abs_diff(got(0), std::span<const float>(ref_b).subspan(0, v)) == 0.0f);
  CHECK(max_abs_diff(got(1), std::span<const float>(ref_a).subspan(0, v)) == 0.0f);
  CHECK(max_abs_diff(got(2), std::span<const float>(ref_a).subspan(v, v)) == 0.0f);
  CHECK(max_abs_diff(got(3), std::span<const float>(ref_a).subspan(2 * v, v)) == 0.0f);

  // The hidden state is the lm_head's input: lm_head · hidden reproduces the row's logits.
  auto config = load_model_config(fixture_dir(name));
  REQUIRE(config.is_ok());
  auto ckpt = Checkpoint::open(fixture_dir(name));
  REQUIRE(ckpt.is_ok());
  const std::string head = config->tie_word_embeddings ? config->tensor_prefix + "embed_tokens" : std::string(kLmHeadModule);
  auto w = load_linear(*ckpt, *config, head, vocab, hidden);
  REQUIRE(w.is_ok());
  const std::vector<float> dense = dequantize(*w);
  for (size_t h = 0; h < 2; ++h) {
    const float* hrow = result.hidden.data() + h * static_cast<size_t>(hidden);
    const auto logits_row = got(h == 0 ? 0 : 2);
    float worst = 0.0f;
    for (int32_t t = 0; t < vocab; ++t) {
      double acc = 0.0;
      for (int32_t k = 0; k < hidden; ++k) acc += static_cast<double>(hrow[k]) * dense[static_cast<size_t>(t) * hidden + k];
      worst = std::max(worst, static_cast<float>(std::fabs(acc - logits_row[static_cast<size_t>(t)])));
    }
    INFO("hidden row " << h << ": max |lm_head . hidden - logits| " << worst);
    CHECK(worst <= 1e-4f);
  }

  // Greedy samples are the argmax of the row's logits; logprobs come with the sample that asked for them.
  const auto argmax = [](std::span<const float> x) {
    return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  };
  CHECK(result.rows[2].token == argmax(got(2)));
  CHECK(result.rows[3].token == argmax(std::span<const float>(ref_b).subspan(v, v)));
  CHECK(result.rows[3].top.size() == 3);
  CHECK(result.rows[3].top[0].first == result.rows[3].token);
  CHECK(result.rows[0].token == -1);  // no sample asked
}

TEST_CASE("A verify item and a partial commit equal decoding the kept tokens one by one", "[golden]") {
  const std::string name = GENERATE("tiny-tied", "tiny-untied-sharded");
  const GdnMode mode = GENERATE(GdnMode::kSequential, GdnMode::kAuto);
  const int32_t k = GENERATE(1, 3, 7, 15);
  INFO("fixture " << name << " k=" << k);
  auto spec = load_runner(name, mode, 2, 16);
  auto plain = load_runner(name, mode, 2);
  const int32_t vocab = spec->info().vocab_size;
  const auto prompt = test_ids(30, vocab, 11);
  const auto drafts = test_ids(k + 1, vocab, 13);  // [last token, d1..dk]
  const auto tail = test_ids(4, vocab, 17);        // decoded after the commit
  const auto pages = iota_pages(0, 8);

  std::vector<int32_t> keeps = {1, (k + 2) / 2, k + 1};
  keeps.erase(std::unique(keeps.begin(), keeps.end()), keeps.end());
  for (int32_t n_keep : keeps) {
    INFO("n_keep " << n_keep);
    // Speculative: prompt, one verify item of k + 1 tokens, commit n_keep, then decode the tail.
    REQUIRE(spec->reset_slot(1).is_ok());
    SeqStep st;
    st.slot = 1;
    st.page_table = pages;
    st.tokens = prompt;
    st.n_prompt = 30;
    std::vector<float> logits;
    REQUIRE(testing::forward_last(*spec, std::span<const SeqStep>(&st, 1), logits).is_ok());
    st.n_past = 30;
    st.tokens = drafts;
    st.verify = true;
    std::vector<int32_t> all_rows(static_cast<size_t>(k + 1));
    std::iota(all_rows.begin(), all_rows.end(), 0);
    std::vector<float> verify_logits;
    REQUIRE(testing::forward_rows(*spec, std::span<const SeqStep>(&st, 1), all_rows, verify_logits).is_ok());
    REQUIRE(spec->commit(1, n_keep).is_ok());
    st.verify = false;
    std::vector<float> spec_tail;
    int32_t n_past = 30 + n_keep;
    for (int32_t t : tail) {
      st.n_past = n_past++;
      st.tokens = std::span<const int32_t>(&t, 1);
      REQUIRE(testing::forward_last(*spec, std::span<const SeqStep>(&st, 1), logits).is_ok());
      spec_tail.insert(spec_tail.end(), logits.begin(), logits.end());
    }

    // Plain: prompt, then the kept tokens one at a time, then the tail.
    REQUIRE(plain->reset_slot(0).is_ok());
    SeqStep pt;
    pt.slot = 0;
    pt.page_table = pages;
    pt.tokens = prompt;
    pt.n_prompt = 30;
    REQUIRE(testing::forward_last(*plain, std::span<const SeqStep>(&pt, 1), logits).is_ok());
    std::vector<float> plain_verify;
    n_past = 30;
    for (int32_t i = 0; i < n_keep; ++i) {
      pt.n_past = n_past++;
      pt.tokens = std::span<const int32_t>(drafts).subspan(static_cast<size_t>(i), 1);
      REQUIRE(testing::forward_last(*plain, std::span<const SeqStep>(&pt, 1), logits).is_ok());
      plain_verify.insert(plain_verify.end(), logits.begin(), logits.end());
    }
    std::vector<float> plain_tail;
    for (int32_t t : tail) {
      pt.n_past = n_past++;
      pt.tokens = std::span<const int32_t>(&t, 1);
      REQUIRE(testing::forward_last(*plain, std::span<const SeqStep>(&pt, 1), logits).is_ok());
      plain_tail.insert(plain_tail.end(), logits.begin(), logits.end());
    }
    // The verify rows of the kept tokens are the decode steps' logits; what follows the commit is identical.
    const float err_rows = max_abs_diff(std::span<const float>(verify_logits).first(plain_verify.size()), plain_verify);
    const float err_tail = max_abs_diff(spec_tail, plain_tail);
    INFO("verify rows vs decode " << err_rows << ", after commit " << err_tail);
    CHECK(err_rows <= tol::kSameBackendLogitsAbs);
    CHECK(err_tail <= tol::kSameBackendLogitsAbs);
    if (mode == GdnMode::kSequential) {
      CHECK(err_rows == 0.0f);
      CHECK(err_tail == 0.0f);
    }
  }
}

TEST_CASE("commit refuses what was not verified", "[unit]") {
  auto runner = load_runner("tiny-tied", GdnMode::kAuto, 2, 4);
  CHECK(runner->commit(0, 1).code() == StatusCode::kInvalidArgument);  // no verify item
  const auto pages = iota_pages(0, 4);
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  SeqStep st;
  st.slot = 0;
  st.page_table = pages;
  st.tokens = ids;
  st.verify = true;
  std::vector<float> logits;
  CHECK(testing::forward_last(*runner, std::span<const SeqStep>(&st, 1), logits).message().find("verify item of 5") !=
        std::string::npos);
  st.tokens = std::span<const int32_t>(ids).first(3);
  REQUIRE(testing::forward_last(*runner, std::span<const SeqStep>(&st, 1), logits).is_ok());
  CHECK(runner->commit(0, 0).code() == StatusCode::kInvalidArgument);
  CHECK(runner->commit(0, 4).code() == StatusCode::kInvalidArgument);
  CHECK(runner->commit(0, 2).is_ok());
  CHECK(runner->commit(0, 2).code() == StatusCode::kInvalidArgument);  // committed once
  auto no_spec = load_runner("tiny-tied", GdnMode::kAuto, 1, 0);
  st.slot = 0;
  CHECK(testing::forward_last(*no_spec, std::span<const SeqStep>(&st, 1), logits).code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("The backend's sampling op agrees with the reference sampler on the logits it computed", "[golden]") {
  auto runner = load_runner("tiny-untied-sharded", GdnMode::kAuto, 4);
  const int32_t vocab = runner->info().vocab_size;
  const auto prompt = test_ids(12, vocab, 21);
  const auto generated = test_ids(6, vocab, 23);
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), generated.begin(), generated.end());
  const auto pages = iota_pages(0, 4);
  const std::vector<std::pair<int32_t, float>> bias = {{3, 2.5f}, {17, -100.0f}, {40, 1.0f}};

  struct Params {
    float temperature, top_p, min_p;
    int32_t top_k;
    float presence, frequency, repetition;
  };
  const std::vector<Params> cases = {{0.0f, 1.0f, 0.0f, 0, 0.0f, 0.0f, 1.0f},   {1.0f, 1.0f, 0.0f, 0, 0.0f, 0.0f, 1.0f},
                                     {0.7f, 0.9f, 0.0f, 20, 0.0f, 0.0f, 1.0f},  {1.3f, 0.5f, 0.05f, 0, 0.5f, 0.2f, 1.0f},
                                     {0.9f, 1.0f, 0.0f, 5, 1.5f, 0.0f, 1.3f},   {0.0f, 1.0f, 0.0f, 0, 2.0f, 1.0f, 2.0f}};
  for (size_t c = 0; c < cases.size(); ++c) {
    for (uint64_t seed : {1ULL, 77ULL, 123456789ULL}) {
      INFO("case " << c << " seed " << seed);
      REQUIRE(runner->reset_slot(0).is_ok());
      SeqStep st;
      st.slot = 0;
      st.page_table = pages;
      st.tokens = seq;
      st.n_prompt = 12;
      RowRequest o;
      o.token_index = static_cast<int32_t>(seq.size()) - 1;
      o.flags = kOutSample | kOutLogprobs | kOutLogits;
      const Params& p = cases[c];
      o.sampling.temperature = p.temperature;
      o.sampling.top_p = p.top_p;
      o.sampling.min_p = p.min_p;
      o.sampling.top_k = p.top_k;
      o.sampling.presence_penalty = p.presence;
      o.sampling.frequency_penalty = p.frequency;
      o.sampling.repetition_penalty = p.repetition;
      o.sampling.n_top_logprobs = 5;
      o.sampling.seed = seed;
      o.sampling.draw_index = generated.size();
      o.logit_bias = bias;
      StepResult result;
      REQUIRE(runner->step({std::span<const SeqStep>(&st, 1), std::span<const RowRequest>(&o, 1), {}}, result).is_ok());
      REQUIRE(result.logits.size() == static_cast<size_t>(vocab));

      // The reference on the same logits, with penalty state rebuilt from the same tokens.
      std::vector<int32_t> counts(static_cast<size_t>(vocab), 0);
      std::vector<uint32_t> bits(static_cast<size_t>((vocab + 31) / 32), 0u);
      kernels::sampling::PenaltyState ps{counts.data(), bits.data(), vocab, 1};
      kernels::SeqDesc d;
      d.n_tokens = static_cast<int32_t>(seq.size());
      d.slot = 0;
      d.n_prompt = 12;
      kernels::sampling::update_penalties_ref(ps, seq.data(), &d, 1);
      kernels::sampling::RowParams rp = o.sampling;
      rp.slot = 0;
      rp.flags = kernels::sampling::kSample | kernels::sampling::kLogprobs;
      rp.bias_offset = 0;
      rp.bias_count = 3;
      const std::vector<int32_t> bias_ids = {3, 17, 40};
      const std::vector<float> bias_values = {2.5f, -100.0f, 1.0f};
      int32_t token = -1, status = 0, nan_index = -1;
      float logprob = 0.0f;
      std::vector<int32_t> top_ids(kernels::sampling::kMaxTopLogprobs);
      std::vector<float> top_lp(kernels::sampling::kMaxTopLogprobs);
      kernels::sampling::RefArgs a;
      a.logits = result.logits.data();
      a.logits_stride = vocab;
      a.n_rows = 1;
      a.n_vocab_real = vocab;
      a.rows = &rp;
      a.bias_ids = bias_ids.data();
      a.bias_values = bias_values.data();
      a.penalties = ps;
      a.out = {&token, &logprob, top_ids.data(), top_lp.data(), &status, &nan_index};
      kernels::sampling::sample_ref(a);
      REQUIRE(status == kernels::sampling::kRowOk);
      CHECK(result.rows[0].token == token);
      CHECK(result.rows[0].logprob == logprob);
      REQUIRE(result.rows[0].top.size() == 5);
      for (size_t i = 0; i < 5; ++i) {
        CHECK(result.rows[0].top[i].first == top_ids[i]);
        CHECK(result.rows[0].top[i].second == top_lp[i]);
      }
      CHECK(token != 17);  // the -100 bias
    }
  }
}

}  // namespace voltserve

namespace voltserve {

TEST_CASE("A seeded sampled request gives the same tokens alone and in a batch", "[golden]") {
  ModelOptions mo;
  mo.model_dir = fixture_dir("tiny-untied-sharded").string();
  mo.backend = "cpu";
  mo.n_threads = 2;
  mo.max_context = 128;
  EngineConfig ec;
  ec.max_running = 4;
  ec.max_tokens_per_step = 64;
  ec.prefill_chunk = 16;
  auto engine = Engine::load(mo, ec);
  REQUIRE(engine.is_ok());
  const int32_t vocab = (*engine)->vocab_size();
  struct Collected {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::vector<int32_t>> tokens;
    int n_done = 0;
  };
  auto run = [&](const std::vector<Request>& requests) {
    Collected c;
    c.tokens.resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      auto id = (*engine)->submit(requests[i], [&c, i](Event ev) {
        std::lock_guard lk(c.mu);
        c.tokens[i].insert(c.tokens[i].end(), ev.token_ids.begin(), ev.token_ids.end());
        if (ev.finished) {
          ++c.n_done;
          c.cv.notify_all();
        }
      });
      REQUIRE(id.is_ok());
    }
    std::unique_lock lk(c.mu);
    c.cv.wait(lk, [&] { return c.n_done == static_cast<int>(requests.size()); });
    return c.tokens;
  };
  Request r;
  r.prompt_ids = test_ids(20, vocab, 31);
  r.max_new_tokens = 24;
  r.sampling.temperature = 1.2f;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.95f;
  r.sampling.presence_penalty = 0.5f;
  r.sampling.seed = 4242;
  const auto alone = run({r});
  Request other = r;
  other.prompt_ids = test_ids(45, vocab, 33);
  other.sampling.seed = 7;
  Request greedy = r;
  greedy.prompt_ids = test_ids(5, vocab, 35);
  greedy.sampling.temperature = 0.0f;
  const auto batched = run({other, r, greedy});
  REQUIRE(alone[0].size() == 24);
  CHECK(batched[1] == alone[0]);
  CHECK(batched[0] != alone[0]);  // the other seed and prompt really differ
}

}  // namespace voltserve

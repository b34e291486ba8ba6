// Speculative decoding end to end on the CPU backend (the MTP fixtures tests/fixtures/models/tiny-mtp*): greedy
// output with speculation (k = 1..15, 31 and auto, batches mixing them) is identical to greedy output without it
// over many prompts and lengths, also when a stop token or max_new_tokens cuts an accepted run; after a round the
// GDN state and the attention KV equal those after decoding the accepted tokens one by one; sampled output has the
// distribution of plain sampling (chi-square on the first tokens), and the two broken acceptance rules fail that test.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "model/qwen35_runner.h"
#include "support/chi_square.h"
#include "support/test_rng.h"
#include "voltserve/engine.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

struct Outcome {
  std::vector<int32_t> tokens;
  Event final_event;
};

// Runs the requests, at most kInFlight at a time (the engine's queue is bounded), and returns each one's tokens and
// final event.
std::vector<Outcome> run_all(Engine& engine, const std::vector<Request>& requests) {
  constexpr size_t kInFlight = 48;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Outcome> out(requests.size());
  size_t done = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    {
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return i - done < kInFlight; });
    }
    auto id = engine.submit(requests[i], [&, i](Event ev) {
      std::lock_guard lk(mu);
      out[i].tokens.insert(out[i].tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finished) {
        out[i].final_event = std::move(ev);
        ++done;
        cv.notify_all();
      }
    });
    if (!id.is_ok()) {  // wait for what is in flight before failing: the sinks reference this frame
      std::unique_lock lk(mu);
      cv.wait(lk, [&] { return done == i; });
      FAIL("submit: " << id.status().to_string());
    }
  }
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done == requests.size(); });
  return out;
}

std::unique_ptr<Engine> make_engine(const std::string& name, int32_t max_k,
                                    kernels::sampling::AcceptRule rule = kernels::sampling::AcceptRule::kExact,
                                    int32_t max_running = 8, int32_t draft_vocab = 0,
                                    const std::string& mtp_format = "keep", bool device_rounds = true) {
  RunnerOptions opt;
  opt.model.model_dir = fixture_dir(name).string();
  // The MTP layer as stored unless asked: tiny-mtp-copy's layer is an exact copy of a main layer, which is what
  // makes its acceptance high enough to exercise long runs (the NVFP4 default has a test of its own below).
  opt.model.draft_vocab = draft_vocab;
  opt.model.mtp_format = mtp_format;
  opt.model.device_rounds = device_rounds;
  opt.model.backend = "cpu";
  opt.model.n_threads = 2;
  opt.model.max_context = 256;
  opt.model.n_slots = max_running;
  opt.max_step_tokens = 256;
  opt.max_draft_tokens = max_k;
  opt.accept_rule = rule;
  opt.gdn_mode = GdnMode::kSequential;
  auto runner = load_model_runner(opt);
  INFO(runner.status().to_string());
  REQUIRE(runner.is_ok());
  EngineConfig ec;
  ec.max_running = max_running;
  ec.max_tokens_per_step = 256;
  ec.prefill_chunk = 32;
  ec.max_speculative_k = max_k;
  auto engine = Engine::create(std::move(runner).value(), ec);
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->stats().max_speculative_k == max_k);
  return std::move(engine).value();
}

std::vector<int32_t> prompt(int32_t n, uint64_t seed, int32_t vocab) {
  testing::TestRng rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
  return p;
}

}  // namespace

TEST_CASE("Speculative greedy output is identical to plain greedy output for every k", "[golden]") {
  const std::string name = GENERATE("tiny-mtp", "tiny-mtp-copy");
  INFO("fixture " << name);
  auto engine = make_engine(name, 31);
  const int32_t vocab = engine->vocab_size();
  const std::vector<int32_t> lengths = {1, 4, 17, 33, 70};
  std::vector<int32_t> ks;
  for (int32_t k = 1; k <= 15; ++k) ks.push_back(k);
  ks.push_back(31);
  ks.push_back(kSpeculativeAuto);
  for (size_t li = 0; li < lengths.size(); ++li) {
    Request base;
    base.prompt_ids = prompt(lengths[li], 11 + li, vocab);
    base.max_new_tokens = 40 - static_cast<int32_t>(li) * 3;  // different lengths cut different runs
    base.sampling.temperature = 0.0f;
    base.speculative_k = 0;
    std::vector<Request> requests = {base};
    for (int32_t k : ks) {
      Request r = base;
      r.speculative_k = k;
      requests.push_back(r);
    }
    const auto out = run_all(*engine, requests);
    const std::vector<int32_t>& plain = out[0].tokens;
    REQUIRE(static_cast<int32_t>(plain.size()) == base.max_new_tokens);
    CHECK(out[0].final_event.n_tokens_drafted == 0);
    for (size_t i = 1; i < out.size(); ++i) {
      INFO("prompt of " << lengths[li] << ", speculative_k " << *requests[i].speculative_k);
      CHECK(out[i].tokens == plain);
      CHECK(out[i].final_event.finish_reason == FinishReason::kLength);
      CHECK(out[i].final_event.n_tokens_drafted > 0);
    }
  }
  const EngineStats s = engine->stats();
  INFO("accepted " << s.n_tokens_accepted_total << " of " << s.n_tokens_drafted_total);
  REQUIRE(s.n_tokens_drafted_total > 0);
  if (name == "tiny-mtp-copy") {
    // High acceptance: most first drafts accepted, and long accepted runs exercised (position 8 accepted often).
    REQUIRE(s.accepted_per_position_total.size() >= 8);
    CHECK(s.accepted_per_position_total[0] * 10 > s.drafted_per_position_total[0] * 6);
    CHECK(s.accepted_per_position_total[7] > 10);
  } else {
    CHECK(s.n_tokens_accepted_total * 5 < s.n_tokens_drafted_total);  // random drafts: mostly corrections
  }
}

TEST_CASE("Cheaper drafting (a draft vocabulary, an NVFP4 MTP layer) keeps greedy output identical", "[golden]") {
  // The draft lm_head over half the vocabulary (the fixture's lowest ids and added tokens), the MTP layer quantized
  // to NVFP4 at load, and both: the target verifies over the whole vocabulary, so output equals plain decoding;
  // acceptance shows the drafts changed as they should (a token outside the draft vocabulary is never drafted).
  const std::string name = "tiny-mtp-copy";
  auto reference = make_engine(name, 8);
  const int32_t vocab = reference->vocab_size();
  std::vector<Request> requests;
  for (int32_t i = 0; i < 6; ++i) {
    Request r;
    r.prompt_ids = prompt(5 + 13 * i, 300 + static_cast<uint64_t>(i), vocab);
    r.max_new_tokens = 32;
    r.sampling.temperature = 0.0f;
    r.speculative_k = 0;
    requests.push_back(r);
    for (int32_t k : {1, 3, 8}) {
      r.speculative_k = k;
      requests.push_back(r);
    }
  }
  const auto want = run_all(*reference, requests);
  const uint64_t full_accepted = reference->stats().n_tokens_accepted_total;
  // How many plain-output tokens lie outside the lower half: those can never be drafted with the draft vocabulary.
  int32_t outside = 0;
  for (size_t i = 0; i < requests.size(); i += 4) {
    for (int32_t t : want[i].tokens) outside += t >= vocab / 2 ? 1 : 0;
  }
  struct Arm {
    int32_t draft_vocab;
    const char* mtp_format;
  };
  for (const Arm arm : {Arm{vocab / 2, "keep"}, Arm{0, "nvfp4"}, Arm{vocab / 2, "nvfp4"}}) {
    INFO("draft_vocab " << arm.draft_vocab << ", mtp_format " << arm.mtp_format);
    auto engine = make_engine(name, 8, kernels::sampling::AcceptRule::kExact, 8, arm.draft_vocab, arm.mtp_format);
    const auto got = run_all(*engine, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i << ", speculative_k " << *requests[i].speculative_k);
      CHECK(got[i].tokens == want[i].tokens);
      CHECK(got[i].tokens == want[i - i % 4].tokens);  // and equal to plain decoding
    }
    const EngineStats s = engine->stats();
    std::printf("draft_vocab %d, mtp_format %s: accepted %llu of %llu drafts (whole vocabulary, as stored: %llu; %d "
                "plain tokens outside the lower half)\n",
                arm.draft_vocab, arm.mtp_format, static_cast<unsigned long long>(s.n_tokens_accepted_total),
                static_cast<unsigned long long>(s.n_tokens_drafted_total),
                static_cast<unsigned long long>(full_accepted), outside);
    REQUIRE(s.n_tokens_drafted_total > 0);
    if (arm.draft_vocab > 0) {
      REQUIRE(outside > 0);
      CHECK(s.n_tokens_accepted_total < full_accepted);  // the tokens outside it were never drafted
    } else {
      // Quantizing the copied attention layer changes few drafts: acceptance stays near the stored layer's.
      CHECK(s.n_tokens_accepted_total * 10 >= full_accepted * 8);
    }
  }
}

TEST_CASE("Rounds whose MTP passes follow the verify step on the device draft what host-fed rounds draft",
          "[golden]") {
  // ModelOptions::device_rounds: the verify step is deferred and the MTP passes are planned for the longest accepted
  // run, then moved by the actual one (SeqDesc::shift_rows / shift_past). Every request must get the same tokens and the same
  // drafts as with the host reading the verify step first: same draft and accept counts per request and per draft
  // position. Greedy and seeded sampled requests take the device path; penalized ones (and logprobs) fall back.
  // Each request runs alone, so that both engines plan the same steps (with several in flight, which steps a request
  // shares, and so where the token budget trims its drafts, depends on timing; the tests above run the device path
  // with many requests at once and compare greedy output to plain decoding).
  struct Arm {
    const char* fixture;
    bool half_vocab;  // a draft vocabulary: the chain's samples are its rows, the verify step's are ids
  };
  for (const Arm arm : {Arm{"tiny-mtp-copy", false}, Arm{"tiny-mtp-copy", true}, Arm{"tiny-mtp", false}}) {
    INFO("fixture " << arm.fixture << (arm.half_vocab ? ", draft vocabulary of half the ids" : ""));
    auto host = make_engine(arm.fixture, 15, kernels::sampling::AcceptRule::kExact, 8, 0, "keep", false);
    const int32_t vocab = host->vocab_size();
    const int32_t draft_vocab = arm.half_vocab ? vocab / 2 : 0;
    host = make_engine(arm.fixture, 15, kernels::sampling::AcceptRule::kExact, 8, draft_vocab, "keep", false);
    auto device = make_engine(arm.fixture, 15, kernels::sampling::AcceptRule::kExact, 8, draft_vocab, "keep", true);
    std::vector<Request> requests;
    for (int32_t i = 0; i < 12; ++i) {
      Request r;
      r.prompt_ids = prompt(1 + 11 * i, 900 + static_cast<uint64_t>(i), vocab);
      r.max_new_tokens = 24 + i % 5;
      r.sampling.temperature = i % 3 == 0 ? 0.9f : 0.0f;
      r.sampling.top_p = i % 3 == 0 ? 0.95f : 1.0f;
      r.sampling.seed = 77 + static_cast<uint64_t>(i);
      r.sampling.presence_penalty = i % 4 == 3 ? 0.5f : 0.0f;
      r.speculative_k = std::vector<int32_t>{1, 3, 7, 15, kSpeculativeAuto}[static_cast<size_t>(i % 5)];
      requests.push_back(r);
    }
    std::vector<Outcome> want, got;
    for (const Request& r : requests) {
      want.push_back(run_all(*host, {r}).front());
      got.push_back(run_all(*device, {r}).front());
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("request " << i << ", speculative_k " << *requests[i].speculative_k);
      CHECK(got[i].tokens == want[i].tokens);
      CHECK(got[i].final_event.n_tokens_drafted == want[i].final_event.n_tokens_drafted);
      CHECK(got[i].final_event.n_tokens_accepted == want[i].final_event.n_tokens_accepted);
    }
    const EngineStats h = host->stats(), d = device->stats();
    CHECK(d.accepted_per_position_total == h.accepted_per_position_total);
    CHECK(d.drafted_per_position_total == h.drafted_per_position_total);
    CHECK(h.speculative_phases.device_rounds == 0);
    CHECK(d.speculative_phases.device_rounds > 0);
    CHECK(d.speculative_phases.device_rounds < d.speculative_phases.verify_steps);  // the penalized ones fell back
    std::printf("%s%s: %llu of %llu verify steps followed on the device; accepted %llu of %llu drafts\n", arm.fixture,
                arm.half_vocab ? " (draft vocabulary)" : "",
                static_cast<unsigned long long>(d.speculative_phases.device_rounds),
                static_cast<unsigned long long>(d.speculative_phases.verify_steps),
                static_cast<unsigned long long>(d.n_tokens_accepted_total),
                static_cast<unsigned long long>(d.n_tokens_drafted_total));
    if (std::string(arm.fixture) == "tiny-mtp-copy") CHECK(d.accepted_per_position_total[2] > 0);  // long runs
  }
}

TEST_CASE("Speculative greedy output with penalties and logit_bias is identical to plain", "[golden]") {
  // Row j of a verify item must see the penalty counts of d1..dj; the step's update must not count the drafts; the
  // accepted ones must be counted afterwards. Any slip changes a penalised greedy argmax somewhere.
  const std::string name = GENERATE("tiny-mtp", "tiny-mtp-copy");
  INFO("fixture " << name);
  auto engine = make_engine(name, 8);
  const int32_t vocab = engine->vocab_size();
  std::vector<Request> requests;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Request base;
    base.prompt_ids = prompt(5 + 9 * static_cast<int32_t>(seed), 301 + seed, vocab);
    base.max_new_tokens = 32;
    base.sampling.temperature = 0.0f;
    base.sampling.presence_penalty = seed % 2 ? 0.8f : 0.0f;
    base.sampling.frequency_penalty = 0.6f;
    base.sampling.repetition_penalty = seed % 2 ? 1.0f : 1.3f;
    base.sampling.logit_bias = {{static_cast<int32_t>(seed * 7 % vocab), 2.0f}};
    for (int32_t k : {0, 1, 3, 8, kSpeculativeAuto}) {
      Request r = base;
      r.speculative_k = k;
      requests.push_back(r);
    }
  }
  const auto out = run_all(*engine, requests);
  int64_t drafted = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t plain = i - i % 5;
    INFO("request " << i << ", speculative_k " << *requests[i].speculative_k);
    CHECK(out[i].tokens == out[plain].tokens);
    drafted += out[i].final_event.n_tokens_drafted;
  }
  CHECK(drafted > 0);
}

TEST_CASE("A stop token or max_new_tokens inside an accepted run ends it exactly where plain decoding ends", "[golden]") {
  auto engine = make_engine("tiny-mtp-copy", 15);
  const int32_t vocab = engine->vocab_size();
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Request base;
    base.prompt_ids = prompt(9 + static_cast<int32_t>(seed), 101 + seed, vocab);
    base.max_new_tokens = 30;
    base.sampling.temperature = 0.0f;
    base.speculative_k = 0;
    const auto plain = run_all(*engine, {base})[0].tokens;
    REQUIRE(plain.size() == 30);
    // A stop id that first appears a few tokens in (inside a long accepted run on this fixture).
    const int32_t stop = plain[5 + seed];
    const auto first = std::find(plain.begin(), plain.end(), stop) - plain.begin();
    Request stopped = base;
    stopped.stop_token_ids = {stop};
    Request shorter = base;
    shorter.max_new_tokens = 7 + static_cast<int32_t>(seed);
    std::vector<Request> requests;
    for (int32_t k : {0, 3, 8, 15}) {
      stopped.speculative_k = k;
      shorter.speculative_k = k;
      requests.push_back(stopped);
      requests.push_back(shorter);
    }
    const auto out = run_all(*engine, requests);
    for (size_t i = 0; i < out.size(); i += 2) {
      INFO("seed " << seed << " k " << *requests[i].speculative_k);
      CHECK(out[i].tokens == std::vector<int32_t>(plain.begin(), plain.begin() + first + 1));
      CHECK(out[i].final_event.finish_reason == FinishReason::kStop);
      CHECK(out[i].final_event.n_tokens_generated == static_cast<int32_t>(first) + 1);
      CHECK(out[i + 1].tokens == std::vector<int32_t>(plain.begin(), plain.begin() + shorter.max_new_tokens));
      CHECK(out[i + 1].final_event.finish_reason == FinishReason::kLength);
    }
  }
}

TEST_CASE("After a speculative round the GDN state and KV equal decoding the accepted tokens one by one", "[golden]") {
  const int32_t k = GENERATE(1, 4, 7, 15);
  INFO("k " << k);
  RunnerOptions opt;
  opt.model.model_dir = fixture_dir("tiny-mtp-copy").string();
  opt.model.backend = "cpu";
  opt.model.n_threads = 2;
  opt.model.max_context = 128;
  opt.model.n_slots = 1;
  opt.gdn_mode = GdnMode::kSequential;
  opt.max_draft_tokens = 15;
  auto spec = Qwen35Runner::load(opt);
  REQUIRE(spec.is_ok());
  opt.max_draft_tokens = 0;
  auto plain = Qwen35Runner::load(opt);
  REQUIRE(plain.is_ok());
  const int32_t vocab = (*spec)->info().vocab_size;
  const auto ids = prompt(21, 7, vocab);
  std::vector<int32_t> pages(8);
  std::iota(pages.begin(), pages.end(), 0);

  // Speculative: prefill (drafts k), then one verify round.
  REQUIRE((*spec)->reset_slot(0).is_ok());
  SeqStep st;
  st.slot = 0;
  st.page_table = pages;
  st.tokens = ids;
  st.n_prompt = 21;
  st.mtp = true;
  st.n_draft = k;
  RowRequest row;
  row.token_index = 20;
  row.flags = kOutSample;
  row.sampling.temperature = 0.0f;
  StepResult r;
  REQUIRE((*spec)->step({std::span<const SeqStep>(&st, 1), std::span<const RowRequest>(&row, 1), {}}, r).is_ok());
  const int32_t x1 = r.rows[0].token;
  const std::vector<int32_t> drafts = r.rows[0].drafts;
  REQUIRE(static_cast<int32_t>(drafts.size()) == k);
  std::vector<int32_t> item = {x1};
  item.insert(item.end(), drafts.begin(), drafts.end());
  st.tokens = item;
  st.n_past = 21;
  st.verify = true;
  std::vector<RowRequest> rows(item.size());
  for (size_t j = 0; j < rows.size(); ++j) {
    rows[j].token_index = static_cast<int32_t>(j);
    rows[j].flags = kOutSample | kOutAccept;
    rows[j].sampling.temperature = 0.0f;
    rows[j].sampling.draw_index = 1 + j;
  }
  REQUIRE((*spec)->step({std::span<const SeqStep>(&st, 1), rows, {}}, r).is_ok());
  std::vector<int32_t> emitted;
  for (const RowResult& rr : r.rows) {
    if (rr.status == kernels::sampling::kRowOk) emitted.push_back(rr.token);
  }
  REQUIRE(!emitted.empty());
  const auto n_keep = static_cast<int32_t>(emitted.size());  // x1, the accepted drafts (the last is the correction)
  REQUIRE((*spec)->commit(0, n_keep).is_ok());

  // Plain: prefill, then x1 and the accepted drafts one by one, each checked against the greedy token.
  REQUIRE((*plain)->reset_slot(0).is_ok());
  SeqStep pt;
  pt.slot = 0;
  pt.page_table = pages;
  pt.tokens = ids;
  pt.n_prompt = 21;
  REQUIRE((*plain)->step({std::span<const SeqStep>(&pt, 1), std::span<const RowRequest>(&row, 1), {}}, r).is_ok());
  REQUIRE(r.rows[0].token == x1);
  std::vector<int32_t> kept = {x1};
  kept.insert(kept.end(), emitted.begin(), emitted.end() - 1);
  for (size_t j = 0; j < kept.size(); ++j) {
    pt.n_past = 21 + static_cast<int32_t>(j);
    pt.tokens = std::span<const int32_t>(kept).subspan(j, 1);
    RowRequest one = row;
    one.token_index = 0;
    REQUIRE((*plain)->step({std::span<const SeqStep>(&pt, 1), std::span<const RowRequest>(&one, 1), {}}, r).is_ok());
    CHECK(r.rows[0].token == emitted[j]);  // the verify row emitted what decoding emits
  }

  // The caches: every GDN layer's conv and recurrent state of the slot, every attention layer's K and V rows of the
  // kept positions, bit for bit.
  const Qwen35Cache& a = (*spec)->cache();
  const Qwen35Cache& b = (*plain)->cache();
  const int32_t n_positions = 21 + n_keep;
  size_t checked = 0;
  for (size_t l = 0; l < a.gdn.size(); ++l) {
    INFO("layer " << l);
    if (!a.gdn[l].recurrent.empty()) {
      for (Tensor GdnStateLayer::*t : {&GdnStateLayer::conv, &GdnStateLayer::recurrent}) {
        const Tensor& x = a.gdn[l].*t;
        const Tensor& y = b.gdn[l].*t;
        CHECK(std::memcmp(x.f32_row(0), y.f32_row(0), static_cast<size_t>(x.cols) * sizeof(float)) == 0);
        ++checked;
      }
    }
    if (!a.kv[l].k.empty()) {
      for (Tensor KvCacheLayer::*t : {&KvCacheLayer::k, &KvCacheLayer::v}) {
        const Tensor& x = a.kv[l].*t;
        const Tensor& y = b.kv[l].*t;
        CHECK(std::memcmp(x.f32_row(0), y.f32_row(0),
                          static_cast<size_t>(n_positions) * static_cast<size_t>(x.cols) * sizeof(float)) == 0);
        ++checked;
      }
    }
  }
  CHECK(checked == 8);  // 3 GDN layers x (conv, state) + 1 attention layer x (K, V)
}

TEST_CASE("Speculative sampling has the distribution of plain sampling; broken acceptance rules fail the test",
          "[golden]") {
  // The first three generated tokens of one prompt at temperature 1 over the 4 most likely tokens: token 1 comes
  // from the prefill (plain sampling in both), tokens 2 and 3 from the first speculative round(s).
  constexpr int32_t kRuns = 2400;
  Request base;
  base.max_new_tokens = 3;
  base.sampling.temperature = 1.0f;
  base.sampling.top_k = 4;
  using Triple = std::tuple<int32_t, int32_t, int32_t>;
  auto sample = [&](Engine& engine, int32_t k, uint64_t seed0) {
    std::vector<Request> requests;
    for (int32_t i = 0; i < kRuns; ++i) {
      Request r = base;
      r.prompt_ids = prompt(6, 3, engine.vocab_size());
      r.speculative_k = k;
      r.sampling.seed = seed0 + static_cast<uint64_t>(i);
      requests.push_back(r);
    }
    std::map<Triple, int64_t> counts;
    for (const Outcome& o : run_all(engine, requests)) {
      REQUIRE(o.tokens.size() == 3);
      ++counts[{o.tokens[0], o.tokens[1], o.tokens[2]}];
    }
    return counts;
  };
  auto exact = make_engine("tiny-mtp-copy", 4, kernels::sampling::AcceptRule::kExact, 16);
  const auto plain = sample(*exact, 0, 1);
  const auto spec = sample(*exact, 4, 1000001);
  const testing::ChiSquare ok = testing::chi_square_two_sample(plain, spec);
  INFO("exact rule: chi2 " << ok.statistic << " df " << ok.df << " z " << ok.z());
  CHECK(ok.df >= 8);  // the test has categories to compare
  CHECK(ok.z() < 4.0);
  const EngineStats s = exact->stats();
  CHECK(s.n_tokens_accepted_total > 0);                             // drafts were accepted ...
  CHECK(s.n_tokens_accepted_total < s.n_tokens_drafted_total);      // ... and rejected
  for (auto rule : {kernels::sampling::AcceptRule::kAlwaysAccept, kernels::sampling::AcceptRule::kResampleKeepingDraft}) {
    auto broken = make_engine("tiny-mtp-copy", 4, rule, 16);
    const auto bad = sample(*broken, 4, 1000001);
    const testing::ChiSquare x = testing::chi_square_two_sample(plain, bad);
    INFO("broken rule " << static_cast<int>(rule) << ": chi2 " << x.statistic << " df " << x.df << " z " << x.z());
    CHECK(x.z() > 6.0);
  }
}

TEST_CASE("speculative_k is validated against the engine's limit and the model", "[golden]") {
  auto engine = make_engine("tiny-mtp", 4);
  Request r;
  r.prompt_ids = {1, 2, 3};
  r.max_new_tokens = 4;
  auto sink = [](Event) {};
  r.speculative_k = 5;
  auto over = engine->submit(r, sink);
  REQUIRE_FALSE(over.is_ok());
  CHECK(over.status().message().find("speculative_k must be at most 4") != std::string::npos);
  r.speculative_k = -2;
  CHECK(engine->submit(r, sink).status().code() == StatusCode::kInvalidArgument);
  // A model without an MTP head: speculation is off and asking for it is an error naming the field.
  ModelOptions mo;
  mo.model_dir = fixture_dir("tiny-tied").string();
  mo.backend = "cpu";
  mo.n_threads = 1;
  mo.max_context = 64;
  EngineConfig ec;
  ec.max_running = 2;
  ec.speculative_k = kSpeculativeAuto;  // the default of requests: off here, no error
  auto none = Engine::load(mo, ec);
  REQUIRE(none.is_ok());
  CHECK((*none)->stats().max_speculative_k == 0);
  r.speculative_k = std::nullopt;
  auto by_default = run_all(**none, {r});
  CHECK(by_default[0].tokens.size() == 4);
  r.speculative_k = 2;
  auto asked = (*none)->submit(r, sink);
  REQUIRE_FALSE(asked.is_ok());
  CHECK(asked.status().message().find("speculative_k") != std::string::npos);
  // "auto" there is the engine's choice: plain decoding, no drafts (greedy, so the tokens are comparable).
  r.sampling.temperature = 0.0f;
  r.speculative_k = std::nullopt;
  auto greedy_default = run_all(**none, {r});
  r.speculative_k = kSpeculativeAuto;
  auto automatic = run_all(**none, {r});
  CHECK(automatic[0].tokens == greedy_default[0].tokens);
  CHECK(automatic[0].final_event.n_tokens_drafted == 0);
}

}  // namespace voltserve

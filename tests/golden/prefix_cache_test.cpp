// Prefix caching on a fixture model (CPU backend): with the cache on, every greedy continuation is exactly the one
// the cache-off engine produces — a chat's second turn (history + reply + a new message), an identical prompt, a
// shared system prompt, a snapshot pool far smaller than the traffic (evictions) and a KV pool small enough that
// cached pages must make room for running requests, per-request opt-out and cache salts, n > 1 siblings, chunked
// prefill, evictions under a tiny KV pool and speculative decoding on an MTP fixture — while the hits skip the
// prefix (counted in EngineStats). Also the Backend ops underneath (save_state / load_state / copy_kv_page) on the
// CPU backend, checks included.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/qwen35_runner.h"
#include "support/test_rng.h"
#include "support/tolerances.h"
#include "voltserve/engine.h"

using namespace voltserve;

namespace {

const std::string kModel = std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/tiny-untied-sharded";
constexpr int32_t kVocab = 384;

struct EngineSetup {
  int32_t n_snapshots = 16;  // 0: no prefix cache
  int32_t n_pages = 0;
  int32_t max_running = 4;
  int32_t interval = 32;
  int32_t step_tokens = 256;  // EngineConfig::max_tokens_per_step
  int32_t chunk = 64;         // EngineConfig::prefill_chunk
};

std::unique_ptr<Engine> make_engine(const EngineSetup& setup) {
  ModelOptions m;
  m.model_dir = kModel;
  m.backend = "cpu";
  m.max_context = 256;
  m.page_size = 16;
  m.n_pages = setup.n_pages;
  m.n_slots = setup.max_running;
  m.n_prefix_snapshots = setup.n_snapshots;
  EngineConfig c;
  c.max_running = setup.max_running;
  c.max_waiting = 64;
  c.max_tokens_per_step = setup.step_tokens;
  c.prefill_chunk = setup.chunk;
  c.prefix_snapshot_interval = setup.interval;
  Result<std::unique_ptr<Engine>> e = Engine::load(m, c);
  INFO(e.status().to_string());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

struct Collected {
  std::mutex mu;
  std::map<int, std::vector<int32_t>> tokens;
  std::map<int, std::vector<float>> logprobs;
  std::map<int, Event> final_events;
  EventSink sink(int key) {
    return [this, key](Event ev) {
      std::lock_guard lk(mu);
      auto& t = tokens[key];
      t.insert(t.end(), ev.token_ids.begin(), ev.token_ids.end());
      for (const TokenLogprob& lp : ev.logprobs) logprobs[key].push_back(lp.logprob);
      if (ev.finished) final_events[key] = std::move(ev);
    };
  }
};

// Greedy, with the chosen tokens' logprobs: a wrong state or KV page would move them even where the argmax holds.
Request greedy(std::vector<int32_t> prompt, int32_t n) {
  Request r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = n;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  r.n_top_logprobs = 0;
  return r;
}

struct Output {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int32_t n_tokens_cached = 0;
};

// Same tokens, and logprobs equal within the rounding of prefilling in other chunks: the same-backend logits
// tolerance, twice (a logprob is a logit minus the log-sum-exp of all of them, each off by up to that much).
void check_same(const Output& got, const Output& want) {
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.logprobs.size() == want.logprobs.size());
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    INFO("token " << i);
    CHECK(std::fabs(got.logprobs[i] - want.logprobs[i]) <= 2 * tol::kSameBackendLogitsAbs);
  }
}

std::vector<int32_t> random_tokens(testing::TestRng& rng, size_t n) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.next_u64() % kVocab);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs one request to completion on `engine`.
Output run_one(Engine& engine, const Request& r) {
  Collected c;
  REQUIRE(engine.submit(r, c.sink(0)).is_ok());
  engine.wait_idle();
  REQUIRE(c.final_events.count(0) == 1);
  CHECK(c.final_events[0].finish_reason == FinishReason::kLength);
  return {c.tokens[0], c.logprobs[0], c.final_events[0].n_tokens_cached};
}

}  // namespace

TEST_CASE("prefix cache: a chat's second turn resumes after the first turn's reply, same greedy tokens", "[golden]") {
  testing::TestRng rng(25);
  const std::vector<int32_t> turn1 = random_tokens(rng, 70);
  auto cached = make_engine({});
  auto plain = make_engine({.n_snapshots = 0});
  CHECK(cached->stats().prefix_cache_enabled);
  CHECK_FALSE(plain->stats().prefix_cache_enabled);

  const Output reply1 = run_one(*plain, greedy(turn1, 24));
  check_same(run_one(*cached, greedy(turn1, 24)), reply1);
  const EngineStats after1 = cached->stats();
  CHECK(after1.n_prefix_cache_hits_total == 0);
  CHECK(after1.prefix_cache_entries >= 2);  // the interval snapshots, the prompt end, the reply's end

  // Turn 2 = history + reply + a new message: the reply's end (all but its last token, which was never computed)
  // is cached, so the hit covers turn 1's prompt and nearly all of its reply.
  const std::vector<int32_t> turn2 = concat(concat(turn1, reply1.tokens), random_tokens(rng, 30));
  const Output reply2 = run_one(*plain, greedy(turn2, 24));
  const Output cached2 = run_one(*cached, greedy(turn2, 24));
  check_same(cached2, reply2);
  CHECK(reply2.n_tokens_cached == 0);
  CHECK(cached2.n_tokens_cached == static_cast<int32_t>(turn1.size() + reply1.tokens.size() - 1));  // the final event
  const EngineStats after2 = cached->stats();
  CHECK(after2.n_prefix_cache_queries_total == 2);
  CHECK(after2.n_prefix_cache_hits_total == 1);
  CHECK(after2.n_tokens_prefix_cached_total == turn1.size() + reply1.tokens.size() - 1);
  std::printf("prefix cache, two turns: %llu steps with the cache, %llu without; %llu tokens cached\n",
              static_cast<unsigned long long>(after2.n_steps),
              static_cast<unsigned long long>(plain->stats().n_steps),
              static_cast<unsigned long long>(after2.n_tokens_prefix_cached_total));
  // Idle: every cached page counts as free, and the slots are back.
  CHECK(after2.kv_pages_free == after2.kv_pages_total);
  CHECK(after2.state_slots_free == after2.state_slots_total);
}

TEST_CASE("prefix cache: an identical prompt and a shared system prompt hit at exact positions", "[golden]") {
  testing::TestRng rng(2525);
  auto cached = make_engine({.interval = 16});
  auto plain = make_engine({.n_snapshots = 0});
  const std::vector<int32_t> prompt = random_tokens(rng, 45);  // not a multiple of the page size
  const Output first = run_one(*plain, greedy(prompt, 20));
  check_same(run_one(*cached, greedy(prompt, 20)), first);
  check_same(run_one(*cached, greedy(prompt, 20)), first);  // resumes at the prompt end minus one
  EngineStats s = cached->stats();
  CHECK(s.n_prefix_cache_hits_total == 1);
  CHECK(s.n_tokens_prefix_cached_total == prompt.size() - 1);

  const std::vector<int32_t> system = random_tokens(rng, 50);
  const std::vector<int32_t> a = concat(system, random_tokens(rng, 12));
  const std::vector<int32_t> b = concat(system, random_tokens(rng, 9));
  check_same(run_one(*cached, greedy(a, 16)), run_one(*plain, greedy(a, 16)));
  const uint64_t before = cached->stats().n_tokens_prefix_cached_total;
  check_same(run_one(*cached, greedy(b, 16)), run_one(*plain, greedy(b, 16)));
  s = cached->stats();
  CHECK(s.n_prefix_cache_hits_total == 2);
  CHECK(s.n_tokens_prefix_cached_total - before == 48);  // the interval snapshot at 48 inside the system prompt
}

TEST_CASE("prefix cache: concurrent traffic, few snapshots and a small KV pool keep every greedy result", "[golden]") {
  testing::TestRng rng(252525);
  const std::vector<int32_t> system = random_tokens(rng, 40);
  std::vector<Request> requests;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt = i % 3 == 0 ? random_tokens(rng, 30 + 5 * static_cast<size_t>(i))
                                             : concat(system, random_tokens(rng, 5 + static_cast<size_t>(i)));
    requests.push_back(greedy(std::move(prompt), 40));
  }
  std::vector<Output> alone;
  {
    auto plain = make_engine({.n_snapshots = 0, .max_running = 1});
    for (const Request& r : requests) alone.push_back(run_one(*plain, r));
  }
  // Three snapshots for all this traffic (evictions), and 24 pages of 16 tokens for four running sequences of up to
  // ~140 tokens: cached pages must give way to running requests, and some requests are preempted.
  auto engine = make_engine({.n_snapshots = 3, .n_pages = 24, .max_running = 4, .interval = 16});
  for (int round = 0; round < 2; ++round) {  // the second round finds the first round's prefixes (or their evictions)
    Collected c;
    for (size_t i = 0; i < requests.size(); ++i) {
      REQUIRE(engine->submit(requests[i], c.sink(static_cast<int>(i))).is_ok());
    }
    engine->wait_idle();
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("round " << round << " request " << i);
      REQUIRE(c.final_events.count(static_cast<int>(i)) == 1);
      CHECK(c.final_events[static_cast<int>(i)].finish_reason == FinishReason::kLength);
      check_same({c.tokens[static_cast<int>(i)], c.logprobs[static_cast<int>(i)]}, alone[i]);
    }
  }
  const EngineStats s = engine->stats();
  std::printf("prefix cache under pressure: %llu hits of %llu queries, %llu tokens cached, %llu evictions, %llu "
              "preemptions\n",
              static_cast<unsigned long long>(s.n_prefix_cache_hits_total),
              static_cast<unsigned long long>(s.n_prefix_cache_queries_total),
              static_cast<unsigned long long>(s.n_tokens_prefix_cached_total),
              static_cast<unsigned long long>(s.n_prefix_cache_evictions_total),
              static_cast<unsigned long long>(s.n_preemptions));
  CHECK(s.n_prefix_cache_hits_total > 0);
  CHECK(s.n_prefix_cache_evictions_total > 0);
  CHECK(s.prefix_snapshots_used <= 3);
  CHECK(s.kv_pages_free == s.kv_pages_total);
  CHECK(s.state_slots_free == s.state_slots_total);
  CHECK(s.n_running == 0);
  CHECK(s.n_waiting == 0);
}

TEST_CASE("cpu backend: save_state / load_state / copy_kv_page copy exactly and refuse rows out of range", "[unit]") {
  std::unique_ptr<Backend> be = make_cpu_backend({});
  GdnStateLayer g;
  g.conv = be->alloc(3, 5, DType::kF32, "conv state").value();
  g.recurrent = be->alloc(3, 7, DType::kF32, "recurrent state").value();
  g.conv_snap = be->alloc(2, 5, DType::kF32, "conv snapshots").value();
  g.recurrent_snap = be->alloc(2, 7, DType::kF32, "recurrent snapshots").value();
  testing::TestRng rng(7);
  for (int64_t i = 0; i < 15; ++i) g.conv.f32()[i] = static_cast<float>(rng.next_u64() % 1000) * 0.001f;
  for (int64_t i = 0; i < 21; ++i) g.recurrent.f32()[i] = static_cast<float>(rng.next_u64() % 1000) * 0.001f;
  const std::vector<float> conv1(g.conv.f32_row(1), g.conv.f32_row(1) + 5);
  const std::vector<float> rec1(g.recurrent.f32_row(1), g.recurrent.f32_row(1) + 7);
  REQUIRE(be->save_state(g, 1, 1).is_ok());
  be->zero_rows(g.conv, 1, 2);
  be->zero_rows(g.recurrent, 1, 2);
  REQUIRE(be->load_state(g, 1, 2).is_ok());  // into another slot
  CHECK(std::vector<float>(g.conv.f32_row(2), g.conv.f32_row(2) + 5) == conv1);
  CHECK(std::vector<float>(g.recurrent.f32_row(2), g.recurrent.f32_row(2) + 7) == rec1);
  CHECK(g.conv.f32_row(1)[0] == 0.0f);
  CHECK(be->save_state(g, 3, 0).code() == StatusCode::kInternal);  // slot out of range
  CHECK(be->load_state(g, 2, 0).code() == StatusCode::kInternal);  // snapshot out of range
  GdnStateLayer none;  // no snapshot rows allocated
  none.conv = g.conv;
  none.recurrent = g.recurrent;
  CHECK_FALSE(be->save_state(none, 0, 0).is_ok());

  KvCacheLayer kv;
  kv.k = be->alloc(4 * 2, 3, DType::kF32, "K cache").value();  // 4 pages of 2 tokens
  kv.v = be->alloc(4 * 2, 3, DType::kF32, "V cache").value();
  for (int64_t i = 0; i < 24; ++i) {
    kv.k.f32()[i] = static_cast<float>(i);
    kv.v.f32()[i] = static_cast<float>(100 + i);
  }
  REQUIRE(be->copy_kv_page(kv, 2, 1, 3).is_ok());
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 3; ++c) {
      CHECK(kv.k.f32_row(6 + r)[c] == kv.k.f32_row(2 + r)[c]);
      CHECK(kv.v.f32_row(6 + r)[c] == kv.v.f32_row(2 + r)[c]);
    }
  }
  CHECK(kv.k.f32_row(6)[0] == 6.0f);
  CHECK(be->copy_kv_page(kv, 2, 1, 4).code() == StatusCode::kInternal);
}

TEST_CASE("prefix cache: a request that opts out neither looks up nor feeds the cache", "[golden]") {
  testing::TestRng rng(2501);
  auto cached = make_engine({});
  auto plain = make_engine({.n_snapshots = 0});
  const std::vector<int32_t> prompt = random_tokens(rng, 60);
  Request off = greedy(prompt, 12);
  off.prefix_cache = false;
  const Output want = run_one(*plain, greedy(prompt, 12));
  check_same(run_one(*cached, off), want);
  EngineStats s = cached->stats();
  CHECK(s.n_prefix_cache_queries_total == 0);
  CHECK(s.prefix_cache_entries == 0);  // nothing inserted
  check_same(run_one(*cached, greedy(prompt, 12)), want);  // a normal request: a miss that feeds the cache
  s = cached->stats();
  CHECK(s.n_prefix_cache_queries_total == 1);
  CHECK(s.n_prefix_cache_hits_total == 0);
  CHECK(s.prefix_cache_entries > 0);
  const Output again = run_one(*cached, off);  // cached now, but the opt-out still does not look
  check_same(again, want);
  CHECK(again.n_tokens_cached == 0);
  CHECK(cached->stats().n_prefix_cache_queries_total == 1);
}

TEST_CASE("prefix cache: requests with different cache salts never share a prefix", "[golden]") {
  testing::TestRng rng(2502);
  auto cached = make_engine({});
  auto plain = make_engine({.n_snapshots = 0});
  const std::vector<int32_t> prompt = random_tokens(rng, 50);
  const Output want = run_one(*plain, greedy(prompt, 10));
  auto salted = [&](const std::string& salt) {
    Request r = greedy(prompt, 10);
    r.cache_salt = salt;
    return r;
  };
  check_same(run_one(*cached, salted("tenant-a")), want);
  const Output other = run_one(*cached, salted("tenant-b"));
  check_same(other, want);
  CHECK(other.n_tokens_cached == 0);
  const Output unsalted = run_one(*cached, greedy(prompt, 10));
  check_same(unsalted, want);
  CHECK(unsalted.n_tokens_cached == 0);
  const Output same = run_one(*cached, salted("tenant-a"));
  check_same(same, want);
  CHECK(same.n_tokens_cached == static_cast<int32_t>(prompt.size()) - 1);
  CHECK(cached->stats().n_prefix_cache_hits_total == 1);
}

TEST_CASE("prefix cache: n > 1 siblings compute the prompt once, each output as without the cache", "[golden]") {
  testing::TestRng rng(2503);
  const std::vector<int32_t> prompt = random_tokens(rng, 150);
  auto plain = make_engine({.n_snapshots = 0});
  const Output want = run_one(*plain, greedy(prompt, 16));
  // Four siblings submitted together (the server submits n > 1 this way), with a chunk small enough that the
  // prompt takes several steps.
  auto cached = make_engine({.chunk = 32});
  Collected c;
  for (int i = 0; i < 4; ++i) REQUIRE(cached->submit(greedy(prompt, 16), c.sink(i)).is_ok());
  cached->wait_idle();
  int n_hits = 0;
  for (int i = 0; i < 4; ++i) {
    INFO("sibling " << i);
    REQUIRE(c.final_events.count(i) == 1);
    check_same({c.tokens[i], c.logprobs[i]}, want);
    if (c.final_events[i].n_tokens_cached == static_cast<int32_t>(prompt.size()) - 1) ++n_hits;
  }
  const EngineStats s = cached->stats();
  CHECK(n_hits == 3);  // the first computes the prompt, the others resume at its end
  CHECK(s.n_tokens_prefix_cached_total == 3 * (prompt.size() - 1));
  CHECK(s.n_tokens_prompt_total == 4 * prompt.size());
  CHECK(s.kv_pages_free == s.kv_pages_total);
}

TEST_CASE("prefix cache: chunked prefill and a tiny KV pool (evictions) keep multi-turn greedy output", "[golden]") {
  testing::TestRng rng(2504);
  // 8-token steps: every prefill is many chunks, stopping at the snapshot positions; 14 pages of 16 tokens: one
  // conversation's turn (up to ~200 tokens) fits, two conversations' cached prefixes do not, so each turn evicts.
  auto plain = make_engine({.n_snapshots = 0, .max_running = 1});
  auto cached = make_engine({.n_snapshots = 4, .n_pages = 14, .max_running = 1, .interval = 24, .step_tokens = 8,
                             .chunk = 8});
  std::vector<std::vector<int32_t>> history = {random_tokens(rng, 41), random_tokens(rng, 37)};
  for (int turn = 0; turn < 3; ++turn) {
    for (size_t conv = 0; conv < history.size(); ++conv) {
      INFO("turn " << turn << " conversation " << conv);
      const Output want = run_one(*plain, greedy(history[conv], 12));
      const Output got = run_one(*cached, greedy(history[conv], 12));
      check_same(got, want);
      history[conv] = concat(concat(history[conv], want.tokens), random_tokens(rng, 9));
    }
  }
  const EngineStats s = cached->stats();
  std::printf("prefix cache, chunked and tiny pool: %llu hits, %llu tokens cached, %llu evictions\n",
              static_cast<unsigned long long>(s.n_prefix_cache_hits_total),
              static_cast<unsigned long long>(s.n_tokens_prefix_cached_total),
              static_cast<unsigned long long>(s.n_prefix_cache_evictions_total));
  CHECK(s.n_prefix_cache_evictions_total > 0);
  CHECK(s.kv_pages_free == s.kv_pages_total);
  CHECK(s.state_slots_free == s.state_slots_total);
}

namespace {

// The MTP fixture with speculation (speculative_k 3) and the sequential GDN mode the speculative tests use.
std::unique_ptr<Engine> make_mtp_engine(int32_t n_snapshots) {
  RunnerOptions opt;
  opt.model.model_dir = std::string(VOLTSERVE_SOURCE_DIR) + "/tests/fixtures/models/tiny-mtp";
  opt.model.backend = "cpu";
  opt.model.n_threads = 2;
  opt.model.max_context = 256;
  opt.model.n_slots = 2;
  opt.model.n_prefix_snapshots = n_snapshots;
  opt.max_step_tokens = 256;
  opt.max_draft_tokens = 3;
  opt.gdn_mode = GdnMode::kSequential;
  auto runner = load_model_runner(opt);
  INFO(runner.status().to_string());
  REQUIRE(runner.is_ok());
  EngineConfig ec;
  ec.max_running = 2;
  ec.max_tokens_per_step = 256;
  ec.prefill_chunk = 32;
  ec.max_speculative_k = 3;
  ec.speculative_k = 3;
  ec.prefix_snapshot_interval = 32;
  auto engine = Engine::create(std::move(runner).value(), ec);
  INFO(engine.status().to_string());
  REQUIRE(engine.is_ok());
  return std::move(engine).value();
}

}  // namespace

TEST_CASE("prefix cache: speculative decoding (k = 3) on an MTP fixture, multi-turn, same greedy tokens",
          "[golden]") {
  testing::TestRng rng(2505);
  constexpr int32_t kMtpVocab = 96;
  auto tokens = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng.next_u64() % kMtpVocab);
    return t;
  };
  auto plain = make_mtp_engine(0);
  auto cached = make_mtp_engine(8);
  std::vector<int32_t> history = tokens(45);
  for (int turn = 0; turn < 4; ++turn) {
    INFO("turn " << turn);
    Request r = greedy(history, 20);
    r.n_top_logprobs = -1;  // drafts accepted in a run come without per-draft logprobs on every path
    const Output want = run_one(*plain, r);
    const Output got = run_one(*cached, r);
    CHECK(got.tokens == want.tokens);
    if (turn > 0) CHECK(got.n_tokens_cached > 0);
    history = concat(concat(history, want.tokens), tokens(7));
  }
  const EngineStats s = cached->stats();
  CHECK(s.n_tokens_drafted_total > 0);  // it did speculate
  CHECK(s.n_prefix_cache_hits_total == 3);
  CHECK(s.kv_pages_free == s.kv_pages_total);
}

TEST_CASE("prefix cache: waiting sequences' hits never starve a running one (12 pages, 6 running)", "[golden]") {
  // The e2e KV-exhaustion scenario: eight requests one at a time fill the cache, then all eight at once in a pool
  // of 12 pages. The waiting ones find (and pin) their cached prefixes while the running ones need every page:
  // the step is planned again without the pins, so everything completes, with the tokens it gets alone.
  testing::TestRng rng(2506);
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) requests.push_back(greedy(random_tokens(rng, 30 + 3 * static_cast<size_t>(i)), 100));
  auto engine = make_engine({.n_snapshots = 8, .n_pages = 12, .max_running = 6, .interval = 32});
  std::vector<Output> alone;
  for (const Request& r : requests) alone.push_back(run_one(*engine, r));
  CHECK(engine->stats().n_preemptions == 0);
  Collected c;
  for (size_t i = 0; i < requests.size(); ++i) REQUIRE(engine->submit(requests[i], c.sink(static_cast<int>(i))).is_ok());
  engine->wait_idle();
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("request " << i);
    REQUIRE(c.final_events.count(static_cast<int>(i)) == 1);
    CHECK(c.final_events[static_cast<int>(i)].finish_reason == FinishReason::kLength);
    check_same({c.tokens[static_cast<int>(i)], c.logprobs[static_cast<int>(i)]}, alone[i]);
  }
  const EngineStats s = engine->stats();
  CHECK(s.n_prefix_cache_hits_total > 0);
  CHECK(s.kv_pages_free == s.kv_pages_total);
  CHECK(s.state_slots_free == s.state_slots_total);
}

// Many threads submitting and cancelling at once against a small cache (so that sequences queue and get
// preempted): every request gets exactly one final event, last; the ones not cancelled produce exactly the plain
// greedy loop's tokens; every page and slot is back afterwards. Also built with -fsanitize=thread locally.
#include <atomic>
#include <mutex>
#include <thread>

#include <catch2/catch_test_macros.hpp>

#include "scheduler/event_collector.h"
#include "scheduler/engine_harness.h"

using namespace voltserve;
using namespace voltserve::testing;

TEST_CASE("64 requests from 8 threads with random cancels: one final event each, pools back to full", "[unit]") {
  FakeRunnerOptions opt;
  opt.n_pages = 40;  // 160 positions for up to 6 sequences of up to 60: page pressure
  opt.n_slots = 6;
  opt.context_length = 80;
  EngineConfig cfg;
  cfg.max_running = 6;
  cfg.max_waiting = 64;
  cfg.max_tokens_per_step = 24;
  cfg.prefill_chunk = 8;
  Harness h = make_engine(opt, cfg);
  h.fake->set_forward_delay(std::chrono::microseconds(200));  // long enough for submits and cancels to interleave
  EventCollector events;
  constexpr int kThreads = 8, kPerThread = 8;
  std::vector<std::vector<int32_t>> prompts(kThreads * kPerThread);
  std::vector<int32_t> max_new(kThreads * kPerThread);
  std::vector<char> cancelled(kThreads * kPerThread, 0);  // not vector<bool>: threads write neighbouring entries
  std::atomic<int> n_rejected{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      voltserve::testing::TestRng rng(1000 + static_cast<uint64_t>(t));
      for (int j = 0; j < kPerThread; ++j) {
        const int key = t * kPerThread + j;
        prompts[static_cast<size_t>(key)] = make_prompt(1 + static_cast<int32_t>(rng.next_u64() % 40), 7000 + static_cast<uint64_t>(key));
        max_new[static_cast<size_t>(key)] = 1 + static_cast<int32_t>(rng.next_u64() % 20);
        Result<RequestId> id = h.engine->submit(greedy_request(prompts[static_cast<size_t>(key)], max_new[static_cast<size_t>(key)]), events.sink(key));
        if (!id.is_ok()) {
          ++n_rejected;
          continue;
        }
        if (rng.next_u64() % 3 == 0) {
          if (rng.next_u64() % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng.next_u64() % 2000));
          h.engine->cancel(*id);
          cancelled[static_cast<size_t>(key)] = 1;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  h.engine->wait_idle();
  CHECK(n_rejected.load() == 0);  // 64 fit in the waiting queue
  int n_cancelled_final = 0;
  for (int key = 0; key < kThreads * kPerThread; ++key) {
    const Stream s = events.get(key);
    REQUIRE(s.n_final == 1);
    CHECK(s.n_after_final == 0);
    CHECK(s.events.back().finished);
    const auto ref = plain_greedy(opt, prompts[static_cast<size_t>(key)], max_new[static_cast<size_t>(key)]);
    if (s.final_event.finish_reason == FinishReason::kCancelled) {
      CHECK(cancelled[static_cast<size_t>(key)]);
      ++n_cancelled_final;
      // What it did produce before the cancel is a prefix of the right answer.
      REQUIRE(s.tokens.size() <= ref.size());
      CHECK(std::equal(s.tokens.begin(), s.tokens.end(), ref.begin()));
    } else {
      CHECK(s.final_event.finish_reason == FinishReason::kLength);
      CHECK(s.tokens == ref);
    }
  }
  CHECK(n_cancelled_final > 0);
  CHECK(h.fake->violations().empty());
  CHECK(h.engine->stats().healthy);
  check_pools_full(*h.engine);
}

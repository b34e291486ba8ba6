// The structured-output mask worker (engine/core/mask_worker.h): every row of a step filled, by several threads at
// once, and wait() returning only when all of them are done, over many steps.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "core/mask_worker.h"

using namespace voltserve;

namespace {

// A matcher whose fill takes `delay` and writes its id and the step into the mask, counting how many fills run at
// the same time.
class SlowMatcher final : public ConstraintMatcher {
 public:
  SlowMatcher(uint32_t id, std::chrono::milliseconds delay, std::atomic<int>& running, std::atomic<int>& peak)
      : id_(id), delay_(delay), running_(running), peak_(peak) {}
  void fill_mask(uint32_t* mask) override {
    const int now = ++running_;
    int seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(delay_);
    mask[0] = id_;
    mask[1] = step;
    --running_;
  }
  bool accept(int32_t) override { return true; }
  void rollback(int32_t) override {}
  bool terminated() const override { return false; }
  uint32_t step = 0;

 private:
  uint32_t id_;
  std::chrono::milliseconds delay_;
  std::atomic<int>& running_;
  std::atomic<int>& peak_;
};

}  // namespace

TEST_CASE("mask worker: a step's rows are filled in parallel and wait() covers all of them", "[unit]") {
  constexpr int kThreads = 4, kRows = 8;
  MaskWorker worker(kThreads);
  REQUIRE(worker.n_threads() == kThreads);
  std::atomic<int> running{0}, peak{0};
  std::vector<SlowMatcher> matchers;
  for (int i = 0; i < kRows; ++i) matchers.emplace_back(100 + i, std::chrono::milliseconds(40), running, peak);
  std::vector<std::vector<uint32_t>> masks(kRows, std::vector<uint32_t>(2, 0));
  for (uint32_t step = 1; step <= 3; ++step) {
    std::vector<MaskWorker::Job> jobs;
    for (int i = 0; i < kRows; ++i) {
      matchers[static_cast<size_t>(i)].step = step;
      jobs.push_back({&matchers[static_cast<size_t>(i)], masks[static_cast<size_t>(i)].data()});
    }
    const auto t0 = std::chrono::steady_clock::now();
    worker.start(jobs);
    const int64_t us = worker.wait();
    const auto wall = std::chrono::steady_clock::now() - t0;
    for (int i = 0; i < kRows; ++i) {
      CHECK(masks[static_cast<size_t>(i)][0] == static_cast<uint32_t>(100 + i));
      CHECK(masks[static_cast<size_t>(i)][1] == step);  // this step's fill, finished before wait() returned
    }
    CHECK(running.load() == 0);
    // 8 fills of 40 ms on 4 threads: about 80 ms; one thread in turn would take 320.
    CHECK(us >= 80'000);
    CHECK(us < 250'000);
    CHECK(wall >= std::chrono::microseconds(us));
  }
  CHECK(peak.load() == kThreads);
}

TEST_CASE("mask worker: a step without constrained rows waits for nothing", "[unit]") {
  MaskWorker worker(2);
  worker.start({});
  CHECK(worker.wait() == 0);
  CHECK(MaskWorker::default_threads() >= 1);
  CHECK(MaskWorker::default_threads() <= 8);
}

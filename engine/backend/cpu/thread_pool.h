// ThreadPool: a small fixed pool of std::threads for the CPU backend's parallel loops (rows of a matmul, heads of
// attention and the delta rule), handed to the kernels' references as their HostParallel. Tested through the
// golden tests (threads must not change results).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/host_parallel.h"

namespace voltserve::cpu {

class ThreadPool final : public kernels::HostParallel {
 public:
  explicit ThreadPool(int32_t n_threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t n_threads() const { return static_cast<int32_t>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n) and returns when all are done. Each item is handled
  // by exactly one call, so results do not depend on the number of threads. Ranges hold at least `min_grain`
  // items (small loops run inline on the caller).
  void parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn) const override;

 private:
  void worker_loop(int32_t index);

  std::vector<std::thread> workers_;
  // The job being run: parallel_for() is logically const (it only coordinates), so its scratch is mutable.
  mutable std::mutex mu_;
  mutable std::condition_variable cv_work_;
  mutable std::condition_variable cv_done_;
  mutable const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  mutable int64_t job_n_ = 0;
  mutable int64_t job_chunk_ = 0;
  mutable int32_t job_parts_ = 0;
  mutable uint64_t generation_ = 0;
  mutable int32_t pending_ = 0;
  bool stop_ = false;
};

}  // namespace voltserve::cpu

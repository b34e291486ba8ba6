// ThreadPool implementation: workers wait for a generation counter to change, run their part of the job, and the
// caller runs part 0 itself. One job at a time (the backend is driven by one thread).
#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace voltserve::cpu {

ThreadPool::ThreadPool(int32_t n_threads) {
  for (int32_t i = 1; i < std::max<int32_t>(1, n_threads); ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t min_grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  const int64_t grain = std::max<int64_t>(1, min_grain);
  const int64_t max_parts = std::max<int64_t>(1, n / grain);
  const int32_t parts = static_cast<int32_t>(std::min<int64_t>(n_threads(), max_parts));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + parts - 1) / parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    job_parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  cv_work_.notify_all();
  fn(0, std::min(n, chunk));
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int32_t index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job = nullptr;
    int64_t begin = 0, end = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_parts_) continue;
      job = job_;
      begin = std::min(job_n_, index * job_chunk_);
      end = std::min(job_n_, begin + job_chunk_);
    }
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

}  // namespace voltserve::cpu

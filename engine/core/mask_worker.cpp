// See mask_worker.h.
#include "core/mask_worker.h"

#include <algorithm>

namespace voltserve {

int MaskWorker::default_threads() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw / 2, 1, 8);
}

MaskWorker::MaskWorker(int n_threads) {
  const int n = n_threads > 0 ? n_threads : default_threads();
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MaskWorker::start(std::vector<Job> jobs) {
  {
    std::lock_guard lk(mu_);
    jobs_ = std::move(jobs);
    next_ = 0;
    done_ = 0;
    last_us_ = 0;
    started_ = std::chrono::steady_clock::now();
  }
  work_cv_.notify_all();
}

int64_t MaskWorker::wait() {
  std::unique_lock lk(mu_);
  done_cv_.wait(lk, [&] { return done_ == jobs_.size(); });
  return last_us_;
}

void MaskWorker::run() {
  std::unique_lock lk(mu_);
  while (true) {
    work_cv_.wait(lk, [&] { return stop_ || next_ < jobs_.size(); });
    if (stop_) return;
    const Job job = jobs_[next_++];
    lk.unlock();
    job.matcher->fill_mask(job.mask);
    lk.lock();
    if (++done_ == jobs_.size()) {
      last_us_ = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started_)
                     .count();
      done_cv_.notify_all();
    }
  }
}

}  // namespace voltserve

// See mask_worker.h.
#include "core/mask_worker.h"

#include <chrono>

namespace voltserve {

MaskWorker::MaskWorker() : thread_([this] { run(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::start(std::vector<Job> jobs) {
  {
    std::lock_guard lk(mu_);
    jobs_ = std::move(jobs);
    pending_ = !jobs_.empty();
    last_us_ = 0;
  }
  cv_.notify_all();
}

int64_t MaskWorker::wait() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !pending_; });
  return last_us_;
}

void MaskWorker::run() {
  std::unique_lock lk(mu_);
  while (true) {
    cv_.wait(lk, [&] { return stop_ || pending_; });
    if (stop_) return;
    std::vector<Job> jobs = jobs_;
    lk.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    for (const Job& j : jobs) j.matcher->fill_mask(j.mask);
    const int64_t us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    last_us_ = us;
    pending_ = false;
    cv_.notify_all();
  }
}

}  // namespace voltserve

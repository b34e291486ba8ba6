// See worker_pool.h.
#include "http/worker_pool.h"

namespace voltserve::http {

WorkerPool::WorkerPool(int n_threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { run(); });
}

WorkerPool::~WorkerPool() { shutdown(); }

bool WorkerPool::try_submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t WorkerPool::n_busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_busy_;
}

size_t WorkerPool::n_queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void WorkerPool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++n_busy_;
    lock.unlock();
    task();
    task = nullptr;  // release what it captured before taking the lock again
    lock.lock();
    --n_busy_;
  }
}

}  // namespace voltserve::http

// A fixed set of HTTP worker threads with a bounded queue: try_submit() refuses work instead of queueing without
// limit (cpp-httplib's own pool queues every accepted connection), so the front end can answer 503 at once.
// Tested by tests/server/connection_test.cpp.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace voltserve::http {

class WorkerPool {
 public:
  WorkerPool(int n_threads, size_t max_queued);
  ~WorkerPool();  // shutdown()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` unless max_queued tasks are already waiting (or the pool is shut down); false = refused.
  bool try_submit(std::function<void()> task);
  // Runs what is queued, then joins the threads. Later submits are refused.
  void shutdown();

  int n_threads() const { return static_cast<int>(threads_.size()); }
  size_t n_busy() const;
  size_t n_queued() const;

 private:
  void run();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  size_t n_busy_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace voltserve::http

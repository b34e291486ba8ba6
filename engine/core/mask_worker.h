// Worker threads that compute the structured-output token masks of a step while the step's forward runs: the
// engine starts them with the step's constrained rows just before ModelRunner::step, and the backend waits for them
// (StepBatch::complete_masks) as late as it can — the CPU backend when it samples, the CUDA backend after it has
// launched the whole step, its device waiting for the host's masks — so a mask costs no step time while it is
// shorter than the forward. The rows of a step are filled in parallel, one row at a time per thread (a grammar
// engine's fill is single-threaded, and at batch 16 one thread filling every row in turn can take longer than the
// step). Touches only the matchers and mask buffers it was given, between start() and wait(). Tested by
// tests/scheduler/mask_worker_test.cpp and, through the engine, by tests/e2e/test_structured_output.py.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "voltserve/grammar.h"

namespace voltserve {

class MaskWorker {
 public:
  struct Job {
    ConstraintMatcher* matcher = nullptr;
    uint32_t* mask = nullptr;
  };
  // n_threads <= 0: default_threads().
  explicit MaskWorker(int n_threads = 0);
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Hands over a step's rows; the previous start() must have been waited for.
  void start(std::vector<Job> jobs);
  // Blocks until the jobs of the last start() are done; returns the microseconds from start() until the last
  // of them finished (0 when there were none).
  int64_t wait();
  int n_threads() const { return static_cast<int>(threads_.size()); }
  // Half the machine's hardware threads, 1 to 8 (the threads sleep between steps; the forward's own host thread
  // and the HTTP workers keep the other half).
  static int default_threads();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::vector<Job> jobs_;
  size_t next_ = 0;  // the next job a thread takes
  size_t done_ = 0;  // jobs finished
  bool stop_ = false;
  std::chrono::steady_clock::time_point started_;
  int64_t last_us_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace voltserve

// A worker thread that computes the structured-output token masks of a step while the step's forward runs: the
// engine starts it with the step's constrained sequences just before ModelRunner::step, and the runner waits for it
// (StepRequest::await_masks) right before sampling, so the mask costs no step time when it is shorter than the
// forward. Touches only the matchers and mask buffers it was given, between start() and wait(). Tested through the
// engine by tests/e2e/test_structured_output.py (every constrained request goes through it).
#pragma once

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
  MaskWorker();
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  void start(std::vector<Job> jobs);
  // Blocks until the jobs of the last start() are done; returns the microseconds they took (0 when none).
  int64_t wait();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> jobs_;
  bool pending_ = false;  // jobs_ handed over, not finished
  bool stop_ = false;
  int64_t last_us_ = 0;
  std::thread thread_;
};

}  // namespace voltserve

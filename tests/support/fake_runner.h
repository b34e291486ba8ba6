// A deterministic fake ModelRunner for the scheduler and engine tests (no model). Its "model": the next token
// is a hash of the whole sequence so far, and the logits are peaked on it; output rows are sampled by the real
// reference sampler (kernels/sampling) with penalty state kept from the steps' input tokens, as a backend does.
// It keeps the tokens it was fed in a paged "KV cache" and a per-slot running hash ("recurrent state"), and checks
// on every step that the two agree, so a page shared by two live sequences, a wrong page table or a wrong n_past
// shows up as a violation. Verify items keep the hash after each token so commit() can roll back.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runner/model_runner.h"

namespace voltserve::testing {

struct FakeRunnerOptions {
  int32_t vocab_size = 64;    // logits rows
  int32_t n_vocab_real = 60;  // rows 60..63 are padding, given the HIGHEST logits so that sampling them shows
  int32_t context_length = 512;
  int32_t page_size = 4;
  int32_t n_pages = 256;
  int32_t n_slots = 8;
  int32_t max_step_tokens = 4096;
  int32_t max_verify_tokens = 16;
};

// One SeqStep as the fake received it (copied: the spans die with the step).
struct RecordedStep {
  int32_t slot = -1;
  std::vector<int32_t> page_table;
  int32_t n_past = 0;
  std::vector<int32_t> tokens;
  bool need_logits = false;  // a sampled output row was asked for
  bool verify = false;
};

class FakeRunner final : public ModelRunner {
 public:
  explicit FakeRunner(FakeRunnerOptions options = {});

  // The fake model, usable without a runner: the logits after `tokens` (the whole sequence so far) and the
  // token they peak on.
  static void logits_after(std::span<const int32_t> tokens, const FakeRunnerOptions& options, float* row);
  static int32_t next_token(std::span<const int32_t> tokens, const FakeRunnerOptions& options);

  const ModelInfo& info() const override { return info_; }
  CacheGeometry geometry() const override;
  StepCapacity capacity() const override { return {options_.max_step_tokens}; }
  Status reset_slot(int32_t slot) override;
  Status step(const StepRequest& request, StepResult& result) override;
  Status commit(int32_t slot, int32_t n_keep) override;

  // Test hooks; thread-safe.
  void fail_forward_at(int64_t call_index);  // that step call (0-based) returns an error
  void nan_at_forward(int64_t call_index);   // that step call computes NaN logits
  void throw_at_forward(int64_t call_index); // that step call throws std::runtime_error (a contract breach)
  void set_forward_delay(std::chrono::microseconds delay);
  int64_t n_forward() const;
  std::vector<std::vector<RecordedStep>> calls() const;
  std::vector<std::string> violations() const;

 private:
  struct SlotState {
    int32_t n_tokens = 0;
    uint64_t hash = 0;
    std::vector<SlotState> checkpoints;  // after each token of the last verify item
  };
  Status violation(std::string what);

  FakeRunnerOptions options_;
  ModelInfo info_;
  mutable std::mutex mutex_;
  std::vector<int32_t> kv_;  // [n_pages * page_size] the token stored at each cache position, -1 = never written
  std::vector<SlotState> slots_;
  std::vector<int32_t> penalty_counts_;
  std::vector<uint32_t> penalty_bits_;
  std::vector<std::vector<RecordedStep>> calls_;
  std::vector<std::string> violations_;
  int64_t n_forward_ = 0;
  int64_t fail_at_ = -1;
  int64_t nan_at_ = -1;
  int64_t throw_at_ = -1;
  std::chrono::microseconds delay_{0};
};

}  // namespace voltserve::testing

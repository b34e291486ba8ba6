// Qwen35Runner: the ModelRunner (engine/runner/model_runner.h) of the Qwen3.5 hybrid model on a Backend: validates
// each step, lays its sequences out as one StepBatch (token rows, SeqDescs, a flattened page table, output rows with
// their sampling parameters) and runs Qwen35Model. Tested in tests/golden (chunked prefill + decode == one full
// forward; batched sequences == each alone; verify + partial commit == decoding the kept tokens).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/mtp_drafter.h"
#include "model/qwen35_model.h"
#include "runner/model_runner.h"
#include "voltserve/memory_plan.h"
#include "voltserve/model_info.h"
#include "voltserve/status.h"

namespace voltserve {

struct RunnerOptions {
  ModelOptions model;          // folder, backend, threads, context, cache geometry, real vocabulary
  int32_t max_step_tokens = 256;  // tokens per step (the engine's max_tokens_per_step)
  int32_t max_verify_tokens = 0;  // tokens per verify item (k_max + 1; 0: no speculative verification)
  int32_t logits_rows = 0;        // lm_head rows per chunk (0: min(max_step_tokens, 64))
  GdnMode gdn_mode = GdnMode::kAuto;
  // Speculative decoding: drafts per round at most (k_max; 0: off). Loads the MTP head when the checkpoint has one
  // and the backend can accept drafts; max_verify_tokens is raised to k_max + 1. Otherwise geometry() reports
  // max_draft_tokens 0 and the log says why.
  int32_t max_draft_tokens = 0;
  kernels::sampling::AcceptRule accept_rule = kernels::sampling::AcceptRule::kExact;  // tests only
};

class Qwen35Runner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<Qwen35Runner>> load(const RunnerOptions& options);

  const ModelInfo& info() const override { return info_; }
  CacheGeometry geometry() const override { return geometry_; }
  StepCapacity capacity() const override { return capacity_; }
  Status reset_slot(int32_t slot) override;
  Status step(const StepRequest& request, StepResult& result) override;
  Status commit(int32_t slot, int32_t n_keep) override;
  Status save_state(int32_t slot, int32_t snapshot) override;
  Status load_state(int32_t snapshot, int32_t slot) override;
  Status copy_page(int32_t src_page, int32_t dst_page) override;
  int64_t graph_replays() const override { return backend_->graph_replays(); }
  SpeculativePhaseTimes speculative_phases() const override { return phases_; }
  DeviceTimeline device_timeline() const override { return backend_->device_timeline(); }

  const ModelConfig& config() const { return model_->config(); }
  const Backend& backend() const { return *backend_; }
  const Qwen35Cache& cache() const { return cache_; }  // tests: compare states
  // The memory plan the load followed (device backends; nullopt on the CPU).
  const std::optional<MemoryPlan>& memory_plan() const { return plan_; }

 private:
  Qwen35Runner() = default;
  Status build_batch(const StepRequest& request);
  // Loads the MTP head when options ask for speculation and the model and backend allow it (see RunnerOptions).
  Status load_drafter(const RunnerOptions& options);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Qwen35Model> model_;
  std::unique_ptr<MtpDrafter> drafter_;  // speculative decoding (null: off)
  bool device_rounds_ = true;            // ModelOptions::device_rounds
  Qwen35Cache cache_;
  ModelInfo info_;
  CacheGeometry geometry_;
  StepCapacity capacity_;
  StepBatch batch_;                        // reused from step to step
  std::vector<std::span<const uint32_t>> pending_masks_;  // the step's token masks, copied into batch_ before sampling
  std::vector<int32_t> verify_tokens_;     // per slot: tokens of its last verify item (0: none pending)
  std::optional<MemoryPlan> plan_;
  SpeculativePhaseTimes phases_;
};

// The factory the engine uses. options.model.backend: "cpu", "cuda" or "auto".
Result<std::unique_ptr<ModelRunner>> load_model_runner(const RunnerOptions& options);

}  // namespace voltserve

// Qwen35Runner: ModelRunner (engine/runner/model_runner.h) for the Qwen3.5 hybrid model on a Backend (CPU now):
// validates each step, maps SeqSteps onto paged KV (page_table) and recurrent-state slots, runs Qwen35Model.
// Tested in tests/golden (chunked prefill + decode == one full forward; batched sequences == each alone).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/qwen35_model.h"
#include "runner/model_runner.h"
#include "voltserve/status.h"

namespace voltserve {

struct RunnerOptions {
  std::string backend = "cpu";
  int32_t n_threads = 0;    // CPU threads; 0: min(hardware threads, 8)
  int32_t max_context = 0;  // positions per sequence; 0: min(max_position_embeddings, 8192)
  int32_t page_size = 16;   // tokens per KV page
  int32_t n_slots = 4;      // sequences that can be live at once
  int32_t n_pages = 0;      // KV pages shared by all sequences; 0: enough for n_slots full contexts
  GdnMode gdn_mode = GdnMode::kAuto;
  // Logit rows that are real tokens (the tokenizer's size); rows past it pad the matrix (Qwen3.5: 248077 of
  // 248320) and are never sampled. 0: every row is real.
  int32_t n_vocab_real = 0;
};

class Qwen35Runner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<Qwen35Runner>> load(const std::filesystem::path& model_dir,
                                                    const RunnerOptions& options);

  const ModelInfo& info() const override { return info_; }
  CacheGeometry geometry() const override { return geometry_; }
  Status reset_slot(int32_t slot) override;
  Status forward(std::span<const SeqStep> steps, std::vector<float>& logits) override;

  // Like forward(), but returns the logits of chosen token rows: `rows` index the steps' tokens laid end to end
  // (step 0's tokens first). Used by `voltserve logits` and the golden tests to read every position.
  Status forward_rows(std::span<const SeqStep> steps, std::span<const int32_t> rows, std::vector<float>& logits);

  const ModelConfig& config() const { return model_->config(); }

 private:
  Qwen35Runner() = default;
  Status build_segments(std::span<const SeqStep> steps, std::vector<int32_t>& tokens,
                        std::vector<SeqSegment>& segs) const;

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Qwen35Model> model_;
  Qwen35Cache cache_;
  ModelInfo info_;
  CacheGeometry geometry_;
};

// The factory the engine and the CLI use (options.backend: "cpu"; "auto" means cpu until a GPU backend exists).
Result<std::unique_ptr<ModelRunner>> load_model_runner(const std::filesystem::path& model_dir,
                                                       const RunnerOptions& options);

}  // namespace voltserve

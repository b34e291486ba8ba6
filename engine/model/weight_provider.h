// WeightProvider: where the model's weights come from — a checkpoint on disk, or synthetic weights of a config's
// real shapes and formats (benchmarks: a 27B-shaped model without 15 GB on disk). The loader
// (qwen35_weights.cpp) asks for linear layers as kernels::HostWeightRef and for small parameters as fp32 values.
// Tested through tests/golden (checkpoints) and tests/golden/synthetic_model_test.cpp (synthetic).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "linear/linear_ref.h"
#include "model/checkpoint.h"
#include "model/linear_weight.h"
#include "model/model_config.h"
#include "voltserve/status.h"

namespace voltserve {

class WeightProvider {
 public:
  virtual ~WeightProvider() = default;
  // Linear `module` with the expected shape [n, k]. The reference stays valid while the source lives.
  virtual Result<kernels::HostWeightRef> linear(const std::string& module, int64_t n, int64_t k) = 0;
  // A small parameter of exactly `shape` as fp32 values.
  virtual Result<std::vector<float>> values(const std::string& name, const std::vector<int64_t>& shape) = 0;
  // A scalar the checkpoint may carry (the FP8 KV-cache scales self_attn.k_proj.k_scale / v_proj.v_scale):
  // nullopt when absent; an error naming it when it is not one positive finite value.
  virtual Result<std::optional<float>> optional_scalar(const std::string& /*name*/) { return std::optional<float>{}; }
  // Whether a separate lm_head exists (tie_word_embeddings false).
  virtual bool has_lm_head() const = 0;
  // Whether the output head is loaded as a weight of its own (module lm_head) even where the embeddings are tied:
  // a head quantized at load (model/quantized_head.h).
  virtual bool own_lm_head() const { return false; }
  // For messages: "/models/Qwen3.5-27B" or "synthetic weights of config/models/...".
  virtual std::string describe() const = 0;
};

// The tensors of a checkpoint (load_linear decides each module's format from the config and the tensors present).
class CheckpointWeights final : public WeightProvider {
 public:
  CheckpointWeights(const Checkpoint& checkpoint, const ModelConfig& config) : ckpt_(checkpoint), cfg_(config) {}
  Result<kernels::HostWeightRef> linear(const std::string& module, int64_t n, int64_t k) override;
  Result<std::vector<float>> values(const std::string& name, const std::vector<int64_t>& shape) override;
  Result<std::optional<float>> optional_scalar(const std::string& name) override;
  bool has_lm_head() const override;
  std::string describe() const override { return ckpt_.dir().string(); }

 private:
  const Checkpoint& ckpt_;
  const ModelConfig& cfg_;
  std::deque<LinearWeight> loaded_;  // keeps fp8 scales alive for the references handed out
};

// Seeded synthetic weights in the format the config's quantization expects of each module: HostWeightRefs with
// no data (codes == nullptr; the backend fills them, see kernels/linear/synthetic.h) and small parameters drawn
// around their trained scale (norm weights near 0 for the (1+w) norms, near 1 for the gated norm; A_log, dt_bias).
class SyntheticWeights final : public WeightProvider {
 public:
  SyntheticWeights(const ModelConfig& config, uint64_t seed, std::string what)
      : cfg_(config), seed_(seed), what_(std::move(what)) {}
  Result<kernels::HostWeightRef> linear(const std::string& module, int64_t n, int64_t k) override;
  Result<std::vector<float>> values(const std::string& name, const std::vector<int64_t>& shape) override;
  bool has_lm_head() const override { return !cfg_.tie_word_embeddings; }
  std::string describe() const override { return "synthetic weights of " + what_; }

 private:
  const ModelConfig& cfg_;
  uint64_t seed_;
  std::string what_;
  uint64_t n_tensors_ = 0;  // each tensor gets its own seed
};

}  // namespace voltserve

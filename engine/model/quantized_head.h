// QuantizedHeadWeights: a WeightProvider over another that hands out the output head quantized at load to FP8 or
// NVFP4 (ModelOptions::lm_head, off by default): the BF16 lm_head is about 15% of what a 27B NVFP4 decode step
// streams. Where the embeddings are tied, the head becomes a weight of its own (the embedding stays as it is). A
// head the checkpoint already quantized is left alone; synthetic weights just change format; shape_only hands out
// the new format without computing it (the memory plan). Tested in tests/model/weight_quantize_test.cpp and, for
// its effect on greedy output, tests/golden/lm_head_quant_test.cpp.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "model/model_config.h"
#include "model/weight_provider.h"
#include "model/weight_quantize.h"
#include "voltserve/status.h"

namespace voltserve {

// ModelOptions::lm_head: "" or "keep" (as the checkpoint has it) -> kDense is returned as "keep"; "fp8", "nvfp4".
struct HeadQuant {
  bool keep = true;
  WeightFormat format = WeightFormat::kDense;
};
Result<HeadQuant> parse_head_quant(std::string_view option);

class QuantizedHeadWeights final : public WeightProvider {
 public:
  QuantizedHeadWeights(WeightProvider& inner, const ModelConfig& config, WeightFormat target, bool shape_only)
      : inner_(inner), cfg_(config), target_(target), shape_only_(shape_only) {}
  Result<kernels::HostWeightRef> linear(const std::string& module, int64_t n, int64_t k) override;
  Result<std::vector<float>> values(const std::string& name, const std::vector<int64_t>& shape) override {
    return inner_.values(name, shape);
  }
  Result<std::optional<float>> optional_scalar(const std::string& name) override { return inner_.optional_scalar(name); }
  bool has_lm_head() const override { return cfg_.tie_word_embeddings || inner_.has_lm_head(); }
  bool own_lm_head() const override { return true; }
  std::string describe() const override { return inner_.describe(); }

 private:
  WeightProvider& inner_;
  const ModelConfig& cfg_;
  WeightFormat target_;
  bool shape_only_;
  std::deque<std::unique_ptr<QuantizedWeight>> kept_;
};

}  // namespace voltserve

// QuantizedHeadWeights (see quantized_head.h).
#include "model/quantized_head.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "common/named_logger.h"
#include "linear/synthetic.h"
#include "model/tensor_names.h"

namespace voltserve {

Result<HeadQuant> parse_head_quant(std::string_view option) {
  if (option.empty() || option == "keep") return HeadQuant{};
  if (option == "fp8") return HeadQuant{false, WeightFormat::kFp8};
  if (option == "nvfp4") return HeadQuant{false, WeightFormat::kNvfp4};
  return invalid_argument("lm_head: unknown format '" + std::string(option) +
                          "' (keep: as the checkpoint stores it, fp8 or nvfp4)");
}

Result<kernels::HostWeightRef> QuantizedHeadWeights::linear(const std::string& module, int64_t n, int64_t k) {
  if (module != kLmHeadModule) return inner_.linear(module, n, k);
  // Tied embeddings: the head is the embedding table, made a weight of its own here.
  const std::string source = cfg_.tie_word_embeddings ? cfg_.tensor_prefix + "embed_tokens" : module;
  VS_ASSIGN_OR_RETURN(kernels::HostWeightRef w, inner_.linear(source, n, k));
  if (w.format != WeightFormat::kDense) {
    if (!shape_only_) named_logger("engine").info("lm_head: the checkpoint stores it as {} already; left as it is",
                                weight_format_name(w.format));
    return w;
  }
  if (w.codes == nullptr || shape_only_) {  // synthetic weights, or sizing only: the format, no data
    kernels::HostWeightRef r = w;
    r.format = target_;
    r.codes = nullptr;
    r.scales = nullptr;
    r.global_scale = kernels::kSyntheticNvfp4GlobalScale;
    r.tensor_scale = kernels::kSyntheticFp8TensorScale;
    // FP8 is quantized with one scale per row: the real head carries them (n floats); synthetic weights have none.
    static const float kHasRowScales = 1.0f;
    r.channel_scales = (shape_only_ && w.codes != nullptr && target_ == WeightFormat::kFp8) ? &kHasRowScales : nullptr;
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  VS_ASSIGN_OR_RETURN(std::unique_ptr<QuantizedWeight> q, quantize_weight(w, target_));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  named_logger("engine").info("lm_head: {} [{}, {}] quantized to {} at load in {:.1f} s (--lm-head)", source, n, k,
                              weight_format_name(target_), s);
  kept_.push_back(std::move(q));
  return kept_.back()->ref;
}

}  // namespace voltserve

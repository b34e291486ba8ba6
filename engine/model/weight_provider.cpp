// CheckpointWeights and SyntheticWeights (see weight_source.h).
#include "model/weight_provider.h"

#include <cmath>

#include "linear/synthetic.h"
#include "model/tensor_names.h"

namespace voltserve {

Result<kernels::HostWeightRef> CheckpointWeights::linear(const std::string& module, int64_t n, int64_t k) {
  VS_ASSIGN_OR_RETURN(LinearWeight w, load_linear(ckpt_, cfg_, module, n, k));
  loaded_.push_back(std::move(w));
  return loaded_.back().host_ref();
}

Result<std::vector<float>> CheckpointWeights::values(const std::string& name, const std::vector<int64_t>& shape) {
  VS_ASSIGN_OR_RETURN(TensorView view, ckpt_.tensor(name));
  if (view.shape != shape) {
    return invalid_argument(view.file + ": tensor " + name + " has shape " + shape_to_string(view.shape) +
                            ", expected " + shape_to_string(shape));
  }
  return to_f32(view);
}

Result<std::optional<float>> CheckpointWeights::optional_scalar(const std::string& name) {
  if (!ckpt_.contains(name)) return std::optional<float>{};
  VS_ASSIGN_OR_RETURN(TensorView view, ckpt_.tensor(name));
  VS_ASSIGN_OR_RETURN(std::vector<float> v, to_f32(view));
  if (v.size() != 1 || !(v[0] > 0.0f) || !std::isfinite(v[0])) {
    return invalid_argument(view.file + ": tensor " + name + " must be one positive finite value (shape " +
                            shape_to_string(view.shape) + ")");
  }
  return std::optional<float>{v[0]};
}

bool CheckpointWeights::has_lm_head() const {
  return ckpt_.contains(std::string(kLmHeadModule) + ".weight") ||
         ckpt_.contains(std::string(kLmHeadModule) + ".weight_packed");
}

Result<kernels::HostWeightRef> SyntheticWeights::linear(const std::string& module, int64_t n, int64_t k) {
  kernels::HostWeightRef r;
  // The embedding is no Linear: quantization configs never quantize it (ModelOpt skips nn.Embedding).
  const bool embedding = module.size() >= 12 && module.compare(module.size() - 12, 12, "embed_tokens") == 0;
  switch (embedding ? LayerQuant::kNone : cfg_.quantization.expected(module)) {
    case LayerQuant::kNvfp4:
    case LayerQuant::kW4A16Nvfp4:
      r.format = WeightFormat::kNvfp4;
      r.global_scale = kernels::kSyntheticNvfp4GlobalScale;
      break;
    case LayerQuant::kFp8:
    case LayerQuant::kFp8PerChannel:
      r.format = WeightFormat::kFp8;
      r.tensor_scale = kernels::kSyntheticFp8TensorScale;
      break;
    default:
      r.format = WeightFormat::kDense;
      r.dense_dtype = DType::kBF16;
      break;
  }
  r.n = n;
  r.k = k;
  r.codes = nullptr;
  r.synthetic_seed = kernels::synthetic_hash(seed_, n_tensors_++);
  return r;
}

Result<std::vector<float>> SyntheticWeights::values(const std::string& name, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const uint64_t seed = kernels::synthetic_hash(seed_ ^ 0xfeedULL, n_tensors_++);
  std::vector<float> v(static_cast<size_t>(numel));
  auto uniform = [&](size_t i) {  // in [0, 1)
    return static_cast<float>(static_cast<uint32_t>(kernels::synthetic_hash(seed, i) >> 40)) * (1.0f / 16777216.0f);
  };
  const bool gated_norm = name.find("linear_attn.norm.weight") != std::string::npos;
  for (size_t i = 0; i < v.size(); ++i) {
    if (name.find("A_log") != std::string::npos) {
      v[i] = std::log(1.0f + 15.0f * uniform(i));  // transformers' init: log U(1, 16)
    } else if (name.find("dt_bias") != std::string::npos) {
      v[i] = 1.0f;
    } else if (name.find("conv1d") != std::string::npos) {
      v[i] = (uniform(i) - 0.5f) * 0.5f;
    } else if (gated_norm) {
      v[i] = 1.0f + (uniform(i) - 0.5f) * 0.2f;  // plain weight near 1
    } else {
      v[i] = (uniform(i) - 0.5f) * 0.2f;  // zero-centred (1 + w) norms: w near 0
    }
  }
  return v;
}

}  // namespace voltserve

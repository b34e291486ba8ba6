// WeightFormat: how a linear layer's weight is stored — the one enum shared by the checkpoint loader
// (engine/model/linear_weight.h), the backends and the kernels (kernels/linear). CUDA-free, header-only.
#pragma once

namespace voltserve {

enum class WeightFormat {
  kDense,  // plain floats (BF16 / F16 / F32 in checkpoints; F16 on the GPU)
  kNvfp4,  // E2M1 codes, an E4M3 scale per 16 along k, an fp32 per-tensor multiplier (W4A16)
  kFp8,    // E4M3 weights with a per-tensor (or per-channel) fp32 scale (W8A16)
};

inline const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kDense: return "dense";
    case WeightFormat::kNvfp4: return "NVFP4";
    case WeightFormat::kFp8: return "FP8";
  }
  return "?";
}

}  // namespace voltserve

// --kv-cache-dtype resolution (kv_cache_dtype.h). Tested in tests/model/kv_cache_dtype_test.cpp.
#include "model/kv_cache_dtype.h"

namespace voltserve {

Result<DType> resolve_kv_cache_dtype(std::string_view option, const ModelConfig& config, DType activation) {
  if (option.empty() || option == "auto") {
    return config.quantization.kv_cache_quant_algo == "FP8" ? DType::kF8E4M3 : activation;
  }
  if (option == "fp16") return DType::kF16;
  if (option == "bf16") return DType::kBF16;
  if (option == "fp8") return DType::kF8E4M3;
  return invalid_argument("--kv-cache-dtype: '" + std::string(option) + "' is not one of auto, fp16, bf16, fp8");
}

std::string kv_cache_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "fp8";
    case DType::kF32: return "fp32";
    default: return "dtype " + std::to_string(static_cast<int>(dtype));
  }
}

}  // namespace voltserve

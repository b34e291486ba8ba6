// DType: the one element-type enum of the project — checkpoint tensors (engine/model reads their safetensors
// spellings), backend activations and caches, kernel arguments. CUDA-free, header-only.
#pragma once

#include <cstddef>

#include "common/host_device.h"

namespace voltserve {

enum class DType { kBF16, kF16, kF32, kF8E4M3, kU8, kI8, kI32, kI64 };

VS_HD constexpr size_t dtype_bytes(DType d) {
  switch (d) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF8E4M3:
    case DType::kU8:
    case DType::kI8:
      return 1;
    case DType::kI64:
      return 8;
  }
  return 0;
}

}  // namespace voltserve

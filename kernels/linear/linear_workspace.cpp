// linear_workspace_bytes (linear.h) on the host, without CUDA: the CUDA backend sizes its scratch with it and the
// memory plan (engine/plan) counts it. linear_forward's M >= 65 path dequantizes row chunks of this many rows
// (tests/kernels/linear_gpu_test.cpp runs it on workspaces of exactly this size).
#include <algorithm>

#include "linear/linear.h"

namespace voltserve::kernels {

size_t linear_workspace_bytes(const PackedWeightView& w, int64_t m) {
  if (m <= kMaxStreamRows || w.format == WeightFormat::kDense) return 0;
  const int64_t rows = std::min<int64_t>(w.n, 16384);  // chunk of rows dequantized at a time
  return static_cast<size_t>(rows * w.k * 2);
}

}  // namespace voltserve::kernels

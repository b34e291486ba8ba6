// The per-element math of the RMSNorm kernel (norm.cu) as host/device helpers, and the host's launch plan (vector
// width, iterations per thread). CUDA-free; tests/kernels/norm_plan_test.cpp checks both on the CPU against the
// reference (norm_ref.cpp), tests/kernels/norm_gpu_test.cpp the kernel.
#pragma once

#include <math.h>

#include <cstdint>

#include "common/host_device.h"
#include "norm/norm.h"

namespace voltserve::kernels::norm {

// 1 / sqrt(mean(v^2) + eps) from the row's fp32 sum of squares, exactly as rms_norm_row_ref computes it (IEEE
// division and square root on both sides; only the order of the sum of squares differs on the device).
VS_HD float rms_inv(float sum_sq, int64_t n, float eps) { return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps); }

// One output element, in the reference's order: (v * inv) * w; w = 1 without a weight (exact).
VS_HD float rms_out(float v, float inv, float w) { return v * inv * w; }

inline constexpr int kNormThreads = 256;  // one block per row
inline constexpr int kNormMaxItersVec = 16;     // float4 units per thread: rows up to 16384 with 16-byte access
inline constexpr int kNormMaxItersScalar = 32;  // floats per thread: rows up to 8192 otherwise

struct NormPlan {
  int vec = 1;    // 4: float4 loads and stores (fp16 out: 8-byte stores of 4 halves); 1: scalar
  int iters = 0;  // units per thread, a power of two (the kernel keeps the row in registers); 0: n too large
};

// Vector width 4 where every row start is aligned for it (pointers and strides) and n % 4 == 0, else 1; the fewest
// iterations (a power of two) that cover n with kNormThreads threads.
inline NormPlan norm_plan(const RmsNormArgs& a) {
  auto aligned = [](const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  const bool f16 = a.out_dtype == DType::kF16;
  const bool vec = a.n % 4 == 0 && aligned(a.x, 16) && a.x_stride % 4 == 0 &&
                   (a.residual == nullptr || (aligned(a.residual, 16) && a.residual_stride % 4 == 0)) &&
                   (a.weight == nullptr || aligned(a.weight, 16)) && aligned(a.out, f16 ? 8 : 16) &&
                   a.out_stride % 4 == 0;
  NormPlan p;
  p.vec = vec ? 4 : 1;
  const int64_t units = (a.n + p.vec - 1) / p.vec;
  const int64_t need = (units + kNormThreads - 1) / kNormThreads;
  int iters = 1;
  while (iters < need) iters *= 2;
  p.iters = iters <= (vec ? kNormMaxItersVec : kNormMaxItersScalar) ? iters : 0;
  return p;
}

}  // namespace voltserve::kernels::norm

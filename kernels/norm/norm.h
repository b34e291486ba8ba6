// RMSNorm over rows, optionally fused with the residual-stream update that precedes it in a pre-norm decoder layer
// (MODEL.md §2.2, §2.3): with a residual, residual[r] += x[r] first and the updated residual row is normalised.
// out[r, i] = v[i] / sqrt(mean(v^2) + eps) * weight[i], statistics in fp32 (weight already holds (1 + w) for the
// zero-centred norms). The reference (norm_ref.cpp) is the CPU backend's; tests/kernels/norm_gpu_test.cpp.
#pragma once

#include <cstdint>

#include "common/dtype.h"
#include "common/host_parallel.h"
#include "common/kernel_status.h"

namespace voltserve::kernels::norm {

struct RmsNormArgs {
  const float* x = nullptr;  // [n_rows, n] fp32
  int64_t x_stride = 0;
  float* residual = nullptr;  // optional [n_rows, n] fp32, updated in place: residual += x, then v = residual
  int64_t residual_stride = 0;
  const float* weight = nullptr;  // [n] fp32; nullptr: no weight (all ones)
  void* out = nullptr;            // [n_rows, n]; may alias x (or residual) when out_dtype is kF32 and strides match
  int64_t out_stride = 0;
  DType out_dtype = DType::kF32;  // the reference writes kF32 only; the device kF32 or kF16
  int32_t n_rows = 0;
  int32_t n = 0;
  float eps = 1e-6f;
  void* stream = nullptr;  // device form only
  bool pdl = false;        // device form: programmatic dependent launch (sm_90+ only; kernels/common/pdl.cuh)
};

void rms_norm_ref(const RmsNormArgs& a, const HostParallel* parallel = nullptr);
// One row, the scalar core of the reference (also used by the attention and GDN references for their per-head
// norms): out = x / sqrt(mean(x^2) + eps) * w, w may be null.
void rms_norm_row_ref(const float* x, const float* w, int64_t n, float eps, float* out);

// Device form (norm.cu): n <= 16384 when n % 4 == 0 and every row start is 16-byte aligned (fp16 out: 8), else
// n <= 8192; pointers aligned to their element size; kBadShape / kBadArgument otherwise.
KernelStatus rms_norm(const RmsNormArgs& a);

}  // namespace voltserve::kernels::norm

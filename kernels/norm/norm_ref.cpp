// CPU reference of kernels/norm (see norm.h): the CPU backend's RMSNorm, fused with the residual update.
#include <cmath>

#include "norm/norm.h"

namespace voltserve::kernels::norm {

void rms_norm_row_ref(const float* x, const float* w, int64_t n, float eps, float* out) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}

void rms_norm_ref(const RmsNormArgs& a, const HostParallel* parallel) {
  auto* out = static_cast<float*>(a.out);
  run_parallel(parallel, a.n_rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = a.x + r * a.x_stride;
      const float* v = xr;
      if (a.residual != nullptr) {
        float* res = a.residual + r * a.residual_stride;
        for (int64_t i = 0; i < a.n; ++i) res[i] += xr[i];
        v = res;
      }
      rms_norm_row_ref(v, a.weight, a.n, a.eps, out + r * a.out_stride);
    }
  });
}

}  // namespace voltserve::kernels::norm

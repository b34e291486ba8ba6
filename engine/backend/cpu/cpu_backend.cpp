// CpuBackend: memory, the elementwise ops, RMSNorm and the fp32 matmul. Attention and the Gated DeltaNet live in
// cpu_attention.cpp and cpu_gdn.cpp. Tested against transformers in tests/golden.
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "model/linear_weight.h"

namespace voltserve {

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<cpu::CpuBackend>(options);
}

namespace cpu {
namespace {

int32_t default_threads(int32_t requested) {
  if (requested > 0) return requested;
  const auto hw = static_cast<int32_t>(std::thread::hardware_concurrency());
  return std::clamp(hw, 1, 8);
}

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void rms_norm_row(const float* x, const float* w, int64_t n, float eps, float* out) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w ? x[i] * inv * w[i] : x[i] * inv;
}

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : pool_(default_threads(options.n_threads)), gdn_mode_(options.gdn_mode) {}

Tensor CpuBackend::alloc(int64_t rows, int64_t cols) {
  Tensor t;
  const auto n = static_cast<size_t>(std::max<int64_t>(1, rows * cols));
  t.storage = std::shared_ptr<float>(new float[n](), std::default_delete<float[]>());
  t.data = t.storage.get();
  t.rows = rows;
  t.cols = cols;
  return t;
}

Tensor CpuBackend::upload(std::span<const float> host, int64_t rows, int64_t cols) {
  Tensor t = alloc(rows, cols);
  std::copy_n(host.data(), std::min<int64_t>(static_cast<int64_t>(host.size()), rows * cols), t.data);
  return t;
}

void CpuBackend::download(const Tensor& t, std::span<float> host) {
  std::copy_n(t.data, std::min<int64_t>(static_cast<int64_t>(host.size()), t.numel()), host.data());
}

void CpuBackend::zero(Tensor& t, int64_t row_begin, int64_t row_end) {
  std::fill(t.row(row_begin), t.row(row_end), 0.0f);
}

Result<std::unique_ptr<PreparedLinear>> CpuBackend::prepare_linear(const LinearWeight& w) {
  std::vector<float> dense = dequantize(w);
  if (static_cast<int64_t>(dense.size()) != w.n * w.k) {
    return internal_error("dequantize of " + w.weight.name + " gave " + std::to_string(dense.size()) +
                          " values, expected " + std::to_string(w.n * w.k));
  }
  return std::unique_ptr<PreparedLinear>(std::make_unique<CpuLinear>(w.n, w.k, std::move(dense)));
}

void CpuBackend::embed(const PreparedLinear& table, std::span<const int32_t> ids, Tensor& out) {
  const auto& t = static_cast<const CpuLinear&>(table);
  for (size_t i = 0; i < ids.size(); ++i) std::copy_n(t.row(ids[i]), t.k(), out.row(static_cast<int64_t>(i)));
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  pool_.parallel_for(x.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) rms_norm_row(x.row(r), w.data, x.cols, eps, out.row(r));
  });
}

void CpuBackend::rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  pool_.parallel_for(x.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* res = residual.row(r);
      const float* xr = x.row(r);
      for (int64_t i = 0; i < x.cols; ++i) res[i] += xr[i];
      rms_norm_row(res, w.data, x.cols, eps, out.row(r));
    }
  });
}

void CpuBackend::linear(const PreparedLinear& weight, const Tensor& x, Tensor& out) {
  const auto& w = static_cast<const CpuLinear&>(weight);
  const int64_t m = x.rows, n = w.n(), k = w.k();
  // Parallel over output features: each y[i, j] is one dot product in a fixed order, so a token's result does not
  // depend on which other tokens share the batch (chunked prefill equals one full forward bit for bit).
  pool_.parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * m)), [&](int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x.row(i);
      float* yi = out.row(i);
      for (int64_t j = j0; j < j1; ++j) {
        const float* wj = w.row(j);
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) acc += xi[t] * wj[t];
        yi[j] = acc;
      }
    }
  });
}

void CpuBackend::gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) {
  for (size_t r = 0; r < rows.size(); ++r) std::copy_n(x.row(rows[r]), x.cols, out.row(static_cast<int64_t>(r)));
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  const int64_t n = gate.numel();
  for (int64_t i = 0; i < n; ++i) out.data[i] = silu(gate.data[i]) * up.data[i];
}

void CpuBackend::add(const Tensor& x, Tensor& residual) {
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) residual.data[i] += x.data[i];
}

}  // namespace cpu
}  // namespace voltserve

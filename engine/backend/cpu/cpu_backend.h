// CpuBackend: the fp32 reference implementation of the Backend ops, plain loops over a small thread pool.
// The oracle for every other backend; tested against transformers in tests/golden (qwen35_golden_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace voltserve::cpu {

// A dequantized linear weight, [n, k] fp32 row-major.
class CpuLinear final : public PreparedLinear {
 public:
  CpuLinear(int64_t n, int64_t k, std::vector<float> w) : n_(n), k_(k), w_(std::move(w)) {}
  int64_t n() const override { return n_; }
  int64_t k() const override { return k_; }
  const float* row(int64_t i) const { return w_.data() + i * k_; }

 private:
  int64_t n_, k_;
  std::vector<float> w_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options);
  std::string name() const override { return "cpu"; }

  Tensor alloc(int64_t rows, int64_t cols) override;
  Tensor upload(std::span<const float> host, int64_t rows, int64_t cols) override;
  void download(const Tensor& t, std::span<float> host) override;
  void zero(Tensor& t, int64_t row_begin, int64_t row_end) override;
  Result<std::unique_ptr<PreparedLinear>> prepare_linear(const LinearWeight& w) override;

  void embed(const PreparedLinear& table, std::span<const int32_t> ids, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) override;
  void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) override;
  void gather_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void add(const Tensor& x, Tensor& residual) override;

  void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg, const Tensor& k,
                       const Tensor& v, std::span<const SeqSegment> segs, KvCacheLayer& cache,
                       Tensor& out) override;  // cpu_attention.cpp
  void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z, const Tensor& b,
                 const Tensor& a, std::span<const SeqSegment> segs, GdnStateLayer& state,
                 Tensor& out) override;  // cpu_gdn.cpp

 private:
  ThreadPool pool_;
  GdnMode gdn_mode_;
};

// One row of the RMSNorm: out = x / sqrt(mean(x^2) + eps) * w (w may be null: no weight).
void rms_norm_row(const float* x, const float* w, int64_t n, float eps, float* out);

}  // namespace voltserve::cpu

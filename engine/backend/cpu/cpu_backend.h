// CpuBackend: the fp32 reference implementation of the Backend ops, an adapter over the kernels' CUDA-free
// references (kernels/*/*_ref.cpp) on a small thread pool — the oracle of every other backend. Tested against
// transformers in tests/golden (qwen35_golden_test.cpp) and by tests/golden/runner_contract_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/thread_pool.h"

namespace voltserve::cpu {

// A dequantized linear weight, [n, k] fp32 row-major (the parts of a merged weight one after the other).
class CpuLinear final : public PreparedLinear {
 public:
  CpuLinear(int64_t n, int64_t k, std::vector<float> w) : n_(n), k_(k), w_(std::move(w)) {}
  int64_t n() const override { return n_; }
  int64_t k() const override { return k_; }
  int64_t bytes() const override { return static_cast<int64_t>(w_.size() * sizeof(float)); }
  const float* row(int64_t i) const { return w_.data() + i * k_; }

 private:
  int64_t n_, k_;
  std::vector<float> w_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options);
  std::string name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::kF32; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  bool accepts_drafts() const override { return true; }

  Result<Tensor> alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) override;
  Result<Tensor> upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) override;
  Result<Tensor> upload_ids(std::span<const int32_t> ids, std::string_view what) override;
  Result<std::unique_ptr<PreparedLinear>> prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                         std::string_view what) override;
  Status configure(const StepLimits& limits) override;
  Status reset_sampling_slot(int32_t slot) override;
  void zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) override;

  Status begin_step(const StepBatch& batch) override;
  Status end_step(StepResult& result) override;

  void embed(const PreparedLinear& table, Tensor& out) override;
  void embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) override;
  void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override;
  void gather_output_rows(const Tensor& x, Tensor& out) override;
  void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg, const Tensor& k,
                       const Tensor& v, KvCacheLayer& cache, Tensor& out) override;
  void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z, const Tensor& b,
                 const Tensor& a, GdnStateLayer& state, Tensor& out) override;
  Status gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) override;
  Status copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) override;
  void lm_head_outputs(const PreparedLinear& head, const Tensor& hidden, Tensor& logits_ws) override;

 private:
  // Records the first failure of the step (the sticky error end_step() returns).
  void fail(Status s);
  bool check_f32(const Tensor& t, const char* op, const char* what);
  // embed / embed_samples after their checks: table rows of `ids`, through id_map when it is not empty.
  void embed_rows(const PreparedLinear& table, const int32_t* ids, const Tensor& id_map, Tensor& out);

  // The rows [r0, r0 + nr) of one chunk of lm_head_outputs, whose logits are in `logits`.
  void sample_chunk(const Tensor& hidden, const Tensor& logits, int64_t r0, int64_t nr, int32_t n_vocab_real);

  ThreadPool pool_;
  GdnMode gdn_mode_;
  kernels::sampling::AcceptRule accept_rule_;
  StepLimits limits_;
  int64_t weight_bytes_ = 0;
  std::vector<std::unique_ptr<float[]>> allocations_;
  // Penalty state of every slot (kernels/sampling/sampling.h).
  std::vector<int32_t> penalty_counts_;
  std::vector<uint32_t> penalty_bits_;
  kernels::sampling::PenaltyState penalties_;
  // The current step, and what the previous one sampled per output row (-1: nothing; embed_samples).
  const StepBatch* batch_ = nullptr;
  std::vector<int32_t> previous_samples_;
  // The accepted runs of the last step with verify items (kernels/sampling/accepted_runs.h), and the current step
  // with its shifts applied (SeqDesc::shift_rows / shift_past; batch_ then points here).
  std::vector<int32_t> runs_;
  StepBatch shifted_;
  Status step_status_;
  StepResult result_;
};

}  // namespace voltserve::cpu

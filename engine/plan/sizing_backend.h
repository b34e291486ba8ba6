// SizingBackend: a Backend that holds no memory and runs nothing; it counts what the CUDA backend would allocate
// for the same calls (backend/cuda_layout.h), by category. The memory plan loads the model into it (the real
// loader, so every tensor the model asks for is counted), allocates the caches and configures the step, and reads
// the tallies. Tensors it hands out have no data. Tested through tests/plan/memory_plan_test.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "linear/linear.h"

namespace voltserve::plan {

// What an allocation is for, in the order the plan prints them.
enum class Use {
  kWeightsNvfp4,
  kWeightsFp8,
  kWeightsDense,
  kEmbedding,
  kLmHead,
  kSmallParams,
  kKvCache,
  kGdnState,
  kVerifyCheckpoints,
  kPrefixSnapshots,
  kActivations,
  kLogits,
  kStepBuffers,
  kOther,
};

struct Tally {
  int64_t bytes = 0;   // device bytes, allocator rounding included
  int64_t count = 0;   // allocations (weights: prepared tensors)
};

class SizingBackend final : public Backend {
 public:
  explicit SizingBackend(kernels::KernelFamily family) : family_(family) {}

  const std::map<Use, Tally>& tallies() const { return tallies_; }
  // Adds to a tally (negative: takes back what a probe counted).
  void add(Use use, int64_t bytes, int64_t count = 1);
  // The largest M >= 65 dequantization scratch of the prepared weights: layer weights at `m_layers` rows, the
  // output head (lm_head) at `m_head` rows.
  int64_t linear_scratch_bytes(int64_t m_layers, int64_t m_head) const;
  const StepLimits& limits() const { return limits_; }
  // The format the output head (lm_head) was prepared in; kDense when there is none of its own (tied).
  WeightFormat head_format() const { return head_format_; }

  std::string name() const override { return "sizing"; }
  DType activation_dtype() const override { return DType::kF16; }  // as the CUDA backend: fp16 KV and activations
  int64_t weight_bytes() const override;

  Result<Tensor> alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) override;
  Result<Tensor> upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) override;
  Result<Tensor> upload_ids(std::span<const int32_t> ids, std::string_view what) override;
  Result<std::unique_ptr<PreparedLinear>> prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                         std::string_view what) override;
  Status configure(const StepLimits& limits) override;
  Status reset_sampling_slot(int32_t) override { return Status::ok(); }
  void zero_rows(Tensor&, int64_t, int64_t) override {}
  Status begin_step(const StepBatch&) override;
  Status end_step(StepResult&) override;

  void embed(const PreparedLinear&, Tensor&) override {}
  void embed_samples(const PreparedLinear&, const Tensor&, Tensor&) override {}
  void rms_norm(const Tensor&, const Tensor&, float, Tensor&) override {}
  void rms_norm_residual(const Tensor&, Tensor&, const Tensor&, float, Tensor&) override {}
  void linear(const PreparedLinear&, const Tensor&, Tensor&) override {}
  void swiglu(const Tensor&, const Tensor&, Tensor&) override {}
  void gather_output_rows(const Tensor&, Tensor&) override {}
  void gated_attention(const AttentionParams&, const AttentionWeights&, const Tensor&, const Tensor&, const Tensor&,
                       KvCacheLayer&, Tensor&) override {}
  void gdn_layer(const GdnParams&, const GdnWeights&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                 GdnStateLayer&, Tensor&) override {}
  Status gdn_commit(const GdnParams&, std::span<GdnStateLayer>, int32_t, int32_t) override;
  Status copy_rows(const Tensor&, int64_t, Tensor&, int64_t, int64_t) override;
  void lm_head_outputs(const PreparedLinear&, const Tensor&, Tensor&) override {}

 private:
  struct Prepared {
    std::string what;
    bool head = false;
    std::vector<kernels::PackedWeightView> segments;  // format, n, k of each launch (no data)
  };
  kernels::KernelFamily family_;
  std::map<Use, Tally> tallies_;
  std::vector<Prepared> prepared_;
  StepLimits limits_;
  WeightFormat head_format_ = WeightFormat::kDense;
};

}  // namespace voltserve::plan

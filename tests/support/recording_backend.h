// RecordingBackend: a Backend that forwards every call to another one and records each op with the tensors it
// was given (data pointer, dtype, shape, stride) and every allocation, so tests can check that a step is
// capture-ready: the same ops on the same memory from one step of a size to the next, nothing allocated per step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace voltserve::testing {

struct RecordedTensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0, stride = 0;
  bool operator==(const RecordedTensor&) const = default;
};

struct RecordedOp {
  std::string name;
  std::vector<RecordedTensor> tensors;
  bool operator==(const RecordedOp&) const = default;
};

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  const std::vector<RecordedOp>& ops() const { return ops_; }
  void clear_ops() { ops_.clear(); }
  int64_t n_allocations() const { return n_allocations_; }

  std::string name() const override { return "recording(" + inner_->name() + ")"; }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  int64_t weight_bytes() const override { return inner_->weight_bytes(); }
  Result<Tensor> alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) override {
    ++n_allocations_;
    return inner_->alloc(rows, cols, dtype, what);
  }
  Result<Tensor> upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) override {
    ++n_allocations_;
    return inner_->upload(host, rows, cols, what);
  }
  Result<Tensor> upload_ids(std::span<const int32_t> ids, std::string_view what) override {
    ++n_allocations_;
    return inner_->upload_ids(ids, what);
  }
  Result<std::unique_ptr<PreparedLinear>> prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                         std::string_view what) override {
    ++n_allocations_;
    return inner_->prepare_linear(parts, what);
  }
  Status configure(const StepLimits& limits) override { return inner_->configure(limits); }
  Status reset_sampling_slot(int32_t slot) override { return inner_->reset_sampling_slot(slot); }
  void zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) override { inner_->zero_rows(t, row_begin, row_end); }
  Status begin_step(const StepBatch& batch) override { return inner_->begin_step(batch); }
  Status end_step(StepResult& result) override { return inner_->end_step(result); }
  Status end_step_deferred() override { return inner_->end_step_deferred(); }
  Status take_deferred(std::vector<StepResult>& results) override { return inner_->take_deferred(results); }

  void embed(const PreparedLinear& table, Tensor& out) override {
    record("embed", {out});
    inner_->embed(table, out);
  }
  void embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) override {
    record("embed_samples", {id_map, out});
    inner_->embed_samples(table, id_map, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    record("rms_norm", {x, w, out});
    inner_->rms_norm(x, w, eps, out);
  }
  void rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) override {
    record("rms_norm_residual", {x, residual, w, out});
    inner_->rms_norm_residual(x, residual, w, eps, out);
  }
  void linear(const PreparedLinear& w, const Tensor& x, Tensor& out) override {
    record("linear", {x, out});
    inner_->linear(w, x, out);
  }
  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    record("swiglu", {gate, up, out});
    inner_->swiglu(gate, up, out);
  }
  void gather_output_rows(const Tensor& x, Tensor& out) override {
    record("gather_output_rows", {x, out});
    inner_->gather_output_rows(x, out);
  }
  void gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg, const Tensor& k,
                       const Tensor& v, KvCacheLayer& cache, Tensor& out) override {
    record("gated_attention", {qg, k, v, cache.k, cache.v, out});
    inner_->gated_attention(p, w, qg, k, v, cache, out);
  }
  void gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z, const Tensor& b,
                 const Tensor& a, GdnStateLayer& state, Tensor& out) override {
    record("gdn_layer", {qkv, z, b, a, state.conv, state.recurrent, out});
    inner_->gdn_layer(p, w, qkv, z, b, a, state, out);
  }
  Status gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) override {
    return inner_->gdn_commit(p, layers, slot, index);
  }
  Status copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) override {
    return inner_->copy_rows(src, src_row, dst, dst_row, n_rows);
  }
  void lm_head_outputs(const PreparedLinear& head, const Tensor& hidden, Tensor& logits_ws) override {
    record("lm_head_outputs", {hidden, logits_ws});
    inner_->lm_head_outputs(head, hidden, logits_ws);
  }

 private:
  void record(const char* name, std::initializer_list<Tensor> tensors) {
    RecordedOp op{name, {}};
    for (const Tensor& t : tensors) op.tensors.push_back({t.data, t.dtype, t.rows, t.cols, t.stride});
    ops_.push_back(std::move(op));
  }

  std::unique_ptr<Backend> inner_;
  std::vector<RecordedOp> ops_;
  int64_t n_allocations_ = 0;
};

}  // namespace voltserve::testing

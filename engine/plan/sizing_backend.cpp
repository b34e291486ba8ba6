// SizingBackend (see sizing_backend.h).
#include "plan/sizing_backend.h"

#include <algorithm>

#include "backend/cuda_layout.h"

namespace voltserve::plan {
namespace {

class SizedLinear final : public PreparedLinear {
 public:
  SizedLinear(int64_t n, int64_t k, int64_t bytes) : n_(n), k_(k), bytes_(bytes) {}
  int64_t n() const override { return n_; }
  int64_t k() const override { return k_; }
  int64_t bytes() const override { return bytes_; }

 private:
  int64_t n_, k_, bytes_;
};

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The model's allocation names (Qwen35Model::alloc_cache, ::configure) tell what each buffer is for.
Use use_of(std::string_view what) {
  if (ends_with(what, " K cache") || ends_with(what, " V cache")) return Use::kKvCache;
  if (ends_with(what, " checkpoints")) return Use::kVerifyCheckpoints;
  if (ends_with(what, " snapshots")) return Use::kPrefixSnapshots;
  if (ends_with(what, " conv state") || ends_with(what, " recurrent state")) return Use::kGdnState;
  if (what == "workspace logits") return Use::kLogits;
  if (what.starts_with("workspace")) return Use::kActivations;
  return Use::kOther;
}

}  // namespace

void SizingBackend::add(Use use, int64_t bytes, int64_t count) {
  Tally& t = tallies_[use];
  t.bytes += bytes;
  t.count += count;
}

int64_t SizingBackend::weight_bytes() const {
  int64_t total = 0;
  for (const auto& [use, t] : tallies_) {
    if (use <= Use::kSmallParams) total += t.bytes;
  }
  return total;
}

Result<Tensor> SizingBackend::alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) {
  if (rows < 0 || cols < 0) return invalid_argument("sizing: " + std::string(what) + ": negative shape");
  add(use_of(what), cuda_layout::alloc_bytes(rows * cols * static_cast<int64_t>(dtype_bytes(dtype))));
  return Tensor{nullptr, dtype, rows, cols, cols};
}

Result<Tensor> SizingBackend::upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) {
  if (static_cast<int64_t>(host.size()) != rows * cols) {
    return invalid_argument("sizing: " + std::string(what) + ": wrong number of values");
  }
  add(Use::kSmallParams, cuda_layout::alloc_bytes(rows * cols * static_cast<int64_t>(sizeof(float))));
  return Tensor{nullptr, DType::kF32, rows, cols, cols};
}

Result<Tensor> SizingBackend::upload_ids(std::span<const int32_t> ids, std::string_view what) {
  (void)what;
  const auto n = static_cast<int64_t>(ids.size());
  add(Use::kSmallParams, cuda_layout::alloc_bytes(n * static_cast<int64_t>(sizeof(int32_t))));
  return Tensor{nullptr, DType::kI32, 1, n, n};
}

Result<std::unique_ptr<PreparedLinear>> SizingBackend::prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                                      std::string_view what) {
  if (parts.empty()) return invalid_argument("sizing: " + std::string(what) + ": no weight parts");
  int64_t n = 0;
  for (const auto& p : parts) {
    if (p.k != parts[0].k || p.n <= 0) {
      return invalid_argument("sizing: " + std::string(what) + ": parts of a merged weight need one k and n > 0");
    }
    n += p.n;
  }
  const bool embedding = ends_with(what, "embed_tokens");
  const bool head = what == "lm_head";
  Prepared prepared{std::string(what), head, {}};
  if (head) head_format_ = parts[0].format;
  std::map<Use, int64_t> bytes;
  for (const cuda_layout::LinearSegment& s : cuda_layout::linear_segments(parts, family_)) {
    Use use = embedding ? Use::kEmbedding : head ? Use::kLmHead : Use::kWeightsDense;
    if (!embedding && !head && s.format == WeightFormat::kNvfp4) use = Use::kWeightsNvfp4;
    if (!embedding && !head && s.format == WeightFormat::kFp8) use = Use::kWeightsFp8;
    for (int64_t b : s.buffers) bytes[use] += cuda_layout::alloc_bytes(b);
    kernels::PackedWeightView v;
    v.format = s.format;
    v.family = family_;
    v.n = s.n;
    v.k = s.k;
    prepared.segments.push_back(v);
  }
  int64_t total = 0;
  for (const auto& [use, b] : bytes) {
    add(use, b);
    total += b;
  }
  prepared_.push_back(std::move(prepared));
  return std::unique_ptr<PreparedLinear>(std::make_unique<SizedLinear>(n, parts[0].k, total));
}

int64_t SizingBackend::linear_scratch_bytes(int64_t m_layers, int64_t m_head) const {
  size_t most = 0;
  for (const Prepared& p : prepared_) {
    for (const kernels::PackedWeightView& v : p.segments) {
      most = std::max(most, kernels::linear_workspace_bytes(v, p.head ? m_head : m_layers));
    }
  }
  return static_cast<int64_t>(most);
}

Status SizingBackend::configure(const StepLimits& limits) {
  limits_ = limits;
  for (const cuda_layout::NamedBytes& b : cuda_layout::step_buffers(limits)) {
    add(Use::kStepBuffers, cuda_layout::alloc_bytes(b.bytes));
  }
  return Status::ok();
}

Status SizingBackend::begin_step(const StepBatch&) {
  return internal_error("sizing backend: it sizes a model and runs no step");
}

Status SizingBackend::end_step(StepResult&) {
  return internal_error("sizing backend: it sizes a model and runs no step");
}

Status SizingBackend::gdn_commit(const GdnParams&, std::span<GdnStateLayer>, int32_t, int32_t) {
  return internal_error("sizing backend: it sizes a model and runs no step");
}

Status SizingBackend::copy_rows(const Tensor&, int64_t, Tensor&, int64_t, int64_t) {
  return internal_error("sizing backend: it sizes a model and copies no memory");
}

}  // namespace voltserve::plan

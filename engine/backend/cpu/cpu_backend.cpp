// CpuBackend: memory, the step, and each op as a call into the kernels' references (see cpu_backend.h).
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <unistd.h>

#include "attention/attention.h"
#include "elementwise/elementwise.h"
#include "gdn/gdn.h"
#include "linear/synthetic.h"
#include "norm/norm.h"
#include "sampling/accepted_runs.h"

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

// The reference norm's arguments over fp32 views; `residual` (optional) is updated in place.
kernels::norm::RmsNormArgs norm_args(const Tensor& x, Tensor* residual, const Tensor& w, float eps, Tensor& out) {
  kernels::norm::RmsNormArgs a;
  a.x = x.f32();
  a.x_stride = x.stride;
  if (residual != nullptr) {
    a.residual = residual->f32();
    a.residual_stride = residual->stride;
  }
  a.weight = w.empty() ? nullptr : w.f32();
  a.out = out.f32();
  a.out_stride = out.stride;
  a.n_rows = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(x.cols);
  a.eps = eps;
  return a;
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : pool_(default_threads(options.n_threads)), gdn_mode_(options.gdn_mode), accept_rule_(options.accept_rule) {}

void CpuBackend::fail(Status s) {
  if (step_status_.is_ok()) step_status_ = std::move(s);
}

bool CpuBackend::check_f32(const Tensor& t, const char* op, const char* what) {
  if (t.dtype == DType::kF32 && t.data != nullptr) return true;
  fail(internal_error(std::string("cpu backend: ") + op + ": " + what + " must be a non-empty fp32 tensor"));
  return false;
}

Result<Tensor> CpuBackend::alloc(int64_t rows, int64_t cols, DType dtype, std::string_view what) {
  // fp32 and int32 for everything; fp16, bf16 and e4m3 for the KV cache (--kv-cache-dtype).
  if (dtype != DType::kF32 && dtype != DType::kI32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kF8E4M3) {
    return invalid_argument("cpu backend: " + std::string(what) + ": only fp32, int32, fp16, bf16 and fp8 tensors, "
                            "got dtype " + std::to_string(static_cast<int>(dtype)));
  }
  if (rows < 0 || cols < 0) return invalid_argument("cpu backend: " + std::string(what) + ": negative shape");
  const auto bytes = static_cast<size_t>(std::max<int64_t>(1, rows * cols)) * dtype_bytes(dtype);
  allocations_.push_back(std::unique_ptr<float[]>(new float[(bytes + sizeof(float) - 1) / sizeof(float)]()));
  return Tensor{allocations_.back().get(), dtype, rows, cols, cols};
}

Result<Tensor> CpuBackend::upload(std::span<const float> host, int64_t rows, int64_t cols, std::string_view what) {
  if (static_cast<int64_t>(host.size()) != rows * cols) {
    return invalid_argument("cpu backend: " + std::string(what) + ": " + std::to_string(host.size()) +
                            " values for a [" + std::to_string(rows) + ", " + std::to_string(cols) + "] tensor");
  }
  VS_ASSIGN_OR_RETURN(Tensor t, alloc(rows, cols, DType::kF32, what));
  std::copy(host.begin(), host.end(), t.f32());
  return t;
}

Result<Tensor> CpuBackend::upload_ids(std::span<const int32_t> ids, std::string_view what) {
  VS_ASSIGN_OR_RETURN(Tensor t, alloc(1, static_cast<int64_t>(ids.size()), DType::kI32, what));
  std::copy(ids.begin(), ids.end(), static_cast<int32_t*>(t.data));
  return t;
}

Result<std::unique_ptr<PreparedLinear>> CpuBackend::prepare_linear(std::span<const kernels::HostWeightRef> parts,
                                                                   std::string_view what) {
  if (parts.empty()) return invalid_argument("cpu backend: " + std::string(what) + ": no weight parts");
  const int64_t k = parts[0].k;
  int64_t n = 0;
  for (const auto& p : parts) {
    if (p.k != k || p.n <= 0) {
      return invalid_argument("cpu backend: " + std::string(what) + ": parts of a merged weight need one k (" +
                              std::to_string(k) + " vs " + std::to_string(p.k) + ") and n > 0");
    }
    n += p.n;
  }
  // The reference holds every weight as fp32 (a 27B model: ~110 GB): refuse what cannot fit rather than be killed.
  const int64_t bytes = n * k * static_cast<int64_t>(sizeof(float));
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && weight_bytes_ + bytes > physical / 10 * 9) {
    return resource_exhausted("cpu backend: " + std::string(what) + ": the weights dequantized to fp32 would take " +
                              std::to_string((weight_bytes_ + bytes) >> 30) + " GiB with this one, more than 90% of " +
                              "this machine's " + std::to_string(physical >> 30) +
                              " GiB; the CPU backend is the reference for small models, use the CUDA backend for "
                              "large ones");
  }
  std::vector<float> dense(static_cast<size_t>(n * k));
  int64_t row0 = 0;
  for (const auto& part : parts) {
    // A synthetic weight (codes == nullptr) gets its checkpoint-order values first (kernels/linear/synthetic.h).
    std::vector<uint8_t> codes, scales;
    std::vector<float> values;
    const kernels::HostWeightRef p =
        part.codes != nullptr ? part : kernels::synthetic_fill_host(part, codes, scales, values);
    pool_.parallel_for(p.n, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) kernels::dequantize_row_ref(p, r, dense.data() + (row0 + r) * k);
    });
    row0 += p.n;
  }
  weight_bytes_ += n * k * static_cast<int64_t>(sizeof(float));
  return std::unique_ptr<PreparedLinear>(std::make_unique<CpuLinear>(n, k, std::move(dense)));
}

Status CpuBackend::configure(const StepLimits& limits) {
  if (limits.max_tokens < 1 || limits.vocab_size < 1 || limits.n_slots < 1) {
    return invalid_argument("cpu backend: step limits need max_tokens, vocab_size and n_slots >= 1");
  }
  limits_ = limits;
  penalties_.vocab = limits.vocab_size;
  penalties_.n_slots = limits.n_slots;
  penalty_counts_.assign(static_cast<size_t>(limits.n_slots) * static_cast<size_t>(limits.vocab_size), 0);
  penalty_bits_.assign(static_cast<size_t>(limits.n_slots) * static_cast<size_t>(penalties_.words()), 0u);
  penalties_.counts = penalty_counts_.data();
  penalties_.prompt_bits = penalty_bits_.data();
  return Status::ok();
}

Status CpuBackend::reset_sampling_slot(int32_t slot) {
  if (slot < 0 || slot >= limits_.n_slots) {
    return out_of_range("cpu backend: sampling slot " + std::to_string(slot) + " outside [0, " +
                        std::to_string(limits_.n_slots) + ")");
  }
  kernels::sampling::reset_penalties_ref(penalties_, slot);
  return Status::ok();
}

void CpuBackend::zero_rows(Tensor& t, int64_t row_begin, int64_t row_end) {
  const size_t elem = dtype_bytes(t.dtype);
  for (int64_t r = row_begin; r < row_end; ++r) {
    std::memset(static_cast<char*>(t.data) + static_cast<size_t>(r * t.stride) * elem, 0,
                static_cast<size_t>(t.cols) * elem);
  }
}

Status CpuBackend::begin_step(const StepBatch& batch) {
  step_status_ = Status::ok();
  result_.clear();
  if (limits_.max_tokens == 0) return internal_error("cpu backend: begin_step before configure");
  if (batch.n_tokens() > limits_.max_tokens || static_cast<int32_t>(batch.seqs.size()) > limits_.max_seqs ||
      static_cast<int32_t>(batch.page_table.size()) > limits_.max_page_refs ||
      static_cast<int32_t>(batch.bias_ids.size()) > limits_.max_bias ||
      static_cast<int32_t>(batch.outputs.size()) > limits_.max_tokens ||
      batch.masks.size() > batch.outputs.size() * static_cast<size_t>(mask_words(limits_))) {
    return internal_error("cpu backend: the step exceeds the configured limits (" + std::to_string(batch.n_tokens()) +
                          " tokens, " + std::to_string(batch.seqs.size()) + " sequences, " +
                          std::to_string(batch.page_table.size()) + " page refs, " +
                          std::to_string(batch.bias_ids.size()) + " bias entries)");
  }
  VS_RETURN_IF_ERROR(check_shifts(batch, "cpu"));
  batch_ = &batch;
  if (has_shifts(batch)) {
    shifted_ = batch;
    std::vector<int32_t> rows(batch.outputs.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = batch.outputs[i].row;
    kernels::sampling::ShiftArgs a;
    a.seqs = shifted_.seqs.data();
    a.n_seqs = static_cast<int32_t>(shifted_.seqs.size());
    a.out_rows = rows.data();
    a.n_out = static_cast<int32_t>(rows.size());
    a.runs = runs_.data();
    kernels::sampling::shift_ref(a);
    for (size_t i = 0; i < rows.size(); ++i) shifted_.outputs[i].row = rows[i];
    batch_ = &shifted_;
  }
  if (note_judged_step(batch)) runs_.assign(2 * batch.seqs.size(), 0);  // sample_chunk writes each verify item's
  kernels::sampling::update_penalties_ref(penalties_, batch.tokens.data(), batch.seqs.data(),
                                          static_cast<int32_t>(batch.seqs.size()));
  result_.rows.resize(batch.outputs.size());
  return Status::ok();
}

Status CpuBackend::end_step(StepResult& result) {
  batch_ = nullptr;
  previous_samples_.clear();
  for (const RowResult& r : result_.rows) previous_samples_.push_back(r.status == kernels::sampling::kRowOk ? r.token : -1);
  result = std::move(result_);
  result_ = StepResult{};
  Status s = std::move(step_status_);
  step_status_ = Status::ok();
  return s;
}

void CpuBackend::embed(const PreparedLinear& table, Tensor& out) {
  if (batch_ == nullptr || !check_f32(out, "embed", "out")) return;
  embed_rows(table, batch_->tokens.data(), Tensor{}, out);
}

void CpuBackend::embed_samples(const PreparedLinear& table, const Tensor& id_map, Tensor& out) {
  if (batch_ == nullptr || !check_f32(out, "embed_samples", "out")) return;
  for (const kernels::SeqDesc& s : batch_->seqs) {
    if (s.slot >= 0) return fail(internal_error("cpu backend: embed_samples on a step whose sequence holds a slot"));
  }
  if (previous_samples_.size() < static_cast<size_t>(batch_->n_tokens())) {
    return fail(internal_error("cpu backend: embed_samples: the previous step sampled " +
                               std::to_string(previous_samples_.size()) + " rows, this step has " +
                               std::to_string(batch_->n_tokens()) + " tokens"));
  }
  embed_rows(table, previous_samples_.data(), id_map, out);
}

void CpuBackend::embed_rows(const PreparedLinear& table, const int32_t* ids, const Tensor& id_map, Tensor& out) {
  const auto& t = static_cast<const CpuLinear&>(table);
  kernels::elementwise::EmbedArgs a;
  a.table = t.row(0);
  a.table_dtype = DType::kF32;
  a.hidden = t.k();
  a.ids = ids;
  a.id_map = id_map.empty() ? nullptr : static_cast<const int32_t*>(id_map.data);
  a.n_map = static_cast<int32_t>(id_map.cols);
  a.n_rows = batch_->n_tokens();
  a.out = out.f32();
  a.out_stride = out.stride;
  kernels::elementwise::embed_ref(a);
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  if (!check_f32(x, "rms_norm", "x") || !check_f32(out, "rms_norm", "out")) return;
  kernels::norm::rms_norm_ref(norm_args(x, nullptr, w, eps, out), &pool_);
}

void CpuBackend::rms_norm_residual(const Tensor& x, Tensor& residual, const Tensor& w, float eps, Tensor& out) {
  if (!check_f32(x, "rms_norm_residual", "x") || !check_f32(residual, "rms_norm_residual", "residual") ||
      !check_f32(out, "rms_norm_residual", "out")) {
    return;
  }
  kernels::norm::rms_norm_ref(norm_args(x, &residual, w, eps, out), &pool_);
}

void CpuBackend::linear(const PreparedLinear& weight, const Tensor& x, Tensor& out) {
  if (!check_f32(x, "linear", "x") || !check_f32(out, "linear", "out")) return;
  const auto& w = static_cast<const CpuLinear&>(weight);
  const int64_t m = x.rows, n = w.n(), k = w.k();
  if (x.cols != k || out.cols != n || out.rows < m) {
    fail(internal_error("cpu backend: linear [" + std::to_string(n) + ", " + std::to_string(k) + "] on x [" +
                        std::to_string(x.rows) + ", " + std::to_string(x.cols) + "] into [" +
                        std::to_string(out.rows) + ", " + std::to_string(out.cols) + "]"));
    return;
  }
  // Parallel over output features: each y[i, j] is one dot product in a fixed order, so a token's result does not
  // depend on which other tokens share the batch (chunked prefill equals one full forward bit for bit).
  pool_.parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * m)), [&](int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x.f32_row(i);
      float* yi = out.f32_row(i);
      for (int64_t j = j0; j < j1; ++j) {
        const float* wj = w.row(j);
        float acc = 0.0f;
        for (int64_t t = 0; t < k; ++t) acc += xi[t] * wj[t];
        yi[j] = acc;
      }
    }
  });
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor& out) {
  if (!check_f32(gate, "swiglu", "gate") || !check_f32(up, "swiglu", "up") || !check_f32(out, "swiglu", "out")) {
    return;
  }
  kernels::elementwise::SwigluArgs a;
  a.gate = gate.f32();
  a.gate_stride = gate.stride;
  a.up = up.f32();
  a.up_stride = up.stride;
  a.out = out.f32();
  a.out_stride = out.stride;
  a.n_rows = static_cast<int32_t>(gate.rows);
  a.n = static_cast<int32_t>(gate.cols);
  kernels::elementwise::swiglu_ref(a, &pool_);
}

void CpuBackend::gather_output_rows(const Tensor& x, Tensor& out) {
  if (batch_ == nullptr || !check_f32(x, "gather_output_rows", "x") ||
      !check_f32(out, "gather_output_rows", "out")) {
    return;
  }
  std::vector<int32_t> rows(batch_->outputs.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = batch_->outputs[i].row;
  kernels::elementwise::GatherArgs a;
  a.x = x.data;
  a.x_stride = x.stride;
  a.rows = rows.data();
  a.out = out.data;
  a.out_stride = out.stride;
  a.dtype = DType::kF32;
  a.n_rows = static_cast<int32_t>(rows.size());
  a.n = static_cast<int32_t>(x.cols);
  kernels::elementwise::gather_rows_ref(a);
}

void CpuBackend::gated_attention(const AttentionParams& p, const AttentionWeights& w, const Tensor& qg,
                                 const Tensor& k, const Tensor& v, KvCacheLayer& cache, Tensor& out) {
  if (batch_ == nullptr || !check_f32(qg, "gated_attention", "qg") || !check_f32(out, "gated_attention", "out") ||
      cache.k.data == nullptr || cache.v.data == nullptr || cache.k.dtype != cache.v.dtype) {
    if (batch_ != nullptr) fail(internal_error("cpu backend: gated_attention: K and V caches must be allocated, one dtype"));
    return;
  }
  kernels::attention::RefArgs a;
  a.qg = qg.f32();
  a.qg_stride = qg.stride;
  a.k = k.f32();
  a.k_stride = k.stride;
  a.v = v.f32();
  a.v_stride = v.stride;
  a.q_norm = w.q_norm.f32();
  a.k_norm = w.k_norm.f32();
  a.k_cache = cache.k.data;
  a.v_cache = cache.v.data;
  a.cache_dtype = cache.k.dtype;
  a.k_scale = cache.k_scale;
  a.v_scale = cache.v_scale;
  a.seqs = batch_->seqs.data();
  a.n_seqs = static_cast<int32_t>(batch_->seqs.size());
  a.page_table = batch_->page_table.data();
  a.out = out.f32();
  a.out_stride = out.stride;
  a.parallel = &pool_;
  kernels::attention::gated_attention_ref(p, a);
}

void CpuBackend::gdn_layer(const GdnParams& p, const GdnWeights& w, const Tensor& qkv, const Tensor& z,
                           const Tensor& b, const Tensor& a_in, GdnStateLayer& state, Tensor& out) {
  if (batch_ == nullptr || !check_f32(qkv, "gdn_layer", "qkv") || !check_f32(out, "gdn_layer", "out") ||
      !check_f32(state.recurrent, "gdn_layer", "state")) {
    return;
  }
  const kernels::gdn::State view = gdn_state_view(state);
  if (Status s = check_gdn_checkpoints(*batch_, view, "cpu"); !s.is_ok()) return fail(std::move(s));
  kernels::gdn::RefArgs a;
  a.qkv = qkv.f32();
  a.qkv_stride = qkv.stride;
  a.z = z.f32();
  a.z_stride = z.stride;
  a.b = b.f32();
  a.b_stride = b.stride;
  a.a = a_in.f32();
  a.a_stride = a_in.stride;
  a.w.conv = w.conv.f32();
  a.w.a_log = w.a_log.f32();
  a.w.dt_bias = w.dt_bias.f32();
  a.w.norm_weight = w.norm_weight.f32();
  a.state = view;
  a.seqs = batch_->seqs.data();
  a.n_seqs = static_cast<int32_t>(batch_->seqs.size());
  a.out = out.f32();
  a.out_stride = out.stride;
  a.mode = gdn_mode_ == GdnMode::kSequential ? kernels::gdn::Mode::kSequential
           : gdn_mode_ == GdnMode::kChunked  ? kernels::gdn::Mode::kChunked
                                             : kernels::gdn::Mode::kAuto;
  a.parallel = &pool_;
  kernels::gdn::gdn_ref(p, a);
}

Status CpuBackend::gdn_commit(const GdnParams& p, std::span<GdnStateLayer> layers, int32_t slot, int32_t index) {
  const kernels::gdn::Commit c{slot, slot, index};
  for (GdnStateLayer& state : layers) {
    if (state.recurrent.empty()) continue;
    const kernels::gdn::State view = gdn_state_view(state);
    VS_RETURN_IF_ERROR(check_gdn_commit(state, view, slot, index, "cpu"));
    kernels::gdn::commit_ref(p, view, &c, 1);
  }
  return Status::ok();
}

Status CpuBackend::copy_rows(const Tensor& src, int64_t src_row, Tensor& dst, int64_t dst_row, int64_t n_rows) {
  const size_t elem = dtype_bytes(src.dtype);
  for (int64_t r = 0; r < n_rows; ++r) {
    // memmove: a page copied onto itself (or overlapping rows) stays well defined.
    std::memmove(static_cast<char*>(dst.data) + static_cast<size_t>((dst_row + r) * dst.stride) * elem,
                 static_cast<const char*>(src.data) + static_cast<size_t>((src_row + r) * src.stride) * elem,
                 static_cast<size_t>(src.cols) * elem);
  }
  return Status::ok();
}

void CpuBackend::lm_head_outputs(const PreparedLinear& head, const Tensor& hidden, Tensor& logits_ws) {
  if (batch_ == nullptr || !check_f32(hidden, "lm_head_outputs", "hidden") ||
      !check_f32(logits_ws, "lm_head_outputs", "logits")) {
    return;
  }
  // The structured-output masks, computed on the mask worker while the layers ran, are needed from here on.
  if (!batch_->masks.empty() && batch_->complete_masks) batch_->complete_masks();
  const auto& outputs = batch_->outputs;
  const auto n_out = static_cast<int64_t>(outputs.size());
  const int64_t vocab = head.n();
  const int32_t n_vocab_real = std::min<int32_t>(
      limits_.n_vocab_real > 0 ? limits_.n_vocab_real : static_cast<int32_t>(vocab), static_cast<int32_t>(vocab));
  // A verify item's rows (kOutAccept, consecutive) are decided together: a chunk never splits them.
  auto item_end = [&](int64_t r) {
    const int32_t row = outputs[static_cast<size_t>(r)].row;
    int32_t seq_end = row + 1;
    for (const kernels::SeqDesc& q : batch_->seqs) {
      if (row >= q.row0 && row < q.row0 + q.n_tokens) seq_end = q.row0 + q.n_tokens;
    }
    int64_t e = r + 1;
    while (e < n_out && (outputs[static_cast<size_t>(e)].flags & kOutAccept) &&
           outputs[static_cast<size_t>(e)].row == row + static_cast<int32_t>(e - r) &&
           outputs[static_cast<size_t>(e)].row < seq_end) {
      ++e;
    }
    return e;
  };
  for (int64_t r0 = 0; r0 < n_out;) {
    int64_t r1 = r0;
    while (r1 < n_out) {
      const int64_t e = (outputs[static_cast<size_t>(r1)].flags & kOutAccept) ? item_end(r1) : r1 + 1;
      if (e - r0 > logits_ws.rows) break;
      r1 = e;
    }
    if (r1 == r0) {
      fail(internal_error("cpu backend: a verify item of more rows than the " + std::to_string(logits_ws.rows) +
                          "-row logits workspace"));
      return;
    }
    const int64_t nr = r1 - r0;
    Tensor logits = logits_ws.first_rows(nr);
    Tensor h{hidden.f32_row(r0), DType::kF32, nr, hidden.cols, hidden.stride};
    linear(head, h, logits);
    if (!step_status_.is_ok()) return;
    sample_chunk(hidden, logits, r0, nr, n_vocab_real);
    r0 = r1;
  }
}

void CpuBackend::sample_chunk(const Tensor& hidden, const Tensor& logits, int64_t r0, int64_t nr,
                              int32_t n_vocab_real) {
  namespace smp = kernels::sampling;
  const auto& outputs = batch_->outputs;
  const int64_t vocab = logits.cols;
  const std::vector<smp::RowParams> all_rows = sampler_rows(*batch_);
  std::vector<smp::RowParams> params(all_rows.begin() + r0, all_rows.begin() + r0 + nr);
  std::vector<const kernels::SeqDesc*> seq_of(static_cast<size_t>(nr), nullptr);
  for (int64_t i = 0; i < nr; ++i) {
    const OutputRow& o = outputs[static_cast<size_t>(r0 + i)];
    for (const kernels::SeqDesc& s : batch_->seqs) {
      if (o.row >= s.row0 && o.row < s.row0 + s.n_tokens) seq_of[static_cast<size_t>(i)] = &s;
    }
  }
  // Plain rows first, in one call (the verify rows are skipped there: no kSample).
  std::vector<smp::RowParams> plain = params;
  for (int64_t i = 0; i < nr; ++i) {
    if (outputs[static_cast<size_t>(r0 + i)].flags & kOutAccept) plain[static_cast<size_t>(i)].flags = 0;
  }
  std::vector<int32_t> token(static_cast<size_t>(nr)), status(static_cast<size_t>(nr)),
      nan_index(static_cast<size_t>(nr), -1), top_ids(static_cast<size_t>(nr * smp::kMaxTopLogprobs));
  std::vector<float> logprob(static_cast<size_t>(nr)), top_lp(static_cast<size_t>(nr * smp::kMaxTopLogprobs));
  smp::RefArgs a;
  a.logits = logits.f32();
  a.logits_stride = logits.stride;
  a.n_rows = static_cast<int32_t>(nr);
  a.n_vocab_real = n_vocab_real;
  a.rows = plain.data();
  a.bias_ids = batch_->bias_ids.data();
  a.bias_values = batch_->bias_values.data();
  a.penalties = penalties_;
  a.masks = batch_->masks.empty() ? nullptr : batch_->masks.data();
  a.mask_words = batch_->mask_words;
  a.out = {token.data(), logprob.data(), top_ids.data(), top_lp.data(), status.data(), nan_index.data()};
  a.parallel = &pool_;
  smp::sample_ref(a);
  // Then each verify item: its drafts are the item's tokens after the first.
  for (int64_t i = 0; i < nr;) {
    const OutputRow& o = outputs[static_cast<size_t>(r0 + i)];
    const kernels::SeqDesc* s = seq_of[static_cast<size_t>(i)];
    if (!(o.flags & kOutAccept)) {
      ++i;
      continue;
    }
    int64_t n = 1;
    while (s != nullptr && i + n < nr && (outputs[static_cast<size_t>(r0 + i + n)].flags & kOutAccept) &&
           outputs[static_cast<size_t>(r0 + i + n)].row == o.row + static_cast<int32_t>(n) &&
           o.row + n < s->row0 + s->n_tokens) {
      ++n;
    }
    if (s == nullptr || o.row != s->row0 || n != s->n_tokens || s->n_draft != n - 1) {
      fail(internal_error("cpu backend: a verify item's accept rows must be all of its tokens, in order"));
      return;
    }
    for (int64_t j = i; j < i + n; ++j) {
      if (params[static_cast<size_t>(j)].mask_row >= 0) {
        // The engine never speculates a constrained sequence (one mask per sampled token, not per draft).
        fail(internal_error("cpu backend: a verify item's rows carry token masks; acceptance does not apply them"));
        return;
      }
    }
    smp::AcceptArgs acc;
    acc.logits = logits.f32_row(i);
    acc.logits_stride = logits.stride;
    acc.n_vocab_real = n_vocab_real;
    acc.n_drafts = static_cast<int32_t>(n - 1);
    acc.drafts = batch_->tokens.data() + s->row0 + 1;
    acc.rows = params.data() + i;
    acc.bias_ids = batch_->bias_ids.data();
    acc.bias_values = batch_->bias_values.data();
    acc.penalties = penalties_;
    acc.out = {token.data() + i,       logprob.data() + i, top_ids.data() + i * smp::kMaxTopLogprobs,
               top_lp.data() + i * smp::kMaxTopLogprobs, status.data() + i, nan_index.data() + i};
    acc.rule = accept_rule_;
    const int32_t accepted = smp::accept_drafts_ref(acc);
    const auto seq = static_cast<size_t>(s - batch_->seqs.data());
    runs_[2 * seq] = accepted;
    runs_[2 * seq + 1] = acc.n_drafts - accepted;
    i += n;
  }
  for (int64_t i = 0; i < nr; ++i) {
    const OutputRow& o = outputs[static_cast<size_t>(r0 + i)];
    RowResult& res = result_.rows[static_cast<size_t>(r0 + i)];
    res.token = token[static_cast<size_t>(i)];
    res.status = status[static_cast<size_t>(i)];
    res.nan_index = nan_index[static_cast<size_t>(i)];
    if ((o.flags & kOutSample) && (o.flags & kOutLogprobs) && res.status == smp::kRowOk) {
      res.logprob = logprob[static_cast<size_t>(i)];
      const int32_t n_top = std::clamp(o.sampling.n_top_logprobs, 0, smp::kMaxTopLogprobs);
      for (int32_t t = 0; t < n_top && t < n_vocab_real; ++t) {
        const size_t at = static_cast<size_t>(i * smp::kMaxTopLogprobs + t);
        res.top.emplace_back(top_ids[at], top_lp[at]);
      }
    }
    if (o.flags & kOutLogits) {
      const float* row = logits.f32_row(i);
      result_.logits.insert(result_.logits.end(), row, row + vocab);
    }
    if (o.flags & kOutHidden) {
      const float* row = hidden.f32_row(r0 + i);
      result_.hidden.insert(result_.hidden.end(), row, row + hidden.cols);
    }
  }
}

}  // namespace cpu
}  // namespace voltserve

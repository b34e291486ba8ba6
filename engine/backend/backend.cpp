// The backend-independent parts of backend.h.
#include "backend/backend.h"

#include <algorithm>

namespace voltserve {

void StepBatch::clear() {
  tokens.clear();
  seqs.clear();
  page_table.clear();
  outputs.clear();
  bias_ids.clear();
  bias_values.clear();
  masks.clear();
  mask_words = 0;
  complete_masks = nullptr;
}

bool Backend::note_judged_step(const StepBatch& batch) {
  const auto judges = [](const OutputRow& o) { return (o.flags & kOutAccept) != 0; };
  if (std::none_of(batch.outputs.begin(), batch.outputs.end(), judges)) return false;
  judged_drafts_.clear();
  for (const kernels::SeqDesc& s : batch.seqs) judged_drafts_.push_back(s.n_draft);
  return true;
}

Status Backend::check_shifts(const StepBatch& batch, std::string_view backend) const {
  const std::string where = std::string(backend) + " backend: sequence ";
  const auto n_judged = static_cast<int32_t>(judged_drafts_.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const kernels::SeqDesc& s = batch.seqs[i];
    if (s.shift_rows < -1 || s.shift_rows >= n_judged || s.shift_past < -1 || s.shift_past >= n_judged) {
      return internal_error(where + std::to_string(i) + " shifts by a sequence outside the " +
                            std::to_string(n_judged) + " of the last step with verify items");
    }
    if (s.shift_past >= 0 && s.n_past < judged_drafts_[static_cast<size_t>(s.shift_past)]) {
      return internal_error(where + std::to_string(i) + " may move its n_past below 0");
    }
    if (s.shift_rows < 0) continue;
    const int32_t most = judged_drafts_[static_cast<size_t>(s.shift_rows)];
    for (const OutputRow& o : batch.outputs) {
      if (o.row >= s.row0 && o.row < s.row0 + s.n_tokens && o.row + most >= s.row0 + s.n_tokens) {
        return internal_error(where + std::to_string(i) + " may move output row " + std::to_string(o.row) +
                              " out of its rows");
      }
    }
  }
  return Status::ok();
}

bool has_shifts(const StepBatch& batch) {
  return std::any_of(batch.seqs.begin(), batch.seqs.end(),
                     [](const kernels::SeqDesc& s) { return s.shift_rows >= 0 || s.shift_past >= 0; });
}

bool penalized(const kernels::sampling::RowParams& row) {
  return row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f || row.repetition_penalty != 1.0f;
}

kernels::gdn::State gdn_state_view(const GdnStateLayer& s) {
  kernels::gdn::State k;
  k.conv = s.conv.f32();
  k.recurrent = s.recurrent.f32();
  if (!s.recurrent_ckpt.empty() && s.recurrent.rows > 0) {
    k.conv_ckpt = s.conv_ckpt.f32();
    k.recurrent_ckpt = s.recurrent_ckpt.f32();
    k.max_ckpt_tokens = static_cast<int32_t>(s.recurrent_ckpt.rows / s.recurrent.rows);
  }
  return k;
}

Status check_gdn_checkpoints(const StepBatch& batch, const kernels::gdn::State& s, std::string_view backend) {
  for (const kernels::SeqDesc& seq : batch.seqs) {
    if (seq.ckpt >= 0 && (s.max_ckpt_tokens == 0 || seq.n_tokens > s.max_ckpt_tokens)) {
      return internal_error(std::string(backend) + " backend: a verify item of " + std::to_string(seq.n_tokens) +
                            " tokens but " + std::to_string(s.max_ckpt_tokens) + " checkpoint rows per slot");
    }
  }
  return Status::ok();
}

Status check_gdn_commit(const GdnStateLayer& layer, const kernels::gdn::State& s, int32_t slot, int32_t index,
                        std::string_view backend) {
  if (s.max_ckpt_tokens == 0 || index < 0 || index >= s.max_ckpt_tokens || slot < 0 || slot >= layer.recurrent.rows) {
    return internal_error(std::string(backend) + " backend: gdn_commit of checkpoint " + std::to_string(index) +
                          " in slot " + std::to_string(slot) + " (" + std::to_string(s.max_ckpt_tokens) +
                          " rows per slot, " + std::to_string(layer.recurrent.rows) + " slots)");
  }
  return Status::ok();
}

namespace {

Status check_copy(const Tensor& src, int64_t src_row, const Tensor& dst, int64_t dst_row, int64_t n_rows,
                  std::string_view what) {
  if (src.empty() || dst.empty()) return internal_error(std::string(what) + ": the tensors are not allocated");
  if (src.dtype != dst.dtype || src.cols != dst.cols) {
    return internal_error(std::string(what) + ": source [" + std::to_string(src.rows) + ", " +
                          std::to_string(src.cols) + "] and destination [" + std::to_string(dst.rows) + ", " +
                          std::to_string(dst.cols) + "] differ in dtype or width");
  }
  if (n_rows < 0 || src_row < 0 || dst_row < 0 || src_row + n_rows > src.rows || dst_row + n_rows > dst.rows) {
    return internal_error(std::string(what) + ": rows [" + std::to_string(src_row) + ", +" + std::to_string(n_rows) +
                          ") of " + std::to_string(src.rows) + " to [" + std::to_string(dst_row) + ", +" +
                          std::to_string(n_rows) + ") of " + std::to_string(dst.rows));
  }
  return Status::ok();
}

}  // namespace

Status Backend::save_state(GdnStateLayer& state, int32_t slot, int32_t snapshot) {
  VS_RETURN_IF_ERROR(check_copy(state.conv, slot, state.conv_snap, snapshot, 1, name() + " save_state conv"));
  VS_RETURN_IF_ERROR(
      check_copy(state.recurrent, slot, state.recurrent_snap, snapshot, 1, name() + " save_state recurrent"));
  VS_RETURN_IF_ERROR(copy_rows(state.conv, slot, state.conv_snap, snapshot, 1));
  return copy_rows(state.recurrent, slot, state.recurrent_snap, snapshot, 1);
}

Status Backend::load_state(GdnStateLayer& state, int32_t snapshot, int32_t slot) {
  VS_RETURN_IF_ERROR(check_copy(state.conv_snap, snapshot, state.conv, slot, 1, name() + " load_state conv"));
  VS_RETURN_IF_ERROR(
      check_copy(state.recurrent_snap, snapshot, state.recurrent, slot, 1, name() + " load_state recurrent"));
  VS_RETURN_IF_ERROR(copy_rows(state.conv_snap, snapshot, state.conv, slot, 1));
  return copy_rows(state.recurrent_snap, snapshot, state.recurrent, slot, 1);
}

Status Backend::copy_kv_page(KvCacheLayer& cache, int32_t page_size, int32_t src_page, int32_t dst_page) {
  const int64_t src = static_cast<int64_t>(src_page) * page_size;
  const int64_t dst = static_cast<int64_t>(dst_page) * page_size;
  VS_RETURN_IF_ERROR(check_copy(cache.k, src, cache.k, dst, page_size, name() + " copy_kv_page K"));
  VS_RETURN_IF_ERROR(check_copy(cache.v, src, cache.v, dst, page_size, name() + " copy_kv_page V"));
  VS_RETURN_IF_ERROR(copy_rows(cache.k, src, cache.k, dst, page_size));
  return copy_rows(cache.v, src, cache.v, dst, page_size);
}

Status Backend::end_step_deferred() {
  StepResult r;
  if (Status s = end_step(r); !s.is_ok()) {
    deferred_.clear();  // a chain with a failed step keeps nothing
    return s;
  }
  deferred_.push_back(std::move(r));
  return Status::ok();
}

Status Backend::take_deferred(std::vector<StepResult>& results) {
  results = std::move(deferred_);
  deferred_.clear();
  return Status::ok();
}

std::vector<kernels::sampling::RowParams> sampler_rows(const StepBatch& batch) {
  std::vector<kernels::sampling::RowParams> rows(batch.outputs.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const OutputRow& o = batch.outputs[i];
    kernels::sampling::RowParams& p = rows[i];
    p = o.sampling;
    p.flags = ((o.flags & kOutSample) ? kernels::sampling::kSample : 0u) |
              ((o.flags & kOutLogprobs) ? kernels::sampling::kLogprobs : 0u);
    p.slot = -1;
    for (const kernels::SeqDesc& s : batch.seqs) {
      if (o.row >= s.row0 && o.row < s.row0 + s.n_tokens) p.slot = s.slot;
    }
  }
  return rows;
}

void StepResult::clear() {
  rows.clear();
  logits.clear();
  hidden.clear();
}

}  // namespace voltserve

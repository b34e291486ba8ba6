// The backend-independent parts of backend.h.
#include "backend/backend.h"

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

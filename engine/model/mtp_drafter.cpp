// MtpDrafter::run: the MTP passes of one runner step (see mtp_drafter.h).
#include "model/mtp_drafter.h"

#include <algorithm>

namespace voltserve {

namespace {

// A main step's sequence as an MTP pass sees it: no recurrent or penalty state (the MTP layer is attention only,
// drafts are raw argmax), no checkpoints, no drafts under verification.
kernels::SeqDesc pass_seq(kernels::SeqDesc m) {
  m.slot = -1;
  m.ckpt = -1;
  m.n_draft = 0;
  m.n_prompt = 0;
  return m;
}

OutputRow greedy_row(int32_t row) {
  OutputRow o;
  o.row = row;
  o.flags = kOutSample;
  o.sampling.temperature = 0.0f;
  return o;
}

}  // namespace

void MtpDrafter::start_first_pass(const StepBatch& batch) {
  pass_.clear();
  pass_.tokens.assign(batch.tokens.size(), 0);
  pass_.page_table = batch.page_table;
  drafting_.clear();
}

Status MtpDrafter::run(const StepRequest& request, const StepBatch& batch, const Qwen35Model& model,
                       StepResult& result) {
  StepBatch& b = pass_;
  start_first_pass(batch);
  bool any = false;
  for (size_t i = 0; i < request.seqs.size(); ++i) {
    const SeqStep& s = request.seqs[i];
    kernels::SeqDesc m = pass_seq(batch.seqs[i]);
    if (!s.mtp) {
      m.n_tokens = 0;  // its rows are computed and ignored
      b.seqs.push_back(m);
      continue;
    }
    any = true;
    const auto n = static_cast<int32_t>(s.tokens.size());
    // The emitted run: the consecutive sampled rows of this sequence that produced a token.
    int32_t last = -1, token = s.next_token, result_row = -1;
    for (size_t o = 0; o < request.outputs.size(); ++o) {
      const RowRequest& r = request.outputs[o];
      if (r.seq != static_cast<int32_t>(i) || !(r.flags & kOutSample)) continue;
      const RowResult& rr = result.rows[o];
      if (rr.status != kernels::sampling::kRowOk || rr.token < 0) continue;
      if (r.token_index > last) {
        last = r.token_index;
        token = rr.token;
        result_row = static_cast<int32_t>(o);
      }
    }
    if (last < 0) last = n - 1;  // a prompt chunk: its successor is known
    if (token < 0) {             // nothing emitted (a failed row): the engine ends the request
      m.n_tokens = 0;
      b.seqs.push_back(m);
      continue;
    }
    for (int32_t t = 0; t < n; ++t) {
      int32_t id = t + 1 < n ? s.tokens[static_cast<size_t>(t) + 1] : token;
      if (t == last) id = token;
      b.tokens[static_cast<size_t>(m.row0 + t)] = id;
    }
    b.seqs.push_back(m);
    if (s.n_draft > 0 && result_row >= 0) {
      drafting_.push_back({static_cast<int32_t>(i), result_row, m.n_past + last, s.n_draft});
      b.outputs.push_back(greedy_row(m.row0 + last));
    }
  }
  if (!any) return Status::ok();
  // Every pass is deferred and each chain step embeds the drafts the pass before it sampled, on the backend: the
  // host waits once for the whole chain (take_drafts), not once per draft. What an earlier step that failed midway
  // left deferred is dropped first (nothing is kept once nothing is pending: no wait).
  VS_RETURN_IF_ERROR(head_->take_drafts(passes_));
  const MtpPass first{.tokens = MtpTokens::kBatch, .defer = true};
  VS_RETURN_IF_ERROR(head_->forward(b, model.final_residual(batch.n_tokens()), MtpHead::Input::kMainResidual, cache_,
                                    page_size_, pass_result_, first));
  VS_RETURN_IF_ERROR(run_chain(batch, /*shift=*/false));
  // passes_[s] holds draft s + 1 of every drafting sequence (row j); a sequence's drafts end at its first failed
  // row (the passes after it drafted from a placeholder).
  VS_RETURN_IF_ERROR(head_->take_drafts(passes_));
  for (size_t j = 0; j < drafting_.size(); ++j) {
    std::vector<int32_t>& drafts = result.rows[static_cast<size_t>(drafting_[j].result_row)].drafts;
    for (int32_t s = 0; s < drafting_[j].n_draft && s < static_cast<int32_t>(passes_.size()); ++s) {
      if (j >= passes_[static_cast<size_t>(s)].rows.size()) break;
      const RowResult& r = passes_[static_cast<size_t>(s)].rows[j];
      if (r.status != kernels::sampling::kRowOk || r.token < 0) break;
      drafts.push_back(r.token);
    }
  }
  return Status::ok();
}

Status MtpDrafter::run_chain(const StepBatch& batch, bool shift) {
  StepBatch& b = pass_;
  const MtpPass chained{.tokens = MtpTokens::kPassSamples, .defer = true};
  int32_t depth = 0;
  for (const Drafting& d : drafting_) depth = std::max(depth, d.n_draft);
  // Chain steps: one row per drafting sequence, the same order as the previous pass's outputs (so its h' rows are
  // this pass's hidden input and its samples this pass's tokens); a sequence that has its drafts keeps its row
  // with no tokens.
  for (int32_t step = 2; step <= depth; ++step) {
    b.clear();
    b.page_table = batch.page_table;
    for (size_t j = 0; j < drafting_.size(); ++j) {
      const Drafting& d = drafting_[j];
      kernels::SeqDesc m = pass_seq(batch.seqs[static_cast<size_t>(d.seq)]);
      m.row0 = static_cast<int32_t>(j);
      m.n_tokens = d.n_draft >= step ? 1 : 0;
      m.n_past = d.position + step - 1;
      if (shift) m.shift_past = d.seq;
      b.seqs.push_back(m);
      b.tokens.push_back(0);  // a placeholder: the pass embeds the previous pass's sample of row j
      b.outputs.push_back(greedy_row(static_cast<int32_t>(j)));
    }
    const Tensor hidden = head_->output_hidden(static_cast<int64_t>(drafting_.size()));
    VS_RETURN_IF_ERROR(head_->forward(b, hidden, MtpHead::Input::kDraftHidden, cache_, page_size_, pass_result_, chained));
  }
  return Status::ok();
}

bool MtpDrafter::follows_on_device(const StepRequest& request, const StepBatch& batch) {
  if (static_cast<int32_t>(batch.outputs.size()) != batch.n_tokens() || !batch.masks.empty()) return false;
  bool judged = false, mtp = false;
  for (size_t i = 0; i < batch.outputs.size(); ++i) {
    const OutputRow& o = batch.outputs[i];
    if (o.row != static_cast<int32_t>(i) || (o.flags != kOutSample && o.flags != (kOutSample | kOutAccept)) ||
        penalized(o.sampling)) {
      return false;
    }
    judged |= (o.flags & kOutAccept) != 0;
  }
  for (const SeqStep& s : request.seqs) {
    if (s.mtp && s.next_token >= 0) return false;
    mtp |= s.mtp;
  }
  return judged && mtp;
}

Status MtpDrafter::run_after_deferred(const StepRequest& request, const StepBatch& batch, const Qwen35Model& model,
                                      StepResult& result) {
  // The first pass: every row of the speculating sequences, each paired with the token its verify row emitted (its
  // sample: a draft while accepted, then the correction or bonus; rows past the run pair with anything, and the
  // next round rewrites their MTP KV before any row reads it), drafting from the row the item's accepted run ends
  // at — planned at the item's first row, moved forward by the accepted drafts on the device.
  StepBatch& b = pass_;
  start_first_pass(batch);
  for (size_t i = 0; i < request.seqs.size(); ++i) {
    const SeqStep& s = request.seqs[i];
    kernels::SeqDesc m = pass_seq(batch.seqs[i]);
    if (s.mtp) {
      m.shift_rows = static_cast<int32_t>(i);
    } else {
      m.n_tokens = 0;  // its rows are computed and ignored
    }
    b.seqs.push_back(m);
    if (s.mtp && s.n_draft > 0) {
      drafting_.push_back({static_cast<int32_t>(i), -1, m.n_past + m.n_tokens - 1, s.n_draft});
      b.outputs.push_back(greedy_row(m.row0));
    }
  }
  const MtpPass first{.tokens = MtpTokens::kStepSamples, .defer = true};
  VS_RETURN_IF_ERROR(head_->forward(b, model.final_residual(batch.n_tokens()), MtpHead::Input::kMainResidual, cache_,
                                    page_size_, pass_result_, first));
  VS_RETURN_IF_ERROR(run_chain(batch, /*shift=*/true));
  // One wait: the verify step's rows (walked by the backend), then the passes' drafts.
  VS_RETURN_IF_ERROR(head_->take_drafts(passes_, /*n_steps=*/1));
  if (passes_.empty() || passes_.front().rows.size() != batch.outputs.size()) {
    return internal_error("MTP drafter: the deferred verify step's rows did not come back");
  }
  result.rows = std::move(passes_.front().rows);
  for (size_t j = 0; j < drafting_.size(); ++j) {
    // The item's last emitted row (rows past the run are kRowNotReached): the row the device drafted from. A failed
    // row there ends the request (the engine), so it gets no drafts.
    const kernels::SeqDesc& q = batch.seqs[static_cast<size_t>(drafting_[j].seq)];
    int32_t end = q.row0;
    while (end + 1 < q.row0 + q.n_tokens && result.rows[static_cast<size_t>(end) + 1].status != kernels::sampling::kRowNotReached) {
      ++end;
    }
    RowResult& at = result.rows[static_cast<size_t>(end)];
    if (at.status != kernels::sampling::kRowOk || at.token < 0) continue;
    for (int32_t s = 0; s < drafting_[j].n_draft && s + 1 < static_cast<int32_t>(passes_.size()); ++s) {
      const std::vector<RowResult>& rows = passes_[static_cast<size_t>(s) + 1].rows;
      if (j >= rows.size() || rows[j].status != kernels::sampling::kRowOk || rows[j].token < 0) break;
      at.drafts.push_back(rows[j].token);
    }
  }
  return Status::ok();
}

}  // namespace voltserve

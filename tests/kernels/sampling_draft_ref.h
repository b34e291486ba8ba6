// The reference verdict on one draft row (RowParams::draft, pending_*), for the tests of the device sampler's
// draft rows: accept_drafts_ref over a one-draft item whose row 0 is the row (its bonus row, the same row again,
// not reported), on a copy of the penalty counts with the row's pending ids counted into its slot, as the rule counts
// the drafts accepted before a row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/sampling/accept.h"
#include "kernels/sampling/sampling.h"

namespace voltserve::test {

struct DraftVerdict {
  int32_t token = -1, status = 0, nan_index = -1;
  float logprob = 0.0f;
  std::vector<int32_t> top_ids;  // kMaxTopLogprobs entries
  std::vector<float> top_logprobs;
};

// pen with its counts copied into `counts` and the row's pending ids (pending[p.pending_offset ..]) counted into
// its slot there; no pending array of its own.
inline kernels::sampling::PenaltyState with_pending(kernels::sampling::PenaltyState pen,
                                                    const kernels::sampling::RowParams& p, const int32_t* pending,
                                                    std::vector<int32_t>& counts) {
  pen.pending = nullptr;
  if (pen.counts == nullptr) return pen;
  counts.assign(pen.counts, pen.counts + static_cast<size_t>(pen.n_slots) * static_cast<size_t>(pen.vocab));
  pen.counts = counts.data();
  if (p.slot < 0 || p.slot >= pen.n_slots) return pen;
  for (int32_t i = 0; i < p.pending_count; ++i) {
    const int32_t id = pending[p.pending_offset + i];
    if (id >= 0 && id < pen.vocab) ++counts[static_cast<size_t>(p.slot) * static_cast<size_t>(pen.vocab) + static_cast<size_t>(id)];
  }
  return pen;
}

// logits: the row's [stride] values; pending: the array RowParams::pending_* index.
inline DraftVerdict judge_draft_ref(const float* logits, int64_t stride, int32_t n_real,
                                    const kernels::sampling::RowParams& p, const int32_t* bias_ids,
                                    const float* bias_values, const kernels::sampling::PenaltyState& state,
                                    const int32_t* pending) {
  using namespace kernels::sampling;
  std::vector<int32_t> counts;
  const PenaltyState pen = with_pending(state, p, pending, counts);
  RowParams rows[2] = {p, p};
  rows[1].draft = -1;
  std::vector<float> two(2 * static_cast<size_t>(stride));
  std::copy_n(logits, stride, two.begin());
  std::copy_n(logits, stride, two.begin() + stride);
  int32_t token[2] = {-1, -1}, status[2] = {0, 0}, nan_index[2] = {-1, -1};
  float logprob[2] = {0.0f, 0.0f};
  DraftVerdict v;
  std::vector<int32_t> top(2 * kMaxTopLogprobs, -1);
  std::vector<float> top_lp(2 * kMaxTopLogprobs, 0.0f);
  AcceptArgs a;
  a.logits = two.data();
  a.logits_stride = stride;
  a.n_vocab_real = n_real;
  a.n_drafts = 1;
  a.drafts = &p.draft;
  a.rows = rows;
  a.bias_ids = bias_ids;
  a.bias_values = bias_values;
  a.penalties = pen;
  a.out = Outputs{token, logprob, top.data(), top_lp.data(), status, nan_index};
  accept_drafts_ref(a);
  v.token = token[0];
  v.status = status[0];
  v.nan_index = nan_index[0];
  v.logprob = logprob[0];
  v.top_ids.assign(top.begin(), top.begin() + kMaxTopLogprobs);
  v.top_logprobs.assign(top_lp.begin(), top_lp.begin() + kMaxTopLogprobs);
  return v;
}

}  // namespace voltserve::test

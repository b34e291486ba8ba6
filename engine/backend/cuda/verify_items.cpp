// See verify_items.h.
#include "backend/cuda/verify_items.h"

#include "sampling/accept.h"

namespace voltserve::cuda {

namespace smp = kernels::sampling;

Result<std::vector<VerifyItem>> verify_items(const StepBatch& batch) {
  const auto& outputs = batch.outputs;
  const auto n_out = static_cast<int64_t>(outputs.size());
  std::vector<VerifyItem> items;
  for (int64_t i = 0; i < n_out;) {
    const OutputRow& o = outputs[static_cast<size_t>(i)];
    if (!(o.flags & kOutAccept)) {
      ++i;
      continue;
    }
    const kernels::SeqDesc* s = nullptr;
    for (const kernels::SeqDesc& q : batch.seqs) {
      if (o.row >= q.row0 && o.row < q.row0 + q.n_tokens) s = &q;
    }
    int64_t n = 1;
    while (s != nullptr && i + n < n_out && (outputs[static_cast<size_t>(i + n)].flags & kOutAccept) &&
           outputs[static_cast<size_t>(i + n)].row == o.row + static_cast<int32_t>(n) && o.row + n < s->row0 + s->n_tokens) {
      ++n;
    }
    if (s == nullptr || o.row != s->row0 || n != s->n_tokens || s->n_draft != n - 1) {
      return internal_error("cuda backend: a verify item's accept rows must be all of its tokens, in order");
    }
    items.push_back({i, n, s});
    i += n;
  }
  return items;
}

std::vector<int32_t> accept_judged_items(const std::vector<VerifyItem>& items, const StepBatch& batch,
                                         StepResult& result) {
  std::vector<int32_t> accepted;
  std::vector<int32_t> token, status;
  for (const VerifyItem& it : items) {
    token.resize(static_cast<size_t>(it.n));
    status.resize(static_cast<size_t>(it.n));
    for (int64_t j = 0; j < it.n; ++j) {
      token[static_cast<size_t>(j)] = result.rows[static_cast<size_t>(it.first + j)].token;
      status[static_cast<size_t>(j)] = result.rows[static_cast<size_t>(it.first + j)].status;
    }
    accepted.push_back(smp::accept_judged_rows(static_cast<int32_t>(it.n - 1), batch.tokens.data() + it.seq->row0 + 1,
                                               token.data(), status.data()));
    for (int64_t j = 0; j < it.n; ++j) {
      RowResult& r = result.rows[static_cast<size_t>(it.first + j)];
      r.token = token[static_cast<size_t>(j)];
      r.status = status[static_cast<size_t>(j)];
      if (r.status == smp::kRowNotReached) {
        r.logprob = 0.0f;
        r.top.clear();
      }
    }
  }
  return accepted;
}


}  // namespace voltserve::cuda

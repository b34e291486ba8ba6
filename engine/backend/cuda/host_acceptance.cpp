// See host_acceptance.h.
#include "backend/cuda/host_acceptance.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "sampling/accept.h"

namespace voltserve::cuda {
namespace {

namespace smp = kernels::sampling;

bool penalized(const smp::RowParams& p) {
  return p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repetition_penalty != 1.0f;
}

Status cuda_error(cudaError_t e, const char* what) {
  return internal_error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

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
    items.push_back({i, n, s, false});
    i += n;
  }
  return items;
}

void accept_sampled_items(const std::vector<VerifyItem>& items, const StepBatch& batch, StepResult& result) {
  std::vector<int32_t> token, status;
  for (const VerifyItem& it : items) {
    if (!it.on_device) continue;
    token.resize(static_cast<size_t>(it.n));
    status.resize(static_cast<size_t>(it.n));
    for (int64_t j = 0; j < it.n; ++j) {
      token[static_cast<size_t>(j)] = result.rows[static_cast<size_t>(it.first + j)].token;
      status[static_cast<size_t>(j)] = result.rows[static_cast<size_t>(it.first + j)].status;
    }
    smp::accept_greedy_samples(static_cast<int32_t>(it.n - 1), batch.tokens.data() + it.seq->row0 + 1, token.data(),
                               status.data());
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
}

Status accept_verify_items(const HostAcceptance& a, const std::vector<VerifyItem>& items, StepResult& result) {
  const StepBatch& batch = *a.batch;
  const auto& outputs = batch.outputs;
  auto stream = static_cast<cudaStream_t>(a.stream);
  std::vector<int32_t> counts, token, status, nan_index, top_ids;
  std::vector<uint32_t> bits;
  std::vector<float> logprob, top_lp, item_logits;
  for (const VerifyItem& item : items) {
    if (item.on_device) continue;
    const int64_t i = item.first, n = item.n;
    const kernels::SeqDesc* s = item.seq;
    // The item's rows, contiguous for the rule.
    item_logits.resize(static_cast<size_t>(n * a.vocab_stride));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = (*a.logit_index)[static_cast<size_t>(i + j)];
      if (at < 0) return internal_error("cuda backend: a verify row's logits were not downloaded");
      std::copy_n(a.logits + at * a.vocab_stride, a.vocab_stride, item_logits.data() + j * a.vocab_stride);
    }
    std::vector<smp::RowParams> rows(a.rows->begin() + i, a.rows->begin() + i + n);
    const bool with_penalties = std::any_of(rows.begin(), rows.end(), penalized) && s->slot >= 0 &&
                                a.device_penalties.counts != nullptr && s->slot < a.device_penalties.n_slots;
    smp::PenaltyState host;
    const int32_t vocab = a.device_penalties.vocab;
    const int32_t words = a.device_penalties.words();
    int32_t* d_counts = nullptr;
    if (with_penalties) {
      // The slot's counts and prompt bits as this step left them (its input token counted, the drafts not).
      counts.resize(static_cast<size_t>(vocab));
      bits.resize(static_cast<size_t>(words));
      d_counts = a.device_penalties.counts + static_cast<int64_t>(s->slot) * vocab;
      const uint32_t* d_bits = a.device_penalties.prompt_bits + static_cast<int64_t>(s->slot) * words;
      cudaError_t e = cudaMemcpyAsync(counts.data(), d_counts, counts.size() * 4, cudaMemcpyDeviceToHost, stream);
      if (e == cudaSuccess) e = cudaMemcpyAsync(bits.data(), d_bits, bits.size() * 4, cudaMemcpyDeviceToHost, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return cuda_error(e, "penalty state download (speculative acceptance)");
      host = smp::PenaltyState{counts.data(), bits.data(), vocab, 1};
      for (smp::RowParams& r : rows) r.slot = 0;
    } else {
      for (smp::RowParams& r : rows) r.slot = -1;
    }
    token.assign(static_cast<size_t>(n), -1);
    status.assign(static_cast<size_t>(n), 0);
    nan_index.assign(static_cast<size_t>(n), -1);
    logprob.assign(static_cast<size_t>(n), 0.0f);
    top_ids.assign(static_cast<size_t>(n * smp::kMaxTopLogprobs), -1);
    top_lp.assign(static_cast<size_t>(n * smp::kMaxTopLogprobs), 0.0f);
    smp::AcceptArgs acc;
    acc.logits = item_logits.data();
    acc.logits_stride = a.vocab_stride;
    acc.n_vocab_real = a.n_vocab_real;
    acc.n_drafts = static_cast<int32_t>(n - 1);
    acc.drafts = batch.tokens.data() + s->row0 + 1;
    acc.rows = rows.data();
    acc.bias_ids = a.bias_ids;
    acc.bias_values = a.bias_values;
    acc.penalties = host;
    acc.out = {token.data(), logprob.data(), top_ids.data(), top_lp.data(), status.data(), nan_index.data()};
    smp::accept_drafts_ref(acc);
    if (with_penalties) {  // the accepted drafts are counted now, as the CPU backend counts them
      cudaError_t e = cudaMemcpyAsync(d_counts, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return cuda_error(e, "penalty state upload (speculative acceptance)");
    }
    for (int64_t j = 0; j < n; ++j) {
      const OutputRow& oj = outputs[static_cast<size_t>(i + j)];
      RowResult& r = result.rows[static_cast<size_t>(i + j)];
      r.token = token[static_cast<size_t>(j)];
      r.status = status[static_cast<size_t>(j)];
      r.nan_index = nan_index[static_cast<size_t>(j)];
      if ((oj.flags & kOutSample) && (oj.flags & kOutLogprobs) && r.status == smp::kRowOk) {
        r.logprob = logprob[static_cast<size_t>(j)];
        const int32_t n_top = std::clamp(oj.sampling.n_top_logprobs, 0, smp::kMaxTopLogprobs);
        for (int32_t t = 0; t < n_top && t < a.n_vocab_real; ++t) {
          const size_t at = static_cast<size_t>(j * smp::kMaxTopLogprobs + t);
          r.top.emplace_back(top_ids[at], top_lp[at]);
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace voltserve::cuda

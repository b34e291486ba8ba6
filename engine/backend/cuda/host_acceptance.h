// The CUDA backend's speculative acceptance (kernels/sampling/accept.h). A greedy, unpenalized verify item is
// decided from the device sampler's per-row argmaxes (rows_decide_independently): only its k + 1 tokens come down,
// and the walk over them (accept_greedy_samples) is the rule. Any other item (sampled, or penalized, whose row j
// depends on the drafts before it) goes through the reference rule on the host: its rows' logits come down with the
// step's outputs, and a request with penalties has its slot's counts brought down and written back around it. A
// device kernel for those items is still to come (issue 21). Tested on a GPU by tests/golden/cuda_model_test.cpp
// (speculative greedy output equal to plain decoding, with and without penalties).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling.h"
#include "voltserve/status.h"

namespace voltserve::cuda {

struct HostAcceptance {
  const StepBatch* batch = nullptr;
  const std::vector<kernels::sampling::RowParams>* rows = nullptr;  // sampler_rows(batch), kSample as asked
  const float* logits = nullptr;            // the downloaded rows, [n, vocab_stride]
  const std::vector<int64_t>* logit_index = nullptr;  // per output row: its row in `logits`, -1 when none
  int64_t vocab_stride = 0;
  int32_t n_vocab_real = 0;
  const int32_t* bias_ids = nullptr;        // host copies of the step's logit_bias entries
  const float* bias_values = nullptr;
  kernels::sampling::PenaltyState device_penalties;  // device pointers
  void* stream = nullptr;                   // cudaStream_t of the step (idle when this runs)
};

// A verify item: the consecutive kOutAccept rows [first, first + n) of the outputs, all the tokens of `seq`.
struct VerifyItem {
  int64_t first = 0;
  int64_t n = 0;
  const kernels::SeqDesc* seq = nullptr;
  bool on_device = false;  // decided from the device sampler's rows (rows_decide_independently)
};

// The step's verify items, in output order; an error when accept rows are not whole items.
Result<std::vector<VerifyItem>> verify_items(const StepBatch& batch);

// Decides the items that are not on_device on the host and writes their rows' token, status, logprob and top
// logprobs into result.rows (sized to the outputs already).
Status accept_verify_items(const HostAcceptance& a, const std::vector<VerifyItem>& items, StepResult& result);

// The on_device items: result.rows holds the sampler's token and status of each of their rows; the walk truncates
// them to the accepted run (rows past it: token -1, kRowNotReached, no logprobs).
void accept_sampled_items(const std::vector<VerifyItem>& items, const StepBatch& batch, StepResult& result);

}  // namespace voltserve::cuda

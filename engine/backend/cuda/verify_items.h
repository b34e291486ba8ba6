// The CUDA backend's speculative acceptance (kernels/sampling/accept.h) around the device sampler. Every verify item
// is judged on the device: row j < k judges d_{j+1} (RowParams::draft) with its penalties counting d1..dj on top of
// the slot's state (RowParams::pending_*), the bonus row samples, only the k + 1 tokens come down, and the walk over
// them (accept_judged_rows) is the rule; the accepted drafts are then counted into the slot's state
// (count_generated). No logits leave the device. The walk also runs on the device (kernels/sampling/
// accepted_runs.h) for the steps after a deferred verify step. Tested on a GPU by tests/golden/cuda_model_test.cpp
// (speculative output equal to plain decoding, greedy with and without penalties; sampled with a seed reproducible)
// and tests/kernels/sampling_gpu_test.cpp (draft rows against accept_drafts_ref).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "sampling/sampling.h"
#include "voltserve/status.h"

namespace voltserve::cuda {

// A verify item: the consecutive kOutAccept rows [first, first + n) of the outputs, all the tokens of `seq`.
struct VerifyItem {
  int64_t first = 0;
  int64_t n = 0;
  const kernels::SeqDesc* seq = nullptr;
};

// The step's verify items, in output order; an error when accept rows are not whole items.
Result<std::vector<VerifyItem>> verify_items(const StepBatch& batch);

// result.rows holds the sampler's token and status of each row of the items; the walk (accept_judged_rows)
// truncates them to the accepted run (rows past it: token -1, kRowNotReached, no logprobs). Returns each item's
// accepted draft count.
std::vector<int32_t> accept_judged_items(const std::vector<VerifyItem>& items, const StepBatch& batch, StepResult& result);

}  // namespace voltserve::cuda

// The CUDA backend's speculative acceptance, on the host for now: the verify items' logits rows come down with
// the step's outputs and go through kernels/sampling's reference rule (accept_drafts_ref, the CPU backend's
// verifier), a request with penalties having its slot's counts brought down and written back around it. The device
// kernel of the same rule replaces it (issue 21, the CUDA round). Tested on a GPU by tests/golden/cuda_model_test.cpp
// (speculative greedy output equal to plain decoding).
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

// Decides every verify item (consecutive kOutAccept rows of one sequence: all its tokens) and writes their rows'
// token, status, logprob and top logprobs into result.rows (sized to the outputs already).
Status accept_verify_items(const HostAcceptance& a, StepResult& result);

}  // namespace voltserve::cuda

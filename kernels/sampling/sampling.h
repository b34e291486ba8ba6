// Sampling from a step's logits on the backend: the processing chain of the request's parameters, the draw, and
// the logprobs, for every row that needs an output — so a device returns token ids and logprobs, never the full
// logits. The reference (sampling_ref.cpp, CUDA-free) is the CPU backend's sampler and the oracle of the device
// kernels (tests/kernels/sampling_ref_test.cpp, sampling_gpu_test.cpp). CUDA-free header.
//
// Order of operations per row (the order Hugging Face's generate() applies its processors and warpers):
//   0. a row with a token mask (structured output, mask_row >= 0) sees the ids whose bit is clear as -inf: they are
//      never sampled; logprobs stay those of the raw distribution;
//   1. logit_bias added (entries with ids outside [0, n_vocab_real) are ignored; the engine rejects them earlier);
//   2. repetition penalty (HF) over the ids of prompt and generated tokens, once per distinct id: a positive
//      logit is divided by it, a negative one multiplied;
//   3. presence / frequency penalties (OpenAI) over generated ids: logit -= presence * (count > 0) +
//      frequency * count;
//   4. greedy (temperature <= 0): the argmax, ties to the lowest id — no random number is drawn;
//   5. otherwise softmax at the temperature (in double; +inf logits share the mass equally), then top-k (exactly k,
//      ties toward lower ids), top-p (the smallest prefix of the distribution sorted by descending probability then
//      ascending id whose mass reaches top_p, at least one token), min-p (drop p < min_p * p_max);
//   6. one uniform draw u = uniform_draw(seed, draw_index, kStreamSample) (philox.h) walks the cumulative
//      distribution of the survivors: in ascending id order when no filter is on, else in the sorted order.
// Rows at ids >= n_vocab_real (padding) are never sampled. A NaN in a real row makes the row's status kNanLogits
// (the engine fails that request); nothing samplable (every real logit -inf after processing) is
// kNothingSamplable. Logprobs are those of the raw model distribution (log-softmax of the real rows before any
// processing; NaN counts as -inf), as vLLM reports by default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/host_parallel.h"
#include "common/kernel_status.h"
#include "common/step_desc.h"

namespace voltserve::kernels::sampling {

inline constexpr int32_t kMaxTopLogprobs = 20;

enum RowFlags : uint32_t {
  kSample = 1u,    // pick a token
  kLogprobs = 2u,  // report the chosen token's logprob and n_top_logprobs alternatives (with kSample)
};

// One output row's sampling parameters (POD: uploaded to the device once per step).
struct RowParams {
  int32_t slot = -1;  // penalty-state slot of the row's sequence; -1: the row has no penalty state
  uint32_t flags = 0;
  float temperature = 1.0f;  // <= 0: greedy
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  int32_t top_k = 0;         // <= 0: off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // > 0; 1: off
  int32_t n_top_logprobs = 0;       // 0..kMaxTopLogprobs
  int32_t bias_offset = 0;          // this row's logit_bias entries: [bias_offset, bias_offset + bias_count)
  int32_t bias_count = 0;
  uint64_t seed = 0;        // the request's seed (Philox key)
  uint64_t draw_index = 0;  // which draw of the request this is: the index of the token being generated
  int32_t mask_row = -1;    // >= 0: the row's token bitmask is masks[mask_row * mask_words ...] (bit id set: allowed)
  // >= 0: speculative decoding, the draft d this row judges (accept.h): a sampled row emits d when accepted, else a
  // token drawn from its distribution without d (never d); a greedy row its argmax, as always. The row's token
  // equals d exactly when d is accepted. -1: an ordinary draw.
  int32_t draft = -1;
  // Generated ids not yet in the slot's counts that this row's penalties count as well (a verify row j: the drafts
  // d1..dj before it, accept.h): PenaltyState::pending[pending_offset, pending_offset + pending_count). The device
  // sampler only (the reference rule counts the drafts into the state itself).
  int32_t pending_offset = 0;
  int32_t pending_count = 0;
};

// Row r's token mask, or null: the words of RowParams::mask_row in a step's masks (mask_words per row).
inline const uint32_t* row_mask(const uint32_t* masks, int32_t mask_words, int32_t mask_row) {
  if (masks == nullptr || mask_row < 0 || mask_words <= 0) return nullptr;
  return masks + static_cast<int64_t>(mask_row) * mask_words;
}

// Per-slot state the penalties read, updated from each step's input tokens (update_penalties): a token at a
// position below its sequence's n_prompt sets its prompt bit, one at or after it counts as generated.
struct PenaltyState {
  int32_t* counts = nullptr;         // [n_slots, vocab]: how often each id was generated
  uint32_t* prompt_bits = nullptr;   // [n_slots, words()]: bit id set when id occurs in the prompt
  int32_t vocab = 0;
  int32_t n_slots = 0;
  const int32_t* pending = nullptr;  // the step's ids that RowParams::pending_* point into (null: none)
  int32_t words() const { return (vocab + 31) / 32; }
};

enum RowStatus : int32_t { kRowOk = 0, kNanLogits = 1, kNothingSamplable = 2 };

// Per-row results. top_* are [n_rows, kMaxTopLogprobs]; entries past n_top_logprobs are unspecified.
struct Outputs {
  int32_t* token = nullptr;      // [n_rows]: the sampled id (-1 when status != kRowOk or without kSample)
  float* logprob = nullptr;      // [n_rows]: raw logprob of token (with kLogprobs)
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  int32_t* status = nullptr;     // [n_rows]: RowStatus
  int32_t* nan_index = nullptr;  // [n_rows]: the first NaN row's id when status == kNanLogits
};

struct RefArgs {
  const float* logits = nullptr;  // [n_rows, >= n_vocab_real] fp32
  int64_t logits_stride = 0;
  int32_t n_rows = 0;
  int32_t n_vocab_real = 0;  // ids >= this are padding
  const RowParams* rows = nullptr;
  const int32_t* bias_ids = nullptr;  // the step's logit_bias entries, all rows back to back
  const float* bias_values = nullptr;
  PenaltyState penalties;  // read only here
  const uint32_t* masks = nullptr;  // the step's token masks, mask_words uint32 per mask (RowParams::mask_row)
  int32_t mask_words = 0;
  Outputs out;
  const HostParallel* parallel = nullptr;
};
void sample_ref(const RefArgs& a);

// The pieces of sample_ref, for tests and host tools.
// Steps 0-3 into out[0, n_vocab_real) (NaN replaced by -inf); mask: the row's token mask or null.
void process_logits_ref(const float* logits, int32_t n_vocab_real, const RowParams& row, const int32_t* bias_ids,
                        const float* bias_values, const PenaltyState& penalties, std::vector<float>& out,
                        const uint32_t* mask = nullptr);
// Step 5 over processed logits: (id, probability) pairs in the order the draw walks them (see above); greedy gives
// the argmax with probability 1; empty when nothing is samplable.
void final_distribution_ref(const std::vector<float>& processed, const RowParams& row,
                            std::vector<std::pair<int32_t, double>>& out);
// Raw logprob of `chosen` and the n_top most likely ids (descending, ties to lower ids) over logits[0, n).
void log_softmax_top_ref(const float* logits, int32_t n, int32_t chosen, int32_t n_top, float* chosen_logprob,
                         int32_t* top_ids, float* top_logprobs);

void reset_penalties_ref(const PenaltyState& s, int32_t slot);
void update_penalties_ref(const PenaltyState& s, const int32_t* tokens, const SeqDesc* seqs, int32_t n_seqs);

// Device forms (every pointer device memory).
struct DeviceArgs {
  const float* logits = nullptr;
  int64_t logits_stride = 0;
  int32_t n_rows = 0;  // rows to sample (may be an upper bound: rows with flags == 0 are skipped)
  int32_t n_vocab_real = 0;
  const RowParams* rows = nullptr;
  const int32_t* bias_ids = nullptr;
  const float* bias_values = nullptr;
  PenaltyState penalties;
  const uint32_t* masks = nullptr;  // device memory, as RefArgs::masks
  int32_t mask_words = 0;
  Outputs out;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* stream = nullptr;
};
size_t workspace_bytes(int32_t n_rows, int32_t n_vocab_real);
KernelStatus sample(const DeviceArgs& a);
KernelStatus reset_penalties(const PenaltyState& s, int32_t slot, void* stream);
KernelStatus update_penalties(const PenaltyState& s, const int32_t* tokens, const SeqDesc* seqs, int32_t n_seqs,
                              int32_t n_rows, void* stream);
// counts[slot][ids[i]] += 1 for i < n (device ids): a verify item's accepted drafts, once they are known.
KernelStatus count_generated(const PenaltyState& s, int32_t slot, const int32_t* ids, int32_t n, void* stream);

}  // namespace voltserve::kernels::sampling

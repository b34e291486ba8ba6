// The reference sampler: logit processing (bias, penalties, temperature, top-k, top-p, min-p) and a seeded draw.
// Tested against straightforward recomputations of each transform and by counting draws (tests/sampling/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/rng.h"
#include "voltserve/request.h"
#include "voltserve/sampling.h"
#include "voltserve/status.h"

namespace voltserve {

// Order of operations (the order Hugging Face's generate() applies its processors and warpers):
//   1. logit_bias added (ids outside [0, n_vocab_real) are ignored; the engine rejects them at submit);
//   2. repetition penalty over prompt + generated ids (HF: a positive logit is divided by it, a negative one
//      multiplied), once per distinct id;
//   3. presence / frequency penalties over generated ids (OpenAI: logit -= presence * (count > 0) +
//      frequency * count);
//   4. greedy (temperature == 0): argmax, ties to the lowest id — no random number is drawn;
//   5. temperature, top-k (exactly k, ties broken toward lower ids), top-p (smallest prefix of the sorted
//      distribution whose mass reaches top_p, at least one token), min-p (drop p < min_p * p_max);
//   6. one uniform draw from the renormalised survivors.
// Rows at ids >= n_vocab_real (padding) are never sampled. NaN logits are never sampled: sample() treats them as
// -inf (deterministic), try_sample() reports them as an error so the engine can fail the request instead.
class Sampler {
 public:
  // n_vocab_real: rows at or beyond it are padding; 0 means every row of the logits is real.
  Sampler(const SamplingParams& params, uint64_t seed, int32_t n_vocab_real = 0);

  // Returns the chosen id, or -1 when no row is samplable (every real row is -inf or NaN after processing).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                 std::span<const int32_t> generated_ids);
  // Like sample(), but a NaN in a real row or the absence of any finite candidate is a kInternal error that
  // names the row. Draws the same random numbers as sample() would on the same inputs.
  Result<int32_t> try_sample(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                             std::span<const int32_t> generated_ids);

  const SamplingParams& params() const { return params_; }

  // The processed logits of steps 1-3 (before temperature), for tests and for logprobs of processed
  // distributions; rows >= n_vocab_real are dropped.
  void process_logits(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                      std::span<const int32_t> generated_ids, std::vector<float>& out) const;
  // The final distribution (step 5) over the processed logits as (id, probability) pairs sorted by descending
  // probability, then ascending id. Empty when nothing is samplable. Greedy gives the argmax with p = 1.
  void final_distribution(std::span<const float> processed, std::vector<std::pair<int32_t, double>>& out) const;

 private:
  SamplingParams params_;
  int32_t n_vocab_real_;
  Xoshiro256 rng_;
  std::vector<float> work_;
  std::vector<std::pair<int32_t, double>> dist_;
};

// Log-softmax of the raw logits (the model's distribution, before any sampling transform — vLLM's default
// "raw" logprobs): the logprob of `chosen` and the `n_top` most likely ids (descending, ties to lower ids).
// NaN rows are treated as -inf. n_top is clamped to the number of rows.
void log_softmax_top(std::span<const float> logits, int32_t chosen, int32_t n_top, TokenLogprob& chosen_out,
                     std::vector<TokenLogprob>& top_out);

}  // namespace voltserve

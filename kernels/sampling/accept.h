// Speculative decoding's acceptance rule over one verify item (MODEL.md §4.4, DESIGN.md §5): the target's logits at
// the k + 1 rows of [last token, d1..dk], the k drafts, and the request's sampling parameters per row. The reference
// (accept_ref.cpp, CUDA-free) is the CPU backend's verifier and the oracle of a device kernel to come; tested in
// tests/kernels/sampling_accept_test.cpp (exact distributions, chi-square against plain sampling, broken rules).
//
// Row j (0 <= j <= k) is processed as sample_ref processes a row (sampling.h: bias, penalties, greedy or
// temperature, top-k/p, min-p), with the penalty counts of the generated tokens up to and including d_j (the counts
// of d1..dj are added to the slot's state as they are accepted, so they are right for every row and, at the end,
// the state holds exactly the accepted tokens). Then, while j < k:
//   greedy (temperature <= 0): accept d_{j+1} iff it is the argmax; else emit the argmax (the correction) and stop;
//   sampled: with p the row's final distribution, accept d = d_{j+1} iff u < p(d), u = uniform_draw(seed,
//     draw_index, kStreamAccept); else emit a token drawn from p with d removed and renormalised (v =
//     uniform_draw(seed, draw_index, kStreamResample) walks it in the order sample_ref walks p) and stop.
//     For a deterministic draft this emits x with probability p(d)[x = d] + (1 - p(d)) p(x) / (1 - p(d)) [x != d]
//     = p(x): the output distribution is the target's (Leviathan et al.; vLLM's greedy-draft path).
// After k acceptances the bonus row k samples as sample_ref does (kStreamSample, the row's draw_index). Each row's
// draw_index is the index of the token it emits, so a seeded request is reproducible.
// A NaN in a processed row makes it kNanLogits and ends the item there (the rows before it keep their tokens).
#pragma once

#include <cstdint>

#include "sampling/sampling.h"

namespace voltserve::kernels::sampling {

// Row status past the end of the accepted run (with RowStatus): the row emits nothing.
inline constexpr int32_t kRowNotReached = 3;

// kExact is the rule above. The other two are deliberately wrong, for the tests that prove the statistical test
// has power: accept every draft; on a rejection resample from p without removing the draft.
enum class AcceptRule : int32_t { kExact = 0, kAlwaysAccept = 1, kResampleKeepingDraft = 2 };

struct AcceptArgs {
  const float* logits = nullptr;  // [n_drafts + 1, >= n_vocab_real] fp32: the item's rows
  int64_t logits_stride = 0;
  int32_t n_vocab_real = 0;
  int32_t n_drafts = 0;                // k >= 0
  const int32_t* drafts = nullptr;     // [k]: d1..dk
  const RowParams* rows = nullptr;     // [k + 1]: row j's parameters (seed, draw_index, flags, slot, bias range)
  const int32_t* bias_ids = nullptr;   // the step's logit_bias entries (RowParams::bias_offset indexes them)
  const float* bias_values = nullptr;
  PenaltyState penalties;              // the accepted drafts' counts are added to rows[0].slot's state
  Outputs out;                         // [k + 1] rows: token, logprob, top, status (kRowNotReached past the run)
  AcceptRule rule = AcceptRule::kExact;
};

// Returns the number of accepted drafts a in [0, k]; rows 0..a emitted a token each (a drafts, then the correction
// or bonus) unless a row's status says otherwise.
int32_t accept_drafts_ref(const AcceptArgs& a);

// Whether a verify item's rows can be decided from independent samples: every row greedy and without penalties.
// Then row j's processed logits do not depend on the drafts before it (bias is per request, the penalty counts are
// not read), so the rule above for the item is: take every row's argmax in parallel (the device sampler, as it
// samples any greedy row), then walk them with accept_greedy_samples. No logits leave the device.
inline bool rows_decide_independently(const RowParams* rows, int32_t n) {
  for (int32_t j = 0; j < n; ++j) {
    const RowParams& r = rows[j];
    if (r.temperature > 0.0f || r.presence_penalty != 0.0f || r.frequency_penalty != 0.0f ||
        r.repetition_penalty != 1.0f) {
      return false;
    }
  }
  return true;
}

// The walk over the k + 1 rows' greedy samples (token[j], status[j] as the sampler gave them): row j's token stands
// while it equals d_{j+1}; the first row that differs is the correction, k accepted rows end with the bonus, and a
// failed row (NaN, nothing samplable) ends the item there. Rows past the end become kRowNotReached with token -1.
// Returns the accepted count, as accept_drafts_ref does for such rows.
int32_t accept_greedy_samples(int32_t n_drafts, const int32_t* drafts, int32_t* token, int32_t* status);

}  // namespace voltserve::kernels::sampling

// Speculative decoding's acceptance rule over one verify item (MODEL.md §4.4, DESIGN.md §5): the target's logits at
// the k + 1 rows of [last token, d1..dk], the k drafts, and the request's sampling parameters per row. The reference
// (accept_ref.cpp, CUDA-free) is the CPU backend's verifier and the oracle of the device sampler's draft rows
// (RowParams::draft; tests/kernels/sampling_math_test.cpp, sampling_gpu_test.cpp); tested in
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

// The device form. Row j's processed logits depend on the drafts before it only through the penalty counts of
// d1..dj, which are known before any verdict; its verdict on d_{j+1} uses only its own draws (seed, draw_index).
// So every row is judged at once by the device sampler — row j < k as a draft row of d_{j+1} (RowParams::draft)
// whose penalties count d1..dj on top of the slot's state (RowParams::pending_*), the bonus row k as any sampled
// row — each emitting what the rule above emits there if the run reaches it; accept_judged_rows then finds the run,
// and the accepted drafts are counted into the slot's state (count_generated). No logits leave the device.

// The walk over the k + 1 judged rows (token[j], status[j] as the sampler gave them, row j < k judging d_{j+1}): row
// j's token stands while it equals d_{j+1} (a judged row emits its draft exactly when it accepts it); the first row
// that differs is the correction, k accepted rows end with the bonus, and a failed row (NaN, nothing samplable) ends
// the item there. Rows past the end become kRowNotReached with token -1. Returns the accepted count, as
// accept_drafts_ref does for such rows.
int32_t accept_judged_rows(int32_t n_drafts, const int32_t* drafts, int32_t* token, int32_t* status);

}  // namespace voltserve::kernels::sampling

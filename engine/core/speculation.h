// One request's speculative-decoding bookkeeping in the engine: what it drafted and accepted per draft position,
// the adaptive choice of k (Request::speculative_k = kSpeculativeAuto), and the corruption signal of a flat,
// near-100% acceptance profile (DESIGN.md §5). Tested in tests/scheduler/speculation_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace voltserve {

class SpecState {
 public:
  // requested: 0 off, kSpeculativeAuto, or a fixed k (already validated against max_k).
  SpecState(int32_t requested, int32_t max_k) : requested_(requested), max_k_(max_k) {}

  bool enabled() const { return requested_ != 0 && max_k_ > 0; }
  // Drafts to ask for in the next round: the fixed k, or (auto) the k in [0, max_k] that maximises expected
  // tokens per unit of round cost, the cost of a round relative to one plain decode step being
  // 1 + k * (draft_cost + verify_cost * n_running): a draft step runs the MTP layer and the lm_head, a verify row
  // costs little at small batches and more as the batch grows. An auto request that settled on k = 0 probes k = 1
  // every kProbeEvery rounds so that it can come back.
  int32_t next_k(int32_t n_running) const;
  // A verify round that drafted k and accepted a of them (a <= k).
  void record(int32_t k, int32_t accepted);

  int32_t n_drafted() const { return n_drafted_; }
  int32_t n_accepted() const { return n_accepted_; }
  int32_t n_rounds() const { return n_rounds_; }
  const std::vector<int32_t>& drafted_per_position() const { return drafted_pos_; }
  const std::vector<int32_t>& accepted_per_position() const { return accepted_pos_; }
  // Acceptance of every drafted position at least kFlatAcceptance over at least kFlatMinRounds rounds with
  // kFlatMinDrafts drafts: more likely a corruption (NaN logits matching every draft, a drafter reading the target's
  // answer) than a real model.
  bool flat_near_full() const;

  // Fitted to rounds measured on the H200, 27B NVFP4 shape (bench/RESULTS.md, 2026-12-03 second session): a draft
  // step with the defaults (NVFP4 MTP layer, whole-vocabulary BF16 head) is 0.10 of a plain step (0.025 with
  // --draft-vocab 32768); a verify row per running sequence ~0.03 of a plain step at batch 1 (k = 7: 1.38x with the
  // 32k draft vocabulary) and at batch 8 (k = 1, 3, 7: 1.19x, 1.66x, 2.47x), the linear layers streaming their
  // weights once per 16 verify rows up to 64 (kernels/linear) — past 64 rows they dequantize for cuBLAS and a round
  // costs more than this model says.
  static constexpr double kDraftCost = 0.10;
  static constexpr double kVerifyCost = 0.03;
  static constexpr int32_t kProbeEvery = 16;
  static constexpr int32_t kFlatMinRounds = 32;
  static constexpr int32_t kFlatMinDrafts = 64;
  static constexpr double kFlatAcceptance = 0.99;

 private:
  // Estimated probability that draft position j is accepted given that j - 1 was (a prior of 0.5 with weight 2).
  double conditional(int32_t j) const;

  int32_t requested_;
  int32_t max_k_;
  int32_t n_drafted_ = 0;
  int32_t n_accepted_ = 0;
  int32_t n_rounds_ = 0;
  int32_t rounds_since_probe_ = 0;
  std::vector<int32_t> drafted_pos_;   // rounds that drafted position j
  std::vector<int32_t> reached_pos_;   // ... and accepted every position before it
  std::vector<int32_t> accepted_pos_;  // rounds that accepted position j
};

}  // namespace voltserve

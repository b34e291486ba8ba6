// SpecState (see speculation.h).
#include "core/speculation.h"

#include <algorithm>

#include "voltserve/request.h"

namespace voltserve {

double SpecState::conditional(int32_t j) const {
  const bool known = j < static_cast<int32_t>(reached_pos_.size());
  const double reached = known ? reached_pos_[static_cast<size_t>(j)] : 0.0;
  const double accepted = known ? accepted_pos_[static_cast<size_t>(j)] : 0.0;
  return (accepted + 1.0) / (reached + 2.0);
}

int32_t SpecState::next_k(int32_t n_running) const {
  if (!enabled()) return 0;
  if (requested_ != kSpeculativeAuto) return std::min(requested_, max_k_);
  const double per_draft = kDraftCost + kVerifyCost * std::max(1, n_running);
  double expected = 1.0, survive = 1.0, best_rate = 1.0;
  int32_t best = 0;
  for (int32_t k = 1; k <= max_k_; ++k) {
    survive *= conditional(k - 1);
    expected += survive;
    const double rate = expected / (1.0 + per_draft * k);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  if (best == 0 && rounds_since_probe_ >= kProbeEvery) return 1;
  return best;
}

void SpecState::record(int32_t k, int32_t accepted) {
  if (k <= 0) {
    ++rounds_since_probe_;
    return;
  }
  rounds_since_probe_ = 0;
  ++n_rounds_;
  n_drafted_ += k;
  n_accepted_ += accepted;
  if (static_cast<int32_t>(drafted_pos_.size()) < k) {
    drafted_pos_.resize(static_cast<size_t>(k), 0);
    reached_pos_.resize(static_cast<size_t>(k), 0);
    accepted_pos_.resize(static_cast<size_t>(k), 0);
  }
  for (int32_t j = 0; j < k; ++j) {
    ++drafted_pos_[static_cast<size_t>(j)];
    if (j <= accepted) ++reached_pos_[static_cast<size_t>(j)];
    if (j < accepted) ++accepted_pos_[static_cast<size_t>(j)];
  }
}

bool SpecState::flat_near_full() const {
  if (n_rounds_ < kFlatMinRounds || n_drafted_ < kFlatMinDrafts) return false;
  for (size_t j = 0; j < drafted_pos_.size(); ++j) {
    if (drafted_pos_[j] == 0) continue;
    if (static_cast<double>(accepted_pos_[j]) < kFlatAcceptance * static_cast<double>(drafted_pos_[j])) return false;
  }
  return true;
}

}  // namespace voltserve

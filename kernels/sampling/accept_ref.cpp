// CPU reference of the speculative acceptance rule (see accept.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "sampling/accept.h"
#include "sampling/philox.h"

namespace voltserve::kernels::sampling {
namespace {

// The token a uniform u in [0, total) selects walking `dist` in its order, skipping `skip` (-1: none).
int32_t walk(const std::vector<std::pair<int32_t, double>>& dist, double u, int32_t skip) {
  double cum = 0.0;
  int32_t last = -1;
  for (const auto& [id, p] : dist) {
    if (id == skip) continue;
    cum += p;
    last = id;
    if (u < cum) return id;
  }
  return last;  // u in the rounding slack of the last bucket
}

double mass_without(const std::vector<std::pair<int32_t, double>>& dist, int32_t skip) {
  double total = 0.0;
  for (const auto& [id, p] : dist) total += id == skip ? 0.0 : p;
  return total;
}

void count_generated(const PenaltyState& s, int32_t slot, int32_t id) {
  if (s.counts == nullptr || slot < 0 || slot >= s.n_slots || id < 0 || id >= s.vocab) return;
  ++s.counts[static_cast<size_t>(slot) * static_cast<size_t>(s.vocab) + static_cast<size_t>(id)];
}

}  // namespace

int32_t accept_drafts_ref(const AcceptArgs& a) {
  const int32_t k = std::max(a.n_drafts, 0);
  const int32_t n = a.n_vocab_real;
  for (int32_t j = 0; j <= k; ++j) {
    if (a.out.token) a.out.token[j] = -1;
    if (a.out.status) a.out.status[j] = kRowNotReached;
  }
  std::vector<float> processed;
  std::vector<std::pair<int32_t, double>> dist;
  for (int32_t j = 0; j <= k; ++j) {
    const RowParams& row = a.rows[j];
    const float* logits = a.logits + static_cast<int64_t>(j) * a.logits_stride;
    if (j > 0) count_generated(a.penalties, row.slot, a.drafts[j - 1]);  // d_j was accepted
    a.out.status[j] = kRowOk;
    bool nan = false;
    for (int32_t i = 0; i < n && !nan; ++i) {
      if (std::isnan(logits[i])) {
        a.out.status[j] = kNanLogits;
        if (a.out.nan_index) a.out.nan_index[j] = i;
        nan = true;
      }
    }
    if (nan) return j;
    process_logits_ref(logits, n, row, a.bias_ids, a.bias_values, a.penalties, processed);
    final_distribution_ref(processed, row, dist);
    if (dist.empty()) {
      a.out.status[j] = kNothingSamplable;
      return j;
    }
    const bool greedy = row.temperature <= 0.0f;
    int32_t chosen = -1;
    bool accepted = false;
    if (j < k) {
      const int32_t d = a.drafts[j];
      if (greedy) {
        accepted = dist.front().first == d || a.rule == AcceptRule::kAlwaysAccept;
        chosen = accepted ? d : dist.front().first;
      } else {
        double p_d = 0.0;
        for (const auto& [id, p] : dist) p_d += id == d ? p : 0.0;
        const double u = uniform_draw(row.seed, row.draw_index, kStreamAccept);
        accepted = u < p_d || a.rule == AcceptRule::kAlwaysAccept;
        if (accepted) {
          chosen = d;
        } else {
          const double v = uniform_draw(row.seed, row.draw_index, kStreamResample);
          const int32_t skip = a.rule == AcceptRule::kResampleKeepingDraft ? -1 : d;
          chosen = walk(dist, v * mass_without(dist, skip), skip);
        }
      }
    } else if (greedy) {
      chosen = dist.front().first;  // the bonus token
    } else {
      chosen = walk(dist, uniform_draw(row.seed, row.draw_index, kStreamSample), -1);
    }
    a.out.token[j] = chosen;
    if ((row.flags & kLogprobs) != 0 && a.out.logprob != nullptr) {
      log_softmax_top_ref(logits, n, chosen, std::clamp(row.n_top_logprobs, 0, kMaxTopLogprobs), &a.out.logprob[j],
                          a.out.top_ids + static_cast<int64_t>(j) * kMaxTopLogprobs,
                          a.out.top_logprobs + static_cast<int64_t>(j) * kMaxTopLogprobs);
    }
    if (!accepted) return j;
  }
  return k;
}

int32_t accept_judged_rows(int32_t n_drafts, const int32_t* drafts, int32_t* token, int32_t* status) {
  const int32_t k = std::max(n_drafts, 0);
  int32_t end = k;  // the row that emits the run's last token
  for (int32_t j = 0; j < k; ++j) {
    if (status[j] != kRowOk || token[j] != drafts[j]) {
      end = j;
      break;
    }
  }
  for (int32_t j = end + 1; j <= k; ++j) {
    token[j] = -1;
    status[j] = kRowNotReached;
  }
  return end;
}

}  // namespace voltserve::kernels::sampling

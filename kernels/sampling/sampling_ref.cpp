// CPU reference of kernels/sampling (see sampling.h for the order of operations, the draw and the NaN policy).
// This is the CPU backend's sampler.
#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/philox.h"
#include "sampling/sampling.h"

namespace voltserve::kernels::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending value, then ascending id: the one total order every tie-break here follows.
struct ByValueThenId {
  bool operator()(const std::pair<int32_t, double>& a, const std::pair<int32_t, double>& b) const {
    if (a.second != b.second) return a.second > b.second;
    return a.first < b.first;
  }
};

bool in_prompt(const PenaltyState& s, int32_t slot, int32_t id) {
  const uint32_t* bits = s.prompt_bits + static_cast<size_t>(slot) * static_cast<size_t>(s.words());
  return (bits[id / 32] >> (id % 32)) & 1u;
}

void apply_bias_and_penalties(int32_t n, const RowParams& row, const int32_t* bias_ids, const float* bias_values,
                              const PenaltyState& penalties, std::vector<float>& out);

void sample_row(const RefArgs& a, int32_t r) {
  const RowParams& row = a.rows[r];
  const float* logits = a.logits + static_cast<int64_t>(r) * a.logits_stride;
  const int32_t n = a.n_vocab_real;
  if (a.out.token) a.out.token[r] = -1;
  if (a.out.status) a.out.status[r] = kRowOk;
  if ((row.flags & kSample) == 0) return;
  for (int32_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) {
      if (a.out.status) a.out.status[r] = kNanLogits;
      if (a.out.nan_index) a.out.nan_index[r] = i;
      return;
    }
  }
  std::vector<float> processed;
  std::vector<std::pair<int32_t, double>> dist;
  process_logits_ref(logits, n, row, a.bias_ids, a.bias_values, a.penalties, processed,
                     row_mask(a.masks, a.mask_words, row.mask_row));
  final_distribution_ref(processed, row, dist);
  int32_t chosen = -1;
  if (!dist.empty()) {
    if (row.temperature <= 0.0f) {
      chosen = dist.front().first;
    } else {
      const double u = uniform_draw(row.seed, row.draw_index, kStreamSample);
      double cum = 0.0;
      chosen = dist.back().first;  // u in the rounding slack of the last bucket
      for (const auto& [id, p] : dist) {
        cum += p;
        if (u < cum) {
          chosen = id;
          break;
        }
      }
    }
  }
  if (chosen < 0) {
    if (a.out.status) a.out.status[r] = kNothingSamplable;
    return;
  }
  a.out.token[r] = chosen;
  if ((row.flags & kLogprobs) != 0) {
    log_softmax_top_ref(logits, n, chosen, std::clamp(row.n_top_logprobs, 0, kMaxTopLogprobs), &a.out.logprob[r],
                        a.out.top_ids + static_cast<int64_t>(r) * kMaxTopLogprobs,
                        a.out.top_logprobs + static_cast<int64_t>(r) * kMaxTopLogprobs);
  }
}

}  // namespace

void process_logits_ref(const float* logits, int32_t n, const RowParams& row, const int32_t* bias_ids,
                        const float* bias_values, const PenaltyState& penalties, std::vector<float>& out,
                        const uint32_t* mask) {
  out.assign(logits, logits + n);
  for (float& x : out) {
    if (std::isnan(x)) x = kNegInf;
  }
  // Masked ids become -inf after the bias and penalties (a bias must not revive them).
  apply_bias_and_penalties(n, row, bias_ids, bias_values, penalties, out);
  if (mask == nullptr) return;
  for (size_t id = 0; id < out.size(); ++id) {
    if (((mask[id / 32] >> (id % 32)) & 1u) == 0) out[id] = kNegInf;
  }
}

namespace {

void apply_bias_and_penalties(int32_t n, const RowParams& row, const int32_t* bias_ids, const float* bias_values,
                              const PenaltyState& penalties, std::vector<float>& out) {
  for (int32_t b = 0; b < row.bias_count; ++b) {
    const int32_t id = bias_ids[row.bias_offset + b];
    if (id >= 0 && id < n) out[static_cast<size_t>(id)] += bias_values[row.bias_offset + b];
  }
  // A slot outside the state is no state (as update / reset treat it), never a read past the arrays.
  if (row.slot < 0 || row.slot >= penalties.n_slots || penalties.counts == nullptr) return;
  const int32_t* counts = penalties.counts + static_cast<size_t>(row.slot) * static_cast<size_t>(penalties.vocab);
  const int32_t limit = std::min(n, penalties.vocab);
  if (row.repetition_penalty != 1.0f && row.repetition_penalty > 0.0f) {
    const float p = row.repetition_penalty;
    for (int32_t id = 0; id < limit; ++id) {
      if (counts[id] > 0 || in_prompt(penalties, row.slot, id)) {
        float& x = out[static_cast<size_t>(id)];
        x = x > 0.0f ? x / p : x * p;
      }
    }
  }
  if (row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f) {
    for (int32_t id = 0; id < limit; ++id) {
      if (counts[id] > 0) {
        out[static_cast<size_t>(id)] -= row.presence_penalty + row.frequency_penalty * static_cast<float>(counts[id]);
      }
    }
  }
}

}  // namespace

void final_distribution_ref(const std::vector<float>& processed, const RowParams& row,
                            std::vector<std::pair<int32_t, double>>& out) {
  out.clear();
  const auto n = static_cast<int32_t>(processed.size());
  float max_v = kNegInf;
  int32_t arg = -1;
  for (int32_t i = 0; i < n; ++i) {
    if (processed[static_cast<size_t>(i)] > max_v) {
      max_v = processed[static_cast<size_t>(i)];
      arg = i;
    }
  }
  if (arg < 0) return;  // nothing above -inf
  if (row.temperature <= 0.0f) {
    out.emplace_back(arg, 1.0);
    return;
  }
  const bool has_pos_inf = std::isinf(max_v);
  const double inv_t = 1.0 / static_cast<double>(row.temperature);
  const double m = static_cast<double>(max_v) * inv_t;
  for (int32_t i = 0; i < n; ++i) {
    const float x = processed[static_cast<size_t>(i)];
    if (x == kNegInf) continue;
    if (has_pos_inf) {
      if (std::isinf(x)) out.emplace_back(i, 1.0);
      continue;
    }
    out.emplace_back(i, std::exp(static_cast<double>(x) * inv_t - m));
  }
  const bool top_k_on = row.top_k > 0 && static_cast<size_t>(row.top_k) < out.size();
  const bool top_p_on = row.top_p < 1.0f;
  const bool min_p_on = row.min_p > 0.0f;
  if (!top_k_on && !top_p_on && !min_p_on) {
    double total = 0.0;
    for (const auto& e : out) total += e.second;
    for (auto& e : out) e.second /= total;
    return;
  }
  if (top_k_on) {
    std::nth_element(out.begin(), out.begin() + row.top_k, out.end(), ByValueThenId{});
    out.resize(static_cast<size_t>(row.top_k));
  }
  std::sort(out.begin(), out.end(), ByValueThenId{});
  if (top_p_on) {
    double total = 0.0;
    for (const auto& e : out) total += e.second;
    const double limit = static_cast<double>(row.top_p) * total;
    double cum = 0.0;
    size_t keep = 0;
    while (keep < out.size() && (keep == 0 || cum < limit)) cum += out[keep++].second;
    out.resize(keep);
  }
  if (min_p_on) {
    const double threshold = static_cast<double>(row.min_p) * out.front().second;
    size_t keep = 1;
    while (keep < out.size() && out[keep].second >= threshold) ++keep;
    out.resize(keep);
  }
  double total = 0.0;
  for (const auto& e : out) total += e.second;
  for (auto& e : out) e.second /= total;
}

void log_softmax_top_ref(const float* logits, int32_t n, int32_t chosen, int32_t n_top, float* chosen_logprob,
                         int32_t* top_ids, float* top_logprobs) {
  auto value = [&](int32_t i) { return std::isnan(logits[i]) ? kNegInf : logits[i]; };
  float max_v = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_v = std::max(max_v, value(i));
  double lse = static_cast<double>(kNegInf);
  if (std::isfinite(max_v)) {
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(value(i)) - max_v);
    lse = static_cast<double>(max_v) + std::log(sum);
  }
  auto logprob = [&](int32_t i) -> float {
    if (!std::isfinite(lse) || value(i) == kNegInf) return kNegInf;
    return static_cast<float>(static_cast<double>(value(i)) - lse);
  };
  *chosen_logprob = (chosen >= 0 && chosen < n) ? logprob(chosen) : kNegInf;
  const int32_t k = std::clamp(n_top, 0, n);
  if (k == 0) return;
  std::vector<std::pair<int32_t, double>> order;
  order.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order.emplace_back(i, static_cast<double>(value(i)));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), ByValueThenId{});
  for (int32_t i = 0; i < k; ++i) {
    top_ids[i] = order[static_cast<size_t>(i)].first;
    top_logprobs[i] = logprob(order[static_cast<size_t>(i)].first);
  }
}

void sample_ref(const RefArgs& a) {
  run_parallel(a.parallel, a.n_rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) sample_row(a, static_cast<int32_t>(r));
  });
}

void reset_penalties_ref(const PenaltyState& s, int32_t slot) {
  if (s.counts == nullptr || slot < 0 || slot >= s.n_slots) return;
  std::fill_n(s.counts + static_cast<size_t>(slot) * static_cast<size_t>(s.vocab), s.vocab, 0);
  std::fill_n(s.prompt_bits + static_cast<size_t>(slot) * static_cast<size_t>(s.words()), s.words(), 0u);
}

void update_penalties_ref(const PenaltyState& s, const int32_t* tokens, const SeqDesc* seqs, int32_t n_seqs) {
  if (s.counts == nullptr) return;
  for (int32_t i = 0; i < n_seqs; ++i) {
    const SeqDesc& q = seqs[i];
    if (q.slot < 0 || q.slot >= s.n_slots) continue;
    for (int32_t t = 0; t < q.n_tokens - std::max(q.n_draft, 0); ++t) {
      const int32_t id = tokens[q.row0 + t];
      if (id < 0 || id >= s.vocab) continue;
      if (q.n_past + t < q.n_prompt) {
        s.prompt_bits[static_cast<size_t>(q.slot) * static_cast<size_t>(s.words()) + static_cast<size_t>(id / 32)] |=
            1u << (id % 32);
      } else {
        ++s.counts[static_cast<size_t>(q.slot) * static_cast<size_t>(s.vocab) + static_cast<size_t>(id)];
      }
    }
  }
}

}  // namespace voltserve::kernels::sampling

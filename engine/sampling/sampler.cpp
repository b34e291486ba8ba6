// The reference sampler (see sampler.h for the order of operations and the NaN policy).
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace voltserve {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Descending value, then ascending id: the one total order every tie-break in this file follows.
struct ByValueThenId {
  bool operator()(const std::pair<int32_t, double>& a, const std::pair<int32_t, double>& b) const {
    if (a.second != b.second) return a.second > b.second;
    return a.first < b.first;
  }
};

// Calls fn(id, count) for each distinct id in `ids` that lies in [0, n).
template <class Fn>
void for_each_distinct(std::vector<int32_t>& ids, int32_t n, Fn&& fn) {
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    if (ids[i] >= 0 && ids[i] < n) fn(ids[i], static_cast<int32_t>(j - i));
    i = j;
  }
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, uint64_t seed, int32_t n_vocab_real)
    : params_(params), n_vocab_real_(n_vocab_real), rng_(seed) {}

void Sampler::process_logits(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                             std::span<const int32_t> generated_ids, std::vector<float>& out) const {
  const int32_t n = n_vocab_real_ > 0 ? std::min<int32_t>(n_vocab_real_, static_cast<int32_t>(logits.size()))
                                      : static_cast<int32_t>(logits.size());
  out.assign(logits.begin(), logits.begin() + n);
  for (float& x : out) {
    if (std::isnan(x)) x = kNegInf;
  }
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id >= 0 && id < n) out[id] += bias;
  }
  if (params_.repetition_penalty != 1.0f && params_.repetition_penalty > 0.0f) {
    std::vector<int32_t> seen(prompt_ids.begin(), prompt_ids.end());
    seen.insert(seen.end(), generated_ids.begin(), generated_ids.end());
    const float p = params_.repetition_penalty;
    for_each_distinct(seen, n, [&](int32_t id, int32_t) { out[id] = out[id] > 0.0f ? out[id] / p : out[id] * p; });
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    std::vector<int32_t> gen(generated_ids.begin(), generated_ids.end());
    for_each_distinct(gen, n, [&](int32_t id, int32_t count) {
      out[id] -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
    });
  }
}

void Sampler::final_distribution(std::span<const float> processed,
                                 std::vector<std::pair<int32_t, double>>& out) const {
  out.clear();
  const int32_t n = static_cast<int32_t>(processed.size());
  float max_v = kNegInf;
  int32_t arg = -1;
  for (int32_t i = 0; i < n; ++i) {
    if (processed[i] > max_v) {
      max_v = processed[i];
      arg = i;
    }
  }
  if (arg < 0) return;  // nothing above -inf
  if (params_.is_greedy()) {
    out.emplace_back(arg, 1.0);
    return;
  }
  // +inf logits (only reachable through a huge logit_bias) share the mass equally.
  const bool has_pos_inf = std::isinf(max_v);
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  const double m = static_cast<double>(max_v) * inv_t;
  for (int32_t i = 0; i < n; ++i) {
    const float x = processed[i];
    if (x == kNegInf) continue;
    if (has_pos_inf) {
      if (std::isinf(x)) out.emplace_back(i, 1.0);
      continue;
    }
    out.emplace_back(i, std::exp(static_cast<double>(x) * inv_t - m));
  }
  const bool top_k_on = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < out.size();
  const bool top_p_on = params_.top_p < 1.0f;
  const bool min_p_on = params_.min_p > 0.0f;
  if (!top_k_on && !top_p_on && !min_p_on) {
    // No filter: keep id order (sorting 250k rows per token would buy nothing).
    double total = 0.0;
    for (const auto& e : out) total += e.second;
    for (auto& e : out) e.second /= total;
    return;
  }
  if (top_k_on) {
    std::nth_element(out.begin(), out.begin() + params_.top_k, out.end(), ByValueThenId{});
    out.resize(static_cast<size_t>(params_.top_k));
  }
  std::sort(out.begin(), out.end(), ByValueThenId{});
  if (top_p_on) {
    double total = 0.0;
    for (const auto& e : out) total += e.second;
    const double limit = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    size_t keep = 0;
    while (keep < out.size() && (keep == 0 || cum < limit)) cum += out[keep++].second;
    out.resize(keep);
  }
  if (min_p_on) {
    const double threshold = static_cast<double>(params_.min_p) * out.front().second;
    size_t keep = 1;
    while (keep < out.size() && out[keep].second >= threshold) ++keep;
    out.resize(keep);
  }
  double total = 0.0;
  for (const auto& e : out) total += e.second;
  for (auto& e : out) e.second /= total;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                        std::span<const int32_t> generated_ids) {
  process_logits(logits, prompt_ids, generated_ids, work_);
  final_distribution(work_, dist_);
  if (params_.is_greedy()) return dist_.empty() ? -1 : dist_.front().first;
  // One draw per sampled token, whatever the distribution, so the stream of random numbers depends only on
  // the number of tokens sampled.
  const double u = rng_.next_double();
  if (dist_.empty()) return -1;
  double cum = 0.0;
  for (const auto& [id, p] : dist_) {
    cum += p;
    if (u < cum) return id;
  }
  return dist_.back().first;  // u landed in the rounding slack of the last bucket
}

Result<int32_t> Sampler::try_sample(std::span<const float> logits, std::span<const int32_t> prompt_ids,
                                    std::span<const int32_t> generated_ids) {
  const size_t n = n_vocab_real_ > 0 ? std::min<size_t>(static_cast<size_t>(n_vocab_real_), logits.size())
                                     : logits.size();
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(logits[i])) {
      return internal_error("logits contain NaN (first at row " + std::to_string(i) + " of " +
                            std::to_string(logits.size()) + ")");
    }
  }
  const int32_t id = sample(logits, prompt_ids, generated_ids);
  if (id < 0) {
    return internal_error("no samplable token: every one of the " + std::to_string(n) +
                          " real logits is -inf after logit_bias and penalties");
  }
  return id;
}

void log_softmax_top(std::span<const float> logits, int32_t chosen, int32_t n_top, TokenLogprob& chosen_out,
                     std::vector<TokenLogprob>& top_out) {
  top_out.clear();
  const int32_t n = static_cast<int32_t>(logits.size());
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
  chosen_out.token_id = chosen;
  chosen_out.logprob = (chosen >= 0 && chosen < n) ? logprob(chosen) : kNegInf;
  const int32_t k = std::clamp(n_top, 0, n);
  if (k == 0) return;
  std::vector<std::pair<int32_t, double>> order;
  order.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) order.emplace_back(i, static_cast<double>(value(i)));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), ByValueThenId{});
  for (int32_t i = 0; i < k; ++i) top_out.push_back({order[static_cast<size_t>(i)].first, logprob(order[static_cast<size_t>(i)].first)});
}

}  // namespace voltserve

// Pearson chi-square statistics for the speculative-decoding distribution tests: goodness of fit against exact
// probabilities and homogeneity of two samples, with sparse categories merged (expected < 5) so the statistic's
// chi-square approximation holds, and the Wilson-Hilferty normal score of the result (z > 4: p < 3.2e-5).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace voltserve::testing {

struct ChiSquare {
  double statistic = 0.0;
  int32_t df = 0;
  // Wilson-Hilferty: (X/df)^(1/3) is close to normal with mean 1 - 2/(9 df) and variance 2/(9 df).
  double z() const {
    if (df <= 0) return 0.0;
    const double v = 2.0 / (9.0 * df);
    return (std::cbrt(statistic / df) - (1.0 - v)) / std::sqrt(v);
  }
};

// counts[i] observed draws of category i, probs[i] its exact probability (sum 1).
inline ChiSquare chi_square_fit(const std::vector<double>& counts, const std::vector<double>& probs) {
  double n = 0.0;
  for (double c : counts) n += c;
  ChiSquare r;
  double pool_obs = 0.0, pool_exp = 0.0;
  int32_t cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    if (e < 5.0) {
      pool_obs += counts[i];
      pool_exp += e;
      continue;
    }
    r.statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (pool_exp > 0.0) {
    // An observed draw in a category of probability 0 is an outright failure.
    r.statistic += pool_exp >= 1e-12 ? (pool_obs - pool_exp) * (pool_obs - pool_exp) / pool_exp : pool_obs * 1e12;
    ++cells;
  }
  r.df = cells - 1;
  return r;
}

// Two samples over the same categories (any ordered key): are they draws of one distribution?
template <class Key>
ChiSquare chi_square_two_sample(const std::map<Key, int64_t>& a, const std::map<Key, int64_t>& b) {
  double na = 0.0, nb = 0.0;
  std::map<Key, std::pair<double, double>> joint;
  for (const auto& [k, c] : a) {
    joint[k].first += static_cast<double>(c);
    na += static_cast<double>(c);
  }
  for (const auto& [k, c] : b) {
    joint[k].second += static_cast<double>(c);
    nb += static_cast<double>(c);
  }
  ChiSquare r;
  double pa = 0.0, pb = 0.0;
  int32_t cells = 0;
  auto add = [&](double oa, double ob) {
    const double total = oa + ob, ea = total * na / (na + nb), eb = total * nb / (na + nb);
    r.statistic += (oa - ea) * (oa - ea) / ea + (ob - eb) * (ob - eb) / eb;
    ++cells;
  };
  for (const auto& [k, c] : joint) {
    if ((c.first + c.second) * std::min(na, nb) / (na + nb) < 5.0) {
      pa += c.first;
      pb += c.second;
      continue;
    }
    add(c.first, c.second);
  }
  if (pa + pb > 0.0) add(pa, pb);
  r.df = cells - 1;
  return r;
}

}  // namespace voltserve::testing

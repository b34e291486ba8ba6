// The reference sampler: every transform against a direct recomputation, distributions by counting seeded draws
// (chi-square with generous bounds), reproducibility, and the edge cases (NaN, -inf, padding rows, tiny top_p).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include "sampling/rng.h"
#include "sampling/sampler.h"

using namespace voltserve;
using Catch::Approx;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const std::vector<int32_t> kNone;

std::vector<double> softmax(const std::vector<float>& x, double t = 1.0) {
  double m = -1e300;
  for (float v : x) m = std::max(m, v / t);
  std::vector<double> p(x.size());
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += (p[i] = std::exp(x[i] / t - m));
  for (double& v : p) v /= sum;
  return p;
}

std::vector<float> random_logits(int n, uint64_t seed) {
  Xoshiro256 rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = static_cast<float>(rng.next_double() * 8.0 - 4.0);
  return x;
}

// Draws n tokens and returns the chi-square statistic against `expected` (probabilities per id; ids with
// expected 0 must never be drawn, checked here).
double chi_square(Sampler& s, const std::vector<float>& logits, const std::vector<double>& expected, int n) {
  std::vector<int> counts(expected.size(), 0);
  for (int i = 0; i < n; ++i) {
    const int32_t id = s.sample(logits, kNone, kNone);
    REQUIRE(id >= 0);
    REQUIRE(static_cast<size_t>(id) < expected.size());
    REQUIRE(expected[static_cast<size_t>(id)] > 0.0);
    ++counts[static_cast<size_t>(id)];
  }
  double chi = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] <= 0.0) continue;
    const double e = expected[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

SamplingParams with_temperature(float t) {
  SamplingParams p;
  p.temperature = t;
  return p;
}

}  // namespace

TEST_CASE("greedy: argmax, ties to the lowest id, no random draw", "[unit]") {
  Sampler s(with_temperature(0.0f), 1);
  CHECK(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.0f}, kNone, kNone) == 1);
  CHECK(s.sample(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}, kNone, kNone) == 1);
  CHECK(s.sample(std::vector<float>{-kInf, -kInf, -2.0f}, kNone, kNone) == 2);
  // Many greedy draws never move the generator: a fresh sampler with the same seed agrees afterwards.
  SamplingParams hot = with_temperature(1.0f);
  Sampler a(hot, 99), b(hot, 99);
  Sampler g(with_temperature(0.0f), 99);
  for (int i = 0; i < 10; ++i) (void)g.sample(std::vector<float>{1.0f, 2.0f}, kNone, kNone);
  const auto x = random_logits(50, 3);
  for (int i = 0; i < 20; ++i) CHECK(a.sample(x, kNone, kNone) == b.sample(x, kNone, kNone));
}

TEST_CASE("temperature: draws follow softmax(logits / T)", "[unit]") {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    Sampler s(with_temperature(t), 42);
    // 4 degrees of freedom: the 99.9% quantile is 18.5; 30 leaves room for any seed.
    CHECK(chi_square(s, x, softmax(x, t), 40000) < 30.0);
  }
  // And the sampler's own distribution equals the direct computation.
  Sampler s(with_temperature(0.7f), 1);
  std::vector<std::pair<int32_t, double>> dist;
  s.final_distribution(x, dist);
  const auto p = softmax(x, 0.7);
  REQUIRE(dist.size() == x.size());
  for (const auto& [id, prob] : dist) CHECK(prob == Approx(p[static_cast<size_t>(id)]).epsilon(1e-6));  // T is a float
}

TEST_CASE("top-k keeps exactly the k most likely, renormalised", "[unit]") {
  const auto x = random_logits(40, 11);
  SamplingParams p = with_temperature(1.0f);
  p.top_k = 5;
  Sampler s(p, 5);
  std::vector<int32_t> order(40);
  for (int i = 0; i < 40; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[static_cast<size_t>(a)] > x[static_cast<size_t>(b)]; });
  std::vector<double> expected(40, 0.0);
  double sum = 0.0;
  for (int i = 0; i < 5; ++i) sum += std::exp(static_cast<double>(x[static_cast<size_t>(order[static_cast<size_t>(i)])]));
  for (int i = 0; i < 5; ++i) {
    const auto id = static_cast<size_t>(order[static_cast<size_t>(i)]);
    expected[id] = std::exp(static_cast<double>(x[id])) / sum;
  }
  CHECK(chi_square(s, x, expected, 40000) < 30.0);
}

TEST_CASE("top-k 1 is greedy", "[unit]") {
  SamplingParams p = with_temperature(1.5f);
  p.top_k = 1;
  Sampler s(p, 8);
  Sampler g(with_temperature(0.0f), 8);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const auto x = random_logits(100, seed);
    CHECK(s.sample(x, kNone, kNone) == g.sample(x, kNone, kNone));
  }
}

TEST_CASE("top-p keeps the smallest prefix whose mass reaches top_p", "[unit]") {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (by construction from logs).
  const std::vector<float> x = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingParams p = with_temperature(1.0f);
  std::vector<std::pair<int32_t, double>> dist;
  p.top_p = 0.75f;  // 0.5 < 0.75, 0.5 + 0.3 >= 0.75: keep {1, 3}
  Sampler(p, 0).final_distribution(x, dist);
  REQUIRE(dist.size() == 2);
  CHECK(dist[0].first == 1);
  CHECK(dist[0].second == Approx(0.5 / 0.8));
  CHECK(dist[1].first == 3);
  p.top_p = 0.9f;  // needs the 0.15 too
  Sampler(p, 0).final_distribution(x, dist);
  CHECK(dist.size() == 3);
  // Right at the boundary of 0.5 + 0.3: just below keeps two, just above needs a third.
  p.top_p = 0.799f;
  Sampler(p, 0).final_distribution(x, dist);
  CHECK(dist.size() == 2);
  p.top_p = 0.801f;
  Sampler(p, 0).final_distribution(x, dist);
  CHECK(dist.size() == 3);
  p.top_p = 0.499f;
  Sampler(p, 0).final_distribution(x, dist);
  CHECK(dist.size() == 1);
  p.top_p = 1e-6f;  // tiny: only the argmax survives, sampling is then deterministic
  Sampler tiny(p, 0);
  for (int i = 0; i < 100; ++i) CHECK(tiny.sample(x, kNone, kNone) == 1);
  // Counting with top_p = 0.75: ids 1 and 3 in ratio 5:3.
  p.top_p = 0.75f;
  Sampler s(p, 77);
  CHECK(chi_square(s, x, {0.0, 0.625, 0.0, 0.375}, 20000) < 20.0);
}

TEST_CASE("min-p drops tokens below min_p times the top probability", "[unit]") {
  const std::vector<float> x = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingParams p = with_temperature(1.0f);
  p.min_p = 0.25f;  // threshold 0.125: keeps 0.5, 0.3, 0.15
  std::vector<std::pair<int32_t, double>> dist;
  Sampler(p, 0).final_distribution(x, dist);
  REQUIRE(dist.size() == 3);
  CHECK(dist[2].first == 0);
  CHECK(dist[2].second == Approx(0.15 / 0.95));
  p.min_p = 0.7f;  // threshold 0.35: only the top one
  Sampler(p, 0).final_distribution(x, dist);
  REQUIRE(dist.size() == 1);
  CHECK(dist[0].first == 1);
}

TEST_CASE("presence and frequency penalties (OpenAI) over generated tokens only", "[unit]") {
  const auto x = random_logits(20, 4);
  SamplingParams p = with_temperature(1.0f);
  p.presence_penalty = 0.7f;
  p.frequency_penalty = 0.3f;
  const std::vector<int32_t> prompt = {2, 2, 9};
  const std::vector<int32_t> generated = {5, 5, 5, 7, 2, 25 /*outside the vocabulary: ignored*/};
  std::vector<float> out;
  Sampler(p, 0).process_logits(x, prompt, generated, out);
  std::vector<float> want = x;
  std::map<int32_t, int> counts;
  for (int32_t id : generated) ++counts[id];
  for (const auto& [id, c] : counts) {
    if (id < 20) want[static_cast<size_t>(id)] -= 0.7f * (c > 0 ? 1.0f : 0.0f) + 0.3f * static_cast<float>(c);
  }
  REQUIRE(out.size() == want.size());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]));
  CHECK(out[9] == x[9]);  // in the prompt only: untouched
}

TEST_CASE("repetition penalty (HF) over prompt and generated, once per distinct id", "[unit]") {
  std::vector<float> x = {2.0f, -2.0f, 1.0f, -1.0f, 0.5f};
  SamplingParams p = with_temperature(1.0f);
  p.repetition_penalty = 2.0f;
  std::vector<float> out;
  Sampler(p, 0).process_logits(x, std::vector<int32_t>{0, 0, 1}, std::vector<int32_t>{3, 3, 3}, out);
  CHECK(out[0] == 1.0f);   // positive: divided (once, although it appears twice)
  CHECK(out[1] == -4.0f);  // negative: multiplied
  CHECK(out[2] == 1.0f);   // absent: untouched
  CHECK(out[3] == -2.0f);
  CHECK(out[4] == 0.5f);
}

TEST_CASE("logit_bias is added before everything else", "[unit]") {
  std::vector<float> x = {0.0f, 0.0f, 0.0f};
  SamplingParams p = with_temperature(0.0f);
  p.logit_bias = {{2, 5.0f}, {0, -100.0f}, {7, 100.0f} /*out of range: ignored*/};
  Sampler s(p, 0);
  CHECK(s.sample(x, kNone, kNone) == 2);
  std::vector<float> out;
  s.process_logits(x, kNone, kNone, out);
  CHECK(out == std::vector<float>{-100.0f, 0.0f, 5.0f});
  // A bias of -inf bans a token even from greedy.
  p.logit_bias = {{1, -kInf}};
  CHECK(Sampler(p, 0).sample(std::vector<float>{0.0f, 9.0f, 1.0f}, kNone, kNone) == 2);
}

TEST_CASE("padding rows (ids >= n_vocab_real) are never sampled", "[unit]") {
  std::vector<float> x = random_logits(30, 6);
  for (size_t i = 24; i < 30; ++i) x[i] = 100.0f;
  Sampler g(with_temperature(0.0f), 0, 24);
  const int32_t greedy = g.sample(x, kNone, kNone);
  CHECK(greedy < 24);
  CHECK(greedy == static_cast<int32_t>(std::max_element(x.begin(), x.begin() + 24) - x.begin()));
  Sampler s(with_temperature(2.0f), 3, 24);
  for (int i = 0; i < 2000; ++i) REQUIRE(s.sample(x, kNone, kNone) < 24);
}

TEST_CASE("same seed gives the same tokens, another seed other tokens", "[unit]") {
  SamplingParams p = with_temperature(1.0f);
  p.top_p = 0.95f;
  p.top_k = 40;
  const auto x = random_logits(200, 12);
  std::vector<int32_t> a, b, c;
  Sampler sa(p, 1234), sb(p, 1234), sc(p, 1235);
  for (int i = 0; i < 300; ++i) {
    a.push_back(sa.sample(x, kNone, kNone));
    b.push_back(sb.sample(x, kNone, kNone));
    c.push_back(sc.sample(x, kNone, kNone));
  }
  CHECK(a == b);
  CHECK(a != c);
}

TEST_CASE("edge cases: one finite logit, NaN, nothing samplable", "[unit]") {
  SamplingParams hot = with_temperature(1.0f);
  const std::vector<float> one = {-kInf, -kInf, 0.3f, -kInf};
  Sampler s(hot, 5);
  for (int i = 0; i < 50; ++i) CHECK(s.sample(one, kNone, kNone) == 2);

  // NaN: sample() treats it as -inf, try_sample() reports it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> with_nan = {nan, 1.0f, nan, 0.5f};
  Sampler g(with_temperature(0.0f), 0);
  CHECK(g.sample(with_nan, kNone, kNone) == 1);
  Result<int32_t> r = g.try_sample(with_nan, kNone, kNone);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInternal);
  CHECK(r.status().message().find("NaN") != std::string::npos);
  CHECK(r.status().message().find("row 0") != std::string::npos);
  // NaN only in a padding row is not an error (those rows are never looked at).
  CHECK(Sampler(with_temperature(0.0f), 0, 3).try_sample(std::vector<float>{0.0f, 1.0f, 0.5f, nan}, kNone, kNone).value() == 1);

  const std::vector<float> none = {-kInf, nan, -kInf};
  CHECK(Sampler(hot, 0).sample(none, kNone, kNone) == -1);
  CHECK(Sampler(with_temperature(0.0f), 0).sample(none, kNone, kNone) == -1);
  Result<int32_t> e = Sampler(hot, 0).try_sample(std::vector<float>{-kInf, -kInf}, kNone, kNone);
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.status().message().find("-inf") != std::string::npos);
}

TEST_CASE("combined transforms: counting matches final_distribution", "[unit]") {
  const auto x = random_logits(30, 21);
  SamplingParams p = with_temperature(0.8f);
  p.top_k = 12;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.presence_penalty = 0.5f;
  p.repetition_penalty = 1.3f;
  const std::vector<int32_t> prompt = {1, 2, 3};
  const std::vector<int32_t> generated = {4, 4, 5};
  Sampler s(p, 31);
  std::vector<float> processed;
  s.process_logits(x, prompt, generated, processed);
  std::vector<std::pair<int32_t, double>> dist;
  s.final_distribution(processed, dist);
  REQUIRE(dist.size() >= 2);
  REQUIRE(dist.size() <= 12);
  std::vector<double> expected(30, 0.0);
  double total = 0.0;
  for (const auto& [id, prob] : dist) {
    expected[static_cast<size_t>(id)] = prob;
    total += prob;
  }
  CHECK(total == Approx(1.0));
  std::vector<int> counts(30, 0);
  constexpr int kN = 30000;
  for (int i = 0; i < kN; ++i) {
    const int32_t id = s.sample(x, prompt, generated);
    REQUIRE(expected[static_cast<size_t>(id)] > 0.0);
    ++counts[static_cast<size_t>(id)];
  }
  double chi = 0.0;
  for (size_t i = 0; i < 30; ++i) {
    if (expected[i] > 0.0) chi += (counts[i] - expected[i] * kN) * (counts[i] - expected[i] * kN) / (expected[i] * kN);
  }
  CHECK(chi < 45.0);  // at most 11 degrees of freedom: the 99.9% quantile is 31.3
}

TEST_CASE("log_softmax_top against a direct log-softmax", "[unit]") {
  const auto x = random_logits(50, 17);
  const auto p = softmax(x);
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  log_softmax_top(x, 7, 5, chosen, top);
  CHECK(chosen.token_id == 7);
  CHECK(chosen.logprob == Approx(std::log(p[7])).margin(1e-5));
  REQUIRE(top.size() == 5);
  std::vector<int32_t> order(50);
  for (int i = 0; i < 50; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  for (size_t i = 0; i < 5; ++i) {
    CHECK(top[i].token_id == order[i]);
    CHECK(top[i].logprob == Approx(std::log(p[static_cast<size_t>(order[i])])).margin(1e-5));
  }
  // Ties go to the lower id; n_top beyond the vocabulary is clamped; 0 gives no alternatives.
  log_softmax_top(std::vector<float>{1.0f, 2.0f, 2.0f}, 0, 10, chosen, top);
  REQUIRE(top.size() == 3);
  CHECK(top[0].token_id == 1);
  CHECK(top[1].token_id == 2);
  CHECK(std::exp(top[0].logprob) + std::exp(top[1].logprob) + std::exp(top[2].logprob) == Approx(1.0));
  log_softmax_top(x, 3, 0, chosen, top);
  CHECK(top.empty());
}

// The CPU sampler (kernels/sampling/sampling_ref.cpp): every transform against a direct recomputation, distributions
// by counting seeded draws (chi-square with generous bounds), the NaN / -inf / +inf edge cases, padding rows, the
// penalty state (update_penalties_ref / reset_penalties_ref), the row flags and batches, and Philox4x32-10 against the
// Random123 known-answer vectors (kat_vectors: "philox4x32 10 ...").
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <thread>
#include <vector>

#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include "kernels/sampling/philox.h"
#include "kernels/sampling/sampling.h"
#include "sampling_random.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::sampling;
using Catch::Approx;
using voltserve::test::SampleRng;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

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
  SampleRng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = static_cast<float>(rng.uniform() * 8.0 - 4.0);
  return x;
}

RowParams sampled(float t, uint64_t seed = 1) {
  RowParams p;
  p.flags = kSample;
  p.temperature = t;
  p.seed = seed;
  return p;
}

// Penalty state for a few slots, owned by the test.
struct Penalties {
  std::vector<int32_t> counts;
  std::vector<uint32_t> bits;
  PenaltyState s;
  Penalties(int32_t vocab, int32_t n_slots) {
    s.vocab = vocab;
    s.n_slots = n_slots;
    counts.assign(static_cast<size_t>(vocab) * static_cast<size_t>(n_slots), 0);
    bits.assign(static_cast<size_t>(s.words()) * static_cast<size_t>(n_slots), 0u);
    s.counts = counts.data();
    s.prompt_bits = bits.data();
  }
  // Feeds one sequence's tokens [0, n) at positions [0, n) in steps of `chunk` tokens, as the engine would.
  void feed(int32_t slot, const std::vector<int32_t>& tokens, int32_t n_prompt, int32_t chunk) {
    for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(chunk)) {
      const size_t n = std::min(tokens.size() - at, static_cast<size_t>(chunk));
      SeqDesc q;
      q.row0 = 0;
      q.n_tokens = static_cast<int32_t>(n);
      q.n_past = static_cast<int32_t>(at);
      q.slot = slot;
      q.n_prompt = n_prompt;
      update_penalties_ref(s, tokens.data() + at, &q, 1);
    }
  }
  int32_t count(int32_t slot, int32_t id) const { return counts[static_cast<size_t>(slot * s.vocab + id)]; }
  bool prompt(int32_t slot, int32_t id) const {
    return (bits[static_cast<size_t>(slot * s.words() + id / 32)] >> (id % 32)) & 1u;
  }
};

struct RowResult {
  int32_t token = -7;
  int32_t status = -7;
  int32_t nan_index = -7;
  float logprob = 0.0f;
  std::vector<int32_t> top_ids = std::vector<int32_t>(kMaxTopLogprobs, -7);
  std::vector<float> top_logprobs = std::vector<float>(kMaxTopLogprobs, 0.0f);
};

// One row through sample_ref: logits (all of them real unless n_real > 0), the row's parameters and optional
// logit_bias entries and penalty state.
RowResult run_row(const std::vector<float>& logits, const RowParams& row, int32_t n_real = 0,
                  const std::vector<int32_t>& bias_ids = {}, const std::vector<float>& bias_values = {},
                  const PenaltyState* pen = nullptr) {
  RowResult r;
  RowParams p = row;
  p.bias_offset = 0;
  p.bias_count = static_cast<int32_t>(bias_ids.size());
  RefArgs a;
  a.logits = logits.data();
  a.logits_stride = static_cast<int64_t>(logits.size());
  a.n_rows = 1;
  a.n_vocab_real = n_real > 0 ? n_real : static_cast<int32_t>(logits.size());
  a.rows = &p;
  a.bias_ids = bias_ids.data();
  a.bias_values = bias_values.data();
  if (pen != nullptr) a.penalties = *pen;
  a.out.token = &r.token;
  a.out.status = &r.status;
  a.out.nan_index = &r.nan_index;
  a.out.logprob = &r.logprob;
  a.out.top_ids = r.top_ids.data();
  a.out.top_logprobs = r.top_logprobs.data();
  sample_ref(a);
  return r;
}

int32_t token_of(const std::vector<float>& logits, const RowParams& row, int32_t n_real = 0) {
  const RowResult r = run_row(logits, row, n_real);
  REQUIRE(r.status == kRowOk);
  return r.token;
}

std::vector<std::pair<int32_t, double>> distribution(const std::vector<float>& logits, const RowParams& row) {
  std::vector<float> processed;
  process_logits_ref(logits.data(), static_cast<int32_t>(logits.size()), row, nullptr, nullptr, PenaltyState{},
                     processed);
  std::vector<std::pair<int32_t, double>> dist;
  final_distribution_ref(processed, row, dist);
  return dist;
}

// Draws n tokens (draw_index 0..n-1 of the row's seed) and returns the chi-square statistic against `expected`
// (probabilities per id; ids with expected 0 must never be drawn, checked here).
double chi_square(const std::vector<float>& logits, RowParams row, const std::vector<double>& expected, int n,
                  int32_t n_real = 0) {
  std::vector<int> counts(expected.size(), 0);
  for (int i = 0; i < n; ++i) {
    row.draw_index = static_cast<uint64_t>(i);
    const int32_t id = token_of(logits, row, n_real);
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

}  // namespace

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors", "[unit]") {
  // kat_vectors: "philox4x32 10 <ctr x4> <key x2>   <out x4>".
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 r = philox4x32_10(Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) CHECK(r.v[i] == k.out[i]);
  }
  CHECK(philox_mulhi(0xffffffffu, 0xffffffffu) == 0xfffffffeu);
}

TEST_CASE("uniform_draw: 0 <= u < 1 with 53 bits, a pure function of (seed, index, stream)", "[unit]") {
  double sum = 0.0, lo = 1.0, hi = 0.0;
  constexpr int kN = 200000;
  bool all_53_bit = true, any_odd = false;
  for (int i = 0; i < kN; ++i) {
    const double u = uniform_draw(0x1234567890abcdefull, static_cast<uint64_t>(i), kStreamSample);
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    const double scaled = u * 9007199254740992.0;  // 2^53: an integer when u has 53 bits
    all_53_bit &= scaled == std::floor(scaled);
    any_odd |= std::fmod(scaled, 2.0) == 1.0;  // the last of the 53 bits is used
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  CHECK(all_53_bit);
  CHECK(any_odd);
  CHECK(sum / kN == Approx(0.5).margin(0.005));
  CHECK(lo < 1e-4);
  CHECK(hi > 1.0 - 1e-4);
  // The same inputs give the same value; another index, stream, or either half of the seed gives another.
  const double u = uniform_draw(7, 3, kStreamSample);
  CHECK(u == uniform_draw(7, 3, kStreamSample));
  CHECK(u != uniform_draw(7, 4, kStreamSample));
  CHECK(u != uniform_draw(7, 3 + (uint64_t{1} << 32), kStreamSample));
  CHECK(u != uniform_draw(7, 3, kStreamAccept));
  CHECK(u != uniform_draw(7, 3, kStreamResample));
  CHECK(u != uniform_draw(8, 3, kStreamSample));
  CHECK(u != uniform_draw(7 + (uint64_t{1} << 32), 3, kStreamSample));
  // Draw 0 of seed 0 is built from the first two words of the all-zero known answer.
  const double u0 = static_cast<double>((uint64_t{0x6627e8d5u >> 5} << 26) | (0xe169c58du >> 6)) / 9007199254740992.0;
  CHECK(uniform_draw(0, 0, kStreamSample) == u0);
}

TEST_CASE("greedy: argmax, ties to the lowest id, no dependence on the seed", "[unit]") {
  CHECK(token_of({0.1f, 3.0f, -1.0f, 2.0f}, sampled(0.0f)) == 1);
  CHECK(token_of({1.0f, 5.0f, 5.0f, 5.0f}, sampled(0.0f)) == 1);
  CHECK(token_of({-kInf, -kInf, -2.0f}, sampled(0.0f)) == 2);
  CHECK(token_of({1.0f, kInf, 3.0f, kInf}, sampled(0.0f)) == 1);
  CHECK(token_of({1.0f, 2.0f}, sampled(-1.0f)) == 1);  // any temperature <= 0 is greedy
  const auto x = random_logits(500, 3);
  const int32_t want = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  for (uint64_t seed = 0; seed < 20; ++seed) {
    RowParams p = sampled(0.0f, seed);
    p.draw_index = seed * 977;
    CHECK(token_of(x, p) == want);
  }
  // The greedy "distribution" is the argmax with probability 1.
  const auto dist = distribution({0.5f, 2.0f, 2.0f}, sampled(0.0f));
  REQUIRE(dist.size() == 1);
  CHECK(dist[0].first == 1);
  CHECK(dist[0].second == 1.0);
}

TEST_CASE("temperature: draws follow softmax(logits / T), walked in ascending id order", "[unit]") {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 0.5f, -1.0f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    // 4 degrees of freedom: the 99.9% quantile is 18.5; 30 leaves room for any seed.
    CHECK(chi_square(x, sampled(t, 42), softmax(x, t), 40000) < 30.0);
  }
  // The distribution equals the direct computation, in ascending id order when no filter is on.
  const auto dist = distribution(x, sampled(0.7f));
  const auto p = softmax(x, 0.7);
  REQUIRE(dist.size() == x.size());
  for (size_t i = 0; i < dist.size(); ++i) {
    CHECK(dist[i].first == static_cast<int32_t>(i));
    CHECK(dist[i].second == Approx(p[i]).epsilon(1e-6));  // T is a float
  }
  // The draw walks that order: the first id whose cumulative probability exceeds u.
  RowParams row = sampled(0.7f, 99);
  for (uint64_t i = 0; i < 200; ++i) {
    row.draw_index = i;
    const double u = uniform_draw(row.seed, i, kStreamSample);
    double cum = 0.0;
    int32_t want = dist.back().first;
    for (const auto& [id, prob] : dist) {
      cum += prob;
      if (u < cum) {
        want = id;
        break;
      }
    }
    CHECK(token_of(x, row) == want);
  }
}

TEST_CASE("top-k keeps exactly the k most likely, renormalised, ties toward lower ids", "[unit]") {
  const auto x = random_logits(40, 11);
  RowParams p = sampled(1.0f, 5);
  p.top_k = 5;
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
  CHECK(chi_square(x, p, expected, 40000) < 30.0);
  // The kept list is sorted by descending probability.
  const auto dist = distribution(x, p);
  REQUIRE(dist.size() == 5);
  for (size_t i = 0; i < 5; ++i) CHECK(dist[i].first == order[i]);
  // Ties at the cut: of the equal logits at ids 1, 3, 4, 6, top-k 3 keeps the max (id 5) and ids 1 and 3.
  const std::vector<float> tied = {0.0f, 2.0f, -1.0f, 2.0f, 2.0f, 3.0f, 2.0f};
  p.top_k = 3;
  const auto td = distribution(tied, p);
  REQUIRE(td.size() == 3);
  CHECK(td[0].first == 5);
  CHECK(td[1].first == 1);
  CHECK(td[2].first == 3);
  // top_k at or beyond the number of candidates is off: the walk is in id order again.
  p.top_k = 7;
  const auto all = distribution(tied, p);
  REQUIRE(all.size() == 7);
  for (size_t i = 0; i < all.size(); ++i) CHECK(all[i].first == static_cast<int32_t>(i));
  // ... counting only the candidates above -inf.
  const std::vector<float> some = {-kInf, 1.0f, -kInf, 0.0f, 2.0f};
  p.top_k = 3;
  const auto sd = distribution(some, p);
  REQUIRE(sd.size() == 3);
  CHECK(sd[0].first == 1);
  CHECK(sd[1].first == 3);
  CHECK(sd[2].first == 4);
}

TEST_CASE("top-k 1 is greedy", "[unit]") {
  RowParams p = sampled(1.5f, 8);
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const auto x = random_logits(100, seed);
    p.draw_index = seed;
    CHECK(token_of(x, p) == token_of(x, sampled(0.0f)));
  }
}

TEST_CASE("top-p keeps the smallest prefix whose mass reaches top_p", "[unit]") {
  // Probabilities 0.5, 0.3, 0.15, 0.05 (by construction from logs).
  const std::vector<float> x = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  RowParams p = sampled(1.0f, 0);
  p.top_p = 0.75f;  // 0.5 < 0.75, 0.5 + 0.3 >= 0.75: keep {1, 3}
  auto dist = distribution(x, p);
  REQUIRE(dist.size() == 2);
  CHECK(dist[0].first == 1);
  CHECK(dist[0].second == Approx(0.5 / 0.8));
  CHECK(dist[1].first == 3);
  p.top_p = 0.9f;  // needs the 0.15 too
  CHECK(distribution(x, p).size() == 3);
  // Right at the boundary of 0.5 + 0.3: just below keeps two, just above needs a third.
  p.top_p = 0.799f;
  CHECK(distribution(x, p).size() == 2);
  p.top_p = 0.801f;
  CHECK(distribution(x, p).size() == 3);
  p.top_p = 0.499f;
  CHECK(distribution(x, p).size() == 1);
  // Tiny top_p: only the argmax survives, sampling is then deterministic.
  p.top_p = 1e-6f;
  for (uint64_t i = 0; i < 100; ++i) {
    p.draw_index = i;
    CHECK(token_of(x, p) == 1);
  }
  // Counting with top_p = 0.75: ids 1 and 3 in ratio 5:3.
  p.top_p = 0.75f;
  p.seed = 77;
  CHECK(chi_square(x, p, {0.0, 0.625, 0.0, 0.375}, 20000) < 20.0);
  // With top-k, the mass is that of the top-k set: of 0.5 / 0.3 (renormalised 0.625 / 0.375), top_p 0.6 keeps one.
  p.top_k = 2;
  p.top_p = 0.6f;
  dist = distribution(x, p);
  REQUIRE(dist.size() == 1);
  CHECK(dist[0].first == 1);
  p.top_p = 0.7f;
  CHECK(distribution(x, p).size() == 2);
}

TEST_CASE("min-p drops tokens below min_p times the top probability", "[unit]") {
  const std::vector<float> x = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  RowParams p = sampled(1.0f, 0);
  p.min_p = 0.25f;  // threshold 0.125: keeps 0.5, 0.3, 0.15
  auto dist = distribution(x, p);
  REQUIRE(dist.size() == 3);
  CHECK(dist[2].first == 0);
  CHECK(dist[2].second == Approx(0.15 / 0.95));
  p.min_p = 0.7f;  // threshold 0.35: only the top one
  dist = distribution(x, p);
  REQUIRE(dist.size() == 1);
  CHECK(dist[0].first == 1);
  // After top-p: top_p 0.9 keeps three, min_p 0.5 (threshold 0.25) then two.
  p.top_p = 0.9f;
  p.min_p = 0.5f;
  dist = distribution(x, p);
  REQUIRE(dist.size() == 2);
  CHECK(dist[1].first == 3);
  CHECK(dist[1].second == Approx(0.3 / 0.8));
}

TEST_CASE("+inf logits share the mass equally, through every filter", "[unit]") {
  const std::vector<float> x = {kInf, 1.0f, kInf, 50.0f, kInf, -kInf};
  RowParams p = sampled(0.8f, 3);
  auto dist = distribution(x, p);
  REQUIRE(dist.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(dist[i].first == static_cast<int32_t>(2 * i));
    CHECK(dist[i].second == Approx(1.0 / 3.0));
  }
  CHECK(chi_square(x, p, {1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3, 0}, 30000) < 20.0);
  p.top_k = 2;  // ties toward lower ids
  dist = distribution(x, p);
  REQUIRE(dist.size() == 2);
  CHECK(dist[0].first == 0);
  CHECK(dist[1].first == 2);
  p.top_k = 0;
  p.top_p = 0.5f;  // two of three reach 0.5
  CHECK(distribution(x, p).size() == 2);
  p.top_p = 1.0f;
  p.min_p = 1.0f;  // p == p_max for all three
  CHECK(distribution(x, p).size() == 3);
}

TEST_CASE("presence and frequency penalties (OpenAI) over generated tokens only", "[unit]") {
  const auto x = random_logits(20, 4);
  RowParams p = sampled(1.0f);
  p.presence_penalty = 0.7f;
  p.frequency_penalty = 0.3f;
  p.slot = 1;
  Penalties pen(20, 3);
  // Prompt {2, 2, 9} (positions 0..2), then generated {5, 5, 5, 7, 2, 25 (outside the vocabulary: ignored)}, fed
  // in chunks of 2 so that one step holds the last prompt token and the first generated one.
  const std::vector<int32_t> tokens = {2, 2, 9, 5, 5, 5, 7, 2, 25};
  pen.feed(1, tokens, 3, 2);
  CHECK(pen.count(1, 5) == 3);
  CHECK(pen.count(1, 7) == 1);
  CHECK(pen.count(1, 2) == 1);
  CHECK(pen.count(1, 9) == 0);
  CHECK(pen.prompt(1, 2));
  CHECK(pen.prompt(1, 9));
  CHECK_FALSE(pen.prompt(1, 5));
  for (int32_t id = 0; id < 20; ++id) CHECK(pen.count(0, id) + pen.count(2, id) == 0);  // other slots untouched
  std::vector<float> out;
  process_logits_ref(x.data(), 20, p, nullptr, nullptr, pen.s, out);
  std::vector<float> want = x;
  std::map<int32_t, int> counts = {{5, 3}, {7, 1}, {2, 1}};
  for (const auto& [id, c] : counts) want[static_cast<size_t>(id)] -= 0.7f + 0.3f * static_cast<float>(c);
  REQUIRE(out.size() == want.size());
  for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == want[i]);
  CHECK(out[9] == x[9]);  // in the prompt only: untouched
  // A row without penalty state (slot -1) or another slot sees the raw logits.
  p.slot = -1;
  process_logits_ref(x.data(), 20, p, nullptr, nullptr, pen.s, out);
  CHECK(out == x);
  p.slot = 0;
  process_logits_ref(x.data(), 20, p, nullptr, nullptr, pen.s, out);
  CHECK(out == x);
  // reset clears the slot: the penalties are gone.
  reset_penalties_ref(pen.s, 1);
  p.slot = 1;
  process_logits_ref(x.data(), 20, p, nullptr, nullptr, pen.s, out);
  CHECK(out == x);
  for (int32_t id = 0; id < 20; ++id) CHECK_FALSE(pen.prompt(1, id));
}

TEST_CASE("repetition penalty (HF) over prompt and generated, once per distinct id", "[unit]") {
  const std::vector<float> x = {2.0f, -2.0f, 1.0f, -1.0f, 0.5f};
  RowParams p = sampled(1.0f);
  p.repetition_penalty = 2.0f;
  p.slot = 0;
  Penalties pen(5, 1);
  pen.feed(0, {0, 0, 1, 3, 3, 3}, 3, 4);  // prompt {0, 0, 1}, generated {3, 3, 3}
  std::vector<float> out;
  process_logits_ref(x.data(), 5, p, nullptr, nullptr, pen.s, out);
  CHECK(out[0] == 1.0f);   // positive: divided (once, although it appears twice)
  CHECK(out[1] == -4.0f);  // negative: multiplied
  CHECK(out[2] == 1.0f);   // absent: untouched
  CHECK(out[3] == -2.0f);
  CHECK(out[4] == 0.5f);
  // Repetition, then presence / frequency on the generated ids.
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  process_logits_ref(x.data(), 5, p, nullptr, nullptr, pen.s, out);
  CHECK(out[3] == -2.0f - (0.5f + 0.25f * 3.0f));
  CHECK(out[0] == 1.0f);  // prompt only: no presence penalty
}

TEST_CASE("update_penalties_ref: several sequences and rows, padding entries, bad slots and ids", "[unit]") {
  Penalties pen(40, 4);
  // One step of three sequences: slot 2 prefill [3, 4, 5] of a 3-token prompt; slot 0 decoding two verify rows
  // at positions 10, 11 (generated) with tokens [7, 7]; a padding entry; a sequence without state (slot -1); one
  // with a slot beyond n_slots; token ids outside [0, vocab).
  const std::vector<int32_t> tokens = {3, 4, 5, 7, 7, 9, 9, 8, -1, 40, 39};
  std::vector<SeqDesc> seqs(6);
  seqs[0] = SeqDesc{0, 3, 0, 2, 0, 3};
  seqs[1] = SeqDesc{3, 2, 10, 0, 0, 4};
  seqs[2] = SeqDesc{5, 0, 0, 1, 0, 0};  // padding: n_tokens 0
  seqs[3] = SeqDesc{5, 1, 0, -1, 0, 0};
  seqs[4] = SeqDesc{6, 2, 0, 4, 0, 0};
  seqs[5] = SeqDesc{8, 3, 5, 3, 0, 1};  // ids -1 and 40 ignored, 39 generated
  update_penalties_ref(pen.s, tokens.data(), seqs.data(), static_cast<int32_t>(seqs.size()));
  CHECK(pen.prompt(2, 3));
  CHECK(pen.prompt(2, 4));
  CHECK(pen.prompt(2, 5));
  CHECK(pen.count(2, 3) == 0);
  CHECK(pen.count(0, 7) == 2);
  CHECK_FALSE(pen.prompt(0, 7));
  CHECK(pen.count(3, 39) == 1);
  int total = 0;
  for (int32_t v : pen.counts) total += v;
  CHECK(total == 3);
  int bits = 0;
  for (uint32_t w : pen.bits) bits += std::popcount(w);
  CHECK(bits == 3);
  // reset of one slot leaves the others; out-of-range slots are ignored.
  reset_penalties_ref(pen.s, 2);
  CHECK_FALSE(pen.prompt(2, 3));
  CHECK(pen.count(0, 7) == 2);
  reset_penalties_ref(pen.s, 9);
  reset_penalties_ref(pen.s, -1);
  CHECK(pen.count(3, 39) == 1);
}

TEST_CASE("logit_bias is added before everything else, duplicates in order", "[unit]") {
  const std::vector<float> x = {0.0f, 0.0f, 0.0f};
  RowParams greedy = sampled(0.0f);
  RowResult r = run_row(x, greedy, 0, {2, 0, 7 /* out of range: ignored */, -1}, {5.0f, -100.0f, 100.0f, 9.0f});
  CHECK(r.token == 2);
  std::vector<float> out;
  const std::vector<int32_t> ids = {2, 0, 7, -1};
  const std::vector<float> values = {5.0f, -100.0f, 100.0f, 9.0f};
  RowParams b = greedy;
  b.bias_count = 4;
  process_logits_ref(x.data(), 3, b, ids.data(), values.data(), PenaltyState{}, out);
  CHECK(out == std::vector<float>{-100.0f, 0.0f, 5.0f});
  // A bias of -inf bans a token even from greedy.
  CHECK(run_row({0.0f, 9.0f, 1.0f}, greedy, 0, {1}, {-kInf}).token == 2);
  // Entries of one id add up in order; the row's entries are [bias_offset, bias_offset + bias_count).
  const std::vector<int32_t> ids2 = {1, 0, 0, 1};
  const std::vector<float> values2 = {1e30f, 1.0f, 2.0f, -1e30f};
  b.bias_offset = 1;
  b.bias_count = 3;
  process_logits_ref(x.data(), 3, b, ids2.data(), values2.data(), PenaltyState{}, out);
  CHECK(out == std::vector<float>{3.0f, -1e30f, 0.0f});
  // Bias goes before the penalties: repetition divides the biased logit.
  Penalties pen(3, 1);
  pen.feed(0, {2}, 1, 1);
  RowParams rp = greedy;
  rp.slot = 0;
  rp.repetition_penalty = 4.0f;
  rp.bias_count = 1;
  const std::vector<int32_t> one = {2};
  const std::vector<float> eight = {8.0f};
  process_logits_ref(x.data(), 3, rp, one.data(), eight.data(), pen.s, out);
  CHECK(out[2] == 2.0f);
}

TEST_CASE("padding rows (ids >= n_vocab_real) are never sampled or looked at", "[unit]") {
  std::vector<float> x = random_logits(30, 6);
  for (size_t i = 24; i < 30; ++i) x[i] = 100.0f;
  const int32_t greedy = token_of(x, sampled(0.0f), 24);
  CHECK(greedy < 24);
  CHECK(greedy == static_cast<int32_t>(std::max_element(x.begin(), x.begin() + 24) - x.begin()));
  RowParams p = sampled(2.0f, 3);
  for (uint64_t i = 0; i < 2000; ++i) {
    p.draw_index = i;
    REQUIRE(token_of(x, p, 24) < 24);
  }
  // A NaN in a padding row is not an error; logprobs cover the real rows only.
  x[27] = kNaN;
  p.flags = kSample | kLogprobs;
  p.n_top_logprobs = 3;
  const RowResult r = run_row(x, p, 24);
  CHECK(r.status == kRowOk);
  CHECK(r.token < 24);
  const std::vector<float> real(x.begin(), x.begin() + 24);
  const auto pr = softmax(real);
  CHECK(r.logprob == Approx(std::log(pr[static_cast<size_t>(r.token)])).margin(1e-5));
  CHECK(r.top_ids[0] == greedy);
}

TEST_CASE("the same (seed, draw index) gives the same token, other seeds or indices other tokens", "[unit]") {
  RowParams p = sampled(1.0f, 1234);
  p.top_p = 0.95f;
  p.top_k = 40;
  const auto x = random_logits(200, 12);
  std::vector<int32_t> a, b, c, d;
  for (uint64_t i = 0; i < 300; ++i) {
    p.seed = 1234;
    p.draw_index = i;
    a.push_back(token_of(x, p));
    b.push_back(token_of(x, p));
    p.seed = 1235;
    c.push_back(token_of(x, p));
    p.seed = 1234;
    p.draw_index = i + 300;
    d.push_back(token_of(x, p));
  }
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
}

TEST_CASE("edge cases: one finite logit, NaN, nothing samplable", "[unit]") {
  const std::vector<float> one = {-kInf, -kInf, 0.3f, -kInf};
  RowParams hot = sampled(1.0f, 5);
  for (uint64_t i = 0; i < 50; ++i) {
    hot.draw_index = i;
    CHECK(token_of(one, hot) == 2);
  }
  // NaN in a real row: the row's status says so and names the first NaN id; no token.
  const std::vector<float> with_nan = {0.5f, 1.0f, kNaN, 0.5f, kNaN};
  for (const RowParams& p : {sampled(0.0f), sampled(1.0f)}) {
    const RowResult r = run_row(with_nan, p);
    CHECK(r.status == kNanLogits);
    CHECK(r.nan_index == 2);
    CHECK(r.token == -1);
  }
  // NaN only in a padding row is not an error.
  const RowResult pad = run_row({0.0f, 1.0f, 0.5f, kNaN}, sampled(0.0f), 3);
  CHECK(pad.status == kRowOk);
  CHECK(pad.token == 1);
  // Every real logit -inf (before or after processing): nothing samplable, no token.
  for (const RowParams& p : {sampled(0.0f), sampled(1.0f)}) {
    const RowResult r = run_row({-kInf, -kInf, -kInf}, p);
    CHECK(r.status == kNothingSamplable);
    CHECK(r.token == -1);
    const RowResult banned = run_row({-kInf, 2.0f, -kInf}, p, 0, {1}, {-kInf});
    CHECK(banned.status == kNothingSamplable);
    // A finite bias does not lift a -inf logit.
    const RowResult lifted = run_row({-kInf, -kInf, -kInf}, p, 0, {1}, {100.0f});
    CHECK(lifted.status == kNothingSamplable);
  }
}

TEST_CASE("row flags: rows without kSample are skipped, kLogprobs adds the logprobs", "[unit]") {
  const auto x = random_logits(50, 17);
  RowParams p = sampled(1.0f, 9);
  p.flags = 0;
  RowResult r = run_row(x, p);
  CHECK(r.token == -1);
  CHECK(r.status == kRowOk);
  CHECK(r.top_ids[0] == -7);  // untouched
  // kLogprobs without kSample does nothing either.
  p.flags = kLogprobs;
  p.n_top_logprobs = 5;
  r = run_row(x, p);
  CHECK(r.token == -1);
  CHECK(r.top_ids[0] == -7);
  p.flags = kSample | kLogprobs;
  r = run_row(x, p);
  REQUIRE(r.status == kRowOk);
  const auto pr = softmax(x);
  CHECK(r.logprob == Approx(std::log(pr[static_cast<size_t>(r.token)])).margin(1e-5));
  CHECK(r.top_ids[5] == -7);  // only n_top_logprobs entries are written
  // NaN rows report no logprobs.
  std::vector<float> bad = x;
  bad[10] = kNaN;
  r = run_row(bad, p);
  CHECK(r.status == kNanLogits);
  CHECK(r.top_ids[0] == -7);
}

TEST_CASE("combined transforms: counting matches final_distribution", "[unit]") {
  const auto x = random_logits(30, 21);
  RowParams p = sampled(0.8f, 31);
  p.top_k = 12;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.presence_penalty = 0.5f;
  p.repetition_penalty = 1.3f;
  p.slot = 0;
  Penalties pen(30, 1);
  pen.feed(0, {1, 2, 3, 4, 4, 5}, 3, 8);  // prompt {1, 2, 3}, generated {4, 4, 5}
  std::vector<float> processed;
  process_logits_ref(x.data(), 30, p, nullptr, nullptr, pen.s, processed);
  std::vector<std::pair<int32_t, double>> dist;
  final_distribution_ref(processed, p, dist);
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
    p.draw_index = static_cast<uint64_t>(i);
    const RowResult r = run_row(x, p, 0, {}, {}, &pen.s);
    REQUIRE(r.status == kRowOk);
    REQUIRE(expected[static_cast<size_t>(r.token)] > 0.0);
    ++counts[static_cast<size_t>(r.token)];
  }
  double chi = 0.0;
  for (size_t i = 0; i < 30; ++i) {
    if (expected[i] > 0.0) chi += (counts[i] - expected[i] * kN) * (counts[i] - expected[i] * kN) / (expected[i] * kN);
  }
  CHECK(chi < 45.0);  // at most 11 degrees of freedom: the 99.9% quantile is 31.3
}

TEST_CASE("log_softmax_top_ref against a direct log-softmax", "[unit]") {
  const auto x = random_logits(50, 17);
  const auto p = softmax(x);
  float chosen = 0.0f;
  std::vector<int32_t> ids(kMaxTopLogprobs, -1);
  std::vector<float> lps(kMaxTopLogprobs, 0.0f);
  log_softmax_top_ref(x.data(), 50, 7, 5, &chosen, ids.data(), lps.data());
  CHECK(chosen == Approx(std::log(p[7])).margin(1e-5));
  std::vector<int32_t> order(50);
  for (int i = 0; i < 50; ++i) order[static_cast<size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
  for (size_t i = 0; i < 5; ++i) {
    CHECK(ids[i] == order[i]);
    CHECK(lps[i] == Approx(std::log(p[static_cast<size_t>(order[i])])).margin(1e-5));
  }
  // Ties go to the lower id; n_top beyond the vocabulary is clamped; NaN counts as -inf.
  const std::vector<float> t = {1.0f, 2.0f, 2.0f, kNaN};
  std::fill(ids.begin(), ids.end(), -1);
  log_softmax_top_ref(t.data(), 4, 0, 10, &chosen, ids.data(), lps.data());
  CHECK(ids[0] == 1);
  CHECK(ids[1] == 2);
  CHECK(ids[2] == 0);
  CHECK(ids[3] == 3);
  CHECK(ids[4] == -1);
  CHECK(lps[3] == -kInf);
  CHECK(std::exp(lps[0]) + std::exp(lps[1]) + std::exp(lps[2]) == Approx(1.0));
  // +inf anywhere (or every value -inf): the distribution is undefined, every logprob -inf.
  const std::vector<float> inf = {1.0f, kInf};
  log_softmax_top_ref(inf.data(), 2, 1, 2, &chosen, ids.data(), lps.data());
  CHECK(chosen == -kInf);
  CHECK(ids[0] == 1);
  CHECK(lps[0] == -kInf);
  // n_top 0: no alternatives written.
  ids[0] = -5;
  log_softmax_top_ref(x.data(), 50, 3, 0, &chosen, ids.data(), lps.data());
  CHECK(ids[0] == -5);
}

TEST_CASE("sample_ref over a batch: each row as alone, whatever the split over threads", "[unit]") {
  // A thread pool stand-in that runs pieces of 3 rows on separate threads.
  struct Threads : HostParallel {
    void parallel_for(int64_t n, int64_t, const std::function<void(int64_t, int64_t)>& body) const override {
      std::vector<std::thread> ts;
      for (int64_t b = 0; b < n; b += 3) ts.emplace_back(body, b, std::min(n, b + 3));
      for (auto& t : ts) t.join();
    }
  };
  constexpr int32_t kRows = 10, kVocab = 64, kStride = 70;
  std::vector<float> logits(static_cast<size_t>(kRows * kStride));
  SampleRng rng(5);
  for (float& v : logits) v = static_cast<float>(rng.uniform() * 6.0 - 3.0);
  logits[3 * kStride + 11] = kNaN;
  std::vector<RowParams> rows(kRows);
  for (int32_t r = 0; r < kRows; ++r) {
    RowParams& p = rows[static_cast<size_t>(r)];
    p.flags = r == 4 ? 0u : (kSample | (r % 2 ? kLogprobs : 0u));
    p.temperature = r == 0 ? 0.0f : 0.5f + 0.1f * static_cast<float>(r);
    p.top_k = r % 3 == 0 ? 10 : 0;
    p.top_p = r % 4 == 1 ? 0.8f : 1.0f;
    p.n_top_logprobs = r;
    p.seed = 100 + static_cast<uint64_t>(r);
    p.draw_index = static_cast<uint64_t>(r);
    p.bias_offset = r % 2;
    p.bias_count = r == 5 ? 2 : 0;
  }
  const std::vector<int32_t> bias_ids = {9, 10, 11};
  const std::vector<float> bias_values = {1.0f, 50.0f, -3.0f};
  struct Out {
    std::vector<int32_t> token = std::vector<int32_t>(kRows, -9), status = std::vector<int32_t>(kRows, -9),
                         nan = std::vector<int32_t>(kRows, -9),
                         top = std::vector<int32_t>(kRows * kMaxTopLogprobs, -9);
    std::vector<float> lp = std::vector<float>(kRows, 0.0f), toplp = std::vector<float>(kRows * kMaxTopLogprobs, 0.0f);
  };
  auto run = [&](int32_t r0, int32_t n, const HostParallel* par, Out& o) {
    RefArgs a;
    a.logits = logits.data() + static_cast<size_t>(r0 * kStride);
    a.logits_stride = kStride;
    a.n_rows = n;
    a.n_vocab_real = kVocab;
    a.rows = rows.data() + r0;
    a.bias_ids = bias_ids.data();
    a.bias_values = bias_values.data();
    a.out = Outputs{o.token.data() + r0, o.lp.data() + r0, o.top.data() + r0 * kMaxTopLogprobs,
                    o.toplp.data() + r0 * kMaxTopLogprobs, o.status.data() + r0, o.nan.data() + r0};
    a.parallel = par;
    sample_ref(a);
  };
  Out batch, threaded, alone;
  run(0, kRows, nullptr, batch);
  Threads threads;
  run(0, kRows, &threads, threaded);
  for (int32_t r = 0; r < kRows; ++r) run(r, 1, nullptr, alone);
  CHECK(batch.token == alone.token);
  CHECK(batch.status == alone.status);
  CHECK(batch.top == alone.top);
  CHECK(batch.lp == alone.lp);
  CHECK(threaded.token == batch.token);
  CHECK(threaded.top == batch.top);
  CHECK(batch.status[3] == kNanLogits);
  CHECK(batch.nan[3] == 11);
  CHECK(batch.token[4] == -1);
  CHECK(batch.status[4] == kRowOk);
  CHECK(batch.token[5] == 10);  // +50 on id 10 at T = 1.0
}

// The speculative acceptance rule (kernels/sampling/accept.h) against exact distributions: greedy runs are the
// argmax runs, sampled output is distributed as the target's processed distribution (chi-square over many seeds,
// for drafts of high, middling and zero probability, with top-k/top-p/penalties), the per-row penalty state counts
// exactly the accepted drafts, and the two deliberately broken rules fail the same test.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sampling/accept.h"
#include "support/chi_square.h"
#include "support/test_rng.h"

namespace voltserve::kernels::sampling {
namespace {

constexpr int32_t kVocab = 24;

struct Item {
  std::vector<float> logits;  // [k + 1, kVocab]
  std::vector<int32_t> drafts;
  std::vector<RowParams> rows;
  std::vector<int32_t> token, status, nan_index, top_ids;
  std::vector<float> logprob, top_lp;
  std::vector<int32_t> counts = std::vector<int32_t>(kVocab, 0);
  std::vector<uint32_t> bits = std::vector<uint32_t>(1, 0u);

  Item(int32_t k, uint64_t salt) : logits(static_cast<size_t>((k + 1) * kVocab)), rows(static_cast<size_t>(k + 1)) {
    testing::TestRng rng(salt);
    for (float& x : logits) x = static_cast<float>(3.0 * rng.next_double() - 1.5);
    token.resize(rows.size());
    status.resize(rows.size());
    nan_index.resize(rows.size());
    logprob.resize(rows.size());
    top_ids.resize(rows.size() * kMaxTopLogprobs);
    top_lp.resize(rows.size() * kMaxTopLogprobs);
    for (RowParams& r : rows) {
      r.flags = kSample;
      r.slot = 0;
    }
  }
  PenaltyState penalties() { return {counts.data(), bits.data(), kVocab, 1}; }
  int32_t run(AcceptRule rule = AcceptRule::kExact) {
    AcceptArgs a;
    a.logits = logits.data();
    a.logits_stride = kVocab;
    a.n_vocab_real = kVocab;
    a.n_drafts = static_cast<int32_t>(drafts.size());
    a.drafts = drafts.data();
    a.rows = rows.data();
    a.penalties = penalties();
    a.out = {token.data(), logprob.data(), top_ids.data(), top_lp.data(), status.data(), nan_index.data()};
    a.rule = rule;
    return accept_drafts_ref(a);
  }
  // The exact distribution row j samples from, with the current penalty state.
  std::vector<double> target(int32_t j) {
    std::vector<float> processed;
    std::vector<std::pair<int32_t, double>> dist;
    process_logits_ref(logits.data() + j * kVocab, kVocab, rows[static_cast<size_t>(j)], nullptr, nullptr, penalties(),
                       processed);
    final_distribution_ref(processed, rows[static_cast<size_t>(j)], dist);
    std::vector<double> p(kVocab, 0.0);
    for (const auto& [id, q] : dist) p[static_cast<size_t>(id)] = q;
    return p;
  }
};

int32_t argmax(const float* x) {
  int32_t best = 0;
  for (int32_t i = 1; i < kVocab; ++i) best = x[i] > x[best] ? i : best;
  return best;
}

}  // namespace

TEST_CASE("accept greedy: the argmax run, the correction, the bonus", "[unit]") {
  for (int32_t k = 1; k <= 6; ++k) {
    for (int32_t m = 0; m <= k; ++m) {  // the first m drafts are the argmax
      Item it(k, 100 + static_cast<uint64_t>(k * 10 + m));
      for (RowParams& r : it.rows) r.temperature = 0.0f;
      for (int32_t j = 0; j < k; ++j) {
        const int32_t best = argmax(it.logits.data() + j * kVocab);
        it.drafts.push_back(j < m ? best : (best + 1) % kVocab);
      }
      INFO("k " << k << " m " << m);
      REQUIRE(it.run() == m);
      for (int32_t j = 0; j <= m; ++j) {
        CHECK(it.status[static_cast<size_t>(j)] == kRowOk);
        CHECK(it.token[static_cast<size_t>(j)] == argmax(it.logits.data() + j * kVocab));
      }
      for (int32_t j = m + 1; j <= k; ++j) CHECK(it.status[static_cast<size_t>(j)] == kRowNotReached);
    }
  }
}

TEST_CASE("accept greedy from independent samples: the walk over per-row argmaxes equals the rule", "[unit]") {
  // The CUDA backend decides verify items from the device sampler's per-row verdicts (draft rows: tested against
  // the rule by sampling_math_test.cpp and sampling_gpu_test.cpp); this is the walk over greedy rows' argmaxes
  // against the rule itself, with logit_bias, logprobs, ties, NaN rows and every run length.
  testing::TestRng rng(4242);
  const std::vector<int32_t> bias_ids{3, 11, 17};
  const std::vector<float> bias_values{2.5f, -1.0f, 0.75f};
  int32_t runs_by_length[9] = {};
  for (int32_t trial = 0; trial < 600; ++trial) {
    const auto k = static_cast<int32_t>(rng.next_u64() % 9);  // 0..8 drafts
    Item it(k, 9000 + static_cast<uint64_t>(trial));
    for (RowParams& r : it.rows) {
      r.temperature = 0.0f;
      r.slot = -1;
      r.flags = kSample | kLogprobs;
      r.n_top_logprobs = 3;
      if (trial % 3 == 0) {
        r.bias_offset = 0;
        r.bias_count = 3;
      }
    }
    if (trial % 5 == 0) {  // a tie for the top: the lowest id wins in both
      for (int32_t j = 0; j <= k; ++j) it.logits[static_cast<size_t>(j * kVocab + 20)] = it.logits[static_cast<size_t>(j * kVocab + 2)] = 9.0f;
    }
    if (trial % 11 == 0 && k > 0) it.logits[static_cast<size_t>((rng.next_u64() % (k + 1)) * kVocab + 5)] = NAN;
    // Drafts: mostly the row's processed argmax, so long accepted runs happen.
    std::vector<int32_t> independent(static_cast<size_t>(k + 1)), ind_status(static_cast<size_t>(k + 1)),
        ind_nan(static_cast<size_t>(k + 1)), ind_top(static_cast<size_t>((k + 1) * kMaxTopLogprobs));
    std::vector<float> ind_lp(static_cast<size_t>(k + 1)), ind_top_lp(static_cast<size_t>((k + 1) * kMaxTopLogprobs));
    RefArgs ra;
    ra.logits = it.logits.data();
    ra.logits_stride = kVocab;
    ra.n_rows = k + 1;
    ra.n_vocab_real = kVocab;
    ra.rows = it.rows.data();
    ra.bias_ids = bias_ids.data();
    ra.bias_values = bias_values.data();
    ra.out = {independent.data(), ind_lp.data(), ind_top.data(), ind_top_lp.data(), ind_status.data(), ind_nan.data()};
    sample_ref(ra);
    for (int32_t j = 0; j < k; ++j) {
      const bool take_best = rng.next_double() < 0.75 && independent[static_cast<size_t>(j)] >= 0;
      it.drafts.push_back(take_best ? independent[static_cast<size_t>(j)] : static_cast<int32_t>(rng.next_u64() % kVocab));
    }
    AcceptArgs a;
    a.logits = it.logits.data();
    a.logits_stride = kVocab;
    a.n_vocab_real = kVocab;
    a.n_drafts = k;
    a.drafts = it.drafts.data();
    a.rows = it.rows.data();
    a.bias_ids = bias_ids.data();
    a.bias_values = bias_values.data();
    a.out = {it.token.data(), it.logprob.data(), it.top_ids.data(), it.top_lp.data(), it.status.data(),
             it.nan_index.data()};
    const int32_t want = accept_drafts_ref(a);
    const int32_t got = accept_judged_rows(k, it.drafts.data(), independent.data(), ind_status.data());
    INFO("trial " << trial << " k " << k);
    REQUIRE(got == want);
    ++runs_by_length[got];
    for (int32_t j = 0; j <= k; ++j) {
      const auto jj = static_cast<size_t>(j);
      CHECK(ind_status[jj] == it.status[jj]);
      CHECK(independent[jj] == it.token[jj]);
      if (j <= got && it.status[jj] == kRowOk) {
        CHECK(ind_lp[jj] == it.logprob[jj]);
        for (int32_t t = 0; t < 3; ++t) CHECK(ind_top[jj * kMaxTopLogprobs + t] == it.top_ids[jj * kMaxTopLogprobs + t]);
      }
    }
  }
  for (int32_t n = 0; n <= 4; ++n) CHECK(runs_by_length[n] > 0);  // short and long runs were both exercised
}

TEST_CASE("accept: the penalty state of each row counts the drafts accepted before it, and ends with exactly them",
          "[unit]") {
  Item it(3, 7);
  for (RowParams& r : it.rows) {
    r.temperature = 0.0f;
    r.frequency_penalty = 2.0f;
  }
  // Row 0 and row 1 both peak on token 5 (by 1.0); d1 = 5 is accepted; row 1 then sees 5 counted once (-2) and
  // must emit its second best instead, rejecting d2 = 5.
  for (int32_t j = 0; j < 2; ++j) {
    float* row = it.logits.data() + j * kVocab;
    for (int32_t i = 0; i < kVocab; ++i) row[i] = 0.0f;
    row[5] = 3.0f;
    row[9] = 2.0f;
  }
  it.drafts = {5, 5, 1};
  REQUIRE(it.run() == 1);
  CHECK(it.token[0] == 5);
  CHECK(it.token[1] == 9);
  CHECK(it.status[2] == kRowNotReached);
  CHECK(it.counts[5] == 1);  // d1 only; the rejected d2, d3 and the correction are not counted
  CHECK(it.counts[1] == 0);
  CHECK(it.counts[9] == 0);
}

TEST_CASE("accept sampled: the emitted token is distributed as the target, and broken rules are caught", "[unit]") {
  struct Case {
    float temperature, top_p;
    int32_t top_k;
    float presence;
    int which;  // draft: 0 the most likely token, 1 a middling one, 2 one the filters removed (p = 0)
  };
  const std::vector<Case> cases = {{1.0f, 1.0f, 0, 0.0f, 0}, {1.0f, 1.0f, 0, 0.0f, 1}, {0.7f, 0.9f, 8, 0.0f, 0},
                                   {1.3f, 1.0f, 6, 0.5f, 1}, {1.0f, 1.0f, 5, 0.0f, 2}};
  constexpr int32_t kDraws = 20000;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    INFO("case " << c);
    Item base(1, 500 + c);
    for (RowParams& r : base.rows) {
      r.temperature = cs.temperature;
      r.top_p = cs.top_p;
      r.top_k = cs.top_k;
      r.presence_penalty = cs.presence;
    }
    base.counts[3] = 2;  // earlier generated tokens, penalized
    const std::vector<double> p = base.target(0);
    std::vector<int32_t> order(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
    int32_t d = order[0];
    if (cs.which == 1) d = order[2];
    if (cs.which == 2) {
      for (int32_t i : order) d = p[static_cast<size_t>(i)] == 0.0 ? i : d;
      REQUIRE(p[static_cast<size_t>(d)] == 0.0);
    }
    INFO("p(draft) " << p[static_cast<size_t>(d)]);
    for (AcceptRule rule : {AcceptRule::kExact, AcceptRule::kAlwaysAccept, AcceptRule::kResampleKeepingDraft}) {
      std::vector<double> counts(kVocab, 0.0);
      for (int32_t s = 0; s < kDraws; ++s) {
        Item it = base;
        it.drafts = {d};
        for (RowParams& r : it.rows) r.seed = 1000003ULL * static_cast<uint64_t>(s) + 17;
        it.run(rule);
        REQUIRE(it.status[0] == kRowOk);
        counts[static_cast<size_t>(it.token[0])] += 1.0;
      }
      const testing::ChiSquare x = testing::chi_square_fit(counts, p);
      INFO("rule " << static_cast<int>(rule) << " chi2 " << x.statistic << " df " << x.df << " z " << x.z());
      if (rule == AcceptRule::kExact) {
        CHECK(x.z() < 4.0);
      } else if (cs.which == 2 && rule == AcceptRule::kResampleKeepingDraft) {
        CHECK(x.z() < 4.0);  // a draft of probability 0 is never kept: this broken rule is harmless here
      } else {
        CHECK(x.z() > 10.0);
      }
    }
  }
}

TEST_CASE("accept sampled: after an accepted draft the next row samples its own (penalized) target", "[unit]") {
  Item base(2, 901);
  for (RowParams& r : base.rows) {
    r.temperature = 1.0f;
    r.frequency_penalty = 1.0f;
  }
  const std::vector<double> p0 = base.target(0);
  int32_t d1 = 0;
  for (int32_t i = 0; i < kVocab; ++i) d1 = p0[static_cast<size_t>(i)] > p0[static_cast<size_t>(d1)] ? i : d1;
  Item counted = base;
  counted.counts[static_cast<size_t>(d1)] += 1;  // row 1's target: d1 counted once
  const std::vector<double> p1 = counted.target(1);
  std::vector<double> second(kVocab, 0.0);
  int32_t n_accepted = 0;
  for (int32_t s = 0; s < 40000; ++s) {
    Item it = base;
    it.drafts = {d1, (d1 + 1) % kVocab};
    for (size_t j = 0; j < it.rows.size(); ++j) {
      it.rows[j].seed = 99991ULL * static_cast<uint64_t>(s) + 5;
      it.rows[j].draw_index = j;  // the index of the token each row emits
    }
    if (it.run() >= 1) {
      ++n_accepted;
      second[static_cast<size_t>(it.token[1])] += 1.0;
    }
  }
  // P(accept d1) = p0(d1); given it, row 1 emits from p1 (its own accept/resample), which is what plain sampling
  // of the second token would do after d1.
  const double rate = static_cast<double>(n_accepted) / 40000.0;
  const double sd = std::sqrt(p0[static_cast<size_t>(d1)] * (1 - p0[static_cast<size_t>(d1)]) / 40000.0);
  CHECK(std::fabs(rate - p0[static_cast<size_t>(d1)]) < 5 * sd);
  const testing::ChiSquare x = testing::chi_square_fit(second, p1);
  INFO("chi2 " << x.statistic << " df " << x.df);
  CHECK(x.z() < 4.0);
}

}  // namespace voltserve::kernels::sampling

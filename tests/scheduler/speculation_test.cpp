// SpecState: fixed and adaptive k, the per-position counts, the probe back from k = 0, and the flat near-100%
// acceptance signal (engine/core/speculation.h).
#include <catch2/catch_test_macros.hpp>

#include "core/speculation.h"
#include "voltserve/request.h"

using namespace voltserve;

TEST_CASE("a fixed k is used as asked, capped by the engine's limit; 0 is off", "[unit]") {
  CHECK(SpecState(3, 8).next_k(1) == 3);
  CHECK(SpecState(3, 8).next_k(64) == 3);  // a fixed k ignores the batch
  CHECK(SpecState(12, 8).next_k(1) == 8);
  CHECK_FALSE(SpecState(0, 8).enabled());
  CHECK(SpecState(0, 8).next_k(1) == 0);
  CHECK_FALSE(SpecState(kSpeculativeAuto, 0).enabled());
  CHECK(SpecState(kSpeculativeAuto, 0).next_k(1) == 0);
}

TEST_CASE("drafted and accepted are counted per draft position", "[unit]") {
  SpecState s(4, 8);
  s.record(3, 1);  // d1 accepted, d2 rejected, d3 never reached
  s.record(2, 2);
  s.record(0, 0);  // a round without drafts (dropped by the budget) counts nothing
  CHECK(s.n_rounds() == 2);
  CHECK(s.n_drafted() == 5);
  CHECK(s.n_accepted() == 3);
  CHECK(s.drafted_per_position() == std::vector<int32_t>{2, 2, 1});
  CHECK(s.accepted_per_position() == std::vector<int32_t>{2, 1, 0});
}

TEST_CASE("auto: long runs when everything is accepted, none when nothing is, and a probe back", "[unit]") {
  SpecState high(kSpeculativeAuto, 8);
  for (int i = 0; i < 50; ++i) high.record(8, 8);
  CHECK(high.next_k(1) == 8);

  SpecState none(kSpeculativeAuto, 8);
  const int32_t first = none.next_k(1);
  CHECK(first >= 1);  // the prior (1/2 per position) is worth drafting at batch 1
  CHECK(first < 8);
  for (int i = 0; i < 50; ++i) none.record(4, 0);
  CHECK(none.next_k(1) == 0);
  for (int i = 0; i < SpecState::kProbeEvery - 1; ++i) none.record(0, 0);
  CHECK(none.next_k(1) == 0);
  none.record(0, 0);
  CHECK(none.next_k(1) == 1);  // every kProbeEvery plain rounds it tries one draft
  none.record(1, 0);
  CHECK(none.next_k(1) == 0);
}

TEST_CASE("auto: a larger batch makes verify rows dearer, so k shrinks", "[unit]") {
  SpecState s(kSpeculativeAuto, 8);
  // The first draft accepted in 70% of the rounds, the second in 4 of 7 of those that reached it, the third rarely.
  for (int i = 0; i < 100; ++i) {
    int32_t a = 0;
    while (a < 8 && ((i * 7 + a * 3) % 10) < 7) ++a;
    s.record(8, a);
  }
  const int32_t small = s.next_k(1);
  const int32_t large = s.next_k(64);
  CHECK(small >= 2);
  CHECK(large < small);
}

TEST_CASE("flat near-100% acceptance is flagged only over enough rounds", "[unit]") {
  SpecState s(4, 8);
  for (int i = 0; i < SpecState::kFlatMinRounds - 1; ++i) s.record(4, 4);
  CHECK_FALSE(s.flat_near_full());
  s.record(4, 4);
  CHECK(s.flat_near_full());

  SpecState real(4, 8);
  for (int i = 0; i < 4 * SpecState::kFlatMinRounds; ++i) real.record(4, i % 8 == 0 ? 2 : 4);
  CHECK_FALSE(real.flat_near_full());  // the last positions fall off: a real draft model
}

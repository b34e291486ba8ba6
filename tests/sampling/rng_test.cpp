// The sampler's PRNG: splitmix64 against the values its authors publish for seed 0, xoshiro256** against values
// computed independently (Python, from the published algorithm), and the range of next_double().
#include <catch2/catch_test_macros.hpp>

#include "sampling/rng.h"

using voltserve::splitmix64;
using voltserve::Xoshiro256;

TEST_CASE("splitmix64 matches the reference sequence for seed 0", "[unit]") {
  uint64_t s = 0;
  CHECK(splitmix64(s) == 0xe220a8397b1dcdafULL);
  CHECK(splitmix64(s) == 0x6e789e6aa1b965f4ULL);
  CHECK(splitmix64(s) == 0x06c45d188009454fULL);
}

TEST_CASE("xoshiro256** seeded through splitmix64 gives pinned outputs", "[unit]") {
  Xoshiro256 rng(12345);
  CHECK(rng.next_u64() == 0xbe6a36374160d49bULL);
  CHECK(rng.next_u64() == 0x214aaa0637a688c6ULL);
  CHECK(rng.next_u64() == 0xf69d16de9954d388ULL);
  CHECK(rng.next_u64() == 0x0c60048c4e96e033ULL);
}

TEST_CASE("next_double stays below 1, at or above 0, with mean about 1/2", "[unit]") {
  Xoshiro256 rng(7);
  double sum = 0.0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = rng.next_double();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    sum += u;
  }
  CHECK(sum / kN > 0.49);
  CHECK(sum / kN < 0.51);
}

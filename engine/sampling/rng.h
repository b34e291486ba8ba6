// A fixed-algorithm PRNG (xoshiro256**, seeded through splitmix64) so that a seed gives the same tokens on every
// platform and standard library. Tested against the published reference outputs in tests/sampling/rng_test.cpp.
#pragma once

#include <cstdint>

namespace voltserve {

class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double next_double();

 private:
  uint64_t s_[4];
};

uint64_t splitmix64(uint64_t& state);

}  // namespace voltserve

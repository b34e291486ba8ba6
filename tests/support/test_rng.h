// SplitMix64: a tiny deterministic generator for test inputs (prompts, shuffles). Not the engine's sampler draw
// (that is Philox, kernels/sampling/philox.h).
#pragma once

#include <cstdint>

namespace voltserve::testing {

class TestRng {
 public:
  explicit TestRng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double next_double() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

}  // namespace voltserve::testing

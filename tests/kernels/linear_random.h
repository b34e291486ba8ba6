// Seeded random NVFP4 / FP8 weights and fp16 activations (with +-200 outliers) for the linear kernel tests.
#pragma once

#include <cstdint>
#include <vector>

#include "common/fp_formats.h"

namespace voltserve::test {

struct SplitMix {
  uint64_t s;
  explicit SplitMix(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

inline void fill_random_bytes(std::vector<uint8_t>& v, SplitMix& rng) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const uint64_t r = rng.next();
    for (int b = 0; b < 8; ++b) v[i + b] = static_cast<uint8_t>(r >> (8 * b));
  }
  for (; i < v.size(); ++i) v[i] = static_cast<uint8_t>(rng.next());
}

// Positive e4m3 scales between 2^-3 and 2^7 (exponent fields 4..14), as real NVFP4 group scales look.
inline void fill_e4m3_scales(std::vector<uint8_t>& v, SplitMix& rng) {
  for (auto& b : v) {
    const uint64_t r = rng.next();
    b = static_cast<uint8_t>(((4 + r % 11) << 3) | ((r >> 8) & 7));
  }
}

// FP8 weights: any finite e4m3 code except NaN (S.1111.111), both signs, with exponent fields <= 12.
inline void fill_e4m3_weights(std::vector<uint8_t>& v, SplitMix& rng) {
  for (auto& b : v) {
    const uint64_t r = rng.next();
    b = static_cast<uint8_t>(((r >> 16) & 0x80) | ((r % 13) << 3) | ((r >> 8) & 7));
  }
}

// Activations in [-1, 1] with about 1% outliers of magnitude 200; stored as fp16 bits and their exact floats.
inline void fill_activations(std::vector<uint16_t>& h, std::vector<float>& f, SplitMix& rng) {
  for (size_t i = 0; i < h.size(); ++i) {
    double v = rng.uniform() * 2.0 - 1.0;
    if (rng.next() % 100 == 0) v = (rng.next() & 1) ? 200.0 : -200.0;
    h[i] = fp::float_to_f16(static_cast<float>(v));
    f[i] = fp::f16_to_float(h[i]);
  }
}

}  // namespace voltserve::test

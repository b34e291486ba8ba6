// Seeded random logits for the sampling tests: flat rows (uniform in a band: large top-p sets, the general path),
// peaked rows shaped like a language model's (a few large logits over a long low tail), and rows with ties.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "linear_random.h"

namespace voltserve::test {

using SampleRng = SplitMix;

enum class LogitShape { kFlat, kPeaked, kTied };

inline const char* logit_shape_name(LogitShape s) {
  switch (s) {
    case LogitShape::kFlat: return "flat";
    case LogitShape::kPeaked: return "peaked";
    case LogitShape::kTied: return "tied";
  }
  return "?";
}

// n logits of the given shape. kFlat: uniform in [-4, 4]. kPeaked: a normal-ish tail (sum of 4 uniforms, scale
// 2.5) with about one in 4000 ids lifted by 8..16, as a language model's next-token logits look. kTied: values
// on a coarse grid of 1/4 in [-4, 4] (many exact ties, also at the top).
inline std::vector<float> random_logits(int64_t n, LogitShape shape, SampleRng& rng) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    switch (shape) {
      case LogitShape::kFlat:
        v = static_cast<float>(rng.uniform() * 8.0 - 4.0);
        break;
      case LogitShape::kPeaked: {
        const double s = rng.uniform() + rng.uniform() + rng.uniform() + rng.uniform() - 2.0;
        v = static_cast<float>(s * 2.5);
        if (rng.next() % 4000 == 0) v += static_cast<float>(8.0 + 8.0 * rng.uniform());
        break;
      }
      case LogitShape::kTied:
        v = static_cast<float>(std::floor(rng.uniform() * 33.0) * 0.25 - 4.0);
        break;
    }
  }
  return x;
}

}  // namespace voltserve::test

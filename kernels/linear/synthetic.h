// Synthetic weights for benchmarks of the real shapes (a 27B-shaped model needs no 15 GB on disk): codes and scales
// drawn from a counter hash of (seed, index), with magnitudes like a trained layer's (|w| around 0.02) so that a
// forward pass over them stays finite. synthetic_fill_host (linear_ref.h) writes checkpoint order (the CPU backend); the device
// fill writes a family's packed order directly (random codes stay random under prepack's permutation). The two
// therefore give different weights: synthetic models are for speed, never compared across backends. Any padding
// past k in the last k-block is filled too (no 27B shape has any). Tested by tests/kernels/linear_synthetic_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/host_device.h"
#include "common/kernel_status.h"
#include "linear/linear.h"

namespace voltserve::kernels {

inline constexpr float kSyntheticNvfp4GlobalScale = 1.0f / 32.0f;  // e2m1 (mean |x| ~2.6) x e4m3 (1/8..1/2) x this
inline constexpr float kSyntheticFp8TensorScale = 1.0f / 64.0f;    // e4m3 codes of magnitude 2^-6..2 x this

VS_HD uint64_t synthetic_hash(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// An e4m3 group scale in [1/8, 1/2): exponent field 4..5, any mantissa, positive.
VS_HD uint8_t synthetic_nvfp4_scale(uint64_t h) {
  return static_cast<uint8_t>(((4u + static_cast<uint32_t>(h & 1u)) << 3) | static_cast<uint32_t>((h >> 1) & 7u));
}
// An e4m3 weight code of magnitude 2^-6 .. 2^1 (exponent field 1..8), either sign; never NaN.
VS_HD uint8_t synthetic_fp8_code(uint64_t h) {
  const uint32_t e = 1u + static_cast<uint32_t>(h & 7u);
  return static_cast<uint8_t>((static_cast<uint32_t>((h >> 3) & 1u) << 7) | (e << 3) | static_cast<uint32_t>((h >> 4) & 7u));
}
// A dense weight value, uniform in (-0.04, 0.04).
VS_HD float synthetic_dense_value(uint64_t h) {
  return (static_cast<float>(static_cast<uint32_t>(h >> 40)) * (1.0f / 16777216.0f) - 0.5f) * 0.08f;
}

// Device fill of a synthetic weight in `family`'s packed layout: codes / scales sized as packed_bytes() says (NVFP4,
// FP8), or fp16 row-major [n, k] codes (dense). Launches on `stream`.
KernelStatus synthetic_fill_device(WeightFormat format, int64_t n, int64_t k, uint64_t seed, void* codes,
                                   size_t codes_bytes, void* scales, size_t scales_bytes, void* stream);

}  // namespace voltserve::kernels

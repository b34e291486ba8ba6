// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the counter-based generator
// of every random draw voltserve makes: a draw is a pure function of (seed, draw index, stream), so it needs no
// per-sequence generator state on the device and gives the same value whatever else is in the batch, after a
// preemption or inside a speculative round. Tested against the Random123 known-answer vectors
// (tests/kernels/sampling_ref_test.cpp).
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace voltserve::kernels::sampling {

struct Philox4x32 {
  uint32_t v[4];
};

VS_HD uint32_t philox_mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

VS_HD Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = philox_mulhi(kM0, ctr.v[0]), lo0 = kM0 * ctr.v[0];
    const uint32_t hi1 = philox_mulhi(kM1, ctr.v[2]), lo1 = kM1 * ctr.v[2];
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

// Streams: independent draws for the same (seed, index).
enum DrawStream : uint32_t {
  kStreamSample = 0,     // the token sampled for a row
  kStreamAccept = 1,     // speculative decoding: the acceptance test of a draft token
  kStreamResample = 2,   // speculative decoding: the token drawn after a rejection
};

// Uniform in [0, 1) with 53 random bits for draw `index` of the request seeded with `seed`.
VS_HD double uniform_draw(uint64_t seed, uint64_t index, uint32_t stream) {
  const Philox4x32 r = philox4x32_10(
      Philox4x32{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, 0u}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(r.v[0] >> 5) << 26) | (r.v[1] >> 6);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace voltserve::kernels::sampling

// Bit placement of NVFP4 codes in the sm80 family's packed words, shared by prepack (host) and the sm80 kernels
// (device). Tested by tests/kernels/linear_prepack_test.cpp (placement is a bijection, unpack inverts prepack)
// and by the GPU tests through the kernels.
//
// A checkpoint word holds 4 code bytes (byte q: low nibble = even k, high nibble = odd k; one f16x2 MMA pair).
// Pair q is moved so that an f16x2 whose half holds sign at bit 15 and the 3 magnitude bits at bits 11..9 comes
// out with one mask: that f16 equals e2m1 * 2^-14 exactly (normal and subnormal cases alike). Per 16-bit half
// (low half = low nibble, high half = high nibble):
//   pair 0: sign 15, magnitude 11..9   -> w & 0x8E008E00
//   pair 1: sign 12, magnitude 8..6    -> (w << 3) & 0x8E008E00
//   pair 2: sign 14, magnitude 5..3    -> ((w & 0x40384038) * 66) & 0x8E008E00  (<<1 and <<6; the one carry
//                                         that can occur stops at bit 23, outside the mask)
//   pair 3: sign 13, magnitude 2..0    -> ((w & 0x20072007) * 516) & 0x8E008E00 (<<2 and <<9, no overlap)
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace voltserve::kernels {

// Bit position, in a placed word, of bit b (0..2 magnitude, 3 sign) of pair q's code for half h (0 low, 1 high).
VS_HD int nvfp4_sm80_bit(int q, int h, int b) {
  const int sign_pos = q == 0 ? 15 : q == 1 ? 12 : q == 2 ? 14 : 13;
  const int mag_base = q == 0 ? 9 : q == 1 ? 6 : q == 2 ? 3 : 0;
  return 16 * h + (b == 3 ? sign_pos : mag_base + b);
}

// Checkpoint word -> placed word.
VS_HD uint32_t nvfp4_sm80_place(uint32_t v) {
  uint32_t out = 0;
  for (int q = 0; q < 4; ++q)
    for (int h = 0; h < 2; ++h)
      for (int b = 0; b < 4; ++b) out |= ((v >> (8 * q + 4 * h + b)) & 1u) << nvfp4_sm80_bit(q, h, b);
  return out;
}

// Placed word -> checkpoint word.
VS_HD uint32_t nvfp4_sm80_unplace(uint32_t v) {
  uint32_t out = 0;
  for (int q = 0; q < 4; ++q)
    for (int h = 0; h < 2; ++h)
      for (int b = 0; b < 4; ++b) out |= ((v >> nvfp4_sm80_bit(q, h, b)) & 1u) << (8 * q + 4 * h + b);
  return out;
}

// f16x2 (low half = even k, high half = odd k) of pair Q of a placed word, each half = e2m1 * 2^-14 exactly.
template <int Q>
VS_HD uint32_t nvfp4_sm80_pair(uint32_t w) {
  constexpr uint32_t kMask = 0x8E008E00u;
  if constexpr (Q == 0) return w & kMask;
  if constexpr (Q == 1) return (w << 3) & kMask;
  if constexpr (Q == 2) return ((w & 0x40384038u) * 66u) & kMask;
  return ((w & 0x20072007u) * 516u) & kMask;
}

}  // namespace voltserve::kernels

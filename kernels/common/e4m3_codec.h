// float8 E4M3FN encoder (round to nearest even, saturation to +-448, NaN kept) and the fast decoder to fp16 bits the
// FP8 KV cache uses on every architecture (sm70 has no FP8 conversion instructions). Integer code only, VS_HD: the
// CPU reference (attention_ref.cpp) and the CUDA kernels share it. Tested in tests/kernels/e4m3_codec_test.cpp on
// all 256 codes and random floats against an independent nearest-value search.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace voltserve::fp {

// NaN -> 0x7F (sign kept); |x| >= 448 (and +-inf) -> +-448 (0x7E): an FP8 KV cache saturates rather than turning an
// outlier into NaN, as vLLM's and TensorRT-LLM's do. Below 2^-6 the e4m3 subnormals m * 2^-9 (m = 0..7; rounding
// up to m = 8 gives the smallest normal, whose code is the same integer).
VS_HD uint8_t float_to_e4m3(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7Fu);
  if (abs >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);  // >= 448.0f
  const uint32_t e = abs >> 23;
  if (e < 121u) {  // |x| < 2^-6: m = round(|x| * 2^9) = round(M * 2^(e - 150 + 9)), M the 24-bit significand
    if (e == 0u) return static_cast<uint8_t>(sign);  // zero and fp32 subnormals (< 2^-126)
    const uint32_t shift = 141u - e;                 // 21 .. 140
    if (shift > 24u) return static_cast<uint8_t>(sign);  // below half the smallest subnormal 2^-9
    const uint32_t m24 = (abs & 0x7FFFFFu) | 0x800000u;
    uint32_t m = m24 >> shift;
    const uint32_t rem = m24 & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return static_cast<uint8_t>(sign | m);
  }
  // Normal: exponent e - 120 in 1..15, the top 3 mantissa bits, round to nearest even on the other 20 (a carry
  // into the exponent is the right next value; below 448 the result never reaches the NaN code 0x7F).
  uint32_t r = ((e - 120u) << 3) | ((abs >> 20) & 0x7u);
  const uint32_t rem = abs & 0xFFFFFu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1u))) ++r;
  return static_cast<uint8_t>(sign | r);
}

// Two e4m3 codes (bits 0-7 and 8-15 of `codes`) to two fp16 values of 1/256 their magnitude (half 0 in bits 0-15):
// e4m3 S.EEEE.MMM read as the half S.0EEEE.MMM0000000 is exactly x / 2^8, normals and subnormals alike (both
// formats' subnormal steps are 2^-3 of their smallest normal), so the caller folds the 256 into its scale. NaN codes
// (S.1111.111) become fp16 NaN. A shift, two masks and an or per code: cheap enough on every architecture.
VS_HD uint32_t e4m3x2_to_half2_div256(uint32_t codes) {
  uint32_t h = ((codes & 0x7Fu) << 7) | ((codes & 0x80u) << 8) | ((codes & 0x7F00u) << 15) | ((codes & 0x8000u) << 16);
  // NaN: a code with its low 7 bits all set; rare, so one test per pair.
  if (((codes & 0x7F7Fu) + 0x0101u) & 0x8080u) {
    if ((codes & 0x7Fu) == 0x7Fu) h |= 0x7E00u;
    if ((codes & 0x7F00u) == 0x7F00u) h |= 0x7E000000u;
  }
  return h;
}

}  // namespace voltserve::fp

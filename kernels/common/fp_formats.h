// Scalar decoders for the low-precision weight formats (MODEL.md §5): E2M1 (NVFP4 codes) and
// float8 E4M3FN (NVFP4 group scales, FP8 weights). Exact: every code maps to its float value.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace voltserve::fp {

// E2M1: bit 3 = sign, bits 0..2 index {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
VS_HD float e2m1_to_float(uint8_t code) {
  const float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 0x7];
  return (code & 0x8) ? -m : m;
}

// float8_e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN; max 448.
VS_HD float e4m3_to_float(uint8_t bits) {
  const uint32_t sign = bits >> 7;
  const uint32_t exponent = (bits >> 3) & 0xF;
  const uint32_t mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = __builtin_nanf("");
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);  // subnormal: m/8 * 2^-6
  } else {
    // (1 + m/8) * 2^(e-7), built exactly from the fp32 bit pattern.
    const uint32_t f32 = ((exponent - 7 + 127) << 23) | (mantissa << 20);
    std::memcpy(&magnitude, &f32, sizeof(magnitude));
  }
  return sign ? -magnitude : magnitude;
}

// bfloat16 / IEEE half to float (host side; checkpoints store these).
inline float bf16_to_float(uint16_t bits) {
  const uint32_t f32 = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &f32, sizeof(out));
  return out;
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
  uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  uint32_t f32;
  if (exponent == 0) {
    if (mantissa == 0) {
      f32 = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3FF;
      f32 = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1F) {
    f32 = sign | 0x7F800000u | (mantissa << 13);
  } else {
    f32 = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &f32, sizeof(out));
  return out;
}

// float to IEEE half, round to nearest even (host side; used by references and tests).
inline uint16_t float_to_f16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {  // subnormal or zero in half
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);
    const uint32_t shift = 113 - (abs >> 23) + 13;  // 14..24
    const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000) >> 13);
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

}  // namespace voltserve::fp
